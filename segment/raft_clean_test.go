package segment

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// raftCompactLog writes a compacted topic's raft log: leaders' empty
// entries and configuration changes between keyed data entries, over
// several segments, all synced. It returns the entries written.
func raftCompactLog(t *testing.T, l *Log, rng *rand.Rand) []Entry {
	t.Helper()
	term := uint64(0)
	for i := uint64(1); i <= 60; i++ {
		kind, data := EntryData, []byte(nil)
		switch {
		case i == 1 || rng.IntN(8) == 0:
			term++
			kind = EntryEmpty
		case rng.IntN(10) == 0:
			kind, data = EntryConfChange, []byte("cc")
		default:
			var recs []batch.Record
			for j := 0; j < 1+rng.IntN(3); j++ {
				recs = append(recs, batch.Record{Timestamp: 1, Key: []byte(fmt.Sprint("k", rng.IntN(6))), Value: []byte(fmt.Sprint("v", i))})
			}
			data = batch.Build(batch.NewBuildOptions(), recs)
		}
		if _, err := l.AppendEntry(i, term, kind, data, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(12) == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	ents, err := l.Entries(1, l.LastIndex()+1, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

// TestCleanRaftLogCrashEveryOp cleans a raft log below a retain bound,
// crashing at each mutating file operation of the clean in turn: after
// recovery the raft log starts at or after where it did and at or below
// the bound, its entries are those written, and reads never meet an
// internal batch (the positions of the internal batches the cleaner kept
// in its rewritten segments are right).
func TestCleanRaftLogCrashEveryOp(t *testing.T) {
	mutating := map[vfs.Op]bool{vfs.OpCreate: true, vfs.OpRemove: true, vfs.OpRename: true, vfs.OpSyncDir: true,
		vfs.OpWrite: true, vfs.OpTruncate: true, vfs.OpSync: true}
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
		rng := rand.New(rand.NewPCG(5, 5))
		clock := newClock()
		cfg := compactConfig(rng)
		cfg.SegmentBytes = 500
		l, err := openCompact(vfs.NewErrorFS(mem, inj), cfg, clock)
		if err != nil {
			t.Fatal(err)
		}
		want := raftCompactLog(t, l, rng)
		bound := uint64(40)
		l.SetRaftRetainFrom(bound)
		armed = true
		_, cerr := l.Clean(NoUpperBound)
		armed = false
		done := crashed == nil
		if done {
			if cerr != nil {
				t.Fatal(cerr)
			}
			crashed = mem.CrashClone(vfs.CrashOptions{})
		}
		l.Close()
		cl, err := openCompact(crashed, cfg, clock)
		if err != nil {
			t.Fatalf("crash at op %d: open: %v", crashAt, err)
		}
		got := checkRaftLog(t, cl)
		first := cl.FirstIndex()
		if first > bound || cl.LastIndex() != want[len(want)-1].Index {
			t.Fatalf("crash at op %d: raft log [%d, %d], bound %d, want last %d", crashAt, first, cl.LastIndex(), bound, want[len(want)-1].Index)
		}
		for _, e := range got {
			w := want[e.Index-1]
			if e.Term != w.Term || e.Kind != w.Kind || !bytes.Equal(e.Data, w.Data) {
				t.Fatalf("crash at op %d: entry %d differs from the one written", crashAt, e.Index)
			}
		}
		if term, err := cl.Term(first - 1); err != nil || (first > 1 && term != want[first-2].Term) {
			t.Fatalf("crash at op %d: Term(%d) = %d, %v", crashAt, first-1, term, err)
		}
		// Reads from the log start never meet an internal batch.
		readAll(t, cl, cl.LogStartOffset())
		cl.Close()
		if done {
			if crashAt < 3 || first == 1 {
				t.Fatalf("the clean did nothing: %d operations, first index %d", crashAt, first)
			}
			t.Logf("%d crash points, first index %d after the clean", crashAt-1, first)
			return
		}
	}
}
