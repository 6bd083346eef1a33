package coordinator

import (
	"bytes"
	"slices"
)

// Server-side assignors of KIP-848 consumer groups. Both are deterministic:
// the same members, subscriptions, topics and previous target give the same
// target, so a replayed or recomputed target never flaps.

const (
	assignorUniform = "uniform"
	assignorRange   = "range"
	defaultAssignor = assignorUniform
)

// knownAssignor reports whether name is a server assignor Sluice has.
func knownAssignor(name string) bool { return name == assignorUniform || name == assignorRange }

// tpKey names one partition of a topic by topic ID.
type tpKey struct {
	topic [16]byte
	part  int32
}

// partitionSet is a set of partitions by topic ID (an assignment); partition lists are kept
// sorted and free of duplicates.
type partitionSet map[[16]byte][]int32

func (a partitionSet) clone() partitionSet {
	out := make(partitionSet, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a partitionSet) has(t [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a partitionSet) add(t [16]byte, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a partitionSet) remove(t [16]byte, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}

func (a partitionSet) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a partitionSet) each(fn func(t [16]byte, p int32)) {
	for t, ps := range a {
		for _, p := range ps {
			fn(t, p)
		}
	}
}

func (a partitionSet) equal(b partitionSet) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// assignSpec is an assignor's input.
type assignSpec struct {
	// members are the member IDs, sorted.
	members []string
	// subs are each member's subscribed topics that exist, by name.
	subs map[string][]string
	// topics are the subscribed topics by name.
	topics map[string]TopicInfo
	// prev is the previous target assignment, for stickiness.
	prev map[string]partitionSet
}

// assign runs the named assignor.
func assign(name string, spec *assignSpec) map[string]partitionSet {
	if name == assignorRange {
		return assignRange(spec)
	}
	return assignUniform(spec)
}

// assignRange is Kafka's range assignor, per topic: the topic's subscribers,
// sorted by member ID, each get a contiguous range of its partitions; the
// first (partitions mod subscribers) get one more.
func assignRange(spec *assignSpec) map[string]partitionSet {
	out := make(map[string]partitionSet, len(spec.members))
	subscribers := map[string][]string{}
	for _, m := range spec.members {
		out[m] = partitionSet{}
		for _, t := range spec.subs[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for _, name := range sortedKeys(subscribers) {
		info := spec.topics[name]
		ms := subscribers[name]
		n, extra := int(info.Partitions)/len(ms), int(info.Partitions)%len(ms)
		p := int32(0)
		for i, m := range ms {
			size := n
			if i < extra {
				size++
			}
			for range size {
				out[m].add(info.ID, p)
				p++
			}
		}
	}
	return out
}

// assignUniform spreads every subscribed partition over its subscribers so
// that member counts differ by at most one when subscriptions are the same
// (and as evenly as the subscriptions allow otherwise), keeping each
// member's previous partitions where balance permits.
func assignUniform(spec *assignSpec) map[string]partitionSet {
	out := make(map[string]partitionSet, len(spec.members))
	subscribed := make(map[string]map[string]bool, len(spec.members))
	for _, m := range spec.members {
		out[m] = partitionSet{}
		subscribed[m] = map[string]bool{}
		for _, t := range spec.subs[m] {
			subscribed[m][t] = true
		}
	}
	byID := map[[16]byte]string{}
	var all []tpKey
	for _, name := range sortedKeys(spec.topics) {
		info := spec.topics[name]
		byID[info.ID] = name
		for p := range info.Partitions {
			all = append(all, tpKey{info.ID, p})
		}
	}
	eligible := func(m string, t [16]byte) bool { return subscribed[m][byID[t]] }

	// Keep previous partitions that are still valid and not claimed by an
	// earlier member.
	taken := map[tpKey]bool{}
	for _, m := range spec.members {
		spec.prev[m].each(func(t [16]byte, p int32) {
			name, ok := byID[t]
			if !ok || p >= spec.topics[name].Partitions || !eligible(m, t) || taken[tpKey{t, p}] {
				return
			}
			taken[tpKey{t, p}] = true
			out[m].add(t, p)
		})
	}
	// Give each free partition to its least loaded subscriber.
	for _, tp := range all {
		if taken[tp] {
			continue
		}
		best := ""
		for _, m := range spec.members {
			if eligible(m, tp.topic) && (best == "" || out[m].count() < out[best].count()) {
				best = m
			}
		}
		if best != "" {
			out[best].add(tp.topic, tp.part)
		}
	}
	// Move partitions from the most to the least loaded members until no
	// move narrows a gap of two or more.
	for limit := len(all) * (len(spec.members) + 1); limit > 0; limit-- {
		if !uniformMoveOne(spec.members, out, eligible) {
			break
		}
	}
	return out
}

// uniformMoveOne moves one partition from a member holding at least two
// more than another eligible member; it reports whether it moved one.
func uniformMoveOne(members []string, out map[string]partitionSet, eligible func(string, [16]byte) bool) bool {
	byLoad := slices.Clone(members)
	slices.SortStableFunc(byLoad, func(a, b string) int { return out[b].count() - out[a].count() })
	for _, from := range byLoad {
		for i := len(byLoad) - 1; i >= 0; i-- {
			to := byLoad[i]
			if out[from].count()-out[to].count() < 2 {
				break
			}
			// The last eligible partition of from, in topic-ID then
			// partition order, for determinism.
			var move *tpKey
			for _, t := range sortedTopicIDs(out[from]) {
				if !eligible(to, t) {
					continue
				}
				ps := out[from][t]
				move = &tpKey{t, ps[len(ps)-1]}
			}
			if move != nil {
				out[from].remove(move.topic, move.part)
				out[to].add(move.topic, move.part)
				return true
			}
		}
	}
	return false
}

// sortedTopicIDs returns a's topic IDs in byte order.
func sortedTopicIDs(a partitionSet) [][16]byte {
	ids := make([][16]byte, 0, len(a))
	for t := range a {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
	return ids
}
