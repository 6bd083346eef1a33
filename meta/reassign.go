package meta

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Partition reassignment (Kafka's AlterPartitionReassignments and
// ListPartitionReassignments, KIP-455, as KRaft's ReplicationControlManager
// keeps it). A reassignment of a partition from its replicas "original"
// to a target is one PartitionReassigned record that makes the
// partition's replica list the union, target first (Kafka's
// "target ++ (original − target)"), with Adding = target − original and
// Removing = original − target; once the partition's leader reports an
// ISR holding the whole target and none of the removing replicas,
// CompleteReassignment records the target alone. A cancellation records
// the original replicas back. Topic.Assignments[p] is always the
// partition's current replica list; Topic.Moves[p] holds the rest.

// InitialReplicas returns partition p's replica list when it was created:
// Moves[p].Initial if the partition was ever reassigned, else its current
// replicas (nil for a partition out of range or a topic without
// assignments). The result is a copy.
func (t Topic) InitialReplicas(p int32) []int32 {
	if m, ok := t.Moves[p]; ok {
		return slices.Clone(m.Initial)
	}
	if p >= 0 && int(p) < len(t.Assignments) {
		return slices.Clone(t.Assignments[p])
	}
	return nil
}

// Reassigning returns the replicas a reassignment of partition p in
// progress adds and removes; ok is false (and both nil) when none is in
// progress. The results are copies.
func (t Topic) Reassigning(p int32) (adding, removing []int32, ok bool) {
	m, found := t.Moves[p]
	if !found || len(m.Adding)+len(m.Removing) == 0 {
		return nil, nil, false
	}
	return slices.Clone(m.Adding), slices.Clone(m.Removing), true
}

// TargetReplicas returns partition p's replicas without those a
// reassignment in progress removes: the reassignment's target, in its
// order, or the replicas when none is in progress (nil for a partition out
// of range or a topic without assignments). The result is a copy.
func (t Topic) TargetReplicas(p int32) []int32 {
	if p < 0 || int(p) >= len(t.Assignments) {
		return nil
	}
	_, removing, _ := t.Reassigning(p)
	return without(t.Assignments[p], removing)
}

// ReassignmentDone reports whether a reassignment of partition p is in
// progress and the partition's reported ISR (Leaders[p].ISR) holds every
// replica it adds and none of the ones it removes. Kafka completes a
// reassignment once the ISR holds the whole target set (and drops the
// removing replicas from the ISR as it does), and a cancellation at once;
// here the partition's leader takes the removing replicas out of its ISR
// itself only once they left the raft group, so the metadata never calls
// a replica removed while the partition still counts it. A target replica
// that was a replica before (an original one) need not be in the ISR: it
// is a raft voter throughout, and a cancellation (nothing added) with an
// original replica down completes once the added ones left, as Kafka's
// does. A partition never reported (nil ISR) is not done.
func (t Topic) ReassignmentDone(p int32) bool {
	adding, removing, ok := t.Reassigning(p)
	if !ok || int(p) >= len(t.Leaders) || t.Leaders[p].ISR == nil {
		return false
	}
	isr := t.Leaders[p].ISR
	for _, r := range adding {
		if !slices.Contains(isr, r) {
			return false
		}
	}
	for _, r := range removing {
		if slices.Contains(isr, r) {
			return false
		}
	}
	return true
}

// without returns the members of l not in drop, in l's order; nil when
// none is left.
func without(l, drop []int32) []int32 {
	var out []int32
	for _, r := range l {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}

// nonEmpty returns a copy of l, or nil when l is empty (the canonical
// form of an empty list, as decoding gives it).
func nonEmpty(l []int32) []int32 {
	if len(l) == 0 {
		return nil
	}
	return slices.Clone(l)
}

// validateReplicas checks a partition's new replica list as Kafka checks
// a manual assignment (ReplicationControlManager's
// validateManualPartitionAssignment): not empty, no broker twice, and
// every broker not in cur (the partition's current replicas, which may
// stay whatever their state) registered and not decommissioning. Errors
// wrap ErrInvalidReplicaAssignment.
func (st *state) validateReplicas(replicas, cur []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: The manual partition assignment includes an empty replica list.", ErrInvalidReplicaAssignment)
	}
	for i, r := range replicas {
		if slices.Contains(replicas[:i], r) {
			return fmt.Errorf("%w: The manual partition assignment includes the broker %d more than once.",
				ErrInvalidReplicaAssignment, r)
		}
		if slices.Contains(cur, r) {
			continue
		}
		b, ok := st.brokers[r]
		if !ok {
			return fmt.Errorf("%w: The manual partition assignment includes broker %d, but no such broker is registered.",
				ErrInvalidReplicaAssignment, r)
		}
		if b.Decommissioning {
			return fmt.Errorf("%w: The manual partition assignment includes broker %d, but it is being decommissioned.",
				ErrInvalidReplicaAssignment, r)
		}
	}
	return nil
}

// validateMove checks a reassignment state against the partition's
// replicas (distinct): adding and removing are distinct members of
// replicas, disjoint, some replica is not being removed (the target) and
// some is not being added (the original replicas, which a cancellation
// returns to). Errors wrap ErrInvalidReplicaAssignment.
func validateMove(replicas, adding, removing []int32) error {
	for _, l := range []struct {
		name string
		l    []int32
	}{{"adding", adding}, {"removing", removing}} {
		for i, r := range l.l {
			switch {
			case !slices.Contains(replicas, r):
				return fmt.Errorf("%w: %s replica %d is not one of the replicas %v", ErrInvalidReplicaAssignment, l.name, r, replicas)
			case slices.Contains(l.l[:i], r):
				return fmt.Errorf("%w: %s replica %d twice", ErrInvalidReplicaAssignment, l.name, r)
			}
		}
	}
	for _, r := range adding {
		if slices.Contains(removing, r) {
			return fmt.Errorf("%w: replica %d both added and removed", ErrInvalidReplicaAssignment, r)
		}
	}
	if len(without(replicas, removing)) == 0 {
		return fmt.Errorf("%w: every replica of %v is being removed", ErrInvalidReplicaAssignment, replicas)
	}
	if len(without(replicas, adding)) == 0 {
		return fmt.Errorf("%w: every replica of %v is being added", ErrInvalidReplicaAssignment, replicas)
	}
	return nil
}

// planReassigned is plan for a PartitionReassigned: the topic and
// partition exist, the topic has assignments, Replicas pass
// validateReplicas against the current replicas and the move passes
// validateMove. The topic's new value has Assignments[p] = Replicas and
// Moves[p] = {the existing Initial or the current replicas, Adding,
// Removing}.
func (st *state) planReassigned(r PartitionReassigned) (delta, error) {
	t, err := st.topicByID(r.TopicID)
	if err != nil {
		return delta{}, err
	}
	p := r.Partition
	if p < 0 || p >= t.Partitions {
		return delta{}, fmt.Errorf("%w: %s has %d partitions, no partition %d", ErrUnknownPartition, t.Name, t.Partitions, p)
	}
	if t.Assignments == nil {
		return delta{}, fmt.Errorf("%w: %s has no replica assignments (single-node), so its partitions cannot be reassigned",
			ErrInvalidReplicaAssignment, t.Name)
	}
	cur := t.Assignments[p]
	if err := st.validateReplicas(r.Replicas, cur); err != nil {
		return delta{}, err
	}
	if err := validateMove(r.Replicas, r.Adding, r.Removing); err != nil {
		return delta{}, err
	}
	initial, epoch := cur, int32(0)
	if m, ok := t.Moves[p]; ok {
		initial, epoch = m.Initial, m.Epoch
	}
	n := *t
	n.Assignments = slices.Clone(t.Assignments)
	n.Assignments[p] = slices.Clone(r.Replicas)
	n.Moves = maps.Clone(t.Moves)
	if n.Moves == nil {
		n.Moves = map[int32]PartitionMove{}
	}
	n.Moves[p] = PartitionMove{Initial: slices.Clone(initial), Adding: nonEmpty(r.Adding), Removing: nonEmpty(r.Removing), Epoch: epoch + 1}
	d := delta{topic: &n, moveOf: &n, movePart: p}
	if pl := t.Leaders[p]; pl.LeaderEpoch >= 0 && len(r.Removing) > 0 {
		// The last ISR report predates this change: until the leader
		// reports at the new epoch, count the removing replicas in it,
		// so that report alone never completes the move.
		n.Leaders = slices.Clone(t.Leaders)
		isr := slices.Clone(pl.ISR)
		for _, id := range r.Removing {
			if !slices.Contains(isr, id) {
				isr = append(isr, id)
			}
		}
		n.Leaders[p] = PartitionLeader{Leader: pl.Leader, LeaderEpoch: pl.LeaderEpoch, ISR: isr}
		d.leaderOf, d.leaderPart = &n, p
	}
	return d, nil
}

// loadMoves reads the topic/move/ keys into st's topics (not shared yet),
// checking that each names a partition of a topic with assignments and
// agrees with its replicas.
func loadMoves(r pebble.Reader, st *state) error {
	return scan(r, keyTopicMove, func(k, v []byte) error {
		id, part, ok := parseTopicMoveKey(k)
		t := st.topics[id]
		if !ok || t == nil || part < 0 || part >= t.Partitions || t.Assignments == nil {
			return fmt.Errorf("%w: move key %x names no partition with replicas", ErrCorrupt, k)
		}
		m, err := decodeMove(v)
		if err != nil {
			return fmt.Errorf("move %x: %w", k, err)
		}
		if len(m.Initial) == 0 {
			return fmt.Errorf("%w: move key %x holds no initial replicas", ErrCorrupt, k)
		}
		if err := validateMove(t.Assignments[part], m.Adding, m.Removing); err != nil {
			return fmt.Errorf("%w: move key %x: %v", ErrCorrupt, k, err)
		}
		if t.Moves == nil {
			t.Moves = map[int32]PartitionMove{}
		}
		t.Moves[part] = m
		return nil
	})
}

// ReassignRequest asks for partition Partition of topic TopicID to move
// to Target (broker ids, the first the preferred leader); a nil Target
// cancels the reassignment in progress.
type ReassignRequest struct {
	TopicID   [16]byte
	Partition int32
	Target    []int32
}

// Reassign starts, replaces or cancels reassignments (Kafka's
// AlterPartitionReassignments, KIP-455, as ReplicationControlManager
// handles it), one PartitionReassigned per accepted request, all in one
// change (one synced batch; one proposed entry in replicated mode). The
// requests apply in order, so a later request for the same partition
// sees the earlier one. With current = the partition's replica list (the
// union during a move) and original = current without the replicas a
// reassignment in progress adds:
//
//   - Target nil cancels: a move back to original. The replicas become
//     original ++ adding, with the adding ones removing (on raft they may
//     be voters already: they leave before the move completes); the
//     reassignment completes as any other (CompleteReassignment).
//     ErrNoReassignmentInProgress when none is in progress.
//   - Otherwise, from current as Kafka's ReplicationControlManager does:
//     the replicas become Target ++ (current − Target), removing
//     current − Target (so a replica of a replaced move that Target
//     leaves out is removed, not forgotten) and adding Target − original.
//     Target with the same brokers as current and nothing in progress
//     only changes the preferred order, complete at once.
//
// errs[i] is why reqs[i] was refused: ErrUnknownTopicID,
// ErrUnknownPartition, ErrNoReassignmentInProgress, or
// ErrInvalidReplicaAssignment (a topic kept without assignments, an empty
// Target, a broker twice, a Target broker that is not one of the current
// replicas and is not registered or is decommissioning) with Kafka's messages; in replicated mode also an
// error a record valid when proposed met at apply. err fails the whole
// call as for CreateTopics (nothing applied, or for a timeout the outcome
// unknown).
func (s *Store) Reassign(reqs []ReassignRequest) (errs []error, err error) {
	errs = make([]error, len(reqs))
	var idx []int // request of each record
	outs, err := s.change(func(st *state) ([]Record, error) {
		work := st.clone()
		var recs []Record
		idx = idx[:0]
		for i, rq := range reqs {
			rec, err := work.reassignRecord(rq)
			if err == nil {
				var d delta
				if d, err = work.plan(rec); err == nil {
					work.apply(d)
				}
			}
			if errs[i] = err; err == nil {
				recs = append(recs, rec)
				idx = append(idx, i)
			}
		}
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	for j, o := range outs {
		errs[idx[j]] = o.err
	}
	return errs, nil
}

// reassignRecord is the PartitionReassigned that carries out rq against
// st (see Reassign).
func (st *state) reassignRecord(rq ReassignRequest) (Record, error) {
	t, err := st.topicByID(rq.TopicID)
	if err != nil {
		return nil, err
	}
	p := rq.Partition
	if p < 0 || p >= t.Partitions {
		return nil, fmt.Errorf("%w: %s has %d partitions, no partition %d", ErrUnknownPartition, t.Name, t.Partitions, p)
	}
	if t.Assignments == nil {
		return nil, fmt.Errorf("%w: %s has no replica assignments (single-node), so its partitions cannot be reassigned",
			ErrInvalidReplicaAssignment, t.Name)
	}
	adding, _, inProgress := t.Reassigning(p)
	current := t.Assignments[p]
	original := without(current, adding)
	rec := PartitionReassigned{TopicID: rq.TopicID, Partition: p}
	if rq.Target == nil {
		if !inProgress {
			return nil, fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, t.Name, p)
		}
		// A cancel is a move back: the adding replicas, which may be
		// raft voters already, stay listed (removing) until they left.
		rec.Replicas = append(slices.Clone(original), adding...)
		rec.Removing = slices.Clone(adding)
		return rec, nil
	}
	if err := st.validateReplicas(rq.Target, current); err != nil {
		return nil, err
	}
	// From the current list (the union during a move), as Kafka's
	// ReplicationControlManager: a replica of the move replaced that the
	// new target leaves out is removing, not forgotten (it may be a raft
	// voter already).
	rec.Replicas = slices.Clone(rq.Target)
	if rec.Removing = without(current, rq.Target); rec.Removing != nil {
		rec.Replicas = append(rec.Replicas, rec.Removing...)
	}
	rec.Adding = without(rq.Target, original)
	return rec, nil
}

// CompleteReassignment ends the reassignment of partition p of the topic
// when Topic.ReassignmentDone holds in the current state: a
// PartitionReassigned with the target replicas (TargetReplicas) and no
// reassignment in progress. done is false, and nothing is written (in
// replicated mode nothing is proposed), when no reassignment is in
// progress or it is not done yet. Errors: ErrUnknownTopicID,
// ErrUnknownPartition; in replicated mode the record's error at apply;
// the whole-change errors of Reassign.
func (s *Store) CompleteReassignment(topicID [16]byte, p int32) (done bool, err error) {
	outs, err := s.change(func(st *state) ([]Record, error) {
		t, err := st.topicByID(topicID)
		if err != nil {
			return nil, err
		}
		if p < 0 || p >= t.Partitions {
			return nil, fmt.Errorf("%w: %s has %d partitions, no partition %d", ErrUnknownPartition, t.Name, t.Partitions, p)
		}
		if !t.ReassignmentDone(p) {
			return nil, nil
		}
		return []Record{PartitionReassigned{TopicID: topicID, Partition: p, Replicas: t.TargetReplicas(p)}}, nil
	})
	if err != nil || len(outs) == 0 {
		return false, err
	}
	return outs[0].err == nil, outs[0].err
}

// Reassignment is a partition with a reassignment in progress: its
// current replicas (the target first, then the removing ones) and the
// replicas being added and removed (Kafka's
// ListPartitionReassignments OngoingPartitionReassignment).
type Reassignment struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// Reassignments returns every partition with a reassignment in progress,
// sorted by topic name, then partition; nil when there is none. The
// slices are copies.
func (s *Store) Reassignments() []Reassignment {
	s.mu.RLock()
	var out []Reassignment
	for _, t := range s.st.topics {
		for p := range t.Moves {
			adding, removing, ok := t.Reassigning(p)
			if ok {
				out = append(out, Reassignment{Topic: t.Name, TopicID: t.ID, Partition: p,
					Replicas: slices.Clone(t.Assignments[p]), Adding: adding, Removing: removing})
			}
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Reassignment) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
