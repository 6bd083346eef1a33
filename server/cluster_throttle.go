package server

import (
	"maps"
	"math"
	"slices"
	"sync/atomic"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
)

// Replication throttles (Kafka's replication quotas, KIP-73; DESIGN.md,
// "Moving partitions"): each broker's raft host has one replica.Throttle
// (newCluster), which paces the appends to, and from, the replicas that
// are catching up, so a partition moving (or a broker returning) does not
// starve the live traffic. updateThrottles, in the report loop (every
// leadershipCheckEvery, on leadership changes and on every metadata
// change), tells it what to pace:
//
//   - the rates: leader.replication.throttled.rate and
//     follower.replication.throttled.rate, this broker's dynamic configs,
//     else the cluster default's, else unlimited (configs_broker.go);
//   - as leader, for each partition this broker holds a replica of whose
//     topic's leader.replication.throttled.replicas lists * or
//     <partition>:<this broker>, the replicas that are learners or out of
//     its ISR (a target replica not added yet counts too, so the first
//     append to a new replica is already paced): the ISR it computes when
//     it leads, the metadata's otherwise, so that a replica that becomes
//     leader during a throttled move paces from its first append (the
//     throttle acts only on what the host sends as leader);
//   - as follower, each partition assigned to this broker that it does not
//     lead, whose topic's follower.replication.throttled.replicas lists *
//     or <partition>:<this broker>, where this broker is a learner or out
//     of the ISR the metadata reports (also before the partition opened).
//
// The topics are read from the metadata only when it moved; a pass with
// no throttled topic does no raft call and allocates nothing, and the
// throttle is told only what changed.

// throttleState is the report loop's view of what the throttle was told
// (used by that goroutine only).
type throttleState struct {
	metaAt                   int64 // the ReplicatedOffset topics and the rates were read at; -1 never
	leaderRate, followerRate int64 // as given to SetRates (0: unlimited)
	topics                   []throttledTopic
	leader                   map[replica.GroupID][]uint64 // as given to SetLeaderThrottled
	follower                 map[replica.GroupID]bool     // as given to SetFollowerThrottled
	parts                    []*replica.Partition         // scratch: the held partitions of a topic
	// rates publishes leaderRate and followerRate to other goroutines
	// (throttleRates).
	rates [2]atomic.Int64
}

// throttledTopic is a topic whose configs throttle some replica of this
// broker.
type throttledTopic struct {
	t                meta.Topic
	leader, follower replica.ThrottledReplicas
}

// throttleRate converts a rate config (bytes/s; Long.MAX_VALUE, Kafka's
// default, is unlimited) to the throttle's (0 is unlimited). Kafka's 0
// stops throttled replication; the throttle's least rate, 1 byte/s (after
// its 64 KiB burst), is the closest.
func throttleRate(n int64) int64 {
	switch {
	case n == math.MaxInt64:
		return 0
	case n <= 0:
		return 1
	}
	return n
}

// kickThrottles asks the report loop to update the throttle now (the
// metadata moved). It never blocks.
func (c *cluster) kickThrottles() {
	select {
	case c.throttleCh <- struct{}{}:
	default:
	}
}

// updateThrottles tells the throttle which replicas to pace, and at what
// rates (see the top of the file). Called by the report loop only.
func (c *cluster) updateThrottles() {
	b := c.b
	st := &c.thr
	if at := b.meta.ReplicatedOffset(); at != st.metaAt {
		st.metaAt = at
		own, defaults := b.meta.NodeConfigs(c.self), b.meta.BrokerConfigs()
		lk, _ := lookupDynamicBrokerKey("leader.replication.throttled.rate")
		fk, _ := lookupDynamicBrokerKey("follower.replication.throttled.rate")
		lr := throttleRate(effectiveBrokerConfig(lk, own, defaults))
		fr := throttleRate(effectiveBrokerConfig(fk, own, defaults))
		if lr != st.leaderRate || fr != st.followerRate {
			c.throttle.SetRates(lr, fr)
			st.leaderRate, st.followerRate = lr, fr
			st.rates[0].Store(lr)
			st.rates[1].Store(fr)
			b.logger.Info("sluice: replication throttle rates", "leader_bytes_per_sec", lr, "follower_bytes_per_sec", fr)
		}
		st.topics = c.throttledTopics(st.topics[:0])
	}
	var leader map[replica.GroupID][]uint64
	var follower map[replica.GroupID]bool
	for i := range st.topics {
		leader, follower = c.throttledReplicas(&st.topics[i], leader, follower)
	}
	if !maps.EqualFunc(leader, st.leader, slices.Equal) {
		c.throttle.SetLeaderThrottled(leader)
		st.leader = leader
	}
	if !maps.Equal(follower, st.follower) {
		c.throttle.SetFollowerThrottled(follower)
		st.follower = follower
	}
}

