package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// The multi-raft host: one per broker, driving the raft groups of every
// partition replica the broker holds (CockroachDB's raft scheduler; see
// DESIGN.md, "Replication"). A fixed pool of workers takes groups with
// pending work (messages, proposals, ticks) from a scheduler keyed by
// group; a group is handled by at most one worker at a time, so its
// RawNode needs no lock of its own. One worker handles a batch of groups,
// in raft's order, in one place (Host.handle):
//
//  1. step each group's mailbox into its RawNode and take its Ready;
//  2. write each Ready's snapshot and entries to the group's storage;
//  3. sync every storage written, concurrently;
//  4. persist the batch's changed group states (HardState, ConfState,
//     applied index) in one synced write, after the entries their commit
//     indexes cover;
//  5. send the batch's messages (none leaves before the entries and the
//     HardState it depends on are durable);
//  6. tell the state machine of a leadership change (LeaderObserver),
//     then apply committed entries (configuration changes to the RawNode,
//     everything to the group's state machine);
//  7. Advance.
//
// This follows the etcd raft README's contract for synchronous storage
// writes (AsyncStorageWrites off).

// GroupID names a raft group: one partition's replicas.
type GroupID struct {
	TopicID   [16]byte
	Partition int32
}

func (id GroupID) String() string { return fmt.Sprintf("%x-%d", id.TopicID[:4], id.Partition) }

// GroupStorage is a group's raft log; raft reads it through raft.Storage.
// Only the worker handling the group calls it, one call at a time;
// raft.Storage's reads may run concurrently with nothing else. The
// group's HardState and ConfState are not the storage's to persist: the
// HardStateStore holds them, and the host hands them over with SetState,
// which InitialState then returns (the storage keeps no second copy on
// disk that could disagree).
type GroupStorage interface {
	raft.Storage
	// Append writes entries; the first may replace a suffix of the log
	// (a follower's divergent tail), which is truncated first. They need
	// not be durable until Sync.
	Append(ents []raftpb.Entry) error
	// ApplySnapshot replaces the log by a snapshot received from the
	// leader.
	ApplySnapshot(snap raftpb.Snapshot) error
	// SetState records st, from the HardStateStore (at AddGroup) or just
	// made durable in it, so InitialState returns st.HardState and
	// st.ConfState.
	SetState(st GroupState)
	// Sync makes everything appended durable.
	Sync() error
}

// HardStateStore persists the GroupStates of a broker's groups beside
// their logs (StateStore on Pebble; MemStateStore in memory).
type HardStateStore interface {
	// Save writes every state given in one atomic write, durable before
	// it returns when sync is set (a term or vote changed). An unsynced
	// write may be lost in a crash, with every later unsynced one, but
	// never reordered: a later synced write makes it durable too (a
	// write-ahead log's order, as Pebble's).
	Save(states map[GroupID]GroupState, sync bool) error
	// Load returns a group's saved state; ok is false when there is none
	// (a replica new to the broker).
	Load(id GroupID) (st GroupState, ok bool, err error)
	// Delete removes a group's state: its replica left the broker. Call it
	// after Host.RemoveGroup returned (no worker saves it again).
	Delete(id GroupID) error
}

// StateMachine applies a group's committed entries, in log order
// (configuration changes included, after the host applied them to raft).
//
// Apply must be idempotent: after a restart raft delivers again every
// committed entry above GroupState.Applied, and the host saves Applied
// one batch after the Apply that reached it (with the next HardState), so
// entries the machine had applied before a crash, configuration changes
// included, may come again. It runs in the worker handling the group.
type StateMachine interface {
	Apply(ents []raftpb.Entry)
}

// Transport carries raft messages between brokers. Send must not block for
// long: a message it cannot deliver may be dropped (raft retries).
type Transport interface {
	Send(msgs []GroupMessage)
}

// GroupMessage is one raft message of one group.
type GroupMessage struct {
	Group GroupID
	Msg   raftpb.Message
	// Quiesce marks the leader's quiesce message: a MsgHeartbeat carrying
	// the leader's term, commit and last index (Msg.Index) after which a
	// follower that agrees stops ticking (raft_quiesce.go). It is the
	// host's, not raft's: the receiving host handles it.
	Quiesce bool
}

