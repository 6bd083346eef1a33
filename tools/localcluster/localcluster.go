// Package localcluster is the one multi-process harness of tools/chaos,
// tools/clustertest and bench: it builds the sluice binary, starts a
// cluster of broker processes on loopback (through tools/procs, so a
// parent killed by a signal or by go test's -timeout takes them with it),
// kills, stops, pauses, resumes and restarts them, cuts the network
// between them (tools/faultproxy), writes their fault-control files, and
// polls the cluster's metadata with deadlines: ready, in sync, writable,
// leaders and the active controller.
//
// Every node is a controller voter and a broker (ids 1..Voters), or a
// broker-only node (ids after the voters). Each node's
// controller.quorum.voters names itself at its real controller address
// and every other voter j through the proxy "i->j" (where node i reaches
// voter j), unless Config.Direct; the others reach a broker-only node
// directly at its registered endpoint. Clients reach every node directly.
// A node's data folder, log file (its stdout and stderr, a line at each
// start) and fault-control file are under Config.Dir.
//
// The methods return errors (a test wraps them in t.Fatal); they are
// safe for concurrent use.
package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/twmb/franz-go/pkg/kgo"
)

// Bounds of the harness's own waits: they end waits that should take a
// second or two, so they are generous for a loaded machine (two cores
// shared by several clusters) and cost nothing when all goes well.
const (
	StartTimeout = 30 * time.Second // a started process listens
	StopTimeout  = 30 * time.Second // a SIGTERMed process exits (controlled shutdown included)
	KillTimeout  = 10 * time.Second // a SIGKILLed process is reaped
	PauseTimeout = 10 * time.Second // every thread of a SIGSTOPped process stopped (one in an fsync stops after it)
	PollInterval = 50 * time.Millisecond
	// TailLines is how much of a node's log an error quotes.
	TailLines = 40
)

// The failure-detection timings the fault tests run with: Kafka's
// heartbeat and session shortened (2,000 and 9,000 ms in Kafka) so that
// faults are noticed within a short run.
const (
	HeartbeatMs = 500
	SessionMs   = 3000
)

// FastFailover is the --set list of the fault tests (chaos and
// clustertest): the timings above, replication factor rf for new topics
// and the offsets topic, and min.insync.replicas=2.
func FastFailover(rf int) []string {
	return []string{
		fmt.Sprintf("broker.heartbeat.interval.ms=%d", HeartbeatMs),
		fmt.Sprintf("broker.session.timeout.ms=%d", SessionMs),
		fmt.Sprintf("default.replication.factor=%d", rf),
		"min.insync.replicas=2",
		fmt.Sprintf("offsets.topic.replication.factor=%d", rf),
	}
}

// Config describes a cluster.
type Config struct {
	Binary string // the sluice binary (Build)
	Dir    string // each node's data folder, log and fault-control file go under it
	// Voters are the controller voters (process.roles=broker,controller),
	// ids 1..Voters.
	Voters int
	// Brokers are broker-only nodes (process.roles=broker, no CONTROLLER
	// listener), ids Voters+1..Voters+Brokers. A cluster with any cannot
	// Isolate a node: the links to them have no proxy.
	Brokers int
	// Standalone starts each node as a single-node broker (no cluster
	// keys), the proxies forwarding to the nodes' client listeners: for
	// testing the harness itself.
	Standalone bool
	// Direct has the voters reach each other directly, without proxies
	// (no network faults): for benchmarks.
	Direct bool
	// Sets are more --set key=value for every node, after the harness's
	// own (node.id, log.dirs, metrics.listen, roles, listeners, voters).
	Sets []string
	// FaultsEnv, when set, names the environment variable that points
	// each node's broker at its fault-control file (SetFaults): a broker
	// built with -tags faults reads it.
	FaultsEnv string
	// Tag names the harness in the line written to a node's log at each
	// start ("=== <Tag>: start N of node I at ..."); "localcluster" when
	// empty.
	Tag string
	// ClientOpts are more options of the cluster's kgo client (Client).
	ClientOpts []kgo.Opt
}

