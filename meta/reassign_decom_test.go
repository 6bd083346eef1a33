package meta

import (
	"errors"
	"testing"
)

// Two decommissioning brokers in one partition (a review finding): drain asks for
// the partition's list with one leaving broker replaced, which still names
// the other one: Reassign refuses it (validateReplicas(target, nil)), so
// neither decommission ever moves this partition.
func TestReassignTwoDecommissioningInOnePartition(t *testing.T) {
	s, _ := openTemp(t)
	for id := int32(1); id <= 5; id++ {
		mustRegister(t, s, id, "")
	}
	ts, errs, err := s.CreateTopics([]TopicSpec{{Name: "t", Assignments: [][]int32{{1, 2, 3}}}})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	for _, id := range []int32{2, 3} {
		if err := s.DecommissionBroker(id, true); err != nil {
			t.Fatal(err)
		}
	}
	// What the controller's drain proposes for broker 2, then for broker 3.
	errs, err = s.Reassign([]ReassignRequest{
		{TopicID: ts[0].ID, Partition: 0, Target: []int32{1, 4, 3}},
		{TopicID: ts[0].ID, Partition: 0, Target: []int32{1, 2, 5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("BUG: drain's request %d refused: %v", i, e)
		}
	}
	// A plain reorder of a partition holding a decommissioning broker.
	errs, _ = s.Reassign([]ReassignRequest{{TopicID: ts[0].ID, Partition: 0, Target: []int32{3, 2, 1}}})
	t.Logf("reorder keeping decommissioning replicas: %v", errs[0])
}