// HostConfig configures a Host. EnsureDefaults fills zero fields;
// Validate reports every problem at once. Times are logical ticks where
// raft counts them (ElectionTicks, HeartbeatTicks) and durations
// elsewhere. The Sluice keys proposed for each field are in DESIGN.md
// ("Replication").
type HostConfig struct {
	NodeID    uint64 // the broker's node id, raft's replica id; required
	Workers   int    // worker goroutines; default 2
	Transport Transport
	HardState HardStateStore
	Logger    *slog.Logger // default slog.Default()
	// ElectionTicks and HeartbeatTicks are raft's, in ticks. Default 10
	// and 1: with the default 100 ms tick, a follower that hears nothing
	// stands for election after 1 to 2 s (raft randomizes the timeout in
	// [ElectionTicks, 2*ElectionTicks)), and a leader heartbeats every
	// 100 ms while its group is awake.
	ElectionTicks, HeartbeatTicks int
	// TickInterval is how often the host calls Tick itself. Default
	// 100 ms; negative leaves ticking to the caller (tests drive time with
	// Tick).
	TickInterval time.Duration
	// DisablePreVote and DisableCheckQuorum turn off raft's PreVote (a
	// replica asks whether it could win before it raises its term) and
	// CheckQuorum (a leader that has not heard from a quorum for an
	// election timeout steps down; a follower that heard from its leader
	// within one ignores votes). Default false: both on. Quiescence relies
	// on them: a replica that missed its group's quiesce message and
	// stands for election must not disrupt a group whose leader is alive.
	DisablePreVote, DisableCheckQuorum bool
	// DisableQuiescence keeps every group ticking (benchmarks compare).
	// Default false: a group idle for QuiesceTicks ticks, with every live
	// replica caught up, stops ticking until a proposal, a message or a
	// liveness change wakes it (raft_quiesce.go).
	DisableQuiescence bool
	// QuiesceTicks is how many ticks a leader's group must be idle (no new
	// entry, everything committed and applied, every live follower caught
	// up) before it quiesces. Default 2.
	QuiesceTicks int
	// LivenessInterval is how often the transport sends each peer a
	// liveness heartbeat (one small frame per broker pair, whatever the
	// number of groups). Default 250 ms.
	LivenessInterval time.Duration
	// LivenessTimeout is how long a peer may stay silent before the
	// transport reports it down (Host.PeerDown), waking the groups it
	// led so they elect at once. It must exceed LivenessInterval, and
	// should stay under the election timeout so failover stays under
	// 2 s. Default 1 s.
	LivenessTimeout time.Duration
	// MaxBatch is the most groups one worker handles together. Default 64.
	MaxBatch int
	// Now is the clock for ReplicaProgress.CaughtUp and the read lease
	// (raft_lease.go: a monotonic reading, as time.Now's). Default
	// time.Now.
	Now func() time.Time
	// LeaseTick is the wall time one tick stands for when the caller
	// ticks (TickInterval negative), for the read lease (ReadLease);
	// with the host's own ticker the tick is TickInterval. Default 0: a
	// caller-ticked host grants no read lease.
	LeaseTick time.Duration
	// Throttle, when set, paces the catch-up traffic of throttled
	// replicas (Kafka's replication quotas, raft_throttle.go): the host
	// sends through it and Deliver goes through it. One host per
	// Throttle; the host starts its goroutine and Close stops it.
	// Default nil: nothing is paced.
	Throttle *Throttle
	// Metrics, when set, is told of the host's raft events (brokers count
	// them for Prometheus); nil, and any nil field, costs nothing.
	Metrics *HostMetrics
}

// HostMetrics are callbacks for a host's raft events. Each is optional,
// called from the host's goroutines: it must be quick and must not call
// the host.
type HostMetrics struct {
	// LeaderChanged: a group on this host learned of a new leader (or
	// of none: an election began).
	LeaderChanged func()
	// SnapshotSent and SnapshotReceived: a raft snapshot message
	// (MsgSnap) left for a follower, or arrived from a leader.
	SnapshotSent, SnapshotReceived func()
	// Committed: an acks=all proposal made on this host (its leader)
	// committed, d after it was proposed.
	Committed func(d time.Duration)
}

