package replica

import "go.etcd.io/raft/v3/raftpb"

// Joining replicas (RaftConfig.Joining). A replica added to a group that
// already ran starts from the group's first voters and replays the log,
// configuration changes included; while it replays, the configuration it
// has applied can be an old one, even one in which it was the only voter
// (a partition moved away from it and back). A replica that ticked then
// could stand for election and, in such a configuration, win alone.
// So a joining replica does not tick, and the host does not campaign for
// it, until it has applied the leader's commit index as of the first
// append (or snapshot) it received: from then on its configuration is
// the group's, as any follower's. A leadership transfer to it (raft's
// MsgTimeoutNow) is not blocked: its leader asks for it only of a voter
// that has caught up.
//
// Nor does a joining replica grant votes or pre-votes (the host drops
// MsgVote and MsgPreVote to it, as if it were down): its log may be
// empty, or shorter than what it acknowledged before its broker deleted
// it (a replica removed, then added back), so its vote would let a
// candidate that lacks committed entries win in the old configuration
// the candidate still has (raft needs a voter's log and vote to be
// durable; a wiped replica has neither). It is being added as a learner,
// so no election needs its vote. Found by the chaos runner
// (tools/chaos/FINDINGS.md, no-leader-after-heal);
// TestMembershipRejoinerGrantsNoVote.

// noteJoin records, for a joining replica, the commit index the first
// append or snapshot from its leader carries (a heartbeat's commit is
// capped at what the replica holds, so it does not count); called after
// raft stepped m, and only a message of the term raft is in counts (not
// one of a deposed leader, which raft ignored). Worker only. The joining
// state is saved with the group's (GroupState.Joining): a replica
// restarted before it caught up is still joining.
func (g *group) noteJoin(m raftpb.Message) {
	if !g.joining || g.joinCommit != 0 || m.Term == 0 || m.Term != g.rn.BasicStatus().Term {
		return
	}
	switch m.Type {
	case raftpb.MsgApp:
		g.joinCommit = max(m.Commit, 1)
	case raftpb.MsgSnap:
		g.joinCommit = max(m.Snapshot.Metadata.Index, 1)
	}
}

// joined ends a replica's joining once it applied the commit index it
// waits for. Called by the worker after each apply.
func (g *group) joined() {
	if g.joining && g.joinCommit != 0 && g.state.Applied >= g.joinCommit {
		g.joining = false
	}
}

// isVoteRequest reports whether t asks for a vote or a pre-vote.
func isVoteRequest(t raftpb.MessageType) bool {
	return t == raftpb.MsgVote || t == raftpb.MsgPreVote
}
