package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/meta"
)

func reassign(id [16]byte, p int32, target ...int32) []meta.ReassignRequest {
	return []meta.ReassignRequest{{TopicID: id, Partition: p, Target: target}}
}

func changed(id [16]byte, p, leader int32, isr ...int32) []meta.PartitionChanged {
	return []meta.PartitionChanged{{TopicID: id, Partition: p, Leader: leader, LeaderEpoch: 1, ISR: isr}}
}

// Unregistering a broker that holds replicas decommissions it: its
// replicas move to the least loaded usable broker, then it is fenced, and
// unregistered once its session expired.
func TestDecommissionDrainsThenUnregisters(t *testing.T) {
	e := newEnv(t, Config{})
	for id := int32(1); id <= 5; id++ {
		e.register(id)
	}
	e.topic("t", []int32{1, 2, 3}, []int32{2, 3, 1})
	e.topic("u", []int32{4})
	e.host.down = []int32{5} // unreachable: not a target
	msg, err := e.ctl.Unregister(3)
	if err != nil || msg == "" {
		t.Fatal(msg, err)
	}
	if br, _ := e.st.Broker(3); !br.Decommissioning {
		t.Fatal("broker 3 not decommissioning")
	}
	e.clock.advance(drainEvery)
	e.check()
	for _, r := range e.st.Reassignments() {
		tp, _ := e.st.TopicByID(r.TopicID)
		if target := tp.TargetReplicas(r.Partition); slices.Contains(target, 3) || !slices.Contains(target, 4) {
			t.Fatalf("drain's target for %s-%d: %v, want 3 replaced by 4 (the only usable broker without a replica)", r.Topic, r.Partition, target)
		}
	}
	if n := len(e.st.Reassignments()); n != 2 {
		t.Fatalf("%d reassignments, want 2", n)
	}
	e.report("t", 0, 1, 1, 2, 4)
	e.report("t", 1, 2, 2, 4, 1)
	e.clock.advance(drainEvery)
	e.check() // completes both moves; broker 3 holds none: fenced
	if got := e.fenced(3); got != "fenced" {
		t.Fatalf("drained broker: %s, want fenced", got)
	}
	if r := e.beat(3); !r.Fenced {
		t.Fatal("a heartbeat unfenced a decommissioned broker")
	}
	e.clock.advance(drainEvery)
	e.check()
	if got := e.fenced(3); got != "fenced" {
		t.Fatalf("still running: %s, want fenced", got)
	}
	e.clock.advance(testSession + drainEvery)
	for _, id := range []int32{1, 2, 4, 5} {
		e.beat(id)
	}
	e.check()
	if got := e.fenced(3); got != "gone" {
		t.Fatalf("stopped: %s, want unregistered", got)
	}
}

// Unregistering a broker without replicas: at once when it stopped;
// fenced, then unregistered once it stops, when it runs.
func TestUnregisterEmptyBroker(t *testing.T) {
	e := newEnv(t, Config{})
	e.register(1)
	e.register(2)
	e.register(3)
	if _, err := e.ctl.Unregister(9); !errors.Is(err, ErrBrokerNotRegistered) {
		t.Fatalf("unknown broker: %v", err)
	}
	if _, err := e.ctl.Unregister(2); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(drainEvery)
	e.check()
	if got := e.fenced(2); got != "fenced" {
		t.Fatalf("running broker: %s, want fenced", got)
	}
	e.clock.advance(testSession + drainEvery)
	e.beat(1)
	e.check() // broker 3's session expired: fenced
	if got := e.fenced(2) + " " + e.fenced(3); got != "gone fenced" {
		t.Fatalf("after sessions expired: %s, want gone fenced", got)
	}
	if _, err := e.ctl.Unregister(3); err != nil || e.fenced(3) != "gone" {
		t.Fatalf("a stopped broker holding nothing: %v %s", err, e.fenced(3))
	}
}

// A decommission's move whose new replica's broker went away is retargeted.
func TestDecommissionReplacesGoneTarget(t *testing.T) {
	e := newEnv(t, Config{})
	for id := int32(1); id <= 5; id++ {
		e.register(id)
	}
	e.topic("t", []int32{1, 2, 3})
	e.topic("u", []int32{5}, []int32{5})
	if _, err := e.ctl.Unregister(3); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(drainEvery)
	e.check()
	tp, _ := e.st.Topic("t")
	if got := tp.TargetReplicas(0); !slices.Equal(got, []int32{1, 2, 4}) {
		t.Fatalf("first target %v", got)
	}
	if err := e.st.FenceBroker(4, e.epoch[4], true); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(drainEvery)
	e.check()
	tp, _ = e.st.Topic("t")
	if got := tp.TargetReplicas(0); !slices.Equal(got, []int32{1, 2, 5}) {
		t.Fatalf("after its new broker was fenced: %v, want 4 replaced by 5", got)
	}
}
