package segment

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

func TestAppendReadOffsets(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	var want []int64
	next := int64(0)
	for i := 1; i <= 20; i++ {
		off := mustAppend(t, l, mkBatch(i, int64(1000*i), 10, "a"))
		if off != next {
			t.Fatalf("batch %d: base offset %d, want %d", i, off, next)
		}
		want = append(want, off)
		next += int64(i)
	}
	if got := l.LogEndOffset(); got != next {
		t.Fatalf("log end offset %d, want %d", got, next)
	}
	hs := readAll(t, l, 0)
	if len(hs) != len(want) {
		t.Fatalf("read %d batches, want %d", len(hs), len(want))
	}
	for i, h := range hs {
		if h.BaseOffset != want[i] || int(h.NumRecords) != i+1 {
			t.Fatalf("batch %d: base %d records %d", i, h.BaseOffset, h.NumRecords)
		}
	}
	// A read from the middle of a batch starts at that batch.
	res, err := l.Read(want[5]+2, 1, NoUpperBound)
	if err != nil || res.FirstOffset != want[5] || res.NextOffset != want[6] {
		t.Fatalf("mid-batch read: %+v %v", res, err)
	}
}

func TestReadLimits(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	b := mkBatch(4, 1, 500, "a")
	size := int64(len(b))
	for i := 0; i < 10; i++ {
		mustAppend(t, l, mkBatch(4, 1, 500, "a"))
	}
	// KIP-74: one whole batch even when it exceeds the limit.
	res, err := l.Read(0, 10, NoUpperBound)
	if err != nil || res.Bytes != size || res.NextOffset != 4 {
		t.Fatalf("min one batch: bytes %d next %d err %v", res.Bytes, res.NextOffset, err)
	}
	// Whole batches only, within the limit.
	res, _ = l.Read(0, int(3*size+size/2), NoUpperBound)
	if res.Bytes != 3*size || res.NextOffset != 12 {
		t.Fatalf("limit: bytes %d next %d", res.Bytes, res.NextOffset)
	}
	// The upper bound (high watermark) excludes batches not wholly below it.
	res, _ = l.Read(0, 1<<20, 10)
	if res.NextOffset != 8 {
		t.Fatalf("upper bound: next %d, want 8", res.NextOffset)
	}
	res, _ = l.Read(8, 1<<20, 10)
	if res.Bytes != 0 {
		t.Fatalf("read at bound returned %d bytes", res.Bytes)
	}
	// The log end offset reads empty; past it is out of range.
	if res, err := l.Read(40, 100, NoUpperBound); err != nil || res.Bytes != 0 {
		t.Fatalf("read at LEO: %+v %v", res, err)
	}
	var oor *OutOfRangeError
	if _, err := l.Read(41, 100, NoUpperBound); !errors.As(err, &oor) || oor.LogEndOffset != 40 || oor.LogStartOffset != 0 {
		t.Fatalf("read past LEO: %v", err)
	}
}

func TestAppendRejectsCorruptBatch(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	mustAppend(t, l, mkBatch(2, 1, 10, "a"))
	b := mkBatch(3, 1, 10, "b")
	b[len(b)-1] ^= 0xff
	if _, err := l.Append(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt CRC: %v", err)
	}
	b = mkBatch(3, 1, 10, "b")
	if _, err := l.Append(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: %v", err)
	}
	if l.LogEndOffset() != 2 || l.Size() != int64(len(mkBatch(2, 1, 10, "a"))) {
		t.Fatalf("corrupt batch changed the log: LEO %d size %d", l.LogEndOffset(), l.Size())
	}
}

func TestRollBySizeAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	b := mkBatch(5, 1, 100, "a")
	cfg.SegmentBytes = int64(3 * len(b))
	l := openTest(t, fs, cfg, nil)
	for i := 0; i < 10; i++ {
		mustAppend(t, l, mkBatch(5, int64(i), 100, "a"))
	}
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("segments %d, want 4", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("/p/topic-0")
	want := []string{"00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.raftindex", "00000000000000000000.timeindex",
		"00000000000000000015.index", "00000000000000000015.log"}
	for i, w := range want {
		if names[i] != w {
			t.Fatalf("files %v, want prefix %v", names, want)
		}
	}
	l = openTest(t, fs, cfg, nil)
	defer l.Close()
	if l.LogEndOffset() != 50 || len(readAll(t, l, 0)) != 10 {
		t.Fatalf("after reopen: LEO %d", l.LogEndOffset())
	}
	if off := mustAppend(t, l, mkBatch(1, 1, 1, "z")); off != 50 {
		t.Fatalf("append after reopen at %d", off)
	}
}

