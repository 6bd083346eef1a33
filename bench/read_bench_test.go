package bench

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
)

// BenchmarkRead reads the read fixture (256 MiB of appendBatch batches in
// one segment, in the page cache) front to back, 1 MiB (readMaxBytes) per
// Read, wrapping around at the end; one op is one read. Every read returns
// the same whole number of batches (63, about 1 MB), which is what MB/s
// counts.
//
//   - copy: ReadBytes into a reused buffer. The peer is one pread of as
//     many bytes from the segment's file into a reused buffer, interleaved
//     with the log's reads outside the benchmark timer: plain-MB/s is its
//     bandwidth and ratio the log's MB/s over it. The peer's cursor runs
//     half the file ahead of the log's, so neither reads bytes the other
//     just pulled into the CPU caches.
//   - ranges: Read alone, resolving the file ranges a sendfile fetch would
//     send without touching the data: its ns/op is the lookup overhead a
//     read pays on top of moving the bytes. Its peer is preadPeer (one
//     batch header read), as for BenchmarkOffsetLookup.
func BenchmarkRead(b *testing.B) {
	fx := getReadFixture(b)
	perRead := readMaxBytes / fx.batchSize // batches per read
	readBytes := perRead * fx.batchSize
	records := perRead * recordsPerBatch
	leo := fx.batches * recordsPerBatch
	// next advances a read cursor, wrapping around when fewer than
	// perRead batches are left.
	next := func(offset int64) int64 {
		if offset+records > leo {
			return 0
		}
		return offset
	}
	check := func(b *testing.B, res segment.ReadResult, offset int64) {
		if res.Bytes != readBytes || res.FirstOffset != offset || res.NextOffset != offset+records {
			b.Fatalf("Read(%d) returned %d bytes, offsets [%d, %d); want %d bytes, [%d, %d)",
				offset, res.Bytes, res.FirstOffset, res.NextOffset, readBytes, offset, offset+records)
		}
	}

	b.Run("copy", func(b *testing.B) {
		dst := make([]byte, 0, readBytes)
		plainBuf := make([]byte, readBytes)
		var plainTime time.Duration
		b.SetBytes(readBytes)
		b.ReportAllocs()
		offset, plainOffset := int64(0), fx.batches/2*recordsPerBatch
		for b.Loop() {
			offset, plainOffset = next(offset), next(plainOffset)
			var res segment.ReadResult
			var err error
			dst, res, err = fx.log.ReadBytes(dst[:0], offset, readMaxBytes, segment.NoUpperBound)
			if err != nil {
				b.Fatal(err)
			}
			check(b, res, offset)

			b.StopTimer()
			start := time.Now()
			pos := plainOffset / recordsPerBatch * fx.batchSize
			if _, err := fx.file.ReadAt(plainBuf, pos); err != nil {
				b.Fatal(err)
			}
			plainTime += time.Since(start)
			b.StartTimer()
			offset, plainOffset = res.NextOffset, plainOffset+records
		}
		total := readBytes * int64(b.N)
		logMBps, plainMBps := mbps(total, b.Elapsed()), mbps(total, plainTime)
		b.ReportMetric(plainMBps, "plain-MB/s")
		if plainMBps > 0 {
			b.ReportMetric(logMBps/plainMBps, "ratio")
		}
	})

	b.Run("ranges", func(b *testing.B) {
		peer := newPreadPeer(fx.file, fx.batches, fx.batchSize)
		b.ReportAllocs()
		offset, i := int64(0), 0
		for b.Loop() {
			offset = next(offset)
			res, err := fx.log.Read(offset, readMaxBytes, segment.NoUpperBound)
			if err != nil {
				b.Fatal(err)
			}
			check(b, res, offset)
			offset = res.NextOffset
			i++
			peer.interleave(b, i)
		}
		peer.report(b, i)
	})
}
