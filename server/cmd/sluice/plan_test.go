package main

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// parts builds assignments for topic from replica lists, partition i
// getting lists[i].
func parts(topic string, lists ...[]int32) []assignment {
	var as []assignment
	for i, r := range lists {
		as = append(as, assignment{Topic: topic, Partition: int32(i), Replicas: r})
	}
	return as
}

// same is n copies of replicas.
func same(n int, replicas ...int32) [][]int32 {
	var out [][]int32
	for range n {
		out = append(out, slices.Clone(replicas))
	}
	return out
}

type planStats struct {
	moves, leaderChanges int
	replicas, leaders    map[int32]int // over the whole plan
}

// checkPlan checks the invariants every plan keeps (each partition on rf
// distinct listed brokers; replicas even per topic and overall) and
// returns its movement and spread.
func checkPlan(t *testing.T, current []assignment, brokers []int32, rf int, out []assignment) planStats {
	t.Helper()
	if len(out) != len(current) {
		t.Fatalf("plan has %d partitions, want %d", len(out), len(current))
	}
	cur := make(map[tp][]int32)
	for _, a := range current {
		cur[a.tp()] = a.Replicas
	}
	st := planStats{replicas: map[int32]int{}, leaders: map[int32]int{}}
	perTopic := map[string]map[int32]int{}
	for _, a := range out {
		old, ok := cur[a.tp()]
		if !ok {
			t.Fatalf("plan has %s, not in the input", a.tp())
		}
		want := rf
		if rf == 0 {
			want = len(old)
		}
		if len(a.Replicas) != want {
			t.Errorf("%s: %d replicas %v, want %d", a.tp(), len(a.Replicas), a.Replicas, want)
		}
		seen := map[int32]bool{}
		for _, r := range a.Replicas {
			if seen[r] {
				t.Errorf("%s: broker %d twice in %v", a.tp(), r, a.Replicas)
			}
			seen[r] = true
			if !slices.Contains(brokers, r) {
				t.Errorf("%s: broker %d is not in %v", a.tp(), r, brokers)
			}
			if !slices.Contains(old, r) {
				st.moves++
			}
			st.replicas[r]++
			if perTopic[a.Topic] == nil {
				perTopic[a.Topic] = map[int32]int{}
			}
			perTopic[a.Topic][r]++
		}
		st.leaders[a.Replicas[0]]++
		if len(old) == 0 || old[0] != a.Replicas[0] {
			st.leaderChanges++
		}
	}
	if lo, hi := spread(st.replicas, brokers); hi-lo > 1 {
		t.Errorf("replicas per broker %v: %d to %d", st.replicas, lo, hi)
	}
	for topic, c := range perTopic {
		if lo, hi := spread(c, brokers); hi-lo > 1 {
			t.Errorf("topic %s: replicas per broker %v: %d to %d", topic, c, lo, hi)
		}
	}
	return st
}

// spread is the fewest and most of counts over brokers.
func spread(counts map[int32]int, brokers []int32) (lo, hi int) {
	lo = -1
	for _, b := range brokers {
		c := counts[b]
		if lo < 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	return lo, hi
}

func mustPlan(t *testing.T, current []assignment, brokers []int32, rf int) ([]assignment, planStats) {
	t.Helper()
	out, err := planReassignment(current, brokers, rf)
	if err != nil {
		t.Fatalf("planReassignment: %v", err)
	}
	return out, checkPlan(t, current, brokers, rf, out)
}

func TestPlanFromScratchIsRoundRobin(t *testing.T) {
	cur := parts("a", same(3, 1, 2, 3)...)
	out, st := mustPlan(t, cur, []int32{4, 5, 6}, 0)
	want := parts("a", []int32{4, 5, 6}, []int32{5, 6, 4}, []int32{6, 4, 5})
	if !reflect.DeepEqual(out, want) {
		t.Errorf("plan\n%s want\n%s", formatReassignment(out), formatReassignment(want))
	}
	if st.moves != 9 {
		t.Errorf("moves = %d, want 9", st.moves)
	}
}

func TestPlanAddBrokerMovesTheMinimum(t *testing.T) {
	// Six partitions of three replicas on 1, 2, 3; broker 4 joins: 18
	// replicas over four brokers is 4 or 5 each, so four copies (to
	// broker 4) is the least, and the rest stays.
	cur := parts("a", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}, {3, 1, 2}}...)
	out, st := mustPlan(t, cur, []int32{1, 2, 3, 4}, 0)
	if st.moves != 4 {
		t.Errorf("moves = %d, want 4\n%s", st.moves, formatReassignment(out))
	}
	if st.replicas[4] != 4 {
		t.Errorf("broker 4 gets %d replicas, want 4", st.replicas[4])
	}
	if lo, hi := spread(st.leaders, []int32{1, 2, 3, 4}); lo != 1 || hi != 2 {
		t.Errorf("leaders per broker %v, want 1 or 2 each", st.leaders)
	}
}