// EnsureDefaults fills zero fields with their defaults.
func (c *HostConfig) EnsureDefaults() {
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.QuiesceTicks == 0 {
		c.QuiesceTicks = 2
	}
	if c.LivenessInterval == 0 {
		c.LivenessInterval = 250 * time.Millisecond
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = time.Second
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem with the configuration at once.
func (c *HostConfig) Validate() error {
	var errs []error
	if c.NodeID == 0 {
		errs = append(errs, errors.New("NodeID must be set (raft reserves 0)"))
	}
	if c.Transport == nil {
		errs = append(errs, errors.New("Transport must be set"))
	}
	if c.HardState == nil {
		errs = append(errs, errors.New("HardState must be set"))
	}
	if c.HeartbeatTicks <= 0 || c.ElectionTicks <= c.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("HeartbeatTicks %d must be positive and under ElectionTicks %d", c.HeartbeatTicks, c.ElectionTicks))
	}
	if c.QuiesceTicks < 0 {
		errs = append(errs, fmt.Errorf("QuiesceTicks %d is negative", c.QuiesceTicks))
	}
	if c.TickInterval > 0 && c.ReadLease() <= 0 {
		errs = append(errs, fmt.Errorf("ElectionTicks %d of %v leave no read lease (raft_lease.go: ElectionTicks-3 ticks at most); at least 4", c.ElectionTicks, c.TickInterval))
	}
	if c.LivenessInterval <= 0 || c.LivenessTimeout <= c.LivenessInterval {
		errs = append(errs, fmt.Errorf("LivenessTimeout %v must exceed LivenessInterval %v (both positive)", c.LivenessTimeout, c.LivenessInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("replica: raft host config: %w", err)
	}
	return nil
}

// GroupConfig describes a group joining the host.
type GroupConfig struct {
	ID      GroupID
	Storage GroupStorage
	Machine StateMachine
	// State is where the replica starts: the state HardStateStore.Load
	// returned on a restart, or for a replica new to the broker the
	// group's synthetic initial state (an empty HardState, a ConfState
	// naming the first replicas, Applied 0; a replica joining an existing
	// group names the replicas the group started with and replays the
	// log). The host hands it to Storage.SetState and starts raft with
	// Applied = State.Applied.
	State GroupState
	// Joining marks a replica joining a group that already ran, started
	// from an old configuration (RaftConfig.Joining): it neither ticks nor
	// campaigns until it caught up (raft_join.go).
	Joining bool
	// CampaignIfNew makes a replica of a new group campaign as soon as it
	// joins the host (RaftConfig.Preferred): new means a zero HardState,
	// Applied 0, an empty log (Storage's LastIndex 0, so no snapshot
	// either), not Joining, and this replica a voter of State's
	// ConfState. It campaigns again every campaignEvery ticks,
	// campaignTries times in all, while it knows of no leader and is not
	// a candidate (raft_quiesce.go's retryCampaign; a peer that has not
	// opened the group drops its requests); then raft's election timeout
	// takes over. For any other group it changes nothing. A lone voter
	// wins its first campaign at once.
	CampaignIfNew bool
}

// ErrGroupExists and ErrNoGroup report AddGroup and the other calls on a
// group the host already has, or does not have.
var (
	ErrGroupExists = errors.New("replica: raft group already on this host")
	ErrNoGroup     = errors.New("replica: raft group not on this host")
	ErrHostClosed  = errors.New("replica: raft host closed")
)

// Host drives the raft groups of one broker. It is safe for concurrent
// use.
//
// Locks: Host.mu (the group map), group.mu (a group's mailbox),
// Host.tickMu (the ticking set) and Host.downMu are leaves, never held
// together; the scheduler's mutex is a leaf too; Host.tickRun serializes
// Tick and takes only leaves. No lock is held while a worker writes,
// syncs, sends, applies or tells a LeaderObserver.
type Host struct {
	cfg   HostConfig
	sched *scheduler

	mu     sync.RWMutex
	groups map[GroupID]*group
	closed bool

	// ticking holds the groups that tick: every group but the quiesced
	// ones, so a Tick costs nothing per quiesced group. tickMu is a leaf;
	// tickRun serializes Tick calls (tickBuf is theirs).
	tickMu  sync.Mutex
	ticking map[*group]struct{}
	tickRun sync.Mutex
	tickBuf []*group
	// downMu serializes changes to down, the peers reported down
	// (PeerDown), read without a lock by the workers.
	downMu sync.Mutex
	down   atomic.Pointer[[]uint64]
	// fenced: the replicas the cluster fenced (SetFenced), out of every
	// ISR (raft_acks.go).
	fenced atomic.Pointer[[]uint64]

	// base is the host clock's origin and lease the read lease's length
	// (raft_lease.go).
	base  time.Time
	lease time.Duration

	stopTick  chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// group is one raft group on the host. rn, storage and machine belong to
// the worker handling the group; mu guards the mailbox.
type group struct {
	id      GroupID
	rn      *raft.RawNode
	storage GroupStorage
	machine StateMachine
	// state is the group's HardState as last saved, its ConfState after
	// the last configuration change applied, and the last index applied;
	// saved is what the HardStateStore holds. confGen and savedConfGen
	// count configuration changes so a comparison needs no slice walk.
	state, saved          GroupState
	confGen, savedConfGen uint64
	// lead, term and role are the replica's view of the leadership as
	// last reported (noteLeadership); leadHint is lead for readers outside
	// the worker (liveness).
	lead, term uint64
	role       raft.StateType
	leadHint   atomic.Uint64
	// quiesced is set while the group does not tick (worker-owned; the
	// host's ticking set mirrors it). idleTicks, idleLast and
	// campaignLeft, campaignTries are raft_quiesce.go's.
	quiesced                  bool
	ticked                    int // ticks stepped in this handling
	idleTicks                 int
	idleLast                  uint64
	campaignLeft, campaignTry int
	qv                        quiesceVisit
	quiesceFn                 func(uint64, raft.ProgressType, tracker.Progress)
	// caught, pv and visitFn track the replicas' progress on a leader
	// (raft_progress.go).
	caught  []caughtUp
	pv      progressVisit
	visitFn func(uint64, raft.ProgressType, tracker.Progress)
	// prog and progFn hand the progress to a copyWaiter (raft_acks.go).
	prog   []ReplicaProgress
	progFn func(uint64, raft.ProgressType, tracker.Progress)
	// confWait, pendingConf and pendingTerm track the configuration
	// change this leader proposed (raft_membership.go): proposed and not
	// yet seen in a Ready, then its index and term.
	confWait                 bool
	pendingConf, pendingTerm uint64
	// joining and joinCommit are raft_join.go's: set while a joining
	// replica has not caught up, and the leader's commit index it must
	// apply first (0: not heard yet).
	joining    bool
	joinCommit uint64
	// lease is the leader's read lease (raft_lease.go).
	lease leaseState

	mu      sync.Mutex
	inbox   []GroupMessage
	ops     []groupOp
	ticks   int
	recheck bool  // a peer's liveness changed: re-check the leader (checkLiveness)
	removed error // set once the group left the host

	sstate schedState // guarded by the scheduler's mutex
}

// groupOp is a call that runs on the group's RawNode in its worker.
type groupOp struct {
	fn   func(g *group) error
	wake bool       // the call wakes a quiesced group
	done chan error // buffered
}

// NewHost checks cfg (after EnsureDefaults) and starts a host's workers
// and, unless cfg.TickInterval is negative, its ticker.
func NewHost(cfg HostConfig) (*Host, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, sched: newScheduler(), groups: map[GroupID]*group{}, ticking: map[*group]struct{}{}, stopTick: make(chan struct{}),
		base: cfg.Now(), lease: cfg.ReadLease()}
	if cfg.Throttle != nil {
		if err := cfg.Throttle.attach(h); err != nil {
			return nil, err
		}
	}
	for range cfg.Workers {
		h.wg.Add(1)
		go h.work()
	}
	if cfg.TickInterval > 0 {
		h.wg.Add(1)
		go h.ticker(cfg.TickInterval)
	}
	return h, nil
}

func (h *Host) ticker(every time.Duration) {
	defer h.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stopTick:
			return
		case <-t.C:
			h.Tick()
		}
	}
}

