package meta

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSaveRestoreState: a store that restores another's exported state and
// then applies the same later entries ends byte-identical to it; entries
// below the restored offset are skipped; the restored store reopens,
// rebuilds and stays consistent.
func TestSaveRestoreState(t *testing.T) {
	f := newFakeRaft(t)
	fs := vfs.NewMem()
	c, _ := f.open(t, fs, "/c", true, 1)
	replicatedWorkload(t, c)
	f.stop()
	f.mu.Lock()
	entries := slices.Clone(f.entries)
	f.mu.Unlock()
	if len(entries) < 8 {
		t.Fatalf("%d entries", len(entries))
	}
	apply := func(s *Store, es []fakeEntry) {
		t.Helper()
		for _, e := range es {
			if err := s.ApplyReplicated(e.first, e.recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := testOptions(2)
	opts.FS = fs
	a := mustOpen(t, "/a", opts)
	defer func() { a.Close() }()
	b := mustOpen(t, "/b", opts)
	defer func() { b.Close() }()
	half, quarter := len(entries)/2, len(entries)/4
	apply(a, entries[:quarter])
	old, err := a.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	apply(a, entries[quarter:half])
	apply(b, entries[:2]) // b has a local history of its own
	data, err := a.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	local := b.Offset()
	if err := b.RestoreState(data); err != nil {
		t.Fatal(err)
	}
	if b.ReplicatedOffset() != a.ReplicatedOffset() || b.Offset() != local+1 {
		t.Fatalf("after the restore: replicated offset %d (want %d), local offset %d (want %d)", b.ReplicatedOffset(), a.ReplicatedOffset(), b.Offset(), local+1)
	}
	if dumpState(t, a) != dumpState(t, b) || memState(a) != memState(b) {
		t.Fatalf("restored state differs:\n%s\nfrom:\n%s", dumpState(t, b), dumpState(t, a))
	}
	checkConsistent(t, b)
	if _, err := b.Records(0); !errors.Is(err, ErrRestored) {
		t.Fatalf("Records(0) after a restore: %v", err)
	}
	// An older state, or the same again, changes nothing.
	commits := b.Commits()
	if err := b.RestoreState(old); err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreState(data); err != nil {
		t.Fatal(err)
	}
	if b.Commits() != commits {
		t.Fatal("restoring an older or equal state committed something")
	}
	// The applier delivers entries again from below the restored offset:
	// skipped.
	apply(b, entries[quarter:half])
	if b.Commits() != commits {
		t.Fatal("entries below the restored offset applied")
	}
	// Damaged data is refused, nothing changes.
	bad := slices.Clone(data)
	bad[len(bad)/2] ^= 1
	if err := b.RestoreState(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged state: %v", err)
	}
	if err := b.RestoreState(data[:len(data)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated state: %v", err)
	}

	b = reopen(t, b, "/b")
	if b.Offset() != local+1 || b.ReplicatedOffset() != a.ReplicatedOffset() {
		t.Fatalf("after reopen: local offset %d, replicated %d", b.Offset(), b.ReplicatedOffset())
	}
	rebuildUnchanged(t, b)
	apply(a, entries[half:])
	apply(b, entries[quarter:]) // straddles the restored offset
	if dumpState(t, a) != dumpState(t, b) || memState(a) != memState(b) || a.ReplicatedOffset() != b.ReplicatedOffset() {
		t.Fatalf("states differ after the same later entries:\n%s\nand:\n%s", dumpState(t, a), dumpState(t, b))
	}
	if dumpState(t, c) != dumpState(t, b) {
		t.Fatal("the restored store differs from the controller")
	}
	if recs, err := b.Records(local + 1); err != nil || uint64(len(recs)) != b.Offset()-local-1 {
		t.Fatalf("Records after the restore: %d records, %v", len(recs), err)
	}
	checkConsistent(t, a)
	checkConsistent(t, b)
	b = reopen(t, b, "/b")
	rebuildUnchanged(t, b)
	// A second restore, on top of a restored store.
	data2, err := b.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	e := fresh(t, fs, "/e", opts)
	if err := e.RestoreState(data2); err != nil {
		t.Fatal(err)
	}
	if dumpState(t, e) != dumpState(t, c) || e.ReplicatedOffset() != c.ReplicatedOffset() || e.Offset() != 1 {
		t.Fatalf("a fresh store's restore: offsets %d %d", e.ReplicatedOffset(), e.Offset())
	}
	rebuildUnchanged(t, e)
}

func fresh(t *testing.T, fs vfs.FS, dir string, opts Options) *Store {
	t.Helper()
	opts.FS = fs
	s := mustOpen(t, dir, opts)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRestoreStateDurable: a restore that returned survives a power cut
// (unsynced data lost), whole and consistent.
func TestRestoreStateDurable(t *testing.T) {
	f := newFakeRaft(t)
	mem := vfs.NewMem()
	c, _ := f.open(t, mem, "/c", true, 1)
	replicatedWorkload(t, c)
	f.stop()
	data, err := c.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewCrashableMem()
	opts := testOptions(2)
	opts.FS = fs
	s := mustOpen(t, "/s", opts)
	f.mu.Lock()
	e := f.entries[0]
	f.mu.Unlock()
	if err := s.ApplyReplicated(e.first, e.recs); err != nil {
		t.Fatal(err)
	}
	before := dumpState(t, s)
	if err := s.RestoreState(data); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
	s.Close()
	opts.FS = crashed
	s = mustOpen(t, "/s", opts)
	defer s.Close()
	switch got := dumpState(t, s); {
	case got == dumpState(t, c):
		if s.ReplicatedOffset() != c.ReplicatedOffset() {
			t.Fatalf("restored state at replicated offset %d, want %d", s.ReplicatedOffset(), c.ReplicatedOffset())
		}
	default:
		t.Fatalf("a synced restore was lost or torn:\n%s\nbefore it:\n%s", got, before)
	}
	checkConsistent(t, s)
}
