package segment

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

func mustEntry(t *testing.T, l *Log, index, term uint64, kind EntryKind, data []byte) AppendResult {
	t.Helper()
	r, err := l.AppendEntry(index, term, kind, data, AppendOptions{})
	if err != nil {
		t.Fatalf("append entry %d: %v", index, err)
	}
	return r
}

// An empty log whose first entries are internal has log end offset 0; a
// read at 0 returns nothing until data comes, then the data at offset 0.
func TestInternalEntriesTakeNoOffset(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	mustEntry(t, l, 1, 1, EntryEmpty, nil)
	mustEntry(t, l, 2, 1, EntryConfChangeV2, []byte("conf"))
	if _, err := l.AppendEntry(3, 2, EntryData, mkBatch(1, 1, 10, "d"), AppendOptions{}); !errors.Is(err, ErrRaftIndex) {
		t.Fatalf("a data entry opening a term: %v", err)
	}
	if _, err := l.AppendEntry(3, 0, EntryEmpty, nil, AppendOptions{}); !errors.Is(err, ErrRaftIndex) {
		t.Fatalf("an entry of a lower term: %v", err)
	}
	if leo := l.LogEndOffset(); leo != 0 {
		t.Fatalf("log end offset %d after internal entries", leo)
	}
	res, err := l.Read(0, 1<<20, NoUpperBound)
	if err != nil || res.Bytes != 0 || res.NextOffset != 0 {
		t.Fatalf("read at 0: %+v %v", res, err)
	}
	res.Release()
	r := mustEntry(t, l, 3, 1, EntryData, mkBatch(3, 1, 10, "d"))
	if r.BaseOffset != 0 || r.LastOffset != 2 || r.Index != 3 {
		t.Fatalf("data entry: %+v", r)
	}
	mustEntry(t, l, 4, 2, EntryEmpty, nil)
	for off := int64(0); off < 3; off++ {
		if i, err := l.IndexAtOffset(off); err != nil || i != 3 {
			t.Fatalf("IndexAtOffset(%d) = %d, %v", off, i, err)
		}
	}
	if _, err := l.IndexAtOffset(3); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("IndexAtOffset(log end offset): %v", err)
	}
	if hs := readAll(t, l, 0); len(hs) != 1 || hs[0].BaseOffset != 0 || hs[0].Internal() {
		t.Fatalf("read: %+v", hs)
	}
	if leo := l.LogEndOffset(); leo != 3 {
		t.Fatalf("log end offset %d, want 3 (the records produced)", leo)
	}
	// ScanHeaders (producer state) never sees internal batches either.
	n := 0
	if err := l.ScanHeaders(0, func(h batch.Header) error {
		if h.Internal() {
			t.Fatal("ScanHeaders passed an internal batch")
		}
		n++
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("scan: %d batches, %v", n, err)
	}
	// Timestamps: internal batches are in no index.
	if ts, off, ok, err := l.MaxTimestamp(); err != nil || !ok || ts != 3 || off != 2 {
		t.Fatalf("max timestamp %d at %d %v %v", ts, off, ok, err)
	}
	if off, _, ok, err := l.OffsetForTimestamp(0); err != nil || !ok || off != 0 {
		t.Fatalf("offset for timestamp 0: %d %v %v", off, ok, err)
	}
}

