package batch

import (
	"bytes"
	"testing"
)

func TestRebuild(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecZstd} {
		opts := NewBuildOptions()
		opts.Codec, opts.BaseOffset, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = codec, 100, 7, 1, 40
		recs := []Record{
			{Timestamp: 1000, Key: []byte("a"), Value: []byte("1")},
			{Timestamp: 1005, Key: []byte("b"), Value: []byte("2")},
			{Timestamp: 1003, Key: []byte("c"), Value: nil},
		}
		b := Build(opts, recs)
		h, got, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Rebuild(h, []Record{got[0], got[2]}, 5000)
		if err != nil {
			t.Fatal(err)
		}
		nh, kept, err := Records(out)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if nh.BaseOffset != 100 || nh.LastOffsetDelta != 2 || nh.NumRecords != 2 || nh.ProducerID != 7 || nh.BaseSequence != 40 ||
			!nh.HasDeleteHorizon() || nh.BaseTimestamp != 5000 || nh.MaxTimestamp != 1003 || nh.Codec() != codec {
			t.Fatalf("%s: header %+v", codec, nh)
		}
		if kept[0].Offset != 100 || kept[1].Offset != 102 || kept[0].Timestamp != 1000 || kept[1].Timestamp != 1003 ||
			!bytes.Equal(kept[0].Value, []byte("1")) || kept[1].Value != nil {
			t.Fatalf("%s: records %+v", codec, kept)
		}
		// Clearing the horizon; then an empty header.
		out, err = Rebuild(nh, kept[:1], -1)
		if err != nil {
			t.Fatal(err)
		}
		if nh2, kept2, err := Records(out); err != nil || nh2.HasDeleteHorizon() || nh2.BaseTimestamp != 1000 || kept2[0].Timestamp != 1000 {
			t.Fatalf("%s: %+v %+v %v", codec, nh2, kept2, err)
		}
		out, err = Rebuild(h, nil, -1)
		if err != nil {
			t.Fatal(err)
		}
		eh, err := ValidateHeader(out)
		if err != nil || eh.NumRecords != 0 || eh.LastOffset() != 102 || eh.MaxTimestamp != h.MaxTimestamp || eh.Codec() != CodecNone {
			t.Fatalf("%s: empty %+v %v", codec, eh, err)
		}
	}
}
