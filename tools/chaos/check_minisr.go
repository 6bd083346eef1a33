package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The min-isr-ack check (issue 28): an acks=all write acknowledged with
// fewer copies than min.insync.replicas. Sluice once acknowledged acks=all
// at the raft commit, so with replication factor 3 and
// min.insync.replicas=3 two replicas acknowledged while the third was
// stopped. No record was lost, so no other check saw it: the checker
// needed to know, for each acknowledged write, how many replicas could
// have held it. The runner knows that from its own faults: what each
// fault stopped (Fault.Down: a paused or killed node) or cut
// (Fault.Sides: the components of a network fault), the topics'
// min.insync.replicas (History.MinInsync) and, when it recorded them, the
// partitions' replicas (History.Replicas; otherwise every node).
//
// The rule: an OK acks=all send or append whose whole [Start, End]
// interval fell under faults that left, at every instant, fewer than
// min.insync.replicas of its partition's replicas up and reachable from
// one of them (the leader counts itself) is an anomaly: no replica
// stopped or cut off before the write was invoked, and until it was
// acknowledged, can hold it. A fault counts only while it is surely in
// force: from faultGrace after its Start (the nemesis records Start
// before it acts) until faultGrace before its End (recorded after the
// heal). Faults that stop or cut nothing for certain (a slow or failing
// disk, a clock jump, a rolling restart, whose node at a given instant
// the history does not say) count as none; a move (FaultMove, and
// move-isolated's moves) makes every node a possible replica of its
// partition while it runs. One anomaly per partition, Count the number of
// writes. Histories without MinInsync are not checked.

// KindMinISRAck is the min-isr-ack anomaly.
const KindMinISRAck AnomalyKind = "min-isr-ack"

// faultGrace is how long after its recorded Start, and before its
// recorded End, a fault is not taken to be in force.
const faultGrace = 500 * time.Millisecond

// minISRChecks runs the min-isr-ack check.
func (c *checker) minISRChecks() {
	h := c.h
	if len(h.MinInsync) == 0 {
		return
	}
	found := map[tp][]int{}
	var order []tp
	reach := map[tp]int{}
	for i, op := range h.Ops {
		if op.Outcome != OK || (op.Kind != OpSend && op.Kind != OpAppend) {
			continue
		}
		if h.Acks1 && op.Kind == OpSend && strings.HasPrefix(op.Process, "producer-") {
			continue // acks=1
		}
		m := h.MinInsync[op.Topic]
		if m <= 1 {
			continue
		}
		k := tp{op.Topic, op.Partition}
		n := c.maxReachable(k, op.Start, op.End)
		if n >= m {
			continue
		}
		if len(found[k]) == 0 {
			order = append(order, k)
		}
		found[k] = append(found[k], i)
		reach[k] = max(reach[k], n)
	}
	for _, k := range order {
		ops := found[k]
		var ex []string
		for _, i := range ops[:min(3, len(ops))] {
			op := h.Ops[i]
			ex = append(ex, fmt.Sprintf("%q at offset %d by %s [%v, %v]", op.Value, op.Offset, op.Process, op.Start, op.End))
		}
		c.add(Anomaly{Kind: KindMinISRAck, Topic: k.topic, Partition: k.p, Count: len(ops), Ops: ops,
			Msg: fmt.Sprintf("%s: %d acks=all write(s) acknowledged while at most %d of the replicas %v were up and reachable from one another for the whole write (min.insync.replicas=%d), e.g. %s",
				k, len(ops), reach[k], c.replicasOf(k, -1, -1), h.MinInsync[k.topic], strings.Join(ex, "; "))})
	}
}

// replicasOf returns the replicas of k: History.Replicas', or every node
// when it has none or a move of k's topic ran during [from, to] (from < 0:
// no interval).
func (c *checker) replicasOf(k tp, from, to time.Duration) []int {
	all := make([]int, c.h.Nodes)
	for i := range all {
		all[i] = i + 1
	}
	rs := c.h.Replicas[k.topic][k.p]
	if len(rs) == 0 {
		return all
	}
	if from >= 0 {
		for _, f := range c.h.Faults {
			if (f.Kind == FaultMove || f.Kind == FaultMoveIsolated) && f.Start <= to && (f.End == 0 || f.End >= from) {
				return all
			}
		}
	}
	return rs
}

// maxReachable returns the most replicas of k that were up and reachable
// from one of them at some instant of [from, to], given the faults surely
// in force.
func (c *checker) maxReachable(k tp, from, to time.Duration) int {
	rs := c.replicasOf(k, from, to)
	// The state changes only where a fault's in-force span starts or
	// ends: try from and every such instant inside the interval.
	times := []time.Duration{from}
	for _, f := range c.h.Faults {
		s, e := c.inForce(f)
		for _, t := range []time.Duration{s, e} {
			if t > from && t <= to {
				times = append(times, t)
			}
		}
	}
	best := 0
	for _, t := range times {
		best = max(best, c.reachableAt(rs, t))
		if best == len(rs) {
			break
		}
	}
	return best
}

// inForce returns the span [s, e) in which fault f is surely in force.
func (c *checker) inForce(f Fault) (s, e time.Duration) {
	end := f.End
	if end == 0 {
		end = c.h.Healed
		if end == 0 {
			end = c.h.Finished
		}
		if end == 0 {
			end = 1 << 62
		}
	}
	return f.Start + faultGrace, end - faultGrace
}

// reachableAt returns the most replicas of rs up and reachable from one
// of them (itself included) at t.
func (c *checker) reachableAt(rs []int, t time.Duration) int {
	var active []Fault
	for _, f := range c.h.Faults {
		if s, e := c.inForce(f); s <= t && t < e {
			active = append(active, f)
		}
	}
	up := slices.DeleteFunc(slices.Clone(rs), func(id int) bool {
		for _, f := range active {
			if slices.Contains(f.Down, id) {
				return true
			}
		}
		return false
	})
	best := 0
	for _, l := range up {
		n := 0
		for _, r := range up {
			if r == l || reaches(active, l, r) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// reaches reports whether node a reaches node b under every network
// fault of active: both in one component, or one of them in the middle
// component of a bridge (three components, the first and last cut apart).
func reaches(active []Fault, a, b int) bool {
	for _, f := range active {
		if len(f.Sides) == 0 {
			continue
		}
		ca, cb := side(f.Sides, a), side(f.Sides, b)
		switch {
		case ca < 0 || cb < 0 || ca == cb:
		case len(f.Sides) == 3 && (ca == 1 || cb == 1):
		default:
			return false
		}
	}
	return true
}

// side returns the index of the component holding id, or -1.
func side(sides [][]int, id int) int {
	for i, s := range sides {
		if slices.Contains(s, id) {
			return i
		}
	}
	return -1
}
