package clustertest

// The fault scenarios, each on a fresh three-node cluster with an
// idempotent acks=all workload and a consumer group on a topic of three
// partitions, replication factor 3, min.insync.replicas 2. Each ends by
// checking the history (Finish) and is bounded by scenarioTimeout.
//
// They run by default (go test -short skips them). Failover times are printed as
// parseable lines: "FAILOVER <what> ms=<n> ...".

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	scenarioTimeout = 90 * time.Second
	topic           = "faults"
	partitions      = 3
	warmAcks        = 500 // acknowledged before a fault
	afterAcks       = 300 // acknowledged after a fault healed
)

// needCluster skips a scenario under go test -short (each starts three
// broker processes and runs for tens of seconds) and, unless serial, runs
// it in parallel with the package's other parallel scenarios: go test
// runs -parallel of them at once, GOMAXPROCS by default; test.sh runs
// four at a time on CI's two cores. A scenario mostly waits (on faults'
// timeouts, failovers, polls: the package used about a third of one core
// when they ran one at a time; four at a time, about one core). A serial one runs alone, before the parallel ones: one whose
// check rests on a wall-clock margin a loaded machine could eat.
func needCluster(t *testing.T, serial bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the multi-process cluster scenarios are skipped")
	}
	if !serial {
		t.Parallel()
	}
}

// scenario starts a three-node cluster, creates the topic and starts the
// workload, and waits until it is acknowledged warmAcks times and its
// consumer has polled.
func scenario(t *testing.T, bound time.Duration, opts clusterOpts, topicConfigs map[string]string, wopts workloadOpts) (*cluster, *workload) {
	t.Helper()
	needCluster(t, opts.serial)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel) // registered first, so it runs after the cluster's cleanup
	c := newCluster(t, ctx, opts)
	cfg := map[string]string{"min.insync.replicas": "2"}
	for k, v := range topicConfigs {
		cfg[k] = v
	}
	c.CreateTopic(topic, partitions, 3, cfg)
	wopts.topic, wopts.partitions = topic, partitions
	w := startWorkload(t, c, wopts)
	w.WaitAcks(warmAcks, 30*time.Second)
	w.WaitPolled(30 * time.Second)
	return c, w
}

// others returns the nodes other than ids.
func (c *cluster) others(ids ...int) []int {
	var o []int
	for _, n := range c.nodes {
		if !slices.Contains(ids, n.ID) {
			o = append(o, n.ID)
		}
	}
	return o
}

// rejoin waits until node id is back: every partition writable and id in
// every ISR.
func (c *cluster) rejoin(id int) {
	c.t.Helper()
	c.WaitWritable(topic, 30*time.Second)
	c.WaitISR(topic, id, 30*time.Second)
}

// probeClient is a producer to topic that has already produced to
// partition p, so it knows p's current leader.
func probeClient(t *testing.T, c *cluster, p int32, deliveryTimeout time.Duration) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		// kgo refreshes metadata at most every MetadataMinAge (5 s by
		// default), which would make the client, not the cluster, set
		// the failover time; Kafka's Java client refreshes after
		// retry.backoff.ms (100 ms).
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := c.bounded(30 * time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("probe-warm")}).FirstErr(); err != nil {
		t.Fatalf("probe produce to partition %d: %v", p, err)
	}
	return cl
}

