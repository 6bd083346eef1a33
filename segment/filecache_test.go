package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// fdFS counts the files open through it (opened and not yet closed) and
// the most open at once since the last reset.
type fdFS struct {
	vfs.FS
	open, peak atomic.Int64
	closedUse  atomic.Int64 // operations on a closed file
}

type fdFile struct {
	vfs.File
	fs     *fdFS
	closed atomic.Bool
}

func (c *fdFS) track(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	n := c.open.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return &fdFile{File: f, fs: c}, nil
}

func (c *fdFS) resetPeak() { c.peak.Store(c.open.Load()) }

func (c *fdFS) Create(name string) (vfs.File, error) { return c.track(c.FS.Create(name)) }
func (c *fdFS) Open(name string) (vfs.File, error)   { return c.track(c.FS.Open(name)) }
func (c *fdFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.track(c.FS.OpenReadWrite(name))
}

func (f *fdFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		f.fs.closedUse.Add(1)
	}
	return f.File.ReadAt(p, off)
}

func (f *fdFile) Close() error {
	if !f.closed.Swap(true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// fillSegments appends one-record batches with values naming their
// offsets until the log has segs closed segments.
func fillSegments(t *testing.T, l *Log, segs int) int64 {
	t.Helper()
	var n int64
	for l.NumSegments() <= segs {
		rec := batch.Record{Timestamp: 1, Value: []byte(fmt.Sprintf("value-%06d", n))}
		mustAppend(t, l, batch.Build(batch.NewBuildOptions(), []batch.Record{rec}))
		n++
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return n
}

// eachRecord calls fn with every record of the batches in data.
func eachRecord(data []byte, fn func(r *batch.Record) error) error {
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil {
			return err
		}
		if _, err := batch.Iterate(data[:h.Size()], fn); err != nil {
			return err
		}
		data = data[h.Size():]
	}
	return nil
}

// checkValues reads the whole log in reads of maxBytes and checks that
// offset o holds value-o.
func checkValues(t *testing.T, l *Log, n int64, maxBytes int) {
	t.Helper()
	next := int64(0)
	for off := int64(0); off < n; {
		data, res, err := l.ReadBytes(nil, off, maxBytes, NoUpperBound)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if err := eachRecord(data, func(r *batch.Record) error {
			if want := fmt.Sprintf("value-%06d", r.Offset); r.Offset != next || string(r.Value) != want {
				return fmt.Errorf("offset %d (want %d): value %q, want %q", r.Offset, next, r.Value, want)
			}
			next++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		off = res.NextOffset
	}
	if next != n {
		t.Fatalf("read %d records, want %d", next, n)
	}
}

// A log with many closed segments holds at most the cache's limit plus
// the active segment's three files open, before and after a reopen, while
// reads across every segment return the right data.
func TestFileCacheBoundsOpenFiles(t *testing.T) {
	const limit, segs = 4, 40
	fs := &fdFS{FS: vfs.NewMem()}
	cfg := testConfig()
	cfg.SegmentBytes = 400
	cache := NewFileCache(limit)
	open := func() *Log {
		l, err := Open(fs, "/p/t-0", cfg, Options{Logger: quietLogger(), FileCache: cache, noFlusher: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	n := fillSegments(t, l, segs)
	if got := fs.open.Load(); got > limit+3 {
		t.Fatalf("%d files open after writing %d segments, want at most %d", got, l.NumSegments(), limit+3)
	}
	fs.resetPeak()
	checkValues(t, l, n, 200) // a few batches per read: every segment is opened
	if p := fs.peak.Load(); p > limit+3 {
		t.Fatalf("%d files open at once while reading, want at most %d", p, limit+3)
	}
	// One read spanning every segment references them all until it is
	// released; then the cache is back within its limit.
	checkValues(t, l, n, 1<<20)
	if got := fs.open.Load(); got > limit+3 {
		t.Fatalf("%d files open after a read across all segments, want at most %d", got, limit+3)
	}
	if st := cache.Stats(); st.Refs != 0 || st.Open > limit || st.Evictions == 0 {
		t.Fatalf("cache stats %+v: want no references left, at most %d open, evictions", st, limit)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fs.open.Load(); got != 0 {
		t.Fatalf("%d files open after Close", got)
	}

	fs.resetPeak()
	l = open()
	defer l.Close()
	if got := fs.open.Load(); got > limit+3 {
		t.Fatalf("%d files open after reopening %d segments, want at most %d", got, l.NumSegments(), limit+3)
	}
	// Recovery hands each closed segment to the cache as it goes: the
	// open never held every segment's files at once (it held 3 per
	// segment, so a partition of thousands of segments could not open).
	if p := fs.peak.Load(); p > limit+6 {
		t.Fatalf("%d files open at once while reopening %d segments, want at most %d", p, l.NumSegments(), limit+6)
	}
	fs.resetPeak()
	checkValues(t, l, n, 300)
	if _, _, ok, err := l.OffsetForTimestamp(1); err != nil || !ok {
		t.Fatalf("OffsetForTimestamp: %v %v", ok, err)
	}
	if err := l.ScanHeaders(0, func(batch.Header) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if p := fs.peak.Load(); p > limit+3 {
		t.Fatalf("%d files open at once while reading the reopened log, want at most %d", p, limit+3)
	}
}

// A Read's ranges stay readable until Release even when the cache evicts
// their file or retention deletes its segment; Release then closes it.
func TestFileCacheReadHoldsFile(t *testing.T) {
	fs := &fdFS{FS: vfs.NewMem()}
	cfg := testConfig()
	cfg.SegmentBytes = 400
	cache := NewFileCache(1)
	l, err := Open(fs, "/p/t-0", cfg, Options{Logger: quietLogger(), FileCache: cache, noFlusher: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fillSegments(t, l, 6)
	res, err := l.Read(0, 100, NoUpperBound)
	if err != nil || res.Bytes == 0 {
		t.Fatalf("read: %v, %d bytes", err, res.Bytes)
	}
	want, err := res.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Evict it (other segments' reads) and delete its segment.
	for _, off := range []int64{l.segs[2].base, l.segs[3].base} {
		if _, _, err := l.ReadBytes(nil, off, 100, NoUpperBound); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.DeleteRecordsBefore(l.segs[2].base); err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Refs != 1 {
		t.Fatalf("refs %d, want the result's 1", st.Refs)
	}
	before := fs.open.Load()
	got, err := res.AppendTo(nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after eviction and deletion: %v (equal %v)", err, bytes.Equal(got, want))
	}
	res.Release()
	res.Release() // idempotent
	if after := fs.open.Load(); after != before-1 {
		t.Fatalf("open files %d after Release, want %d", after, before-1)
	}
	if st := cache.Stats(); st.Refs != 0 {
		t.Fatalf("refs %d after Release", st.Refs)
	}
	if n := fs.closedUse.Load(); n != 0 {
		t.Fatalf("%d reads of closed files", n)
	}
}

// Concurrent readers under eviction pressure (a limit of 2, many
// segments), with appends rolling segments and retention deleting the
// oldest, never read a closed file and always read the right data. Run
// with -race.
func TestFileCacheConcurrentEviction(t *testing.T) {
	fs := &fdFS{FS: vfs.NewMem()}
	cfg := testConfig()
	cfg.SegmentBytes = 300
	cache := NewFileCache(2)
	l, err := Open(fs, "/p/t-0", cfg, Options{Logger: quietLogger(), FileCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var appended atomic.Int64
	appended.Store(fillSegments(t, l, 30))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				lso, end := l.LogStartOffset(), appended.Load()
				off := lso + rng.Int64N(max(end-lso, 1))
				res, err := l.Read(off, 100+rng.IntN(600), NoUpperBound)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention passed it
				}
				if err != nil {
					report(fmt.Errorf("read at %d: %w", off, err))
					return
				}
				data, err := res.AppendTo(nil)
				res.Release()
				if err != nil {
					report(fmt.Errorf("copy at %d: %w", off, err))
					return
				}
				if err := eachRecord(data, func(r *batch.Record) error {
					if want := fmt.Sprintf("value-%06d", r.Offset); string(r.Value) != want {
						return fmt.Errorf("offset %d holds %q", r.Offset, r.Value)
					}
					return nil
				}); err != nil {
					report(err)
					return
				}
			}
		}(uint64(g))
	}
	// Appends roll segments; DeleteRecordsBefore deletes the oldest.
	for i := 0; i < 400; i++ {
		n := appended.Load()
		rec := batch.Record{Timestamp: 1, Value: []byte(fmt.Sprintf("value-%06d", n))}
		mustAppend(t, l, batch.Build(batch.NewBuildOptions(), []batch.Record{rec}))
		appended.Add(1)
		if i%40 == 39 {
			if _, err := l.DeleteRecordsBefore(l.LogStartOffset() + 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if n := fs.closedUse.Load(); n != 0 {
		t.Fatalf("%d reads of closed files", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cache.Stats().Refs != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("references left: %+v", cache.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if st := cache.Stats(); st.Open > 2 || st.Evictions == 0 {
		t.Fatalf("cache stats %+v", st)
	}
}

// A truncation into a closed segment whose files the cache closed (and
// whose index files were closed once synced) makes it the active segment
// again: appends, reads and a reopen work.
func TestFileCacheTruncateIntoClosedSegment(t *testing.T) {
	fs := &fdFS{FS: vfs.NewMem()}
	cfg := testConfig()
	cfg.SegmentBytes = 400
	cache := NewFileCache(1)
	open := func() *Log {
		l, err := Open(fs, "/p/t-0", cfg, Options{Logger: quietLogger(), FileCache: cache, noFlusher: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	n := fillSegments(t, l, 10)
	l.mu.RLock()
	target := l.segs[2].base + 1
	closed := l.segs[2].offFile == nil
	l.mu.RUnlock()
	if !closed {
		t.Fatal("a synced closed segment keeps its index files open")
	}
	checkValues(t, l, n, 200) // evicts it
	if leo, err := l.TruncateTo(target); err != nil || leo != target {
		t.Fatalf("truncate: %d, %v", leo, err)
	}
	for o := target; o < target+20; o++ {
		rec := batch.Record{Timestamp: 1, Value: []byte(fmt.Sprintf("value-%06d", o))}
		mustAppend(t, l, batch.Build(batch.NewBuildOptions(), []batch.Record{rec}))
	}
	checkValues(t, l, target+20, 200)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open()
	defer l.Close()
	checkValues(t, l, target+20, 300)
}
