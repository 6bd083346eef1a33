// This file is the stale-read check (check.go's list has its definition):
// a read must not return less than what an operation that completed
// before the read was invoked had already established. A leader cut off
// from its quorum, paused or deposed that still answers reads from its
// own state is what it looks for.

package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// mark is one operation's claim about a value in a partition: a lower
// bound it established (from at = its End on), or what a read returned
// (at = its Start).
type mark struct {
	op int
	at time.Duration
	v  int64
}

// stale is one stale read: what it returned and the operation that had
// established more before it began.
type stale struct{ read, by mark }

// staleReadChecks reports stale high watermarks and stale committed
// offsets.
func (c *checker) staleReadChecks() {
	c.staleHighWatermarks()
	c.staleCommittedOffsets()
}

// staleHighWatermarks checks every OK OpHighWater against what was
// established before it began: an OK acks=all send or append at offset
// o (the high watermark is above o once it is acknowledged) and an
// earlier high watermark read (it never goes back).
func (c *checker) staleHighWatermarks() {
	est, reads := map[tp][]mark{}, map[tp][]mark{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch {
		case (op.Kind == OpSend || op.Kind == OpAppend) && op.Outcome == OK:
			if c.h.Acks1 && op.Kind == OpSend && strings.HasPrefix(op.Process, "producer-") {
				continue // acks=1: acknowledged before it was committed
			}
			k := tp{op.Topic, op.Partition}
			est[k] = append(est[k], mark{i, op.End, op.Offset + 1})
		case op.Kind == OpHighWater && op.Outcome == OK:
			for p, hw := range op.Offsets {
				k := tp{op.Topic, p}
				reads[k] = append(reads[k], mark{i, op.Start, hw})
				est[k] = append(est[k], mark{i, op.End, hw})
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(reads), cmpTP) {
		found := staleReads(reads[k], est[k])
		if len(found) == 0 {
			continue
		}
		var ex []string
		var ops []int
		for _, s := range found {
			r := c.h.Ops[s.read.op]
			what := fmt.Sprintf("had returned %d", s.by.v)
			if b := c.h.Ops[s.by.op]; b.Kind != OpHighWater {
				what = fmt.Sprintf("had been acknowledged at offset %d (so the high watermark was at least %d)", b.Offset, s.by.v)
			}
			ex = append(ex, fmt.Sprintf("%s read %d via %s, though %s %s before it began",
				c.opRef(s.read.op), s.read.v, r.Via, c.opRef(s.by.op), what))
			ops = appendNew(ops, s.by.op, s.read.op)
		}
		c.add(Anomaly{Kind: KindStaleRead, Topic: k.topic, Partition: k.p, Count: len(found),
			Msg: fmt.Sprintf("%s: %d high watermark reads returned less than was established before them: %s", k, len(found), examples(ex)),
			Ops: ops})
	}
}

// staleReads returns the reads (by Start) that returned less than the
// highest value established (by End) strictly before they began.
func staleReads(reads, est []mark) []stale {
	reads, est = slices.Clone(reads), slices.Clone(est)
	byAt := func(a, b mark) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op, b.op)) }
	slices.SortFunc(reads, byAt)
	slices.SortFunc(est, byAt)
	var out []stale
	best, j := mark{op: -1}, 0
	for _, r := range reads {
		for ; j < len(est) && est[j].at < r.at; j++ {
			if best.op < 0 || est[j].v > best.v {
				best = est[j]
			}
		}
		if best.op >= 0 && r.v < best.v {
			out = append(out, stale{r, best})
		}
	}
	return out
}

// staleCommittedOffsets checks the queue workload's groups: an OK
// OpFetchOffsets returning v for a partition (absent: -1) is stale when
// an OK OpCommit of a value above v completed before the fetch began,
// and no commit of v (OK, or Info: it may take effect later) could have
// taken effect after that one: a commit of v that had completed before
// it began could not. The offsets workload's registers are left to
// offsets-not-linearizable, which checks the same and more.
func (c *checker) staleCommittedOffsets() {
	reg := c.registerGroups()
	type gp struct {
		group string
		p     int32
	}
	commits := map[gp][]int{} // OK and Info commits of the partition
	fetches := map[string][]int{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if reg[op.Group] || op.Outcome == Fail {
			continue
		}
		switch op.Kind {
		case OpCommit:
			for p := range op.Offsets {
				commits[gp{op.Group, p}] = append(commits[gp{op.Group, p}], i)
			}
		case OpFetchOffsets:
			if op.Outcome == OK {
				fetches[op.Group] = append(fetches[op.Group], i)
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(commits), func(a, b gp) int {
		return cmp.Or(strings.Compare(a.group, b.group), cmp.Compare(a.p, b.p))
	})
	for _, k := range keys {
		val := func(i int) int64 {
			if o, ok := c.h.Ops[i].Offsets[k.p]; ok {
				return o
			}
			return -1
		}
		var ex []string
		var ops []int
		n := 0
		for _, fi := range fetches[k.group] {
			f := &c.h.Ops[fi]
			v := val(fi)
			by := -1 // the OK commit above v, completed before f began, that began last
			for _, ci := range commits[k] {
				w := &c.h.Ops[ci]
				if w.Outcome == OK && w.End < f.Start && val(ci) > v && (by < 0 || w.Start > c.h.Ops[by].Start) {
					by = ci
				}
			}
			if by < 0 {
				continue
			}
			after := v >= 0 && slices.ContainsFunc(commits[k], func(ci int) bool {
				w := &c.h.Ops[ci]
				return val(ci) == v && w.Start < f.End && (w.Outcome == Info || w.End > c.h.Ops[by].Start)
			})
			if after {
				continue
			}
			n++
			ex = append(ex, fmt.Sprintf("%s returned %d, though %s had committed %d before it began",
				c.opRef(fi), v, c.opRef(by), val(by)))
			ops = appendNew(ops, by, fi)
		}
		if n == 0 {
			continue
		}
		c.add(Anomaly{Kind: KindStaleRead, Topic: c.h.Ops[ops[0]].Topic, Group: k.group, Partition: k.p, Count: n,
			Msg: fmt.Sprintf("group %q partition %d: %d committed offset reads returned less than an acknowledged commit before them: %s",
				k.group, k.p, n, examples(ex)),
			Ops: ops})
	}
}

// appendNew appends the xs that ops does not hold yet.
func appendNew(ops []int, xs ...int) []int {
	for _, x := range xs {
		if !slices.Contains(ops, x) {
			ops = append(ops, x)
		}
	}
	return ops
}
