package clustertest

// Self-tests of the harness against today's binary, whose cluster mode
// does not exist yet: each node runs standalone (a single-node broker),
// and the proxies forward to the nodes' client listeners.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

func TestHarnessProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := newCluster(t, ctx, clusterOpts{standalone: true, cut: faultproxy.Reset})
	for _, n := range c.nodes {
		if err := apiVersions(n.Addr(), 5*time.Second); err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
	}
	pids := map[int]int{}
	for _, n := range c.nodes {
		pids[n.ID] = c.proc(n.ID).Pid()
	}

	// Kill and restart: the same port and data dir, both starts in the log.
	c.Kill(1)
	if err := apiVersions(c.node(1).Addr(), time.Second); err == nil {
		t.Fatal("node 1 answers after SIGKILL")
	}
	if st, ok := c.proc(1).Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGKILL {
		t.Fatalf("node 1 exit: %v", c.proc(1).Err())
	}
	c.Start(1)
	if err := apiVersions(c.node(1).Addr(), 5*time.Second); err != nil {
		t.Fatalf("node 1 after restart: %v", err)
	}
	if log, _ := os.ReadFile(c.node(1).LogPath); strings.Count(string(log), "=== clustertest: start") != 2 {
		t.Fatalf("node 1's log does not show two starts:\n%s", log)
	}

	// Pause: requests time out; Resume: they are answered again.
	c.Pause(2)
	if err := apiVersions(c.node(2).Addr(), 500*time.Millisecond); err == nil {
		t.Fatal("a paused node answered")
	}
	c.Resume(2)
	if err := apiVersions(c.node(2).Addr(), 5*time.Second); err != nil {
		t.Fatalf("node 2 after resume: %v", err)
	}

	// Isolate: the links to and from node 3 stop, the others go on.
	via := func(from, to int) string { return c.Proxy(from, to).Addr() }
	if err := apiVersions(via(1, 3), 5*time.Second); err != nil {
		t.Fatalf("through the proxy 1->3: %v", err)
	}
	c.Isolate(3)
	for _, l := range [][2]int{{1, 3}, {2, 3}} {
		if err := apiVersions(via(l[0], l[1]), time.Second); err == nil {
			t.Fatalf("the proxy %d->%d forwards after Isolate(3)", l[0], l[1])
		}
	}
	for from := 1; from <= 3; from++ {
		for to := 1; to <= 3; to++ {
			if from == to {
				continue
			}
			if want, p := from == 3 || to == 3, c.Proxy(from, to); (p.Mode() != 0) != want {
				t.Fatalf("proxy %d->%d: mode %v after Isolate(3)", from, to, p.Mode())
			}
		}
	}
	if err := apiVersions(via(1, 2), 5*time.Second); err != nil {
		t.Fatalf("the proxy 1->2 after Isolate(3): %v", err)
	}
	c.Heal()
	if err := apiVersions(via(2, 3), 5*time.Second); err != nil {
		t.Fatalf("the proxy 2->3 after Heal: %v", err)
	}

	// Stop: SIGTERM, a clean exit, the broker's own shutdown in the log.
	if d := c.Stop(3); d > stopTimeout {
		t.Fatalf("stop took %v", d)
	}
	if err := c.proc(3).Err(); err != nil {
		t.Fatalf("node 3 exit after SIGTERM: %v", err)
	}
	if log, _ := os.ReadFile(c.node(3).LogPath); !strings.Contains(string(log), "shutting down") {
		t.Fatalf("node 3's log has no shutdown:\n%s", c.tail(c.node(3)))
	}
	c.Start(3)

	// The cleanup (run now, as at the end of a test) kills every process.
	c.cleanup()
	for _, n := range c.nodes {
		if !c.proc(n.ID).Exited() {
			t.Fatalf("node %d still running after cleanup", n.ID)
		}
		if err := syscall.Kill(c.proc(n.ID).Pid(), 0); err == nil {
			t.Fatalf("node %d (pid %d) still exists after cleanup", n.ID, c.proc(n.ID).Pid())
		}
	}
	if pids[1] == c.proc(1).Pid() {
		t.Fatal("node 1 kept its pid across a restart")
	}
}

// A node that refuses its configuration is reported at once, with the
// log tail that says why.
func TestHarnessStartFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin, err := localcluster.TestBinary()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := localcluster.Start(ctx, localcluster.Config{Binary: bin, Dir: t.TempDir(), Voters: 1, Standalone: true,
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

// The workload and the checker end to end against one standalone node
// (replication factor 1) killed with SIGKILL and restarted: every
// acknowledged record is found, the group's commits move on, kcat reads
// them all.
func TestHarnessWorkloadSingleNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newCluster(t, ctx, clusterOpts{standalone: true, nodes: 1, sets: []string{"log.flush.interval.messages=1"}})
	const topic = "harness"
	c.CreateTopic(topic, 3, 1, nil)
	if l := c.Leader(topic, 0); l != 1 {
		t.Fatalf("leader %d", l)
	}
	w := startWorkload(t, c, workloadOpts{topic: topic, partitions: 3})
	w.WaitAcks(300, 30*time.Second)
	c.Kill(1)
	killed := time.Now()
	c.Start(1)
	c.WaitWritable(topic, 30*time.Second)
	healed := time.Now()
	w.WaitAcks(300, 30*time.Second)
	if first := w.FirstAckAfter(0, killed); first.IsZero() {
		t.Fatal("no ack of partition 0 after the restart")
	} else {
		fmt.Printf("FAILOVER harness-single-node-restart ms=%d\n", first.Sub(killed).Milliseconds())
	}
	res := w.Finish(healed)
	if res.Acked < 600 || res.Consumed == 0 {
		t.Fatalf("%+v", res)
	}
}
