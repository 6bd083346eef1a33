package replica

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Membership changes, for moving a partition between brokers (Kafka's
// AlterPartitionReassignments, KIP-455): the broker drives the group's
// configuration toward a target replica set one single change at a time
// (raft thesis 4.1: one server added or removed at a time needs no joint
// consensus), each a ConfChangeV2 of one ConfChangeSingle:
//
//  1. AddLearner(new): a learner receives the log (or a snapshot) but does
//     not vote, so it cannot slow commits while it catches up (Kafka's
//     adding replicas, outside the ISR until caught up);
//  2. PromoteLearner(new) once its Progress shows it caught up;
//  3. TransferLeadership away from a replica about to be removed;
//  4. RemoveReplica(old).
//
// Every call returns once raft accepted the proposal, not once it is
// applied: the caller polls Membership. Raft takes one configuration
// change at a time: while one is proposed and not applied, etcd raft
// turns a second one into an empty entry without saying so (raft.go,
// stepLeader: "possible unapplied conf change"), so the host refuses it
// first with ErrConfChangePending. Its rule, checked in the worker that
// owns the RawNode, is raft's own, made conservative: a change is pending
// while this leader has not applied an entry of its own term (etcd raft
// sets its pending index to its last index when it becomes leader), or
// while a change it proposed in this term is not applied (raft's pending
// index is that entry's).
//
// A replica that joins a group (a new broker, or one that held the
// partition before and lost its data) is opened with the group's
// *initial* configuration, RaftConfig.Voters = the replicas the group was
// created with, and RaftConfig.Learners = itself, and an empty log; it
// replays every configuration change from the log in order, or gets a
// snapshot (whose ConfState replaces its own). See RaftConfig.Voters for
// the one case that needs more.

// Errors of the membership calls.
var (
	// ErrConfChangePending: an earlier configuration change is not applied
	// yet (or this leader has not applied an entry of its own term);
	// retry once Membership shows it.
	ErrConfChangePending = errors.New("replica: a configuration change is not applied yet")
	// ErrRemoveLeader: RemoveReplica of the leader itself; move the
	// leadership first (TransferLeadership).
	ErrRemoveLeader = errors.New("replica: the leader cannot remove itself (transfer leadership first)")
	// ErrInvalidConfChange: a change the configuration does not allow
	// (promoting a replica that is not a learner, adding a voter as a
	// learner, a change that would leave no voter, a transfer to a
	// replica that is not a voter).
	ErrInvalidConfChange = errors.New("replica: invalid configuration change")
)

// Membership returns the group's configuration as this replica last
// applied it: its voters and learners, in ascending order. Any replica
// answers (a follower may lag the leader). It does not wake a quiesced
// group. Errors: the host's (ErrNoGroup once closed).
func (p *Partition) Membership() (voters, learners []uint64, err error) {
	return p.rs.host.Membership(p.rs.id)
}

// AddLearner proposes adding replica id as a learner (ConfChangeAddLearnerNode).
// It returns once proposed; the caller polls Membership. nil without a
// proposal when id is a learner already. Errors: *NotLeaderError on a
// replica that does not lead; ErrConfChangePending; ErrInvalidConfChange
// when id is a voter (Sluice never demotes a voter) or 0.
func (p *Partition) AddLearner(id uint64) error {
	return p.confChange(raftpb.ConfChangeAddLearnerNode, id)
}

// PromoteLearner proposes making learner id a voter (ConfChangeAddNode).
// Promote a learner once it caught up (Progress: its Match at the
// leader's log end, CaughtUp recent): a lagging new voter can hold
// commits back in a small group. It returns once proposed. nil without a
// proposal when id is a voter already. Errors: as AddLearner;
// ErrInvalidConfChange when id is not a replica of the group.
func (p *Partition) PromoteLearner(id uint64) error {
	return p.confChange(raftpb.ConfChangeAddNode, id)
}

// RemoveReplica proposes removing replica id, a voter or a learner
// (ConfChangeRemoveNode). It returns once proposed. nil without a
// proposal when id is not a replica. Errors: as AddLearner;
// ErrRemoveLeader when id is this leader; ErrInvalidConfChange when no
// voter would remain. The removed replica's broker then closes its
// Partition and deletes its data (HardStateStore.Delete); while it still
// runs it cannot disrupt the group (see DESIGN.md, "Membership").
func (p *Partition) RemoveReplica(id uint64) error {
	return p.confChange(raftpb.ConfChangeRemoveNode, id)
}

func (p *Partition) confChange(typ raftpb.ConfChangeType, id uint64) error {
	rs := p.rs
	err := rs.host.proposeSingleChange(rs.id, typ, id)
	if errors.Is(err, ErrNotRaftLeader) {
		return p.notLeader(err.Error())
	}
	return err
}

// Progress returns the group's replicas as this leader sees them
// (Host.Progress: match, learner flag, last caught-up time), ascending
// by id. Errors: *NotLeaderError on a replica that does not lead.
func (p *Partition) Progress() ([]ReplicaProgress, error) {
	rs := p.rs
	prog, err := rs.host.Progress(rs.id)
	if errors.Is(err, ErrNotRaftLeader) {
		return nil, p.notLeader(err.Error())
	}
	return prog, err
}

// OffsetAfterIndex is the Kafka offset after raft entry index in this
// replica's log (the base offset of the next data record): a replica's log
// end offset as its leader knows it, for index its Progress Match. Errors:
// the log's when index is not in it (below its raft start, compacted, or
// past its last entry).
func (p *Partition) OffsetAfterIndex(index uint64) (int64, error) {
	return p.log.OffsetAfter(index)
}

// TransferLeadership asks raft to hand this leader's leadership to
// replica to, a voter (raft's MsgTimeoutNow once to has caught up), and
// returns once asked: the caller polls Leader (etcd raft abandons a
// transfer not done within an election timeout; ask again). nil when to
// is this replica. Errors: *NotLeaderError on a replica that does not
// lead; ErrInvalidConfChange when to is not a voter.
// While the transfer runs raft drops proposals (produce answers
// NOT_LEADER_OR_FOLLOWER, retriable).
func (p *Partition) TransferLeadership(to uint64) error {
	rs := p.rs
	err := rs.host.call(rs.id, true, func(g *group) error {
		st := g.rn.BasicStatus()
		if st.RaftState != raft.StateLeader {
			return ErrNotRaftLeader
		}
		if to == st.ID {
			return nil
		}
		if !slices.Contains(g.state.ConfState.Voters, to) {
			return fmt.Errorf("%w: replica %d is not a voter (voters %v)", ErrInvalidConfChange, to, g.state.ConfState.Voters)
		}
		g.rn.TransferLeader(to)
		return nil
	})
	if errors.Is(err, ErrNotRaftLeader) {
		return p.notLeader(err.Error())
	}
	return err
}

// Membership returns the group's voters and learners as this replica
// last applied them, ascending. It does not wake a quiesced group.
func (h *Host) Membership(id GroupID) (voters, learners []uint64, err error) {
	err = h.call(id, false, func(g *group) error {
		voters = slices.Sorted(slices.Values(g.state.ConfState.Voters))
		learners = slices.Sorted(slices.Values(g.state.ConfState.Learners))
		return nil
	})
	return voters, learners, err
}

// proposeSingleChange proposes one configuration change on the group's
// leader (this replica), in its worker. See the top of the file for the
// rules; errors: ErrNotRaftLeader, ErrConfChangePending, ErrRemoveLeader,
// ErrInvalidConfChange, and raft's ErrProposalDropped (a leadership
// transfer is under way).
func (h *Host) proposeSingleChange(id GroupID, typ raftpb.ConfChangeType, node uint64) error {
	return h.call(id, true, func(g *group) error { return h.proposeSingleChangeIn(g, typ, node) })
}

// proposeSingleChangeIn is proposeSingleChange in the worker owning g.
func (h *Host) proposeSingleChangeIn(g *group, typ raftpb.ConfChangeType, node uint64) error {
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return ErrNotRaftLeader
	}
	if err := h.confPending(g, st); err != nil {
		return err
	}
	cs := g.state.ConfState // the configuration in force: nothing is pending
	if node == 0 {
		return fmt.Errorf("%w: replica id 0", ErrInvalidConfChange)
	}
	voter, learner := slices.Contains(cs.Voters, node), slices.Contains(cs.Learners, node)
	switch typ {
	case raftpb.ConfChangeAddLearnerNode:
		if learner {
			return nil
		}
		if voter {
			return fmt.Errorf("%w: replica %d is a voter (a voter is never made a learner)", ErrInvalidConfChange, node)
		}
	case raftpb.ConfChangeAddNode:
		if voter {
			return nil
		}
		if !learner {
			return fmt.Errorf("%w: replica %d is not a learner of the group (add it as a learner first)", ErrInvalidConfChange, node)
		}
	case raftpb.ConfChangeRemoveNode:
		if !voter && !learner {
			return nil
		}
		if node == st.ID {
			return ErrRemoveLeader
		}
		if voter && len(cs.Voters) == 1 {
			return fmt.Errorf("%w: removing replica %d would leave no voter", ErrInvalidConfChange, node)
		}
	default:
		return fmt.Errorf("%w: change type %v", ErrInvalidConfChange, typ)
	}
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: node}}}
	if err := g.rn.ProposeConfChange(cc); err != nil {
		return fmt.Errorf("replica: raft group %s: %s %d: %w", g.id, typ, node, err)
	}
	g.confWait = true
	return nil
}

