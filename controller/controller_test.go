package controller

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A broker silent for longer than broker.session.timeout.ms is fenced at
// the next check; its next heartbeat, caught up, unfences it.
func TestSessionExpiryFences(t *testing.T) {
	e := newEnv(t, Config{})
	e.register(1)
	e.register(2)
	if got := e.fenced(1) + " " + e.fenced(2); got != "unfenced unfenced" {
		t.Fatalf("after registration and a caught-up heartbeat: %s", got)
	}
	e.check() // the term's duties start: fresh sessions
	e.clock.advance(testSession / 2)
	e.beat(2)
	e.clock.advance(testSession/2 + time.Millisecond)
	e.check()
	if got := e.fenced(1) + " " + e.fenced(2); got != "fenced unfenced" {
		t.Fatalf("broker 1 silent for the session: %s, want fenced unfenced", got)
	}
	if r := e.beat(1); r.Fenced || !r.CaughtUp {
		t.Fatalf("heartbeat after fencing: %+v, want unfenced and caught up", r)
	}
	if got := e.fenced(1); got != "unfenced" {
		t.Fatalf("broker 1 after heartbeat: %s", got)
	}
}

// A heartbeat behind the broker's own registration in the metadata log
// does not unfence it (KRaft's caught-up rule); a stale epoch is refused.
func TestHeartbeatCaughtUpAndStaleEpoch(t *testing.T) {
	e := newEnv(t, Config{})
	e.register(1)
	epoch := e.epoch[1]
	if _, err := e.ctl.Heartbeat(Heartbeat{Broker: 1, Epoch: epoch - 1, MetadataOffset: epoch}); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	if _, err := e.ctl.Heartbeat(Heartbeat{Broker: 9, Epoch: 0}); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("unknown broker: %v", err)
	}
	if r, err := e.ctl.Heartbeat(Heartbeat{Broker: 1, Epoch: epoch, WantFence: true}); err != nil || !r.Fenced {
		t.Fatalf("WantFence: %+v %v", r, err)
	}
	r, err := e.ctl.Heartbeat(Heartbeat{Broker: 1, Epoch: epoch, MetadataOffset: epoch - 1})
	if err != nil || r.CaughtUp || !r.Fenced {
		t.Fatalf("behind its registration: %+v %v, want fenced, not caught up", r, err)
	}
	if r := e.beat(1); r.Fenced {
		t.Fatalf("caught up: %+v, want unfenced", r)
	}
}

// A new term (another controller, or this one again) starts every session
// afresh: brokers silent under the old one are not fenced at once.
func TestNewTermRestartsSessions(t *testing.T) {
	e := newEnv(t, Config{})
	e.register(1)
	e.check()
	e.host.active = false
	e.check()
	e.clock.advance(2 * testSession)
	e.host.active, e.host.term = true, 2
	e.check()
	if got := e.fenced(1); got != "unfenced" {
		t.Fatalf("after a new term: %s, want unfenced", got)
	}
	e.clock.advance(testSession + time.Millisecond)
	e.check()
	if got := e.fenced(1); got != "fenced" {
		t.Fatalf("a session after the new term: %s, want fenced", got)
	}
}

// A broker in controlled shutdown is fenced and stays so in that epoch;
// it registers again to come back.
func TestControlledShutdownStaysFenced(t *testing.T) {
	e := newEnv(t, Config{})
	e.register(1)
	r, err := e.ctl.Heartbeat(Heartbeat{Broker: 1, Epoch: e.epoch[1], MetadataOffset: e.epoch[1], WantShutdown: true})
	if err != nil || !r.Fenced || !r.ShouldShutdown {
		t.Fatalf("WantShutdown: %+v %v", r, err)
	}
	if r := e.beat(1); !r.Fenced {
		t.Fatalf("a later heartbeat of the same epoch: %+v, want fenced", r)
	}
	e.register(1)
	if got := e.fenced(1); got != "unfenced" {
		t.Fatalf("registered again: %s", got)
	}
}

// A broker that is not a voter joins the metadata group as a learner,
// once per term.
func TestLearnersAddedOncePerTerm(t *testing.T) {
	e := newEnv(t, Config{})
	e.register(1) // a voter
	e.register(2)
	e.register(3)
	e.check()
	e.check()
	e.host.term = 2
	e.check()
	if want := []int32{2, 3, 2, 3}; !slices.Equal(e.host.learners, want) {
		t.Fatalf("learners added: %v, want %v", e.host.learners, want)
	}
}

// AlterPartition refuses a stale broker epoch, and a report computed
// before the partition's latest reassignment.
func TestAlterPartitionEpochs(t *testing.T) {
	e := newEnv(t, Config{})
	for id := int32(1); id <= 4; id++ {
		e.register(id)
	}
	tp := e.topic("t", []int32{1, 2, 3})
	if _, err := e.ctl.AlterPartition(1, e.epoch[1]-1, nil, nil); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale broker epoch: %v", err)
	}
	if _, err := e.st.Reassign(reassign(tp.ID, 0, 1, 2, 4)); err != nil {
		t.Fatal(err)
	}
	errs, err := e.ctl.AlterPartition(1, e.epoch[1], changed(tp.ID, 0, 1, 1, 2, 4), []int32{0})
	if err != nil || errs[0] == nil {
		t.Fatalf("a report predating the reassignment: %v %v, want refused", errs, err)
	}
}

// A reassignment completes at the check after the ISR holds the replicas
// it adds and none it removes.
func TestReassignmentCompletes(t *testing.T) {
	e := newEnv(t, Config{})
	for id := int32(1); id <= 4; id++ {
		e.register(id)
	}
	tp := e.topic("t", []int32{1, 2, 3})
	if errs, err := e.st.Reassign(reassign(tp.ID, 0, 1, 2, 4)); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	e.report("t", 0, 1, 1, 2, 3)
	e.check()
	if got := slices.Sorted(slices.Values(e.replicas("t", 0))); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("before the new replica is in sync: %v, want adding and removing ones both", got)
	}
	e.report("t", 0, 1, 1, 2, 3, 4)
	e.check()
	if got := e.replicas("t", 0); len(e.st.Reassignments()) != 1 {
		t.Fatalf("the leaving replica still in the ISR: %v completed", got)
	}
	e.report("t", 0, 1, 1, 2, 4)
	e.check()
	if got := e.replicas("t", 0); !slices.Equal(got, []int32{1, 2, 4}) || len(e.st.Reassignments()) != 0 {
		t.Fatalf("after completion: %v, reassignments %v", got, e.st.Reassignments())
	}
}
