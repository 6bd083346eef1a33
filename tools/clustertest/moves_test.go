package clustertest

// The partition-moving scenarios (KIP-455 reassignments, cancels,
// decommissions, preferred leader elections and the automatic leader
// rebalance), each on real processes under the steady workload of the
// fault scenarios (idempotent acks=all producers and a consumer group on
// the three-partition topic), each ending with Finish's history check.
// Three voters, plus a broker-only node 4 where a move needs a fourth
// broker. Times are printed as "MOVE <what> ms=<n> ...", "REBALANCE
// ms=<n> ..." and "ELECT ms=<n> ...".
//
// __consumer_offsets has 10 partitions here (Kafka's 50 elsewhere): a
// decommission moves 8 partitions at a time, and the offsets topic would
// otherwise take most of the scenario's time without testing more.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// moveSets are the brokers' settings of the moves scenarios.
var moveSets = []string{"offsets.topic.num.partitions=10"}

// rebalanceInterval is leader.imbalance.check.interval.seconds in the
// rebalance scenario (Kafka's default is 300).
const rebalanceInterval = 2 * time.Second

// moveScenario starts a cluster, creates the workload topic with an
// explicit assignment and starts the workload, and waits until it is
// acknowledged warmAcks times and its consumer has polled.
func moveScenario(t *testing.T, bound time.Duration, opts clusterOpts, assignment [][]int32) (*cluster, *workload) {
	t.Helper()
	needCluster(t, opts.serial)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel) // registered first, so it runs after the cluster's cleanup
	opts.sets = append(slices.Clone(moveSets), opts.sets...)
	c := newCluster(t, ctx, opts)
	c.CreateTopicAssigned(topic, assignment, map[string]string{"min.insync.replicas": "2"})
	w := startWorkload(t, c, workloadOpts{topic: topic, partitions: partitions, valueBytes: 200})
	c.waitOffsetsTopic(30 * time.Second)
	w.WaitAcks(warmAcks, 30*time.Second)
	w.WaitPolled(30 * time.Second)
	return c, w
}

func topicPartitions(topic string, n int32) []tp {
	var out []tp
	for p := range n {
		out = append(out, tp{topic, p})
	}
	return out
}

