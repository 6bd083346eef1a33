package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/sluicemq/sluice/tools/procs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster under test is tools/localcluster's, shared with tools/chaos
// and bench; this file adds the test's side: every wait bounded by the
// test's context, a failure is t.Fatal, and the nodes' log tails are
// printed when the test failed.

// Timings of the cluster under test: Kafka's heartbeat and session
// shortened (2,000 and 9,000 ms in Kafka) so faults are seen quickly.
const (
	heartbeatMs = localcluster.HeartbeatMs
	sessionMs   = localcluster.SessionMs
	stopTimeout = localcluster.StopTimeout
)

// clusterOpts configures newCluster.
type clusterOpts struct {
	// nodes are the controller voters (process.roles=broker,controller),
	// ids 1..nodes: 1, 3 or 5; 3 when 0.
	nodes int
	// brokers are broker-only nodes (process.roles=broker, no CONTROLLER
	// listener), ids nodes+1..nodes+brokers. Their voters list names each
	// voter through a proxy like the voters' own; the others reach them
	// directly at their registered (PLAINTEXT) endpoint, so such a
	// cluster cannot Isolate.
	brokers int
	// standalone starts each node as today's single-node broker (no
	// cluster keys) with the proxies forwarding to the nodes' client
	// listeners: the harness's self-tests use it.
	standalone bool
	sets       []string        // more --set key=value for every node
	cut        faultproxy.Mode // Isolate's mode; Blackhole when 0
	// serial runs the scenario alone, not in parallel with the others
	// (needCluster).
	serial bool
}

// cluster is a local multi-process Sluice cluster. Its methods are called
// from the test goroutine only.
type cluster struct {
	*localcluster.Cluster
	t     *testing.T
	ctx   context.Context // the test's overall bound
	opts  clusterOpts
	nodes []*localcluster.Node // nodes[i] has id i+1; the voters first, then the broker-only nodes
	cl    *kgo.Client
	adm   *kadm.Client
}

// newCluster starts a cluster whose every wait ends by ctx's deadline;
// t.Cleanup kills every process and closes every proxy, and prints each
// node's log tail when the test failed.
func newCluster(t *testing.T, ctx context.Context, opts clusterOpts) *cluster {
	t.Helper()
	if opts.nodes == 0 {
		opts.nodes = 3
	}
	if !opts.standalone && opts.nodes != 1 && opts.nodes != 3 && opts.nodes != 5 {
		t.Fatalf("newCluster: %d voters; a quorum here has 1, 3 or 5", opts.nodes)
	}
	if opts.cut == 0 {
		opts.cut = faultproxy.Blackhole
	}
	bin, err := localcluster.TestBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's 3 s delay of a new group's first rebalance would leave
	// the workload's consumer without partitions through a scenario's
	// warm-up, and the fault would hit a group not yet consuming.
	sets := []string{"group.initial.rebalance.delay.ms=0"}
	if !opts.standalone {
		sets = append(localcluster.FastFailover(3), sets...)
	}
	lc, err := localcluster.Start(ctx, localcluster.Config{Binary: bin, Dir: t.TempDir(), Voters: opts.nodes,
		Brokers: opts.brokers, Standalone: opts.standalone, Sets: append(sets, opts.sets...), Tag: "clustertest"})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{Cluster: lc, t: t, ctx: ctx, opts: opts, nodes: lc.Nodes(), cl: lc.Client(), adm: lc.Admin()}
	t.Cleanup(c.cleanup)
	return c
}

// seeds are the client listeners clients bootstrap from.
func (c *cluster) seeds() []string { return c.Seeds() }

