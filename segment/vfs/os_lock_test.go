package vfs

import (
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Closing a lock and taking it again succeeds while the process starts
// other processes: a child not yet past its exec holds a copy of the
// closed descriptor, and Close's explicit unlock frees the lock all the
// same (without it Lock failed with ErrLocked within a few tries: "log.dirs
// locked" on a broker restart in tests that ran kcat or a browser beside
// it). 3,000 Close and Lock pairs against four goroutines starting
// processes.
func TestOSLockRetakenWhileForking(t *testing.T) {
	sh, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true command")
	}
	name := filepath.Join(t.TempDir(), ".lock")
	l, err := Default.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				exec.Command(sh).Run()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 3000 {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if l, err = Default.Lock(name); err != nil {
			if errors.Is(err, ErrLocked) {
				t.Fatalf("re-Lock %d after Close while forking: %v", i, err)
			}
			t.Fatal(err)
		}
	}
	l.Close()
}