// (1) A partition moves from {1,2,3} to {2,3,4} (4 broker-only) under the
// workload, ListPartitionReassignments accurate throughout; node 1's
// folder of it is deleted. (2) A move onto node 4 while 4 is down cannot
// finish: it is listed as in progress, is cancelled, the partition goes
// back, and node 4 restarted has no folder of it. (3) Node 4, holding
// replicas of the workload topic and of a topic created on it, is
// decommissioned (UnregisterBroker): its replicas move to the others, it
// leaves Metadata, and is stopped; the workload goes on.
func TestMoveReassignCancelDecommission(t *testing.T) {
	c, w := moveScenario(t, 2*scenarioTimeout, clusterOpts{brokers: 1}, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})

	// (1) The move, watched.
	p0 := tp{topic, 0}
	watch := c.watchReassignments(map[tp]listing{p0: {[]int32{2, 3, 4, 1}, []int32{4}, []int32{1}}})
	start := time.Now()
	c.Reassign(map[tp][]int32{p0: {2, 3, 4}})
	c.waitReplicas(map[tp][]int32{p0: {2, 3, 4}}, 60*time.Second)
	ms := time.Since(start).Milliseconds()
	watch.Stop(p0)
	bytes := c.logBytes(4, topic, 0)
	t.Logf("%v moved from [1 2 3] to [2 3 4] in %d ms; node 4 holds %d bytes of log", p0, ms, bytes)
	fmt.Printf("MOVE reassign ms=%d bytes=%d partition=0 from=1,2,3 to=2,3,4\n", ms, bytes)
	c.waitNoPartitionDirs(1, []tp{p0}, 20*time.Second)
	w.WaitAcks(afterAcks, 30*time.Second)

	// (2) A move that cannot finish, cancelled.
	p2 := tp{topic, 2}
	c.Kill(4)
	want := listing{[]int32{3, 4, 2, 1}, []int32{4}, []int32{1}}
	// Kafka's revert: the listed replicas without the adding ones, in
	// the listed order, so [3 2 1] (the replicas the target kept first),
	// not the original [3 1 2]. On raft the adding replica may be a voter
	// already, so a cancel is a move back: until 4 has left the group it
	// is listed as [3 2 1 4], adding nothing, removing 4.
	reverted := revert(want)
	back := listing{append(slices.Clone(reverted), want.adding...), nil, want.adding}
	var cancelIssued atomic.Bool
	watch = c.watchReassignmentsFunc(func(k tp, l listing) error {
		switch {
		case k != p2:
			return fmt.Errorf("%v listed (%v): no reassignment of it was started", k, l)
		case l.equal(want), cancelIssued.Load() && l.equal(back):
			return nil
		}
		return fmt.Errorf("%v listed as %v, want %v (or, once cancelled, %v)", k, l, want, back)
	})
	c.Reassign(map[tp][]int32{p2: {3, 4, 2}})
	c.poll(fmt.Sprintf("%v listed as in progress", p2), 10*time.Second, func(ctx context.Context) error {
		got, err := c.Reassignments(ctx)
		if err != nil {
			return err
		}
		if l, ok := got[p2]; !ok || !l.equal(want) {
			return fmt.Errorf("listed: %v", got)
		}
		return nil
	})
	// The partition keeps working while its move waits for node 4.
	w.WaitAcks(afterAcks, 30*time.Second)
	if got, err := c.Reassignments(c.ctx); err != nil || !got[p2].equal(want) {
		t.Fatalf("%v with node 4 down: listed %v (%v); the move cannot have finished", p2, got, err)
	}
	cancelled := time.Now()
	cancelIssued.Store(true)
	c.Reassign(map[tp][]int32{p2: nil})
	c.waitReplicas(map[tp][]int32{p2: reverted}, 30*time.Second)
	ms = time.Since(cancelled).Milliseconds()
	fmt.Printf("MOVE cancel ms=%d partition=2\n", ms) // the cancel and the move back (4 is down: a learner or voter leaving)
	if got, err := c.Reassignments(c.ctx); err != nil || len(got) != 0 {
		t.Fatalf("after the cancel: listed %v (%v), want nothing", got, err)
	}
	c.Start(4)
	c.waitInISR(4, []tp{p0}, 30*time.Second)
	c.waitNoPartitionDirs(4, []tp{p2}, 10*time.Second)
	watch.Stop(p2)
	if a := c.Assignments()[p2]; !slices.Equal(a, reverted) {
		t.Fatalf("%v on %v after node 4's restart, want %v", p2, a, reverted)
	}

	// (3) Decommission node 4: it holds p0 of the workload topic, both
	// partitions of dc (the preferred leader of dc-0), some of
	// __consumer_offsets likely (placed over the four brokers).
	c.CreateTopicAssigned("dc", [][]int32{{4, 1, 2}, {2, 3, 4}}, nil)
	var dcValues []string
	for i := range 100 {
		dcValues = append(dcValues, fmt.Sprintf("dc-%d", i))
	}
	c.produceValues("dc", 2, dcValues)
	before := map[tp][]int32{}
	for k, rs := range c.Assignments() {
		if slices.Contains(rs, 4) {
			before[k] = rs
		}
	}
	t.Logf("node 4 holds replicas of %d partitions: %v", len(before), before)
	watch = c.watchReassignmentsFunc(func(k tp, l listing) error {
		cur, ok := before[k]
		if !ok {
			return fmt.Errorf("%v listed (%v): node 4 holds no replica of it", k, l)
		}
		// The drain replaces 4 by one broker, in 4's position.
		if len(l.adding) != 1 || slices.Contains(cur, l.adding[0]) {
			return fmt.Errorf("%v listed as %v: the drain adds one broker new to %v", k, l, cur)
		}
		target := slices.Clone(cur)
		target[slices.Index(cur, 4)] = l.adding[0]
		if w := moveListing(cur, target); !l.equal(w) {
			return fmt.Errorf("%v listed as %v, want %v", k, l, w)
		}
		return nil
	})
	start = time.Now()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = 4
	ctx, cancel := c.bounded(15 * time.Second)
	resp, err := req.RequestWith(ctx, c.cl)
	cancel()
	if err != nil {
		t.Fatalf("UnregisterBroker 4: %v", err)
	}
	if err := errorCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		t.Fatalf("UnregisterBroker 4: %v", err)
	}
	t.Logf("UnregisterBroker 4: %s", *resp.ErrorMessage)
	c.poll("no partition names node 4 and Metadata lists no broker 4", 60*time.Second, func(ctx context.Context) error {
		md, err := c.metadataAll(ctx, 0)
		if err != nil {
			return err
		}
		for name, td := range md.Topics {
			for _, pd := range td.Partitions.Sorted() {
				if slices.Contains(pd.Replicas, 4) || len(pd.Replicas) != 3 {
					return fmt.Errorf("%s-%d on %v", name, pd.Partition, pd.Replicas)
				}
			}
		}
		if slices.Contains(md.Brokers.NodeIDs(), 4) {
			return errors.New("broker 4 still in Metadata")
		}
		return nil
	})
	ms = time.Since(start).Milliseconds()
	var moved []tp
	for k := range before {
		moved = append(moved, k)
	}
	watch.Stop()
	fmt.Printf("MOVE decommission ms=%d node=4 partitions=%d\n", ms, len(moved))
	after := c.Assignments()
	for _, k := range moved {
		if slices.Contains(after[k], 4) {
			t.Errorf("%v still on %v", k, after[k])
		}
	}
	c.waitNoPartitionDirs(4, moved, 20*time.Second)
	if d := c.Stop(4); c.proc(4).Err() != nil {
		t.Errorf("node 4's exit after SIGTERM (%v): %v", d, c.proc(4).Err())
	}
	c.poll("node 4 unregistered once stopped", 30*time.Second, func(ctx context.Context) error {
		ids, err := c.registered(ctx)
		if err != nil {
			return err
		}
		if slices.Contains(ids, 4) {
			return fmt.Errorf("DescribeCluster lists %v", ids)
		}
		return nil
	})
	seen := c.readValues("dc")
	for _, v := range dcValues {
		if seen[v] != 1 {
			t.Errorf("dc: acknowledged %s read %d times after the decommission", v, seen[v])
		}
	}
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (4) The active controller is killed (SIGKILL) while a reassignment of
// every partition of the workload topic (the controller's replica
// replaced by node 4's) is in progress (node 4 paused so it cannot
// finish before): a new controller takes over, the moves complete, the
// old controller restarted deletes its folders. Then every partition
// (the offsets topic's too) is moved off another voter with
// AlterPartitionReassignments, and that voter is stopped.
func TestMoveControllerKill(t *testing.T) {
	c, w := moveScenario(t, 2*scenarioTimeout, clusterOpts{brokers: 1}, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	ctrl := c.Controller()
	moves := map[tp][]int32{}
	want := map[tp]listing{}
	for k, rs := range c.Assignments() {
		if k.topic != topic {
			continue
		}
		to := slices.Clone(rs)
		to[slices.Index(rs, ctrl)] = 4
		moves[k], want[k] = to, moveListing(rs, to)
	}
	c.Pause(4)
	watch := c.watchReassignments(want)
	c.Reassign(moves)
	c.poll("every move listed as in progress", 10*time.Second, func(ctx context.Context) error {
		got, err := c.Reassignments(ctx)
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("listed: %v", got)
		}
		return nil
	})
	c.Kill(int(ctrl))
	killed := time.Now()
	// Asked of the nodes running (a client's random pick could be the
	// paused node 4, whose answer never comes).
	var next int32
	c.poll(fmt.Sprintf("an active controller other than the killed node %d", ctrl), 20*time.Second, func(ctx context.Context) error {
		next = -1
		for _, asking := range c.answering() {
			id, err := localcluster.ControllerOf(ctx, c.cl.Broker(asking))
			switch {
			case err != nil:
				return fmt.Errorf("node %d: %w", asking, err)
			case id == ctrl:
				return fmt.Errorf("node %d's DescribeCluster still names node %d", asking, id)
			case next >= 0 && id != next:
				return fmt.Errorf("nodes name controllers %d and %d", next, id)
			}
			next = id
		}
		return nil
	})
	ctrlMs := time.Since(killed).Milliseconds()
	ctx, cancel := c.bounded(5 * time.Second)
	got, err := reassignmentsFrom(ctx, c.cl.Broker(int(next)))
	cancel()
	if err != nil || len(got) != len(want) {
		t.Errorf("the new controller %d lists %v (%v), want the %d moves in progress", next, got, err, len(want))
	}
	c.Resume(4)
	resumed := time.Now()
	c.waitReplicas(moves, 60*time.Second)
	ms, resumeMs := time.Since(killed).Milliseconds(), time.Since(resumed).Milliseconds()
	t.Logf("node %d took over %d ms after node %d's SIGKILL; the moves completed %d ms after node 4 resumed", next, ctrlMs, ctrl, resumeMs)
	watch.Stop(topicPartitions(topic, partitions)...)
	var bytes int64
	for p := range int32(partitions) {
		bytes += c.logBytes(4, topic, p)
	}
	fmt.Printf("MOVE controller-kill ms=%d controller-ms=%d after-resume-ms=%d bytes=%d old-controller=%d new-controller=%d partitions=%d\n",
		ms, ctrlMs, resumeMs, bytes, ctrl, next, len(moves))
	w.WaitAcks(afterAcks, 30*time.Second)
	c.Start(int(ctrl))
	c.waitNoPartitionDirs(int(ctrl), topicPartitions(topic, partitions), 30*time.Second)
	w.WaitAcks(afterAcks, 30*time.Second)

	// Every partition off one voter other than the old controller, then
	// that voter stopped.
	off := int32(3)
	if off == ctrl {
		off = 2
	}
	moves, want = map[tp][]int32{}, map[tp]listing{}
	for k, rs := range c.Assignments() {
		i := slices.Index(rs, off)
		if i < 0 {
			continue
		}
		to := slices.Clone(rs)
		for _, n := range c.nodes {
			if !slices.Contains(rs, int32(n.ID)) {
				to[i] = int32(n.ID)
				break
			}
		}
		moves[k], want[k] = to, moveListing(rs, to)
	}
	var held []tp
	for k := range moves {
		held = append(held, k)
	}
	watch = c.watchReassignments(want)
	start := time.Now()
	c.Reassign(moves)
	c.waitReplicas(moves, 60*time.Second)
	ms = time.Since(start).Milliseconds()
	watch.Stop()
	fmt.Printf("MOVE off-node ms=%d node=%d partitions=%d\n", ms, off, len(moves))
	c.waitNoPartitionDirs(int(off), held, 20*time.Second)
	if d := c.Stop(int(off)); c.proc(int(off)).Err() != nil {
		t.Errorf("node %d's exit after SIGTERM (%v): %v", off, d, c.proc(int(off)).Err())
	}
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// restartPreferred restarts (SIGTERM, start) a voter other than the
// active controller that is the preferred leader of some partitions of
// topics, after every partition is led by its preferred replica, and
// waits until it is back in the ISR of those partitions. It returns the
// node, its preferred partitions and when it was back.
func restartPreferred(t *testing.T, c *cluster, topics ...string) (int32, []tp, time.Time) {
	t.Helper()
	ctrl := c.Controller()
	var victim int32 = -1
	var prefers []tp
	for _, n := range c.nodes {
		if int32(n.ID) == ctrl {
			continue
		}
		if ps := c.preferredOf(int32(n.ID), topics...); len(ps) > 0 {
			victim, prefers = int32(n.ID), ps
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no node but the controller %d is a preferred leader", ctrl)
	}
	c.Stop(int(victim))
	c.Start(int(victim))
	c.waitInISR(victim, prefers, 30*time.Second)
	return victim, prefers, time.Now()
}

// (5) The automatic leader rebalance: with
// leader.imbalance.check.interval.seconds=2, a broker that is the
// preferred leader of some partitions is restarted (its controlled
// shutdown moves their leaderships away); they go back to it within
// three intervals and an election.
func TestRebalanceAuto(t *testing.T) {
	c, w := moveScenario(t, scenarioTimeout, clusterOpts{sets: []string{
		fmt.Sprintf("leader.imbalance.check.interval.seconds=%d", int(rebalanceInterval/time.Second))}},
		[][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	c.waitPreferred(3*rebalanceInterval+10*time.Second, topic, offsetsTopic)
	victim, prefers, back := restartPreferred(t, c, topic, offsetsTopic)
	c.waitPreferred(3*rebalanceInterval+5*time.Second, topic, offsetsTopic)
	ms := time.Since(back).Milliseconds()
	t.Logf("node %d, preferred leader of %v, led them again %d ms after it was back in their ISRs", victim, prefers, ms)
	fmt.Printf("REBALANCE ms=%d node=%d partitions=%d interval-ms=%d\n", ms, victim, len(prefers), rebalanceInterval.Milliseconds())
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (5') Without the automatic rebalance, the restarted broker's
// leaderships stay away until an explicit ElectLeaders (preferred, every
// partition) moves them back; a second one finds nothing to elect.
func TestElectLeadersPreferred(t *testing.T) {
	c, w := moveScenario(t, scenarioTimeout, clusterOpts{sets: []string{"auto.leader.rebalance.enable=false"}},
		[][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	topics := []string{topic, offsetsTopic}
	var off []tp
	c.poll("the nodes agree on every leader", 30*time.Second, func(ctx context.Context) (err error) {
		off, _, err = c.notPreferred(ctx, topics...)
		return err
	})
	if len(off) > 0 {
		// The first elections need not pick the preferred replicas:
		// elect them first, so the restart below is what moves them.
		t.Logf("not led by their preferred replica at the start: %v; electing them", off)
		ctx, cancel := c.bounded(30 * time.Second)
		_, err := c.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
		cancel()
		if err != nil {
			t.Fatalf("ElectLeaders: %v", err)
		}
		c.waitPreferred(15*time.Second, topics...)
	}
	victim, prefers, _ := restartPreferred(t, c, topics...)
	w.WaitAcks(afterAcks, 30*time.Second)
	c.poll("the nodes agree on every leader", 30*time.Second, func(ctx context.Context) (err error) {
		off, _, err = c.notPreferred(ctx, topics...)
		return err
	})
	if !slices.Equal(off, prefers) {
		t.Fatalf("after node %d's restart without the rebalance, not led by their preferred replica: %v; want its %v", victim, off, prefers)
	}

	start := time.Now()
	ctx, cancel := c.bounded(30 * time.Second)
	res, err := c.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil) // null topics: every partition
	cancel()
	ms := time.Since(start).Milliseconds()
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	var elected []tp
	for _, ps := range res {
		for _, r := range ps {
			if r.Err != nil {
				t.Errorf("ElectLeaders %s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
			}
			elected = append(elected, tp{r.Topic, r.Partition})
		}
	}
	slices.SortFunc(elected, cmpTP)
	if !slices.Equal(elected, prefers) {
		t.Errorf("ElectLeaders with null topics answered %v, want node %d's preferred partitions %v", elected, victim, prefers)
	}
	c.waitPreferred(5*time.Second, topics...)
	fmt.Printf("ELECT ms=%d node=%d partitions=%d\n", ms, victim, len(elected))

	// Again: nothing to elect (null topics: nothing answered; named:
	// ELECTION_NOT_NEEDED each).
	ctx, cancel = c.bounded(30 * time.Second)
	defer cancel()
	res, err = c.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res {
		for _, r := range ps {
			t.Errorf("a second ElectLeaders of every partition answered %s-%d: %v", r.Topic, r.Partition, r.Err)
		}
	}
	set := kadm.TopicsSet{}
	for _, k := range prefers {
		set.Add(k.topic, k.p)
	}
	res, err = c.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ps := range res {
		for _, r := range ps {
			n++
			if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Errorf("a second ElectLeaders of %s-%d: %v, want ELECTION_NOT_NEEDED", r.Topic, r.Partition, r.Err)
			}
		}
	}
	if n != len(prefers) {
		t.Errorf("a second ElectLeaders of %v answered %d partitions", prefers, n)
	}
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}