func TestRollBySegmentMs(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 1000
	clock := newClock()
	l := openTest(t, vfs.NewMem(), cfg, clock)
	defer l.Close()
	mustAppend(t, l, mkBatch(1, 10_000, 1, "a"))
	mustAppend(t, l, mkBatch(1, 11_000, 1, "a")) // exactly segment.ms later: no roll
	if l.NumSegments() != 1 {
		t.Fatalf("rolled too early")
	}
	mustAppend(t, l, mkBatch(1, 11_001, 1, "a"))
	if l.NumSegments() != 2 {
		t.Fatalf("no roll by timestamp")
	}
	// Without timestamps (-1), the segment's age by the clock decides.
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(1, -1, 1, "a"))
	clock.Add(1000 * time.Millisecond)
	mustAppend(t, l, mkBatch(1, -1, 1, "a"))
	if l.NumSegments() != 3 {
		t.Fatalf("segments %d, want 3", l.NumSegments())
	}
	clock.Add(1 * time.Millisecond)
	mustAppend(t, l, mkBatch(1, -1, 1, "a"))
	if l.NumSegments() != 4 {
		t.Fatalf("segments %d, want 4: no roll by age", l.NumSegments())
	}
}

func TestRollWhenIndexFull(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0
	cfg.SegmentIndexBytes = 8 * 4 // 4 offset entries, 2 time entries
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	for i := 0; i < 12; i++ {
		mustAppend(t, l, mkBatch(1, int64(i), 1, "a"))
	}
	if l.NumSegments() < 3 {
		t.Fatalf("segments %d: full indexes did not roll", l.NumSegments())
	}
	if got := len(readAll(t, l, 0)); got != 12 {
		t.Fatalf("read %d batches", got)
	}
}

func TestTimestampLookupInsideBatch(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	// Batches with timestamps 100..109, 200..209, 300..309.
	for _, ts := range []int64{100, 200, 300} {
		mustAppend(t, l, mkBatch(10, ts, 1, "a"))
	}
	cases := []struct {
		ts, off, recTs int64
		ok             bool
	}{
		{0, 0, 100, true},
		{100, 0, 100, true},
		{105, 5, 105, true},
		{150, 10, 200, true},
		{209, 19, 209, true},
		{305, 25, 305, true},
		{310, -1, -1, false},
	}
	for _, c := range cases {
		off, ts, ok, err := l.OffsetForTimestamp(c.ts)
		if err != nil || ok != c.ok || off != c.off || ts != c.recTs {
			t.Errorf("lookup %d: got (%d, %d, %v, %v), want (%d, %d, %v)", c.ts, off, ts, ok, err, c.off, c.recTs, c.ok)
		}
	}
	ts, off, ok, err := l.MaxTimestamp()
	if !ok || err != nil || ts != 309 || off != 29 {
		t.Fatalf("max timestamp: %d at %d (%v %v)", ts, off, ok, err)
	}
	// Never below the log start offset.
	if _, err := l.DeleteRecordsBefore(13); err != nil {
		t.Fatal(err)
	}
	if off, _, _, _ := l.OffsetForTimestamp(100); off != 13 {
		t.Fatalf("lookup after DeleteRecords: %d, want 13", off)
	}
}

func TestLogAppendTime(t *testing.T) {
	clock := newClock()
	l := openTest(t, vfs.NewMem(), testConfig(), clock)
	defer l.Close()
	r, err := l.AppendWith(mkBatch(3, 5, 1, "a"), AppendOptions{LogAppendTime: true, SetLeaderEpoch: true, LeaderEpoch: 7})
	if err != nil || r.LogAppendTime != clock.Now().UnixMilli() {
		t.Fatalf("append: %+v %v", r, err)
	}
	hs := readAll(t, l, 0)
	if !hs[0].LogAppendTime() || hs[0].MaxTimestamp != r.LogAppendTime || hs[0].PartitionLeaderEpoch != 7 {
		t.Fatalf("header %+v", hs[0])
	}
}

