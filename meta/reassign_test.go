package meta

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestTopicReassignmentHelpers(t *testing.T) {
	isr := func(l ...int32) []PartitionLeader { return []PartitionLeader{{Leader: l[0], LeaderEpoch: 1, ISR: l}} }
	for _, tc := range []struct {
		name                string
		tp                  Topic
		p                   int32
		initial, target     []int32
		adding, removing    []int32
		reassigning, isDone bool
	}{
		{name: "single-node topic", tp: Topic{Partitions: 1, Leaders: []PartitionLeader{noLeader}}},
		{name: "zero topic", tp: Topic{}, p: 3},
		{name: "negative partition", tp: Topic{Assignments: [][]int32{{1}}}, p: -1},
		{name: "never reassigned", tp: Topic{Assignments: [][]int32{{1, 2}}, Leaders: isr(1, 2)},
			initial: []int32{1, 2}, target: []int32{1, 2}},
		{name: "reassigned, done with", tp: Topic{Assignments: [][]int32{{3, 2}}, Leaders: isr(3, 2),
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}}}},
			initial: []int32{1, 2}, target: []int32{3, 2}},
		{name: "in progress, never reported", tp: Topic{Assignments: [][]int32{{3, 2, 1}}, Leaders: []PartitionLeader{noLeader},
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Adding: []int32{3}, Removing: []int32{1}}}},
			initial: []int32{1, 2}, target: []int32{3, 2}, adding: []int32{3}, removing: []int32{1}, reassigning: true},
		{name: "in progress, target not in sync", tp: Topic{Assignments: [][]int32{{3, 2, 1}}, Leaders: isr(1, 2),
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Adding: []int32{3}, Removing: []int32{1}}}},
			initial: []int32{1, 2}, target: []int32{3, 2}, adding: []int32{3}, removing: []int32{1}, reassigning: true},
		{name: "in progress, removing still in sync", tp: Topic{Assignments: [][]int32{{3, 2, 1}}, Leaders: isr(1, 2, 3),
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Adding: []int32{3}, Removing: []int32{1}}}},
			initial: []int32{1, 2}, target: []int32{3, 2}, adding: []int32{3}, removing: []int32{1}, reassigning: true},
		{name: "in progress, done", tp: Topic{Assignments: [][]int32{{3, 2, 1}}, Leaders: isr(2, 3),
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Adding: []int32{3}, Removing: []int32{1}}}},
			initial: []int32{1, 2}, target: []int32{3, 2}, adding: []int32{3}, removing: []int32{1}, reassigning: true, isDone: true},
		{name: "adding only, done", tp: Topic{Assignments: [][]int32{{1, 2, 3}}, Leaders: isr(1, 2, 3),
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Adding: []int32{3}}}},
			initial: []int32{1, 2}, target: []int32{1, 2, 3}, adding: []int32{3}, reassigning: true, isDone: true},
		{name: "removing only, done", tp: Topic{Assignments: [][]int32{{1, 2}}, Leaders: isr(1),
			Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Removing: []int32{2}}}},
			initial: []int32{1, 2}, target: []int32{1}, removing: []int32{2}, reassigning: true, isDone: true},
		{name: "other partition moved", tp: Topic{Assignments: [][]int32{{1}, {2}}, Leaders: isr(1),
			Moves: map[int32]PartitionMove{1: {Initial: []int32{1}, Adding: []int32{2}, Removing: []int32{1}}}},
			initial: []int32{1}, target: []int32{1}},
		{name: "leaders shorter than partitions", tp: Topic{Assignments: [][]int32{{1}, {2, 1}},
			Moves: map[int32]PartitionMove{1: {Initial: []int32{1}, Adding: []int32{2}, Removing: []int32{1}}}},
			p: 1, initial: []int32{1}, target: []int32{2}, adding: []int32{2}, removing: []int32{1}, reassigning: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tp.InitialReplicas(tc.p); !slices.Equal(got, tc.initial) {
				t.Errorf("InitialReplicas = %v, want %v", got, tc.initial)
			}
			if got := tc.tp.TargetReplicas(tc.p); !slices.Equal(got, tc.target) {
				t.Errorf("TargetReplicas = %v, want %v", got, tc.target)
			}
			a, r, ok := tc.tp.Reassigning(tc.p)
			if !slices.Equal(a, tc.adding) || !slices.Equal(r, tc.removing) || ok != tc.reassigning {
				t.Errorf("Reassigning = %v, %v, %v; want %v, %v, %v", a, r, ok, tc.adding, tc.removing, tc.reassigning)
			}
			if got := tc.tp.ReassignmentDone(tc.p); got != tc.isDone {
				t.Errorf("ReassignmentDone = %v", got)
			}
		})
	}
	// The results are copies.
	tp := Topic{Assignments: [][]int32{{3, 2, 1}}, Moves: map[int32]PartitionMove{0: {Initial: []int32{1, 2}, Adding: []int32{3}, Removing: []int32{1}}}}
	tp.InitialReplicas(0)[0] = 9
	a, r, _ := tp.Reassigning(0)
	a[0], r[0] = 9, 9
	tp.TargetReplicas(0)[0] = 9
	if want := (PartitionMove{Initial: []int32{1, 2}, Adding: []int32{3}, Removing: []int32{1}}); !reflect.DeepEqual(tp.Moves[0], want) || tp.Assignments[0][0] != 3 {
		t.Fatalf("a helper's result aliases the topic: %+v %v", tp.Moves[0], tp.Assignments)
	}
}