func (c *cluster) node(id int) *localcluster.Node {
	c.t.Helper()
	n, err := c.Cluster.Node(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// proc is node id's current process.
func (c *cluster) proc(id int) *procs.Proc {
	c.t.Helper()
	c.node(id)
	return c.Proc(id)
}

// Start restarts node id with the same configuration and data dir and
// waits until it listens.
func (c *cluster) Start(id int) {
	c.t.Helper()
	if err := c.Cluster.Start(c.ctx, id); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("node %d started (pid %d)", id, c.proc(id).Pid())
}

// Kill sends SIGKILL to node id and waits until it is reaped.
func (c *cluster) Kill(id int) {
	c.t.Helper()
	if err := c.Cluster.Kill(id); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("node %d killed (SIGKILL)", id)
}

// Stop sends SIGTERM to node id and waits, bounded, until it exits; it
// returns how long the exit took. A node that does not exit in time is
// killed and the test fails.
func (c *cluster) Stop(id int) time.Duration {
	c.t.Helper()
	start := c.Terminate(id)
	return c.WaitExit(id, start)
}

// Terminate sends SIGTERM to node id and returns when.
func (c *cluster) Terminate(id int) time.Time {
	c.t.Helper()
	start, err := c.Cluster.Terminate(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return start
}

// WaitExit waits, bounded, until node id exits after a SIGTERM sent at
// start, and returns how long it took.
func (c *cluster) WaitExit(id int, start time.Time) time.Duration {
	c.t.Helper()
	d, err := c.Cluster.WaitExit(id, start)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("node %d stopped (SIGTERM) in %v: %v", id, d.Round(time.Millisecond), c.proc(id).Err())
	return d
}

// Pause stops node id with SIGSTOP; Resume continues it with SIGCONT.
func (c *cluster) Pause(id int) {
	c.t.Helper()
	if err := c.Cluster.Pause(id); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("node %d paused (SIGSTOP)", id)
}

func (c *cluster) Resume(id int) {
	c.t.Helper()
	if err := c.Cluster.Resume(id); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("node %d resumed (SIGCONT)", id)
}

// Isolate cuts node id off from every other node: the proxies id->j and
// j->id stop forwarding, in the cluster's cut mode. A cluster with
// broker-only nodes refuses: the links to those have no proxy, so any
// node would keep a link up.
func (c *cluster) Isolate(id int) {
	c.t.Helper()
	if err := c.Cluster.Isolate(id, c.opts.cut); err != nil {
		c.t.Fatalf("Isolate(%d): %v", id, err)
	}
	c.t.Logf("node %d isolated (%v)", id, c.opts.cut)
}

// Heal makes every proxy forward again.
func (c *cluster) Heal() {
	c.t.Helper()
	if err := c.HealNetwork(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Log("network healed")
}

// tail is the last lines of n's log file.
func (c *cluster) tail(n *localcluster.Node) string { return c.Tail(n.ID, localcluster.TailLines) }

func (c *cluster) cleanup() {
	if err := c.Close(); err != nil {
		c.t.Errorf("cleanup: %v", err)
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			c.t.Logf("node %d (%s) log tail:\n%s", n.ID, n.LogPath, c.tail(n))
		}
	}
}

// bounded returns a context ending after d or at the test's bound.
func (c *cluster) bounded(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, d)
}

// poll calls f until it returns nil, every interval, until d passes or
// the test's bound; then the test fails with what and f's last error.
func (c *cluster) poll(what string, d time.Duration, f func(ctx context.Context) error) {
	c.t.Helper()
	if err := localcluster.Poll(c.ctx, d, f); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// ---- queries

// partitions returns topic's partition details from one Metadata answer.
func (c *cluster) partitions(ctx context.Context, topic string) (kadm.PartitionDetails, error) {
	return c.Partitions(ctx, 0, topic)
}

// partitionsFrom is partitions answered by node id (any node when 0): a
// test asks the nodes on the majority's side, since an isolated, paused
// or stopping node may answer from a stale view.
func (c *cluster) partitionsFrom(ctx context.Context, id int, topic string) (kadm.PartitionDetails, error) {
	if id != 0 {
		c.node(id) // fails the test on a bad id
	}
	return c.Partitions(ctx, id, topic)
}

// Leader is the leader of topic's partition p in Metadata, polled until
// there is one.
func (c *cluster) Leader(topic string, p int32) int32 {
	c.t.Helper()
	return c.LeaderFrom(0, topic, p, -1, 30*time.Second)
}

// LeaderFrom is the leader of topic's partition p in node asking's
// Metadata (any node when 0), polled for up to d until there is one and
// it is not node not.
func (c *cluster) LeaderFrom(asking int, topic string, p int32, not int32, d time.Duration) int32 {
	c.t.Helper()
	var leader int32 = -1
	c.poll(fmt.Sprintf("a leader of %s/%d other than %d (asking node %d)", topic, p, not, asking), d, func(ctx context.Context) error {
		ps, err := c.partitionsFrom(ctx, asking, topic)
		if err != nil {
			return err
		}
		pd, ok := ps[p]
		if !ok || pd.Err != nil || pd.Leader < 0 || pd.Leader == not {
			return fmt.Errorf("partition %d: %+v", p, pd)
		}
		leader = pd.Leader
		return nil
	})
	return leader
}

// Controller is the active controller: DescribeCluster's ControllerID.
func (c *cluster) Controller() int32 {
	c.t.Helper()
	var id int32 = -1
	c.poll("the active controller", 30*time.Second, func(ctx context.Context) error {
		var err error
		id, err = localcluster.ControllerOf(ctx, c.cl)
		return err
	})
	return id
}

func errorCode(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	m := ""
	if msg != nil {
		m = ": " + *msg
	}
	return fmt.Errorf("error code %d%s", code, m)
}

// CreateTopic creates topic with partitions, replication factor rf and
// configs, and waits until it is writable.
func (c *cluster) CreateTopic(topic string, partitions int32, rf int16, configs map[string]string) {
	c.t.Helper()
	if err := c.Cluster.CreateTopic(c.ctx, topic, partitions, rf, configs); err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	c.WaitWritable(topic, 60*time.Second)
}

// WaitWritable waits until every partition of topic has a leader that
// accepts an acks=all produce. The probe records' values start with
// "probe-", outside the workload's values.
func (c *cluster) WaitWritable(topic string, d time.Duration) {
	c.t.Helper()
	start := time.Now()
	if err := c.Cluster.WaitWritable(c.ctx, topic, d); err != nil {
		c.t.Fatalf("every partition of %s has a leader that accepts a produce: %v", topic, err)
	}
	c.t.Logf("%s writable after %v", topic, time.Since(start).Round(time.Millisecond))
}

// WaitISR waits until every partition of topic lists node id in its ISR.
func (c *cluster) WaitISR(topic string, id int, d time.Duration) {
	c.t.Helper()
	start := time.Now()
	c.poll(fmt.Sprintf("node %d in the ISR of every partition of %s", id, topic), d, func(ctx context.Context) error {
		ps, err := c.partitions(ctx, topic)
		if err != nil {
			return err
		}
		var missing []string
		for _, pd := range ps.Sorted() {
			if !slices.Contains(pd.ISR, int32(id)) {
				missing = append(missing, fmt.Sprintf("partition %d: ISR %v", pd.Partition, pd.ISR))
			}
		}
		if len(missing) > 0 {
			return errors.New(strings.Join(missing, "; "))
		}
		return nil
	})
	c.t.Logf("node %d in the ISR of every partition of %s after %v", id, topic, time.Since(start).Round(time.Millisecond))
}

// WaitNotLeader waits until the Metadata of node asking (any when 0)
// names a leader for every partition of topic and none is node id, and
// returns when that was first seen.
func (c *cluster) WaitNotLeader(topic string, id, asking int, d time.Duration) time.Time {
	c.t.Helper()
	var at time.Time
	c.poll(fmt.Sprintf("no partition of %s led by node %d (asking node %d)", topic, id, asking), d, func(ctx context.Context) error {
		ps, err := c.partitionsFrom(ctx, asking, topic)
		if err != nil {
			return err
		}
		for _, pd := range ps.Sorted() {
			if pd.Leader == int32(id) || pd.Leader < 0 {
				return fmt.Errorf("partition %d: leader %d", pd.Partition, pd.Leader)
			}
		}
		at = time.Now()
		return nil
	})
	return at
}

// LedBy returns the partitions of topic whose leader is node id.
func (c *cluster) LedBy(topic string, id int) []int32 {
	c.t.Helper()
	var led []int32
	c.poll("metadata of "+topic, 30*time.Second, func(ctx context.Context) error {
		ps, err := c.partitions(ctx, topic)
		if err != nil {
			return err
		}
		led = nil
		for _, pd := range ps.Sorted() {
			if pd.Leader == int32(id) {
				led = append(led, pd.Partition)
			}
		}
		return nil
	})
	return led
}

// EndOffsets returns the log end offset (high watermark) of every
// partition of topic, from their leaders.
func (c *cluster) EndOffsets(topic string) map[int32]int64 {
	c.t.Helper()
	return c.listOffsets(topic, c.adm.ListEndOffsets)
}

// StartOffsets returns the log start offset of every partition of topic.
func (c *cluster) StartOffsets(topic string) map[int32]int64 {
	c.t.Helper()
	return c.listOffsets(topic, c.adm.ListStartOffsets)
}

func (c *cluster) listOffsets(topic string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) map[int32]int64 {
	c.t.Helper()
	out := map[int32]int64{}
	c.poll("list offsets of "+topic, 30*time.Second, func(ctx context.Context) error {
		lo, err := list(ctx, topic)
		if err != nil {
			return err
		}
		if err := lo.Error(); err != nil {
			return err
		}
		for p, o := range lo[topic] {
			out[p] = o.Offset
		}
		return nil
	})
	return out
}

// ReplicaEndOffset asks node id itself for its log end offset of
// topic/p: a ListOffsets with ReplicaID -2, Kafka's debugging replica id,
// which Kafka lets a follower answer from its own log.
func (c *cluster) ReplicaEndOffset(ctx context.Context, id int, topic string, p int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -2
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = p
	rp.Timestamp = -1 // latest
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl.Broker(id))
	if err != nil {
		return -1, err
	}
	for _, t := range resp.Topics {
		if len(t.Partitions) == 0 {
			continue
		}
		rp := t.Partitions[0]
		if err := errorCode(rp.ErrorCode, nil); err != nil {
			return -1, fmt.Errorf("node %d, %s/%d: %w", id, topic, p, err)
		}
		return rp.Offset, nil
	}
	return -1, fmt.Errorf("node %d answered no partition", id)
}
