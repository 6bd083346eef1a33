package main

// Replication throttles, set and removed the way Kafka's
// kafka-reassign-partitions.sh does it, so either tool cleans up after the
// other:
//
//   - topic configs leader.replication.throttled.replicas (the moving
//     partitions' current replicas, which send) and
//     follower.replication.throttled.replicas (their new replicas, which
//     receive), as "partition:broker" lists;
//   - broker configs leader.replication.throttled.rate and
//     follower.replication.throttled.rate, in bytes/s, on every broker a
//     move involves (IncrementalAlterConfigs SET on BROKER resources).
//
// Only partitions that gain a replica are throttled: one that only drops
// replicas, or keeps them, copies nothing.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's throttle config keys.
const (
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
	leaderThrottledRate       = "leader.replication.throttled.rate"
	followerThrottledRate     = "follower.replication.throttled.rate"
)

// throttle is what a reassignment throttles.
type throttle struct {
	leader   map[string]string // topic: leader.replication.throttled.replicas
	follower map[string]string // topic: follower.replication.throttled.replicas
	brokers  []int32           // sorted: where the rates go
}

// planThrottle works out the throttle for moving partitions to plan from
// current (Metadata's replicas), counting the reassignments already in
// progress (ongoing) as Kafka's tool does: a partition still moving is
// throttled from where it started, and every ongoing move stays
// throttled too, as the topic configs are replaced, not merged.
func planThrottle(plan []assignment, current map[tp][]int32, ongoing map[tp]reassignment) throttle {
	type move struct{ sources, destinations []int32 }
	moves := map[tp]move{}
	for p, r := range ongoing {
		moves[p] = move{r.source(), r.adding}
	}
	for _, a := range plan {
		sources := current[a.tp()]
		if r, ok := ongoing[a.tp()]; ok {
			sources = r.source()
		}
		var dest []int32
		for _, b := range a.Replicas {
			if !slices.Contains(sources, b) {
				dest = append(dest, b)
			}
		}
		moves[a.tp()] = move{sources, dest}
	}
	th := throttle{leader: map[string]string{}, follower: map[string]string{}}
	var leaders, followers = map[string][]string{}, map[string][]string{}
	for _, p := range sortedTPs(moves) {
		m := moves[p]
		if len(m.destinations) == 0 {
			continue
		}
		for _, b := range sortedIDs(m.sources) {
			leaders[p.Topic] = append(leaders[p.Topic], replicaEntry(p.Partition, b))
			th.brokers = appendNew(th.brokers, b)
		}
		for _, b := range sortedIDs(m.destinations) {
			followers[p.Topic] = append(followers[p.Topic], replicaEntry(p.Partition, b))
			th.brokers = appendNew(th.brokers, b)
		}
	}
	for t, es := range leaders {
		th.leader[t] = strings.Join(es, ",")
	}
	for t, es := range followers {
		th.follower[t] = strings.Join(es, ",")
	}
	slices.Sort(th.brokers)
	return th
}

func replicaEntry(partition, broker int32) string {
	return strconv.Itoa(int(partition)) + ":" + strconv.Itoa(int(broker))
}

