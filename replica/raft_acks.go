package replica

import (
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
)

// acks=all against min.insync.replicas (Kafka's
// Partition.checkEnoughReplicasReachOffset, ReplicaManager's
// DelayedProduce).
//
// Raft commits an entry once a quorum of voters holds it; Kafka
// acknowledges acks=all only once min.insync.replicas replicas of the ISR
// hold it. With min.insync.replicas above the quorum (RF 3 and
// min.insync.replicas=3) the commit alone is not enough: a majority of 2
// commits while the third replica, stopped, is still in the ISR. So an
// acks=all proposal completes when
//
//  1. its entry committed with its term (raftMachine.Apply; another term
//     fails it with NotLeaderError, as before), and
//  2. at least min.insync.replicas replicas of the ISR the leader reports
//     (isrOf on the same progress) hold it: their raft Progress.Match is at
//     or above its index. A follower's Match moves only with its
//     MsgAppResp, which it sends after its write is durable (the host
//     sends a follower's messages after the Sync); the leader's own Match
//     moves when raft steps its self-acknowledgement after the leader's
//     write is durable (etcd raft 3.6, appendEntry). So every replica
//     counted holds the entry durably and is in the ISR a Metadata request
//     would show at that instant.
//
// The worker re-evaluates the committed proposals still waiting
// (raftState.replicating) after every handling of the group (Readys,
// MsgAppResps, ticks: Host.trackProgress calls progressed), and keeps the
// group from quiescing meanwhile, so a shrinking ISR is seen on the next
// tick. When the ISR has fewer than min.insync.replicas members they fail
// with ErrNotEnoughReplicasAfterAppend (NOT_ENOUGH_REPLICAS_AFTER_APPEND:
// Kafka's answer once the high watermark passed the batch but the ISR
// shrank below min.insync.replicas); a leadership change fails them with
// NotLeaderError (Kafka: NOT_LEADER_OR_FOLLOWER when the replica no longer
// leads). Otherwise they wait: the server bounds the wait by the produce
// request's timeout (REQUEST_TIMED_OUT, as DelayedProduce's expiry).
//
// Kafka's acks=all waits for every ISR member (its high watermark is the
// ISR's minimum log end); Sluice waits for a raft quorum and for
// min.insync.replicas members of the ISR, so a slow follower still in the
// ISR does not hold acks=all back when min.insync.replicas copies exist
// without it. What an acknowledgement promises (at least
// min.insync.replicas durable copies, in-sync replicas all) is Kafka's.

// isrOf returns the ISR of a leader's progress (the leader first): the
// leader and the voters whose last caught-up time is within lag of now,
// but for those fenced (Host.SetFenced); nil when self is not among them
// (not the leader). Partition.ISR and the acks=all count use it on the
// same progress, so the replicas an acknowledgement counted are in the
// ISR reported.
func isrOf(prog []ReplicaProgress, self uint64, now time.Time, lag time.Duration, fenced []uint64) []uint64 {
	var isr []uint64
	for _, pr := range prog {
		switch {
		case pr.Learner:
		case pr.ID == self:
			isr = append([]uint64{pr.ID}, isr...)
		case slices.Contains(fenced, pr.ID):
		case now.Sub(pr.CaughtUp) <= lag:
			isr = append(isr, pr.ID)
		}
	}
	if len(isr) == 0 || isr[0] != self {
		return nil
	}
	return isr
}

// SetFenced names the replicas (broker ids) the cluster's controller
// fenced (their session expired): every ISR this host computes leaves them
// out, as Kafka's controller takes a fenced broker out of every ISR, so
// the ISR a broker reports in Metadata (which drops fenced brokers) and the
// replicas an acks=all acknowledgement counts agree. The host's own id is
// never left out of an ISR it leads. ids is not kept.
func (h *Host) SetFenced(ids []uint64) {
	cp := slices.Clone(ids)
	h.fenced.Store(&cp)
}

// Fenced returns the replicas SetFenced named last (not to be modified).
func (h *Host) Fenced() []uint64 {
	if p := h.fenced.Load(); p != nil {
		return *p
	}
	return nil
}