// planState is a state with brokers 1 to 5 (5 decommissioning), topic t
// (partitions [1 2 3] and [2 3 1]) and single (no assignments).
func planState(t *testing.T) (*state, [16]byte, [16]byte) {
	t.Helper()
	st := newState()
	tid, sid := [16]byte{0: 1, 15: 9}, [16]byte{0: 2, 15: 9}
	var recs []Record
	for id := int32(1); id <= 5; id++ {
		recs = append(recs, BrokerRegistered{NodeID: id})
	}
	recs = append(recs, BrokerDecommissioning{NodeID: 5, Decommissioning: true},
		TopicRecord{Name: "t", ID: tid, Partitions: 2, ReplicationFactor: 3, Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}}},
		TopicRecord{Name: "single", ID: sid, Partitions: 1, ReplicationFactor: 1})
	mustApply(t, st, recs...)
	return st, tid, sid
}

func mustApply(t *testing.T, st *state, recs ...Record) {
	t.Helper()
	for _, r := range recs {
		d, err := st.plan(r)
		if err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		st.apply(d)
	}
}

func TestPlanPartitionReassigned(t *testing.T) {
	type pr = PartitionReassigned
	l := func(v ...int32) []int32 { return v }
	st, tid, sid := planState(t)
	for _, tc := range []struct {
		name string
		pre  []Record // applied first
		rec  pr
		err  error
		msg  string // in the error
		// the partition's replicas and move afterwards
		replicas []int32
		move     PartitionMove
	}{
		{name: "move", rec: pr{Partition: 0, Replicas: l(4, 2, 3, 1), Adding: l(4), Removing: l(1)},
			replicas: l(4, 2, 3, 1), move: PartitionMove{Initial: l(1, 2, 3), Adding: l(4), Removing: l(1)}},
		{name: "reorder", rec: pr{Partition: 1, Replicas: l(1, 2, 3)},
			replicas: l(1, 2, 3), move: PartitionMove{Initial: l(2, 3, 1)}},
		{name: "empty lists are nil", rec: pr{Partition: 1, Replicas: l(1, 2, 3), Adding: []int32{}, Removing: []int32{}},
			replicas: l(1, 2, 3), move: PartitionMove{Initial: l(2, 3, 1)}},
		{name: "grow", rec: pr{Partition: 0, Replicas: l(1, 2, 3, 4), Adding: l(4)},
			replicas: l(1, 2, 3, 4), move: PartitionMove{Initial: l(1, 2, 3), Adding: l(4)}},
		{name: "shrink", rec: pr{Partition: 0, Replicas: l(1, 2, 3), Removing: l(3)},
			replicas: l(1, 2, 3), move: PartitionMove{Initial: l(1, 2, 3), Removing: l(3)}},
		{name: "initial kept", pre: []Record{pr{TopicID: tid, Partition: 0, Replicas: l(4, 2, 3, 1), Adding: l(4), Removing: l(1)},
			pr{TopicID: tid, Partition: 0, Replicas: l(4, 2, 3)}},
			rec: pr{Partition: 0, Replicas: l(3, 4, 2)}, replicas: l(3, 4, 2), move: PartitionMove{Initial: l(1, 2, 3)}},
		{name: "a current replica may be decommissioning or unregistered",
			pre: []Record{BrokerDecommissioning{NodeID: 5}, BrokerRegistered{NodeID: 6},
				pr{TopicID: tid, Partition: 0, Replicas: l(5, 6, 1)},
				BrokerDecommissioning{NodeID: 5, Decommissioning: true}, BrokerUnregistered{NodeID: 6}},
			rec: pr{Partition: 0, Replicas: l(2, 5, 6, 1), Adding: l(2), Removing: l(1)}, replicas: l(2, 5, 6, 1),
			move: PartitionMove{Initial: l(1, 2, 3), Adding: l(2), Removing: l(1)}},

		{name: "unknown topic", rec: pr{TopicID: [16]byte{7}, Replicas: l(1)}, err: ErrUnknownTopicID},
		{name: "partition 2", rec: pr{Partition: 2, Replicas: l(1)}, err: ErrUnknownPartition},
		{name: "partition -1", rec: pr{Partition: -1, Replicas: l(1)}, err: ErrUnknownPartition},
		{name: "single-node", rec: pr{TopicID: sid, Replicas: l(1)}, err: ErrInvalidReplicaAssignment, msg: "single-node"},
		{name: "no replicas", rec: pr{Partition: 0}, err: ErrInvalidReplicaAssignment, msg: "empty replica list"},
		{name: "duplicate", rec: pr{Partition: 0, Replicas: l(1, 2, 1)}, err: ErrInvalidReplicaAssignment, msg: "broker 1 more than once"},
		{name: "unregistered new", rec: pr{Partition: 0, Replicas: l(9, 1), Adding: l(9)}, err: ErrInvalidReplicaAssignment,
			msg: "includes broker 9, but no such broker is registered"},
		{name: "decommissioning new", rec: pr{Partition: 0, Replicas: l(5, 1), Adding: l(5)}, err: ErrInvalidReplicaAssignment,
			msg: "includes broker 5, but it is being decommissioned"},
		{name: "adding not a replica", rec: pr{Partition: 0, Replicas: l(1, 2), Adding: l(4)}, err: ErrInvalidReplicaAssignment, msg: "adding replica 4"},
		{name: "removing not a replica", rec: pr{Partition: 0, Replicas: l(1, 2), Removing: l(3)}, err: ErrInvalidReplicaAssignment, msg: "removing replica 3"},
		{name: "adding twice", rec: pr{Partition: 0, Replicas: l(1, 4), Adding: l(4, 4)}, err: ErrInvalidReplicaAssignment, msg: "twice"},
		{name: "added and removed", rec: pr{Partition: 0, Replicas: l(1, 4), Adding: l(4), Removing: l(4)}, err: ErrInvalidReplicaAssignment, msg: "both"},
		{name: "all removed", rec: pr{Partition: 0, Replicas: l(1, 2), Removing: l(1, 2)}, err: ErrInvalidReplicaAssignment, msg: "being removed"},
		{name: "all added", rec: pr{Partition: 0, Replicas: l(4), Adding: l(4)}, err: ErrInvalidReplicaAssignment, msg: "being added"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := st.clone()
			mustApply(t, work, tc.pre...)
			before := work.topics[tid]
			beforeDesc := describeState(work)
			beforeTopic := fmt.Sprint(before.Assignments, formatMoves(before.Moves))
			if tc.rec.TopicID == ([16]byte{}) {
				tc.rec.TopicID = tid
			}
			d, err := work.plan(tc.rec)
			if describeState(work) != beforeDesc {
				t.Fatal("plan changed the state")
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("got %v, want %v with %q", err, tc.err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			work.apply(d)
			after := work.topics[tid]
			if after == before {
				t.Fatal("the topic value was modified in place")
			}
			p := tc.rec.Partition
			if after.Moves[p].Epoch != before.Moves[p].Epoch+1 {
				t.Fatalf("partition epoch %d after %d", after.Moves[p].Epoch, before.Moves[p].Epoch)
			}
			got := after.Moves[p]
			got.Epoch = 0 // checked above
			if !reflect.DeepEqual(after.Assignments[p], tc.replicas) || !reflect.DeepEqual(got, tc.move) {
				t.Fatalf("replicas %v move %+v; want %v %+v", after.Assignments[p], after.Moves[p], tc.replicas, tc.move)
			}
			if !reflect.DeepEqual(after.Assignments[1-p], before.Assignments[1-p]) {
				t.Fatalf("the other partition changed: %v", after.Assignments)
			}
			if got := fmt.Sprint(before.Assignments, formatMoves(before.Moves)); got != beforeTopic {
				t.Fatalf("the old topic value changed: %s, was %s", got, beforeTopic)
			}
			if !reflect.DeepEqual(st.topics[tid].Assignments, [][]int32{{1, 2, 3}, {2, 3, 1}}) || st.topics[tid].Moves != nil {
				t.Fatal("the shared topic value changed")
			}
		})
	}
}

// reassignStore is a local store with brokers 1 to 5 (5 decommissioning),
// topic t ([1 2 3], [2 3 1]), topic u ([1 2]) and single (no assignments).
func reassignStore(t *testing.T) (s *Store, dir string, tid, uid, sid [16]byte) {
	t.Helper()
	s, dir = openTemp(t)
	for id := int32(1); id <= 5; id++ {
		mustRegister(t, s, id, "")
	}
	if err := s.DecommissionBroker(5, true); err != nil {
		t.Fatal(err)
	}
	ts, errs, err := s.CreateTopics([]TopicSpec{
		{Name: "t", Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}}},
		{Name: "u", Assignments: [][]int32{{1, 2}}},
		{Name: "single", Partitions: 1, ReplicationFactor: 1},
	})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	return s, dir, ts[0].ID, ts[1].ID, ts[2].ID
}

