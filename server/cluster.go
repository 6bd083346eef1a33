package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
)

// Cluster mode (controller.quorum.voters set; DESIGN.md, "The cluster"):
// every Sluice process runs one raft host and one TCP transport, shared by
// the metadata log and every partition replica it holds. Raft connections
// ride this broker's own listeners (conn.go hands a connection that starts
// with a raft magic to the transport).
//
// The metadata log is a partition, __cluster_metadata-0 (KRaft's name),
// replicated by the raft group of the controller quorum's voters (the
// all-zero topic ID, which no topic has); brokers that are not voters
// follow it as raft learners. Its leader is the active controller. Each
// record of a data batch there is one encoded meta record; the applier
// goroutine hands every committed batch to meta.Store.ApplyReplicated, so
// every node's Pebble copy follows the same log and answers Metadata
// locally. Changes are made only on the active controller: meta's typed
// methods validate, then call Propose (this file), which appends to the
// metadata partition and returns once raft committed the batch; meta then
// waits for its own applier. Requests that change metadata arriving at
// another broker are forwarded to the active controller (cluster_rpc.go).

// metaGroup is the metadata log's raft group.
var metaGroup = replica.GroupID{}

// Names under the first log dir.
const (
	metaTopic        = "__cluster_metadata" // the metadata log's partition folder is metaTopic-0
	raftStateDirName = "__sluice_raft"      // the raft group states (replica.StateStore, Pebble)
)

