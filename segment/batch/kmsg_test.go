package batch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The tests here check this package against franz-go, an independent
// implementation: kmsg for the batch and record encoding, kgo for the
// codecs and their framing.

// kmsgRecords encodes recs with kmsg.Record, deltas relative to base.
func kmsgRecords(recs []Record, base int64) []byte {
	var out []byte
	for i, r := range recs {
		kr := kmsg.Record{
			Attributes:       r.Attributes,
			TimestampDelta64: r.Timestamp - base,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // a zero Length encodes in one byte
		out = kr.AppendTo(out)
	}
	return out
}

// kmsgBatch wraps an encoded (possibly compressed) records section in a
// kmsg.RecordBatch, computing length and CRC the way a client does.
func kmsgBatch(opts BuildOptions, codec Codec, base, maxTS int64, n int, records []byte) []byte {
	attrs := int16(codec)
	if opts.LogAppendTime {
		attrs |= TimestampTypeBit
	}
	if opts.Transactional {
		attrs |= TransactionalBit
	}
	if opts.Control {
		attrs |= ControlBit
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          opts.BaseOffset,
		PartitionLeaderEpoch: opts.LeaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       base,
		MaxTimestamp:         maxTS,
		ProducerID:           opts.ProducerID,
		ProducerEpoch:        opts.ProducerEpoch,
		FirstSequence:        opts.BaseSequence,
		NumRecords:           int32(n),
		Records:              records,
	}
	rb.Length = int32(len(rb.AppendTo(nil)) - 12)
	b := rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func maxTimestamp(recs []Record) int64 {
	m := int64(-1)
	for _, r := range recs {
		m = max(m, r.Timestamp)
	}
	return m
}

func buildOptionVariants() map[string]BuildOptions {
	plain := NewBuildOptions()
	idem := NewBuildOptions()
	idem.BaseOffset, idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence, idem.LeaderEpoch = 1000, 12345, 3, 77, 9
	txn := idem
	txn.Transactional = true
	ctl := txn
	ctl.Control = true
	lat := NewBuildOptions()
	lat.LogAppendTime = true
	zero := BuildOptions{BaseTimestamp: 42}
	return map[string]BuildOptions{"plain": plain, "idempotent": idem, "transactional": txn, "control": ctl, "logappendtime": lat, "zero": zero}
}

func TestBuildMatchesKmsg(t *testing.T) {
	const base = 1_700_000_000_000
	for name, opts := range buildOptionVariants() {
		t.Run(name, func(t *testing.T) {
			recs := sampleRecords(base)
			bts := opts.BaseTimestamp
			if bts == 0 {
				bts = base
			}
			ours := Build(opts, recs)
			theirs := kmsgBatch(opts, CodecNone, bts, maxTimestamp(recs), len(recs), kmsgRecords(recs, bts))
			if !bytes.Equal(ours, theirs) {
				t.Fatalf("Build differs from kmsg:\nours   %x\ntheirs %x", ours, theirs)
			}

			// We decode kmsg's batch.
			h, got, err := Records(theirs)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, h, got, recs)
			if _, err := Validate(theirs); err != nil {
				t.Fatal(err)
			}

			// kmsg decodes ours.
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(ours); err != nil {
				t.Fatal(err)
			}
			if rb.FirstOffset != opts.BaseOffset || rb.PartitionLeaderEpoch != opts.LeaderEpoch || rb.Magic != 2 ||
				uint32(rb.CRC) != Checksum(ours) || rb.LastOffsetDelta != int32(len(recs)-1) ||
				rb.FirstTimestamp != bts || rb.MaxTimestamp != maxTimestamp(recs) ||
				rb.ProducerID != opts.ProducerID || rb.ProducerEpoch != opts.ProducerEpoch ||
				rb.FirstSequence != opts.BaseSequence || rb.NumRecords != int32(len(recs)) {
				t.Fatalf("kmsg read header %+v", rb)
			}
			if int(rb.Length) != len(ours)-12 || h.Attributes != rb.Attributes {
				t.Fatalf("length %d attrs %d, ours %d %d", rb.Length, rb.Attributes, len(ours)-12, h.Attributes)
			}
			src := rb.Records
			for i, want := range recs {
				l, n := varint(src)
				var kr kmsg.Record
				if err := kr.ReadFrom(src[:n+int(l)]); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				src = src[n+int(l):]
				if kr.OffsetDelta != int32(i) || bts+kr.TimestampDelta64 != want.Timestamp || kr.Attributes != want.Attributes {
					t.Errorf("record %d: %+v", i, kr)
				}
				sameBytes(t, "kmsg key", kr.Key, want.Key)
				sameBytes(t, "kmsg value", kr.Value, want.Value)
				if len(kr.Headers) != len(want.Headers) {
					t.Fatalf("record %d: %d headers", i, len(kr.Headers))
				}
				for j, wh := range want.Headers {
					if kr.Headers[j].Key != wh.Key {
						t.Errorf("record %d header %d key %q", i, j, kr.Headers[j].Key)
					}
					sameBytes(t, "kmsg header value", kr.Headers[j].Value, wh.Value)
				}
			}
			if len(src) != 0 {
				t.Fatalf("%d bytes left after the records", len(src))
			}
		})
	}
}

func kgoCodec(c Codec) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLZ4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// TestKgoCompressedBatches decodes batches whose records kgo compressed
// (raw snappy among them), and has kgo decode what Compress produces
// (xerial snappy among them).
func TestKgoCompressedBatches(t *testing.T) {
	const base = 1_700_000_000_000
	recs := append(sampleRecords(base), sampleRecords(base+10)...)
	raw := kmsgRecords(recs, base)
	dec := kgo.DefaultDecompressor()
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			comp, err := kgo.DefaultCompressor(kgoCodec(c))
			if err != nil {
				t.Fatal(err)
			}
			out, used := comp.Compress(new(bytes.Buffer), raw)
			if used != kgo.CompressionCodecType(c) {
				t.Fatalf("kgo used codec %d", used)
			}
			b := kmsgBatch(NewBuildOptions(), c, base, maxTimestamp(recs), len(recs), bytes.Clone(out))
			h, err := Validate(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec() != c {
				t.Fatalf("codec %v", h.Codec())
			}
			h, got, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, h, got, recs)

			ours, err := Compress(c, raw)
			if err != nil {
				t.Fatal(err)
			}
			back, err := dec.Decompress(ours, kgo.CompressionCodecType(c))
			if err != nil {
				t.Fatalf("kgo cannot decompress ours: %v", err)
			}
			if !bytes.Equal(back, raw) {
				t.Fatal("kgo decompressed ours to different bytes")
			}
			if c == CodecSnappy && !bytes.HasPrefix(ours, xerialMagic) {
				t.Fatal("snappy output is not xerial-framed")
			}
		})
	}
}

