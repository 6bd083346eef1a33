package replica

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Moving a partition's leadership away, for a broker's controlled
// shutdown (Kafka's ControlledShutdown moves each partition's leadership
// to another in-sync replica before the broker stops).

// ErrNoTransferTarget reports a TransferLeadershipAway with no replica to
// hand leadership to: the group has a single voter, or no other voter is
// in the ISR and reported up.
var ErrNoTransferTarget = errors.New("replica: no in-sync replica to transfer leadership to")

// TransferLeadershipAway asks raft to hand this leader's leadership to
// the best other replica and returns that replica's id: a voter in the
// ISR (ISR) that the transport does not report down, the most caught up
// (the highest raft match), the lowest id among equals. It returns once
// asked (Host.TransferLeadership), not once moved: the caller polls
// IsLeader (or Leader) with a deadline of its own, and may call again,
// since etcd raft abandons a transfer the target does not complete within
// an election timeout (and a new call may pick another target). Errors:
// a *NotLeaderError (ErrNotLeader, or ErrLeaderNotAvailable during an
// election) on a replica that does not lead; ErrNoTransferTarget when no
// replica qualifies (a group of one voter, no other voter in sync and
// up); the host's errors (ErrNoGroup once the
// partition closed). Proposals
// still waiting on this leader complete as raft decides (those not
// committed before leadership moves fail with NOT_LEADER_OR_FOLLOWER,
// retriable).
func (p *Partition) TransferLeadershipAway() (to uint64, err error) {
	rs := p.rs
	if !p.IsLeader() {
		return 0, p.notLeader("only the leader moves its leadership")
	}
	isr, err := rs.inSync(p, time.Now(), true)
	if err != nil {
		if errors.Is(err, ErrNotRaftLeader) {
			return 0, p.notLeader(err.Error())
		}
		return 0, err
	}
	if len(isr) == 0 {
		return 0, p.notLeader("only the leader moves its leadership")
	}
	prog, err := rs.host.Progress(rs.id)
	if err != nil {
		if errors.Is(err, ErrNotRaftLeader) {
			return 0, p.notLeader(err.Error())
		}
		return 0, err
	}
	to = pickTransferTarget(rs.self, isr, prog, rs.host.isDown)
	if to == 0 {
		return 0, fmt.Errorf("%w: ISR %v", ErrNoTransferTarget, isr)
	}
	if err := rs.host.TransferLeadership(rs.id, to); err != nil {
		return 0, err
	}
	return to, nil
}

// pickTransferTarget returns the replica TransferLeadershipAway hands
// leadership to (0: none): among the voters in isr other than self and
// not down, the highest Match, then the lowest id.
func pickTransferTarget(self uint64, isr []uint64, prog []ReplicaProgress, down func(uint64) bool) uint64 {
	var best *ReplicaProgress
	for i := range prog {
		pr := &prog[i]
		if pr.ID == self || pr.Learner || down(pr.ID) || !slices.Contains(isr, pr.ID) {
			continue
		}
		if best == nil || pr.Match > best.Match || (pr.Match == best.Match && pr.ID < best.ID) {
			best = pr
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}
