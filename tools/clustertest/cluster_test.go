package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/sluicemq/sluice/tools/procs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Timings of the cluster under test: Kafka's heartbeat and session
// shortened (2,000 and 9,000 ms in Kafka) so faults are seen quickly.
const (
	heartbeatMs = 500
	sessionMs   = 3000
)

// Bounds of the harness's own waits.
const (
	startTimeout = 20 * time.Second // a started process listens
	stopTimeout  = 30 * time.Second // a SIGTERMed process exits (controlled shutdown included)
	killTimeout  = 10 * time.Second // a SIGKILLed process is reaped
	logTailLines = 40
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
	// listeners: the harness's self-tests use it against a binary whose
	// cluster mode does not exist yet.
	standalone bool
	sets       []string        // more --set key=value for every node
	cut        faultproxy.Mode // Isolate's mode; Blackhole when 0
}

type link struct{ from, to int }

// node is one broker's fixed configuration and its current process.
type node struct {
	id       int // node.id, 1-based as in the voters list
	voter    bool
	port     int // PLAINTEXT, for clients (and, on a broker-only node, every other node)
	ctrlPort int // CONTROLLER: raft, controller and inter-broker traffic; 0 on a broker-only node
	dir      string
	logPath  string
	args     []string
	starts   int
	proc     *procs.Proc // nil when not started; may have exited
	log      *os.File    // proc's output
	paused   bool
}

func (n *node) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// cluster is a local multi-process Sluice cluster. Its methods are called
// from the test goroutine only.
type cluster struct {
	t       *testing.T
	ctx     context.Context // the test's overall bound
	opts    clusterOpts
	bin     string
	nodes   []*node // nodes[i] has id i+1; the voters first, then the broker-only nodes
	proxies map[link]*faultproxy.Proxy
	cl      *kgo.Client
	adm     *kadm.Client
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
	if opts.standalone && opts.brokers > 0 {
		t.Fatal("newCluster: broker-only nodes need cluster mode")
	}
	if opts.cut == 0 {
		opts.cut = faultproxy.Blackhole
	}
	root := t.TempDir() // before the cleanup below, which reads the logs in it, so removed after it
	c := &cluster{t: t, ctx: ctx, opts: opts, bin: sluiceBinary(t), proxies: map[link]*faultproxy.Proxy{}}
	t.Cleanup(c.cleanup)
	for i := 0; i < opts.nodes+opts.brokers; i++ {
		n := &node{id: i + 1, voter: i < opts.nodes, dir: filepath.Join(root, fmt.Sprintf("node%d", i+1)), logPath: filepath.Join(root, fmt.Sprintf("node%d.log", i+1))}
		c.nodes = append(c.nodes, n)
	}
	ports, err := procs.FreePorts(2*opts.nodes + opts.brokers)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		n.port, ports = ports[0], ports[1:]
		if n.voter {
			n.ctrlPort, ports = ports[0], ports[1:]
		}
	}
	// The proxy i->j is where node i reaches voter j.
	for _, from := range c.nodes {
		for _, to := range c.nodes {
			if from == to || !to.voter {
				continue
			}
			target := fmt.Sprintf("127.0.0.1:%d", to.ctrlPort)
			if opts.standalone {
				target = to.addr()
			}
			p, err := faultproxy.New("127.0.0.1:0", target)
			if err != nil {
				t.Fatal(err)
			}
			c.proxies[link{from.id, to.id}] = p
		}
	}
	for _, n := range c.nodes {
		n.args = c.args(n)
	}
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		if err := c.waitListening(n); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	return c
}

