package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
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
//  4. persist the batch's changed HardStates in one synced write (after
//     the entries their commit indexes cover);
//  5. send the batch's messages (none leaves before the entries and the
//     HardState it depends on are durable);
//  6. apply committed entries (configuration changes to the RawNode,
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

// GroupStorage is a group's raft log and the state kept beside it; raft
// reads it through raft.Storage. Only the worker handling the group calls
// it, one call at a time; raft.Storage's reads may run concurrently with
// nothing else.
type GroupStorage interface {
	raft.Storage
	// Append writes entries; the first may replace a suffix of the log
	// (a follower's divergent tail), which is truncated first. They need
	// not be durable until Sync.
	Append(ents []raftpb.Entry) error
	// ApplySnapshot replaces the log by a snapshot received from the
	// leader.
	ApplySnapshot(snap raftpb.Snapshot) error
	// SetHardState records hs, already durable in the HardStateStore, so
	// InitialState returns it.
	SetHardState(hs raftpb.HardState)
	// Sync makes everything appended durable.
	Sync() error
}

// HardStateStore persists the HardStates of a broker's groups: Save writes
// all of them in one synced write.
type HardStateStore interface {
	Save(states map[GroupID]raftpb.HardState) error
}

// StateMachine applies a group's committed entries, in log order, every
// entry once (configuration changes included, after the host applied them
// to raft).
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
}

// HostConfig configures a Host.
type HostConfig struct {
	NodeID    uint64 // the broker's node id, raft's replica id
	Workers   int    // worker goroutines; default 2
	Transport Transport
	HardState HardStateStore
	Logger    *slog.Logger
	// ElectionTicks and HeartbeatTicks are raft's, in ticks (Tick). Default
	// 10 and 1: with a 100 ms tick, an election after about 1 s.
	ElectionTicks, HeartbeatTicks int
	// MaxBatch is the most groups one worker handles together. Default 64.
	MaxBatch int
	// TickInterval, when set, makes the host call Tick itself at that
	// interval (a broker: 100 ms, so an election after about 1 s); zero
	// leaves ticking to the caller (tests drive time with Tick).
	TickInterval time.Duration
}

// GroupConfig describes a group joining the host.
type GroupConfig struct {
	ID      GroupID
	Storage GroupStorage
	Machine StateMachine
	// Applied is the last index the state machine already holds.
	Applied uint64
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
// Locks: Host.mu (the group map) and group.mu (a group's mailbox) are
// leaves, never held together; the scheduler's mutex is a leaf too. No
// lock is held while a worker writes, syncs, sends or applies.
type Host struct {
	cfg   HostConfig
	sched *scheduler

	mu     sync.RWMutex
	groups map[GroupID]*group
	closed bool

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

	mu      sync.Mutex
	inbox   []raftpb.Message
	ops     []groupOp
	ticks   int
	removed error // set once the group left the host

	sstate schedState // guarded by the scheduler's mutex
}

// groupOp is a call that runs on the group's RawNode in its worker.
type groupOp struct {
	fn   func(rn *raft.RawNode) error
	done chan error // buffered
}

// NewHost starts a host's workers.
func NewHost(cfg HostConfig) *Host {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Host{cfg: cfg, sched: newScheduler(), groups: map[GroupID]*group{}, stopTick: make(chan struct{})}
	for range cfg.Workers {
		h.wg.Add(1)
		go h.work()
	}
	if cfg.TickInterval > 0 {
		h.wg.Add(1)
		go h.ticker(cfg.TickInterval)
	}
	return h
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

// AddGroup starts a replica of a group on the host, from the state its
// storage holds (for a new group, the synthetic initial state: no entries
// and a ConfState naming the first replicas).
func (h *Host) AddGroup(gc GroupConfig) error {
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        h.cfg.NodeID,
		ElectionTick:              h.cfg.ElectionTicks,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   gc.Storage,
		Applied:                   gc.Applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: true, // Kafka: produce to the leader only
		Logger:                    raftLogger{h.cfg.Logger.With("group", gc.ID.String())},
	})
	if err != nil {
		return fmt.Errorf("replica: raft group %s: %w", gc.ID, err)
	}
	g := &group{id: gc.ID, rn: rn, storage: gc.Storage, machine: gc.Machine}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrHostClosed
	}
	if _, ok := h.groups[gc.ID]; ok {
		return ErrGroupExists
	}
	h.groups[gc.ID] = g
	return nil
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
	g.fail(fmt.Errorf("%w: %w", ErrNoGroup, err))
}

func (h *Host) group(id GroupID) *group {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.groups[id]
}

// Deliver hands messages received from other brokers to their groups.
// Messages for groups not on the host are dropped.
func (h *Host) Deliver(msgs []GroupMessage) {
	for i := range msgs {
		g := h.group(msgs[i].Group)
		if g == nil {
			continue
		}
		g.mu.Lock()
		g.inbox = append(g.inbox, msgs[i].Msg)
		g.mu.Unlock()
		h.sched.enqueue(g)
	}
}