// cluster is the cluster part of a Broker, never nil: a single node is a
// one-voter cluster.
type cluster struct {
	b      *Broker
	self   int32
	voters map[int32]string // controller.quorum.voters: node id -> controller address
	// peerTLS is how this node's own connections reach SSL listeners
	// (tls.go).
	peerTLS peerTLS
	// peerSasl is how they log in to SASL listeners (sasl_peer.go).
	peerSasl peerSasl

	// holdReports is set while a reconciler pass opens partitions whose
	// lone voter campaigned (campaignIfSole): their leaderships come one
	// by one as they open, and reporting each as it comes would write the
	// metadata log once per few partitions. The pass reports them all at
	// its end, in one AlterPartition (one metadata commit), as Kafka's
	// controller writes a CreateTopics request's partitions in one batch.
	holdReports atomic.Bool

	states    *replica.StateStore
	transport *replica.TCPTransport
	host      *replica.Host
	metaPart  *replica.Partition // __cluster_metadata-0

	ctrl    *controllerClients // requests to the active controller (cluster_rpc.go)
	brokers *peerClients       // requests to other brokers (cluster_peers.go)
	act     controllerDuties   // the active controller's duties (controller module; cluster_controller.go)

	epoch atomic.Int64 // this broker's epoch once registered; -1 before (epochs are metadata offsets, from 0)
	// shuttingDown is set when a controlled shutdown begins: every
	// heartbeat from then on asks to leave, so none unfences the broker
	// again.
	shuttingDown atomic.Bool
	// heartbeatsOff (tests) stops the heartbeats, as a link to the
	// controller that is cut while the broker runs.
	heartbeatsOff atomic.Bool
	// leadCh and reportCh are kicked when a held partition's leadership
	// changes (buffered): the coordinator loop and the report loop.
	leadCh, reportCh chan struct{}
	// throttle paces the catch-up replication of this host's groups
	// (HostConfig.Throttle); the report loop sets it (cluster_throttle.go),
	// kicked through throttleCh when the metadata moved, and keeps thr.
	throttle   *replica.Throttle
	throttleCh chan struct{}
	thr        throttleState

	peersMu sync.Mutex
	peers   map[int32]string // transport peers set so far

	stop     chan struct{}
	ctx      context.Context // cancelled with stop: requests in flight end
	cancel   context.CancelFunc
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// newCluster opens the raft state store, the transport and the host. The
// metadata partition opens in openMetaLog, once meta.Store exists.
func newCluster(b *Broker) (*cluster, error) {
	cfg := &b.cfg
	c := &cluster{b: b, self: cfg.NodeID, voters: map[int32]string{}, peers: map[int32]string{},
		leadCh: make(chan struct{}, 1), reportCh: make(chan struct{}, 1), stop: make(chan struct{}),
		throttle: replica.NewThrottle(), throttleCh: make(chan struct{}, 1), thr: throttleState{metaAt: -1}}
	for _, v := range cfg.QuorumVoters {
		c.voters[v.ID] = v.Addr()
	}
	states, err := replica.OpenStateStore(filepath.Join(cfg.MetadataLogDirOrFirst(), raftStateDirName), b.metaFS, b.logger)
	if err != nil {
		return nil, fmt.Errorf("server: raft state: %w", err)
	}
	c.states = states
	if c.peerTLS, err = buildPeerTLS(cfg); err != nil {
		states.Close()
		return nil, err
	}
	if c.peerSasl, err = buildPeerSasl(cfg); err != nil {
		states.Close()
		return nil, err
	}
	c.transport = replica.NewTCPTransport(uint64(c.self), b.logger)
	c.transport.SetDial(c.dialPeer)
	hc := cfg.RaftHostConfig()
	hc.Transport = c.transport
	hc.HardState = states
	hc.Logger = b.logger
	hc.Throttle = c.throttle
	hc.Metrics = b.metrics.hostMetrics()
	// The read lease's clock: monotonic (never Options.Now, a wall clock
	// that faults may jump); raftSkew is 0 but in tests.
	hc.Now = func() time.Time { return time.Now().Add(time.Duration(b.raftSkew.Load())) }
	host, err := replica.NewHost(hc)
	if err != nil {
		c.transport.Close()
		states.Close()
		return nil, err
	}
	c.host = host
	c.transport.SetHost(host)
	for id, addr := range c.voters {
		c.setPeer(id, addr)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.epoch.Store(-1)
	c.ctrl = newControllerClients(c)
	c.brokers = newPeerClients(c)
	return c, nil
}

// setPeer tells the transport where node id listens, when it changed.
func (c *cluster) setPeer(id int32, addr string) {
	if id == c.self {
		return
	}
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if c.peers[id] == addr {
		return
	}
	c.peers[id] = addr
	c.transport.SetPeer(uint64(id), addr)
}

// peerAddr is where this node reaches node id: its controller address for
// a voter (each node's own voters list names it, so a test's fault proxy
// can stand between two nodes), else its registered inter-broker listener.
func (c *cluster) peerAddr(br meta.Broker) (string, bool) {
	if addr, ok := c.voters[br.NodeID]; ok {
		return addr, true
	}
	name := c.b.cfg.InterBrokerListenerName
	for _, ep := range br.Listeners {
		if ep.Name == name {
			return fmt.Sprintf("%s:%d", ep.Host, ep.Port), true
		}
	}
	return "", false
}

// voterIDs are the quorum's voters, ascending, as raft ids.
func (c *cluster) voterIDs() []uint64 {
	ids := make([]uint64, 0, len(c.voters))
	for id := range c.voters {
		ids = append(ids, uint64(id))
	}
	slices.Sort(ids)
	return ids
}

// metaTopicConfig is the metadata log's configuration: segments of
// metadata.log.segment.bytes, removed while the log is larger than
// metadata.max.retention.bytes (a follower behind the log start gets a
// raft snapshot carrying the metadata state: metaSnapState), never by
// age; a commit needs the quorum, not min.insync.replicas.
func (b *Broker) metaTopicConfig() (replica.TopicConfig, error) {
	return b.topicConfig(map[string]string{
		"segment.bytes":       strconv.FormatInt(int64(b.cfg.MetadataLogSegmentBytes), 10),
		"retention.ms":        "-1",
		"retention.bytes":     strconv.FormatInt(b.cfg.MetadataMaxRetentionBytes, 10),
		"min.insync.replicas": "1",
		"cleanup.policy":      "delete",
	})
}

// metaSnapState is the metadata log's replica.SnapshotState: the meta
// store's state travels in the metadata partition's raft snapshots.
type metaSnapState struct{ m *meta.Store }

// Save exports the store's state once its applier got to next (a state
// behind the snapshot would leave the follower's applier before its log
// start).
func (s metaSnapState) Save(next int64) ([]byte, error) {
	if at := s.m.ReplicatedOffset(); at < next {
		return nil, fmt.Errorf("server: the metadata is applied up to offset %d, not %d yet", at, next)
	}
	return s.m.SaveState()
}

// Restore installs a leader's exported state (synced; a no-op when the
// store is as new): the applier then goes on from its ReplicatedOffset,
// at or past the reset log's start.
func (s metaSnapState) Restore(data []byte) error { return s.m.RestoreState(data) }

// NextOffset holds the metadata log's retention at this node's applier.
func (s metaSnapState) NextOffset() int64 { return s.m.ReplicatedOffset() }

// openMetaLog opens the metadata partition as a replica of the quorum's
// raft group (a voter, or a learner on a broker-only node).
func (c *cluster) openMetaLog() error {
	b := c.b
	c.act = newActiveController(c) // over b.meta, open now
	cfg, err := b.metaTopicConfig()
	if err != nil {
		return err
	}
	st, _, err := c.states.Load(metaGroup)
	if err != nil {
		return err
	}
	rc := &replica.RaftConfig{Host: c.host, Group: metaGroup, State: st, Voters: c.voterIDs(),
		ReplicaLagTime: time.Duration(b.cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		SnapshotState:  metaSnapState{b.meta},
		OnLeaderChange: func(uint64, uint64) { c.act.Kick(); c.kickLeadership() }}
	if _, voter := c.voters[c.self]; !voter {
		rc.Learners = []uint64{uint64(c.self)}
	}
	dir := filepath.Join(b.cfg.MetadataLogDirOrFirst(), partitionDirName(metaTopic, 0))
	part, err := replica.Open(b.fs, dir, cfg, replica.Options{
		Internal: true,
		Raft:     rc,
		Sweeper:  b.sweep, // retention (metaTopicConfig)
		Log:      segment.Options{Now: b.now, Logger: b.logger, FileCache: b.files, OnSync: b.metrics.syncObserver(), OnRecovered: b.onRecovered},
	})
	if err != nil {
		return fmt.Errorf("server: metadata log %s: %w", dir, err)
	}
	c.metaPart = part
	c.campaignIfSole(part, metaGroup)
	return nil
}

// campaignIfSole makes this replica stand for election at once when it is
// its group's only voter in a cluster of this node alone (a single node:
// the only voter of the metadata quorum, and no other broker registered,
// so no other node can hold a newer configuration of the group): it wins
// at once, where waiting for raft's election timeout would leave the
// group leaderless for a second or two after every open. It reports
// whether it campaigned.
func (c *cluster) campaignIfSole(part *replica.Partition, id replica.GroupID) bool {
	if len(c.voters) != 1 || c.voters[c.self] == "" {
		return false
	}
	if c.b.meta != nil {
		for _, br := range c.b.meta.Brokers() {
			if br.NodeID != c.self {
				return false
			}
		}
	}
	voters, _, err := part.Membership()
	if err != nil || len(voters) != 1 || voters[0] != uint64(c.self) {
		return false
	}
	if err := c.host.Campaign(id); err != nil {
		c.b.logger.Debug("sluice: campaign", "group", id, "err", err)
		return false
	}
	return true
}

// soleLeaderWait bounds a reconciler pass's wait for the lone voters it
// made campaign to lead (campaignIfSole).
const soleLeaderWait = 2 * time.Second

// awaitLeaders waits, at most soleLeaderWait in all, until each of parts
// leads its group: a topic created on a single node has its leaders when
// the request that created it is answered, as a client expects.
func awaitLeaders(parts []*replica.Partition) {
	deadline := time.Now().Add(soleLeaderWait)
	for _, p := range parts {
		for !p.IsLeader() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
}

// startApplier starts the applier, once the reconciler exists.
func (c *cluster) startApplier() {
	c.wg.Add(2)
	go c.applyLoop()
	go c.watchMetaLog()
}

// metaLogCheck is how often watchMetaLog looks at the metadata log.
const metaLogCheck = 250 * time.Millisecond

// watchMetaLog stops the broker (Broker.Fatal) once the metadata log's
// writes failed (an IO error): raft cannot go on over a log that refuses
// appends, and the broker would serve ever staler metadata. Kafka halts
// the broker when its metadata log dir fails (KIP-858).
func (c *cluster) watchMetaLog() {
	defer c.wg.Done()
	t := time.NewTicker(metaLogCheck)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if err := c.metaPart.Failed(); err != nil {
			c.b.logger.Error("sluice: the metadata log cannot be written; the broker stops (as Kafka halts when its metadata log dir fails): fix the disk and restart it",
				"dir", c.metaPart.Dir(), "err", err)
			select {
			case c.b.fatal <- fmt.Errorf("server: metadata log: %w", err):
			default:
			}
			return
		}
	}
}

// isController reports whether this node is the active controller.
func (c *cluster) isController() bool { return c.metaPart != nil && c.metaPart.IsLeader() }

// controllerID is the active controller as this node knows it (-1: none).
func (c *cluster) controllerID() int32 {
	if c.metaPart == nil {
		return -1
	}
	lead, _, ok := c.metaPart.Leader()
	if !ok {
		return -1
	}
	return int32(lead)
}

// Propose appends encoded meta records to the metadata log as one batch
// and returns once it committed, with the offset of the first record
// (meta.Replicator). On a node that does not lead the metadata group it
// returns meta.ErrNotController.
func (c *cluster) Propose(ctx context.Context, recs [][]byte) (int64, error) {
	if !c.isController() {
		return 0, fmt.Errorf("%w: node %d is not the active controller (the controller is %d)", meta.ErrNotController, c.self, c.controllerID())
	}
	// A broker shutting down stops waiting for commits (its peers may be
	// stopping too, and the quorum gone).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	rs := make([]replica.Record, len(recs))
	for i, r := range recs {
		rs[i] = replica.Record{Value: r}
	}
	first, err := c.metaPart.AppendRecords(ctx, c.b.now().UnixMilli(), replica.AppendOptions{}, rs)
	if errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrLeaderNotAvailable) {
		return 0, fmt.Errorf("%w: %v", meta.ErrNotController, err)
	}
	if err != nil {
		return 0, err
	}
	return first, nil
}

// applyLoop hands every committed batch of the metadata log to the meta
// store, in order, then kicks whoever follows the metadata (the
// reconciler, the transport's peers, the active controller).
func (c *cluster) applyLoop() {
	defer c.wg.Done()
	b := c.b
	var buf []byte
	logged := ""
	seen := b.meta.ReplicatedOffset() // the offset the last applied() followed
	for {
		changed := c.metaPart.Changed()
		next, hw := b.meta.ReplicatedOffset(), c.metaPart.HighWatermark()
		if next != seen {
			// A raft snapshot restored the state (metaSnapState.Restore,
			// in the raft worker): follow it as an apply.
			seen = next
			c.applied()
		}
		if next < hw {
			var err error
			buf, err = c.applyFrom(buf, next, hw)
			if err != nil {
				if msg := err.Error(); msg != logged {
					b.logger.Error("sluice: cannot apply the metadata log; retrying", "offset", next, "err", err)
					logged = msg
				}
				select {
				case <-c.stop:
					return
				case <-time.After(time.Second):
				}
			} else {
				logged = ""
				seen = b.meta.ReplicatedOffset()
				c.applied()
			}
			continue
		}
		select {
		case <-c.stop:
			return
		case <-changed:
		}
	}
}

// applyFrom applies the committed records of [from, hw), batch by batch
// (a batch is one Propose: one atomic change of the metadata).
func (c *cluster) applyFrom(buf []byte, from, hw int64) ([]byte, error) {
	b := c.b
	if ls := c.metaPart.LogStartOffset(); from < ls {
		// A snapshot install restores the state first (metaSnapState),
		// so this is only a log whose retention passed this node's own
		// applier.
		return buf, fmt.Errorf("the metadata log starts at offset %d, after the next one to apply (%d)", ls, from)
	}
	buf, _, err := c.metaPart.ScanRecords(buf, from, hw, func(first int64, recs []replica.Record) error {
		vals := make([][]byte, len(recs))
		for i, r := range recs {
			vals[i] = bytes.Clone(r.Value) // the store keeps them
		}
		return b.meta.ApplyReplicated(first, vals)
	})
	return buf, err
}

// applied runs after the metadata moved: the transport learns new brokers'
// addresses, the reconciler makes the partitions match, the active
// controller looks at its duties, the report loop updates the replication
// throttle.
func (c *cluster) applied() {
	var fenced []uint64
	for _, br := range c.b.meta.Brokers() {
		if addr, ok := c.peerAddr(br); ok {
			c.setPeer(br.NodeID, addr)
		}
		if br.Fenced {
			fenced = append(fenced, uint64(br.NodeID))
		}
	}
	// Out of every ISR, as Metadata reports them (clusterPartitionView)
	// and as acks=all counts copies (replica/raft_acks.go).
	c.host.SetFenced(fenced)
	c.b.recon.kickSoon(nil)
	c.act.Kick()
	c.kickThrottles()
}

// start runs what needs the listeners up: registration, heartbeats,
// leadership reports and the active controller's duties.
func (c *cluster) start() {
	if c.b.cfg.IsBroker() {
		// A controller-only node is no broker: it neither registers nor
		// holds partitions.
		c.wg.Add(3)
		go c.heartbeatLoop()
		go c.reportLoop()
		go c.coordinatorLoop()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.act.Run(c.ctx)
	}()
}

// close stops the cluster's goroutines, the metadata log, the host, the
// transport and the state store, in that order; partitions were closed
// before (their groups leave the host).
func (c *cluster) close() error {
	c.stopLoops()
	c.ctrl.close()
	c.brokers.close()
	var errs []error
	if c.metaPart != nil {
		errs = append(errs, c.metaPart.Close())
	}
	c.host.Close()
	errs = append(errs, c.transport.Close())
	errs = append(errs, c.states.Close())
	return errors.Join(errs...)
}

// stopLoops stops the cluster's goroutines and waits for them.
func (c *cluster) stopLoops() {
	c.stopOnce.Do(func() { close(c.stop); c.cancel() })
	c.wg.Wait()
}

// stopping is closed when the cluster goroutines must end.
func (c *cluster) stopping() <-chan struct{} { return c.stop }

// raftConfig is the raft side of opening partition p of t on this broker:
// its group, its saved state, the configuration a replica new to the
// broker starts from, and the leadership hook. A new replica starts from
// the group's initial voters exactly (the partition's replica list at its
// creation): replaying the log from its start then applies every
// configuration change since, exactly as the group went through them, its
// own addition included. A replica that joins a group already running (the
// partition was ever reassigned and this broker has no state for it) is
// marked joining: its configuration need not name it yet, and it never
// stands for election before it caught up with what the leader committed
// (replica.RaftConfig.Joining), so no old configuration of its replay
// elects it.
func (c *cluster) raftConfig(t meta.Topic, p int32) (*replica.RaftConfig, error) {
	id := replica.GroupID{TopicID: t.ID, Partition: p}
	st, saved, err := c.states.Load(id)
	if err != nil {
		return nil, err
	}
	_, everMoved := t.Moves[p]
	var minTerm uint64
	if int(p) < len(t.Leaders) && t.Leaders[p].LeaderEpoch > 0 {
		// A joiner starts at the newest leader epoch (raft term) the
		// metadata holds, so no deposed leader of an older term counts
		// it (replica.RaftConfig.MinTerm).
		minTerm = uint64(t.Leaders[p].LeaderEpoch)
	}
	// A new partition's first live replica campaigns as it opens
	// (firstLeader); the replica checks that the group is new on it too
	// (replica.RaftConfig.Preferred).
	preferred := !saved && !everMoved && c.firstLeader(t, p) == c.self
	return &replica.RaftConfig{
		Host: c.host, Group: id, State: st, Voters: raftVoterIDs(t.InitialReplicas(p)),
		// A replica without state, or one whose saved configuration
		// does not name it (it left the group and is being added again,
		// or crashed while replaying): it catches up before it may
		// stand. A restarted replica that was joining stays so by
		// itself (its saved GroupState.Joining); one that caught up
		// ticks at once, so a group whose voters all restarted before
		// its reassignment completed still elects a leader.
		Joining:        (!saved && everMoved) || (saved && !slices.Contains(st.ConfState.Voters, uint64(c.self)) && !slices.Contains(st.ConfState.Learners, uint64(c.self))),
		MinTerm:        minTerm,
		Preferred:      preferred,
		ReplicaLagTime: time.Duration(c.b.cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		Snapshots:      c.transport.SnapshotFetcher(),
		OnLeaderChange: func(uint64, uint64) { c.kickLeadership() },
	}, nil
}

// firstLeader returns the replica that should lead partition p of t first:
// the first in its assignment whose broker is registered and not fenced,
// as Kafka's controller makes it the leader when it creates the partition
// (ReplicationControlManager: the assignment's active replicas form the
// ISR, the first of them leads). It is -1 when the partition already had
// a leader (the metadata holds its leader epoch) or none of its replicas
// is live. It only chooses who campaigns first (raftConfig): raft's
// election decides, and brokers that see the fencing differently at that
// moment at worst both campaign, or neither (then raft's election timeout
// elects one).
func (c *cluster) firstLeader(t meta.Topic, p int32) int32 {
	if int(p) >= len(t.Assignments) || (int(p) < len(t.Leaders) && t.Leaders[p].LeaderEpoch >= 0) {
		return -1
	}
	for _, id := range t.Assignments[p] {
		if br, ok := c.b.meta.Broker(id); ok && !br.Fenced {
			return id
		}
	}
	return -1
}
