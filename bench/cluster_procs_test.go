package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
)

// A local cluster of sluice processes for the cluster benchmarks:
// tools/localcluster (shared with tools/clustertest and tools/chaos),
// with the voters reaching each other directly (no fault proxies) and
// the default config otherwise.

// Bounds of the harness's waits.
const (
	procNodes          = 3
	procClusterTimeout = 60 * time.Second // every node's Metadata lists every broker and a controller
	procTopicTimeout   = 60 * time.Second // a topic is created and every partition accepts a produce
)

// afterBenchmarks registers, once, localcluster.AfterTests to run when
// the benchmarks end: it removes the built binary and kills (and
// reports) any broker process a benchmark's cleanup did not reap.
var afterBenchmarks sync.Once

// sluiceBinary returns the sluice binary (built once per test binary,
// without -race: the brokers are what is measured), or skips the
// benchmark with the reason when it cannot be built.
func sluiceBinary(b *testing.B) string {
	b.Helper()
	afterBenchmarks.Do(func() { onClose(localcluster.AfterTests) })
	bin, err := localcluster.TestBinary()
	if err != nil {
		b.Skipf("skipped: cannot build the sluice binary: %v", err)
	}
	return bin
}

// procCluster is three sluice processes on loopback, each a broker and a
// controller voter, and possibly broker-only ones.
type procCluster struct {
	*localcluster.Cluster
	b     *testing.B
	nodes []*localcluster.Node
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
	lc, err := localcluster.Start(context.Background(), localcluster.Config{Binary: bin, Dir: b.TempDir(),
		Voters: procNodes, Brokers: brokerOnly, Direct: true, Sets: extra, Tag: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	c := &procCluster{Cluster: lc, b: b, nodes: lc.Nodes()}
	b.Cleanup(c.cleanup)
	if err := lc.WaitReady(context.Background(), procClusterTimeout); err != nil {
		b.Fatalf("every node's Metadata listing %d brokers and a controller: %v", len(c.nodes), err)
	}
	return c
}

// seeds are every node's client listener.
func (c *procCluster) seeds() []string { return c.Seeds() }

// createTopic creates topic with partitions, replication factor rf and
// configs, and waits until every partition's leader accepts an acks=all
// produce (one probe record each, before any benchmark record).
func (c *procCluster) createTopic(topic string, partitions int32, rf int16, configs map[string]string) {
	c.b.Helper()
	ctx := context.Background()
	if err := c.CreateTopic(ctx, topic, partitions, rf, configs); err != nil {
		c.b.Fatalf("create topic %s: %v", topic, err)
	}
	if err := c.WaitWritable(ctx, topic, procTopicTimeout); err != nil {
		c.b.Fatalf("every partition of %s accepts a produce: %v", topic, err)
	}
}

// poll calls f (each call bounded by 5 s) until it returns nil, for up
// to d; then it returns f's last error.
func poll(d time.Duration, f func(ctx context.Context) error) error {
	return localcluster.Poll(context.Background(), d, f)
}

func (c *procCluster) cleanup() {
	if err := c.Close(); err != nil {
		c.b.Errorf("cleanup: %v", err)
	}
	if c.b.Failed() {
		for _, n := range c.nodes {
			c.b.Logf("node %d log tail:\n%s", n.ID, c.Tail(n.ID, localcluster.TailLines))
		}
	}
}
