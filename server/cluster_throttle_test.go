package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fillPartition produces about n bytes of incompressible records to
// partition p of topic (acks=all) and returns the leader's log size.
func fillPartition(t *testing.T, ctx context.Context, tc *testCluster, topic string, p int32, n int) int64 {
	t.Helper()
	cl := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(time.Millisecond))
	const size = 16 << 10
	rng := rand.New(rand.NewPCG(uint64(p), 7))
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range n / size {
		v := make([]byte, size)
		for i := 0; i < size; i += 8 {
			x := rng.Uint64()
			for j := range 8 {
				v[i+j] = byte(x >> (8 * j))
			}
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("filling %s-%d: %v", topic, p, *err)
	}
	var logSize int64
	eventually(t, 10*time.Second, "the leader of "+topic, func() error {
		for i := range tc.n {
			if b := tc.broker(i); b != nil {
				if part, ok := b.partition(topic, p); ok && part.IsLeader() {
					logSize = part.Size()
					return nil
				}
			}
		}
		return errors.New("no leader")
	})
	return logSize
}

// countingProducer produces small records to topic with acks=all until
// stop; acked counts the acknowledgements so far, stop returns the first
// error.
func countingProducer(t *testing.T, tc *testCluster, topic string) (acked func() int64, stop func() error) {
	t.Helper()
	cl := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1000))
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var failed atomic.Pointer[error]
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if i%100 == 99 {
				time.Sleep(time.Millisecond) // paces the producer; not a wait for a condition
			}
			cl.Produce(ctx, &kgo.Record{Value: []byte("live-" + strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
				switch {
				case err == nil:
					n.Add(1)
				case !errors.Is(err, context.Canceled):
					failed.CompareAndSwap(nil, &err)
				}
			})
		}
	}()
	return n.Load, func() error {
		cancel()
		<-done
		cl.Flush(context.Background())
		if err := failed.Load(); err != nil {
			return *err
		}
		return nil
	}
}

// sumStats adds the throttle counts of the running brokers.
func sumStats(bs ...*Broker) replica.ThrottleStats {
	var s replica.ThrottleStats
	for _, b := range bs {
		if b == nil {
			continue
		}
		x := b.cl.throttleStats()
		s.LeaderDelayedBytes += x.LeaderDelayedBytes
		s.FollowerDelayedBytes += x.FollowerDelayedBytes
		s.LeaderDroppedBytes += x.LeaderDroppedBytes
		s.FollowerDroppedBytes += x.FollowerDroppedBytes
	}
	return s
}

// waitRates waits until broker b's throttle has these rates (0: unlimited).
func waitRates(t *testing.T, b *Broker, leader, follower int64) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("broker %d's throttle rates", b.cfg.NodeID), func() error {
		if l, f := b.cl.throttleRates(); l != leader || f != follower {
			return fmt.Errorf("%d, %d; want %d, %d", l, f, leader, follower)
		}
		return nil
	})
}

