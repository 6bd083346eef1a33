package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

const testDir = "/data/t-0"

// syncFS is a MemFS whose file Syncs are counted and take delay each.
type syncFS struct {
	mem   *vfs.MemFS
	fs    vfs.FS
	syncs atomic.Int64
}

func newSyncFS(delay time.Duration) *syncFS {
	s := &syncFS{mem: vfs.NewMem()}
	s.fs = vfs.NewErrorFS(s.mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			s.syncs.Add(1)
			time.Sleep(delay)
		}
		return nil
	}))
	return s
}

func openLog(t *testing.T, fs vfs.FS, cfg segment.Config) *segment.Log {
	t.Helper()
	l, err := segment.Open(fs, testDir, cfg, segment.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newPartition(t *testing.T, fs vfs.FS, cfg segment.Config) *Partition {
	t.Helper()
	tc := DefaultTopicConfig()
	tc.Log = cfg
	p, err := Open(fs, testDir, tc, Options{Log: segment.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func testBatch(opts batch.BuildOptions, tag string) []byte {
	return batch.Build(opts, []batch.Record{{Timestamp: 1, Key: []byte(tag), Value: []byte("value-" + tag)}})
}

// crashedEnd is the log end offset a crash now would leave.
func crashedEnd(t *testing.T, fs *syncFS, cfg segment.Config) int64 {
	t.Helper()
	l := openLog(t, fs.mem.CrashClone(vfs.CrashOptions{}), cfg)
	defer l.Close()
	return l.LogEndOffset()
}

// TestConcurrentAppendsShareFsyncs: appends to one partition with
// flush.messages=1 fsync outside the append mutex, so concurrent ones
// share fsyncs (group commit), and each is durable when acknowledged.
func TestConcurrentAppendsShareFsyncs(t *testing.T) {
	const writers, each = 16, 20
	fs := newSyncFS(3 * time.Millisecond)
	cfg := segment.DefaultConfig()
	cfg.FlushMessages = 1
	p := newPartition(t, fs.fs, cfg)
	before := fs.syncs.Load()

	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int64]string{} // base offset to the record's key
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				tag := fmt.Sprintf("w%d-%d", w, i)
				res, err := p.Append(context.Background(), testBatch(batch.NewBuildOptions(), tag), AppendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[res.BaseOffset] = tag
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	appends := int64(writers * each)
	syncs := fs.syncs.Load() - before
	t.Logf("%d appends, %d file syncs", appends, syncs)
	if syncs >= appends/2 {
		t.Errorf("%d file syncs for %d concurrent appends: fsyncs do not group", syncs, appends)
	}
	if got := p.HighWatermark(); got != appends {
		t.Errorf("high watermark %d, want %d", got, appends)
	}

	// Every acknowledged batch survives a crash.
	l := openLog(t, fs.mem.CrashClone(vfs.CrashOptions{}), cfg)
	defer l.Close()
	found := 0
	err := l.ScanHeaders(0, func(h batch.Header) error {
		found++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(acked) || l.LogEndOffset() != appends {
		t.Fatalf("after a crash: %d batches, log end offset %d; %d acknowledged", found, l.LogEndOffset(), len(acked))
	}
	for off, tag := range acked {
		data, _, err := l.ReadBytes(nil, off, 1, segment.NoUpperBound)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := batch.Records(data)
		if err != nil || len(recs) != 1 || string(recs[0].Key) != tag {
			t.Fatalf("offset %d after a crash: %v %v, want key %s", off, recs, err, tag)
		}
	}
}

// TestFlushConfigAppliesLive: a flush.messages change made with
// Partition.SetConfig decides at once whether Append waits for an fsync (for a
// producer's retry too); a flush.ms change reaches the log's flusher.
func TestFlushConfigAppliesLive(t *testing.T) {
	fs := newSyncFS(0)
	cfg := segment.DefaultConfig()
	cfg.FlushMessages = 1
	p := newPartition(t, fs.fs, cfg)
	setFlush := func(messages, ms int64) {
		t.Helper()
		tc := p.Config()
		tc.Log.FlushMessages, tc.Log.FlushMs = messages, ms
		if err := p.SetConfig(tc); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	appendSyncs := func(b []byte) int64 {
		t.Helper()
		before := fs.syncs.Load()
		if _, err := p.Append(context.Background(), b, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		return fs.syncs.Load() - before
	}
	want := func(fsync bool) {
		t.Helper()
		for range 3 {
			n++
			if s := appendSyncs(testBatch(batch.NewBuildOptions(), fmt.Sprint(n))); (s > 0) != fsync {
				t.Fatalf("append %d: %d file syncs, want fsync %v", n, s, fsync)
			}
		}
	}

	want(true)
	setFlush(math.MaxInt64, math.MaxInt64) // Kafka's defaults: the page cache
	want(false)
	if end := crashedEnd(t, fs, cfg); end != 3 {
		t.Fatalf("crash after unsynced appends: log end offset %d, want 3", end)
	}
	// An idempotent producer's batch, unsynced; its retry after the
	// switch back to flush.messages=1 waits for an fsync.
	idem := batch.NewBuildOptions()
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 7, 0, 0
	b := testBatch(idem, "idempotent")
	if s := appendSyncs(b); s != 0 {
		t.Fatalf("idempotent append with flush.messages=MaxInt64: %d file syncs", s)
	}
	setFlush(1, math.MaxInt64)
	if s := appendSyncs(b); s == 0 {
		t.Fatal("retry with flush.messages=1 answered without an fsync")
	}
	if end := crashedEnd(t, fs, cfg); end != 7 {
		t.Fatalf("crash after the retry: log end offset %d, want 7", end)
	}
	want(true)

	// flush.ms set live: the flusher syncs unsynced appends on its own.
	setFlush(math.MaxInt64, math.MaxInt64)
	want(false)
	setFlush(math.MaxInt64, 10)
	for deadline := time.Now().Add(10 * time.Second); crashedEnd(t, fs, cfg) != p.LogEndOffset(); {
		if time.Now().After(deadline) {
			t.Fatal("flush.ms=10 set live: appends not synced within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Fetch answers the records and the offsets from one view: no batch at or
// beyond the high watermark it reports, the log start offset with it, and
// only the offsets when no bytes are asked for.
func TestFetchOneView(t *testing.T) {
	p := newPartition(t, vfs.NewMem(), segment.DefaultConfig())
	for i := range 3 {
		if _, err := produce(t, p, testBatch(batch.BuildOptions{}, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	fr, err := p.Fetch(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Records.Release()
	if fr.HighWatermark != p.HighWatermark() || fr.LastStableOffset != fr.HighWatermark || fr.LogStartOffset != 0 {
		t.Fatalf("view: hw %d lso %d log start %d, partition hw %d", fr.HighWatermark, fr.LastStableOffset, fr.LogStartOffset, p.HighWatermark())
	}
	if fr.Records.Bytes == 0 || fr.Records.NextOffset != fr.HighWatermark {
		t.Fatalf("records: %d bytes up to %d, high watermark %d", fr.Records.Bytes, fr.Records.NextOffset, fr.HighWatermark)
	}
	only, err := p.Fetch(0, 0)
	if err != nil || only.Records.Bytes != 0 || only.HighWatermark != fr.HighWatermark || only.Changed == nil {
		t.Fatalf("offsets only: %+v, %v", only, err)
	}
	if _, err := p.Fetch(fr.HighWatermark+1, 1<<20); err == nil {
		t.Fatal("a fetch past the high watermark read nothing and no error")
	}
}
