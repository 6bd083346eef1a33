package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binDir string // the temporary folder of the built binary

// TestMain removes the built binary and makes sure no broker process
// outlives the tests: every process the harness started must have been
// reaped by its test's cleanup; one that was not is killed here and the
// run fails.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := leftoverProcesses(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "clustertest: processes left running after the tests (killed now): %v\n", left)
		code = 1
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildSluice builds the sluice binary once per test binary (without
// -race: the brokers are the system under test, not this package). It
// builds in the server module's folder, so it works with or without the
// go.work at the root.
var buildSluice = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sluice-clustertest")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = filepath.Join("..", "..", "server")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice in %s: %v\n%s", cmd.Dir, err, out)
	}
	return bin, nil
})

func sluiceBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Every broker process is started from one goroutine locked to its OS
// thread, with Pdeathsig set: Linux kills the child when the thread that
// forked it exits, so a locked thread that lives as long as the test
// binary makes a test binary killed by -timeout (whose cleanups never
// run) take its brokers with it.
type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)

	procsMu sync.Mutex
	procs   = map[*proc]struct{}{} // every process started and not yet reaped
)

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnCh {
				r.reply <- r.cmd.Start()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	r := spawnReq{cmd, make(chan error, 1)}
	spawnCh <- r
	return <-r.reply
}

// proc is one running broker process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process was reaped
	err  error         // Wait's result, set before done is closed
	log  *os.File
}

func startProc(cmd *exec.Cmd, log *os.File) (*proc, error) {
	cmd.Stdout, cmd.Stderr = log, log
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: log}
	procsMu.Lock()
	procs[p] = struct{}{}
	procsMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		procsMu.Lock()
		delete(procs, p)
		procsMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (after SIGCONT, so a paused process dies at once
// too) and waits up to d for the process to be reaped.
func (p *proc) kill(d time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("pid %d not reaped %v after SIGKILL", p.cmd.Process.Pid, d)
	}
}

func leftoverProcesses() []int {
	procsMu.Lock()
	left := make([]*proc, 0, len(procs))
	for p := range procs {
		left = append(left, p)
	}
	procsMu.Unlock()
	var pids []int
	for _, p := range left {
		pids = append(pids, p.cmd.Process.Pid)
		p.kill(5 * time.Second)
	}
	return pids
}