// A partition of about 8 MiB moves from {1,2,3} to {2,3,4} with both
// throttles at 1 MiB/s on every broker: the throttles delay its bytes and
// the move takes at least (bytes - burst) / rate, while an acks=all
// producer to another topic keeps being acknowledged. Then a second
// partition moves with only broker 4's follower throttle (its own rate,
// over the cluster default's unlimited): it is held back until the
// configs are deleted, then completes promptly.
func TestClusterThrottledMove(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	b4, _ := tc.startBrokerOnly(4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "big", []int32{1, 2, 3}, []int32{1, 2, 3})
	createAssigned(t, ctx, tc, "live", []int32{1, 2, 3})
	tc.waitLeaders("big", 3)
	tc.waitLeaders("live", 3)
	bytes0 := fillPartition(t, ctx, tc, "big", 0, 8<<20)
	bytes1 := fillPartition(t, ctx, tc, "big", 1, 8<<20)
	all := func() []*Broker { return []*Broker{tc.broker(0), tc.broker(1), tc.broker(2), b4} }

	// Phase 1: leader and follower throttles on every replica of big, at
	// 1 MiB/s everywhere (the cluster default).
	const rate = 1 << 20
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: leaderReplicas, Value: kadm.StringPtr("*")}, {Name: followerReplicas, Value: kadm.StringPtr("*")},
	}, "big")); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Name: leaderRate, Value: kadm.StringPtr(strconv.Itoa(rate))}, {Name: followerRate, Value: kadm.StringPtr(strconv.Itoa(rate))},
	})); err != nil {
		t.Fatal(err)
	}
	for _, b := range all() {
		waitRates(t, b, rate, rate)
	}
	acked, stopLive := countingProducer(t, tc, "live")
	eventually(t, 20*time.Second, "live acknowledgements", func() error {
		if n := acked(); n < 100 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	before := sumStats(all()...)
	ackedBefore := acked()
	start := time.Now()
	reassign(t, ctx, adm, "big", 0, []int32{2, 3, 4})
	tc.waitReplicas(adm, "big", 0, []int32{2, 3, 4}, 180*time.Second)
	took := time.Since(start)
	ackedDuring := acked() - ackedBefore
	after := sumStats(all()...)
	burst := int64(max(rate/10, 64<<10))
	floor := time.Duration(float64(bytes0-burst) / rate * float64(time.Second))
	t.Logf("throttled move: %d bytes at %d B/s (floor %v) took %v (%.2fx the floor); leader delayed %d B, follower delayed %d B; %d live acks during the move",
		bytes0, rate, floor.Round(time.Millisecond), took.Round(time.Millisecond), float64(took)/float64(floor),
		after.LeaderDelayedBytes-before.LeaderDelayedBytes, after.FollowerDelayedBytes-before.FollowerDelayedBytes, ackedDuring)
	if took < floor*3/4 {
		t.Errorf("the move took %v, under the throttle's floor of %v for %d bytes at %d B/s", took, floor, bytes0, rate)
	}
	if d := after.LeaderDelayedBytes - before.LeaderDelayedBytes; d < bytes0/2 {
		t.Errorf("the leaders delayed %d bytes of the %d moved", d, bytes0)
	}
	if ackedDuring < 100 {
		t.Errorf("the live producer got %d acknowledgements during the %v move", ackedDuring, took)
	}

	// Phase 2: only broker 4's follower throttle, at its own 64 KiB/s;
	// the cluster default's rates are gone (the legacy AlterConfigs
	// replaces the whole set).
	const slow = 64 << 10
	if err := cfgAlterErr(adm.AlterBrokerConfigsState(ctx, nil)); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: followerRate, Value: kadm.StringPtr(strconv.Itoa(slow))}}, 4)); err != nil {
		t.Fatal(err)
	}
	for _, b := range all()[:3] {
		waitRates(t, b, 0, 0)
	}
	waitRates(t, b4, 0, slow)
	before = sumStats(b4)
	start = time.Now()
	reassign(t, ctx, adm, "big", 1, []int32{2, 3, 4})
	var held int64
	eventually(t, 30*time.Second, "broker 4 holding back big-1", func() error {
		part, ok := b4.partition("big", 1)
		if !ok {
			return errors.New("not open on broker 4")
		}
		held = sumStats(b4).FollowerDelayedBytes - before.FollowerDelayedBytes
		if held < 1<<20 {
			return fmt.Errorf("%d bytes delayed", held)
		}
		if size := part.Size(); size > 0 {
			return nil
		}
		return errors.New("nothing received yet")
	})
	part4, _ := b4.partition("big", 1)
	got, elapsed := part4.Size(), time.Since(start)
	// What the bucket lets through by now: a burst, the rate, and one
	// message over the burst (it leaves the bucket in debt).
	if limit := int64(64<<10) + int64(elapsed.Seconds()*slow) + 1<<20 + 256<<10; got > limit {
		t.Errorf("broker 4 received %d bytes of big-1 in %v, over the %d a %d B/s throttle allows", got, elapsed, limit, slow)
	}
	t.Logf("follower throttle: broker 4 held back %d bytes, received %d of %d in %v", held, got, bytes1, elapsed.Round(time.Millisecond))

	// Deleted: the move completes well before the throttle would let it
	// (bytes1 at 64 KiB/s is over two minutes).
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: followerRate}}, 4)); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: leaderReplicas}, {Op: kadm.DeleteConfig, Name: followerReplicas},
	}, "big")); err != nil {
		t.Fatal(err)
	}
	lifted := time.Now()
	tc.waitReplicas(adm, "big", 1, []int32{2, 3, 4}, 30*time.Second)
	t.Logf("unthrottled: big-1 completed %v after the configs were deleted", time.Since(lifted).Round(time.Millisecond))
	waitRates(t, b4, 0, 0)

	if err := stopLive(); err != nil {
		t.Errorf("a live produce failed: %v", err)
	}
}