// Close stops the workers after the batches they are handling and fails
// calls still waiting with ErrHostClosed; the groups' storages stay open
// (their owners close them). It may be called more than once.
func (h *Host) Close() {
	h.closeOnce.Do(func() { close(h.stopTick) })
	h.sched.stop()
	h.wg.Wait()
	if t := h.cfg.Throttle; t != nil {
		t.close() // after the workers: nothing sends through it any more
	}
	h.mu.Lock()
	h.closed = true
	gs := h.groups
	h.groups = map[GroupID]*group{}
	h.mu.Unlock()
	for _, g := range gs {
		g.fail(ErrHostClosed)
	}
}

// fail answers the group's waiting callers with err and refuses later
// ones.
func (g *group) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removed = err
	for _, op := range g.ops {
		op.done <- err
	}
	g.ops = nil
}

// AddGroup starts a replica of a group on the host, from gc.State and
// the log its storage holds.
func (h *Host) AddGroup(gc GroupConfig) error {
	if cs := gc.State.ConfState; len(cs.Voters) == 0 && len(cs.Learners) == 0 {
		if snap, err := gc.Storage.Snapshot(); err != nil || len(snap.Metadata.ConfState.Voters) == 0 {
			return fmt.Errorf("replica: raft group %s: its state names no replicas (a new replica starts from the group's initial ConfState)", gc.ID)
		}
	}
	gc.State.ConfState = cloneConfState(gc.State.ConfState)
	gc.Storage.SetState(gc.State)
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        h.cfg.NodeID,
		ElectionTick:              h.cfg.ElectionTicks,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   gc.Storage,
		Applied:                   gc.State.Applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		// A follower catching up gets at most this many bytes of appends
		// in flight (with MaxInflightMsgs): a bounded frame queue, and
		// memory, instead of 256 MiB at once.
		MaxInflightBytes:          32 << 20,
		CheckQuorum:               !h.cfg.DisableCheckQuorum,
		PreVote:                   !h.cfg.DisablePreVote,
		DisableProposalForwarding: true, // Kafka: produce to the leader only
		// A leader whose removal it applies steps down at once instead of
		// leading a group it is not in until CheckQuorum fails (etcd raft
		// issue 83; RemoveReplica refuses the leader, a raw
		// ProposeConfChange may not).
		StepDownOnRemoval: true,
		Logger:            raftLogger{h.cfg.Logger.With("group", gc.ID.String())},
	})
	if err != nil {
		return fmt.Errorf("replica: raft group %s: %w", gc.ID, err)
	}
	g := &group{id: gc.ID, rn: rn, storage: gc.Storage, machine: gc.Machine, state: gc.State, saved: gc.State, term: gc.State.HardState.Term, joining: gc.Joining || gc.State.Joining}
	h.initLease(g, gc.State)
	campaign := gc.CampaignIfNew && !g.joining && newGroup(h.cfg.NodeID, gc)
	if campaign {
		// retryCampaign, in the group's first step, campaigns.
		g.campaignTry, g.campaignLeft = campaignTries, 0
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrHostClosed
	}
	if _, ok := h.groups[gc.ID]; ok {
		h.mu.Unlock()
		return ErrGroupExists
	}
	h.groups[gc.ID] = g
	h.setTicking(g, true)
	h.mu.Unlock()
	if campaign {
		h.sched.enqueue(g) // now, not at the next tick
	}
	return nil
}

// newGroup reports whether gc starts a group that never ran on this
// replica (GroupConfig.CampaignIfNew): no term, vote, commit or applied
// entry, nothing in the log and no snapshot, and self one of the voters
// it starts with.
func newGroup(self uint64, gc GroupConfig) bool {
	if gc.State.HardState != (raftpb.HardState{}) || gc.State.Applied != 0 || !slices.Contains(gc.State.ConfState.Voters, self) {
		return false
	}
	last, err := gc.Storage.LastIndex()
	return err == nil && last == 0
}

// RemoveGroup takes a group off the host and returns once no worker
// handles it (so it must not be called from a StateMachine). Its waiting
// calls fail with ErrNoGroup.
func (h *Host) RemoveGroup(id GroupID) {
	h.mu.Lock()
	g := h.groups[id]
	delete(h.groups, id)
	h.mu.Unlock()
	if g != nil {
		h.setTicking(g, false)
		g.fail(ErrNoGroup)
		// A worker handling it finishes first; later it is skipped
		// (step sees it removed), so its storage may be closed and the
		// same group added again.
		h.sched.waitIdle(g)
	}
}

