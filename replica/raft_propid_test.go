package replica

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
)

// An entry written by another leader whose proposal counter reached the
// same id (each node counts from 1) is not taken for this leader's
// proposal: the match needs the term the proposal was taken in too. Else
// a proposal raft replaced in the Ready that stepped the leader down
// would be answered with another producer's offsets.
func TestProposalMatchNeedsTerm(t *testing.T) {
	mine := &proposal{id: 5, propTerm: 2, acks: AcksAll}
	p := &Partition{rs: &raftState{proposed: []*proposal{mine}}}
	p.written(&raftpb.Entry{Index: 10, Term: 3}, 5, segment.AppendResult{BaseOffset: 40, LastOffset: 49}, nil, true)
	if len(p.rs.proposed) != 1 || len(p.rs.committing) != 0 {
		t.Fatalf("an entry of term 3 matched a proposal of term 2: proposed %d, committing %d", len(p.rs.proposed), len(p.rs.committing))
	}
	p.written(&raftpb.Entry{Index: 11, Term: 2}, 5, segment.AppendResult{BaseOffset: 50, LastOffset: 59}, nil, true)
	if len(p.rs.proposed) != 0 || len(p.rs.committing) != 1 || mine.index != 11 || mine.res.BaseOffset != 50 {
		t.Fatalf("its own entry did not match: proposed %d, committing %d, index %d, base %d", len(p.rs.proposed), len(p.rs.committing), mine.index, mine.res.BaseOffset)
	}
}
