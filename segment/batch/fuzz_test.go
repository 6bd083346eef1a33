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
