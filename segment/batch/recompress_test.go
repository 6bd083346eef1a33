package batch

import (
	"bytes"
	"testing"
)

func TestRecompress(t *testing.T) {
	recs := []Record{{Timestamp: 5, Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 300)}, {Timestamp: 6, Value: nil}}
	for _, from := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		for _, to := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
			opts := NewBuildOptions()
			opts.Codec = from
			b := Build(opts, recs)
			out, err := Recompress(b, to)
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			h, got, err := Records(out)
			if err != nil || h.Codec() != to || len(got) != 2 || !bytes.Equal(got[0].Value, recs[0].Value) || got[1].Value != nil {
				t.Fatalf("%s -> %s: codec %s, %d records, %v", from, to, h.Codec(), len(got), err)
			}
			if _, err := Validate(out); err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
		}
	}
}
