package batch

import (
	"errors"
	"testing"
)

func TestInternalBatch(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("conf change")} {
		b := BuildInternal(42, 7, 3, data)
		h, err := ValidateHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Internal() || !h.Control() || h.BaseOffset != 42 || h.NextOffset() != 42 || h.LastOffset() != 41 || h.PartitionLeaderEpoch != 7 || h.MaxTimestamp != -1 {
			t.Fatalf("header %+v", h)
		}
		_, kind, got, err := ParseInternal(b)
		if err != nil || kind != 3 || string(got) != string(data) {
			t.Fatalf("parse: kind %d data %q %v", kind, got, err)
		}
		// A producer's validation refuses it: bit 7 is Sluice's.
		if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Validate of an internal batch: %v", err)
		}
		// The term outside the CRC must match the one inside it.
		SetPartitionLeaderEpoch(b, 8)
		if _, _, _, err := ParseInternal(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a changed term: %v", err)
		}
	}
	// Bit 7 without the control bit is corrupt; a plain batch is not
	// internal.
	b := Build(NewBuildOptions(), []Record{{Value: []byte("v")}})
	if h, _ := ParseHeader(b); h.Internal() {
		t.Fatal("a data batch reads as internal")
	}
	b[OffAttributes+1] |= InternalBit
	b[OffCRC], b[OffCRC+1], b[OffCRC+2], b[OffCRC+3] = byte(Checksum(b)>>24), byte(Checksum(b)>>16), byte(Checksum(b)>>8), byte(Checksum(b))
	if _, err := ValidateHeader(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bit 7 without the control bit: %v", err)
	}
	if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Validate with bit 7: %v", err)
	}
}
