package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Reads on the leader: the read lease (the raft thesis, §6.4 and §6.4.1;
// etcd raft's ReadIndex). A leader cut off from its quorum, or paused,
// still believes it leads until it hears of a newer term; a read it serves
// meanwhile may miss what a newer leader committed. So a replicated
// leader serves reads (Fetch, ListOffsets, OffsetForLeaderEpoch, and the
// group coordinator's answers from its __consumer_offsets partitions)
// only while it holds a lease:
//
//   - A round: the worker takes t0 on the host's monotonic clock
//     (HostConfig.Now) and asks raft for a read index (RawNode.ReadIndex,
//     ReadOnlySafe) whose context carries the term and t0. Raft
//     broadcasts a heartbeat carrying it and returns a ReadState once a
//     quorum of voters acknowledged it in this term (and only once this
//     leader committed an entry of its term). Every voter that
//     acknowledged stepped a heartbeat sent after t0.
//   - Why that is a lease: such a voter will not help elect anyone else
//     before t0 + L. With CheckQuorum it refuses (pre-)votes while it
//     heard from its leader within an election timeout (raft's inLease:
//     ElectionTicks ticks after the heartbeat); it stands itself no
//     earlier either; and it forgets its leader at once (ForgetLeader,
//     then grants) only when the transport reports the leader's broker
//     down, LivenessTimeout after its last frame. A new leader needs a
//     quorum, which meets the quorum that acknowledged, so it cannot be
//     elected, let alone commit, before t0 + L, with
//
//     L = (min((ElectionTicks-2)*T, LivenessTimeout) - T) * 95%
//
//     where T is the tick: ElectionTicks ticks after a heartbeat may take
//     as little as (ElectionTicks-2)*T of wall time (the first tick may
//     come right after it, and a late tick may be followed by the next at
//     once); one tick more for scheduling; 5% for the rates of the
//     brokers' clocks. With the defaults (10 ticks of 100 ms, a 1 s
//     liveness timeout) L is 665 ms.
//   - The lease is t0 + L of the newest round raft answered, installed
//     once the leader applied the round's read index (so the high
//     watermark and the coordinator's state cover everything committed
//     before t0). A read is served while now < lease, checked on the
//     monotonic clock after the read took its state (a pause between the
//     two shows as an expired lease: the SIGSTOP case). A leadership
//     change clears it.
//   - Leadership transfer: MsgTimeoutNow makes its target campaign with
//     votes that ignore CheckQuorum's lease, so no lease holds while a
//     transfer is pending, nor for L after the worker last saw one
//     pending (a MsgTimeoutNow still on its way).
//   - Restarts: a replica that restarts forgets the leader it heard, and
//     raft would grant a vote at once; so a replica restarted with a
//     saved term drops non-transfer (pre-)votes for L after its group
//     joined the host.
//   - Renewal: a read that finds the lease expired, or within L/2 of
//     expiring, asks for a round (one in flight per group; another only
//     after L/4), so steady reads never wait; a read that finds none
//     waits for it, bounded by the caller (AwaitReadLease). A quiesced
//     group wakes for a round and quiesces again when idle.
//   - A single voter needs no lease: nobody else can be elected.
//
// Writes need no lease: a leader that lost its quorum cannot commit.

// leaseDriftPercent is the share of L kept for the clocks' rates.
const leaseDriftPercent = 5

// ReadLease returns L for the configuration: 0 (no lease, reads on a
// replicated leader are refused) without CheckQuorum, when the host is
// ticked by its caller without a LeaseTick, or when the election timeout
// is too short.
func (c *HostConfig) ReadLease() time.Duration {
	if c.DisableCheckQuorum {
		// Voters refuse (pre-)votes while they heard from their leader
		// only under CheckQuorum (raft's inLease): no lease without it.
		return 0
	}
	tick := c.TickInterval
	if tick < 0 {
		tick = c.LeaseTick
	}
	if tick <= 0 {
		return 0
	}
	d := min(time.Duration(c.ElectionTicks-2)*tick, c.LivenessTimeout) - tick
	if d <= 0 {
		return 0
	}
	return d - d*leaseDriftPercent/100
}

// leaseState is a group's read lease. The atomics are read by the
// callers' goroutines; rounds and seq belong to the worker.
type leaseState struct {
	until  atomic.Int64 // host-clock nanoseconds before which reads are served; 0: none
	block  atomic.Int64 // no lease before this (a leadership transfer)
	single atomic.Bool  // the group has one voter, this replica
	asked  atomic.Int64 // when the round in flight was asked for; 0: none
	// changed is closed (and replaced) when until moves or the lease is
	// dropped: AwaitReadLease waits on it.
	changed atomic.Pointer[chan struct{}]
	// holdVotes: a restarted replica drops (pre-)votes before this.
	holdVotes int64

	seq    uint64
	rounds []leaseRound // answered, waiting for the apply of their index
}

type leaseRound struct {
	index uint64
	t0    int64
}

// leaseNow is the host's clock in nanoseconds since the host started.
func (h *Host) leaseNow() int64 { return int64(h.cfg.Now().Sub(h.base)) }

// initLease sets up a group's lease as it joins the host.
func (h *Host) initLease(g *group, st GroupState) {
	ch := make(chan struct{})
	g.lease.changed.Store(&ch)
	h.noteSingle(g)
	if st.HardState.Term > 0 && h.lease > 0 {
		g.lease.holdVotes = h.leaseNow() + int64(h.lease)
	}
}

func (l *leaseState) broadcast() {
	ch := make(chan struct{})
	if old := l.changed.Swap(&ch); old != nil {
		close(*old)
	}
}

// holdsVote reports whether the worker drops m: a (pre-)vote request,
// not a leadership transfer's, while a restarted replica's hold lasts.
func (h *Host) holdsVote(g *group, m *raftpb.Message) bool {
	if g.lease.holdVotes == 0 || !isVoteRequest(m.Type) {
		return false
	}
	if h.leaseNow() >= g.lease.holdVotes {
		g.lease.holdVotes = 0
		return false
	}
	return !bytes.Equal(m.Context, []byte("CampaignTransfer")) // raft's campaignTransfer
}

// noteSingle records whether g has this replica as its one voter.
func (h *Host) noteSingle(g *group) {
	cs := &g.state.ConfState
	g.lease.single.Store(len(cs.Voters) == 1 && cs.Voters[0] == h.cfg.NodeID && len(cs.VotersOutgoing) == 0)
}

// noteTransfer blocks the lease while raft has a leadership transfer
// pending. Called by the worker after stepping g's mailbox, before its
// Ready (and a MsgTimeoutNow in it) is sent.
func (h *Host) noteTransfer(g *group) {
	// raft's own view: g.role is updated only after the Ready.
	if st := g.rn.BasicStatus(); st.RaftState != raft.StateLeader || st.LeadTransferee == 0 {
		return
	}
	g.lease.block.Store(h.leaseNow() + int64(h.lease))
	if g.lease.until.Load() != 0 {
		g.lease.until.Store(0)
		g.lease.broadcast()
	}
}

// dropLease forgets g's lease and rounds (leadership moved). Worker.
func (h *Host) dropLease(g *group) {
	if g.lease.until.Load() == 0 && len(g.lease.rounds) == 0 && g.lease.asked.Load() == 0 {
		return
	}
	g.lease.until.Store(0)
	g.lease.asked.Store(0)
	g.lease.rounds = g.lease.rounds[:0]
	g.lease.broadcast()
}

// startRound asks raft for a read index whose context holds the term and
// t0. Worker.
func (h *Host) startRound(g *group) {
	if g.role != raft.StateLeader {
		g.lease.asked.Store(0)
		return
	}
	g.lease.seq++
	var ctx [24]byte
	binary.BigEndian.PutUint64(ctx[0:], g.lease.seq)
	binary.BigEndian.PutUint64(ctx[8:], g.term)
	binary.BigEndian.PutUint64(ctx[16:], uint64(h.leaseNow()))
	g.rn.ReadIndex(ctx[:])
}

// noteReadStates takes the rounds raft answered in rd and installs the
// lease of those whose index g applied. Worker, after the apply.
func (h *Host) noteReadStates(g *group, rd *raft.Ready) {
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 24 || g.role != raft.StateLeader || binary.BigEndian.Uint64(rs.RequestCtx[8:]) != g.term {
			continue
		}
		g.lease.rounds = append(g.lease.rounds, leaseRound{index: rs.Index, t0: int64(binary.BigEndian.Uint64(rs.RequestCtx[16:]))})
	}
	if len(g.lease.rounds) == 0 {
		return
	}
	until := g.lease.until.Load()
	keep := g.lease.rounds[:0]
	for _, r := range g.lease.rounds {
		if r.index > g.state.Applied {
			keep = append(keep, r)
			continue
		}
		until = max(until, r.t0+int64(h.lease))
	}
	installed := len(keep) < len(g.lease.rounds)
	g.lease.rounds = keep
	if installed {
		g.lease.until.Store(until)
		g.lease.asked.Store(0)
		g.lease.broadcast()
	}
}