func sortedIDs(ids []int32) []int32 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func appendNew(ids []int32, id int32) []int32 {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// topics lists the throttled topics, sorted.
func (th throttle) topics() []string {
	var ts []string
	for t := range th.leader {
		ts = append(ts, t)
	}
	for t := range th.follower {
		if _, ok := th.leader[t]; !ok {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// applyThrottle sets th with rate bytes/s, printing what it sets.
func applyThrottle(ctx context.Context, a *admin, th throttle, rate int64, w io.Writer) error {
	for _, t := range th.topics() {
		var cs []kadm.AlterConfig
		for _, kv := range []struct{ k, v string }{{leaderThrottledReplicas, th.leader[t]}, {followerThrottledReplicas, th.follower[t]}} {
			if kv.v != "" {
				v := kv.v
				cs = append(cs, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv.k, Value: &v})
				fmt.Fprintf(w, "Throttle: topic %s: %s=%s\n", t, kv.k, kv.v)
			}
		}
		if err := alterConfigs(ctx, a, cs, "topic", t); err != nil {
			return err
		}
	}
	if len(th.brokers) == 0 {
		return nil
	}
	r := strconv.FormatInt(rate, 10)
	cs := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: leaderThrottledRate, Value: &r},
		{Op: kadm.SetConfig, Name: followerThrottledRate, Value: &r},
	}
	if err := alterConfigs(ctx, a, cs, "broker", brokerNames(th.brokers)...); err != nil {
		return err
	}
	fmt.Fprintf(w, "Throttle: brokers %s: %s=%s=%s bytes/s\n", brokerList(th.brokers), leaderThrottledRate, followerThrottledRate, r)
	return nil
}

// clearThrottles removes the throttle of topics (DELETE of both topic
// keys) and of every broker (DELETE of both rates), as Kafka's tool does
// once a reassignment is complete; but a topic with a partition still
// moving keeps its throttle, and the brokers keep theirs while any
// partition of the cluster moves, so that one finished reassignment does
// not unthrottle another.
func clearThrottles(ctx context.Context, a *admin, topics []string, w io.Writer) error {
	ongoing, err := a.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	moving := map[string]int{}
	for p := range ongoing {
		moving[p.Topic]++
	}
	var clearTopics []string
	for _, t := range topics {
		if n := moving[t]; n > 0 {
			fmt.Fprintf(w, "Kept the throttled replicas of topic %s: %d of its partitions %s still moving\n", t, n, isAre(n))
			continue
		}
		clearTopics = append(clearTopics, t)
	}
	del := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas}, {Op: kadm.DeleteConfig, Name: followerThrottledReplicas}}
	if len(clearTopics) > 0 {
		if err := alterConfigs(ctx, a, del, "topic", clearTopics...); err != nil {
			return err
		}
		fmt.Fprintf(w, "Removed the throttled replicas (%s, %s) of topics %s\n", leaderThrottledReplicas, followerThrottledReplicas, strings.Join(clearTopics, ","))
	}
	if len(ongoing) > 0 {
		fmt.Fprintf(w, "Kept the brokers' throttle rates: %s of the cluster %s still moving (sluice reassign list)\n", partitions(len(ongoing)), isAre(len(ongoing)))
		return nil
	}
	st, err := a.describe(ctx, []string{})
	if err != nil {
		return err
	}
	if len(st.brokers) == 0 {
		return nil
	}
	del = []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderThrottledRate}, {Op: kadm.DeleteConfig, Name: followerThrottledRate}}
	if err := alterConfigs(ctx, a, del, "broker", brokerNames(st.brokers)...); err != nil {
		return err
	}
	fmt.Fprintf(w, "Removed the throttle rates (%s, %s) of brokers %s\n", leaderThrottledRate, followerThrottledRate, brokerList(st.brokers))
	return nil
}

func brokerNames(ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, strconv.Itoa(int(id)))
	}
	return out
}

// alterConfigs sends IncrementalAlterConfigs of cs to the topic or
// broker resources names, and fails on the first resource that fails.
func alterConfigs(ctx context.Context, a *admin, cs []kadm.AlterConfig, kind string, names ...string) error {
	if err := a.supports(ctx, kmsg.IncrementalAlterConfigs); err != nil {
		return err
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	var rs kadm.AlterConfigsResponses
	var err error
	if kind == "topic" {
		rs, err = a.adm.AlterTopicConfigs(ctx, cs, names...)
	} else {
		var ids []int32
		for _, n := range names {
			id, _ := strconv.Atoi(n)
			ids = append(ids, int32(id))
		}
		rs, err = a.adm.AlterBrokerConfigs(ctx, cs, ids...)
	}
	if err != nil {
		return fmt.Errorf("IncrementalAlterConfigs (%s %s): %w", kind, strings.Join(names, ","), err)
	}
	for _, r := range rs {
		if r.Err != nil {
			msg := r.ErrMessage
			return fmt.Errorf("IncrementalAlterConfigs (%s %s): %w", kind, r.Name, withMessage(r.Err, &msg))
		}
	}
	return nil
}
