package coordinator

import (
	"fmt"
	"testing"
)

func testSpec(members int, subs []string, topics ...TopicInfo) *assignSpec {
	spec := &assignSpec{subs: map[string][]string{}, topics: map[string]TopicInfo{}, prev: map[string]partitionSet{}}
	for _, t := range topics {
		spec.topics[t.Name] = t
	}
	for i := range members {
		id := fmt.Sprintf("m%02d", i)
		spec.members = append(spec.members, id)
		spec.subs[id] = subs
	}
	return spec
}

var (
	topicA = TopicInfo{Name: "a", ID: [16]byte{1}, Partitions: 7}
	topicB = TopicInfo{Name: "b", ID: [16]byte{2}, Partitions: 5}
	topicC = TopicInfo{Name: "c", ID: [16]byte{3}, Partitions: 1}
)

// checkComplete fails unless every partition of the subscribed topics is
// assigned to exactly one subscriber.
func checkComplete(t *testing.T, spec *assignSpec, out map[string]partitionSet) {
	t.Helper()
	seen := map[tpKey]string{}
	for m, a := range out {
		a.each(func(id [16]byte, p int32) {
			if o, ok := seen[tpKey{id, p}]; ok {
				t.Fatalf("partition %x/%d assigned to %s and %s", id[0], p, o, m)
			}
			seen[tpKey{id, p}] = m
			ok := false
			for _, s := range spec.subs[m] {
				ok = ok || spec.topics[s].ID == id
			}
			if !ok {
				t.Fatalf("%s got a partition of a topic it does not subscribe to", m)
			}
		})
	}
	want := 0
	subscribed := map[string]bool{}
	for _, m := range spec.members {
		for _, s := range spec.subs[m] {
			subscribed[s] = true
		}
	}
	for s := range subscribed {
		want += int(spec.topics[s].Partitions)
	}
	if len(seen) != want {
		t.Fatalf("%d partitions assigned, want %d", len(seen), want)
	}
}

func spread(out map[string]partitionSet) (lo, hi int) {
	lo = 1 << 30
	for _, a := range out {
		lo, hi = min(lo, a.count()), max(hi, a.count())
	}
	return lo, hi
}

func TestUniformBalanced(t *testing.T) {
	for members := 1; members <= 15; members++ {
		spec := testSpec(members, []string{"a", "b", "c"}, topicA, topicB, topicC)
		out := assignUniform(spec)
		checkComplete(t, spec, out)
		if lo, hi := spread(out); hi-lo > 1 {
			t.Fatalf("%d members: counts from %d to %d", members, lo, hi)
		}
		// Deterministic.
		if again := assignUniform(spec); fmt.Sprint(again) != fmt.Sprint(out) {
			t.Fatalf("%d members: %v then %v", members, out, again)
		}
		// Sticky: a member joining moves only what balance needs.
		prev := out
		spec2 := testSpec(members+1, []string{"a", "b", "c"}, topicA, topicB, topicC)
		spec2.prev = prev
		next := assignUniform(spec2)
		checkComplete(t, spec2, next)
		if lo, hi := spread(next); hi-lo > 1 {
			t.Fatalf("%d+1 members: counts from %d to %d", members, lo, hi)
		}
		moved := 0
		for m, a := range prev {
			a.each(func(id [16]byte, p int32) {
				if !next[m].has(id, p) {
					moved++
				}
			})
		}
		total := 13
		if limit := total/members + 1; moved > limit {
			t.Fatalf("%d+1 members: %d partitions moved, at most %d needed", members, moved, limit)
		}
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	spec := testSpec(4, []string{"a"}, topicA, topicB, topicC)
	spec.subs["m00"] = []string{"a", "b", "c"}
	spec.subs["m01"] = []string{"b"}
	out := assignUniform(spec)
	checkComplete(t, spec, out)
	// 13 partitions, 4 members: b's 5 can go to m00 and m01 only, but
	// the totals still even out.
	if lo, hi := spread(out); hi-lo > 1 {
		t.Fatalf("counts from %d to %d: %v", lo, hi, out)
	}
}

func TestRangePerTopic(t *testing.T) {
	spec := testSpec(3, []string{"a", "b"}, topicA, topicB)
	spec.subs["m02"] = []string{"a"}
	out := assignRange(spec)
	checkComplete(t, spec, out)
	want := map[string]string{
		// a: 7 partitions over 3 members: 3, 2, 2.
		// b: 5 partitions over m00, m01: 3, 2.
		"m00": "map[[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]:[0 1 2] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]:[0 1 2]]",
		"m01": "map[[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]:[3 4] [2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]:[3 4]]",
		"m02": "map[[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0]:[5 6]]",
	}
	for m, w := range want {
		if got := fmt.Sprint(out[m]); got != w {
			t.Errorf("%s: %s, want %s", m, got, w)
		}
	}
}

func TestAssignorsNoSubscribers(t *testing.T) {
	spec := testSpec(2, nil, topicA)
	for _, name := range []string{assignorUniform, assignorRange} {
		out := assign(name, spec)
		if len(out) != 2 || out["m00"].count()+out["m01"].count() != 0 {
			t.Fatalf("%s: %v", name, out)
		}
	}
}
