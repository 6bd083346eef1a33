package replica

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// partitionStorage is a replicated partition's GroupStorage: raft reads
// its log through logStorage (raft_log.go) over the segment log, and the
// host's worker writes a Ready's entries through Append, which also keeps
// what is derived from the log (producer state, leader epochs, producer
// snapshots at rolls, the leader's proposals) in step with it.
type partitionStorage struct {
	*logStorage
	p *Partition
}

var _ GroupStorage = (*partitionStorage)(nil)

// Append writes a Ready's entries: data entries as record batches (base
// offset and leader epoch stamped by the log from the entry's index and
// term), raft's own entries as internal batches. An append over the tail
// (a follower's divergent entries) truncates it first and rebuilds the
// producer state and leader epochs from what remains.
func (s *partitionStorage) Append(ents []raftpb.Entry) error {
	p := s.p
	if len(ents) > 0 && ents[0].Index <= p.log.LastIndex() {
		// A divergent tail goes first, and what is derived from the log
		// is rebuilt from what remains, before any new entry is written
		// (so each is recorded once, and a roll's producer snapshot holds
		// only the batches below it).
		leo, err := p.log.TruncateIndex(ents[0].Index)
		if err != nil {
			return err
		}
		if err := p.afterTruncate(ents[0].Index, leo); err != nil {
			return err
		}
	}
	written, err := s.appendEntries(ents)
	for i, w := range written {
		e := &ents[i]
		res := w.Result
		var h *batch.Header
		if w.Kind == segment.EntryData {
			h = &written[i].Header
		}
		if res.Rolled {
			p.appendMu.Lock()
			write := p.snapshotLocked(res.BaseOffset)
			p.appendMu.Unlock()
			p.snapWG.Add(1)
			go func() {
				defer p.snapWG.Done()
				write()
			}()
		}
		p.noteEpoch(int32(e.Term), res.BaseOffset)
		var id int64
		if w.Kind == segment.EntryData || w.Kind == segment.EntryDeleteRecords {
			id = w.Header.BaseOffset // as proposed: the proposal's id
		}
		p.written(e, id, res, h, true)
	}
	return err
}

// afterTruncate resets what is derived from the log after a truncation to
// leo: producer state rebuilt from the log, leader epochs cut.
func (p *Partition) afterTruncate(index uint64, leo int64) error {
	// The proposals whose entries were removed will not commit with their
	// term: they fail now (an index committing out of order would
	// otherwise hold the ones behind it).
	p.rs.failFrom(p, index)
	// Snapshots above the truncation point describe the removed tail
	// (Kafka's truncateAndReload drops them too); one still being written
	// is waited for first.
	p.snapWG.Wait()
	if err := removeSnapshotsAbove(p.fs, p.log.Dir(), leo); err != nil {
		return fmt.Errorf("replica: producer snapshots after truncating to %d: %w", leo, err)
	}
	p.appendMu.Lock()
	err := p.loadProducers()
	p.appendMu.Unlock()
	if err != nil {
		return fmt.Errorf("replica: producer state after truncating to %d: %w", leo, err)
	}
	p.mu.Lock()
	changed := p.epochs.truncateFromEnd(leo + 1)
	if t, err := p.log.Term(p.log.LastIndex()); err == nil && p.epochs.truncateAbove(int32(t)) {
		changed = true // an epoch all of whose entries went
	}
	if changed {
		p.saveEpochsLocked()
	}
	// Wake whoever waits on the log (a retry of a written batch that was
	// just removed).
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	return nil
}

// Sync makes the appended entries durable (a group-commit sync of the
// log), then answers the acks=1 proposals they held.
func (s *partitionStorage) Sync() error {
	if err := s.p.log.Sync(); err != nil {
		return err
	}
	s.p.rs.synced()
	return nil
}

// holdsCommitted checks that the log holds every entry st's commit and
// applied indexes cover. A log that lost committed entries (damage
// recovery stopped before them, a file replaced by an older copy) cannot
// take part in its group: raft panics on a commit index past the log's
// end, and the replica may have voted or acknowledged on what it lost.
// The error names the damage when there is one, and what an operator can
// do; the broker keeps the partition offline (KAFKA_STORAGE_ERROR).
func (p *Partition) holdsCommitted(st GroupState) error {
	need := max(st.HardState.Commit, st.Applied)
	last := p.log.LastIndex()
	if need <= last || need < p.log.FirstIndex() {
		return nil
	}
	why := "recovery cut the log's tail (see its warning) or a file was replaced by an older copy"
	if d := p.log.Damage(); d != nil {
		why = d.Error()
	}
	return fmt.Errorf("%w: the raft group's saved state covers its entries up to index %d, but the log ends at index %d (%s); the replica stays offline until the log's files are restored (Sluice cannot rebuild it from the other replicas yet; with one replica the entries are lost)",
		ErrLostCommitted, need, last, why)
}