// leaseValid reports whether g's leader (this replica) may serve a read
// now, asking for a round when the lease is expired or about to.
func (h *Host) leaseValid(g *group) bool {
	if g.leadHint.Load() != h.cfg.NodeID {
		return false
	}
	if g.lease.single.Load() {
		return true
	}
	if h.lease <= 0 {
		return false
	}
	now := h.leaseNow()
	if now < g.lease.block.Load() {
		return false
	}
	until := g.lease.until.Load()
	if until-now < int64(h.lease)/2 {
		h.renew(g, now)
	}
	return now < until
}

// renew asks g's worker for a round unless one was asked for less than
// L/4 ago.
func (h *Host) renew(g *group, now int64) {
	asked := g.lease.asked.Load()
	if asked != 0 && now-asked < int64(h.lease)/4 {
		return
	}
	if !g.lease.asked.CompareAndSwap(asked, now) {
		return
	}
	g.mu.Lock()
	if g.removed != nil {
		g.mu.Unlock()
		return
	}
	g.ops = append(g.ops, groupOp{fn: func(g *group) error { h.startRound(g); return nil }, wake: true, done: make(chan error, 1)})
	g.mu.Unlock()
	h.sched.enqueue(g)
}

// LeaseValid reports whether this replica leads the group and holds a
// read lease now (a single voter always does). It asks for a renewal
// when the lease is expired or close to it, and never waits.
func (h *Host) LeaseValid(id GroupID) bool {
	g := h.group(id)
	return g != nil && h.leaseValid(g)
}

