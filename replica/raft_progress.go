package replica

import (
	"errors"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// Leadership notifications and replica progress, for the partition: its
// leader epoch and LEADER_NOT_AVAILABLE come from LeaderObserver, its ISR
// from Host.Progress.

// LeaderObserver is implemented by a StateMachine that wants to hear of
// its group's leadership. LeaderChanged runs in the worker handling the
// group whenever the replica's view of the leader or of the term changes:
// in Host.handle after the Ready that carries the change is durable (its
// HardState saved) and its messages sent, before its committed entries
// are applied. lead is the leader's replica id, 0 when the replica knows
// of no leader (a candidate, a follower that forgot a dead leader): then
// term is not a leader epoch, and the partition answers
// LEADER_NOT_AVAILABLE. With lead set, term is that leader's term. A
// replica starts with no leader and the term it was saved with, and
// hears of every change after that. Like Apply, it must not call the
// host's blocking methods for the same group.
type LeaderObserver interface {
	LeaderChanged(lead, term uint64)
}

// ReplicaProgress is one replica of a group, as its leader sees it.
type ReplicaProgress struct {
	ID      uint64
	Match   uint64 // the last index the leader knows the replica holds
	Learner bool
	// CaughtUp is the last time the replica's Match reached the leader's
	// own durable last index (Kafka's replica.lag.time.max.ms rule: a
	// replica that has not caught up within the lag time leaves the ISR).
	// A leader starts its voters at the time it was elected (its learners,
	// and a replica added later, have the zero time until they first catch
	// up). The leader
	// itself is always caught up.
	CaughtUp time.Time
}

// ErrNotRaftLeader reports a call that only a group's leader answers.
var ErrNotRaftLeader = errors.New("replica: not the raft group's leader")

// caughtUp is one replica's last caught-up time.
type caughtUp struct {
	id uint64
	at time.Time
}

// progressVisit is the state of one trackProgress walk, kept in the
// group so the visitor closure is built once (no allocation per tick).
type progressVisit struct {
	now   time.Time
	last  uint64 // the leader's durable last index
	self  uint64
	fresh bool      // the leader was just elected: unseen replicas start now
	down  *[]uint64 // the peers the transport reports down (Host.PeerDown)
	// stale: the replicas in StateSnapshot that acknowledged their
	// snapshot (see resendStaleSnapshots).
	stale []staleSnap
}

// staleSnap is a replica in StateSnapshot whose Match reached its pending
// snapshot.
type staleSnap struct{ id, match uint64 }

// Progress returns the group's replicas as its leader sees them;
// ErrNotRaftLeader on a replica that does not lead. It runs in the group's
// worker and does not wake a quiesced group.
func (h *Host) Progress(id GroupID) ([]ReplicaProgress, error) {
	var out []ReplicaProgress
	err := h.call(id, false, func(g *group) error {
		if g.role != raft.StateLeader {
			return ErrNotRaftLeader
		}
		h.trackProgress(g)
		g.rn.WithProgress(func(rid uint64, typ raft.ProgressType, pr tracker.Progress) {
			out = append(out, ReplicaProgress{ID: rid, Match: pr.Match, Learner: typ == raft.ProgressTypeLearner, CaughtUp: g.caughtAt(rid)})
		})
		return nil
	})
	return out, err
}

// caughtAt returns the replica's last caught-up time.
func (g *group) caughtAt(id uint64) time.Time {
	for _, c := range g.caught {
		if c.id == id {
			return c.at
		}
	}
	return time.Time{}
}

// trackProgress notes, on a leader, which replicas have caught up with
// its durable last index now. Called by the worker handling g after each
// Ready and tick; it allocates only when the replica set grows.
func (h *Host) trackProgress(g *group) {
	if g.role != raft.StateLeader {
		return
	}
	last, err := g.storage.LastIndex()
	if err != nil {
		return
	}
	g.pv.now, g.pv.last, g.pv.self, g.pv.down = h.cfg.Now(), last, h.cfg.NodeID, h.down.Load()
	if g.visitFn == nil {
		g.visitFn = g.visitProgress
	}
	g.pv.stale = g.pv.stale[:0]
	g.rn.WithProgress(g.visitFn)
	g.pv.fresh = false
	if len(g.pv.stale) > 0 {
		g.resendStaleSnapshots()
	}
	if cw, ok := g.machine.(copyWaiter); ok && cw.waitingCopies() {
		// acks=all waiting for in-sync copies (raft_acks.go).
		g.prog = g.prog[:0]
		if g.progFn == nil {
			g.progFn = func(rid uint64, typ raft.ProgressType, pr tracker.Progress) {
				g.prog = append(g.prog, ReplicaProgress{ID: rid, Match: pr.Match, Learner: typ == raft.ProgressTypeLearner, CaughtUp: g.caughtAt(rid)})
			}
		}
		g.rn.WithProgress(g.progFn)
		cw.progressed(g.prog, g.pv.now)
	}
}

// resendStaleSnapshots moves out of StateSnapshot the replicas that
// acknowledged their snapshot when the leader's log had already moved on:
// its retention removed the entries right after the snapshot (FirstIndex
// past Match+1) before the acknowledgement arrived (a slow or lost answer,
// the nudge of raft_snapfiles.go). etcd raft leaves such a replica in
// StateSnapshot, paused, for good: it resumes only once Match+1 reaches
// FirstIndex, and sends no new snapshot meanwhile. Reporting the snapshot
// done (raft's ReportSnapshot) makes it probe from Match+1, which is
// compacted, so raft sends a snapshot at the current FirstIndex-1.
func (g *group) resendStaleSnapshots() {
	first, err := g.storage.FirstIndex()
	if err != nil {
		return
	}
	for _, s := range g.pv.stale {
		if s.match+1 < first {
			g.rn.ReportSnapshot(s.id, raft.SnapshotFinish)
		}
	}
}

// visitProgress is trackProgress's visitor.
func (g *group) visitProgress(id uint64, typ raft.ProgressType, pr tracker.Progress) {
	if pr.State == tracker.StateSnapshot && pr.PendingSnapshot > 0 && pr.Match >= pr.PendingSnapshot {
		g.pv.stale = append(g.pv.stale, staleSnap{id, pr.Match})
	}
	// A follower that holds the leader's log but stopped answering is
	// not caught up (Kafka: a follower that stops fetching leaves the
	// ISR even when no record arrives): RecentActive (raft resets it
	// every election timeout under CheckQuorum) must hold too.
	// A quiesced leader does not tick, so RecentActive is not refreshed
	// then: a peer the transport reports down is not caught up either.
	up := id == g.pv.self || (pr.Match >= g.pv.last && pr.RecentActive && !g.pv.isDown(id))
	for i := range g.caught {
		if g.caught[i].id == id {
			if up {
				g.caught[i].at = g.pv.now
			}
			return
		}
	}
	c := caughtUp{id: id}
	// A new leader starts its voters caught up (Kafka resets the ISR's
	// members' lastCaughtUpTime so), never a learner: one still catching
	// up (a move's new replica) would look caught up at the election and
	// be promoted, and join the ISR, before it holds the log.
	if up || (g.pv.fresh && typ != raft.ProgressTypeLearner) {
		c.at = g.pv.now
	}
	g.caught = append(g.caught, c)
}

// noteLeadership records a Ready's leadership change, resets progress
// tracking when the replica becomes leader, and tells the state machine
// (LeaderObserver). Called by the worker after the Ready's persistence and
// sends, before its apply.
func (h *Host) noteLeadership(g *group, rd *raft.Ready) {
	lead, role := g.lead, g.role
	if rd.SoftState != nil {
		lead, role = rd.SoftState.Lead, rd.SoftState.RaftState
	}
	term := g.state.HardState.Term
	if role == raft.StateLeader && g.role != raft.StateLeader {
		g.caught = g.caught[:0]
		g.pv.fresh = true
	}
	if role != raft.StateLeader || term != g.term {
		h.dropLease(g)
	}
	g.role = role
	if lead == g.lead && term == g.term {
		return
	}
	if m := h.cfg.Metrics; m != nil && m.LeaderChanged != nil && lead != g.lead {
		m.LeaderChanged()
	}
	g.lead, g.term = lead, term
	g.leadHint.Store(lead)
	if obs, ok := g.machine.(LeaderObserver); ok {
		obs.LeaderChanged(lead, term)
	}
}

func (pv *progressVisit) isDown(id uint64) bool {
	return pv.down != nil && slices.Contains(*pv.down, id)
}
