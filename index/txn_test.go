package index

import (
	"errors"
	"reflect"
	"testing"
)

func TestTxnIndex(t *testing.T) {
	entries := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 6},
		{ProducerID: 2, FirstOffset: 3, LastOffset: 9, LastStableOffset: 10},
		{ProducerID: 1, FirstOffset: 12, LastOffset: 20, LastStableOffset: 21},
	}
	f := &memFile{noTrace: true}
	ix, err := OpenTxnIndex(f, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range entries {
		if err := ix.Append(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Append(AbortedTxn{ProducerID: 3, FirstOffset: 1, LastOffset: 2}); !errors.Is(err, ErrTxnNotMonotonic) {
		t.Fatalf("out of order append: %v", err)
	}
	if len(f.data) != 3*TxnEntrySize {
		t.Fatalf("file holds %d bytes", len(f.data))
	}

	for _, tc := range []struct {
		name     string
		from, to int64
		want     []int // indexes into entries
	}{
		{"all", 0, 100, []int{0, 1, 2}},
		{"before the first marker", 0, 1, []int{0}},
		{"between", 10, 12, nil},
		{"first record inside", 7, 8, []int{1}},
		{"marker is the start", 9, 10, []int{1}},
		{"past", 21, 30, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []AbortedTxn
			ix.Scan(tc.from, tc.to, func(a AbortedTxn) error { got = append(got, a); return nil })
			var want []AbortedTxn
			for _, i := range tc.want {
				want = append(want, entries[i])
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Scan(%d, %d) = %v, want %v", tc.from, tc.to, got, want)
			}
		})
	}

	// Reopen: the same entries.
	re, err := OpenTxnIndex(f, true)
	if err != nil || re.Torn() || !reflect.DeepEqual(re.Entries(), entries) {
		t.Fatalf("reopened: %v torn %v, %v", re.Entries(), re.Torn(), err)
	}
	// Truncation drops the markers at or above the offset.
	if err := re.TruncateTo(9); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(re.Entries(), entries[:1]) || len(f.data) != TxnEntrySize {
		t.Fatalf("after TruncateTo(9): %v, %d bytes", re.Entries(), len(f.data))
	}
	if err := re.Reset(); err != nil || re.Len() != 0 || len(f.data) != 0 {
		t.Fatalf("after Reset: %d entries, %d bytes, %v", re.Len(), len(f.data), err)
	}
}

func TestTxnIndexTornTail(t *testing.T) {
	good := []AbortedTxn{
		{ProducerID: 7, FirstOffset: 1, LastOffset: 4, LastStableOffset: 5},
		{ProducerID: 8, FirstOffset: 2, LastOffset: 8, LastStableOffset: 9},
	}
	build := func() []byte {
		b := make([]byte, len(good)*TxnEntrySize)
		for i, a := range good {
			a.encode(b[i*TxnEntrySize:])
		}
		return b
	}
	for _, tc := range []struct {
		name string
		tail func(b []byte) []byte
		keep int
		torn bool
	}{
		{"whole", func(b []byte) []byte { return b }, 2, false},
		{"half an entry", func(b []byte) []byte { return append(b, make([]byte, 17)...) }, 2, true},
		{"cut inside the last", func(b []byte) []byte { return b[:TxnEntrySize+10] }, 1, true},
		{"zeroed tail entry", func(b []byte) []byte {
			// version 0 and zero offsets: [0, 0] is below the previous last offset.
			return append(b, make([]byte, TxnEntrySize)...)
		}, 2, true},
		{"bad version", func(b []byte) []byte { b[TxnEntrySize] = 9; return b }, 1, true},
		{"empty", func(b []byte) []byte { return nil }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &memFile{noTrace: true, data: tc.tail(build())}
			ix, err := OpenTxnIndex(f, true)
			if err != nil {
				t.Fatal(err)
			}
			if ix.Len() != tc.keep || ix.Torn() != tc.torn {
				t.Fatalf("kept %d (torn %v), want %d (torn %v)", ix.Len(), ix.Torn(), tc.keep, tc.torn)
			}
			if !reflect.DeepEqual(ix.Entries(), good[:tc.keep]) && tc.keep > 0 {
				t.Fatalf("entries %v", ix.Entries())
			}
			if len(f.data) != tc.keep*TxnEntrySize {
				t.Fatalf("file cut to %d bytes, want %d", len(f.data), tc.keep*TxnEntrySize)
			}
			// Appends continue after the kept entries.
			if err := ix.Append(AbortedTxn{ProducerID: 9, FirstOffset: 10, LastOffset: 11, LastStableOffset: 12}); err != nil {
				t.Fatal(err)
			}
			re, _ := OpenTxnIndex(f, false)
			if re.Len() != tc.keep+1 || re.Torn() {
				t.Fatalf("reopened after append: %d entries, torn %v", re.Len(), re.Torn())
			}
		})
	}
}

// Collect stops at the first entry whose last stable offset reaches the
// bound (Kafka's isComplete); a closed index keeps its entries and
// refuses writes until its file is reattached.
func TestTxnIndexCollectAndClose(t *testing.T) {
	f := &memFile{noTrace: true}
	ix, err := OpenTxnIndex(f, true)
	if err != nil {
		t.Fatal(err)
	}
	a := AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 6}
	b := AbortedTxn{ProducerID: 2, FirstOffset: 1, LastOffset: 9, LastStableOffset: 10}
	for _, e := range []AbortedTxn{a, b} {
		if err := ix.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if got, done := ix.Collect(nil, 0, 6); !reflect.DeepEqual(got, []AbortedTxn{a}) || !done {
		t.Fatalf("Collect(0, 6): %v, complete %v", got, done)
	}
	if got, done := ix.Collect(nil, 0, 20); !reflect.DeepEqual(got, []AbortedTxn{a, b}) || done {
		t.Fatalf("Collect(0, 20): %v, complete %v", got, done)
	}
	if err := ix.Close(); err != nil || ix.HasFile() || ix.Len() != 2 {
		t.Fatalf("Close: %v, file %v, %d entries", err, ix.HasFile(), ix.Len())
	}
	if err := ix.Append(AbortedTxn{ProducerID: 3, FirstOffset: 10, LastOffset: 11}); err == nil {
		t.Fatal("Append on a closed index")
	}
	ix.Reattach(f)
	if err := ix.TruncateTo(9); err != nil || ix.Len() != 1 || len(f.data) != TxnEntrySize {
		t.Fatalf("TruncateTo(9) after Reattach: %v, %d entries, %d bytes", err, ix.Len(), len(f.data))
	}
}