// A throttled move survives a leader change (issue 28): big-0 (about
// 3 MiB) moves from {1,2,3} to the two other replicas and broker 4 under
// a leader throttle of 256 KiB/s on every broker; its leader crashes
// while broker 4 is catching up, and the new leader still paces the copy:
// what broker 4 lacked at the crash takes at least its floor at the rate
// (it failed so: the new leader started broker 4, a learner, as caught
// up, promoted it and took it into the ISR, which is not throttled, and
// copied the rest unpaced; now a new leader starts its learners not
// caught up, and a replica's broker keeps the leader throttle of a
// partition it does not lead yet).
func TestClusterThrottledMoveLeaderFailover(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	b4, _ := tc.startBrokerOnly(4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "big", []int32{1, 2, 3})
	tc.waitLeaders("big", 3)
	bytes := fillPartition(t, ctx, tc, "big", 0, 3<<20)

	const rate = 256 << 10
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: leaderReplicas, Value: kadm.StringPtr("*")}}, "big")); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: leaderRate, Value: kadm.StringPtr(strconv.Itoa(rate))}})); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Broker{tc.broker(0), tc.broker(1), tc.broker(2), b4} {
		waitRates(t, b, rate, 0)
	}
	leader := -1
	for i := range 3 {
		if part, ok := tc.broker(i).partition("big", 0); ok && part.IsLeader() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader of big-0")
	}
	var target []int32
	for i := range 3 {
		if i != leader {
			target = append(target, int32(i+1))
		}
	}
	target = append(target, 4)
	reassign(t, ctx, adm, "big", 0, target)
	var part4 *replica.Partition
	eventually(t, 30*time.Second, "broker 4 receiving big-0", func() error {
		part, ok := b4.partition("big", 0)
		if !ok || part.Size() < 256<<10 {
			return errors.New("not yet")
		}
		part4 = part
		return nil
	})
	have := part4.Size()
	tc.crash(leader)
	crashed := time.Now()
	t.Logf("broker %d (the leader) crashed with broker 4 holding %d of %d bytes", leader+1, have, bytes)
	tc.waitReplicas(adm, "big", 0, target, 90*time.Second)
	took := time.Since(crashed)
	burst := int64(max(rate/10, 64<<10))
	floor := time.Duration(float64(bytes-have-burst) / rate * float64(time.Second))
	t.Logf("after the failover: %d bytes at %d B/s (floor %v) took %v (%.2fx the floor)",
		bytes-have, rate, floor.Round(time.Millisecond), took.Round(time.Millisecond), float64(took)/float64(floor))
	if took < floor*3/4 {
		t.Errorf("the copy finished %v after the leader's crash, under the throttle's floor of %v for the %d bytes left at %d B/s", took, floor, bytes-have, rate)
	}
}