// failGroup takes a group whose storage failed off the host: raft has
// handed out a Ready that was not made durable, so its RawNode must not
// be used again (etcd raft panics on a second Ready before Advance, and an
// Advance would claim unwritten entries durable). Its calls fail with err;
// its owner reopens the storage and adds the group again. Called by the
// worker handling g.
func (h *Host) failGroup(g *group, err error) {
	h.cfg.Logger.Error("replica: raft group storage failed; the group leaves the host until its owner adds it again", "group", g.id.String(), "err", err)
	h.mu.Lock()
	if h.groups[g.id] == g {
		delete(h.groups, g.id)
	}
	h.mu.Unlock()
	h.setTicking(g, false)
	g.fail(fmt.Errorf("%w: %w", ErrNoGroup, err))
	if f, ok := g.machine.(GroupFailer); ok {
		f.GroupFailed(err)
	}
}

// GroupFailer is implemented by a StateMachine that wants to hear that
// its group left the host because its storage failed (failGroup): it
// runs once, in the worker that handled the group, after the group left.
type GroupFailer interface {
	GroupFailed(err error)
}

func (h *Host) group(id GroupID) *group {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.groups[id]
}

// Deliver hands messages received from other brokers to their groups.
// Messages for groups not on the host are dropped. With a
// HostConfig.Throttle, the appends of follower-throttled groups may be
// held back (raft_throttle.go); it never blocks on the rate.
func (h *Host) Deliver(msgs []GroupMessage) {
	if m := h.cfg.Metrics; m != nil && m.SnapshotReceived != nil {
		countSnaps(msgs, m.SnapshotReceived)
	}
	if t := h.cfg.Throttle; t != nil {
		t.receive(msgs)
		return
	}
	h.deliverNow(msgs)
}

// deliverNow is Deliver past the throttle.
func (h *Host) deliverNow(msgs []GroupMessage) {
	for i := range msgs {
		g := h.group(msgs[i].Group)
		if g == nil {
			continue
		}
		if t := msgs[i].Msg.Type; t == raftpb.MsgSnap || t == raftpb.MsgHeartbeat {
			// A compacted topic's snapshot fetches its files first; a
			// heartbeat may show the leader missed that a snapshot was
			// applied (raft_snapfiles.go).
			if si, ok := g.storage.(snapshotInterceptor); ok && si.intercept(h, msgs[i]) {
				continue
			}
		}
		g.mu.Lock()
		g.inbox = append(g.inbox, msgs[i])
		g.mu.Unlock()
		h.sched.enqueue(g)
	}
}

// Tick advances the logical clock of every group that is not quiesced
// by one tick (raft's election and heartbeat timeouts count ticks). The
// host's ticker calls it every TickInterval; tests call it to drive time.
// A quiesced group costs it nothing.
func (h *Host) Tick() {
	h.tickRun.Lock()
	defer h.tickRun.Unlock()
	h.tickMu.Lock()
	buf := h.tickBuf[:0]
	for g := range h.ticking {
		buf = append(buf, g)
	}
	h.tickMu.Unlock()
	for _, g := range buf {
		g.mu.Lock()
		g.ticks++
		g.mu.Unlock()
	}
	h.sched.enqueueAll(buf)
	clear(buf)
	h.tickBuf = buf[:0]
}

// Campaign makes the replica stand for election now (tests, and leadership
// moves).
func (h *Host) Campaign(id GroupID) error {
	return h.do(id, func(rn *raft.RawNode) error { return rn.Campaign() })
}

// Propose appends data to the group's log if the replica is its leader. It
// returns once raft accepted or dropped the proposal (raft.ErrProposalDropped
// when the replica is not the leader); acceptance is not commitment.
func (h *Host) Propose(id GroupID, data []byte) error {
	return h.do(id, func(rn *raft.RawNode) error { return rn.Propose(data) })
}

// do runs fn on the group's RawNode in the worker that owns it, waking
// the group if it is quiesced, and returns its error.
func (h *Host) do(id GroupID, fn func(rn *raft.RawNode) error) error {
	return h.call(id, true, func(g *group) error { return fn(g.rn) })
}

// call runs fn on the group in the worker that owns it and returns its
// error; wake says whether it wakes a quiesced group (a proposal does, a
// status read does not).
func (h *Host) call(id GroupID, wake bool, fn func(g *group) error) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	done := make(chan error, 1)
	g.mu.Lock()
	if err := g.removed; err != nil {
		g.mu.Unlock()
		return err
	}
	g.ops = append(g.ops, groupOp{fn: fn, wake: wake, done: done})
	g.mu.Unlock()
	h.sched.enqueue(g)
	return <-done
}

// TransferLeadership asks the group's leader (this replica) to hand
// leadership to replica to (raft's MsgTimeoutNow once to has caught up):
// how a broker moves its leaderships away before a controlled shutdown and
// how a preferred leader is elected. It returns once asked, not once
// moved; a replica that is not the leader forwards the request to it.
func (h *Host) TransferLeadership(id GroupID, to uint64) error {
	return h.call(id, true, func(g *group) error {
		g.rn.TransferLeader(to)
		// The lease is blocked before this returns, not only once the
		// worker's pass reaches noteTransfer: a read checked right after
		// the call must see the transfer.
		h.noteTransfer(g)
		return nil
	})
}

// ProposeConfChange proposes a membership change (joint consensus with
// ConfChangeV2: add a learner, promote it, remove a replica). Like
// Propose it returns once raft accepted or dropped it; the change takes
// effect when its entry is applied.
func (h *Host) ProposeConfChange(id GroupID, cc raftpb.ConfChangeV2) error {
	return h.do(id, func(rn *raft.RawNode) error { return rn.ProposeConfChange(cc) })
}

