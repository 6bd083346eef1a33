// Package procs starts and tracks the broker processes of the local
// clusters that tools/localcluster runs for tools/chaos, tools/clustertest
// and bench.
//
// Every process is started from one goroutine locked to its OS thread,
// with Pdeathsig set to SIGKILL: Linux kills the child when the thread
// that forked it exits, and that thread lives as long as the parent
// process, so a parent killed by a signal or by go test's -timeout (whose
// cleanups never run) takes its brokers with it. A child started from an
// ordinary goroutine could be killed whenever the runtime retires the
// thread it happened to fork on.
//
// Linux only: Pdeathsig is a Linux feature.
package procs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)

	liveMu sync.Mutex
	live   = map[*Proc]struct{}{} // every process started and not yet reaped
)

// spawn starts cmd from the locked thread, with Pdeathsig=SIGKILL.
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

// Proc is one started process.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{} // closed once the process was reaped
	err  error         // Wait's result, set before done is closed
}

// Start starts cmd (see the package doc) with its stdout and stderr to
// out (an *os.File is handed to the child as is), and reaps it in the
// background. The process counts in Live until it is reaped.
func Start(cmd *exec.Cmd, out io.Writer) (*Proc, error) {
	cmd.Stdout, cmd.Stderr = out, out
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	liveMu.Lock()
	live[p] = struct{}{}
	liveMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		liveMu.Lock()
		delete(live, p)
		liveMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process was reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is Wait's result: nil for a clean exit, an *exec.ExitError
// otherwise. It is meaningful only once Done is closed (nil before).
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited reports whether the process was reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Stop sends SIGSTOP and returns once every thread of the process is
// stopped, or an error after d (or when the process exited). kill(2)
// returns before the stop is done: one thread of the process takes the
// signal and only then stops the others, and a thread inside a system
// call that cannot be interrupted (an fsync) stops when it returns. Until
// then the process runs on, for milliseconds on a loaded machine: a
// paused broker still took a raft append and acknowledged it after a
// bare SIGSTOP (TestScenarioMinISRPausedFollowers saw an acks=all write
// acknowledged "while" both followers were paused).
func (p *Proc) Stop(d time.Duration) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		running, err := p.running()
		switch {
		case err != nil:
			return err
		case running == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("pid %d: %d threads still running %v after SIGSTOP", p.Pid(), running, d)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// running returns how many threads of the process are not stopped: not
// in state T (stopped) or t (tracing stop) in /proc/<pid>/task/*/stat (a
// dead thread, Z or X, counts as stopped; a process with only those is an
// error).
func (p *Proc) running() (int, error) {
	if p.Exited() {
		return 0, fmt.Errorf("pid %d exited: %v", p.Pid(), p.Err())
	}
	dir := fmt.Sprintf("/proc/%d/task", p.Pid())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", p.Pid(), err)
	}
	n, dead := 0, 0
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("pid %d: unexpected %s/%s/stat: %q", p.Pid(), dir, task.Name(), b)
		}
		switch b[i+2] {
		case 'T', 't':
		case 'Z', 'X':
			dead++ // runs nothing either
		default:
			n++
		}
	}
	if dead == len(tasks) {
		return 0, fmt.Errorf("pid %d: no live thread in %s (the process is exiting)", p.Pid(), dir)
	}
	return n, nil
}

// Kill sends SIGKILL (after SIGCONT, so a stopped process dies at once
// too) and waits up to d for the process to be reaped.
func (p *Proc) Kill(d time.Duration) error {
	p.Cmd.Process.Signal(syscall.SIGCONT)
	p.Cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("pid %d not reaped %v after SIGKILL", p.Pid(), d)
	}
}

// Live is every process started and not yet reaped.
func Live() []*Proc {
	liveMu.Lock()
	defer liveMu.Unlock()
	ps := make([]*Proc, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	return ps
}

// KillLive kills every process in Live, waiting up to d for each reap,
// and returns their pids (none: nil). It is for a test binary's last
// check that every test's cleanup reaped what it started.
func KillLive(d time.Duration) []int {
	var pids []int
	for _, p := range Live() {
		pids = append(pids, p.Pid())
		p.Kill(d)
	}
	return pids
}

// FreePorts picks n distinct free loopback ports: each was free when
// picked, and none was picked before by this process. They lie below the
// kernel's ephemeral range (ip_local_port_range, 32768 and up by
// default), where a bind to port 0 (the harness's proxies, another
// cluster's in the same test binary) or a client's outgoing connection
// cannot take one between its pick and its broker's bind, nor while its
// broker is down; the proxies used to take a node's port that way. The
// scan starts at a random port, so processes picking at once rarely meet.
func FreePorts(n int) ([]int, error) {
	pickedMu.Lock()
	defer pickedMu.Unlock()
	lo, hi := minPort, ephemeralLow()
	if hi-lo < n {
		return nil, fmt.Errorf("procs: ports %d to %d below the ephemeral range: fewer than %d", lo, hi, n)
	}
	span := hi - lo
	first := rand.IntN(span)
	var ports []int
	for i := 0; i < span && len(ports) < n; i++ {
		p := lo + (first+i)%span
		if picked[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		picked[p] = true
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("procs: %d free ports between %d and %d, want %d", len(ports), lo, hi, n)
	}
	return ports, nil
}

// minPort is the lowest port FreePorts picks: above the well-known and
// most registered services' ports.
const minPort = 10000

var (
	pickedMu sync.Mutex
	picked   = map[int]bool{} // every port FreePorts returned
)

// ephemeralLow is the first port of the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), 32768 when unreadable.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= minPort {
		return 32768
	}
	return lo
}
