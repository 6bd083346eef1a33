package batch

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzValidate feeds arbitrary bytes to every decoding entry point, which
// must never panic and must report failures as ErrCorrupt. Each input is
// also tried with its length and CRC repaired, so that mutations reach the
// record walk and the decompressors instead of stopping at the CRC.
func FuzzValidate(f *testing.F) {
	for _, c := range allCodecs {
		opts := NewBuildOptions()
		opts.Codec = c
		f.Add(Build(opts, sampleRecords(1_700_000_000_000)))
		f.Add(Build(opts, nil))
	}
	f.Add(assemble(CodecNone, 3, 9, rawRecords(1, 4, 9)))
	f.Add(assemble(CodecSnappy, 1, 0, xerialFrame(rawRecords(0), 4)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		if len(b) >= HeaderSize {
			check(t, fixup(bytes.Clone(b)))
		}
	})
}

func check(t *testing.T, b []byte) {
	defer func(old int) { MaxDecompressedBytes = old }(MaxDecompressedBytes)
	MaxDecompressedBytes = 1 << 20 // keep the fuzzer's memory in check

	_, _ = ParseHeader(b)
	_ = CRCValid(b)
	_ = Checksum(b)
	h, err := Validate(b)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Validate: error not ErrCorrupt: %v", err)
	}
	_, herr := ValidateHeader(b)
	if herr != nil && !errors.Is(herr, ErrCorrupt) {
		t.Fatalf("ValidateHeader: error not ErrCorrupt: %v", herr)
	}
	if err == nil && herr != nil {
		t.Fatalf("Validate passed, ValidateHeader failed: %v", herr)
	}
	_, recs, rerr := Records(b)
	if rerr != nil && !errors.Is(rerr, ErrCorrupt) {
		t.Fatalf("Records: error not ErrCorrupt: %v", rerr)
	}
	n := 0
	_, ierr := Iterate(b, func(*Record) error { n++; return nil })
	if (ierr == nil) != (rerr == nil) {
		t.Fatalf("Iterate %v, Records %v", ierr, rerr)
	}
	if err != nil {
		return
	}
	// A valid batch decodes to recordCount consecutive records.
	if rerr != nil || len(recs) != int(h.NumRecords) || n != len(recs) {
		t.Fatalf("valid batch: Records %v with %d records, Iterate %d, recordCount %d", rerr, len(recs), n, h.NumRecords)
	}
	for i, r := range recs {
		if r.Offset != h.BaseOffset+int64(i) {
			t.Fatalf("record %d at offset %d", i, r.Offset)
		}
	}
	// SetLogAppendTime keeps it valid.
	c := bytes.Clone(b)
	SetLogAppendTime(c, 77)
	if _, err := Validate(c); err != nil {
		t.Fatalf("after SetLogAppendTime: %v", err)
	}
}

// FuzzStreamAgrees: the streaming check of gzip and lz4 records
// (walkStream, with parseBigRecord for records past its window) accepts
// exactly what the in-memory check (walkAll) accepts, with the same
// largest timestamp. The input is the records section and a record
// count; small windows are not needed: a record over 64 KiB is made by
// repeating the input.
func FuzzStreamAgrees(f *testing.F) {
	good := Build(NewBuildOptions(), []Record{{Timestamp: 5, Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{{Key: "h", Value: nil}}}, {Timestamp: 9}})
	f.Add(good[HeaderSize:], int32(2), uint8(0))
	big := Build(NewBuildOptions(), []Record{{Timestamp: 1, Value: make([]byte, 70<<10), Headers: []RecordHeader{{Key: "a", Value: []byte("b")}}}})
	f.Add(big[HeaderSize:], int32(1), uint8(0))
	f.Add([]byte{0x02, 0, 0, 0, 0, 0, 0}, int32(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, count int32, pad uint8) {
		if count < 0 || count > 1<<16 {
			return
		}
		// pad > 0 grows the first record's value past the window when
		// data starts like a record with an empty value.
		if pad > 0 && len(data) > 0 {
			data = append(data[:len(data):len(data)], make([]byte, int(pad)<<10)...)
		}
		h := Header{NumRecords: count, LastOffsetDelta: count - 1, BaseTimestamp: 100}
		want, wantErr := walkAll(&h, data)
		for _, c := range []Codec{CodecGzip, CodecLZ4} {
			comp, err := Compress(c, data)
			if err != nil {
				t.Fatal(err)
			}
			hc := h
			hc.Attributes = int16(c)
			got, err := walkStream(&hc, comp)
			if (err == nil) != (wantErr == nil) || (err == nil && got != want) {
				t.Fatalf("%s: stream %d, %v; in memory %d, %v", c, got, err, want, wantErr)
			}
		}
	})
}