func TestPlanSameBrokersChangesNothing(t *testing.T) {
	cur := parts("a", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}}...)
	out, st := mustPlan(t, cur, []int32{1, 2, 3}, 0)
	if st.moves != 0 || st.leaderChanges != 0 {
		t.Errorf("moves %d, leader changes %d; want none\n%s", st.moves, st.leaderChanges, formatReassignment(out))
	}
	if !reflect.DeepEqual(out, cur) {
		t.Errorf("plan\n%s want the current\n%s", formatReassignment(out), formatReassignment(cur))
	}
}

func TestPlanRemoveBrokerMovesOnlyItsReplicas(t *testing.T) {
	// Eight partitions, RF 2, over 1-4; broker 4 leaves.
	cur := parts("a", [][]int32{{1, 2}, {2, 3}, {3, 4}, {4, 1}, {1, 3}, {2, 4}, {3, 1}, {4, 2}}...)
	on4 := 0
	for _, a := range cur {
		if slices.Contains(a.Replicas, 4) {
			on4++
		}
	}
	out, st := mustPlan(t, cur, []int32{1, 2, 3}, 0)
	if st.moves != on4 {
		t.Errorf("moves = %d, want %d (broker 4's replicas)\n%s", st.moves, on4, formatReassignment(out))
	}
	if st.replicas[4] != 0 {
		t.Errorf("broker 4 keeps %d replicas", st.replicas[4])
	}
}

func TestPlanSpreadsLeaders(t *testing.T) {
	// Every partition prefers broker 1: no replica needs to move, but
	// four of six preferred leaders do.
	cur := parts("a", same(6, 1, 2, 3)...)
	out, st := mustPlan(t, cur, []int32{1, 2, 3}, 0)
	if st.moves != 0 {
		t.Errorf("moves = %d, want 0", st.moves)
	}
	if st.leaders[1] != 2 || st.leaders[2] != 2 || st.leaders[3] != 2 {
		t.Errorf("leaders per broker %v, want 2 each\n%s", st.leaders, formatReassignment(out))
	}
	if st.leaderChanges != 4 {
		t.Errorf("leader changes = %d, want 4", st.leaderChanges)
	}
}

func TestPlanKeepsLeadersWhenEven(t *testing.T) {
	cur := parts("a", [][]int32{{1, 2}, {2, 3}, {3, 1}}...)
	out, st := mustPlan(t, cur, []int32{1, 2, 3, 4}, 0)
	if st.leaderChanges != 0 {
		t.Errorf("leader changes = %d, want 0\n%s", st.leaderChanges, formatReassignment(out))
	}
}

func TestPlanRaisesReplicationFactor(t *testing.T) {
	cur := parts("a", []int32{1}, []int32{2}, []int32{3}, []int32{1})
	out, st := mustPlan(t, cur, []int32{1, 2, 3}, 3)
	if st.moves != 8 {
		t.Errorf("moves = %d, want 8 (two new replicas each)", st.moves)
	}
	for i, a := range out {
		if a.Replicas[0] != cur[i].Replicas[0] && i < 3 {
			t.Errorf("%s: preferred leader %d, want %d kept", a.tp(), a.Replicas[0], cur[i].Replicas[0])
		}
	}
}

