package bench

import (
	"testing"

	"github.com/sluicemq/sluice/segment"
)

// randomCount is how many precomputed random offsets or timestamps a lookup
// benchmark cycles through (a power of two).
const randomCount = 1 << 16

// BenchmarkOffsetLookup finds the batch holding a random offset in the
// lookup fixture: one segment with a full 10 MiB offset index (1,310,720
// entries, about 100 MB of log). Target: under 1 µs per lookup.
//
//   - Log.Read: Read(offset, maxBytes 1): KIP-74 returns the one batch
//     holding offset, so this is the whole lookup path of a fetch: lock,
//     segment search, index search, reading batch headers from the file.
//     Its peer is a plain pread of one batch header (see preadPeer):
//     pread-ns is that read's time, preads/op Log.Read's in those units.
//   - OffsetIndex.Lookup: the index's binary search alone, on the same
//     index file opened read-only.
func BenchmarkOffsetLookup(b *testing.B) {
	fx := getLookupFixture(b)
	offsets := randomInts(randomCount, fx.batches)

	b.Run("Log.Read", func(b *testing.B) {
		peer := newPreadPeer(fx.file, fx.batches, fx.batchSize)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			off := offsets[i&(randomCount-1)]
			i++
			res, err := fx.log.Read(off, 1, segment.NoUpperBound)
			if err != nil {
				b.Fatal(err)
			}
			if res.FirstOffset != off || res.NextOffset != off+1 {
				b.Fatalf("Read(%d) returned offsets [%d, %d)", off, res.FirstOffset, res.NextOffset)
			}
			peer.interleave(b, i)
		}
		peer.report(b, i)
	})

	b.Run("OffsetIndex.Lookup", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			off := offsets[i&(randomCount-1)]
			i++
			// Every batch but the first has an entry: the entry found is
			// the offset itself.
			if e := fx.offIdx.Lookup(off); e.Offset != off {
				b.Fatalf("Lookup(%d) = %+v", off, e)
			}
		}
	})
}

// BenchmarkTimestampLookup answers ListOffsets by timestamp for random
// timestamps on the lookup fixture, whose timestamps increase (batch i, one
// record at offset i, has timestamp t0 + i/2).
//
//   - Log.OffsetForTimestamp: the whole path: time index, offset index,
//     reading the batch and walking its records. Its peer is preadPeer, as
//     for BenchmarkOffsetLookup/Log.Read.
//   - TimeIndex.Lookup: the time index's binary search alone.
func BenchmarkTimestampLookup(b *testing.B) {
	fx := getLookupFixture(b)
	span := (fx.batches + 1) / 2 // distinct timestamps: t0 .. t0+span-1
	deltas := randomInts(randomCount, span)

	b.Run("Log.OffsetForTimestamp", func(b *testing.B) {
		peer := newPreadPeer(fx.file, fx.batches, fx.batchSize)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := deltas[i&(randomCount-1)]
			i++
			off, ts, ok, err := fx.log.OffsetForTimestamp(fx.t0 + d)
			if err != nil {
				b.Fatal(err)
			}
			// The first record at or after t0+d is batch 2d's.
			if !ok || off != 2*d || ts != fx.t0+d {
				b.Fatalf("OffsetForTimestamp(t0+%d) = %d, t0+%d, %v; want %d, t0+%d", d, off, ts-fx.t0, ok, 2*d, d)
			}
			peer.interleave(b, i)
		}
		peer.report(b, i)
	})

	b.Run("TimeIndex.Lookup", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := deltas[i&(randomCount-1)]
			i++
			// The entry for t0+d is the first batch carrying it, batch 2d,
			// except batch 0, which the time index never holds.
			if e := fx.timeIdx.Lookup(fx.t0 + d); d > 0 && e.Offset != 2*d {
				b.Fatalf("Lookup(t0+%d) = %+v, want offset %d", d, e, 2*d)
			}
		}
	})
}
