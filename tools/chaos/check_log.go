// This file holds the linearizability checks: the log workload's
// partitions as an append-only log and the offsets workload's committed
// offsets as registers, both porcupine models.

package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// visualization is what porcupine.Visualize needs of a check.
type visualization struct {
	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// The log model's inputs, outputs and state. A log is kept as its length
// and a hash chain over its values (and its last value, for people), so a
// state is small and comparable however long the log: a read's output is
// the same pair computed over the values it returned.
type (
	appendIn  struct{ value string }
	appendOut struct {
		offset int64
		known  bool // false: an Info append, whose offset nobody learned
	}
	readIn  struct{}
	readOut struct {
		n    int64
		h    uint64
		desc string
	}
	logState struct {
		n    int64
		h    uint64
		last string
	}
)

const hashBasis = 14695981039346656037 // FNV-64 offset basis: the empty log

// chain returns the hash of a log of hash h with v appended.
func chain(h uint64, v string) uint64 {
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	h ^= 0xff // the separator, so ["ab"] and ["a", "b"] differ
	h *= 1099511628211
	// splitmix64's finaliser, so that nearby logs spread.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

func readOf(values []string) readOut {
	h := uint64(hashBasis)
	for _, v := range values {
		h = chain(h, v)
	}
	return readOut{n: int64(len(values)), h: h, desc: describeLog(values)}
}

// describeLog shows a log's length and its last few values.
func describeLog(values []string) string {
	const tail = 5
	if len(values) <= tail {
		return fmt.Sprintf("%d values %q", len(values), values)
	}
	return fmt.Sprintf("%d values [... %s]", len(values), strings.Trim(fmt.Sprintf("%q", values[len(values)-tail:]), "[]"))
}

// logModel is a strict append-only log: an append returns the number of
// values before it (any, if its outcome is unknown) and a read returns
// exactly the log.
var logModel = porcupine.Model{
	Init: func() any { return logState{h: hashBasis} },
	Step: func(state, input, output any) (bool, any) {
		s := state.(logState)
		switch in := input.(type) {
		case appendIn:
			if out := output.(appendOut); out.known && out.offset != s.n {
				return false, s
			}
			return true, logState{n: s.n + 1, h: chain(s.h, in.value), last: in.value}
		default:
			out := output.(readOut)
			return out.n == s.n && out.h == s.h, s
		}
	},
	Hash: func(state any) uint64 { return state.(logState).h },
	DescribeOperation: func(input, output any) string {
		if in, ok := input.(appendIn); ok {
			if out := output.(appendOut); out.known {
				return fmt.Sprintf("append(%q) -> %d", in.value, out.offset)
			}
			return fmt.Sprintf("append(%q) -> ?", in.value)
		}
		return "read() -> " + output.(readOut).desc
	},
	DescribeState: func(state any) string {
		s := state.(logState)
		if s.n == 0 {
			return "empty"
		}
		return fmt.Sprintf("%d values, last %q", s.n, s.last)
	},
	DescribeOperationMetadata: func(info any) string {
		if s, ok := info.(string); ok {
			return s
		}
		return ""
	},
}

// The register model: a group's committed offset of one partition, -1
// before any commit.
type (
	regWrite struct{ offset int64 }
	regRead  struct{}
)

var registerModel = porcupine.Model{
	Init: func() any { return int64(-1) },
	Step: func(state, input, output any) (bool, any) {
		if w, ok := input.(regWrite); ok {
			return true, w.offset
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		if w, ok := input.(regWrite); ok {
			return fmt.Sprintf("commit(%d)", w.offset)
		}
		return fmt.Sprintf("fetch() -> %d", output.(int64))
	},
	DescribeState:             func(state any) string { return fmt.Sprintf("%d", state.(int64)) },
	DescribeOperationMetadata: logModel.DescribeOperationMetadata,
}

// linOps builds porcupine operations: one client per process.
type linOps struct {
	h       *History
	clients map[string]int
	ops     []porcupine.Operation
	idx     []int // History.Ops index of each
}

// add adds operation i of the history; unknown: it may have taken effect
// at any time after its Start (it returns at infinity).
func (l *linOps) add(i int, in, out any, unknown bool) {
	op := l.h.Ops[i]
	if l.clients == nil {
		l.clients = map[string]int{}
	}
	id, ok := l.clients[op.Process]
	if !ok {
		id = len(l.clients)
		l.clients[op.Process] = id
	}
	ret := int64(max(op.End, op.Start))
	if unknown {
		ret = math.MaxInt64
	}
	l.ops = append(l.ops, porcupine.Operation{ClientId: id, Input: in, Output: out,
		Call: int64(op.Start), Return: ret, Metadata: fmt.Sprintf("#%d %s", i, op.Process)})
	l.idx = append(l.idx, i)
}

// run checks l against model and records the check; it returns false if
// the history is not linearizable.
func (c *checker) run(lc LinCheck, model porcupine.Model, l *linOps) bool {
	lc.Ops = len(l.ops)
	res, info := porcupine.CheckOperationsVerbose(model, l.ops, c.opts.LinTimeout)
	lc.vis = &visualization{model: model, info: info}
	switch res {
	case porcupine.Ok:
		lc.Result = "ok"
	case porcupine.Illegal:
		lc.Result = "illegal"
	default:
		lc.Result = "unknown"
		c.r.Notes = append(c.r.Notes, fmt.Sprintf("%s: porcupine found no answer for %d operations within %s (unknown, not an anomaly)",
			lc.Name, len(l.ops), c.opts.LinTimeout))
	}
	c.r.Checks = append(c.r.Checks, lc)
	return res != porcupine.Illegal
}

// fileSafe keeps a name usable as a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// logChecks checks each partition of the log workload.
func (c *checker) logChecks() {
	by := map[tp][]int{}
	for i, op := range c.h.Ops {
		if op.Kind == OpAppend || op.Kind == OpRead {
			k := tp{op.Topic, op.Partition}
			by[k] = append(by[k], i)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(by), cmpTP) {
		l := &linOps{h: c.h}
		for _, i := range by[k] {
			op := c.h.Ops[i]
			switch {
			case op.Outcome == Fail:
			case op.Kind == OpAppend:
				l.add(i, appendIn{op.Value}, appendOut{offset: op.Offset, known: op.Outcome == OK}, op.Outcome != OK)
			case op.Outcome == OK:
				l.add(i, readIn{}, readOf(op.Values), false)
			}
		}
		name := fileSafe(fmt.Sprintf("log-%s-%d", k.topic, k.p))
		if c.run(LinCheck{Kind: KindLogNotLinearizable, Name: name, Topic: k.topic, Partition: k.p}, logModel, l) {
			continue
		}
		why, ops := c.explainLog(l.idx)
		if len(ops) == 0 {
			ops = l.idx
		}
		c.add(Anomaly{Kind: KindLogNotLinearizable, Topic: k.topic, Partition: k.p,
			Msg: fmt.Sprintf("%s: the %d appends and reads are not linearizable as an append-only log (see %s.html)%s",
				k, len(l.ops), name, why),
			Ops: ops})
	}
}

// explainLog looks for the simplest reasons a log history is not
// linearizable, to name the operations: two reads neither a prefix of
// the other, a read shorter than one that ended before it started, a read
// that misses an append acknowledged before it started.
func (c *checker) explainLog(ops []int) (string, []int) {
	var reads, appends []int
	for _, i := range ops {
		op := c.h.Ops[i]
		switch {
		case op.Outcome != OK:
		case op.Kind == OpRead:
			reads = append(reads, i)
		default:
			appends = append(appends, i)
		}
	}
	var why []string
	var named []int
	note := func(s string, ops ...int) {
		why = append(why, s)
		for _, i := range ops {
			if !slices.Contains(named, i) {
				named = append(named, i)
			}
		}
	}
	if len(reads) > 0 {
		longest := slices.MaxFunc(reads, func(a, b int) int { return cmp.Compare(len(c.h.Ops[a].Values), len(c.h.Ops[b].Values)) })
		lv := c.h.Ops[longest].Values
		for _, i := range reads {
			if v := c.h.Ops[i].Values; !slices.Equal(v, lv[:len(v)]) {
				note(fmt.Sprintf("%s returned %s, not a prefix of what %s returned (%s)",
					c.opRef(i), describeLog(v), c.opRef(longest), describeLog(lv)), i, longest)
			}
		}
	}
	start := func(i int) int64 { return int64(c.h.Ops[i].Start) }
	end := func(i int) int64 { return int64(c.h.Ops[i].End) }
	for _, r := range reads {
		n := int64(len(c.h.Ops[r].Values))
		for _, q := range reads {
			if end(q) < start(r) && int64(len(c.h.Ops[q].Values)) > n {
				note(fmt.Sprintf("%s returned %d values after %s had returned %d", c.opRef(r), n, c.opRef(q), len(c.h.Ops[q].Values)), q, r)
				break
			}
		}
		for _, a := range appends {
			if end(a) < start(r) && c.h.Ops[a].Offset >= n {
				note(fmt.Sprintf("%s returned %d values after %s was acknowledged at offset %d", c.opRef(r), n, c.opRef(a), c.h.Ops[a].Offset), a, r)
				break
			}
		}
	}
	if len(why) == 0 {
		return "", nil
	}
	return ": " + examples(why), named
}

// registerChecks checks each committed offset of the offsets workload's
// groups.
func (c *checker) registerChecks() {
	reg := c.registerGroups()
	type gp struct {
		group string
		p     int32
	}
	parts := map[gp]bool{}
	for _, op := range c.h.Ops {
		if op.Kind == OpCommit && reg[op.Group] {
			for p := range op.Offsets {
				parts[gp{op.Group, p}] = true
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(parts), func(a, b gp) int {
		return cmp.Or(strings.Compare(a.group, b.group), cmp.Compare(a.p, b.p))
	})
	for _, k := range keys {
		l := &linOps{h: c.h}
		topic := ""
		for i, op := range c.h.Ops {
			if op.Group != k.group || op.Outcome == Fail {
				continue
			}
			switch {
			case op.Kind == OpCommit:
				if o, ok := op.Offsets[k.p]; ok {
					l.add(i, regWrite{o}, nil, op.Outcome != OK)
					topic = cmp.Or(topic, op.Topic)
				}
			case op.Kind == OpFetchOffsets && op.Outcome == OK:
				o, ok := op.Offsets[k.p]
				if !ok {
					o = -1
				}
				l.add(i, regRead{}, o, false)
			}
		}
		name := fileSafe(fmt.Sprintf("offsets-%s-%d", k.group, k.p))
		lc := LinCheck{Kind: KindOffsetsNotLinearizable, Name: name, Topic: topic, Group: k.group, Partition: k.p}
		if c.run(lc, registerModel, l) {
			continue
		}
		c.add(Anomaly{Kind: KindOffsetsNotLinearizable, Topic: topic, Group: k.group, Partition: k.p,
			Msg: fmt.Sprintf("group %q partition %d: the %d commits and offset fetches are not linearizable as a register (see %s.html)",
				k.group, k.p, len(l.ops), name),
			Ops: l.idx})
	}
}
