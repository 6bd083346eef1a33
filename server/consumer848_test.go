package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topic848 creates topic with 3 partitions and returns a producer and a
// function producing the records "r<from>" to "r<from+n-1>" round robin.
func topic848(t *testing.T, ctx context.Context, addr, topic string) (*kgo.Client, func(from, n int)) {
	t.Helper()
	admin := kadm.NewClient(newClient(t, addr))
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	producer := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	return producer, func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// describe848 describes group with ConsumerGroupDescribe through cl.
func describe848(t *testing.T, ctx context.Context, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

// franz-go's KIP-848 consumer (ServerSideBalancer): two members of one
// group share a topic's partitions with no record read twice, and once one
// leaves, the other takes over its partitions.
func TestConsumerGroup848FranzGo(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "", "group.consumer.heartbeat.interval.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group = "kip848", "g848"
	producer, produce := topic848(t, ctx, addr, topic)
	produce(0, 30)

	var mu sync.Mutex
	seen := map[string]string{}
	consume := func(name string, cl *kgo.Client, until func() bool) {
		for !until() && ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachError(func(topic string, p int32, err error) {
				if err != context.DeadlineExceeded {
					t.Logf("%s: fetch error %s/%d: %v", name, topic, p, err)
				}
			})
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if by, ok := seen[string(r.Value)]; ok {
					t.Errorf("%s: %s already read by %s", name, r.Value, by)
				}
				seen[string(r.Value)] = name
			})
			mu.Unlock()
		}
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	member := func() *kgo.Client {
		return newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	}
	a := member()
	consume("a", a, func() bool { return count() >= 30 })
	if err := a.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	b := member()
	// Wait until both members own partitions.
	describe := func() kmsg.ConsumerGroupDescribeResponseGroup { return describe848(t, ctx, producer, group) }
	bdone := make(chan struct{})
	go func() {
		defer close(bdone)
		consume("b", b, func() bool { return count() >= 90 })
	}()
	for {
		g := describe()
		if g.State == "Stable" && len(g.Members) == 2 && len(g.Members[0].Assignment.TopicPartitions) > 0 && len(g.Members[1].Assignment.TopicPartitions) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group never stabilized with two members: %+v", g)
		}
		time.Sleep(10 * time.Millisecond)
	}
	produce(30, 30)
	consume("a", a, func() bool {
		mu.Lock()
		defer mu.Unlock()
		byA := 0
		for _, by := range seen {
			if by == "a" {
				byA++
			}
		}
		return byA > 30 && len(seen) >= 60
	})
	// What a read is committed before it leaves (kgo's Close leaves the
	// group), so b resumes after it.
	if err := a.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close()
	produce(60, 30)
	for count() < 90 {
		if ctx.Err() != nil {
			t.Fatalf("b did not take over a's partitions: read %d of 90", count())
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-bdone
}

// franz-go's KIP-848 consumer subscribing by regex (SubscribedTopicRegex).
func TestConsumerGroup848FranzGoRegex(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "", "group.consumer.heartbeat.interval.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(newClient(t, addr))
	if _, err := admin.CreateTopic(ctx, 2, 1, nil, "rx-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "other"); err != nil {
		t.Fatal(err)
	}
	producer := newClient(t, addr)
	for _, topic := range []string{"rx-1", "other"} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(topic)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(t, addr, kgo.ConsumerGroup("g848rx"), kgo.ConsumeTopics("rx-.*"), kgo.ConsumeRegex(),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	for _, r := range fs.Records() {
		if r.Topic != "rx-1" || string(r.Value) != "rx-1" {
			t.Fatalf("read %s/%q", r.Topic, r.Value)
		}
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g848rx"}
	resp, err := req.RequestWith(ctx, producer)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	// kgo sends its patterns as ".*(?:rx-.*).*": the broker matches whole
	// topic names, as Kafka does.
	if g.AssignorName != "range" || len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil || !strings.Contains(*g.Members[0].SubscribedTopicRegex, "rx-.*") {
		t.Fatalf("described: %+v", g)
	}
}

// A KIP-848 member survives a broker restart: the coordinator replays the
// member, its epoch and its assignment, so the same franz-go client keeps
// consuming with its member ID and epoch (no rebalance, no fetch error), and
// reads nothing twice beyond what it had not committed.
func TestConsumerGroup848SurvivesRestart(t *testing.T) {
	t.Parallel()
	dir, port := t.TempDir(), freePort(t)
	sets := []string{fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port), "group.consumer.heartbeat.interval.ms=200"}
	b, addr := startBroker(t, dir, sets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group = "kip848restart", "g848restart"
	producer, produce := topic848(t, ctx, addr, topic)
	cl := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	seen := map[string]int{}
	consume := func(n int) {
		for len(seen) < n {
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", len(seen), n)
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("fetch error %s/%d: %v", topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		}
	}
	produce(0, 30)
	consume(30)
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	// Read 15 more without committing them, then wait until the member
	// owns every partition at a settled epoch.
	produce(30, 15)
	consume(45)
	var before kmsg.ConsumerGroupDescribeResponseGroup
	for {
		before = describe848(t, ctx, producer, group)
		if before.State == "Stable" && len(before.Members) == 1 && len(before.Members[0].Assignment.TopicPartitions) == 1 &&
			len(before.Members[0].Assignment.TopicPartitions[0].Partitions) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group never stabilized: %+v", before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	memberID, epoch := cl.GroupMetadata()
	if memberID != before.Members[0].MemberID || epoch != before.Members[0].MemberEpoch {
		t.Fatalf("client is %s@%d, group has %s@%d", memberID, epoch, before.Members[0].MemberID, before.Members[0].MemberEpoch)
	}

	b.Close()
	startBroker(t, dir, sets...)

	// The group comes back with the member at its epoch.
	var after kmsg.ConsumerGroupDescribeResponseGroup
	for {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, producer)
		if err == nil && resp.Groups[0].ErrorCode == 0 {
			after = resp.Groups[0]
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("describe after restart: %v %+v", err, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(after.Members) != 1 || after.Members[0].MemberID != memberID || after.Members[0].MemberEpoch != epoch || after.Epoch != before.Epoch {
		t.Fatalf("after restart: %+v, before: %+v", after, before)
	}
	produce(45, 30)
	consume(75)
	if id, e := cl.GroupMetadata(); id != memberID || e != epoch {
		t.Errorf("member %s@%d became %s@%d: the group rebalanced", memberID, epoch, id, e)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("commit after restart: %v", err)
	}
	for v, n := range seen {
		var i int
		fmt.Sscanf(v, "r%d", &i)
		if n > 1 && (i < 30 || i >= 45) {
			t.Errorf("%s read %d times, though it was committed or produced after the restart", v, n)
		}
	}
	if g := describe848(t, ctx, producer, group); g.Epoch != before.Epoch || len(g.Members) != 1 || g.Members[0].MemberEpoch != epoch {
		t.Errorf("group after consuming: %+v", g)
	}
}
