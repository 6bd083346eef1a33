package server

import (
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
)

// Moving a partition's replicas (KIP-455 reassignments, decommissions):
// the partition's leader drives its raft group from its voters to the
// metadata's target replicas (meta.Topic.TargetReplicas: the replica list
// without the removing ones), one raft configuration change at a time, in
// an order that never lowers the replication factor before the new
// replicas hold the data (CockroachDB's replicate queue, with learners):
//
//  1. a target replica missing from the group joins as a learner (the
//     reconciler on its broker opens it, since the replica list names it);
//  2. a learner caught up with the leader's log is promoted to voter;
//  3. once every target replica is a voter, the others leave: learners at
//     any time, voters then; a leader that must leave hands its
//     leadership to an in-sync target voter first.
//
// Each step is a pure decision on the group's configuration
// (nextMoveStep), so a new leader, a restarted broker or a replaced
// reassignment continues from wherever the group is. The controller
// completes the reassignment once the leader's ISR report holds the whole
// target and none of the removed replicas (controller.Controller, at each check);
// the removed brokers' reconcilers then close their replicas and delete
// their data.

// moveCaughtUp is how recently a learner must have matched the leader's
// log end to be promoted.
const moveCaughtUp = time.Second

// moveStep is one configuration change (or leadership transfer) to make.
type moveStep struct {
	kind moveKind
	id   uint64
}

type moveKind int

const (
	moveNone moveKind = iota
	moveAddLearner
	movePromote
	moveRemove
	moveTransfer // hand leadership to id, then the new leader removes this one
)

func (k moveKind) String() string {
	return [...]string{"none", "add learner", "promote learner", "remove replica", "transfer leadership"}[k]
}

// nextMoveStep decides the next change for a group whose leader is self,
// voters and learners its configuration, toward target. caughtUp says
// whether a replica matched the leader's log end recently; inSync whether
// it is in the ISR (for a leadership transfer).
func nextMoveStep(self uint64, target, voters, learners []uint64, caughtUp, inSync func(uint64) bool) moveStep {
	// Learners that the target no longer names (a cancelled or replaced
	// reassignment) count for nothing: they leave at once.
	for _, id := range learners {
		if !slices.Contains(target, id) {
			return moveStep{moveRemove, id}
		}
	}
	for _, id := range target {
		if !slices.Contains(voters, id) && !slices.Contains(learners, id) {
			return moveStep{moveAddLearner, id}
		}
	}
	allVoters := true
	for _, id := range target {
		if slices.Contains(learners, id) {
			allVoters = false
			if caughtUp(id) {
				return moveStep{movePromote, id}
			}
		}
	}
	if !allVoters {
		return moveStep{}
	}
	var leaving []uint64
	for _, id := range voters {
		if !slices.Contains(target, id) {
			leaving = append(leaving, id)
		}
	}
	for _, id := range leaving {
		if id != self {
			return moveStep{moveRemove, id}
		}
	}
	if len(leaving) > 0 {
		// Only the leader itself is left to go: first its leadership.
		for _, id := range target {
			if inSync(id) {
				return moveStep{moveTransfer, id}
			}
		}
	}
	return moveStep{}
}

// driveMoves makes the next membership change of every partition this
// broker leads whose raft configuration differs from the metadata's
// target. Called by the report loop (every leadershipCheckEvery and on
// leadership changes).
func (c *cluster) driveMoves() {
	b := c.b
	if c.epoch.Load() < 0 || c.shuttingDown.Load() {
		return
	}
	b.mu.RLock()
	parts := make(map[topicPartition]*replica.Partition, len(b.parts))
	for tp, part := range b.parts {
		if part.IsLeader() {
			parts[tp] = part
		}
	}
	b.mu.RUnlock()
	now := time.Now()
	for tp, part := range parts {
		t, ok := b.meta.Topic(tp.topic)
		if !ok || int(tp.partition) >= len(t.Assignments) || !isMoving(t, tp.partition) {
			// Not moving: the group is at its replica list (a move
			// completes only once the group holds exactly its target,
			// withLeaving), so no worker call per partition each pass.
			continue
		}
		target := raftVoterIDs(t.TargetReplicas(tp.partition))
		voters, learners, err := part.Membership()
		if err != nil || (sameIDs(voters, target) && len(learners) == 0) {
			continue
		}
		prog, err := part.Progress()
		if err != nil {
			continue
		}
		isr := part.ISR()
		caughtUp := func(id uint64) bool {
			for _, pr := range prog {
				if pr.ID == id {
					return !pr.CaughtUp.IsZero() && now.Sub(pr.CaughtUp) <= moveCaughtUp
				}
			}
			return false
		}
		inSync := func(id uint64) bool { return slices.Contains(isr, id) }
		step := nextMoveStep(uint64(c.self), target, voters, learners, caughtUp, inSync)
		if step.kind == moveNone {
			continue
		}
		switch step.kind {
		case moveAddLearner:
			err = part.AddLearner(step.id)
		case movePromote:
			err = part.PromoteLearner(step.id)
		case moveRemove:
			err = part.RemoveReplica(step.id)
		case moveTransfer:
			err = part.TransferLeadership(step.id)
		}
		switch {
		case errors.Is(err, replica.ErrConfChangePending):
			// The previous change has not applied yet: next pass.
		case err != nil:
			b.logger.Debug("sluice: partition move: step not taken; retried", "topic", tp.topic, "partition", tp.partition, "step", step.kind.String(), "replica", step.id, "err", err)
		default:
			b.logger.Info("sluice: partition move", "topic", tp.topic, "partition", tp.partition, "step", step.kind.String(), "replica", step.id, "voters", voters, "learners", learners, "target", target)
		}
	}
}

// raftVoterIDs converts broker ids to raft replica ids.
func raftVoterIDs(ids []int32) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []uint64) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(id uint64) bool { return !slices.Contains(b, id) })
}

// withLeaving adds to a moving partition's reported ISR the members of its
// raft group that the target leaves out and that have not left the group
// yet, in sync or not: the controller completes a reassignment only once
// the ISR holds none of the removing replicas (ReassignmentDone), and a
// removed replica's broker deletes its data at completion, so a voter that
// lags or is down must have left raft first, not merely the ISR.
func withLeaving(isr []int32, part *replica.Partition, target []int32) []int32 {
	voters, learners, err := part.Membership()
	if err != nil {
		return isr
	}
	for _, id := range append(voters, learners...) {
		if r := int32(id); !slices.Contains(target, r) && !slices.Contains(isr, r) {
			isr = append(isr, r)
		}
	}
	if len(isr) > 1 {
		slices.Sort(isr[1:])
	}
	return isr
}

// isMoving reports whether partition p of t has a reassignment in
// progress.
func isMoving(t meta.Topic, p int32) bool {
	_, _, ok := t.Reassigning(p)
	return ok
}