// startRaft joins the partition's raft group on its host (Open with
// Options.Raft): the high watermark is the offset after the last entry
// the state machine applied (entries above it are applied again).
func (p *Partition) startRaft(rc RaftConfig) error {
	if rc.Host == nil {
		return errors.New("replica: RaftConfig.Host is nil")
	}
	if rc.ReplicaLagTime <= 0 {
		rc.ReplicaLagTime = DefaultReplicaLagTime
	}
	st := rc.State
	self := rc.Host.cfg.NodeID
	if len(st.ConfState.Voters) == 0 && len(st.ConfState.Learners) == 0 {
		st.ConfState = raftpb.ConfState{Voters: append([]uint64(nil), rc.Voters...), Learners: append([]uint64(nil), rc.Learners...)}
		if slices.Contains(st.ConfState.Learners, self) && slices.Contains(st.ConfState.Voters, self) {
			// A joiner that was one of the group's first replicas: it
			// replays the log as a learner (raft would demote it the same
			// way), never as a voter with an empty log.
			st.ConfState.Voters = slices.DeleteFunc(st.ConfState.Voters, func(v uint64) bool { return v == self })
			if len(st.ConfState.Voters) == 0 {
				return fmt.Errorf("replica: node %d joins group %s whose only initial voter was itself: replaying its configuration changes from no voter cannot work (see RaftConfig.Voters)", self, rc.Group)
			}
		}
	}
	if rc.Joining && st.HardState == (raftpb.HardState{}) {
		// raft_join.go. Its vote in that term, if it had one, is lost
		// too: vote for itself, so it grants none in MinTerm.
		st.HardState.Term = rc.MinTerm
		if rc.MinTerm > 0 {
			st.HardState.Vote = self
		}
	}
	if !rc.Joining && !slices.Contains(st.ConfState.Voters, self) && !slices.Contains(st.ConfState.Learners, self) {
		// A replica must be one of its group's: raft would run it as a
		// member it is not (a removed replica reopened, a placement
		// mistake).
		return fmt.Errorf("%w: node %d is not a replica of group %s (voters %v, learners %v)", ErrNotAReplica, self, rc.Group, st.ConfState.Voters, st.ConfState.Learners)
	}
	if err := p.holdsCommitted(st); err != nil {
		return err
	}
	rs := &raftState{
		host:     rc.Host,
		id:       rc.Group,
		self:     rc.Host.cfg.NodeID,
		lagTime:  rc.ReplicaLagTime,
		onLeader: rc.OnLeaderChange,
		state:    rc.SnapshotState,
		inflight: map[int64][]*proposal{},
		broken:   map[int64]bool{},
	}
	rs.snap.fetcher = rc.Snapshots
	// A snapshot applied (durably, in step 2 of the host's loop) before
	// a crash that came before the group state covering it was saved
	// (step 4): the log starts past the saved commit index. A snapshot
	// holds only committed entries, and raft refuses a commit index below
	// FirstIndex-1 at start.
	if first := p.log.FirstIndex(); st.HardState.Commit+1 < first {
		st.HardState.Commit = first - 1
	}
	rs.storage = newLogStorage(p.log, st.HardState, st.ConfState)
	p.rs = rs
	applied := st.Applied
	if first := p.log.FirstIndex(); applied+1 < first {
		applied = first - 1
		st.Applied = applied
	}
	hw, err := p.log.OffsetAfter(applied)
	if err != nil {
		return err
	}
	// Retention is raft log compaction: never of what is not applied
	// (nor, with a SnapshotState, of what its machine did not apply).
	p.log.SetRaftRetainFrom(retentionBound(p, applied))
	p.mu.Lock()
	p.highWatermark = hw
	p.mu.Unlock()
	err = rc.Host.AddGroup(GroupConfig{
		ID:      rc.Group,
		Storage: &partitionStorage{logStorage: rs.storage, p: p},
		Machine: raftMachine{p},
		State:   st,
		Joining: rc.Joining,
		// AddGroup campaigns only for a group new here.
		CampaignIfNew: rc.Preferred,
	})
	if err != nil {
		p.rs = nil
		return err
	}
	return nil
}
