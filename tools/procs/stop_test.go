package procs

import (
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// spinnerEnv names the shared file of a child running as the spinner
// (TestSpinnerHelper).
const spinnerEnv = "PROCS_TEST_SPINNER"

// mapCounter maps the first 8 bytes of path, shared with the other
// process mapping it.
func mapCounter(t testing.TB, path string) *uint64 {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	return (*uint64)(unsafe.Pointer(&mem[0]))
}

// TestSpinnerHelper is the child of TestStop: goroutines that wake every
// 100 µs and bump a counter in a file both map, as a broker's threads
// wake for its network and timers. Skipped when not run as the child.
func TestSpinnerHelper(t *testing.T) {
	path := os.Getenv(spinnerEnv)
	if path == "" {
		t.Skip("the child of TestStop")
	}
	ctr := mapCounter(t, path)
	for range 4 {
		go func() {
			for {
				time.Sleep(100 * time.Microsecond)
				atomic.AddUint64(ctr, 1)
			}
		}()
	}
	select {}
}

// TestStop: once Stop returns, the process runs no more code: the
// spinner's counter does not move until SIGCONT. A bare SIGSTOP fails
// this within a few dozen rounds on Linux (kill returns before every
// thread stopped); Stop must never.
func TestStop(t *testing.T) {
	path := t.TempDir() + "/counter"
	if err := os.WriteFile(path, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	ctr := mapCounter(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpinnerHelper$")
	cmd.Env = append(os.Environ(), spinnerEnv+"="+path)
	p, err := Start(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(5 * time.Second) })
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint64(ctr) == 0 {
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("the spinner never counted: %v", p.Err())
		}
		time.Sleep(time.Millisecond)
	}
	const rounds = 200
	for i := range rounds {
		if err := p.Stop(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		at := atomic.LoadUint64(ctr)
		time.Sleep(2 * time.Millisecond)
		if now := atomic.LoadUint64(ctr); now != at {
			t.Fatalf("round %d: the counter moved from %d to %d after Stop returned", i, at, now)
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for start := atomic.LoadUint64(ctr); atomic.LoadUint64(ctr) == start; {
			time.Sleep(100 * time.Microsecond) // running again
		}
	}
}

// TestStopExited: Stop of a process that exited is an error.
func TestStopExited(t *testing.T) {
	p, err := Start(exec.Command("true"), nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if err := p.Stop(time.Second); err == nil {
		t.Fatal("Stop of an exited process: no error")
	}
}
