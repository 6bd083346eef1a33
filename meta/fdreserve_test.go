package meta

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// The process runs out of descriptors (connections or partitions used
// RLIMIT_NOFILE up) while metadata changes go on and Pebble rotates its
// WAL. The test's FS models the descriptor table: with none free, opening
// fails with EMFILE; a spare the store gives back frees one. The store
// must never let Pebble meet EMFILE where it is fatal (before, the process
// aborted with "sync: unlock of unlocked mutex"): changes succeed on the
// spares, then fail cleanly with ErrStorage, and resume once descriptors
// are free again.
func TestOutOfDescriptorsFailsCleanlyAndRecovers(t *testing.T) {
	mem := vfs.NewMem()
	var exhausted atomic.Bool
	var free atomic.Int64 // descriptors freed while exhausted
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !exhausted.Load() {
			return nil
		}
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpOpen, errorfs.OpOpenDir, errorfs.OpReuseForWrite, errorfs.OpLock, errorfs.OpList:
			if free.Add(-1) < 0 {
				free.Add(1)
				return fmt.Errorf("open %s: %w", op.Path, syscall.EMFILE)
			}
		}
		return nil
	}))
	opts := testOptions(1)
	opts.FS = fs
	opts.ReserveBytes = 64 << 10
	s := mustOpen(t, "/meta", opts)
	defer s.Close()
	s.fdr.mu.Lock()
	s.fdr.onRelease = func() { free.Add(1) }
	s.fdr.openSpare = func() (*os.File, error) {
		if exhausted.Load() {
			if free.Add(-1) < 0 {
				free.Add(1)
				return nil, syscall.EMFILE
			}
		}
		return os.Open(os.DevNull)
	}
	s.fdr.mu.Unlock()
	exhausted.Store(true)
	s.fdr.Close() // the process's own spares are what the model frees
	big := map[string]string{"k": strings.Repeat("v", 4<<10)}
	refused := 0
	for i := range 3000 {
		_, err := s.CreateTopic(fmt.Sprintf("t%d", i), 1, 1, big)
		if err != nil {
			if !errors.Is(err, ErrStorage) {
				t.Fatalf("create %d: %v, want ErrStorage", i, err)
			}
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no change was refused: the test did not run out of descriptors")
	}
	exhausted.Store(false)
	if _, err := s.CreateTopic("after", 1, 1, nil); err != nil {
		t.Fatalf("a change once descriptors are free again: %v", err)
	}
	if _, ok := s.Topic("after"); !ok {
		t.Fatal("the change after recovery is not there")
	}
}