// Tick advances every group's logical clock by one tick (raft's election
// and heartbeat timeouts count ticks). A broker calls it every tick
// interval; tests call it to drive time.
func (h *Host) Tick() {
	h.mu.RLock()
	gs := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		gs = append(gs, g)
	}
	h.mu.RUnlock()
	for _, g := range gs {
		g.mu.Lock()
		g.ticks++
		g.mu.Unlock()
		h.sched.enqueue(g)
	}
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

// do runs fn on the group's RawNode in the worker that owns it and
// returns its error.
func (h *Host) do(id GroupID, fn func(rn *raft.RawNode) error) error {
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
	g.ops = append(g.ops, groupOp{fn: fn, done: done})
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
	return h.do(id, func(rn *raft.RawNode) error {
		rn.TransferLeader(to)
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

// Status returns the group's raft status.
func (h *Host) Status(id GroupID) (raft.BasicStatus, error) {
	var st raft.BasicStatus
	err := h.do(id, func(rn *raft.RawNode) error {
		st = rn.BasicStatus()
		return nil
	})
	return st, err
}

func (h *Host) work() {
	defer h.wg.Done()
	var batch []*group
	for {
		batch = h.sched.next(batch[:0], h.cfg.MaxBatch)
		if batch == nil {
			return
		}
		h.handle(batch)
		for _, g := range batch {
			h.sched.done(g)
		}
	}
}

// ready is one group's Ready in a batch.
type ready struct {
	g  *group
	rd raft.Ready
}

// handle runs one batch of groups through raft's order (see the top of
// the file). A group whose storage fails is taken off the host
// (failGroup): none of its Ready's messages is sent, and it is not
// advanced.
func (h *Host) handle(batch []*group) {
	var rds []ready
	for _, g := range batch {
		if !h.step(g) {
			continue // removed
		}
		if g.rn.HasReady() {
			rds = append(rds, ready{g: g, rd: g.rn.Ready()})
		}
	}
	if len(rds) == 0 {
		return
	}
	// 2. Snapshots and entries.
	failed := map[*group]error{}
	var synced []*group
	for _, r := range rds {
		var err error
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			err = r.g.storage.ApplySnapshot(r.rd.Snapshot)
		}
		if err == nil && len(r.rd.Entries) > 0 {
			err = r.g.storage.Append(r.rd.Entries)
		}
		if err != nil {
			failed[r.g] = err
			continue
		}
		if r.rd.MustSync && (len(r.rd.Entries) > 0 || !raft.IsEmptySnap(r.rd.Snapshot)) {
			synced = append(synced, r.g)
		}
	}
	// 3. Sync the storages written, concurrently.
	if len(synced) > 0 {
		errs := make([]error, len(synced))
		var wg sync.WaitGroup
		for i, g := range synced {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = g.storage.Sync()
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				failed[synced[i]] = err
			}
		}
	}
	// 4. HardStates, in one synced write.
	states := map[GroupID]raftpb.HardState{}
	for _, r := range rds {
		if failed[r.g] == nil && !raft.IsEmptyHardState(r.rd.HardState) {
			states[r.g.id] = r.rd.HardState
		}
	}
	if len(states) > 0 {
		if err := h.cfg.HardState.Save(states); err != nil {
			for _, r := range rds {
				if _, ok := states[r.g.id]; ok {
					failed[r.g] = err
				}
			}
		} else {
			for _, r := range rds {
				if hs, ok := states[r.g.id]; ok {
					r.g.storage.SetHardState(hs)
				}
			}
		}
	}
	for g, err := range failed {
		h.failGroup(g, err)
	}
	// 5. Messages.
	var out []GroupMessage
	for _, r := range rds {
		if failed[r.g] != nil {
			continue
		}
		for _, m := range r.rd.Messages {
			out = append(out, GroupMessage{Group: r.g.id, Msg: m})
		}
	}
	if len(out) > 0 {
		h.cfg.Transport.Send(out)
	}
	// 6. Apply, 7. Advance.
	for _, r := range rds {
		if failed[r.g] != nil {
			continue
		}
		if len(r.rd.CommittedEntries) > 0 {
			h.applyConfChanges(r.g, r.rd.CommittedEntries)
			r.g.machine.Apply(r.rd.CommittedEntries)
		}
		r.g.rn.Advance(r.rd)
		if r.g.rn.HasReady() {
			h.sched.again(r.g)
		}
	}
}

// step moves a group's mailbox into its RawNode; false when the group
// has left the host.
func (h *Host) step(g *group) bool {
	g.mu.Lock()
	if g.removed != nil {
		g.inbox, g.ticks = nil, 0
		g.mu.Unlock()
		return false
	}
	inbox, ops, ticks := g.inbox, g.ops, g.ticks
	g.inbox, g.ops, g.ticks = nil, nil, 0
	g.mu.Unlock()
	for range ticks {
		g.rn.Tick()
	}
	for _, m := range inbox {
		if err := g.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
			h.cfg.Logger.Debug("replica: raft step", "group", g.id.String(), "err", err)
		}
	}
	for _, op := range ops {
		op.done <- op.fn(g.rn)
	}
	return true
}

// applyConfChanges applies the configuration changes among ents to raft.
func (h *Host) applyConfChanges(g *group, ents []raftpb.Entry) {
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
		g.rn.ApplyConfChange(cc)
	}
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
