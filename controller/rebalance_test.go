package controller

import (
	"slices"
	"testing"
	"time"
)

func TestPreferredDecision(t *testing.T) {
	for _, c := range []struct {
		replicas, isr []int32
		leader        int32
		want          Preferred
	}{
		{nil, nil, -1, PreferredNoReplicas},
		{[]int32{1, 2}, []int32{1, 2}, 1, PreferredNotNeeded},
		{[]int32{1, 2}, []int32{1, 2}, -1, PreferredNoLeader},
		{[]int32{1, 2}, []int32{2}, 2, PreferredNotInSync},
		{[]int32{1, 2}, []int32{2, 1}, 2, PreferredElect},
	} {
		if got := PreferredDecision(c.replicas, c.leader, c.isr); got != c.want {
			t.Errorf("PreferredDecision(%v, %d, %v) = %d, want %d", c.replicas, c.leader, c.isr, got, c.want)
		}
	}
}

// The leader rebalance runs one interval after the controller took over,
// and elects the partitions of a broker whose imbalance is over
// leader.imbalance.per.broker.percentage: only those whose preferred
// replica is in sync, not moving, and on a broker neither fenced nor
// decommissioning.
func TestRebalance(t *testing.T) {
	const every = 10 * time.Second
	e := newEnv(t, Config{AutoLeaderRebalance: true, ImbalanceCheckInterval: every, ImbalancePerBrokerPercentage: 40, SessionTimeout: time.Hour})
	for id := int32(1); id <= 4; id++ {
		e.register(id)
	}
	e.topic("a", []int32{1, 2}, []int32{1, 2}, []int32{1, 2}, []int32{1, 2}) // 1 prefers 4 partitions
	e.topic("b", []int32{2, 1}, []int32{2, 1}, []int32{2, 1})                // 2 prefers 3
	e.topic("c", []int32{3, 1})
	// Broker 1 leads 2 of its 4 elsewhere (50% > 40%); broker 2 one of
	// its 3 (33%); broker 3's preferred replica is out of the ISR.
	e.host.leaders = map[string]int32{"a-0": 2, "a-1": 2, "b-0": 1, "c-0": 1}
	e.host.isrs = map[string][]int32{"c-0": {1}}
	e.check()
	e.clock.advance(every - time.Millisecond)
	e.check()
	if len(e.host.elected) != 0 {
		t.Fatalf("elections before an interval: %v", e.host.elected)
	}
	e.clock.advance(time.Millisecond)
	e.check()
	if len(e.host.elected) != 1 {
		t.Fatalf("elections: %v, want one call", e.host.elected)
	}
	got := e.host.elected[0]
	slices.SortFunc(got, func(x, y Election) int { return int(x.Partition - y.Partition) })
	want := []Election{{"a", 0, 2, 1}, {"a", 1, 2, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("elected %v, want %v", got, want)
	}
	// Broker 1 decommissioning: it gets no leadership back.
	if err := e.st.DecommissionBroker(1, true); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(every)
	e.check()
	if len(e.host.elected) != 1 {
		t.Fatalf("a decommissioning broker got leaderships back: %v", e.host.elected[1:])
	}
}
