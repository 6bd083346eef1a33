package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// minISRPause is how long the followers stay paused while acks=all
// writes are tried: past the session timeout, so the controller fences
// them (the ISR shrinks) before it ends.
const minISRPause = sessionMs*time.Millisecond + 2*time.Second

// (issue 28) acks=all honours min.insync.replicas against the replicas
// that really hold the batch: on a topic with replication factor 3 and
// min.insync.replicas=3, one follower paused (SIGSTOP), no single-record
// acks=all write without retries is acknowledged while it is paused (a
// raft majority of two commits them; they wait for the third copy, then
// time out or fail with NOT_ENOUGH_REPLICAS once it left the ISR); once
// it is resumed, writes succeed again. The same with
// min.insync.replicas=2 and both followers paused.
func TestScenarioMinISRPausedFollowers(t *testing.T) {
	needCluster(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	t.Cleanup(cancel)
	c := newCluster(t, ctx, clusterOpts{})
	for _, tc := range []struct {
		topic          string
		minISR, paused int
	}{
		{"minisr3-one-paused", 3, 1},
		{"minisr2-two-paused", 2, 2},
	} {
		c.CreateTopic(tc.topic, 1, 3, map[string]string{"min.insync.replicas": strconv.Itoa(tc.minISR)})
		c.WaitWritable(tc.topic, 30*time.Second)
		leader := c.Leader(tc.topic, 0)
		followers := c.others(int(leader))
		for _, id := range followers {
			c.WaitISR(tc.topic, id, 30*time.Second)
		}
		cl := noRetryClient(t, c, tc.topic)
		if err := produceOne(c, cl, "warm"); err != nil {
			t.Fatalf("%s: acks=all before the pause: %v", tc.topic, err)
		}
		paused := followers[:tc.paused]
		for _, id := range paused {
			c.Pause(id) // returns once every thread of it is stopped
		}
		start := time.Now()
		var tried, acked int
		var ackedWrites []string // which, where, when: to tell a broker's ack from a harness's fault
		codes := map[string]int{}
		for i := 0; time.Since(start) < minISRPause; i++ {
			// Every write completes before the followers are resumed:
			// none may be acknowledged.
			sent := time.Since(start)
			r, err := produceRecord(c, cl, fmt.Sprintf("paused-%d", i))
			tried++
			if err == nil {
				acked++
				codes["acknowledged"]++
				ackedWrites = append(ackedWrites, fmt.Sprintf("paused-%d at offset %d (leader epoch %d), sent %v and acknowledged %v after the pause",
					i, r.Offset, r.LeaderEpoch, sent.Round(time.Microsecond), time.Since(start).Round(time.Microsecond)))
				continue
			}
			codes[errName(err)]++
			time.Sleep(20 * time.Millisecond) // a client's retry backoff, not a wait for a condition
		}
		for _, id := range paused {
			c.Resume(id)
		}
		t.Logf("%s: min.insync.replicas=%d, leader %d, followers %v paused for %v: %d acks=all writes tried, %d acknowledged; answers %s",
			tc.topic, tc.minISR, leader, paused, minISRPause, tried, acked, countsString(codes))
		if tried == 0 {
			t.Fatalf("%s: no write tried while paused", tc.topic)
		}
		if acked > 0 {
			t.Errorf("%s: %d of %d acks=all writes acknowledged with min.insync.replicas=%d while %d of the 3 replicas were paused: %s",
				tc.topic, acked, tried, tc.minISR, tc.paused, strings.Join(ackedWrites, "; "))
		}
		resumed := time.Now()
		c.poll(fmt.Sprintf("%s: an acks=all write acknowledged after the resume", tc.topic), 30*time.Second, func(ctx context.Context) error {
			return produceOne(c, cl, "resumed")
		})
		t.Logf("%s: writable again %v after the resume", tc.topic, time.Since(resumed).Round(time.Millisecond))
		fmt.Printf("MINISR topic=%s min-isr=%d paused=%d tried=%d acked=%d resume-to-write-ms=%d\n",
			tc.topic, tc.minISR, tc.paused, tried, acked, time.Since(resumed).Milliseconds())
	}
}

// noRetryClient is an acks=all producer to partition 0 of topic that
// never retries (no idempotence): each write's own answer is its fate.
// A produce request waits at most a second for its acknowledgement.
func noRetryClient(t *testing.T, c *cluster, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.ProduceRequestTimeout(time.Second), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.RequestTimeoutOverhead(time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceOne writes one record to partition 0 and returns its answer.
func produceOne(c *cluster, cl *kgo.Client, value string) error {
	_, err := produceRecord(c, cl, value)
	return err
}

// produceRecord is produceOne returning the record too (its offset and
// leader epoch once acknowledged).
func produceRecord(c *cluster, cl *kgo.Client, value string) (*kgo.Record, error) {
	ctx, cancel := c.bounded(5 * time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(value)}).First()
}

// errName is a produce error's Kafka name, or its text.
func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "client timeout"
	}
	return err.Error()
}

func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s x%d", k, m[k])
	}
	return b.String()
}