// throttledTopics appends to out the topics whose throttled replicas
// lists name a replica on this broker (valid lists only: a value stored by
// a broker that accepted more throttles nothing).
func (c *cluster) throttledTopics(out []throttledTopic) []throttledTopic {
	clear(out[:cap(out)]) // drop the old topics' references
	for _, t := range c.b.meta.Topics() {
		lv, lok := t.Configs["leader.replication.throttled.replicas"]
		fv, fok := t.Configs["follower.replication.throttled.replicas"]
		if !lok && !fok {
			continue
		}
		tt := throttledTopic{t: t}
		tt.leader, _ = replica.ParseThrottledReplicas(lv)
		tt.follower, _ = replica.ParseThrottledReplicas(fv)
		if !c.throttlesHere(&tt) {
			continue
		}
		out = append(out, tt)
	}
	return out
}

// throttlesHere reports whether either list of tt can name a replica on
// this broker.
func (c *cluster) throttlesHere(tt *throttledTopic) bool {
	if tt.leader.None() && tt.follower.None() {
		return false
	}
	if tt.leader.All() || tt.follower.All() {
		return true
	}
	for p := range tt.t.Partitions {
		if tt.leader.Has(p, c.self) || tt.follower.Has(p, c.self) {
			return true
		}
	}
	return false
}

// throttledReplicas adds tt's throttled replicas on this broker to the
// leader and follower sets (allocated on first use) and returns them.
func (c *cluster) throttledReplicas(tt *throttledTopic, leader map[replica.GroupID][]uint64, follower map[replica.GroupID]bool) (map[replica.GroupID][]uint64, map[replica.GroupID]bool) {
	b := c.b
	t := &tt.t
	st := &c.thr
	st.parts = st.parts[:0]
	b.mu.RLock()
	for p := range t.Partitions {
		st.parts = append(st.parts, b.parts[topicPartition{t.Name, p}]) // nil when not open
	}
	b.mu.RUnlock()
	defer clear(st.parts)
	self := uint64(c.self)
	for p := range t.Partitions {
		part := st.parts[p]
		g := replica.GroupID{TopicID: t.ID, Partition: p}
		var assigned []int32
		if int(p) < len(t.Assignments) {
			assigned = t.Assignments[p]
		}
		var pl meta.PartitionLeader
		if int(p) < len(t.Leaders) {
			pl = t.Leaders[p]
		}
		leads := part != nil && part.IsLeader()
		if part != nil && tt.leader.Has(p, c.self) {
			// Also for a partition this broker does not lead yet, with
			// the ISR the metadata reports: a new leader paces from its
			// first append (a leader change during a throttled move,
			// issue 28), not from its report loop's next pass.
			voters, learners, err := part.Membership()
			var isr []uint64
			if leads {
				isr = part.ISR()
			} else {
				for _, id := range pl.ISR {
					isr = append(isr, uint64(id))
				}
			}
			var ids []uint64
			add := func(id uint64, learner bool) {
				if id != self && (learner || !slices.Contains(isr, id)) && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
			if err == nil {
				for _, id := range learners {
					add(id, true)
				}
				for _, id := range voters {
					add(id, false)
				}
				for _, id := range assigned {
					add(uint64(id), false) // not added yet: paced from its first append
				}
			}
			if len(ids) > 0 {
				slices.Sort(ids)
				if leader == nil {
					leader = map[replica.GroupID][]uint64{}
				}
				leader[g] = ids
			}
		}
		if leads || !tt.follower.Has(p, c.self) || !slices.Contains(assigned, c.self) {
			continue
		}
		catchingUp := !slices.Contains(pl.ISR, c.self)
		if !catchingUp && part != nil {
			if _, learners, err := part.Membership(); err == nil && slices.Contains(learners, self) {
				catchingUp = true
			}
		}
		if !catchingUp {
			continue
		}
		if follower == nil {
			follower = map[replica.GroupID]bool{}
		}
		follower[g] = true
	}
	return leader, follower
}

// throttleRates returns the leader and follower rates the throttle was
// last given, in bytes/s (0: unlimited).
func (c *cluster) throttleRates() (leader, follower int64) {
	return c.thr.rates[0].Load(), c.thr.rates[1].Load()
}

// throttleStats returns the throttle's counts.
func (c *cluster) throttleStats() replica.ThrottleStats { return c.throttle.Stats() }
