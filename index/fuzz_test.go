package index

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzOpen feeds arbitrary file contents to both Open functions. They must
// not panic, must load entries that are in order, and, when writable, must
// leave a file that a reopen reads back to the same entries.
func FuzzOpen(f *testing.F) {
	be := binary.BigEndian
	f.Add([]byte{}, uint32(0), true)
	f.Add(make([]byte, 64), uint32(5), true)
	f.Add(be.AppendUint32(be.AppendUint32(be.AppendUint32(be.AppendUint32(nil, 1), 100), 2), 200), uint32(7), false)
	f.Add(be.AppendUint32(be.AppendUint64(be.AppendUint32(be.AppendUint64(nil, 0), 0), 10), 1), uint32(0), true)
	f.Add(bytes.Repeat([]byte{0xff}, 37), uint32(1<<31), true)
	f.Fuzz(func(t *testing.T, data []byte, base uint32, writable bool) {
		checkOffsetOpen(t, data, int64(base), writable)
		checkTimeOpen(t, data, int64(base), writable)
	})
}

func checkOffsetOpen(t *testing.T, data []byte, base int64, writable bool) {
	f := &memFile{data: bytes.Clone(data)}
	ix, err := OpenOffsetIndex(f, base, 256, writable)
	if err != nil {
		t.Fatal(err)
	}
	var got []OffsetEntry
	for i := range ix.Len() {
		e := ix.Entry(i)
		if e.Position == 0 || i > 0 && (e.Offset <= got[i-1].Offset || e.Position <= got[i-1].Position) {
			t.Fatalf("entry %d %+v breaks the order after %+v", i, e, got)
		}
		if l := ix.Lookup(e.Offset); l != e {
			t.Fatalf("Lookup(%d) = %+v, want %+v", e.Offset, l, e)
		}
		if l := ix.LookupPosition(e.Position); l != e {
			t.Fatalf("LookupPosition(%d) = %+v, want %+v", e.Position, l, e)
		}
		got = append(got, e)
	}
	if !bytes.Equal(f.data[:ix.SizeBytes()], data[:ix.SizeBytes()]) {
		t.Fatal("loaded entries are not a prefix of the file")
	}
	if !writable {
		if !bytes.Equal(f.data, data) {
			t.Fatal("read-only open changed the file")
		}
		return
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix2, err := OpenOffsetIndex(f, base, 256, false)
	if err != nil {
		t.Fatal(err)
	}
	if ix2.Len() != len(got) {
		t.Fatalf("reopen found %d entries, want %d", ix2.Len(), len(got))
	}
}

func checkTimeOpen(t *testing.T, data []byte, base int64, writable bool) {
	f := &memFile{data: bytes.Clone(data)}
	ix, err := OpenTimeIndex(f, base, 256, writable)
	if err != nil {
		t.Fatal(err)
	}
	var got []TimeEntry
	for i := range ix.Len() {
		e := ix.Entry(i)
		if e.Timestamp < 0 || i > 0 && (e.Timestamp <= got[i-1].Timestamp || e.Offset < got[i-1].Offset) {
			t.Fatalf("entry %d %+v breaks the order after %+v", i, e, got)
		}
		if l := ix.Lookup(e.Timestamp); l != e {
			t.Fatalf("Lookup(%d) = %+v, want %+v", e.Timestamp, l, e)
		}
		got = append(got, e)
	}
	if !writable {
		if !bytes.Equal(f.data, data) {
			t.Fatal("read-only open changed the file")
		}
		return
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix2, err := OpenTimeIndex(f, base, 256, false)
	if err != nil {
		t.Fatal(err)
	}
	if ix2.Len() != len(got) {
		t.Fatalf("reopen found %d entries, want %d", ix2.Len(), len(got))
	}
}
