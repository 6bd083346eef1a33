package meta

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// fullFS is an in-memory FS whose writes fail with ENOSPC while full is
// set; removing the reserve file frees the disk when freeOnReserve is set
// (the reserve's space is what the writes need).
type fullFS struct {
	mem           *vfs.MemFS
	full          atomic.Bool
	freeOnReserve atomic.Bool
}

func newFullFS() (*fullFS, vfs.FS) {
	f := &fullFS{mem: vfs.NewMem()}
	return f, errorfs.Wrap(f.mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpRemove && strings.HasSuffix(op.Path, reserveName) && f.freeOnReserve.Load() {
			f.full.Store(false)
			return nil
		}
		if f.full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && op.Kind != errorfs.OpFileClose && op.Kind != errorfs.OpRemove && op.Kind != errorfs.OpRemoveAll {
			return fmt.Errorf("%d %s: %w", op.Kind, op.Path, syscall.ENOSPC)
		}
		return nil
	}))
}

// withDeadline runs fn and fails the test if it does not return in time
// (a wedged store).
func withDeadline(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no return within 30s (the store is wedged)", what)
	}
}

// TestDiskFullFailsCleanlyAndRecovers: the write that finds the disk full
// uses the reserve and succeeds; while the disk stays full every change
// fails with ErrStorage and leaves nothing behind; once space returns the
// same store accepts changes again (it used to panic, then wedge), and a
// reopen finds exactly the changes that succeeded.
func TestDiskFullFailsCleanlyAndRecovers(t *testing.T) {
	ffs, fs := newFullFS()
	opts := testOptions(1)
	opts.FS = fs
	opts.ReserveBytes = 64 << 10
	s := mustOpen(t, "/meta", opts)
	defer func() { s.Close() }()
	s.reserveRetry = 0
	if _, err := ffs.mem.Stat("/meta/" + reserveName); err != nil {
		t.Fatalf("no reserve file: %v", err)
	}
	if _, err := s.CreateTopic("before", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	ffs.freeOnReserve.Store(true)
	ffs.full.Store(true)
	big := map[string]string{"k": strings.Repeat("v", 4<<10)}
	for i := 0; ; i++ { // until the memtable's WAL has rotated: the reserve absorbs it
		if _, err := s.CreateTopic(fmt.Sprintf("r%d", i), 1, 1, big); err != nil {
			t.Fatalf("create %d on a full disk with the reserve: %v", i, err)
		}
		if _, err := ffs.mem.Stat("/meta/" + reserveName); err != nil {
			break
		}
		if i == 1000 {
			t.Fatal("the disk-full callback never released the reserve")
		}
	}
	ffs.full.Store(true) // the disk fills again (partition logs)
	withDeadline(t, "changes on a full disk", func() {
		for i := range 50 {
			if _, err := s.CreateTopic(fmt.Sprintf("full%d", i), 1, 1, big); !errors.Is(err, ErrStorage) {
				t.Errorf("create %d on a full disk: %v, want ErrStorage", i, err)
				return
			}
			if _, err := s.AllocateProducerIDs(1000); !errors.Is(err, ErrStorage) {
				t.Errorf("allocate on a full disk: %v", err)
				return
			}
		}
	})
	if _, ok := s.Topic("full0"); ok {
		t.Fatal("a failed create is visible")
	}
	ffs.full.Store(false)
	var first int64
	withDeadline(t, "changes once space returned", func() {
		if _, err := s.CreateTopic("after", 1, 1, nil); err != nil {
			t.Errorf("create once space returned: %v", err)
		}
		var err error
		if first, err = s.AllocateProducerIDs(1000); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if _, err := ffs.mem.Stat("/meta/" + reserveName); err != nil {
		t.Fatalf("the reserve was not written again: %v", err)
	}
	checkConsistent(t, s)
	want := memState(s)
	s.Close()
	opts.FS = ffs.mem
	s = mustOpen(t, "/meta", opts)
	if got := memState(s); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	if got, _ := s.AllocateProducerIDs(1); got < first+1000 {
		t.Fatalf("producer id %d reused after a reopen (block at %d)", got, first)
	}
	for _, name := range []string{"before", "r0", "after"} {
		if _, ok := s.Topic(name); !ok {
			t.Fatalf("topic %s lost", name)
		}
	}
}

// TestDiskFullWithoutReserve: with no reserve Pebble itself meets ENOSPC
// (it panics, and its commit pipeline is dead): changes still fail with
// ErrStorage, never panic nor wedge, and once space returns the store
// reopens Pebble by itself.
func TestDiskFullWithoutReserve(t *testing.T) {
	ffs, fs := newFullFS()
	opts := testOptions(1)
	opts.FS = fs
	opts.ReserveBytes = -1
	s := mustOpen(t, "/meta", opts)
	defer func() { s.Close() }()
	if _, err := s.CreateTopic("before", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	ffs.full.Store(true)
	big := map[string]string{"k": strings.Repeat("v", 4<<10)}
	withDeadline(t, "changes on a full disk", func() {
		for i := range 50 {
			if _, err := s.CreateTopic(fmt.Sprintf("full%d", i), 1, 1, big); !errors.Is(err, ErrStorage) {
				t.Errorf("create %d on a full disk: %v, want ErrStorage", i, err)
				return
			}
		}
	})
	if _, ok := s.Topic("full0"); ok {
		t.Fatal("a failed create is visible")
	}
	ffs.full.Store(false)
	withDeadline(t, "a change once space returned", func() {
		if _, err := s.CreateTopic("after", 1, 1, nil); err != nil {
			t.Errorf("create once space returned: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	checkConsistent(t, s)
}

// TestCreateTopicsOneCommit: many topics in one call are one Pebble commit
// (one log record each), and invalid ones fail alone.
func TestCreateTopicsOneCommit(t *testing.T) {
	s, _ := openTemp(t)
	specs := make([]TopicSpec, 0, 2001)
	for i := range 2000 {
		specs = append(specs, TopicSpec{Name: fmt.Sprintf("t%05d", i), Partitions: 1, ReplicationFactor: 1})
	}
	specs = append(specs, TopicSpec{Name: "t00001", Partitions: 1, ReplicationFactor: 1}, TopicSpec{Name: "bad/name", Partitions: 1, ReplicationFactor: 1})
	commits := s.commits
	ts, errs, err := s.CreateTopics(specs)
	if err != nil {
		t.Fatal(err)
	}
	if s.commits != commits+1 {
		t.Fatalf("%d commits, want 1", s.commits-commits)
	}
	for i := range 2000 {
		if errs[i] != nil || ts[i].Name != specs[i].Name {
			t.Fatalf("topic %d: %v %v", i, ts[i], errs[i])
		}
	}
	if !errors.Is(errs[2000], ErrTopicExists) || !errors.Is(errs[2001], ErrInvalidTopicName) {
		t.Fatalf("errors %v %v", errs[2000], errs[2001])
	}
	if len(s.Topics()) != 2000 || s.Offset() != 2000 {
		t.Fatalf("%d topics, offset %d", len(s.Topics()), s.Offset())
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
}