// AwaitLease is LeaseValid that waits, until ctx ends, for a renewal
// when there is no lease. It returns whether the replica holds one.
func (h *Host) AwaitLease(ctx context.Context, id GroupID) bool {
	g := h.group(id)
	if g == nil {
		return false
	}
	for {
		ch := g.lease.changed.Load()
		if h.leaseValid(g) {
			return true
		}
		if g.leadHint.Load() != h.cfg.NodeID || h.lease <= 0 || h.leaseNow() < g.lease.block.Load() {
			return false // no round will help
		}
		t := time.NewTimer(h.lease / 4) // a round may be lost: ask again
		select {
		case <-*ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// ErrNoReadLease is the reason a leader refuses a read it cannot vouch
// for (NotLeaderError.NoLease): its lease expired and no round renewed it
// in time (cut off, paused, or a leadership transfer pending).
var ErrNoReadLease = errors.New("replica: the leader holds no read lease (it may have been cut off or paused; a newer leader may exist)")

// CheckReadLease returns nil when this replica may serve a read of the
// partition now: the raft leader holding a read lease (a one-voter
// group's leader always holds one). Otherwise a *NotLeaderError: the leader it knows of, or, on a
// leader without a lease, NoLease set (NOT_LEADER_OR_FOLLOWER with no
// leader hint: the client asks the cluster again). It never waits; call
// it after taking the state a read returns, right before answering.
func (p *Partition) CheckReadLease() error {
	rs := p.rs
	if !p.IsLeader() {
		return p.notLeader("reads go to the partition leader")
	}
	if rs.host.LeaseValid(rs.id) {
		return nil
	}
	return p.noLease()
}

// AwaitReadLease is CheckReadLease that waits, until ctx ends, for a
// lease renewal on a leader without one.
func (p *Partition) AwaitReadLease(ctx context.Context) error {
	rs := p.rs
	if !p.IsLeader() {
		return p.notLeader("reads go to the partition leader")
	}
	if rs.host.AwaitLease(ctx, rs.id) {
		return nil
	}
	if !p.IsLeader() {
		return p.notLeader("reads go to the partition leader")
	}
	return p.noLease()
}

func (p *Partition) noLease() error {
	_, epoch, _ := p.Leader()
	return &NotLeaderError{Epoch: epoch, NoLease: true, Reason: ErrNoReadLease.Error()}
}