// Status returns the group's raft status. It does not wake a quiesced
// group.
func (h *Host) Status(id GroupID) (raft.BasicStatus, error) {
	var st raft.BasicStatus
	err := h.call(id, false, func(g *group) error {
		st = g.rn.BasicStatus()
		return nil
	})
	return st, err
}

func (h *Host) work() {
	defer h.wg.Done()
	w := &worker{states: map[GroupID]GroupState{}}
	var batch []*group
	for {
		batch = h.sched.next(batch[:0], h.cfg.MaxBatch)
		if batch == nil {
			return
		}
		h.handle(w, batch)
		for _, g := range batch {
			h.sched.done(g)
		}
	}
}

// worker is one worker goroutine's scratch space, reused batch after
// batch.
type worker struct {
	rds    []ready
	states map[GroupID]GroupState
	work   []*ready
	out    []GroupMessage
}

// ready is one group of a batch, with its Ready if it had one.
type ready struct {
	g      *group
	rd     raft.Ready
	has    bool  // rd is a Ready raft handed out
	failed error // the group's storage failed: nothing more of it runs
	// sentEarly: a leader's messages, sent before its write (step 1b).
	sentEarly bool
}

// persist writes r's snapshot and entries to its group's storage and
// syncs them (steps 2 and 3 of handle, for one group); a failure is
// r.failed. A group whose only voter is this leader then commits what it
// made durable (soleVoterDurable).
func (h *Host) persist(r *ready) {
	h.noteConfProposed(r.g, &r.rd)
	var err error
	snap := !raft.IsEmptySnap(r.rd.Snapshot)
	if snap {
		err = r.g.storage.ApplySnapshot(r.rd.Snapshot)
	}
	if err == nil && len(r.rd.Entries) > 0 {
		err = r.g.storage.Append(r.rd.Entries)
	}
	if err == nil && r.rd.MustSync && (len(r.rd.Entries) > 0 || snap) {
		err = r.g.storage.Sync()
	}
	if err != nil {
		r.failed = err
		return
	}
	if len(r.rd.Entries) > 0 && r.rd.SoftState == nil && !holdsConfChange(r.rd.CommittedEntries) {
		h.soleVoterDurable(r.g)
	}
}

// holdsConfChange reports whether ents hold a configuration change.
func holdsConfChange(ents []raftpb.Entry) bool {
	for i := range ents {
		if t := ents[i].Type; t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2 {
			return true
		}
	}
	return false
}

// leaderReady reports whether rd is a leader's whose messages may leave
// before it is persisted: the replica leads after it, and it changes
// neither the term nor the vote last saved.
func leaderReady(g *group, rd *raft.Ready) bool {
	role := g.role
	if rd.SoftState != nil {
		role = rd.SoftState.RaftState
	}
	if role != raft.StateLeader {
		return false
	}
	hs := rd.HardState
	return raft.IsEmptyHardState(hs) || (hs.Term == g.saved.HardState.Term && hs.Vote == g.saved.HardState.Vote)
}