type link struct{ from, to int }

// Node is one broker: its fixed configuration and current process.
type Node struct {
	ID       int
	Voter    bool
	Port     int // PLAINTEXT, for clients (and, on a broker-only node, every other node)
	CtrlPort int // CONTROLLER: raft, controller and inter-broker traffic; 0 on a broker-only node
	Dir      string
	LogPath  string
	Faults   string // the fault-control file (Config.FaultsEnv)
	args     []string
	starts   int
	proc     *procs.Proc // nil before the first start; may have exited
	log      *os.File    // proc's output
	paused   bool
}

// Addr is the node's client listener.
func (n *Node) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

// Cluster is a local multi-process Sluice cluster.
type Cluster struct {
	cfg     Config
	nodes   []*Node // nodes[i] has id i+1: the voters, then the broker-only nodes
	proxies map[link]*faultproxy.Proxy

	mu sync.Mutex // guards the nodes' proc, log, paused and starts

	cl  *kgo.Client
	adm *kadm.Client
}

// Start starts every node and waits until each listens (not until the
// cluster is ready: WaitReady). On an error it has stopped what it
// started.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Voters < 1 {
		return nil, fmt.Errorf("localcluster: %d voters", cfg.Voters)
	}
	if cfg.Standalone && cfg.Brokers > 0 {
		return nil, errors.New("localcluster: broker-only nodes need cluster mode")
	}
	if cfg.Tag == "" {
		cfg.Tag = "localcluster"
	}
	c := &Cluster{cfg: cfg, proxies: map[link]*faultproxy.Proxy{}}
	total := cfg.Voters + cfg.Brokers
	ports, err := procs.FreePorts(2*cfg.Voters + cfg.Brokers)
	if err != nil {
		return nil, err
	}
	for i := range total {
		id := i + 1
		n := &Node{ID: id, Voter: i < cfg.Voters,
			Dir:     filepath.Join(cfg.Dir, fmt.Sprintf("node%d", id)),
			LogPath: filepath.Join(cfg.Dir, fmt.Sprintf("node%d.log", id)),
			Faults:  filepath.Join(cfg.Dir, fmt.Sprintf("node%d.faults.json", id))}
		n.Port, ports = ports[0], ports[1:]
		if n.Voter {
			n.CtrlPort, ports = ports[0], ports[1:]
		}
		c.nodes = append(c.nodes, n)
	}
	if !cfg.Direct {
		for _, from := range c.nodes {
			for _, to := range c.nodes {
				if from == to || !to.Voter {
					continue
				}
				target := fmt.Sprintf("127.0.0.1:%d", to.CtrlPort)
				if cfg.Standalone {
					target = to.Addr()
				}
				p, err := faultproxy.New("127.0.0.1:0", target)
				if err != nil {
					c.Close()
					return nil, err
				}
				c.proxies[link{from.ID, to.ID}] = p
			}
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
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.Seeds()...), kgo.RetryTimeout(5 * time.Second)}, cfg.ClientOpts...)
	if c.cl, err = kgo.NewClient(opts...); err != nil {
		c.Close()
		return nil, err
	}
	c.adm = kadm.NewClient(c.cl)
	return c, nil
}

// Unstarted is a cluster of voters 1..voters with no process or port:
// for testing code that reads only the cluster's shape (Nodes) or cuts
// its links. proxy, when not nil, gives the proxy of each link from->to.
func Unstarted(voters int, proxy func(from, to int) *faultproxy.Proxy) *Cluster {
	c := &Cluster{cfg: Config{Voters: voters}, proxies: map[link]*faultproxy.Proxy{}}
	for i := range voters {
		c.nodes = append(c.nodes, &Node{ID: i + 1, Voter: true})
	}
	for from := 1; proxy != nil && from <= voters; from++ {
		for to := 1; to <= voters; to++ {
			if from != to {
				c.proxies[link{from, to}] = proxy(from, to)
			}
		}
	}
	return c
}

