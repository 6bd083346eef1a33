package meta

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func listeners(port int32) []Endpoint {
	return []Endpoint{{Name: "PLAINTEXT", Host: "broker.example", Port: port}}
}

func mustRegister(t *testing.T, s *Store, id int32, rack string) int64 {
	t.Helper()
	epoch, err := s.RegisterBroker(BrokerRegistered{NodeID: id, IncarnationID: [16]byte{0: byte(id), 1: 1}, Rack: rack, Listeners: listeners(9092 + id)})
	if err != nil {
		t.Fatalf("RegisterBroker %d: %v", id, err)
	}
	return epoch
}

func TestBrokerRegistrationAndFencing(t *testing.T) {
	s, dir := openTemp(t)
	if _, err := s.CreateTopic("pad", 1, 1, nil); err != nil { // offset 0
		t.Fatal(err)
	}
	e1 := mustRegister(t, s, 1, "a")
	if e1 != 1 {
		t.Fatalf("epoch %d, want the local log offset 1", e1)
	}
	b, ok := s.Broker(1)
	if !ok || !b.Fenced || b.Epoch != 1 || b.Rack != "a" || !reflect.DeepEqual(b.Listeners, listeners(9093)) {
		t.Fatalf("Broker(1) = %+v, %v", b, ok)
	}
	// The logged record carries the stamped epoch, whatever the caller set.
	if recs, _ := s.Records(1); recs[0].(BrokerRegistered).Epoch != 1 {
		t.Fatalf("logged %v", recs[0])
	}
	if _, err := s.Append(BrokerRegistered{NodeID: 2, Epoch: 77}); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Broker(2); b.Epoch != 2 {
		t.Fatalf("Append stamped %d, want 2", b.Epoch)
	}

	if err := s.FenceBroker(1, e1, false); err != nil {
		t.Fatalf("unfence: %v", err)
	}
	if b, _ := s.Broker(1); b.Fenced {
		t.Fatal("still fenced")
	}
	// A new registration replaces the old one, fenced, with a new epoch;
	// a fence of the old incarnation no longer applies.
	e2 := mustRegister(t, s, 1, "b")
	if e2 <= e1 {
		t.Fatalf("epoch %d after %d", e2, e1)
	}
	if b, _ := s.Broker(1); !b.Fenced || b.Epoch != e2 || b.Rack != "b" {
		t.Fatalf("re-registered %+v", b)
	}
	if err := s.FenceBroker(1, e1, false); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale unfence: %v", err)
	}
	if err := s.FenceBroker(9, 0, true); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("unknown broker: %v", err)
	}
	for _, r := range []BrokerRegistered{
		{NodeID: -1},
		{NodeID: 3, Listeners: []Endpoint{{Name: "", Port: 1}}},
		{NodeID: 3, Listeners: []Endpoint{{Name: "A", Port: 1}, {Name: "A", Port: 2}}},
		{NodeID: 3, Listeners: []Endpoint{{Name: "A", Port: 70000}}},
	} {
		if _, err := s.RegisterBroker(r); !errors.Is(err, ErrInvalidBroker) {
			t.Fatalf("%v: %v", r, err)
		}
	}
	if got := s.Brokers(); len(got) != 2 || got[0].NodeID != 1 || got[1].NodeID != 2 {
		t.Fatalf("Brokers() = %+v", got)
	}
	checkConsistent(t, s)
	want := memState(s)
	s = reopen(t, s, dir)
	if got := memState(s); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	rebuildUnchanged(t, s)
}