// handle runs one batch of groups through raft's order (see the top of
// the file). A group whose storage fails is taken off the host
// (failGroup): none of its Ready's messages is sent, and it is not
// advanced.
func (h *Host) handle(w *worker, batch []*group) {
	rds := w.rds[:0]
	defer func() {
		clear(rds) // drop the Readys' references
		w.rds = rds[:0]
	}()
	// 1. Mailboxes, Readys.
	for _, g := range batch {
		if !h.step(g) {
			continue // removed
		}
		r := ready{g: g}
		if g.rn.HasReady() {
			r.rd, r.has = g.rn.Ready(), true
		}
		rds = append(rds, r)
	}
	// 1b. A leader's messages go before its own write (the raft
	// thesis, 10.2.1, as etcd's server does it): they carry no state of
	// this Ready that must be durable first (a leader's term was made
	// durable when it stood; its own entries count toward a commit only
	// once written, through Advance), so followers write in parallel with
	// it. A Ready that changes the term or vote sends after step 4.
	early := w.out[:0]
	for i := range rds {
		r := &rds[i]
		if !r.has || len(r.rd.Messages) == 0 || !leaderReady(r.g, &r.rd) {
			continue
		}
		for _, m := range r.rd.Messages {
			early = append(early, GroupMessage{Group: r.g.id, Msg: m})
		}
		r.sentEarly = true
	}
	if len(early) > 0 {
		h.send(early)
	}
	clear(early)
	w.out = early[:0]
	// 2. Snapshots and entries, 3. synced: each group's in turn, the
	// groups concurrently (each writes and syncs its own log), so a
	// group's fsync waits for neither the other groups' writes nor their
	// fsyncs. A group whose only voter is this leader commits what it
	// made durable at once (soleVoterDurable).
	work := w.work[:0]
	for i := range rds {
		r := &rds[i]
		if !r.has || r.failed != nil {
			continue
		}
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			h.persist(r) // rare: not alongside the others
			continue
		}
		if len(r.rd.Entries) > 0 {
			work = append(work, r)
		} else {
			h.noteConfProposed(r.g, &r.rd)
		}
	}
	if len(work) == 1 {
		h.persist(work[0])
	} else if len(work) > 1 {
		var wg sync.WaitGroup
		for _, r := range work[1:] {
			wg.Go(func() { h.persist(r) })
		}
		h.persist(work[0])
		wg.Wait()
	}
	clear(work)
	w.work = work[:0]
	// 4. Group states, in one synced write: a new HardState, or the
	// ConfState and applied index the previous apply left (with the
	// HardState last saved), so the three saved together are consistent.
	states := w.states
	clear(states)
	mustSync := false
	for i := range rds {
		r := &rds[i]
		if r.failed != nil {
			continue
		}
		hs := r.g.state.HardState
		if r.has && !raft.IsEmptyHardState(r.rd.HardState) {
			hs = r.rd.HardState
		}
		if hs != r.g.saved.HardState || r.g.state.Applied != r.g.saved.Applied || r.g.confGen != r.g.savedConfGen || r.g.joining != r.g.saved.Joining {
			states[r.g.id] = GroupState{HardState: hs, ConfState: r.g.state.ConfState, Applied: r.g.state.Applied, ConfIndex: r.g.state.ConfIndex, Joining: r.g.joining}
			// Raft's contract: a new term or vote is durable before a
			// message of its Ready leaves; a commit index, ConfState or
			// applied index alone may be lost in a crash (raft and the
			// state machine recover them from the log), as etcd's WAL
			// does it.
			if hs.Term != r.g.saved.HardState.Term || hs.Vote != r.g.saved.HardState.Vote {
				mustSync = true
			}
		}
	}
	if len(states) > 0 {
		err := h.cfg.HardState.Save(states, mustSync)
		for i := range rds {
			r := &rds[i]
			st, ok := states[r.g.id]
			if !ok {
				continue
			}
			if err != nil {
				r.failed = err
				continue
			}
			r.g.state.HardState = st.HardState
			r.g.saved, r.g.savedConfGen = st, r.g.confGen
			r.g.storage.SetState(st)
		}
	}
	for i := range rds {
		if rds[i].failed != nil {
			h.failGroup(rds[i].g, rds[i].failed)
		}
	}
	// 5. Messages.
	out := w.out[:0]
	for i := range rds {
		r := &rds[i]
		if !r.has || r.failed != nil || r.sentEarly {
			continue
		}
		for _, m := range r.rd.Messages {
			out = append(out, GroupMessage{Group: r.g.id, Msg: m})
		}
	}
	if len(out) > 0 {
		h.send(out)
	}
	clear(out)
	w.out = out[:0]
	// 6. Leadership (LeaderObserver), apply, 7. Advance.
	for i := range rds {
		r := &rds[i]
		if r.failed != nil {
			continue
		}
		if !r.has {
			h.trackProgress(r.g)
			continue
		}
		h.noteLeadership(r.g, &r.rd)
		if snap := r.rd.Snapshot; !raft.IsEmptySnap(snap) {
			r.g.state.ConfState = cloneConfState(snap.Metadata.ConfState)
			r.g.state.Applied = snap.Metadata.Index
			r.g.state.ConfIndex = snap.Metadata.Index
			if ci, ok := r.g.storage.(snapshotConfIndexer); ok {
				// The ConfState may hold changes above the index.
				r.g.state.ConfIndex = max(snap.Metadata.Index, ci.snapshotConfIndex())
			}
			r.g.confGen++
		}
		applied := false
		if len(r.rd.CommittedEntries) > 0 {
			if err := h.apply(r.g, r.rd.CommittedEntries); err != nil {
				r.failed = err
				h.failGroup(r.g, err)
				continue
			}
			applied = true
		}
		r.g.rn.Advance(r.rd)
		h.noteSingle(r.g)
		h.noteReadStates(r.g, &r.rd)
		r.g.joined()
		h.trackProgress(r.g)
		// A quiesced group comes back once more to save what it applied
		// (a ticking one saves it with its next batch).
		if r.g.rn.HasReady() || (applied && r.g.quiesced) {
			h.sched.again(r.g)
		}
	}
	// 8. Leaders idle long enough quiesce: their quiesce messages carry
	// a term and commit made durable above.
	qout := w.out[:0]
	for i := range rds {
		if rds[i].failed == nil {
			qout = h.maybeQuiesce(rds[i].g, qout)
		}
	}
	if len(qout) > 0 {
		h.send(qout)
	}
	clear(qout)
	w.out = qout[:0]
}

// send hands a worker's messages to the transport, through the
// throttle if there is one. msgs is not kept (the worker reuses it).
func (h *Host) send(msgs []GroupMessage) {
	if m := h.cfg.Metrics; m != nil && m.SnapshotSent != nil {
		countSnaps(msgs, m.SnapshotSent)
	}
	if t := h.cfg.Throttle; t != nil {
		t.send(msgs)
		return
	}
	h.cfg.Transport.Send(msgs)
}

// countSnaps calls note once per MsgSnap among msgs.
func countSnaps(msgs []GroupMessage, note func()) {
	for i := range msgs {
		if msgs[i].Msg.Type == raftpb.MsgSnap {
			note()
		}
	}
}