// copies returns how many replicas of isr hold raft index index
// durably (Match at or above it).
func copies(prog []ReplicaProgress, isr []uint64, index uint64) int {
	n := 0
	for _, pr := range prog {
		if pr.Match < index {
			continue
		}
		for _, id := range isr {
			if id == pr.ID {
				n++
				break
			}
		}
	}
	return n
}

// copyWaiter is implemented by a StateMachine whose leader holds
// acknowledgements back until enough replicas hold an entry.
type copyWaiter interface {
	// waitingCopies reports whether acknowledgements wait on the
	// replicas' progress (worker).
	waitingCopies() bool
	// progressed is called by the worker on a leader, after its progress
	// tracking, with every replica's progress and the host's clock.
	progressed(prog []ReplicaProgress, now time.Time)
}

func (m raftMachine) waitingCopies() bool { return len(m.p.rs.replicating) > 0 }

// progressed completes the committed acks=all proposals that enough
// in-sync replicas hold, in index order, or fails them all when the ISR
// is smaller than min.insync.replicas.
func (m raftMachine) progressed(prog []ReplicaProgress, now time.Time) {
	p, rs := m.p, m.p.rs
	isr := isrOf(prog, rs.self, now, rs.lagTime, rs.host.Fenced())
	if isr == nil {
		return // LeaderChanged fails them
	}
	minISR := p.Config().MinInsyncReplicas
	if len(isr) < minISR {
		for _, pr := range rs.replicating {
			rs.complete(pr, noResult, fmt.Errorf("%w: raft index %d committed, %d in sync (%v), min.insync.replicas=%d",
				ErrNotEnoughReplicasAfterAppend, pr.index, len(isr), isr, minISR))
		}
		clear(rs.replicating)
		rs.replicating = rs.replicating[:0]
		return
	}
	done := 0
	for _, pr := range rs.replicating {
		if copies(prog, isr, pr.index) < minISR {
			break // later entries have no more copies
		}
		rs.acked(pr)
		done++
	}
	if done > 0 {
		n := copy(rs.replicating, rs.replicating[done:])
		clear(rs.replicating[n:])
		rs.replicating = rs.replicating[:n]
	}
}

// acked completes an acks=all proposal that committed and that enough
// in-sync replicas hold.
func (rs *raftState) acked(pr *proposal) {
	if !pr.proposed.IsZero() {
		rs.host.cfg.Metrics.Committed(time.Since(pr.proposed))
	}
	rs.complete(pr, pr.res, nil)
}

// failReplicating fails the committed proposals waiting for copies (the
// replica no longer leads).
func (rs *raftState) failReplicating(err error) {
	for _, pr := range rs.replicating {
		rs.complete(pr, noResult, err)
	}
	clear(rs.replicating)
	rs.replicating = rs.replicating[:0]
}

// soleCommitter is a StateMachine told that its group, led by this
// replica and with it as its only voter, made its log durable up to
// index: every entry up to it is committed (raft commits it at the next
// Advance; no other replica can replace it), so what waits for it may
// complete before raft says so.
type soleCommitter interface {
	soleVoterDurable(index uint64)
}

// soleVoterDurable tells g's machine, when g is a leader that is the
// only voter of its configuration (learners do not count toward a
// commit), that its log is durable up to its last index. Called by the
// worker after g's Sync, before its Advance: the configuration checked is
// the one Advance's self-acknowledgement commits under (the caller skips
// a Ready that changes the leadership, or whose committed entries, applied
// before Advance, hold a configuration change).
func (h *Host) soleVoterDurable(g *group) {
	sc, ok := g.machine.(soleCommitter)
	if !ok || g.role != raft.StateLeader {
		return
	}
	cs := &g.state.ConfState
	if len(cs.Voters) != 1 || cs.Voters[0] != h.cfg.NodeID || len(cs.VotersOutgoing) != 0 {
		return
	}
	last, err := g.storage.LastIndex()
	if err != nil {
		return
	}
	sc.soleVoterDurable(last)
}
