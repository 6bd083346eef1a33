package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/sluicemq/sluice/tools/procs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster's timings: Kafka's heartbeat and session shortened (2,000
// and 9,000 ms in Kafka) so that faults are noticed within a short run,
// as tools/clustertest does.
const (
	HeartbeatMs = 500
	SessionMs   = 3000
)

const (
	startTimeout = 30 * time.Second // a started process listens
	stopTimeout  = 30 * time.Second // a SIGTERMed process exits (controlled shutdown included)
	killTimeout  = 10 * time.Second // a SIGKILLed process is reaped
)

// ClusterConfig describes a local cluster of voters (every node is a
// broker and a controller voter, ids 1..Nodes).
type ClusterConfig struct {
	Binary string // the sluice binary (built with -tags faults for disk and clock faults)
	Dir    string // each node's data folder, log and fault-control file go under it
	Nodes  int    // 3 or 5
	Sets   []string
	Logger *slog.Logger
}

type link struct{ from, to int }

// Node is one broker: its fixed configuration and current process.
type Node struct {
	ID       int
	Port     int // PLAINTEXT, for clients
	CtrlPort int // CONTROLLER: raft, controller and inter-broker traffic
	Dir      string
	LogPath  string
	Faults   string // the SLUICE_FAULTS control file
	args     []string
	starts   int
	proc     *procs.Proc // nil before the first start; may have exited
	log      *os.File    // proc's output
	paused   bool
}

// Addr is the node's client listener.
func (n *Node) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

// Cluster is a local multi-process Sluice cluster whose nodes reach each
// other's controller listeners only through faultproxy proxies (the proxy
// "i->j" is where node i reaches node j), so the network between any two
// nodes can be cut in either direction. Clients reach every node directly.
// Its methods are safe for concurrent use.
type Cluster struct {
	cfg     ClusterConfig
	log     *slog.Logger
	nodes   []*Node // nodes[i] has id i+1
	proxies map[link]*faultproxy.Proxy

	mu sync.Mutex // guards the nodes' proc, log, paused and starts

	cl  *kgo.Client
	adm *kadm.Client
}

// StartCluster starts every node and waits until each listens.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		return nil, fmt.Errorf("chaos: %d nodes; a quorum here has 3 or 5", cfg.Nodes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, proxies: map[link]*faultproxy.Proxy{}}
	ports, err := procs.FreePorts(2 * cfg.Nodes)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Nodes {
		id := i + 1
		n := &Node{ID: id, Port: ports[2*i], CtrlPort: ports[2*i+1],
			Dir:     filepath.Join(cfg.Dir, fmt.Sprintf("node%d", id)),
			LogPath: filepath.Join(cfg.Dir, fmt.Sprintf("node%d.log", id)),
			Faults:  filepath.Join(cfg.Dir, fmt.Sprintf("node%d.faults.json", id))}
		c.nodes = append(c.nodes, n)
	}
	for _, from := range c.nodes {
		for _, to := range c.nodes {
			if from == to {
				continue
			}
			p, err := faultproxy.New("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", to.CtrlPort))
			if err != nil {
				c.Close()
				return nil, err
			}
			c.proxies[link{from.ID, to.ID}] = p
		}
	}
	for _, n := range c.nodes {
		n.args = c.args(n)
	}
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := c.waitListening(ctx, n); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.cl, err = kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.RetryTimeout(5*time.Second),
		kgo.RequestTimeoutOverhead(3*time.Second))
	if err != nil {
		c.Close()
		return nil, err
	}
	c.adm = kadm.NewClient(c.cl)
	return c, nil
}

// args is node n's command line: its voters list names itself at its
// real controller address and every other voter j at the proxy n->j.
func (c *Cluster) args(n *Node) []string {
	var voters []string
	for _, o := range c.nodes {
		addr := fmt.Sprintf("127.0.0.1:%d", o.CtrlPort)
		if o != n {
			addr = c.proxies[link{n.ID, o.ID}].Addr()
		}
		voters = append(voters, fmt.Sprintf("%d@%s", o.ID, addr))
	}
	rf := min(3, c.cfg.Nodes)
	sets := []string{
		"node.id=" + fmt.Sprint(n.ID),
		"log.dirs=" + n.Dir,
		"metrics.listen=", // several nodes on one machine (Sets may choose ports)
		"process.roles=broker,controller",
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.Port, n.CtrlPort),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		fmt.Sprintf("broker.heartbeat.interval.ms=%d", HeartbeatMs),
		fmt.Sprintf("broker.session.timeout.ms=%d", SessionMs),
		fmt.Sprintf("default.replication.factor=%d", rf),
		"min.insync.replicas=2",
		fmt.Sprintf("offsets.topic.replication.factor=%d", rf),
		// Kafka's 3 s delay of a new group's first rebalance (extended
		// by each wave of joins) would leave a short run's consumers
		// mostly idle while the workload churns members.
		"group.initial.rebalance.delay.ms=0",
		// KIP-848 members heartbeat at the broker's interval (5 s by
		// default; kgo's HeartbeatInterval is ignored), and a member
		// waiting for partitions another one releases gets them only at
		// its next heartbeat: the queue's kgo interval instead.
		"group.consumer.heartbeat.interval.ms=500",
	}
	sets = append(sets, c.cfg.Sets...)
	args := []string{"serve"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// Seeds are every node's client listener.
func (c *Cluster) Seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.Addr())
	}
	return s
}

