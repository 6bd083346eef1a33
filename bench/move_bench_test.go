package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The move benchmark's shape.
const (
	moveTopic = "move"
	liveTopic = "live"
	// moveDefaultBytes is the partition size moved (SLUICE_BENCH_MOVE_BYTES
	// overrides it, in bytes of record values).
	moveDefaultBytes = 1 << 30
	// liveRate is the offered rate of the live producer measured while the
	// partition moves: 5 MiB/s of 1 KiB values.
	liveRate = 5120 // records per second
	// moveTimeout bounds one move.
	moveTimeout = 10 * time.Minute
)

// BenchmarkClusterMove moves a partition of moveDefaultBytes (1 GiB of
// 1 KiB values; SLUICE_BENCH_MOVE_BYTES sets another size) between
// brokers, as kafka-reassign-partitions.sh would, on four sluice processes
// (three controller voters, one broker-only), and reports what it costs:
//
//   - ns/op and MB/s: the time from AlterPartitionReassignments to the
//     reassignment's completion (ListPartitionReassignments empty,
//     Metadata showing the target with every replica in the ISR), over the
//     partition's bytes;
//   - moved-MB: the bytes of the new replica's segment files when the
//     move completed;
//   - live-p99-ms (and live-p50-ms): the acks=all latency of a producer
//     offering liveRate (5 MiB/s) to another topic (RF=3 on brokers 1-3)
//     during the move, counted from when each record was due;
//   - throttle-MBps: the replication throttle of the sub-benchmark
//     (Kafka's leader/follower.replication.throttled.rate on every broker
//     and leader/follower.replication.throttled.replicas "*" on the moving
//     topic), 0 for none.
//
// Sub-benchmarks: throttle=none, then throttle=<rate> (50 MiB/s), each
// moving the partition between {1,2,3} and {2,3,4} (back and forth).
// Run with -benchtime 1x: one move per sub-benchmark (b.N moves
// otherwise, alternating direction).
func BenchmarkClusterMove(b *testing.B) {
	size := int64(moveDefaultBytes)
	if v := os.Getenv("SLUICE_BENCH_MOVE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1<<20 {
			b.Fatalf("SLUICE_BENCH_MOVE_BYTES=%q: want a byte count >= 1 MiB", v)
		}
		size = n
	}
	bin := sluiceBinary(b)
	c := startProcClusterWith(b, bin, 1)
	c.createAssigned(moveTopic, [][]int32{{1, 2, 3}})
	c.createTopic(liveTopic, 3, 3, map[string]string{"min.insync.replicas": "2"})
	fill := newClusterProducer(b, c, moveTopic, 8192)
	start := time.Now()
	if err := fillTopic(fill, size); err != nil {
		b.Fatalf("fill %s: %v", moveTopic, err)
	}
	b.Logf("filled %s-0 with %d MiB in %v", moveTopic, size>>20, time.Since(start).Round(time.Millisecond))
	live := newClusterProducer(b, c, liveTopic, 50000)
	adm := kadm.NewClient(fill)
	on := []int32{1, 2, 3}
	for _, rate := range []int64{0, 50 << 20} {
		name := "throttle=none"
		if rate > 0 {
			name = fmt.Sprintf("throttle=%dMiBps", rate>>20)
		}
		b.Run(name, func(b *testing.B) {
			if rate > 0 {
				setThrottle(b, adm, rate)
				defer setThrottle(b, adm, 0)
			}
			b.SetBytes(size)
			var moved int64
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				to := []int32{2, 3, 4}
				if slices.Contains(on, 4) {
					to = []int32{1, 2, 3}
				}
				newcomer := to[0]
				if newcomer == 2 {
					newcomer = 4
				}
				stopLive := offerLive(live)
				c.reassign(fill, moveTopic, 0, to)
				lat = append(lat, stopLive()...)
				on = to
				b.StopTimer()
				moved = dirSize(filepath.Join(c.nodes[newcomer-1].Dir, moveTopic+"-0"))
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(moved)/1e6, "moved-MB")
			b.ReportMetric(ms(percentile(lat, 0.99)), "live-p99-ms")
			b.ReportMetric(ms(percentile(lat, 0.50)), "live-p50-ms")
			b.ReportMetric(float64(rate)/float64(1<<20), "throttle-MBps")
		})
	}
}

