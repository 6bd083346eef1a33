package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/procs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A local cluster of sluice processes for the cluster benchmarks: the
// process-launching parts of tools/clustertest (main_test.go and
// cluster_test.go), without its fault proxies.

// Bounds of the harness's waits.
const (
	procNodes          = 3
	procListenTimeout  = 20 * time.Second // a started process listens
	procClusterTimeout = 60 * time.Second // every node's Metadata lists 3 brokers and a controller
	procTopicTimeout   = 60 * time.Second // a topic is created and every partition accepts a produce
	procKillTimeout    = 10 * time.Second // a SIGKILLed process is reaped
	procLogTailLines   = 40
)

// buildSluice builds the sluice binary once per test binary (no -race:
// the brokers are what is measured) in the server module's folder, so it
// builds with or without the go.work at the root. The binary is removed
// when the benchmarks end.
var buildSluice = sync.OnceValues(func() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command: %w", err)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-bin-")
	if err != nil {
		return "", err
	}
	onClose(func() error { return os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = filepath.Join("..", "server")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice in %s: %v\n%s", cmd.Dir, err, out)
	}
	return bin, nil
})

// sluiceBinary returns the built binary, or skips the benchmark with the
// reason when it cannot be built.
func sluiceBinary(b *testing.B) string {
	b.Helper()
	bin, err := buildSluice()
	if err != nil {
		b.Skipf("skipped: cannot build the sluice binary: %v", err)
	}
	return bin
}

// The broker processes are started with tools/procs, so a benchmark
// binary killed by -timeout (whose cleanups never run) takes its brokers
// with it. The first start registers killLeftovers to run when the
// benchmarks end.
var checkLeftovers sync.Once

// killLeftovers kills every process a benchmark's cleanup did not reap
// (there should be none) and reports them.
func killLeftovers() error {
	pids := procs.KillLive(procKillTimeout)
	if len(pids) == 0 {
		return nil
	}
	return fmt.Errorf("broker processes left running after the benchmarks (killed now): %v", pids)
}

// procNode is one broker process of a procCluster.
type procNode struct {
	id       int    // node.id, 1-based as in the voters list
	port     int    // PLAINTEXT, for clients
	ctrlPort int    // CONTROLLER (voters only)
	dir      string // log.dirs
	logPath  string
	log      *os.File
	proc     *procs.Proc
}

func (n *procNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// procCluster is three sluice processes on loopback, each a broker and a
// controller voter, and possibly broker-only ones, with the default
// config otherwise.
type procCluster struct {
	b     *testing.B
	nodes []*procNode
}

// startProcCluster starts the cluster with its data and logs under
// b.TempDir() and waits until every node's Metadata lists every broker
// and a controller. The processes are killed when the benchmark ends; a
// failed benchmark logs each node's log tail.
func startProcCluster(b *testing.B, bin string) *procCluster {
	return startProcClusterWith(b, bin, 0)
}

// startProcClusterWith is startProcCluster with brokerOnly more nodes
// (ids 4, 5, ...: process.roles=broker, no CONTROLLER listener) and the
// extra --set values on every node.
func startProcClusterWith(b *testing.B, bin string, brokerOnly int, extra ...string) *procCluster {
	b.Helper()
	root := b.TempDir() // before the cleanup below, so removed after it
	c := &procCluster{b: b}
	b.Cleanup(c.cleanup)
	total := procNodes + brokerOnly
	ports, err := procs.FreePorts(2 * total)
	if err != nil {
		b.Fatal(err)
	}
	var voters []string
	for i := range total {
		n := &procNode{id: i + 1, port: ports[2*i], ctrlPort: ports[2*i+1],
			logPath: filepath.Join(root, fmt.Sprintf("node%d.log", i+1)),
			dir:     filepath.Join(root, fmt.Sprintf("node%d", i+1))}
		c.nodes = append(c.nodes, n)
		if i < procNodes {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n.id, n.ctrlPort))
		}
	}
	for _, n := range c.nodes {
		sets := []string{
			fmt.Sprintf("node.id=%d", n.id),
			"log.dirs=" + n.dir,
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.ctrlPort),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"metrics.listen=", // several nodes on one machine
		}
		if n.id > procNodes {
			sets[2] = fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", n.port)
			sets = append(sets, "process.roles=broker")
		}
		sets = append(sets, extra...)
		args := []string{"serve"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		log, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		n.log = log
		checkLeftovers.Do(func() { onClose(killLeftovers) })
		if n.proc, err = procs.Start(exec.Command(bin, args...), log); err != nil {
			b.Fatalf("node %d: %v", n.id, err)
		}
	}
	for _, n := range c.nodes {
		if err := c.waitListening(n); err != nil {
			b.Fatal(err)
		}
	}
	c.waitMetadata()
	return c
}

