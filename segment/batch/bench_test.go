package batch

import (
	"math/rand/v2"
	"testing"
)

// benchBatch is a 16 KiB batch of sixteen 1 KiB records.
func benchBatch(c Codec) []byte {
	rng := rand.New(rand.NewPCG(7, 8))
	opts := NewBuildOptions()
	opts.Codec = c
	return Build(opts, randomRecords(rng, 16, 1024, 1_700_000_000_000))
}

// BenchmarkValidate reports bytes of batch (compressed size for codecs)
// per second. Compare within one run: "header" is the CRC-only peer, so
// Validate/header is the price of walking the records.
func BenchmarkValidate(b *testing.B) {
	plain := benchBatch(CodecNone)
	b.Run("header", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ValidateHeader(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range allCodecs {
		bt := benchBatch(c)
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(bt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	plain := benchBatch(CodecNone)
	b.Run("Records", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := Records(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Iterate", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Iterate(plain, func(*Record) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBuild(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	recs := randomRecords(rng, 16, 1024, 1_700_000_000_000)
	size := len(Build(NewBuildOptions(), recs))
	for _, c := range allCodecs {
		opts := NewBuildOptions()
		opts.Codec = c
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				Build(opts, recs)
			}
		})
	}
}
