package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster benchmarks' shape.
const (
	clusterPartitions = 16
	clusterRF1Topic   = "cluster-rf1"
	clusterRF3Topic   = "cluster-rf3"
	clusterLinger     = time.Millisecond
	// BenchmarkClusterProduce: clusterProducers clients, each with up to
	// clusterBuffered records buffered or in flight (8 MiB of values in
	// all) and kgo's five produce requests in flight per broker.
	clusterProducers = 4
	clusterBuffered  = 2048
	// A record not acknowledged this long after its Produce call fails
	// the benchmark (kgo.RecordDeliveryTimeout).
	clusterDeliveryTimeout = time.Minute
	// BenchmarkClusterProduceLatency20MBs: the offered rate (20 MiB/s of
	// values, 20.97 MB/s) and how long after the schedule's end records
	// not yet sent are given up on, and acknowledgements awaited.
	latencyRate  = 20480 // records per second
	latencyGrace = 5 * time.Second
)

// newClusterProducer returns a producer to topic on c, closed when the
// benchmark ends, after a warm-up of 1,024 acknowledged records (its
// connections, metadata and producer id are then in place).
func newClusterProducer(b *testing.B, c *procCluster, topic string, buffered int) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.seeds()...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: kgo's default
		kgo.ProducerLinger(clusterLinger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(buffered),
		kgo.RecordDeliveryTimeout(clusterDeliveryTimeout),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), procTopicTimeout)
	defer cancel()
	// 1 MiB: the uniform-bytes partitioner moves on every 64 KiB, so
	// the records reach most partitions and every broker.
	warm := clusterRecords(1024)
	if err := e2eProduce(ctx, cl, warm); err != nil {
		b.Fatalf("warm-up produce to %s: %v", topic, err)
	}
	return cl
}

// clusterRecords returns n records with 1 KiB random values (windows of
// e2eValuePool), to the producer's default topic.
func clusterRecords(n int) []kgo.Record {
	recs := e2eRecords(n)
	for i := range recs {
		recs[i].Topic = ""
	}
	return recs
}

// percentile is the q-quantile (0 < q <= 1) of sorted, by the
// nearest-rank method; 0 when sorted is empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkClusterProduce starts three sluice processes (the binary built
// once, without -race; each node a broker and a controller voter, the
// default config otherwise: an acks=all reply waits for the fsync) on
// loopback, creates two topics of 16 partitions, cluster-rf1 (RF=1) and
// cluster-rf3 (RF=3, min.insync.replicas=2), and produces b.N records
// (null key, 1 KiB random value; one op is one record, MB/s counts the
// value bytes) to one of them per sub-benchmark:
//
//   - rf=1: to cluster-rf1;
//   - rf=3: to cluster-rf3, after rf=1 in the same process and on the same
//     cluster; rf3/rf1 = its MB/s / the median MB/s of rf=1's runs of as
//     many records (reported when rf=1 ran: not with -bench
//     'ClusterProduce/rf=3' alone).
//
// The cluster is started once for both sub-benchmarks and all their runs
// (the testing package's b.N == 1 probe and every -count repetition; the
// repetitions of rf=1 all run before those of rf=3).
//
// The producers are clusterProducers franz-go clients (acks=all,
// idempotent, linger 1 ms, no compression, the uniform-bytes partitioner)
// each with up to clusterBuffered records buffered or in flight, one
// goroutine each producing its share of b.N; they are created and warmed up
// (1,024 acknowledged records each) before the timer. p99-ms (and p50-ms)
// is the per-record latency from its Produce call (which blocks while the
// client's buffer is full) to its promise. Brokers and producers share the
// machine's cores and disk.
func BenchmarkClusterProduce(b *testing.B) {
	bin := sluiceBinary(b)
	c := startProcCluster(b, bin)
	c.createTopic(clusterRF1Topic, clusterPartitions, 1, nil)
	c.createTopic(clusterRF3Topic, clusterPartitions, 3, map[string]string{"min.insync.replicas": "2"})
	producers := map[string][]*kgo.Client{}
	for _, topic := range []string{clusterRF1Topic, clusterRF3Topic} {
		for range clusterProducers {
			producers[topic] = append(producers[topic], newClusterProducer(b, c, topic, clusterBuffered))
		}
	}
	// rf1[n] is the MB/s of each rf=1 run of n records: with -count,
	// every repetition of rf=1 runs before the first of rf=3.
	rf1 := map[int][]float64{}
	b.Run("rf=1", func(b *testing.B) {
		rf1[b.N] = append(rf1[b.N], clusterProduce(b, producers[clusterRF1Topic]))
	})
	b.Run("rf=3", func(b *testing.B) {
		rf3MBps := clusterProduce(b, producers[clusterRF3Topic])
		if peer := rf1Peer(rf1, b.N); peer > 0 {
			b.ReportMetric(rf3MBps/peer, "rf3/rf1")
		}
	})
}

