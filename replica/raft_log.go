package replica

import (
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
)

// raftLog is raft.Storage over a partition's segment log (segment/raft.go
// has the mapping: raft index = the batch's ordinal, term = its
// partitionLeaderEpoch, raft's own entries as internal batches that take
// no Kafka offset). InitialState returns the HardState and ConfState the
// host gives it (SetState; they are kept in the broker's StateStore, not
// in the log).
type raftLog struct {
	log *segment.Log

	mu    sync.Mutex
	state GroupState
}

func newRaftLog(l *segment.Log) *raftLog { return &raftLog{log: l} }

// SetState records the group's durable state (the host calls it at
// AddGroup and after each save).
func (r *raftLog) SetState(st GroupState) {
	r.mu.Lock()
	r.state = st
	r.mu.Unlock()
}

// InitialState implements raft.Storage.
func (r *raftLog) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.HardState, r.state.ConfState, nil
}

// Entries implements raft.Storage: [lo, hi), at most maxSize bytes but at
// least one entry.
func (r *raftLog) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	es, err := r.log.Entries(lo, hi, maxSize)
	if err != nil {
		return nil, raftError(err)
	}
	out := make([]raftpb.Entry, len(es))
	for i, e := range es {
		out[i] = raftpb.Entry{Index: e.Index, Term: e.Term, Type: raftpb.EntryNormal}
		switch e.Kind {
		case segment.EntryData:
			out[i].Data = e.Data
		case segment.EntryEmpty:
		case segment.EntryConfChange:
			out[i].Type, out[i].Data = raftpb.EntryConfChange, e.Data
		case segment.EntryConfChangeV2:
			out[i].Type, out[i].Data = raftpb.EntryConfChangeV2, e.Data
		}
	}
	return out, nil
}

// Term implements raft.Storage.
func (r *raftLog) Term(i uint64) (uint64, error) {
	t, err := r.log.Term(i)
	return t, raftError(err)
}

// LastIndex implements raft.Storage.
func (r *raftLog) LastIndex() (uint64, error) { return r.log.LastIndex(), nil }

// FirstIndex implements raft.Storage.
func (r *raftLog) FirstIndex() (uint64, error) { return r.log.FirstIndex(), nil }

// Snapshot implements raft.Storage: none is available yet.
func (r *raftLog) Snapshot() (raftpb.Snapshot, error) {
	return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
}

// appendEntry writes one entry from a Ready.
func (r *raftLog) appendEntry(e *raftpb.Entry) (segment.AppendResult, error) {
	kind := segment.EntryData
	switch {
	case e.Type == raftpb.EntryConfChange:
		kind = segment.EntryConfChange
	case e.Type == raftpb.EntryConfChangeV2:
		kind = segment.EntryConfChangeV2
	case len(e.Data) == 0:
		kind = segment.EntryEmpty
	}
	return r.log.AppendEntry(e.Index, e.Term, kind, e.Data, segment.AppendOptions{})
}

// offsetAfter is the Kafka offset after entry i.
func (r *raftLog) offsetAfter(i uint64) (int64, error) { return r.log.OffsetAfter(i) }