func TestPlanLowersReplicationFactor(t *testing.T) {
	cur := parts("a", same(3, 1, 2, 3)...)
	out, st := mustPlan(t, cur, []int32{1, 2, 3}, 2)
	if st.moves != 0 {
		t.Errorf("moves = %d, want 0 (lowering only drops)\n%s", st.moves, formatReassignment(out))
	}
	if lo, hi := spread(st.replicas, []int32{1, 2, 3}); lo != 2 || hi != 2 {
		t.Errorf("replicas per broker %v, want 2 each", st.replicas)
	}
}

func TestPlanSpreadsOverTopics(t *testing.T) {
	// Many single-partition topics on 1, 2, 3: each topic alone is as
	// even as one partition can be, but broker 4 must still get its
	// quarter of the whole.
	var cur []assignment
	for i := range 8 {
		cur = append(cur, parts(fmt.Sprintf("t%d", i), []int32{1, 2, 3})...)
	}
	out, st := mustPlan(t, cur, []int32{1, 2, 3, 4}, 0)
	if st.replicas[4] != 6 || st.moves != 6 {
		t.Errorf("broker 4 gets %d replicas (moves %d), want 6\n%s", st.replicas[4], st.moves, formatReassignment(out))
	}
	if lo, hi := spread(st.leaders, []int32{1, 2, 3, 4}); lo != 2 || hi != 2 {
		t.Errorf("leaders per broker %v, want 2 each", st.leaders)
	}
}

func TestPlanMixedReplicationFactors(t *testing.T) {
	cur := append(parts("a", same(4, 1, 2, 3)...), parts("b", same(5, 1)...)...)
	_, st := mustPlan(t, cur, []int32{1, 2, 3, 4, 5}, 0)
	if lo, hi := spread(st.replicas, []int32{1, 2, 3, 4, 5}); hi-lo > 1 {
		t.Errorf("replicas per broker %v", st.replicas)
	}
}

func TestPlanIsDeterministic(t *testing.T) {
	cur := parts("a", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}}...)
	first, _ := mustPlan(t, cur, []int32{1, 2, 3, 4, 5}, 0)
	for range 5 {
		again, _ := mustPlan(t, cur, []int32{1, 2, 3, 4, 5}, 0)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("two plans differ:\n%s\n%s", formatReassignment(first), formatReassignment(again))
		}
	}
}

func TestPlanErrors(t *testing.T) {
	cur := parts("a", same(2, 1, 2, 3)...)
	for _, tc := range []struct {
		name    string
		current []assignment
		brokers []int32
		rf      int
		want    string
	}{
		{"no brokers", cur, nil, 0, "no brokers"},
		{"fewer brokers than the RF", cur, []int32{1, 2}, 3, "replication factor 3 needs 3 brokers, but only 2"},
		{"fewer brokers than a partition's replicas", cur, []int32{1, 2}, 0, "a-0 has 3 replicas, but only 2 brokers"},
		{"duplicate broker", cur, []int32{1, 2, 2}, 0, "broker 2 is listed twice"},
		{"negative broker", cur, []int32{1, -2, 3}, 0, "broker id -2 is negative"},
		{"negative RF", cur, []int32{1, 2, 3}, -1, "below 1"},
		{"no partitions", nil, []int32{1, 2, 3}, 0, "no partitions"},
		{"no replicas and no RF", parts("a", []int32{}), []int32{1, 2, 3}, 0, "a-0 has no replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planReassignment(tc.current, tc.brokers, tc.rf)
			if !errors.Is(err, errPlan) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want errPlan with %q", err, tc.want)
			}
		})
	}
}

func TestPlanLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	// 1000 partitions of 3 replicas on 1-6 moving to 1-8 stays quick.
	var cur []assignment
	for i := range 1000 {
		cur = append(cur, assignment{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100),
			Replicas: []int32{int32(1 + i%6), int32(1 + (i+1)%6), int32(1 + (i+2)%6)}})
	}
	start := time.Now()
	_, st := mustPlan(t, cur, []int32{1, 2, 3, 4, 5, 6, 7, 8}, 0)
	t.Logf("1000 partitions: %d moves, %v", st.moves, time.Since(start))
	if st.moves != 750 { // brokers 7 and 8 get 375 each of the 3000
		t.Errorf("moves = %d, want 750", st.moves)
	}
}