// args is node n's command line: its own voters list names itself at
// its real controller address and every other voter j at the proxy n->j.
func (c *cluster) args(n *node) []string {
	sets := []string{
		"node.id=" + fmt.Sprint(n.id),
		"log.dirs=" + n.dir,
		"metrics.listen=", // several nodes on one machine
	}
	if c.opts.standalone {
		sets = append(sets, fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", n.port))
	} else {
		var voters []string
		for _, o := range c.nodes {
			if !o.voter {
				continue
			}
			addr := fmt.Sprintf("127.0.0.1:%d", o.ctrlPort)
			if o != n {
				addr = c.proxies[link{n.id, o.id}].Addr()
			}
			voters = append(voters, fmt.Sprintf("%d@%s", o.id, addr))
		}
		if n.voter {
			sets = append(sets,
				"process.roles=broker,controller",
				fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.ctrlPort))
		} else {
			sets = append(sets,
				"process.roles=broker",
				fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", n.port))
		}
		sets = append(sets,
			"controller.quorum.voters="+strings.Join(voters, ","),
			fmt.Sprintf("broker.heartbeat.interval.ms=%d", heartbeatMs),
			fmt.Sprintf("broker.session.timeout.ms=%d", sessionMs),
			"default.replication.factor=3",
			"min.insync.replicas=2",
			"offsets.topic.replication.factor=3",
		)
	}
	sets = append(sets, c.opts.sets...)
	args := []string{"serve"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// seeds are the client listeners clients bootstrap from: every node's,
// or node 1's alone in standalone mode (each node is its own cluster).
func (c *cluster) seeds() []string {
	if c.opts.standalone {
		return []string{c.nodes[0].addr()}
	}
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr())
	}
	return s
}

func (c *cluster) node(id int) *node {
	c.t.Helper()
	if id < 1 || id > len(c.nodes) {
		c.t.Fatalf("no node %d", id)
	}
	return c.nodes[id-1]
}

// start starts n's process with its fixed configuration, its output
// appended to its log file.
func (c *cluster) start(n *node) error {
	if n.proc != nil && !n.proc.Exited() {
		return fmt.Errorf("node %d: already running (pid %d)", n.id, n.proc.Pid())
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(log, "=== clustertest: start %d of node %d at %s: %s %s\n", n.starts, n.id,
		time.Now().Format(time.RFC3339Nano), c.bin, strings.Join(n.args, " "))
	p, err := procs.Start(exec.Command(c.bin, n.args...), log)
	if err != nil {
		log.Close()
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	n.proc, n.log, n.paused = p, log, false
	return nil
}

// waitListening waits until n's client listener accepts a connection;
// a process that exits first is reported at once, with its log tail.
func (c *cluster) waitListening(n *node) error {
	ctx, cancel := context.WithTimeout(c.ctx, startTimeout)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", n.addr(), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-n.proc.Done():
			return fmt.Errorf("node %d exited at start-up (%v); its log ends:\n%s", n.id, n.proc.Err(), c.tail(n))
		case <-ctx.Done():
			return fmt.Errorf("node %d not listening on %s after %v (%v); its log ends:\n%s", n.id, n.addr(), startTimeout, err, c.tail(n))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Start restarts node id with the same configuration and data dir and
// waits until it listens.
func (c *cluster) Start(id int) {
	c.t.Helper()
	n := c.node(id)
	if err := c.start(n); err != nil {
		c.t.Fatal(err)
	}
	if err := c.waitListening(n); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("node %d started (pid %d)", id, n.proc.Pid())
}

// Kill sends SIGKILL to node id and waits until it is reaped.
func (c *cluster) Kill(id int) {
	c.t.Helper()
	n := c.running(id)
	if err := n.proc.Kill(killTimeout); err != nil {
		c.t.Fatalf("node %d: %v", id, err)
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
	n := c.running(id)
	if err := n.proc.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	return time.Now()
}

// WaitExit waits, bounded, until node id exits after a SIGTERM sent at
// start, and returns how long it took.
func (c *cluster) WaitExit(id int, start time.Time) time.Duration {
	c.t.Helper()
	n := c.node(id)
	select {
	case <-n.proc.Done():
	case <-time.After(time.Until(start.Add(stopTimeout))):
		n.proc.Kill(killTimeout)
		c.t.Fatalf("node %d did not exit within %v of SIGTERM; its log ends:\n%s", id, stopTimeout, c.tail(n))
	}
	d := time.Since(start)
	c.t.Logf("node %d stopped (SIGTERM) in %v: %v", id, d.Round(time.Millisecond), n.proc.Err())
	return d
}

// Pause stops node id with SIGSTOP; Resume continues it with SIGCONT.
func (c *cluster) Pause(id int) {
	c.t.Helper()
	n := c.running(id)
	if err := n.proc.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	n.paused = true
	c.t.Logf("node %d paused (SIGSTOP)", id)
}

func (c *cluster) Resume(id int) {
	c.t.Helper()
	n := c.running(id)
	if err := n.proc.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
	n.paused = false
	c.t.Logf("node %d resumed (SIGCONT)", id)
}

// running returns node id, failing the test when its process has exited.
func (c *cluster) running(id int) *node {
	c.t.Helper()
	n := c.node(id)
	if n.proc == nil || n.proc.Exited() {
		var why error
		if n.proc != nil {
			why = n.proc.Err()
		}
		c.t.Fatalf("node %d is not running (%v); its log ends:\n%s", id, why, c.tail(n))
	}
	return n
}

// Isolate cuts node id off from every other node: the proxies id->j and
// j->id stop forwarding, in the cluster's cut mode. A cluster with
// broker-only nodes refuses: the links to those have no proxy, so any
// node would keep a link up.
func (c *cluster) Isolate(id int) {
	c.t.Helper()
	if c.opts.brokers > 0 {
		c.t.Fatalf("Isolate(%d): the cluster has broker-only nodes, which the others reach directly (no proxy to cut)", id)
	}
	for l, p := range c.proxies {
		if l.from == id || l.to == id {
			if err := p.Cut(c.opts.cut); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	c.t.Logf("node %d isolated (%v)", id, c.opts.cut)
}

// Heal makes every proxy forward again.
func (c *cluster) Heal() {
	c.t.Helper()
	for _, p := range c.proxies {
		if err := p.Heal(); err != nil {
			c.t.Fatal(err)
		}
	}
	c.t.Log("network healed")
}

// tail is the last lines of n's log file.
func (c *cluster) tail(n *node) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return "\t" + string(bytes.Join(lines, []byte("\n\t")))
}

func (c *cluster) cleanup() {
	if c.cl != nil {
		c.cl.Close()
	}
	for _, n := range c.nodes {
		if n.proc == nil {
			continue
		}
		if !n.proc.Exited() {
			if err := n.proc.Kill(killTimeout); err != nil {
				c.t.Errorf("cleanup: node %d: %v", n.id, err)
			}
		}
		n.log.Close()
	}
	for _, p := range c.proxies {
		p.Close()
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			c.t.Logf("node %d (%s) log tail:\n%s", n.id, n.logPath, c.tail(n))
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
	if err := pollErr(c.ctx, d, f); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// pollErr is poll returning the error instead of failing.
func pollErr(parent context.Context, d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, d)
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

// ---- queries

// partitions returns topic's partition details from one Metadata answer.
func (c *cluster) partitions(ctx context.Context, topic string) (kadm.PartitionDetails, error) {
	return c.partitionsFrom(ctx, 0, topic)
}

// partitionsFrom is partitions answered by node id (any node when 0): a
// test asks the nodes on the majority's side, since an isolated, paused
// or stopping node may answer from a stale view.
func (c *cluster) partitionsFrom(ctx context.Context, id int, topic string) (kadm.PartitionDetails, error) {
	cl := c.cl
	if id != 0 {
		var err error
		cl, err = kgo.NewClient(kgo.SeedBrokers(c.node(id).addr()), kgo.RequestRetries(0))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
	}
	md, err := freshMetadata(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("metadata has no topic %q", topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, td.Err)
	}
	return td.Partitions, nil
}

// freshMetadata is one Metadata request of topics (every topic when none)
// answered by a broker now (any of cl's, or the one broker of a
// kgo.Broker), in kadm's shape. kadm's own Metadata answers
// from the client's cache while it is younger than MetadataMinAge (5 s),
// which would let a poll see a partition as it was seconds ago.
func freshMetadata(ctx context.Context, cl kmsg.Requestor, topics ...string) (kadm.Metadata, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kadm.Metadata{}, err
	}
	md := kadm.Metadata{Controller: resp.ControllerID, Topics: kadm.TopicDetails{}}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		td := kadm.TopicDetail{Topic: *t.Topic, ID: t.TopicID, IsInternal: t.IsInternal,
			Partitions: kadm.PartitionDetails{}, Err: kerr.ErrorForCode(t.ErrorCode)}
		for _, p := range t.Partitions {
			td.Partitions[p.Partition] = kadm.PartitionDetail{Topic: td.Topic, Partition: p.Partition,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				OfflineReplicas: p.OfflineReplicas, Err: kerr.ErrorForCode(p.ErrorCode)}
		}
		md.Topics[td.Topic] = td
	}
	for _, b := range resp.Brokers {
		md.Brokers = append(md.Brokers, kgo.BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	return md, nil
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
		id, err = c.controllerOnce(ctx, c.cl)
		return err
	})
	return id
}

// controllerOnce is the controller one DescribeCluster names, asked of
// any of a client's brokers or of one kgo.Broker.
func (c *cluster) controllerOnce(ctx context.Context, r kmsg.Requestor) (int32, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return -1, err
	}
	if err := errorCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return -1, err
	}
	if resp.ControllerID < 0 {
		return -1, errors.New("no active controller")
	}
	return resp.ControllerID, nil
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
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	c.poll("create topic "+topic, 30*time.Second, func(ctx context.Context) error {
		resp, err := c.adm.CreateTopic(ctx, partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil // an earlier try got through
		}
		return err
	})
	c.WaitWritable(topic, 60*time.Second)
}

// WaitWritable waits until every partition of topic has a leader that
// accepts an acks=all produce. The probe records' values start with
// "probe-", outside the workload's values.
func (c *cluster) WaitWritable(topic string, d time.Duration) {
	c.t.Helper()
	start := time.Now()
	probe, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(4*time.Second), kgo.RetryTimeout(4*time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	defer probe.Close()
	done := map[int32]bool{}
	c.poll(fmt.Sprintf("every partition of %s has a leader that accepts a produce", topic), d, func(ctx context.Context) error {
		ps, err := c.partitions(ctx, topic)
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			return errors.New("no partitions")
		}
		var errs []error
		for _, p := range ps.Numbers() {
			if done[p] {
				continue
			}
			if pd := ps[p]; pd.Err != nil || pd.Leader < 0 {
				errs = append(errs, fmt.Errorf("partition %d: leader %d, %v", p, pd.Leader, pd.Err))
				continue
			}
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "probe-%d", time.Now().UnixNano())}
			if err := probe.ProduceSync(ctx, r).FirstErr(); err != nil {
				errs = append(errs, fmt.Errorf("partition %d: produce: %w", p, err))
				continue
			}
			done[p] = true
		}
		return errors.Join(errs...)
	})
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