// args is node n's command line.
func (c *Cluster) args(n *Node) []string {
	sets := []string{
		"node.id=" + fmt.Sprint(n.ID),
		"log.dirs=" + n.Dir,
		"metrics.listen=", // several nodes on one machine (Sets may choose ports)
	}
	if c.cfg.Standalone {
		sets = append(sets, fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", n.Port))
	} else {
		var voters []string
		for _, o := range c.nodes {
			if !o.Voter {
				continue
			}
			addr := fmt.Sprintf("127.0.0.1:%d", o.CtrlPort)
			if p := c.proxies[link{n.ID, o.ID}]; p != nil {
				addr = p.Addr()
			}
			voters = append(voters, fmt.Sprintf("%d@%s", o.ID, addr))
		}
		if n.Voter {
			sets = append(sets, "process.roles=broker,controller",
				fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.Port, n.CtrlPort))
		} else {
			sets = append(sets, "process.roles=broker",
				fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", n.Port))
		}
		sets = append(sets, "controller.quorum.voters="+strings.Join(voters, ","))
	}
	sets = append(sets, c.cfg.Sets...)
	args := []string{"serve"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// Seeds are the client listeners clients bootstrap from: every node's,
// or node 1's alone when Standalone (each node is its own cluster).
func (c *Cluster) Seeds() []string {
	if c.cfg.Standalone {
		return []string{c.nodes[0].Addr()}
	}
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

// Node is node id.
func (c *Cluster) Node(id int) (*Node, error) {
	if id < 1 || id > len(c.nodes) {
		return nil, fmt.Errorf("localcluster: no node %d", id)
	}
	return c.nodes[id-1], nil
}

// Proc is node id's current process (nil before its first start; it may
// have exited).
func (c *Cluster) Proc(id int) *procs.Proc {
	n, err := c.Node(id)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.proc
}

// Proxy is the proxy through which node from reaches voter to (nil when
// there is none).
func (c *Cluster) Proxy(from, to int) *faultproxy.Proxy { return c.proxies[link{from, to}] }

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
	fmt.Fprintf(log, "=== %s: start %d of node %d at %s: %s %s\n", c.cfg.Tag, n.starts, n.ID,
		time.Now().Format(time.RFC3339Nano), c.cfg.Binary, strings.Join(n.args, " "))
	cmd := exec.Command(c.cfg.Binary, n.args...)
	if c.cfg.FaultsEnv != "" {
		cmd.Env = append(os.Environ(), c.cfg.FaultsEnv+"="+n.Faults)
	}
	p, err := procs.Start(cmd, log)
	if err != nil {
		log.Close()
		n.log = nil
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	n.proc, n.log, n.paused = p, log, false
	return nil
}

// waitListening waits until n's client listener accepts a connection; a
// process that exits first is reported at once, with its log tail.
func (c *Cluster) waitListening(ctx context.Context, n *Node) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
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
			return fmt.Errorf("node %d exited at start-up (%v); its log ends:\n%s", n.ID, p.Err(), c.Tail(n.ID, TailLines))
		case <-ctx.Done():
			return fmt.Errorf("node %d not listening on %s after %v (%v); its log ends:\n%s", n.ID, n.Addr(), StartTimeout, err, c.Tail(n.ID, TailLines))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Running reports whether node id's process is alive (paused counts).
func (c *Cluster) Running(id int) bool {
	p := c.Proc(id)
	return p != nil && !p.Exited()
}

// Paused reports whether node id was paused and not resumed.
func (c *Cluster) Paused(id int) bool {
	n, err := c.Node(id)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.paused && n.proc != nil && !n.proc.Exited()
}

// Starts is how many times node id was started.
func (c *Cluster) Starts(id int) int {
	n, err := c.Node(id)
	if err != nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.starts
}

// Start starts node id (after a kill or stop) with the same configuration
// and data dir, and waits until it listens.
func (c *Cluster) Start(ctx context.Context, id int) error {
	n, err := c.Node(id)
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
	if err := p.Kill(KillTimeout); err != nil {
		return fmt.Errorf("node %d: %w", id, err)
	}
	return nil
}

// Stop sends SIGTERM (a controlled shutdown) to node id and waits until
// it exits (Terminate, then WaitExit), and returns how long that took.
func (c *Cluster) Stop(id int) (time.Duration, error) {
	start, err := c.Terminate(id)
	if err != nil {
		return 0, err
	}
	return c.WaitExit(id, start)
}

// Terminate sends SIGTERM to node id and returns when.
func (c *Cluster) Terminate(id int) (time.Time, error) {
	p, err := c.runningProc(id)
	if err != nil {
		return time.Time{}, err
	}
	return time.Now(), p.Signal(syscall.SIGTERM)
}

// WaitExit waits until node id exits after a SIGTERM sent at start, and
// returns how long it took. A node that does not exit within StopTimeout
// of start is killed and reported, with its log tail.
func (c *Cluster) WaitExit(id int, start time.Time) (time.Duration, error) {
	p := c.Proc(id)
	if p == nil {
		return 0, fmt.Errorf("node %d was never started", id)
	}
	select {
	case <-p.Done():
		return time.Since(start), nil
	case <-time.After(time.Until(start.Add(StopTimeout))):
		p.Kill(KillTimeout)
		return time.Since(start), fmt.Errorf("node %d did not exit within %v of SIGTERM; its log ends:\n%s", id, StopTimeout, c.Tail(id, TailLines))
	}
}

// Pause stops node id with SIGSTOP and returns once every thread of it
// is stopped (procs.Proc.Stop): kill(2) returns before that, and a node
// still running for a few milliseconds after it would take (and
// acknowledge) what the caller sends next as if it were not paused.
func (c *Cluster) Pause(id int) error { return c.signal(id, syscall.SIGSTOP, true) }

// Resume continues node id with SIGCONT.
func (c *Cluster) Resume(id int) error { return c.signal(id, syscall.SIGCONT, false) }

func (c *Cluster) signal(id int, sig syscall.Signal, paused bool) error {
	p, err := c.runningProc(id)
	if err != nil {
		return err
	}
	if sig == syscall.SIGSTOP {
		err = p.Stop(PauseTimeout)
	} else {
		err = p.Signal(sig)
	}
	if err != nil {
		return fmt.Errorf("node %d: %w", id, err)
	}
	c.mu.Lock()
	c.nodes[id-1].paused = paused
	c.mu.Unlock()
	return nil
}

// runningProc is node id's process, or an error (with its exit and log
// tail) when it is not running.
func (c *Cluster) runningProc(id int) (*procs.Proc, error) {
	if _, err := c.Node(id); err != nil {
		return nil, err
	}
	p := c.Proc(id)
	if p == nil {
		return nil, fmt.Errorf("node %d is not running (never started)", id)
	}
	if p.Exited() {
		return nil, fmt.Errorf("node %d is not running (%v); its log ends:\n%s", id, p.Err(), c.Tail(id, TailLines))
	}
	return p, nil
}

// Isolate cuts node id off from every other node: the proxies id->j and
// j->id stop forwarding, in mode. A cluster with broker-only nodes or
// without proxies refuses: some link would stay up.
func (c *Cluster) Isolate(id int, mode faultproxy.Mode) error {
	if c.cfg.Brokers > 0 || c.cfg.Direct {
		return fmt.Errorf("localcluster: cannot isolate node %d: links without a proxy (broker-only nodes, or Direct) would stay up", id)
	}
	var errs []error
	for l, p := range c.proxies {
		if l.from == id || l.to == id {
			errs = append(errs, p.Cut(mode))
		}
	}
	return errors.Join(errs...)
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
			return fmt.Errorf("localcluster: no link %d->%d", l[0], l[1])
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
	n, err := c.Node(id)
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

// Tail is the last lines of node id's log, each indented by a tab.
func (c *Cluster) Tail(id, lines int) string {
	n, err := c.Node(id)
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
			if err := p.Kill(KillTimeout); err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", n.ID, err))
			}
		}
		log.Close()
	}
	for _, p := range c.proxies {
		p.Close()
	}
	return errors.Join(errs...)
}