// step moves a group's mailbox into its RawNode; false when the group
// has left the host. A quiesced group ignores ticks (one may have raced
// its quiescing) and wakes for anything but a heartbeat response or a
// call that does not wake (raft_quiesce.go).
func (h *Host) step(g *group) bool {
	g.mu.Lock()
	if g.removed != nil {
		g.inbox, g.ticks = nil, 0
		g.mu.Unlock()
		h.setTicking(g, false) // a wake may have raced its removal
		return false
	}
	inbox, ops, ticks, recheck := g.inbox, g.ops, g.ticks, g.recheck
	g.inbox, g.ops, g.ticks, g.recheck = nil, nil, 0, false
	g.mu.Unlock()
	if g.quiesced && h.wakes(inbox, ops) {
		h.unquiesce(g)
	}
	g.ticked = 0
	if !g.quiesced && !g.joining {
		for range ticks {
			g.rn.Tick()
		}
		g.ticked = ticks
	}
	for i := range inbox {
		if inbox[i].Quiesce {
			h.quiesceFollower(g, inbox[i].Msg)
			continue
		}
		if g.joining && isVoteRequest(inbox[i].Msg.Type) {
			continue // a joiner grants no vote (raft_join.go)
		}
		if h.holdsVote(g, &inbox[i].Msg) {
			continue // a restarted replica's hold (raft_lease.go)
		}
		if err := g.rn.Step(inbox[i].Msg); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
			h.cfg.Logger.Debug("replica: raft step", "group", g.id.String(), "err", err)
		}
		g.noteJoin(inbox[i].Msg)
	}
	for _, op := range ops {
		op.done <- op.fn(g)
	}
	if recheck {
		h.checkLiveness(g)
	}
	h.retryCampaign(g)
	h.noteTransfer(g)
	return true
}

// snapshotConfIndexer is a GroupStorage whose snapshots' ConfState may
// hold configuration changes above their index (the partition's,
// raft_snapshot.go): snapshotConfIndex returns, right after
// ApplySnapshot, the index up to which the applied snapshot's ConfState
// holds every change. Without it a snapshot's ConfState is the one at
// its index (raft's own rule).
type snapshotConfIndexer interface {
	snapshotConfIndex() uint64
}

// apply applies committed entries: configuration changes to the RawNode,
// then the group's StateMachine. A configuration change that does not
// apply is returned (not raft's panic: the group leaves the host, the
// broker and its other groups go on).
func (h *Host) apply(g *group, ents []raftpb.Entry) error {
	if err := h.applyConfChanges(g, ents); err != nil {
		return err
	}
	g.machine.Apply(ents)
	g.state.Applied = ents[len(ents)-1].Index
	return nil
}

// applyConfChanges applies the configuration changes among ents to raft,
// but those at or below g.state.ConfIndex, which its ConfState holds
// already (a snapshot's, newer than its index: GroupState.ConfIndex). A
// change that does not apply to the configuration (etcd raft would
// panic: it would remove every voter, say) is returned as an error,
// with nothing applied from it on.
func (h *Host) applyConfChanges(g *group, ents []raftpb.Entry) error {
	for i := range ents {
		var cc raftpb.ConfChangeI
		switch ents[i].Type {
		case raftpb.EntryConfChange:
			var c raftpb.ConfChange
			if err := c.Unmarshal(ents[i].Data); err != nil {
				h.cfg.Logger.Error("replica: undecodable conf change", "group", g.id.String(), "index", ents[i].Index, "err", err)
				continue
			}
			cc = c
		case raftpb.EntryConfChangeV2:
			var c raftpb.ConfChangeV2
			if err := c.Unmarshal(ents[i].Data); err != nil {
				h.cfg.Logger.Error("replica: undecodable conf change", "group", g.id.String(), "index", ents[i].Index, "err", err)
				continue
			}
			cc = c
		default:
			continue
		}
		if ents[i].Index <= g.state.ConfIndex {
			h.cfg.Logger.Debug("replica: configuration change already in the configuration", "group", g.id.String(), "index", ents[i].Index, "conf index", g.state.ConfIndex)
			continue
		}
		if err := checkConfChange(g.state.ConfState, cc); err != nil {
			return fmt.Errorf("replica: raft group %s: the configuration change at index %d (%v) does not apply to voters %v learners %v: %w",
				g.id, ents[i].Index, cc.AsV2().Changes, g.state.ConfState.Voters, g.state.ConfState.Learners, err)
		}
		g.state.ConfState = *g.rn.ApplyConfChange(cc)
		g.state.ConfIndex = ents[i].Index
		g.confGen++
	}
	return nil
}

// checkConfChange returns the error etcd raft's ApplyConfChange would
// panic with for cc on configuration cs (confchange's rules).
func checkConfChange(cs raftpb.ConfState, cc raftpb.ConfChangeI) error {
	chg := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: 1}
	cfg, trk, err := confchange.Restore(chg, cs)
	if err != nil {
		return err
	}
	chg.Tracker.Config, chg.Tracker.Progress = cfg, trk
	v2 := cc.AsV2()
	if v2.LeaveJoint() {
		_, _, err = chg.LeaveJoint()
	} else if autoLeave, ok := v2.EnterJoint(); ok {
		_, _, err = chg.EnterJoint(autoLeave, v2.Changes...)
	} else {
		_, _, err = chg.Simple(v2.Changes...)
	}
	return err
}

// raftLogger sends etcd raft's log lines to slog: debug and info as debug,
// warnings and errors as such; Fatal and Panic panic as raft expects.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { r.panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) { r.panic(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                 { r.panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { r.panic(fmt.Sprintf(format, v...)) }

func (r raftLogger) panic(msg string) {
	r.l.Error("replica: raft: " + msg)
	panic("replica: raft: " + msg)
}
