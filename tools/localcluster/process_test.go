package localcluster

// Tests of the harness's processes against the sluice binary, each node
// standalone (a single-node broker) with the proxies forwarding to the
// nodes' client listeners.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMain removes the built binary and fails the run when a broker
// process outlived its test.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := AfterTests(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		code = 1
	}
	os.Exit(code)
}

// apiVersions sends one ApiVersions request to addr, bounded by d.
func apiVersions(addr string, d time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(d))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl.SeedBrokers()[0])
	return err
}

// startStandalone starts n standalone nodes; the test's cleanup closes
// the cluster and prints the logs' tails when it failed.
func startStandalone(t *testing.T, ctx context.Context, n int, sets ...string) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	bin, err := TestBinary()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Config{Binary: bin, Dir: t.TempDir(), Voters: n, Standalone: true, Sets: sets, Tag: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, n := range c.Nodes() {
				t.Logf("node %d log tail:\n%s", n.ID, c.Tail(n.ID, TailLines))
			}
		}
	})
	return c
}

func TestProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := startStandalone(t, ctx, 3)
	pids := map[int]int{}
	for _, n := range c.Nodes() {
		if err := apiVersions(n.Addr(), 5*time.Second); err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
		pids[n.ID] = c.Proc(n.ID).Pid()
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	addr := func(id int) string { n, _ := c.Node(id); return n.Addr() }

	// Kill and restart: the same port and data dir, both starts in the log.
	must(c.Kill(1))
	if err := apiVersions(addr(1), time.Second); err == nil {
		t.Fatal("node 1 answers after SIGKILL")
	}
	if st, ok := c.Proc(1).Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGKILL {
		t.Fatalf("node 1 exit: %v", c.Proc(1).Err())
	}
	if err := c.Kill(1); err == nil {
		t.Fatal("a dead node was killed again without an error")
	}
	must(c.Start(ctx, 1))
	if err := apiVersions(addr(1), 5*time.Second); err != nil {
		t.Fatalf("node 1 after restart: %v", err)
	}
	n1, _ := c.Node(1)
	if log, _ := os.ReadFile(n1.LogPath); strings.Count(string(log), "=== test: start") != 2 || c.Starts(1) != 2 {
		t.Fatalf("node 1's log does not show two starts (%d counted):\n%s", c.Starts(1), log)
	}
	if err := c.Start(ctx, 1); err == nil {
		t.Fatal("a running node was started again")
	}

	// Pause: requests time out; Resume: they are answered again.
	must(c.Pause(2))
	if !c.Paused(2) || !c.Running(2) {
		t.Fatal("node 2 not paused and running after Pause")
	}
	if err := apiVersions(addr(2), 500*time.Millisecond); err == nil {
		t.Fatal("a paused node answered")
	}
	must(c.Resume(2))
	if c.Paused(2) {
		t.Fatal("node 2 paused after Resume")
	}
	if err := apiVersions(addr(2), 5*time.Second); err != nil {
		t.Fatalf("node 2 after resume: %v", err)
	}

	// Isolate: the links to and from node 3 stop, the others go on.
	via := func(from, to int) string { return c.Proxy(from, to).Addr() }
	if err := apiVersions(via(1, 3), 5*time.Second); err != nil {
		t.Fatalf("through the proxy 1->3: %v", err)
	}
	must(c.Isolate(3, faultproxy.Reset))
	for _, l := range [][2]int{{1, 3}, {2, 3}} {
		if err := apiVersions(via(l[0], l[1]), time.Second); err == nil {
			t.Fatalf("the proxy %d->%d forwards after Isolate(3)", l[0], l[1])
		}
	}
	if err := apiVersions(via(1, 2), 5*time.Second); err != nil {
		t.Fatalf("the proxy 1->2 after Isolate(3): %v", err)
	}
	must(c.HealNetwork())
	if err := apiVersions(via(2, 3), 5*time.Second); err != nil {
		t.Fatalf("the proxy 2->3 after HealNetwork: %v", err)
	}

	// Stop: SIGTERM, a clean exit, the broker's own shutdown in the log.
	d, err := c.Stop(3)
	must(err)
	if d > StopTimeout {
		t.Fatalf("stop took %v", d)
	}
	if err := c.Proc(3).Err(); err != nil {
		t.Fatalf("node 3 exit after SIGTERM: %v", err)
	}
	n3, _ := c.Node(3)
	if log, _ := os.ReadFile(n3.LogPath); !strings.Contains(string(log), "shutting down") {
		t.Fatalf("node 3's log has no shutdown:\n%s", c.Tail(3, TailLines))
	}
	must(c.Start(ctx, 3))

	// Close kills every process.
	must(c.Close())
	for _, n := range c.Nodes() {
		p := c.Proc(n.ID)
		if !p.Exited() {
			t.Fatalf("node %d still running after Close", n.ID)
		}
		if err := syscall.Kill(p.Pid(), 0); err == nil {
			t.Fatalf("node %d (pid %d) still exists after Close", n.ID, p.Pid())
		}
	}
	if pids[1] == c.Proc(1).Pid() {
		t.Fatal("node 1 kept its pid across a restart")
	}
}

// A node that refuses its configuration is reported at once, with the
// log tail that says why.
func TestStartFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker process")
	}
	bin, err := TestBinary()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := Start(t.Context(), Config{Binary: bin, Dir: t.TempDir(), Voters: 1, Standalone: true,
		Sets: []string{"no.such.key=1"}})
	if err == nil {
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "exited at start-up") || !strings.Contains(err.Error(), `unknown key "no.such.key"`) {
		t.Fatalf("start with an unknown key: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the failed start took %v to report", d)
	}
	t.Logf("reported as: %v", err)
}
