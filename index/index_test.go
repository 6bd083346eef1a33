package index

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestDefaultMaxBytes(t *testing.T) {
	f := &memFile{}
	if _, err := OpenOffsetIndex(f, 0, 0, true); err != nil {
		t.Fatal(err)
	}
	if got := len(f.data); got != 10485760 {
		t.Fatalf("offset index preallocated to %d bytes, want 10485760", got)
	}
	f = &memFile{}
	if _, err := OpenTimeIndex(f, 0, -1, true); err != nil {
		t.Fatal(err)
	}
	if got := len(f.data); got != 10485760/12*12 {
		t.Fatalf("time index preallocated to %d bytes, want %d", got, 10485760/12*12)
	}
}

func TestNegativeBase(t *testing.T) {
	if _, err := OpenOffsetIndex(&memFile{}, -1, 64, true); err == nil {
		t.Fatal("offset index: want error for a negative base offset")
	}
	if _, err := OpenTimeIndex(&memFile{}, -1, 64, true); err == nil {
		t.Fatal("time index: want error for a negative base offset")
	}
}

func TestSentinels(t *testing.T) {
	ix, err := OpenOffsetIndex(&memFile{}, 10, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		pos  uint32
		want error
	}{
		{10, 0, ErrNotMonotonic},
		{9, 1, ErrOffsetOutOfRange},
		{10 + 1<<32, 1, ErrOffsetOutOfRange},
		{10 + 1<<32 - 1, 1, nil},
		{10 + 1<<32 - 1, 2, ErrNotMonotonic},
	} {
		if err := ix.Append(c.off, c.pos); !errors.Is(err, c.want) {
			t.Errorf("Append(%d, %d) = %v, want %v", c.off, c.pos, err, c.want)
		}
	}
	if !ix.IsFull() {
		t.Fatal("want full")
	}
	// The largest relative offset survives a round trip.
	if got := ix.Lookup(1 << 62); got != (OffsetEntry{10 + 1<<32 - 1, 1}) {
		t.Fatalf("Lookup = %+v", got)
	}

	tx, err := OpenTimeIndex(&memFile{}, 10, 12, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(5, 20); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(6, 19); !errors.Is(err, ErrNotMonotonic) {
		t.Fatalf("got %v, want ErrNotMonotonic", err)
	}
	if err := tx.Append(6, 21); !errors.Is(err, ErrFull) {
		t.Fatalf("got %v, want ErrFull", err)
	}
}

func TestEntryOutOfRangePanics(t *testing.T) {
	ix, err := OpenOffsetIndex(&memFile{}, 0, 64, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "index: invariant broken: entry 0 out of range") {
			t.Fatalf("recovered %v", r)
		}
	}()
	ix.Entry(0)
}