// createAssigned creates topic with explicit replica lists and waits
// until every partition accepts an acks=all produce.
func (c *procCluster) createAssigned(topic string, assignment [][]int32) {
	c.b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		c.b.Fatal(err)
	}
	defer cl.Close()
	err = poll(procTopicTimeout, func(ctx context.Context) error {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, rs := range assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), rs
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && err != kerr.TopicAlreadyExists {
			return err
		}
		return nil
	})
	if err != nil {
		c.b.Fatalf("create %s: %v", topic, err)
	}
}

// fillTopic produces size bytes of 1 KiB values with cl (acks=all).
func fillTopic(cl *kgo.Client, size int64) error {
	n := int(size / recordValueBytes)
	recs := clusterRecords(min(n, 1<<16))
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var first atomic.Value
	for i := range n {
		wg.Add(1)
		r := recs[i%len(recs)]
		cl.Produce(ctx, &r, func(_ *kgo.Record, err error) {
			if err != nil {
				first.CompareAndSwap(nil, err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// offerLive produces liveRate records per second to the live topic until
// the returned func is called, which returns the acknowledged records'
// latencies (from when each was due).
func offerLive(cl *kgo.Client) func() []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		recs := clusterRecords(1024)
		start := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			due := start.Add(time.Duration(int64(i) * int64(time.Second) / liveRate))
			time.Sleep(time.Until(due))
			r := recs[i%len(recs)]
			wg.Add(1)
			cl.Produce(ctx, &r, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					lat = append(lat, time.Since(due))
					mu.Unlock()
				}
			})
		}
	}()
	return func() []time.Duration {
		cancel()
		<-done
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return lat
	}
}

// setThrottle sets (rate > 0) or removes Kafka's replication throttle:
// the cluster-default leader/follower.replication.throttled.rate and the
// moving topic's leader/follower.replication.throttled.replicas "*".
func setThrottle(b *testing.B, adm *kadm.Client, rate int64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := kadm.SetConfig
	v := strconv.FormatInt(rate, 10)
	star := "*"
	if rate == 0 {
		op = kadm.DeleteConfig
	}
	rates := []kadm.AlterConfig{
		{Op: op, Name: "leader.replication.throttled.rate", Value: &v},
		{Op: op, Name: "follower.replication.throttled.rate", Value: &v},
	}
	if _, err := adm.AlterBrokerConfigsState(ctx, rates); err != nil {
		b.Fatalf("throttle rates: %v", err)
	}
	replicas := []kadm.AlterConfig{
		{Op: op, Name: "leader.replication.throttled.replicas", Value: &star},
		{Op: op, Name: "follower.replication.throttled.replicas", Value: &star},
	}
	rs, err := adm.AlterTopicConfigs(ctx, replicas, moveTopic)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		b.Fatalf("throttled replicas: %v", err)
	}
}

// reassign moves topic-p to the replicas to and waits until it is done:
// nothing listed in progress, Metadata showing to with every replica in
// the ISR.
func (c *procCluster) reassign(cl *kgo.Client, topic string, p int32, to []int32) {
	c.b.Helper()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, to)
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		c.b.Fatalf("reassign %s-%d to %v: %v", topic, p, to, err)
	}
	want := slices.Clone(to)
	slices.Sort(want)
	err = poll(moveTimeout, func(ctx context.Context) error {
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {p: {}}})
		if err != nil {
			return err
		}
		if len(listed) > 0 {
			return fmt.Errorf("in progress: %+v", listed)
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		mp := resp.Topics[0].Partitions[p]
		isr := slices.Clone(mp.ISR)
		slices.Sort(isr)
		if !slices.Equal(mp.Replicas, to) || !slices.Equal(isr, want) {
			return fmt.Errorf("replicas %v isr %v", mp.Replicas, mp.ISR)
		}
		return nil
	})
	if err != nil {
		c.b.Fatalf("%s-%d on %v: %v", topic, p, to, err)
	}
}

// dirSize is the bytes of the segment files (.log) under dir (0 when it
// is missing): the records moved, without the indexes (preallocated).
func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && filepath.Ext(path) == ".log" {
			n += fi.Size()
		}
		return nil
	})
	return n
}
