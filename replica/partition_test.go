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
	p, err := openVoter(t, fs, testDir, tc, Options{}, 0)
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

// TestAcksDurableWhateverFlushConfig: every acknowledged append was made
// durable first, whatever flush.messages says: the raft host syncs each
// Ready's entries before it acknowledges or commits them (the retired
// single-replica path acknowledged unsynced writes under Kafka's
// page-cache policy, flush.messages=MaxInt64). A flush.* change still
// applies live (Config), and an idempotent producer's retry answers the
// first write's offsets.
func TestAcksDurableWhateverFlushConfig(t *testing.T) {
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
		if got := p.Config().Log; got.FlushMessages != messages || got.FlushMs != ms {
			t.Fatalf("flush.messages %d flush.ms %d in force, want %d %d", got.FlushMessages, got.FlushMs, messages, ms)
		}
	}
	n := 0
	appendDurable := func(b []byte) segment.AppendResult {
		t.Helper()
		before := fs.syncs.Load()
		res, err := p.Append(context.Background(), b, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fs.syncs.Load() == before {
			t.Fatalf("append at %d acknowledged without an fsync", res.BaseOffset)
		}
		if end := crashedEnd(t, fs, cfg); end <= res.LastOffset {
			t.Fatalf("a crash after the append at %d leaves log end offset %d", res.BaseOffset, end)
		}
		return res
	}
	appends := func() {
		t.Helper()
		for range 3 {
			n++
			appendDurable(testBatch(batch.NewBuildOptions(), fmt.Sprint(n)))
		}
	}

	appends()
	setFlush(math.MaxInt64, math.MaxInt64) // Kafka's defaults: the page cache
	appends()
	idem := batch.NewBuildOptions()
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 7, 0, 0
	b := testBatch(idem, "idempotent")
	first := appendDurable(b)
	setFlush(1, math.MaxInt64)
	retry, err := p.Append(context.Background(), b, AppendOptions{})
	if err != nil || retry.BaseOffset != first.BaseOffset {
		t.Fatalf("retry: offset %d, %v; the first write's was %d", retry.BaseOffset, err, first.BaseOffset)
	}
	appends()
	setFlush(math.MaxInt64, 10)
	appends()
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
