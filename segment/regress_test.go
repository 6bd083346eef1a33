package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Regression tests for review findings on the segment log.

func TestEmptyBatchRejected(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	if _, err := l.Append(batch.Build(batch.NewBuildOptions(), nil)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty batch: %v", err)
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("empty batch changed the log")
	}
}

// A producer whose maxTimestamp understates its records is corrected, as
// Kafka's LogValidator does, so timestamp lookups find the records.
func TestMaxTimestampCorrected(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	b := mkBatch(10, 100, 10, "a") // records 100..109
	binary.BigEndian.PutUint64(b[batch.OffMaxTimestamp:], 100)
	binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.Checksum(b))
	mustAppend(t, l, b)
	if off, ts, ok, err := l.OffsetForTimestamp(105); !ok || err != nil || off != 5 || ts != 105 {
		t.Fatalf("lookup 105: (%d, %d, %v, %v)", off, ts, ok, err)
	}
	if h := readAll(t, l, 0)[0]; h.MaxTimestamp != 109 {
		t.Fatalf("stored maxTimestamp %d, want 109", h.MaxTimestamp)
	}
}

// Lowering index.interval.bytes between runs overflows the rebuilt index;
// that must stop indexing, never cut synced data.
func TestIndexFullDuringRecoveryKeepsData(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentIndexBytes = 8 * 4
	l := openTest(t, mem, cfg, nil)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, mkBatch(1, int64(i), 10, "a"))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	l.Close()
	cfg.IndexIntervalBytes = 0
	l2 := openTest(t, crashed, cfg, nil)
	defer l2.Close()
	if l2.LogEndOffset() != 20 || len(readAll(t, l2, 0)) != 20 {
		t.Fatalf("after recovery: LEO %d", l2.LogEndOffset())
	}
	if off := mustAppend(t, l2, mkBatch(1, 0, 10, "b")); off != 20 {
		t.Fatalf("append after recovery at %d", off)
	}
}

func TestNegativeTruncateRejected(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	mustAppend(t, l, mkBatch(3, 0, 10, "a"))
	if _, err := l.TruncateTo(-1); err == nil {
		t.Fatal("TruncateTo(-1) accepted")
	}
	if err := l.TruncateFullyAndStartAt(-5); err == nil {
		t.Fatal("TruncateFullyAndStartAt(-5) accepted")
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

// A failed restart (the new segment cannot be created) fails the log but
// leaves it well-formed: no panics, Close works.
func TestTruncateFullyCreateFailure(t *testing.T) {
	mem := vfs.NewMem()
	fail := false
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if fail && op == vfs.OpCreate {
			return vfs.ErrInjected
		}
		return nil
	}))
	l, err := Open(fs, "/p/topic-0", testConfig(), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(3, 0, 10, "a"))
	fail = true
	if err := l.TruncateFullyAndStartAt(100); !errors.Is(err, ErrFailed) {
		t.Fatalf("restart: %v", err)
	}
	_ = l.LogEndOffset()
	if _, err := l.Append(mkBatch(1, 0, 1, "b")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	l.Close()
}

