package procs

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKill(t *testing.T) {
	p, err := Start(exec.Command("sleep", "30"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited at once")
	}
	if !slices.Contains(Live(), p) {
		t.Fatal("not in Live after Start")
	}
	if p.Cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatalf("Pdeathsig %v", p.Cmd.SysProcAttr.Pdeathsig)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil { // Kill resumes a stopped process
		t.Fatal(err)
	}
	if err := p.Kill(5 * time.Second); err != nil { // fails if not reaped within 5 s
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("not Exited after Kill")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Kill")
	}
	st, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || st.Signal() != syscall.SIGKILL {
		t.Fatalf("exit: %v", p.Err())
	}
	if p.Err() == nil {
		t.Fatal("Err nil after a SIGKILL")
	}
	if left := Live(); len(left) != 0 {
		t.Fatalf("Live after the reap: %v", left)
	}
	if pids := KillLive(time.Second); pids != nil {
		t.Fatalf("KillLive: %v", pids)
	}
}

func TestOutputAndExit(t *testing.T) {
	var out bytes.Buffer
	p, err := Start(exec.Command("sh", "-c", "echo out; echo err >&2; exit 3"), &out)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		p.Kill(time.Second)
		t.Fatal("not exited")
	}
	if got := out.String(); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
		t.Fatalf("output %q", got)
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Err: %v", err)
	}
	if len(Live()) != 0 {
		t.Fatal("Live not empty")
	}
}

func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/sluice"), nil); err == nil {
		t.Fatal("no error")
	}
	if len(Live()) != 0 {
		t.Fatal("a failed Start counts in Live")
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 20 {
		t.Fatalf("%d ports", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < minPort || p >= ephemeralLow() || seen[p] {
			t.Fatalf("port %d (of %v): want distinct ports from %d below the ephemeral range (%d)", p, ports, minPort, ephemeralLow())
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		ln.Close()
	}
	again, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range again {
		if seen[p] {
			t.Fatalf("port %d picked twice", p)
		}
	}
}
