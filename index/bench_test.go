package index

import (
	"testing"
)

// The lookup benchmarks search a full index of the default size (10 MiB:
// 1,310,720 offset entries or 873,813 time entries).

func BenchmarkOffsetLookup(b *testing.B) {
	ix := fullOffsetIndex(b, DefaultMaxBytes)
	last := ix.Last().Offset
	b.ReportAllocs()
	var sink int64
	i := int64(0)
	for b.Loop() {
		i = (i + 7919) % (last - 1000)
		sink += ix.Lookup(1000 + i).Offset
	}
	_ = sink
}

func BenchmarkTimeLookup(b *testing.B) {
	ix := fullTimeIndex(b, DefaultMaxBytes)
	first, last := ix.Entry(0).Timestamp, ix.Last().Timestamp
	b.ReportAllocs()
	var sink int64
	i := int64(0)
	for b.Loop() {
		i = (i + 7919) % (last - first)
		sink += ix.Lookup(first + i).Offset
	}
	_ = sink
}

// BenchmarkOffsetAppend appends and flushes every 64 entries, as a segment
// writing batches of a few KiB would between syncs.
func BenchmarkOffsetAppend(b *testing.B) {
	b.SetBytes(OffsetEntrySize)
	b.ReportAllocs()
	var ix *OffsetIndex
	n := 0
	for b.Loop() {
		if ix == nil || ix.IsFull() {
			var err error
			if ix, err = OpenOffsetIndex(&memFile{noTrace: true}, 0, 1<<20, true); err != nil {
				b.Fatal(err)
			}
			n = 0
		}
		n++
		if err := ix.Append(int64(n), uint32(n)*4096); err != nil {
			b.Fatal(err)
		}
		if n%64 == 0 {
			if err := ix.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