func TestRetention(t *testing.T) {
	fs := vfs.NewMem()
	clock := newClock()
	cfg := testConfig()
	b := mkBatch(2, 0, 100, "a")
	cfg.SegmentBytes = int64(2 * len(b)) // two batches per segment
	cfg.RetentionMs = 10_000
	now := clock.Now().UnixMilli()
	l := openTest(t, fs, cfg, clock)
	defer l.Close()
	// Segments: [0,4) old, [4,8) old, [8,12) new, [12,14) active, new.
	for _, ts := range []int64{now - 60_000, now - 50_000, now - 40_000, now - 20_000, now, now, now} {
		mustAppend(t, l, mkBatch(2, ts, 100, "a"))
	}
	if l.NumSegments() != 4 {
		t.Fatalf("segments %d", l.NumSegments())
	}
	n, err := l.DeleteOldSegments()
	if err != nil || n != 2 || l.LogStartOffset() != 8 {
		t.Fatalf("retention.ms: deleted %d, LSO %d, %v", n, l.LogStartOffset(), err)
	}
	if _, err := l.Read(0, 100, NoUpperBound); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below LSO: %v", err)
	}
	// retention.bytes: keep at least that many bytes; never the active one.
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 0
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	n, _ = l.DeleteOldSegments()
	if n != 1 || l.NumSegments() != 1 || l.LogStartOffset() != 12 {
		t.Fatalf("retention.bytes: deleted %d, segments %d, LSO %d", n, l.NumSegments(), l.LogStartOffset())
	}
	names, _ := fs.List("/p/topic-0")
	for _, name := range names {
		if p, ok := ParseFileName(name); ok && p.Base < 12 {
			t.Fatalf("file %s survived retention", name)
		}
	}
}

func TestRetentionBytesKeepsEnough(t *testing.T) {
	cfg := testConfig()
	b := mkBatch(1, 0, 100, "a")
	cfg.SegmentBytes = int64(len(b)) // one batch per segment
	cfg.RetentionMs = -1
	cfg.RetentionBytes = int64(3*len(b)) + 1
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	for i := 0; i < 10; i++ {
		mustAppend(t, l, mkBatch(1, 0, 100, "a"))
	}
	l.DeleteOldSegments()
	// 4 segments = 4 batches >= retention.bytes; deleting one more would go below.
	if l.NumSegments() != 4 || l.Size() < cfg.RetentionBytes {
		t.Fatalf("segments %d size %d", l.NumSegments(), l.Size())
	}
}

func TestDeleteRecordsPersists(t *testing.T) {
	fs := vfs.NewMem()
	l := openTest(t, fs, testConfig(), nil)
	for i := 0; i < 5; i++ {
		mustAppend(t, l, mkBatch(4, 0, 10, "a"))
	}
	if lso, err := l.DeleteRecordsBefore(6); err != nil || lso != 6 {
		t.Fatalf("delete records: %d %v", lso, err)
	}
	// Crash without Sync or Close: the log start offset must survive.
	crashed := fs.CrashClone(vfs.CrashOptions{})
	l.Close()
	l2 := openTest(t, crashed, testConfig(), nil)
	defer l2.Close()
	if l2.LogStartOffset() != 6 {
		t.Fatalf("log start offset after crash %d, want 6", l2.LogStartOffset())
	}
	if _, err := l2.Read(5, 100, NoUpperBound); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below LSO after crash: %v", err)
	}
}