// TestAppendDoesNoIO checks that appends stay in memory and a flush writes
// them all with one WriteAt.
func TestAppendDoesNoIO(t *testing.T) {
	f := &memFile{}
	ix, err := OpenOffsetIndex(f, 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	tf := &memFile{}
	tx, err := OpenTimeIndex(tf, 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	f.takeTrace()
	tf.takeTrace()
	for i := range 1000 {
		if err := ix.Append(int64(i), uint32(i+1)*100); err != nil {
			t.Fatal(err)
		}
		if err := tx.Append(int64(i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if tr := append(f.takeTrace(), tf.takeTrace()...); len(tr) != 0 {
		t.Fatalf("appends did I/O: %v", tr)
	}
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Flush(); err != nil {
		t.Fatal(err)
	}
	if tr := f.takeTrace(); !slices.Equal(tr, []string{"WriteAt(off=0, n=8000)"}) {
		t.Fatalf("offset flush trace %v", tr)
	}
	if tr := tf.takeTrace(); !slices.Equal(tr, []string{"WriteAt(off=0, n=12000)"}) {
		t.Fatalf("time flush trace %v", tr)
	}
}

// fullOffsetIndex returns a writable offset index holding maxBytes of
// entries.
func fullOffsetIndex(tb testing.TB, maxBytes int) *OffsetIndex {
	ix, err := OpenOffsetIndex(&memFile{}, 1000, maxBytes, true)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; !ix.IsFull(); i++ {
		if err := ix.Append(1000+int64(i)*3, uint32(i+1)*1024); err != nil {
			tb.Fatal(err)
		}
	}
	return ix
}

func fullTimeIndex(tb testing.TB, maxBytes int) *TimeIndex {
	ix, err := OpenTimeIndex(&memFile{}, 1000, maxBytes, true)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; !ix.IsFull(); i++ {
		if err := ix.Append(1_700_000_000_000+int64(i)*7, 1000+int64(i)*3); err != nil {
			tb.Fatal(err)
		}
	}
	return ix
}

func TestLookupDoesNotAllocate(t *testing.T) {
	ix := fullOffsetIndex(t, 1<<16)
	tx := fullTimeIndex(t, 1<<16)
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		sink += ix.Lookup(5000).Offset
		sink += ix.LookupPosition(40000).Offset
		sink += tx.Lookup(1_700_000_000_500).Offset
		sink += ix.Last().Offset + tx.Last().Offset
	})
	if allocs != 0 {
		t.Fatalf("lookups allocate: %v allocs per run", allocs)
	}
	_ = sink
}

// TestModel drives both indexes with random operations and checks them
// against a model, including what a reopen finds on file: the entries as of
// the last flush, never an entry dropped before that flush.
func TestModel(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		runModel(t, rng, "offset")
		runModel(t, rng, "time")
	}
}

// modelIndex is what the model test needs from either index, with entries
// as (a, b) pairs: (offset, position) or (timestamp, offset).
type modelIndex struct {
	append  func(a, b int64) error
	entries func() [][2]int64
	trunc   func(off int64)
	reset   func()
	flush   func() error
	trim    func() error
	isFull  func() bool
}

func openModel(t *testing.T, kind string, f *memFile, maxBytes int) modelIndex {
	if kind == "time" {
		ix, err := OpenTimeIndex(f, 100, maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		return modelIndex{
			append: func(a, b int64) error { return ix.Append(a, b) },
			entries: func() [][2]int64 {
				var out [][2]int64
				for i := range ix.Len() {
					e := ix.Entry(i)
					out = append(out, [2]int64{e.Timestamp, e.Offset})
				}
				return out
			},
			trunc: ix.TruncateTo, reset: ix.Reset, flush: ix.Flush, trim: ix.Trim, isFull: ix.IsFull,
		}
	}
	ix, err := OpenOffsetIndex(f, 100, maxBytes, true)
	if err != nil {
		t.Fatal(err)
	}
	return modelIndex{
		append: func(a, b int64) error { return ix.Append(a, uint32(b)) },
		entries: func() [][2]int64 {
			var out [][2]int64
			for i := range ix.Len() {
				e := ix.Entry(i)
				out = append(out, [2]int64{e.Offset, int64(e.Position)})
			}
			return out
		},
		trunc: ix.TruncateTo, reset: ix.Reset, flush: ix.Flush, trim: ix.Trim, isFull: ix.IsFull,
	}
}

func runModel(t *testing.T, rng *rand.Rand, kind string) {
	f := &memFile{}
	maxBytes := 8 * 12 * (1 + rng.IntN(8))
	ix := openModel(t, kind, f, maxBytes)
	var model, onFile [][2]int64
	// offsetOf gives the offset field of a model entry.
	offsetOf := func(e [2]int64) int64 {
		if kind == "time" {
			return e[1]
		}
		return e[0]
	}
	for step := range 300 {
		switch op := rng.IntN(20); {
		case op < 12: // append, usually in order
			// Start after the empty index's last entry: offset 100 at
			// position 0, or timestamp 1 (never 0, the lone zero entry edge
			// case) at offset 100.
			a, b := int64(100), int64(0)
			if kind == "time" {
				a, b = 2, 100
			}
			if n := len(model); n > 0 {
				a, b = model[n-1][0], model[n-1][1]
			}
			a += int64(rng.IntN(5)) - 1
			b = max(0, b+int64(rng.IntN(5))-1)
			full := ix.isFull()
			err := ix.append(a, b)
			want := kind == "offset" && (len(model) == 0 && b > 0 && a >= 100 ||
				len(model) > 0 && a > model[len(model)-1][0] && b > model[len(model)-1][1])
			if kind == "time" {
				lastTS, lastOff := int64(-1), int64(100)
				if n := len(model); n > 0 {
					lastTS, lastOff = model[n-1][0], model[n-1][1]
				}
				want = b >= lastOff && a > lastTS
				if b < lastOff && err == nil {
					t.Fatalf("%s step %d: append(%d, %d) accepted before offset %d", kind, step, a, b, lastOff)
				}
				if b >= lastOff && a <= lastTS && err != nil {
					t.Fatalf("%s step %d: append(%d, %d) = %v, want ignored", kind, step, a, b, err)
				}
			}
			if want && full {
				if !errors.Is(err, ErrFull) {
					t.Fatalf("%s step %d: append(%d, %d) on a full index = %v", kind, step, a, b, err)
				}
				want = false
			}
			if want {
				if err != nil {
					t.Fatalf("%s step %d: append(%d, %d) = %v", kind, step, a, b, err)
				}
				model = append(model, [2]int64{a, b})
			} else if err == nil && kind == "offset" {
				t.Fatalf("%s step %d: append(%d, %d) accepted", kind, step, a, b)
			}
		case op < 14:
			off := int64(100 + rng.IntN(40))
			ix.trunc(off)
			for len(model) > 0 && offsetOf(model[len(model)-1]) >= off {
				model = model[:len(model)-1]
			}
		case op < 15:
			ix.reset()
			model = nil
		case op < 18:
			if err := ix.flush(); err != nil {
				t.Fatal(err)
			}
			onFile = slices.Clone(model)
		case op < 19: // crash: reopen what is on file
			ix = openModel(t, kind, f, maxBytes)
			model = slices.Clone(onFile)
		default:
			if rng.IntN(4) == 0 {
				if err := ix.trim(); err != nil {
					t.Fatal(err)
				}
				onFile = slices.Clone(model)
				if len(f.data) != len(model)*map[string]int{"offset": 8, "time": 12}[kind] {
					t.Fatalf("%s step %d: trimmed file has %d bytes for %d entries", kind, step, len(f.data), len(model))
				}
				// Reopen so the index can grow again.
				ix = openModel(t, kind, f, maxBytes)
			}
		}
		if got := ix.entries(); !slices.Equal(got, model) {
			t.Fatalf("%s step %d: entries\n got %v\nwant %v", kind, step, got, model)
		}
	}
}