// rf1Peer is the median MB/s of the rf=1 runs of n records, or of the
// largest runs when none had n (-benchtime as a duration sizes the two
// sub-benchmarks apart); 0 when rf=1 did not run.
func rf1Peer(rf1 map[int][]float64, n int) float64 {
	runs, ok := rf1[n]
	if !ok {
		largest := -1
		for m := range rf1 {
			largest = max(largest, m)
		}
		runs = rf1[largest]
	}
	if len(runs) == 0 {
		return 0
	}
	runs = slices.Sorted(slices.Values(runs))
	if len(runs)%2 == 1 {
		return runs[len(runs)/2]
	}
	return (runs[len(runs)/2-1] + runs[len(runs)/2]) / 2
}

// clusterProduce produces b.N records through producers (each a share,
// from its own goroutine), waits for every acknowledgement, reports the
// latency percentiles and returns the MB/s.
func clusterProduce(b *testing.B, producers []*kgo.Client) float64 {
	// At least 5 MB/s, or the benchmark fails rather than hang.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(b.N)*200*time.Microsecond)
	defer cancel()
	recs := clusterRecords(b.N)
	lat := make([]time.Duration, b.N)
	var (
		mu       sync.Mutex
		firstErr error
	)
	b.SetBytes(recordValueBytes)
	b.ResetTimer()
	var wg sync.WaitGroup
	for k, cl := range producers {
		lo, hi := k*b.N/len(producers), (k+1)*b.N/len(producers)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				start := time.Now()
				cl.Produce(ctx, &recs[i], func(_ *kgo.Record, err error) {
					lat[i] = time.Since(start)
					if err != nil {
						mu.Lock()
						firstErr = firstOf(firstErr, err)
						mu.Unlock()
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				mu.Lock()
				firstErr = firstOf(firstErr, fmt.Errorf("flush: %w", err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatalf("produce: %v", firstErr)
	}
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	return mbps(int64(b.N)*recordValueBytes, b.Elapsed())
}

// firstOf keeps the first error.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// BenchmarkClusterProduceLatency20MBs starts the same three-process
// cluster and RF=3 topic as BenchmarkClusterProduce (min.insync.replicas=2)
// and produces to it open-loop at a fixed rate: 1 KiB records at
// latencyRate (20,480 records/s, 20 MiB/s of values), record i due at
// start + i/latencyRate, from one franz-go producer (acks=all, idempotent,
// linger 1 ms, kgo's default buffer of 50,000 records). One op is one
// record due: b.N records, b.N/20,480 seconds; at b.N == 1 (CI's smoke
// test, the testing package's first probe) the run is one second (20,480
// records) instead.
//
// A record's latency counts from when it was due, not from when it was
// sent, so a producer or cluster falling behind shows in it (no
// coordinated omission): the sender sleeps until the next record is due
// and then sends every record due by then. Records still unsent
// latencyGrace after the schedule's end are given up on, and
// acknowledgements are awaited until latencyGrace after that; so a
// cluster that cannot keep up ends the run instead of hanging.
//
// Custom metrics: p50-ms, p99-ms, p99.9-ms over the acknowledged records;
// achieved-MB/s = value bytes acknowledged / time from the first record's
// due time to the last acknowledgement (20.97 when the cluster keeps up);
// acked-% = records acknowledged / records due (below 100 when it could
// not keep up: the percentiles then leave the rest out).
//
// The runs are the sub-benchmark rf=3, so that the cluster is started once
// for all of them (the b.N == 1 probe and every -count repetition).
func BenchmarkClusterProduceLatency20MBs(b *testing.B) {
	bin := sluiceBinary(b)
	c := startProcCluster(b, bin)
	c.createTopic(clusterRF3Topic, clusterPartitions, 3, map[string]string{"min.insync.replicas": "2"})
	cl := newClusterProducer(b, c, clusterRF3Topic, 50000)
	b.Run("rf=3", func(b *testing.B) { latencyRun(b, cl) })
}

// latencyRun is one run of BenchmarkClusterProduceLatency20MBs.
func latencyRun(b *testing.B, cl *kgo.Client) {
	n := b.N
	if n == 1 {
		n = latencyRate
	}
	recs := clusterRecords(n)
	schedule := time.Duration(float64(n) / latencyRate * float64(time.Second))
	interval := func(i int) time.Duration { return time.Duration(int64(i) * int64(time.Second) / latencyRate) }

	// lat[i] is record i's latency + 1 ns once acknowledged (0: not, or
	// failed); set by the promises, read after the run.
	lat := make([]atomic.Int64, n)
	var lastAck atomic.Int64 // UnixNano of the latest acknowledgement
	var failed atomic.Int64
	var firstErr atomic.Value

	b.SetBytes(recordValueBytes)
	b.ResetTimer()
	start := time.Now()
	sendCtx, cancelSend := context.WithDeadline(context.Background(), start.Add(schedule+latencyGrace))
	defer cancelSend()
	sent := 0
	for sent < n && sendCtx.Err() == nil {
		now := time.Now()
		for ; sent < n && now.Sub(start) >= interval(sent); sent++ {
			i := sent
			due := start.Add(interval(i))
			cl.Produce(sendCtx, &recs[i], func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				t := time.Now()
				lat[i].Store(int64(t.Sub(due)) + 1)
				for {
					last := lastAck.Load()
					if t.UnixNano() <= last || lastAck.CompareAndSwap(last, t.UnixNano()) {
						break
					}
				}
			})
		}
		if sent < n {
			time.Sleep(time.Until(start.Add(interval(sent))))
		}
	}
	flushCtx, cancelFlush := context.WithDeadline(context.Background(), start.Add(schedule+2*latencyGrace))
	flushErr := cl.Flush(flushCtx)
	cancelFlush()
	b.StopTimer()

	var got []time.Duration
	for i := range lat {
		if v := lat[i].Load(); v > 0 {
			got = append(got, time.Duration(v-1))
		}
	}
	if len(got) < n {
		b.Logf("%d of %d records acknowledged (%d sent, %d failed; flush: %v; first error: %v): the cluster did not keep up with %d records/s",
			len(got), n, sent, failed.Load(), flushErr, firstErr.Load(), latencyRate)
	}
	if len(got) == 0 {
		b.Fatal("no record acknowledged")
	}
	slices.Sort(got)
	b.ReportMetric(ms(percentile(got, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(got, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(got, 0.999)), "p99.9-ms")
	b.ReportMetric(mbps(int64(len(got))*recordValueBytes, time.Unix(0, lastAck.Load()).Sub(start)), "achieved-MB/s")
	b.ReportMetric(100*float64(len(got))/float64(n), "acked-%")
	if flushErr != nil && !errors.Is(flushErr, context.DeadlineExceeded) {
		b.Fatalf("flush: %v", flushErr)
	}
}