// A batch a client produces with attribute bit 7 set is refused: the bit
// is Sluice's.
func TestProducedBatchWithInternalBitRefused(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	b := mkBatch(2, 1, 10, "x")
	attrs := uint16(b[batch.OffAttributes])<<8 | uint16(b[batch.OffAttributes+1])
	attrs |= batch.InternalBit
	b[batch.OffAttributes], b[batch.OffAttributes+1] = byte(attrs>>8), byte(attrs)
	copy(b[batch.OffCRC:], be32(batch.Checksum(b)))
	if _, err := l.AppendWith(b, AppendOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("append of a batch with bit 7: %v", err)
	}
	if _, err := l.AppendEntry(1, 1, EntryData, b, AppendOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("data entry with bit 7: %v", err)
	}
	// An internal batch passed as data is refused too.
	if _, err := l.AppendEntry(1, 1, EntryData, batch.BuildInternal(0, 1, 1, nil), AppendOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("internal batch as data: %v", err)
	}
	if l.LastIndex() != 0 || l.LogEndOffset() != 0 {
		t.Fatal("a refused batch was appended")
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// A read holding file ranges keeps its bytes across a truncation of the
// segment it reads and the appends after it.
func TestTruncateUnderHeldRead(t *testing.T) {
	mem := vfs.NewMem()
	l := openTest(t, mem, testConfig(), nil)
	defer l.Close()
	for i := uint64(1); i <= 6; i++ {
		mustEntry(t, l, i, 0, EntryData, mkBatch(2, int64(i), 30, "old"))
	}
	res, err := l.Read(0, 1<<20, NoUpperBound)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := res.AppendTo(nil)
	leo, err := l.TruncateIndex(3)
	if err != nil || leo != 4 {
		t.Fatalf("truncate: %d %v", leo, err)
	}
	mustEntry(t, l, 3, 2, EntryEmpty, nil) // the new leader's
	for i := uint64(4); i <= 8; i++ {
		mustEntry(t, l, i, 2, EntryData, mkBatch(3, int64(i), 30, "new"))
	}
	after, err := res.AppendTo(nil)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the held read changed: %v", err)
	}
	res.Release()
	// The log itself has the new tail, and no copy is left behind.
	ents, err := l.Entries(1, 9, math.MaxUint64)
	if err != nil || len(ents) != 8 || ents[2].Term != 2 || ents[2].BaseOffset != 4 {
		t.Fatalf("entries: %d %v", len(ents), err)
	}
	names, _ := mem.List("/p/topic-0")
	for _, n := range names {
		if strings.HasSuffix(n, truncSuffix) {
			t.Fatalf("left %s", n)
		}
	}
	// Without readers, a truncation cuts the file in place.
	if _, err := l.TruncateIndex(5); err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, l)
}

// .raftindex files that are missing, torn or wrong are rebuilt from the
// .log; a log written before raft indexes (no .raftindex, a version 2
// checkpoint) opens with first index 1.
func TestRaftIndexRebuilt(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 400
	l := openTest(t, mem, cfg, nil)
	for i := uint64(1); i <= 20; i++ {
		kind, data := EntryData, mkBatch(2, int64(i), 20, "v")
		if i%4 == 1 {
			kind, data = EntryEmpty, nil
		}
		mustEntry(t, l, i, (i-1)/4+1, kind, data)
	}
	want := checkRaftLog(t, l)
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments", l.NumSegments())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := "/p/topic-0"
	var idx []string
	names, _ := mem.List(dir)
	for _, n := range names {
		if f, ok := ParseFileName(n); ok && f.Kind == KindRaftIndex {
			idx = append(idx, filepath.Join(dir, n))
		}
	}
	if len(idx) < 3 {
		t.Fatalf("raft index files %v", idx)
	}
	reopen := func(what string) {
		t.Helper()
		l := openTest(t, mem, cfg, nil)
		defer l.Close()
		got := checkRaftLog(t, l)
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i].Index != want[i].Index || got[i].Term != want[i].Term || got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("%s: entry %d differs", what, want[i].Index)
			}
		}
	}
	reopen("clean")
	mem.Remove(idx[0])
	reopen("missing")
	f, _ := mem.OpenReadWrite(idx[1])
	size, _ := f.Size()
	f.Truncate(size - 2)
	f.Close()
	reopen("torn")
	f, _ = mem.OpenReadWrite(idx[1])
	f.WriteAt([]byte{0, 0, 0, 9}, raftIndexHeaderSize+4)
	f.Close()
	reopen("wrong position")
	f, _ = mem.OpenReadWrite(idx[2])
	f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0, 99}, 8)
	f.Close()
	reopen("wrong first index")

	// Before raft indexes: no .raftindex files, a version 2 checkpoint.
	names, _ = mem.List(dir)
	for _, n := range names {
		if f, ok := ParseFileName(n); ok && f.Kind == KindRaftIndex {
			mem.Remove(filepath.Join(dir, n))
		}
	}
	c, ok, err := ReadCheckpoint(mem, dir)
	if err != nil || !ok {
		t.Fatal(err)
	}
	old := strings.Replace(string(c.encode()), "version 3", "version 2", 1)
	old = old[:strings.Index(old, "raft-start-offset")]
	old += "crc " + itoa(crc32c([]byte(old))) + "\n"
	w, _ := mem.Create(filepath.Join(dir, CheckpointName))
	w.WriteAt([]byte(old), 0)
	w.Close()
	if c, ok, _ := ReadCheckpoint(mem, dir); !ok || c.HasRaft {
		t.Fatalf("version 2 checkpoint read as %+v %v", c, ok)
	}
	reopen("version 2")
}