func rebuildUnchanged(t *testing.T, s *Store) {
	t.Helper()
	before := dumpState(t, s)
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if after := dumpState(t, s); after != before {
		t.Fatalf("Rebuild changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkConsistent(t, s)
}

func TestAssignmentsAndLeaders(t *testing.T) {
	s, dir := openTemp(t)
	for id := int32(1); id <= 3; id++ {
		mustRegister(t, s, id, "")
	}
	a := [][]int32{{1, 2}, {2, 3}, {3, 1}}
	ts, errs, err := s.CreateTopics([]TopicSpec{
		{Name: "t", Partitions: -1, ReplicationFactor: -1, Assignments: a},
		{Name: "bad", Assignments: [][]int32{{1, 4}}},
		{Name: "bad2", Partitions: 2, ReplicationFactor: 2, Assignments: [][]int32{{1, 2}}},
		{Name: "bad3", Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{1, 2}}},
	})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	for i := 1; i < 4; i++ {
		if !errors.Is(errs[i], ErrInvalidReplicaAssignment) {
			t.Fatalf("spec %d: %v", i, errs[i])
		}
	}
	if !strings.Contains(errs[1].Error(), "includes broker 4, but no such broker is registered") {
		t.Fatalf("message: %v", errs[1])
	}
	tp := ts[0]
	if tp.Partitions != 3 || tp.ReplicationFactor != 2 || !reflect.DeepEqual(tp.Assignments, a) {
		t.Fatalf("created %+v", tp)
	}
	for _, pl := range tp.Leaders {
		if pl.Leader != -1 || pl.LeaderEpoch != -1 || pl.ISR != nil {
			t.Fatalf("unreported leader %+v", pl)
		}
	}
	tp.Assignments[0][0] = 99 // results are copies
	if got, _ := s.Topic("t"); got.Assignments[0][0] != 1 {
		t.Fatal("a result aliases the state")
	}

	// Partition changes: per-record errors, leader epochs never go back.
	errs, err = s.ChangePartitions([]PartitionChanged{
		{TopicID: tp.ID, Partition: 0, Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}},
		{TopicID: tp.ID, Partition: 1, Leader: 2, LeaderEpoch: 3, ISR: []int32{2}},
		{TopicID: tp.ID, Partition: 1, Leader: 3, LeaderEpoch: 2, ISR: []int32{3}},
		{TopicID: tp.ID, Partition: 3, Leader: 1, LeaderEpoch: 0},
		{TopicID: [16]byte{1}, Partition: 0, Leader: 1, LeaderEpoch: 0},
		{TopicID: tp.ID, Partition: 2, Leader: 3, LeaderEpoch: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, nil, ErrFencedLeaderEpoch, ErrUnknownPartition, ErrUnknownTopicID, ErrInvalidRecord} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Fatalf("change %d: %v, want %v", i, errs[i], want)
		}
	}
	// Same epoch (an ISR change) applies.
	if errs, _ := s.ChangePartitions([]PartitionChanged{{TopicID: tp.ID, Partition: 1, Leader: 2, LeaderEpoch: 3, ISR: []int32{2, 3}}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got, _ := s.Topic("t")
	want := []PartitionLeader{{1, 0, []int32{1, 2}}, {2, 3, []int32{2, 3}}, noLeader}
	if !reflect.DeepEqual(got.Leaders, want) {
		t.Fatalf("leaders %+v, want %+v", got.Leaders, want)
	}

	// Adding partitions: the topic has assignments, so the new ones need
	// them, one list per new partition, of the topic's replication factor.
	for _, tc := range []struct {
		a    [][]int32
		want string
	}{
		{nil, "need them too"},
		{[][]int32{{1, 2}}, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."},
		{[][]int32{{1, 2}, {1, 1}}, "includes the broker 1 more than once"},
		{[][]int32{{1, 2}, {1, 2, 3}}, "not consistent with previous partitions"},
		{[][]int32{{1}, {2}}, "but the replication factor is 2"},
		{[][]int32{{1, 2}, {}}, "an empty replica list"},
	} {
		err := s.AddPartitionsAssigned("t", 5, tc.a)
		if !errors.Is(err, ErrInvalidReplicaAssignment) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v: %v, want %q", tc.a, err, tc.want)
		}
	}
	if err := s.AddPartitionsAssigned("t", 5, [][]int32{{1, 3}, {2, 1}}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Topic("t")
	if len(got.Leaders) != 5 || !reflect.DeepEqual(got.Leaders[4], noLeader) || !reflect.DeepEqual(got.Assignments[3:], [][]int32{{1, 3}, {2, 1}}) {
		t.Fatalf("after adding: %+v", got)
	}
	if !reflect.DeepEqual(got.Leaders[3], noLeader) || !reflect.DeepEqual(got.Leaders[1], want[1]) {
		t.Fatalf("leaders after adding %+v", got.Leaders)
	}
	// A topic without assignments takes none.
	if _, err := s.CreateTopic("single", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPartitionsAssigned("single", 2, [][]int32{{1}}); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatal(err)
	}
	if err := s.AddPartitions("single", 2); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
	before := memState(s)
	s = reopen(t, s, dir)
	if after := memState(s); after != before {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", after, before)
	}
	rebuildUnchanged(t, s)

	// Removing the topic removes its leader keys.
	if _, err := s.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if d := dumpState(t, s); strings.Contains(d, keyTopicLeader) {
		t.Fatalf("leader keys left:\n%s", d)
	}
	// Recreated, it starts without leaders.
	ts, _, _ = s.CreateTopics([]TopicSpec{{Name: "t", Assignments: [][]int32{{1}}}})
	if !reflect.DeepEqual(ts[0].Leaders, []PartitionLeader{noLeader}) {
		t.Fatalf("recreated %+v", ts[0])
	}
	rebuildUnchanged(t, s)
}

// TestVersion1DataDirectory opens a database written before records had
// version 2 (version 1 log records and topic state values).
func TestVersion1DataDirectory(t *testing.T) {
	s, dir := openTemp(t)
	id := [16]byte{0: 0xaa, 6: 0x40, 8: 0x80, 15: 7}
	v1Topic := []byte{1, 1}
	v1Topic = append(v1Topic, id[:]...)
	v1Topic = append(v1Topic, 0, 0, 0, 2, 0, 1, 2, 'a', 'b', 0)
	v1Added := append([]byte{1, 2}, id[:]...)
	v1Added = append(v1Added, 0, 0, 0, 3)
	b := s.db.NewBatch()
	b.Set(logKey(0), v1Topic, nil)
	b.Set(logKey(1), v1Added, nil)
	v1State := append(append([]byte{1, 1}, id[:]...), 0, 0, 0, 3, 0, 1, 2, 'a', 'b', 0)
	b.Set(topicIDKey(id), v1State, nil)
	b.Set(topicNameKey("ab"), id[:], nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	tp, ok := s.Topic("ab")
	if !ok || tp.Partitions != 3 || tp.Assignments != nil || len(tp.Leaders) != 3 {
		t.Fatalf("v1 topic %+v %v", tp, ok)
	}
	checkConsistent(t, s)
	if err := s.AddPartitions("ab", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
}