// Nodes are the nodes, by id - 1.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Admin is a kadm client of the whole cluster.
func (c *Cluster) Admin() *kadm.Client { return c.adm }

// Client is the kgo client under Admin.
func (c *Cluster) Client() *kgo.Client { return c.cl }

func (c *Cluster) node(id int) (*Node, error) {
	if id < 1 || id > len(c.nodes) {
		return nil, fmt.Errorf("chaos: no node %d", id)
	}
	return c.nodes[id-1], nil
}

func (c *Cluster) start(n *Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.proc != nil && !n.proc.Exited() {
		return fmt.Errorf("node %d: already running (pid %d)", n.ID, n.proc.Pid())
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if n.log != nil {
		n.log.Close()
	}
	n.starts++
	fmt.Fprintf(log, "=== chaos: start %d of node %d at %s: %s %s\n", n.starts, n.ID,
		time.Now().Format(time.RFC3339Nano), c.cfg.Binary, strings.Join(n.args, " "))
	cmd := exec.Command(c.cfg.Binary, n.args...)
	cmd.Env = append(os.Environ(), "SLUICE_FAULTS="+n.Faults)
	p, err := procs.Start(cmd, log)
	if err != nil {
		log.Close()
		n.log = nil
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	n.proc, n.log, n.paused = p, log, false
	return nil
}

func (c *Cluster) waitListening(ctx context.Context, n *Node) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c.mu.Lock()
	p := n.proc
	c.mu.Unlock()
	for {
		conn, err := net.DialTimeout("tcp", n.Addr(), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("node %d exited at start-up (%v); its log ends:\n%s", n.ID, p.Err(), c.Tail(n.ID, 30))
		case <-ctx.Done():
			return fmt.Errorf("node %d not listening on %s after %v (%v)", n.ID, n.Addr(), startTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Running reports whether node id's process is alive (paused counts).
func (c *Cluster) Running(id int) bool {
	n, err := c.node(id)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.proc != nil && !n.proc.Exited()
}

// Paused reports whether node id was paused and not resumed.
func (c *Cluster) Paused(id int) bool {
	n, err := c.node(id)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.paused && n.proc != nil && !n.proc.Exited()
}

// Start starts node id (after a kill or stop) and waits until it listens.
func (c *Cluster) Start(ctx context.Context, id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if err := c.start(n); err != nil {
		return err
	}
	return c.waitListening(ctx, n)
}

// Kill sends SIGKILL to node id and waits until it is reaped.
func (c *Cluster) Kill(id int) error {
	p, err := c.runningProc(id)
	if err != nil {
		return err
	}
	return p.Kill(killTimeout)
}

// Stop sends SIGTERM (a controlled shutdown) to node id and waits until
// it exits; one that does not exit within 30 s is killed and reported.
func (c *Cluster) Stop(id int) error {
	p, err := c.runningProc(id)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-time.After(stopTimeout):
		p.Kill(killTimeout)
		return fmt.Errorf("node %d did not exit within %v of SIGTERM", id, stopTimeout)
	}
}

// Pause stops node id with SIGSTOP.
func (c *Cluster) Pause(id int) error { return c.signal(id, syscall.SIGSTOP, true) }

// Resume continues node id with SIGCONT.
func (c *Cluster) Resume(id int) error { return c.signal(id, syscall.SIGCONT, false) }

func (c *Cluster) signal(id int, sig syscall.Signal, paused bool) error {
	p, err := c.runningProc(id)
	if err != nil {
		return err
	}
	if err := p.Signal(sig); err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[id-1].paused = paused
	c.mu.Unlock()
	return nil
}

func (c *Cluster) runningProc(id int) (*procs.Proc, error) {
	n, err := c.node(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	p := n.proc
	c.mu.Unlock()
	if p == nil || p.Exited() {
		return nil, fmt.Errorf("node %d is not running", id)
	}
	return p, nil
}

// Partition cuts the network between every pair of nodes in different
// components (both directions), in mode; nodes in no component keep
// every link. Links within a component are healed.
func (c *Cluster) Partition(components [][]int, mode faultproxy.Mode) error {
	comp := map[int]int{}
	for i, ids := range components {
		for _, id := range ids {
			comp[id] = i + 1
		}
	}
	var errs []error
	for l, p := range c.proxies {
		a, b := comp[l.from], comp[l.to]
		if a != 0 && b != 0 && a != b {
			errs = append(errs, p.Cut(mode))
		} else {
			errs = append(errs, p.Heal())
		}
	}
	return errors.Join(errs...)
}

// CutLinks cuts the directed links from->to given, in mode.
func (c *Cluster) CutLinks(links [][2]int, mode faultproxy.Mode) error {
	var errs []error
	for _, l := range links {
		p, ok := c.proxies[link{l[0], l[1]}]
		if !ok {
			return fmt.Errorf("chaos: no link %d->%d", l[0], l[1])
		}
		errs = append(errs, p.Cut(mode))
	}
	return errors.Join(errs...)
}

// HealNetwork makes every proxy forward again.
func (c *Cluster) HealNetwork() error {
	var errs []error
	for _, p := range c.proxies {
		errs = append(errs, p.Heal())
	}
	return errors.Join(errs...)
}

// NodeFaults is the control file of a broker built with -tags faults
// (server/faultinject): a slow or failing disk and a wall-clock offset.
type NodeFaults struct {
	FsyncDelayMs  int   `json:"fsync_delay_ms,omitempty"`
	WriteDelayMs  int   `json:"write_delay_ms,omitempty"`
	FailWrites    bool  `json:"fail_writes,omitempty"`
	ClockOffsetMs int64 `json:"clock_offset_ms,omitempty"`
}

// SetFaults writes node id's fault-control file (atomically: a rename),
// which its broker applies within 50 ms.
func (c *Cluster) SetFaults(id int, f NodeFaults) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp := n.Faults + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.Faults)
}

// Tail is the last lines of node id's log.
func (c *Cluster) Tail(id, lines int) string {
	n, err := c.node(id)
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	ls := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return "\t" + string(bytes.Join(ls, []byte("\n\t")))
}

// Close kills every process and closes every proxy and client.
func (c *Cluster) Close() error {
	if c.cl != nil {
		c.cl.Close()
	}
	var errs []error
	for _, n := range c.nodes {
		c.mu.Lock()
		p, log := n.proc, n.log
		c.mu.Unlock()
		if p == nil {
			continue
		}
		if !p.Exited() {
			errs = append(errs, p.Kill(killTimeout))
		}
		log.Close()
	}
	for _, p := range c.proxies {
		p.Close()
	}
	return errors.Join(errs...)
}

// ---- queries

// Metadata is one Metadata answer of topics (all when none) from node id
// (any node when 0), asked now (kadm's own Metadata may answer from its
// cache).
func (c *Cluster) Metadata(ctx context.Context, id int, topics ...string) (kadm.Metadata, error) {
	var r kmsg.Requestor = c.cl
	if id != 0 {
		n, err := c.node(id)
		if err != nil {
			return kadm.Metadata{}, err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0))
		if err != nil {
			return kadm.Metadata{}, err
		}
		defer cl.Close()
		r = cl
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return kadm.Metadata{}, err
	}
	md := kadm.Metadata{Controller: resp.ControllerID, Topics: kadm.TopicDetails{}}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		td := kadm.TopicDetail{Topic: *t.Topic, ID: t.TopicID, Partitions: kadm.PartitionDetails{}, Err: kerr.ErrorForCode(t.ErrorCode)}
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

// Controller is the active controller DescribeCluster names.
func (c *Cluster) Controller(ctx context.Context) (int, error) {
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, c.cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	if resp.ControllerID < 0 {
		return -1, errors.New("no active controller")
	}
	return int(resp.ControllerID), nil
}

// Poll calls f every 100 ms until it returns nil or d passes (or ctx
// ends); each call gets 5 s.
func Poll(ctx context.Context, d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
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
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitReady waits until every node is registered and unfenced: Metadata
// lists every broker (Sluice lists only unfenced ones, as Kafka).
func (c *Cluster) WaitReady(ctx context.Context, d time.Duration) error {
	return Poll(ctx, d, func(ctx context.Context) error {
		md, err := c.Metadata(ctx, 0)
		if err != nil {
			return err
		}
		if len(md.Brokers) < len(c.nodes) {
			return fmt.Errorf("%d of %d brokers registered and unfenced", len(md.Brokers), len(c.nodes))
		}
		if md.Controller < 0 {
			return errors.New("no controller")
		}
		return nil
	})
}

// WaitInSync waits until every partition of topic has a leader and
// every replica in its ISR: no under-replicated partition, which is what
// an operator waits for between two brokers of a rolling restart.
func (c *Cluster) WaitInSync(ctx context.Context, topic string, d time.Duration) error {
	return Poll(ctx, d, func(ctx context.Context) error {
		md, err := c.Metadata(ctx, 0, topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[topic]
		if !ok || len(td.Partitions) == 0 {
			return fmt.Errorf("no metadata for %s", topic)
		}
		for _, p := range td.Partitions.Sorted() {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				return fmt.Errorf("%s/%d: leader %d, replicas %v, ISR %v, %v", topic, p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
			}
		}
		return nil
	})
}

// CreateTopic creates topic (an earlier try that got through counts).
func (c *Cluster) CreateTopic(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	return Poll(ctx, 30*time.Second, func(ctx context.Context) error {
		resp, err := c.adm.CreateTopic(ctx, partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
}