func TestTruncateTo(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	b := mkBatch(3, 0, 50, "a")
	cfg.SegmentBytes = int64(2 * len(b))
	l := openTest(t, fs, cfg, nil)
	for i := 0; i < 6; i++ {
		mustAppend(t, l, mkBatch(3, int64(i*10), 50, "a"))
	}
	// Offset 7 is inside the batch [6,8]: it goes whole.
	leo, err := l.TruncateTo(7)
	if err != nil || leo != 6 || l.LogEndOffset() != 6 {
		t.Fatalf("truncate: LEO %d %v", leo, err)
	}
	if ts, _, _, _ := l.MaxTimestamp(); ts != 12 {
		t.Fatalf("max timestamp after truncation %d, want 12", ts)
	}
	if off := mustAppend(t, l, mkBatch(2, 100, 50, "b")); off != 6 {
		t.Fatalf("append after truncate at %d", off)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	l.Close()
	l2 := openTest(t, crashed, cfg, nil)
	defer l2.Close()
	hs := readAll(t, l2, 0)
	if len(hs) != 3 || hs[2].BaseOffset != 6 || hs[2].NumRecords != 2 || l2.LogEndOffset() != 8 {
		t.Fatalf("after crash: %d batches, LEO %d", len(hs), l2.LogEndOffset())
	}
}

func TestSyncSurvivesCrash(t *testing.T) {
	fs := vfs.NewMem()
	l := openTest(t, fs, testConfig(), nil)
	mustAppend(t, l, mkBatch(3, 0, 10, "a"))
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(3, 0, 10, "b")) // not synced
	crashed := fs.CrashClone(vfs.CrashOptions{})
	l.Close()
	l2 := openTest(t, crashed, testConfig(), nil)
	defer l2.Close()
	if l2.LogEndOffset() != 3 || len(readAll(t, l2, 0)) != 1 {
		t.Fatalf("after crash LEO %d", l2.LogEndOffset())
	}
}

func TestFlushMessages(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.FlushMessages = 1
	l := openTest(t, fs, cfg, nil)
	defer l.Close()
	mustAppend(t, l, mkBatch(3, 0, 10, "a"))
	crashed := fs.CrashClone(vfs.CrashOptions{})
	l2 := openTest(t, crashed, cfg, nil)
	defer l2.Close()
	if l2.LogEndOffset() != 3 {
		t.Fatalf("flush.messages=1 did not sync: LEO %d", l2.LogEndOffset())
	}
}

// TestAppendWithNeedSync: AppendWith never syncs; NeedSync follows
// flush.messages as configured at each append (SetConfig applies at once).
func TestAppendWithNeedSync(t *testing.T) {
	mem := vfs.NewMem()
	var syncs atomic.Int64
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			syncs.Add(1)
		}
		return nil
	}))
	cfg := testConfig()
	cfg.FlushMessages = 1
	l := openTest(t, fs, cfg, nil)
	defer l.Close()
	want := func(n int, needSync bool) {
		t.Helper()
		before := syncs.Load()
		r, err := l.AppendWith(mkBatch(n, 0, 10, "a"), AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.NeedSync != needSync || syncs.Load() != before {
			t.Fatalf("NeedSync %v (want %v), %d syncs in AppendWith", r.NeedSync, needSync, syncs.Load()-before)
		}
	}
	want(1, true)
	want(1, true) // not synced since: still due
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	cfg.FlushMessages = 5
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	want(2, false)
	want(2, false)
	want(1, true) // 5 records since the last Sync
	cfg.FlushMessages = 1
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	want(1, true)
}

func TestWriteErrorFailsLog(t *testing.T) {
	mem := vfs.NewMem()
	fs := vfs.NewErrorFS(mem, vfs.OnOp(vfs.OpWrite, ".log", 3))
	l, err := Open(fs, "/p/topic-0", testConfig(), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(1, 0, 10, "a"))
	mustAppend(t, l, mkBatch(1, 0, 10, "a"))
	if _, err := l.Append(mkBatch(1, 0, 10, "a")); !errors.Is(err, vfs.ErrInjected) || !errors.Is(err, ErrFailed) {
		t.Fatalf("third write: %v", err)
	}
	if _, err := l.Append(mkBatch(1, 0, 10, "a")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	l.Close()
	l2 := openTest(t, mem, testConfig(), nil)
	defer l2.Close()
	if l2.LogEndOffset() != 2 {
		t.Fatalf("reopen after failure: LEO %d", l2.LogEndOffset())
	}
}

func TestDeletedSegmentStaysReadable(t *testing.T) {
	cfg := testConfig()
	cfg.FileDeleteDelayMs = 60_000
	b := mkBatch(1, 0, 10, "a")
	cfg.SegmentBytes = int64(len(b))
	cfg.RetentionBytes = 0
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	mustAppend(t, l, mkBatch(1, 0, 10, "a"))
	mustAppend(t, l, mkBatch(1, 0, 10, "a"))
	res, err := l.Read(0, 100, NoUpperBound)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := l.DeleteOldSegments(); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	data, err := res.AppendTo(nil)
	if err != nil || !batch.CRCValid(data) {
		t.Fatalf("read of a deleted segment: %v", err)
	}
}