func TestReassign(t *testing.T) {
	type rq = ReassignRequest
	l := func(v ...int32) []int32 { return v }
	type want struct {
		err              error
		msg              string
		replicas         []int32 // after the call
		adding, removing []int32
	}
	for _, tc := range []struct {
		name string
		pre  []rq // accepted first, in one call each
		reqs []rq // TopicID zero: t's
		want []want
	}{
		{name: "move", reqs: []rq{{Partition: 0, Target: l(3, 4, 5)[:2]}},
			want: []want{{replicas: l(3, 4, 1, 2), adding: l(4), removing: l(1, 2)}}},
		{name: "move all", reqs: []rq{{Partition: 1, Target: l(4)}},
			want: []want{{replicas: l(4, 2, 3, 1), adding: l(4), removing: l(2, 3, 1)}}},
		{name: "reorder completes at once", reqs: []rq{{Partition: 0, Target: l(3, 1, 2)}},
			want: []want{{replicas: l(3, 1, 2)}}},
		{name: "same replicas", reqs: []rq{{Partition: 0, Target: l(1, 2, 3)}},
			want: []want{{replicas: l(1, 2, 3)}}},
		{name: "grow", reqs: []rq{{Partition: 0, Target: l(1, 2, 3, 4)}},
			want: []want{{replicas: l(1, 2, 3, 4), adding: l(4)}}},
		{name: "shrink", reqs: []rq{{Partition: 0, Target: l(2)}},
			want: []want{{replicas: l(2, 1, 3), removing: l(1, 3)}}},
		{name: "cancel", pre: []rq{{Partition: 0, Target: l(4, 2, 3)}}, reqs: []rq{{Partition: 0}},
			want: []want{{replicas: l(2, 3, 1, 4), removing: l(4)}}}, // a move back: 4 leaves before it completes
		{name: "cancel a shrink", pre: []rq{{Partition: 0, Target: l(3)}}, reqs: []rq{{Partition: 0}},
			want: []want{{replicas: l(3, 1, 2)}}},
		{name: "cancel without one", reqs: []rq{{Partition: 0}}, want: []want{{err: ErrNoReassignmentInProgress, replicas: l(1, 2, 3)}}},
		{name: "cancel after a completed reorder", pre: []rq{{Partition: 0, Target: l(2, 1, 3)}}, reqs: []rq{{Partition: 0}},
			want: []want{{err: ErrNoReassignmentInProgress, replicas: l(2, 1, 3)}}},
		{name: "replace starts from the current list", pre: []rq{{Partition: 0, Target: l(4, 2, 3)}}, reqs: []rq{{Partition: 0, Target: l(1, 4)}},
			want: []want{{replicas: l(1, 4, 2, 3), adding: l(4), removing: l(2, 3)}}},
		{name: "replace drops an added replica", pre: []rq{{Partition: 0, Target: l(4, 2, 3)}}, reqs: []rq{{Partition: 0, Target: l(2, 3, 1)}},
			want: []want{{replicas: l(2, 3, 1, 4), removing: l(4)}}},
		{name: "replace with a shrink", pre: []rq{{Partition: 0, Target: l(4, 2, 3)}}, reqs: []rq{{Partition: 0, Target: l(1, 2, 3)[1:]}},
			want: []want{{replicas: l(2, 3, 4, 1), removing: l(4, 1)}}},
		{name: "two in one call see each other", reqs: []rq{{Partition: 0, Target: l(4, 2, 3)}, {Partition: 0}, {Partition: 0}},
			// The cancel is a move back (4 removing); cancelling that keeps 4.
			want: []want{{}, {}, {replicas: l(2, 3, 1, 4)}}},
		{name: "both partitions", reqs: []rq{{Partition: 1, Target: l(4, 3)}, {Partition: 0, Target: l(4, 2, 3)}},
			want: []want{{replicas: l(4, 3, 2, 1), adding: l(4), removing: l(2, 1)}, {replicas: l(4, 2, 3, 1), adding: l(4), removing: l(1)}}},

		{name: "refusals", reqs: []rq{
			{TopicID: [16]byte{7}, Target: l(1)},
			{Partition: 2, Target: l(1)},
			{Partition: -1},
			{Partition: 0, Target: []int32{}},
			{Partition: 0, Target: l(1, 4, 1)},
			{Partition: 0, Target: l(1, 9)},
			{Partition: 0, Target: l(5, 1)},
			{Partition: 0, Target: l(3, 2, 5)}, // a target broker decommissioning
			{Partition: 0, Target: l(4)},       // accepted between refusals
		}, want: []want{
			{err: ErrUnknownTopicID}, {err: ErrUnknownPartition}, {err: ErrUnknownPartition},
			{err: ErrInvalidReplicaAssignment, msg: "The manual partition assignment includes an empty replica list."},
			{err: ErrInvalidReplicaAssignment, msg: "includes the broker 1 more than once"},
			{err: ErrInvalidReplicaAssignment, msg: "The manual partition assignment includes broker 9, but no such broker is registered."},
			{err: ErrInvalidReplicaAssignment, msg: "includes broker 5, but it is being decommissioned"},
			{err: ErrInvalidReplicaAssignment, msg: "broker 5"},
			{replicas: l(4, 1, 2, 3), adding: l(4), removing: l(1, 2, 3)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, tid, _, _ := reassignStore(t)
			for _, r := range tc.pre {
				r.TopicID = tid
				if errs, err := s.Reassign([]rq{r}); err != nil || errs[0] != nil {
					t.Fatal(err, errs)
				}
			}
			reqs := slices.Clone(tc.reqs)
			for i := range reqs {
				if reqs[i].TopicID == ([16]byte{}) {
					reqs[i].TopicID = tid
				}
			}
			off := s.Offset()
			errs, err := s.Reassign(reqs)
			if err != nil {
				t.Fatal(err)
			}
			accepted := 0
			for i, w := range tc.want {
				if w.err == nil && errs[i] != nil || w.err != nil && (!errors.Is(errs[i], w.err) || !strings.Contains(errs[i].Error(), w.msg)) {
					t.Fatalf("request %d: %v; want %v %q", i, errs[i], w.err, w.msg)
				}
				if errs[i] == nil {
					accepted++
				}
			}
			if s.Offset() != off+uint64(accepted) {
				t.Fatalf("%d records for %d accepted requests", s.Offset()-off, accepted)
			}
			// The state after the last request for each partition.
			tp, _ := s.TopicByID(tid)
			seen := map[int32]bool{}
			for i := len(reqs) - 1; i >= 0; i-- {
				w, p := tc.want[i], reqs[i].Partition
				if reqs[i].TopicID != tid || p < 0 || p > 1 || seen[p] || w.replicas == nil {
					continue
				}
				seen[p] = true
				a, r, ok := tp.Reassigning(p)
				if !reflect.DeepEqual(tp.Assignments[p], w.replicas) || !reflect.DeepEqual(a, w.adding) || !reflect.DeepEqual(r, w.removing) || ok != (w.adding != nil || w.removing != nil) {
					t.Fatalf("partition %d: replicas %v adding %v removing %v; want %v %v %v", p, tp.Assignments[p], a, r, w.replicas, w.adding, w.removing)
				}
			}
			initial := [][]int32{{1, 2, 3}, {2, 3, 1}}
			for p := range int32(2) {
				if got := tp.InitialReplicas(p); !slices.Equal(got, initial[p]) {
					t.Fatalf("partition %d: initial %v", p, got)
				}
			}
			checkConsistent(t, s)
		})
	}
	t.Run("single-node", func(t *testing.T) {
		s, _, _, _, sid := reassignStore(t)
		errs, err := s.Reassign([]rq{{TopicID: sid, Target: l(1)}, {TopicID: sid}})
		for _, e := range errs {
			if !errors.Is(e, ErrInvalidReplicaAssignment) || !strings.Contains(e.Error(), "single-node") {
				t.Fatal(errs, err)
			}
		}
	})
	t.Run("none", func(t *testing.T) {
		s, _, _, _, _ := reassignStore(t)
		commits := s.Commits()
		if errs, err := s.Reassign(nil); err != nil || len(errs) != 0 || s.Commits() != commits {
			t.Fatal(errs, err)
		}
	})
}

func TestCompleteReassignment(t *testing.T) {
	s, dir, tid, uid, _ := reassignStore(t)
	report := func(p int32, epoch int32, isr ...int32) {
		t.Helper()
		errs, err := s.ChangePartitions([]PartitionChanged{{TopicID: tid, Partition: p, Leader: isr[0], LeaderEpoch: epoch, ISR: isr}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
	complete := func(id [16]byte, p int32, want bool, wantErr error) {
		t.Helper()
		off, commits := s.Offset(), s.Commits()
		done, err := s.CompleteReassignment(id, p)
		if done != want || !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Fatalf("CompleteReassignment(%d) = %v, %v; want %v, %v", p, done, err, want, wantErr)
		}
		if !done && (s.Offset() != off || s.Commits() != commits) {
			t.Fatal("a CompleteReassignment that did nothing wrote")
		}
	}
	complete(tid, 0, false, nil) // none in progress
	complete([16]byte{7}, 0, false, ErrUnknownTopicID)
	complete(tid, 2, false, ErrUnknownPartition)
	complete(tid, -1, false, ErrUnknownPartition)

	if errs, err := s.Reassign([]ReassignRequest{{TopicID: tid, Partition: 0, Target: []int32{3, 4}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	complete(tid, 0, false, nil) // never reported
	report(0, 0, 1, 2, 3)
	complete(tid, 0, false, nil) // 4 not in sync
	report(0, 0, 1, 2, 3, 4)
	complete(tid, 0, false, nil) // 1 and 2 still in sync
	report(0, 1, 3, 4, 2)
	complete(tid, 0, false, nil) // 2 still in sync
	report(0, 2, 4, 3)
	complete(tid, 0, true, nil)
	tp, _ := s.TopicByID(tid)
	if !reflect.DeepEqual(tp.Assignments[0], []int32{3, 4}) || !reflect.DeepEqual(tp.Moves[0], PartitionMove{Initial: []int32{1, 2, 3}, Epoch: 2}) {
		t.Fatalf("completed: %v %+v", tp.Assignments[0], tp.Moves[0])
	}
	if !reflect.DeepEqual(tp.Leaders[0], PartitionLeader{Leader: 4, LeaderEpoch: 2, ISR: []int32{4, 3}}) {
		t.Fatalf("leader %+v", tp.Leaders[0])
	}
	complete(tid, 0, false, nil) // done already
	if got := s.Reassignments(); got != nil {
		t.Fatalf("Reassignments after completing: %+v", got)
	}
	// A grow completes once the new replica is in sync.
	if errs, err := s.Reassign([]ReassignRequest{{TopicID: uid, Target: []int32{1, 2, 4}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if errs, err := s.ChangePartitions([]PartitionChanged{{TopicID: uid, Leader: 1, LeaderEpoch: 0, ISR: []int32{4, 1, 2}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	complete(uid, 0, true, nil)
	if tp, _ := s.TopicByID(uid); !slices.Equal(tp.Assignments[0], []int32{1, 2, 4}) {
		t.Fatalf("grown: %v", tp.Assignments[0])
	}
	checkConsistent(t, s)
	want := memState(s)
	s = reopen(t, s, dir)
	if got := memState(s); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	rebuildUnchanged(t, s)
}

func TestReassignmentsListAndLifecycle(t *testing.T) {
	s, dir, tid, uid, _ := reassignStore(t)
	if got := s.Reassignments(); got != nil {
		t.Fatalf("none yet: %+v", got)
	}
	errs, err := s.Reassign([]ReassignRequest{
		{TopicID: uid, Target: []int32{2, 3}},
		{TopicID: tid, Partition: 1, Target: []int32{4, 3, 1}},
		{TopicID: tid, Partition: 0, Target: []int32{3, 2, 1}}, // completes at once: not listed
	})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	if err := s.AddPartitionsAssigned("t", 3, [][]int32{{3, 1, 2}}); err != nil {
		t.Fatal(err)
	}
	if errs, err := s.Reassign([]ReassignRequest{{TopicID: tid, Partition: 2, Target: []int32{4, 1, 2}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	want := []Reassignment{
		{Topic: "t", TopicID: tid, Partition: 1, Replicas: []int32{4, 3, 1, 2}, Adding: []int32{4}, Removing: []int32{2}},
		{Topic: "t", TopicID: tid, Partition: 2, Replicas: []int32{4, 1, 2, 3}, Adding: []int32{4}, Removing: []int32{3}},
		{Topic: "u", TopicID: uid, Partition: 0, Replicas: []int32{2, 3, 1}, Adding: []int32{3}, Removing: []int32{1}},
	}
	got := s.Reassignments()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Reassignments:\n got %+v\nwant %+v", got, want)
	}
	got[0].Replicas[0] = 99 // copies
	if s.Reassignments()[0].Replicas[0] != 4 {
		t.Fatal("Reassignments aliases the state")
	}
	// Other changes keep the moves; results are deep copies.
	if err := s.AlterTopicConfigs("t", map[string]string{"k": "v"}, nil); err != nil {
		t.Fatal(err)
	}
	tp, _ := s.Topic("t")
	if len(tp.Moves) != 3 || !slices.Equal(tp.Moves[0].Initial, []int32{1, 2, 3}) || !slices.Equal(tp.Moves[2].Initial, []int32{3, 1, 2}) {
		t.Fatalf("moves %+v", tp.Moves)
	}
	tp.Moves[1].Adding[0] = 99
	delete(tp.Moves, 0)
	if tp2, _ := s.Topic("t"); len(tp2.Moves) != 3 || tp2.Moves[1].Adding[0] != 4 {
		t.Fatal("Topic's Moves alias the state")
	}
	checkConsistent(t, s)
	before := memState(s)
	if !strings.Contains(dumpState(t, s), keyTopicMove) {
		t.Fatal("no move keys stored")
	}
	s = reopen(t, s, dir)
	if got := memState(s); got != before {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, before)
	}
	rebuildUnchanged(t, s)
	// Removing a topic removes its move keys; recreated, it has none.
	if _, err := s.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteTopic("u"); err != nil {
		t.Fatal(err)
	}
	if d := dumpState(t, s); strings.Contains(d, keyTopicMove) {
		t.Fatalf("move keys left:\n%s", d)
	}
	ts, _, _ := s.CreateTopics([]TopicSpec{{Name: "t", Assignments: [][]int32{{1}}}})
	if ts[0].Moves != nil || s.Reassignments() != nil {
		t.Fatalf("recreated %+v", ts[0])
	}
	rebuildUnchanged(t, s)
}

// TestOpenRefusesDamagedMoves: a move key that names no partition with
// replicas, or disagrees with them, is ErrCorrupt at Open.
func TestOpenRefusesDamagedMoves(t *testing.T) {
	for name, damage := range map[string]func(s *Store, tid, sid [16]byte){
		"unknown topic": func(s *Store, _, _ [16]byte) {
			rawSet(t, s, topicMoveKey([16]byte{7}, 0), encodeMove(PartitionMove{Initial: []int32{1}}))
		},
		"partition out of range": func(s *Store, tid, _ [16]byte) {
			rawSet(t, s, topicMoveKey(tid, 2), encodeMove(PartitionMove{Initial: []int32{1}}))
		},
		"single-node topic": func(s *Store, _, sid [16]byte) {
			rawSet(t, s, topicMoveKey(sid, 0), encodeMove(PartitionMove{Initial: []int32{1}}))
		},
		"no initial": func(s *Store, tid, _ [16]byte) { rawSet(t, s, topicMoveKey(tid, 0), encodeMove(PartitionMove{})) },
		"adding not a replica": func(s *Store, tid, _ [16]byte) {
			rawSet(t, s, topicMoveKey(tid, 0), encodeMove(PartitionMove{Initial: []int32{1}, Adding: []int32{4}}))
		},
		"bad version": func(s *Store, tid, _ [16]byte) { rawSet(t, s, topicMoveKey(tid, 0), []byte{2, 1, 0, 0, 0, 1, 0, 0}) },
		"trailing":    func(s *Store, tid, _ [16]byte) { rawSet(t, s, topicMoveKey(tid, 0), []byte{1, 1, 0, 0, 0, 1, 0, 0, 0}) },
		"short key":   func(s *Store, _, _ [16]byte) { rawSet(t, s, []byte(keyTopicMove+"x"), []byte{1, 1, 0, 0, 0, 1, 0, 0}) },
	} {
		t.Run(name, func(t *testing.T) {
			s, dir, tid, _, sid := reassignStore(t)
			damage(s, tid, sid)
			opts := s.opts
			s.Close()
			if s2, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
				if s2 != nil {
					s2.Close()
				}
				t.Fatalf("Open: %v", err)
			}
		})
	}
}
