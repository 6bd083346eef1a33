package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// The shapes the benchmarks share.
const (
	recordsPerBatch  = 16        // records in an append or read batch
	recordValueBytes = 1 << 10   // value bytes per record (random, incompressible)
	groupBytes       = 1 << 20   // BenchmarkAppend: fsync (and interleave) every MiB
	drainBytes       = 512 << 20 // BenchmarkAppend/pagecache: untimed sync every 512 MiB
	readMaxBytes     = 1 << 20   // BenchmarkRead: maxBytes per Read
	readLogBytes     = 256 << 20
)

// TestMain removes the shared fixtures once every benchmark has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := closeFixtures(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: closing fixtures:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// fixtures holds what is built once per test binary: the folder the shared
// logs live in (on the same file system as b.TempDir) and what to close.
var fixtures struct {
	mu     sync.Mutex
	root   string
	closer []func() error
}

// fixtureDir returns a fresh folder under the shared fixture root.
func fixtureDir(name string) (string, error) {
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	if fixtures.root == "" {
		root, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return "", err
		}
		fixtures.root = root
	}
	return filepath.Join(fixtures.root, name), nil
}

func onClose(f func() error) {
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	fixtures.closer = append(fixtures.closer, f)
}

func closeFixtures() error {
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	var errs []error
	for i := len(fixtures.closer) - 1; i >= 0; i-- {
		errs = append(errs, fixtures.closer[i]())
	}
	if fixtures.root != "" {
		errs = append(errs, os.RemoveAll(fixtures.root))
	}
	return errors.Join(errs...)
}

// cached builds a fixture once; a failure is remembered and fails every
// benchmark that asks for it.
func cached[T any](build func() (T, error)) func(b *testing.B) T {
	get := sync.OnceValues(build)
	return func(b *testing.B) T {
		b.Helper()
		v, err := get()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
}

// openLog opens a segment log on the OS file system.
func openLog(dir string, cfg segment.Config) (*segment.Log, error) {
	return segment.Open(vfs.Default, dir, cfg, segment.Options{})
}

// appendBatch is BenchmarkAppend's and BenchmarkRead's batch: 16 records
// with null keys and 1 KiB random values, uncompressed, as a plain producer
// sends them (about 16.2 KiB with the record and batch headers).
var appendBatch = sync.OnceValue(func() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	ts := time.Now().UnixMilli()
	recs := make([]batch.Record, recordsPerBatch)
	for i := range recs {
		v := make([]byte, recordValueBytes)
		for j := 0; j < len(v); j += 8 {
			binary.LittleEndian.PutUint64(v[j:], rng.Uint64())
		}
		recs[i] = batch.Record{Timestamp: ts, Value: v}
	}
	return batch.Build(batch.NewBuildOptions(), recs)
})

// readFixture is a log of readLogBytes of appendBatch batches in one
// segment (default config), synced so that no writeback runs during the
// read benchmarks; its data stays in the page cache.
type readFixture struct {
	log       *segment.Log
	file      *os.File // the segment's .log file, for the plain peer
	batchSize int64
	batches   int64
}

var getReadFixture = cached(func() (*readFixture, error) {
	dir, err := fixtureDir("read")
	if err != nil {
		return nil, err
	}
	l, err := openLog(dir, segment.DefaultConfig())
	if err != nil {
		return nil, err
	}
	onClose(l.Close)
	bt := bytes.Clone(appendBatch())
	fx := &readFixture{log: l, batchSize: int64(len(bt)), batches: readLogBytes / int64(len(bt))}
	for range fx.batches {
		if _, err := l.Append(bt); err != nil {
			return nil, err
		}
	}
	if err := l.Sync(); err != nil {
		return nil, err
	}
	if n := l.NumSegments(); n != 1 {
		return nil, fmt.Errorf("read fixture: %d segments, want 1", n)
	}
	if fx.file, err = os.Open(filepath.Join(dir, segment.MakeFileName(0, segment.KindLog))); err != nil {
		return nil, err
	}
	onClose(fx.file.Close)
	return fx, nil
})

// lookupFixture is a log of one segment whose offset index is full: the
// default segment.index.bytes (10 MiB) holds 1,310,720 entries, and with
// index.interval.bytes 0 every batch but the first gets one, so the log has
// 1,310,721 one-record batches (about 100 MB). Batch i holds offset i and
// timestamp t0 + i/2 (two batches per millisecond), so timestamps increase
// and the time index (one entry per new timestamp) is half full. The log was
// closed and reopened (a clean restart), and both index files are also
// opened read-only on their own for the index-only variants.
type lookupFixture struct {
	log       *segment.Log
	file      *os.File // the segment's .log file, for the pread peer
	offIdx    *index.OffsetIndex
	timeIdx   *index.TimeIndex
	t0        int64
	batches   int64 // offsets are [0, batches)
	batchSize int64 // every batch has the same size
}