// (1) The leader of partition 0 is killed with SIGKILL and restarted.
func TestScenarioLeaderKill(t *testing.T) {
	c, w := scenario(t, scenarioTimeout, clusterOpts{}, nil, workloadOpts{})
	leader := c.Leader(topic, 0)
	probe := probeClient(t, c, 0, 30*time.Second)
	c.Kill(int(leader))
	killed := time.Now()
	ctx, cancel := c.bounded(30 * time.Second)
	err := probe.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("probe-after-kill")}).FirstErr()
	cancel()
	if err != nil {
		t.Fatalf("no produce to partition 0 succeeded within 30s of its leader's SIGKILL: %v", err)
	}
	ms := time.Since(killed).Milliseconds()
	t.Logf("leader-kill failover: %d ms from the SIGKILL of node %d to the first produce to partition 0 through a client that knew it", ms, leader)
	fmt.Printf("FAILOVER leader-kill ms=%d partition=0 old-leader=%d\n", ms, leader)
	if l := c.LeaderFrom(c.others(int(leader))[0], topic, 0, leader, 10*time.Second); l == leader {
		t.Fatalf("partition 0 still led by the killed node %d", leader)
	}
	w.WaitAcks(afterAcks, 30*time.Second)
	c.Start(int(leader))
	c.rejoin(int(leader))
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (2) The leader of partition 0 is paused (SIGSTOP) for longer than
// broker.session.timeout.ms, then resumed.
func TestScenarioLeaderPause(t *testing.T) {
	c, w := scenario(t, scenarioTimeout, clusterOpts{}, nil, workloadOpts{})
	leader := c.Leader(topic, 0)
	c.Pause(int(leader))
	paused := time.Now()
	other := c.others(int(leader))[0]
	l := c.LeaderFrom(other, topic, 0, leader, sessionMs*time.Millisecond+10*time.Second)
	ms := time.Since(paused).Milliseconds()
	t.Logf("partition 0 led by node %d %d ms after node %d was paused", l, ms, leader)
	fmt.Printf("FAILOVER leader-pause ms=%d partition=0 old-leader=%d new-leader=%d\n", ms, leader, l)
	w.WaitAcks(afterAcks, 30*time.Second)
	// Hold the pause past the session timeout, so the node is fenced.
	if d := time.Until(paused.Add(sessionMs*time.Millisecond + time.Second)); d > 0 {
		time.Sleep(d) // the fault's duration, not a wait for a condition
	}
	c.Resume(int(leader))
	c.rejoin(int(leader))
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (3) The active controller is killed with SIGKILL: another becomes
// active and serves a metadata write (a topic creation); then it is
// restarted.
func TestScenarioControllerKill(t *testing.T) {
	c, w := scenario(t, scenarioTimeout, clusterOpts{}, nil, workloadOpts{})
	ctrl := c.Controller()
	c.Kill(int(ctrl))
	killed := time.Now()
	var next int32
	c.poll(fmt.Sprintf("an active controller other than the killed node %d", ctrl), 20*time.Second, func(ctx context.Context) error {
		id, err := localcluster.ControllerOf(ctx, c.cl)
		if err != nil {
			return err
		}
		if id == ctrl {
			return fmt.Errorf("DescribeCluster still names node %d", id)
		}
		next = id
		return nil
	})
	ms := time.Since(killed).Milliseconds()
	fmt.Printf("FAILOVER controller-kill ms=%d old-controller=%d new-controller=%d\n", ms, ctrl, next)
	c.CreateTopic("after-controller-kill", 1, 2, nil)
	w.WaitAcks(afterAcks, 30*time.Second)
	c.Start(int(ctrl))
	c.rejoin(int(ctrl))
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (4) The leader of partition 0 is cut off from the other two brokers
// (its proxies black-hole or reset), for longer than the session
// timeout, then healed. Whatever the isolated node acknowledged must
// survive (with acks=all and min.insync.replicas=2 it can acknowledge
// nothing on its own).
func TestScenarioIsolateBlackhole(t *testing.T) { isolateScenario(t, faultproxy.Blackhole) }
func TestScenarioIsolateReset(t *testing.T)     { isolateScenario(t, faultproxy.Reset) }

func isolateScenario(t *testing.T, mode faultproxy.Mode) {
	c, w := scenario(t, scenarioTimeout, clusterOpts{cut: mode}, nil, workloadOpts{})
	leader := c.Leader(topic, 0)
	c.Isolate(int(leader))
	cut := time.Now()
	other := c.others(int(leader))[0]
	l := c.LeaderFrom(other, topic, 0, leader, sessionMs*time.Millisecond+10*time.Second)
	ms := time.Since(cut).Milliseconds()
	fmt.Printf("FAILOVER isolate-%v ms=%d partition=0 old-leader=%d new-leader=%d\n", mode, ms, leader, l)
	w.WaitAcks(afterAcks, 30*time.Second)
	if d := time.Until(cut.Add(sessionMs*time.Millisecond + time.Second)); d > 0 {
		time.Sleep(d) // the fault's duration
	}
	c.Heal()
	c.rejoin(int(leader))
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (5) A rolling restart: each broker in turn gets SIGTERM (a controlled
// shutdown: its leaderships move first), is restarted, and rejoins every
// ISR before the next.
func TestScenarioRollingRestart(t *testing.T) {
	c, w := scenario(t, 2*scenarioTimeout, clusterOpts{}, nil, workloadOpts{})
	for _, n := range c.nodes {
		led := c.LedBy(topic, n.ID)
		start := c.Terminate(n.ID)
		moved := c.WaitNotLeader(topic, n.ID, c.others(n.ID)[0], stopTimeout)
		exit := c.WaitExit(n.ID, start)
		ms := moved.Sub(start).Milliseconds()
		t.Logf("node %d: its %d leaderships (%v) moved %d ms after SIGTERM; it exited after %v", n.ID, len(led), led, ms, exit.Round(time.Millisecond))
		fmt.Printf("FAILOVER controlled-shutdown ms=%d node=%d leaderships=%d exit-ms=%d\n", ms, n.ID, len(led), exit.Milliseconds())
		if err := c.proc(n.ID).Err(); err != nil {
			t.Errorf("node %d exit after SIGTERM: %v", n.ID, err)
		}
		c.Start(n.ID)
		c.rejoin(n.ID)
		w.WaitAcks(100, 30*time.Second)
	}
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (6) Two of the three brokers are killed: an acks=all produce must not
// succeed (raft cannot commit on one node of three), nor may the
// workload's; when they return, nothing acknowledged is lost.
func TestScenarioTwoOfThreeDown(t *testing.T) {
	// Serial: no workload record may be acknowledged later than 500 ms
	// after the kills.
	c, w := scenario(t, 2*scenarioTimeout, clusterOpts{serial: true}, nil, workloadOpts{})
	leader := int(c.Leader(topic, 0))
	down := []int{leader, c.others(leader)[0]}
	for _, id := range down {
		c.Kill(id)
	}
	killed := time.Now()
	// One produce to each partition, all at once, each through its own
	// client: each waits out its delivery timeout. Not idempotent: kgo
	// does not fail an idempotent batch whose request timed out (it
	// cannot know the sequence number's fate), so a partition whose
	// leader is the node left, which accepts and never answers the
	// request, would hold its produce for ever.
	var rs [partitions]*kgo.Record
	var errs [partitions]error
	var wg sync.WaitGroup
	for p := range int32(partitions) {
		rs[p] = &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "probe-minority-%d", p)}
		probe, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DisableIdempotentWrite(),
			kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		wg.Go(func() {
			ctx, cancel := c.bounded(15 * time.Second)
			defer cancel()
			errs[p] = probe.ProduceSync(ctx, rs[p]).FirstErr()
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err == nil {
			t.Errorf("an acks=all produce to partition %d succeeded with nodes %v of 3 down: offset %d", p, down, rs[p].Offset)
		} else {
			t.Logf("partition %d with nodes %v down: the produce failed as it must: %v", p, down, err)
		}
	}
	restart := time.Now()
	if acks := w.AckedBetween(killed.Add(500*time.Millisecond), restart); len(acks) > 0 {
		t.Errorf("%d workload records acknowledged with two of three nodes down, first: %v", len(acks), acks[:min(len(acks), 5)])
	}
	for _, id := range down {
		c.Start(id)
	}
	for _, id := range down {
		c.rejoin(id)
	}
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.Finish(healed)
}

// (7) A broker is down while retention (small segments and
// retention.bytes) removes everything it lacks; restarted, it catches up
// (by a raft snapshot), rejoins every ISR, and its log end offset equals
// the leader's.
func TestScenarioCatchUpAfterRetention(t *testing.T) {
	c, w := scenario(t, 2*scenarioTimeout,
		clusterOpts{sets: []string{"log.retention.check.interval.ms=500", "log.segment.delete.delay.ms=0"}},
		map[string]string{"segment.bytes": "65536", "retention.bytes": "131072"},
		workloadOpts{interval: time.Millisecond, valueBytes: 1024})
	// The victim: a node that leads no partition when one exists.
	victim := c.nodes[len(c.nodes)-1].ID
	for _, n := range c.nodes {
		if len(c.LedBy(topic, n.ID)) == 0 {
			victim = n.ID
			break
		}
	}
	c.Kill(victim)
	atKill := c.EndOffsets(topic)
	c.poll(fmt.Sprintf("retention removed every offset node %d had (end offsets at its kill: %v)", victim, atKill), 60*time.Second,
		func(context.Context) error {
			starts := c.StartOffsets(topic)
			for p, end := range atKill {
				if starts[p] <= end {
					return fmt.Errorf("partition %d: log start %d, node %d's end %d", p, starts[p], victim, end)
				}
			}
			return nil
		})
	c.Start(victim)
	c.rejoin(victim)
	healed := time.Now()
	w.WaitAcks(afterAcks, 30*time.Second)
	w.stopProducing()
	ends := c.EndOffsets(topic)
	c.poll(fmt.Sprintf("node %d's log end offsets equal the leaders' %v", victim, ends), 30*time.Second, func(ctx context.Context) error {
		for p, end := range ends {
			got, err := c.ReplicaEndOffset(ctx, victim, topic, p)
			if err != nil {
				return fmt.Errorf("partition %d: %w (ListOffsets with ReplicaID -2, which Kafka answers from a follower's log)", p, err)
			}
			if got != end {
				return fmt.Errorf("partition %d: node %d ends at %d, the leader at %d", p, victim, got, end)
			}
		}
		return nil
	})
	w.Finish(healed)
	if w.AckedBelow(c.StartOffsets(topic)) == 0 {
		t.Errorf("retention removed no acknowledged record: the scenario did not exercise it")
	}
}