// confPending returns ErrConfChangePending when etcd raft would drop a
// configuration change proposed now (see the top of the file): raft's
// pending index is its last index when it became leader, or the index of
// the last change it accepted; it takes a new change once its applied
// index reached it. Called by the worker on the group's leader.
func (h *Host) confPending(g *group, st raft.BasicStatus) error {
	if len(g.state.ConfState.VotersOutgoing) > 0 {
		return fmt.Errorf("%w: the configuration is joint", ErrConfChangePending)
	}
	if g.confWait || (g.pendingTerm == st.Term && g.pendingConf > st.Applied) {
		return fmt.Errorf("%w: the change at index %d (applied %d)", ErrConfChangePending, g.pendingConf, st.Applied)
	}
	// The leader's first entry of its term comes right after raft's
	// pending index at election: until an entry of this term is applied,
	// raft may still refuse.
	if t, err := g.storage.Term(st.Applied); err != nil || t != st.Term {
		return fmt.Errorf("%w: the leader has not applied an entry of its term %d yet (applied %d)", ErrConfChangePending, st.Term, st.Applied)
	}
	return nil
}

// noteConfProposed records, in step 2 of Host.handle, the index of the
// configuration change the worker proposed before taking rd (it is among
// rd's entries: proposals run before the Ready is taken). raft replacing
// it by an empty entry would be a bug of confPending: it is logged.
func (h *Host) noteConfProposed(g *group, rd *raft.Ready) {
	if !g.confWait {
		return
	}
	g.confWait = false
	for i := len(rd.Entries) - 1; i >= 0; i-- {
		if t := rd.Entries[i].Type; t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2 {
			g.pendingConf, g.pendingTerm = rd.Entries[i].Index, rd.Entries[i].Term
			return
		}
	}
	h.cfg.Logger.Error("replica: raft dropped a configuration change the host checked (confPending)", "group", g.id.String())
}