// Entries honours maxBytes as raft's maxSize: at least one entry.
func TestEntriesMaxBytes(t *testing.T) {
	l := openTest(t, vfs.NewMem(), testConfig(), nil)
	defer l.Close()
	for i := uint64(1); i <= 5; i++ {
		mustEntry(t, l, i, 0, EntryData, mkBatch(1, 1, 100, "v"))
	}
	one, _ := l.Entries(1, 6, 0)
	all, _ := l.Entries(1, 6, math.MaxUint64)
	two, _ := l.Entries(1, 6, 2*(uint64(len(all[0].Data))+entryOverhead))
	if len(one) != 1 || len(two) != 2 || len(all) != 5 {
		t.Fatalf("entries: %d %d %d", len(one), len(two), len(all))
	}
	for _, tc := range []struct {
		lo, hi uint64
		want   error
	}{{0, 2, ErrCompacted}, {1, 7, ErrUnavailable}, {3, 3, nil}} {
		if _, err := l.Entries(tc.lo, tc.hi, math.MaxUint64); !errors.Is(err, tc.want) && (err != nil || tc.want != nil) {
			t.Fatalf("entries [%d, %d): %v, want %v", tc.lo, tc.hi, err, tc.want)
		}
	}
	if _, err := l.Term(7); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := l.AppendEntry(0, 1, EntryEmpty, nil, AppendOptions{}); !errors.Is(err, ErrRaftIndex) {
		t.Fatal(err)
	}
	if _, err := l.AppendEntry(6, math.MaxInt32+1, EntryEmpty, nil, AppendOptions{}); !errors.Is(err, ErrRaftIndex) {
		t.Fatal(err)
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// A torn write that changes only a batch's partitionLeaderEpoch (outside
// the CRC) in a raft log is cut by recovery; a log not written as a raft
// log keeps its Kafka leader epochs as they are.
func TestRecoveryChecksRaftTerms(t *testing.T) {
	for _, raftLog := range []bool{true, false} {
		mem := vfs.NewMem()
		l := openTest(t, mem, testConfig(), nil)
		if raftLog {
			mustEntry(t, l, 1, 1, EntryEmpty, nil)
			for i := uint64(2); i <= 4; i++ {
				mustEntry(t, l, i, 1, EntryData, mkBatch(1, 1, 10, "v"))
			}
		} else {
			for e := int32(1); e <= 4; e++ {
				if _, err := l.AppendWith(mkBatch(1, 1, 10, "v"), AppendOptions{SetLeaderEpoch: true, LeaderEpoch: e}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		// The last batch's epoch field is garbled.
		l.mu.RLock()
		s := l.active()
		pos := int64(s.rpos[len(s.rpos)-1] & raftPosMask)
		l.mu.RUnlock()
		f, _ := mem.OpenReadWrite(filepath.Join("/p/topic-0", MakeFileName(0, KindLog)))
		f.WriteAt([]byte{0, 0, 0x30, 0x39}, pos+batch.OffLeaderEpoch)
		f.Sync()
		f.Close()
		crashed := mem.CrashClone(vfs.CrashOptions{})
		l.Close()
		cl := openTest(t, crashed, testConfig(), nil)
		want := uint64(4)
		if raftLog {
			want = 3
		}
		if got := cl.LastIndex(); got != want {
			t.Fatalf("raft log %v: last index %d after recovery, want %d", raftLog, got, want)
		}
		checkRaftLog(t, cl)
		cl.Close()
	}
}