var getLookupFixture = cached(func() (*lookupFixture, error) {
	dir, err := fixtureDir("lookup")
	if err != nil {
		return nil, err
	}
	cfg := segment.DefaultConfig()
	cfg.IndexIntervalBytes = 0
	l, err := openLog(dir, cfg)
	if err != nil {
		return nil, err
	}
	fx := &lookupFixture{
		t0:      time.Now().Add(-time.Hour).UnixMilli(),
		batches: int64(cfg.SegmentIndexBytes/index.OffsetEntrySize) + 1,
	}
	opts := batch.NewBuildOptions()
	recs := []batch.Record{{Value: []byte("01234567")}}
	for i := range fx.batches {
		recs[0].Timestamp = fx.t0 + i/2
		bt := batch.Build(opts, recs)
		fx.batchSize = int64(len(bt))
		if _, err := l.Append(bt); err != nil {
			l.Close()
			return nil, err
		}
	}
	if got, want := l.Size(), fx.batches*fx.batchSize; got != want {
		l.Close()
		return nil, fmt.Errorf("lookup fixture: log holds %d bytes, want %d", got, want)
	}
	if err := l.Close(); err != nil {
		return nil, err
	}
	if fx.log, err = openLog(dir, cfg); err != nil {
		return nil, err
	}
	onClose(fx.log.Close)
	if n, leo := fx.log.NumSegments(), fx.log.LogEndOffset(); n != 1 || leo != fx.batches {
		return nil, fmt.Errorf("lookup fixture: reopened with %d segments, log end offset %d; want 1, %d", n, leo, fx.batches)
	}
	if fx.file, err = os.Open(filepath.Join(dir, segment.MakeFileName(0, segment.KindLog))); err != nil {
		return nil, err
	}
	onClose(fx.file.Close)
	offFile, err := vfs.Default.Open(filepath.Join(dir, segment.MakeFileName(0, segment.KindOffsetIndex)))
	if err != nil {
		return nil, err
	}
	onClose(offFile.Close)
	if fx.offIdx, err = index.OpenOffsetIndex(offFile, 0, 0, false); err != nil {
		return nil, err
	}
	if got, want := int64(fx.offIdx.Len()), fx.batches-1; got != want {
		return nil, fmt.Errorf("lookup fixture: offset index has %d entries, want %d", got, want)
	}
	timeFile, err := vfs.Default.Open(filepath.Join(dir, segment.MakeFileName(0, segment.KindTimeIndex)))
	if err != nil {
		return nil, err
	}
	onClose(timeFile.Close)
	if fx.timeIdx, err = index.OpenTimeIndex(timeFile, 0, 0, false); err != nil {
		return nil, err
	}
	return fx, nil
})

// randomInts returns n values drawn uniformly from [0, limit), the same on
// every run, so that a benchmark's loop does not pay for the generator.
func randomInts(n int, limit int64) []int64 {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]int64, n)
	for i := range out {
		out[i] = rng.Int64N(limit)
	}
	return out
}

// preadPeer is the lookup benchmarks' peer: one pread of a batch header
// (61 bytes) at a random batch position of a segment file in the page
// cache, the floor of any lookup that has to read a header from the file.
// Benchmarks run it in chunks of peerChunk reads, interleaved with their
// own ops outside the timer, as many reads as ops in all.
type preadPeer struct {
	f     *os.File
	pos   []int64 // random batch positions; len is a power of two
	buf   [batch.HeaderSize]byte
	next  int
	reads int
	time  time.Duration
}

const peerChunk = 1024

func newPreadPeer(f *os.File, batches, batchSize int64) *preadPeer {
	pos := randomInts(randomCount, batches)
	for i := range pos {
		pos[i] *= batchSize
	}
	return &preadPeer{f: f, pos: pos}
}

// run does n reads; the caller stops the benchmark timer around it.
func (p *preadPeer) run(b *testing.B, n int) {
	start := time.Now()
	for range n {
		if _, err := p.f.ReadAt(p.buf[:], p.pos[p.next&(len(p.pos)-1)]); err != nil {
			b.Fatal(err)
		}
		p.next++
	}
	p.time += time.Since(start)
	p.reads += n
}

// interleave runs a chunk after every peerChunk ops; call it after op i
// (counting from 1) inside the timed loop.
func (p *preadPeer) interleave(b *testing.B, i int) {
	if i%peerChunk == 0 {
		b.StopTimer()
		p.run(b, peerChunk)
		b.StartTimer()
	}
}

// report runs the reads still owed for ops ops (after the timed loop) and
// reports pread-ns, the time of one read, and preads/op, the benchmark's
// ns/op in units of that read.
func (p *preadPeer) report(b *testing.B, ops int) {
	p.run(b, ops-p.reads)
	if p.reads == 0 || ops == 0 {
		return
	}
	per := float64(p.time.Nanoseconds()) / float64(p.reads)
	b.ReportMetric(per, "pread-ns")
	if per > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops)/per, "preads/op")
	}
}

// mbps is bytes per second in MB/s (10^6 bytes), as the testing package's
// MB/s column.
func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// alternate runs b.N ops in rounds of at most round ops: timed(n) under
// the benchmark's timer, peer(n) outside it, the first of the two
// rotating from round to round (so neither always runs on a cache or disk
// the other warmed). It stops the timer first and leaves it stopped.
func alternate(b *testing.B, round int, timed, peer func(n int) error) {
	b.ResetTimer()
	b.StopTimer()
	for r, done := 0, 0; done < b.N; r++ {
		n := min(round, b.N-done)
		t := func() error {
			b.StartTimer()
			defer b.StopTimer()
			return timed(n)
		}
		first, second := t, func() error { return peer(n) }
		if r%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			b.Fatal(err)
		}
		if err := second(); err != nil {
			b.Fatal(err)
		}
		done += n
	}
}