// xerialFrame frames src as the Java client does, with small blocks so that
// several of them are exercised.
func xerialFrame(src []byte, block int) []byte {
	out := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	for len(src) > 0 {
		n := min(block, len(src))
		enc := s2.EncodeSnappy(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
		src = src[n:]
	}
	return out
}

func TestXerialSnappy(t *testing.T) {
	const base = 1_700_000_000_000
	recs := sampleRecords(base)
	raw := kmsgRecords(recs, base)
	for _, block := range []int{1, 7, 100, 1 << 15} {
		framed := xerialFrame(raw, block)
		back, err := Decompress(CodecSnappy, framed)
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("block %d: %v", block, err)
		}
		b := kmsgBatch(NewBuildOptions(), CodecSnappy, base, maxTimestamp(recs), len(recs), framed)
		h, got, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, h, got, recs)
	}
	// Only the header: no records.
	if out, err := Decompress(CodecSnappy, xerialFrame(nil, 1)); err != nil || len(out) != 0 {
		t.Fatalf("empty xerial: %q %v", out, err)
	}
	// Broken framing.
	framed := xerialFrame(raw, 100)
	for name, bad := range map[string][]byte{
		"truncated length": framed[:xerialHeaderSize+2],
		"block too long":   append(framed[:xerialHeaderSize:xerialHeaderSize], 0, 0, 1, 0, 1, 2),
		"cut mid block":    framed[:len(framed)-3],
	} {
		if _, err := Decompress(CodecSnappy, bad); !isCorrupt(err) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
