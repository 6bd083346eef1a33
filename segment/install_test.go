package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

func TestInstallMarkerRoundTrip(t *testing.T) {
	m := installMarker{index: 41, term: 3, nextOffset: 90, logStartOffset: 12,
		files: []SnapshotFile{{Base: 0, Size: 700, CRC: 0xdeadbeef}, {Base: 40, Size: 12, CRC: 7}}}
	b := m.encode()
	got, err := decodeInstallMarker(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.index != m.index || got.term != m.term || got.nextOffset != m.nextOffset || got.logStartOffset != m.logStartOffset || fmt.Sprint(got.files) != fmt.Sprint(m.files) {
		t.Fatalf("got %+v, want %+v", got, m)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := decodeInstallMarker(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := decodeInstallMarker(b[:len(b)-1]); err == nil {
		t.Fatal("a short marker decoded")
	}
}

// compactedLeader builds a compacted raft log on its own FS, cleaned below
// index 40, and returns it with its snapshot at FirstIndex-1.
func compactedLeader(t *testing.T, clock *testClock) (l *Log, files []SnapshotFile, index, term uint64, next int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 5))
	cfg := compactConfig(rng)
	cfg.SegmentBytes = 500
	l, err := openCompact(vfs.NewMem(), cfg, clock)
	if err != nil {
		t.Fatal(err)
	}
	raftCompactLog(t, l, rng)
	l.SetRaftRetainFrom(40)
	if _, err := l.Clean(NoUpperBound); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() == 1 {
		t.Fatal("the clean took nothing out of the raft log")
	}
	if files, err = l.SnapshotFiles(); err != nil || len(files) == 0 {
		t.Fatalf("snapshot files %v, %v", files, err)
	}
	index = l.FirstIndex() - 1
	if term, err = l.Term(index); err != nil {
		t.Fatal(err)
	}
	if next, err = l.OffsetAfter(index); err != nil {
		t.Fatal(err)
	}
	return l, files, index, term, next
}

// stage copies the leader's snapshot files into dir of fs as a follower's
// transfer does.
func stage(t *testing.T, leader *Log, files []SnapshotFile, fs vfs.FS, dir string) {
	t.Helper()
	for _, f := range files {
		r, err := leader.OpenSnapshotFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		w, err := fs.Create(StagedSnapshotPath(dir, f.Base))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}

// followerLog opens a follower's log holding a few entries of its own (a
// divergent past the install replaces).
func followerLog(t *testing.T, fs vfs.FS, cfg Config, clock *testClock) *Log {
	t.Helper()
	l, err := openCompact(fs, cfg, clock)
	if err != nil {
		t.Fatal(err)
	}
	if l.LastIndex() == 0 {
		mustEntry(t, l, 1, 1, EntryEmpty, nil)
		mustEntry(t, l, 2, 1, EntryData, mkBatch(3, 1, 10, "old"))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		mustEntry(t, l, 3, 1, EntryData, mkBatch(2, 1, 10, "old"))
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// sameBelow checks that f serves the same bytes as leader from the log
// start offset to end.
func sameBelow(t *testing.T, leader, f *Log, end int64) {
	t.Helper()
	if f.LogStartOffset() != leader.LogStartOffset() {
		t.Fatalf("log start offset %d, leader's %d", f.LogStartOffset(), leader.LogStartOffset())
	}
	a, _, err := leader.ReadBytes(nil, leader.LogStartOffset(), math.MaxInt32, end)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := f.ReadBytes(nil, f.LogStartOffset(), math.MaxInt32, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("below %d the follower serves %d bytes, the leader %d (equal %v)", end, len(b), len(a), bytes.Equal(a, b))
	}
}

func TestInstallSnapshot(t *testing.T) {
	clock := newClock()
	leader, files, index, term, next := compactedLeader(t, clock)
	defer leader.Close()
	fs := vfs.NewMem()
	f := followerLog(t, fs, leader.Config(), clock)
	stage(t, leader, files, fs, f.Dir())
	if err := f.InstallSnapshot(files, index, term, next, leader.LogStartOffset()); err != nil {
		t.Fatal(err)
	}
	check := func(f *Log) {
		t.Helper()
		if f.FirstIndex() != index+1 || f.LastIndex() != index || f.LogEndOffset() != next {
			t.Fatalf("raft log [%d, %d], log end %d; want first %d, log end %d", f.FirstIndex(), f.LastIndex(), f.LogEndOffset(), index+1, next)
		}
		if got, err := f.Term(index); err != nil || got != term {
			t.Fatalf("Term(%d) = %d, %v; want %d", index, got, err, term)
		}
		sameBelow(t, leader, f, next)
	}
	check(f)
	// The raft log continues from the snapshot as ordinary entries.
	ents, err := leader.Entries(index+1, leader.LastIndex()+1, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := f.AppendEntry(e.Index, e.Term, e.Kind, bytes.Clone(e.Data), AppendOptions{}); err != nil {
			t.Fatalf("append %d: %v", e.Index, err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	sameBelow(t, leader, f, leader.LogEndOffset())
	f.Close()
	// Reopened: the same log, and no staging left.
	f = followerLog(t, fs, leader.Config(), clock)
	defer f.Close()
	sameBelow(t, leader, f, leader.LogEndOffset())
	if f.FirstIndex() != index+1 || f.LastIndex() != leader.LastIndex() {
		t.Fatalf("reopened raft log [%d, %d]", f.FirstIndex(), f.LastIndex())
	}
	names, _ := fs.List(f.Dir())
	for _, n := range names {
		if n == InstallMarkerName || bytes.HasSuffix([]byte(n), []byte(stagedSuffix)) {
			t.Fatalf("%s left behind: %v", n, names)
		}
	}
}

func TestInstallSnapshotRefusesMismatch(t *testing.T) {
	clock := newClock()
	leader, files, index, term, next := compactedLeader(t, clock)
	defer leader.Close()
	fs := vfs.NewMem()
	f := followerLog(t, fs, leader.Config(), clock)
	defer f.Close()
	stage(t, leader, files, fs, f.Dir())
	bad := append([]SnapshotFile(nil), files...)
	bad[0].CRC ^= 1
	if err := f.InstallSnapshot(bad, index, term, next, leader.LogStartOffset()); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("a bad checksum: %v", err)
	}
	if err := fs.Remove(StagedSnapshotPath(f.Dir(), files[len(files)-1].Base)); err != nil {
		t.Fatal(err)
	}
	if err := f.InstallSnapshot(files, index, term, next, leader.LogStartOffset()); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("a missing file: %v", err)
	}
	if f.LastIndex() != 3 || f.FirstIndex() != 1 {
		t.Fatalf("a refused install changed the log: [%d, %d]", f.FirstIndex(), f.LastIndex())
	}
	// The leader refuses to serve a file that is not (or no longer) one
	// of its segments below the raft start.
	if _, err := leader.OpenSnapshotFile(SnapshotFile{Base: files[0].Base, Size: files[0].Size + 1}); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("a wrong size: %v", err)
	}
	if _, err := leader.OpenSnapshotFile(SnapshotFile{Base: next}); !errors.Is(err, ErrSnapshotFile) {
		t.Fatalf("a raft segment: %v", err)
	}
}

// TestInstallSnapshotCrashEveryOp crashes at each mutating file operation
// of an install in turn: the reopened log is either the old one (its
// three entries) or the installed one, and the staging is gone either
// way.
func TestInstallSnapshotCrashEveryOp(t *testing.T) {
	mutating := map[vfs.Op]bool{vfs.OpCreate: true, vfs.OpRemove: true, vfs.OpRename: true, vfs.OpSyncDir: true,
		vfs.OpWrite: true, vfs.OpTruncate: true, vfs.OpSync: true}
	clock := newClock()
	leader, files, index, term, next := compactedLeader(t, clock)
	defer leader.Close()
	sawOld, sawNew := false, false
	for crashAt := 1; ; crashAt++ {
		var (
			armed   bool
			count   int
			crashed *vfs.MemFS
			mem     = vfs.NewMem()
		)
		inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
			if !armed || !mutating[op] {
				return nil
			}
			if count++; count == crashAt {
				crashed = mem.CrashClone(vfs.CrashOptions{})
				return fmt.Errorf("%w: crash here", vfs.ErrInjected)
			}
			return nil
		})
		fs := vfs.NewErrorFS(mem, inj)
		f := followerLog(t, fs, leader.Config(), clock)
		stage(t, leader, files, fs, f.Dir())
		armed = true
		ierr := f.InstallSnapshot(files, index, term, next, leader.LogStartOffset())
		armed = false
		done := crashed == nil
		if done {
			if ierr != nil {
				t.Fatal(ierr)
			}
			crashed = mem.CrashClone(vfs.CrashOptions{})
		}
		f.Close()
		cl, err := openCompact(crashed, leader.Config(), clock)
		if err != nil {
			t.Fatalf("crash at op %d: open: %v", crashAt, err)
		}
		switch {
		case cl.FirstIndex() == 1 && cl.LastIndex() == 3:
			sawOld = true
			if cl.LogEndOffset() != 5 {
				t.Fatalf("crash at op %d: the old log ends at %d", crashAt, cl.LogEndOffset())
			}
		case cl.FirstIndex() == index+1 && cl.LastIndex() == index && cl.LogEndOffset() == next:
			sawNew = true
			sameBelow(t, leader, cl, next)
		default:
			t.Fatalf("crash at op %d: neither log: raft [%d, %d], log end %d", crashAt, cl.FirstIndex(), cl.LastIndex(), cl.LogEndOffset())
		}
		names, _ := crashed.List(cl.Dir())
		for _, n := range names {
			if n == InstallMarkerName || bytes.HasSuffix([]byte(n), []byte(stagedSuffix)) {
				t.Fatalf("crash at op %d: %s left after recovery", crashAt, n)
			}
		}
		cl.Close()
		if done {
			if !sawOld || !sawNew {
				t.Fatalf("crash points saw old %v, installed %v", sawOld, sawNew)
			}
			t.Logf("%d crash points", crashAt-1)
			return
		}
	}
}

// TestSnapshotReaderOutlivesClean: a file served for a snapshot stays
// readable, with the bytes its checksum covers, while the cleaner
// replaces and deletes its segment (file.delete.delay.ms 0).
func TestSnapshotReaderOutlivesClean(t *testing.T) {
	clock := newClock()
	l, files, _, _, _ := compactedLeader(t, clock)
	defer l.Close()
	r, err := l.OpenSnapshotFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Newer values of every key, then a clean of everything applied:
	// the old cleaned segments are rewritten.
	last, term := l.LastIndex(), uint64(100)
	mustEntry(t, l, last+1, term, EntryEmpty, nil)
	for i := uint64(2); i < 40; i++ {
		mustEntry(t, l, last+i, term, EntryData, keyedEntry(fmt.Sprint("k", i%6), "new"))
		if i%8 == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.SetRaftRetainFrom(l.LastIndex())
	if _, err := l.Clean(NoUpperBound); err != nil {
		t.Fatal(err)
	}
	now, err := l.SnapshotFiles()
	if err != nil {
		t.Fatal(err)
	}
	if now[0] == files[0] {
		t.Fatalf("the clean left the first segment below the raft start as it was: %v", now)
	}
	b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
	if err != nil || int64(len(b)) != files[0].Size || crc32c(b) != files[0].CRC {
		t.Fatalf("the held file reads %d bytes (%v), crc ok %v", len(b), err, crc32c(b) == files[0].CRC)
	}
}

func keyedEntry(k, v string) []byte {
	return batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Key: []byte(k), Value: []byte(v)}})
}