// seeds are every node's client listener.
func (c *procCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr())
	}
	return s
}

// waitListening waits until n's client listener accepts a connection; a
// process that exits first is reported at once, with its log tail.
func (c *procCluster) waitListening(n *procNode) error {
	deadline := time.Now().Add(procListenTimeout)
	for {
		conn, err := net.DialTimeout("tcp", n.addr(), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-n.proc.Done():
			return fmt.Errorf("node %d exited at start-up (%v); its log ends:\n%s", n.id, n.proc.Err(), c.tail(n))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not listening on %s after %v (%v); its log ends:\n%s", n.id, n.addr(), procListenTimeout, err, c.tail(n))
		}
	}
}

// waitMetadata waits until every node answers a Metadata request (raw,
// to that node: kadm's metadata may come from the client's cache) listing
// every broker and an active controller.
func (c *procCluster) waitMetadata() {
	c.b.Helper()
	for _, n := range c.nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RequestRetries(0))
		if err != nil {
			c.b.Fatal(err)
		}
		err = poll(procClusterTimeout, func(ctx context.Context) error {
			if n.proc.Exited() {
				return fmt.Errorf("exited (%v)", n.proc.Err())
			}
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
			resp, err := cl.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				return err
			}
			md := resp.(*kmsg.MetadataResponse)
			if len(md.Brokers) != len(c.nodes) || md.ControllerID < 0 {
				return fmt.Errorf("%d brokers, controller %d", len(md.Brokers), md.ControllerID)
			}
			return nil
		})
		cl.Close()
		if err != nil {
			c.b.Fatalf("node %d: Metadata listing %d brokers and a controller: %v; its log ends:\n%s", n.id, len(c.nodes), err, c.tail(n))
		}
	}
}

// createTopic creates topic with partitions, replication factor rf and
// configs, and waits until every partition's leader accepts an acks=all
// produce (one probe record each, before any benchmark record).
func (c *procCluster) createTopic(topic string, partitions int32, rf int16, configs map[string]string) {
	c.b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(4*time.Second), kgo.RetryTimeout(4*time.Second))
	if err != nil {
		c.b.Fatal(err)
	}
	defer cl.Close()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	deadline := time.Now().Add(procTopicTimeout)
	err = poll(time.Until(deadline), func(ctx context.Context) error {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil // an earlier try got through
		}
		return err
	})
	if err != nil {
		c.b.Fatalf("create topic %s: %v", topic, err)
	}
	done := make([]bool, partitions)
	err = poll(time.Until(deadline), func(ctx context.Context) error {
		var errs []error
		for p := range partitions {
			if done[p] {
				continue
			}
			r := &kgo.Record{Partition: p, Value: []byte("probe")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
				continue
			}
			done[p] = true
		}
		return errors.Join(errs...)
	})
	if err != nil {
		c.b.Fatalf("every partition of %s accepts a produce: %v", topic, err)
	}
}

// poll calls f (each call bounded by 5 s) until it returns nil, every
// 50 ms, for up to d; then it returns f's last error.
func poll(d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %v: %w", time.Since(start).Round(time.Millisecond), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail is the last lines of n's log file.
func (c *procCluster) tail(n *procNode) string {
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > procLogTailLines {
		lines = lines[len(lines)-procLogTailLines:]
	}
	return "\t" + string(bytes.Join(lines, []byte("\n\t")))
}

func (c *procCluster) cleanup() {
	for _, n := range c.nodes {
		if n.proc != nil && !n.proc.Exited() {
			if err := n.proc.Kill(procKillTimeout); err != nil {
				c.b.Errorf("cleanup: node %d: %v", n.id, err)
			}
		}
		if n.log != nil {
			n.log.Close()
		}
	}
	if c.b.Failed() {
		for _, n := range c.nodes {
			c.b.Logf("node %d log tail:\n%s", n.id, c.tail(n))
		}
	}
}