// Truncation keeps the index entries below the cut: reads after it still
// find every batch, and the max timestamp is exact.
func TestTruncateKeepsIndexes(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	for i := 0; i < 50; i++ {
		mustAppend(t, l, mkBatch(2, int64(1000+i*10), 10, "a"))
	}
	if leo, err := l.TruncateTo(61); err != nil || leo != 60 {
		t.Fatalf("truncate: %d %v", leo, err)
	}
	if ts, off, _, _ := l.MaxTimestamp(); ts != 1291 || off != 59 {
		t.Fatalf("max timestamp %d at %d", ts, off)
	}
	for off := int64(0); off < 60; off += 7 {
		res, err := l.Read(off, 1, NoUpperBound)
		if err != nil || res.FirstOffset != off-off%2 {
			t.Fatalf("read %d: %+v %v", off, res, err)
		}
	}
	if off := mustAppend(t, l, mkBatch(1, 5000, 10, "b")); off != 60 {
		t.Fatalf("append at %d", off)
	}
	if off, _, ok, _ := l.OffsetForTimestamp(1150); !ok || off != 30 {
		t.Fatalf("timestamp lookup after truncate: %d", off)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// flush.ms: unsynced data gets synced by the background flusher once it is
// that old, without any Sync call.
func TestFlushMs(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.FlushMs = 20
	l, err := Open(mem, "/p/t-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, mkBatch(3, 0, 10, "a"))
	waitFor(t, "flush.ms to sync the append", func() bool {
		crashed := mem.CrashClone(vfs.CrashOptions{})
		l2, err := Open(crashed, "/p/t-0", cfg, Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		return l2.LogEndOffset() == 3
	})
}

// The sweeper applies retention every interval.
func TestSweeper(t *testing.T) {
	cfg := testConfig()
	b := mkBatch(1, 0, 10, "a")
	cfg.SegmentBytes = int64(len(b))
	cfg.RetentionBytes = 0
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	for i := 0; i < 5; i++ {
		mustAppend(t, l, mkBatch(1, 0, 10, "a"))
	}
	w := NewSweeper(10*time.Millisecond, quietLogger())
	w.Add(l)
	w.Start()
	defer w.Stop()
	waitFor(t, "the sweeper to delete closed segments", func() bool { return l.NumSegments() == 1 })
	if l.LogStartOffset() != 4 {
		t.Fatalf("log start offset %d, want 4", l.LogStartOffset())
	}
}

// Missing or damaged index files are rebuilt from the log on open.
func TestIndexesRebuilt(t *testing.T) {
	for _, damage := range []string{"remove", "garbage"} {
		t.Run(damage, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := testConfig()
			cfg.IndexIntervalBytes = 0
			b := mkBatch(2, 0, 20, "a")
			cfg.SegmentBytes = int64(5 * len(b))
			l := openTest(t, mem, cfg, nil)
			for i := 0; i < 12; i++ {
				mustAppend(t, l, mkBatch(2, int64(100+i), 20, "a"))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			names, _ := mem.List("/p/topic-0")
			for _, name := range names {
				n, ok := ParseFileName(name)
				if !ok || n.Kind == KindLog {
					continue
				}
				path := "/p/topic-0/" + name
				if damage == "remove" {
					if err := mem.Remove(path); err != nil {
						t.Fatal(err)
					}
					continue
				}
				f, err := mem.OpenReadWrite(path)
				if err != nil {
					t.Fatal(err)
				}
				// Entries that point into the middle of batches.
				f.WriteAt([]byte{0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 9}, 0)
				f.Close()
			}
			l = openTest(t, mem, cfg, nil)
			defer l.Close()
			for off := int64(0); off < 24; off++ {
				res, err := l.Read(off, 1, NoUpperBound)
				if err != nil || res.FirstOffset != off-off%2 {
					t.Fatalf("read %d: first %d, %v", off, res.FirstOffset, err)
				}
			}
			// Batch 4 holds timestamps 104, 105 at offsets 8, 9.
			if off, _, ok, _ := l.OffsetForTimestamp(105); !ok || off != 9 {
				t.Fatalf("timestamp lookup: %d %v", off, ok)
			}
			if ts, off, _, _ := l.MaxTimestamp(); ts != 112 || off != 23 {
				t.Fatalf("max timestamp %d at %d", ts, off)
			}
		})
	}
}

func TestScanHeaders(t *testing.T) {
	cfg := testConfig()
	b := mkBatch(2, 0, 20, "a")
	cfg.SegmentBytes = int64(3 * len(b))
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	for i := 0; i < 10; i++ {
		mustAppend(t, l, mkBatch(2, 0, 20, "a"))
	}
	var bases []int64
	if err := l.ScanHeaders(5, func(h batch.Header) error { bases = append(bases, h.BaseOffset); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(bases) != 8 || bases[0] != 4 || bases[7] != 18 {
		t.Fatalf("scanned bases %v", bases)
	}
}

// After a crash, recovery logs one line for the partition: what it
// scanned and what it cut.
func TestRecoveryLogsOneLine(t *testing.T) {
	fs := vfs.NewMem()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	l, err := Open(fs, "/p-0", DefaultConfig(), Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := l.Append(batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: int64(i), Value: []byte("v")}})); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 9, Value: []byte("unsynced")}})); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	l.Close()
	buf.Reset()
	l2, err := Open(crashed, "/p-0", DefaultConfig(), Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	out := buf.String()
	if strings.Count(out, "recovered after an unclean shutdown") != 1 || !strings.Contains(out, "segments_scanned=1") || !strings.Contains(out, "log_end_offset=3") {
		t.Fatalf("recovery log:\n%s", out)
	}
}
