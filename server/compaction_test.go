package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordCount counts the records of a partition below its high watermark
// (reading it as the coordinator's replay does).
func recordCount(t *testing.T, part *replica.Partition) int {
	t.Helper()
	n := 0
	if err := (offsetsLog{p: part}).Replay(func(coordinator.Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A compacted topic keeps the latest record of each key, tombstones
// included, at their original offsets, as a franz-go consumer sees it.
func TestCompactedTopic(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "log.cleaner.backoff.ms=20")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "compacted"
	compact, segBytes, ratio := "compact", "2048", "0.01"
	adm := kadm.NewClient(newClient(t, addr))
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": &compact, "segment.bytes": &segBytes, "min.cleanable.dirty.ratio": &ratio,
	}, topic); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	// A record without a key has no place in a compacted topic (Kafka's
	// LogValidator refuses it).
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
	}
	const keys, rounds = 20, 15
	latest := map[string]*kgo.Record{} // key -> last produced record, with its offset
	var fillers []*kgo.Record
	for round := 0; round < rounds; round++ {
		var rs []*kgo.Record
		for k := 0; k < keys; k++ {
			r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf("v%d-%d", k, round))}
			if round == rounds-1 && k%4 == 0 {
				r.Value = nil // a tombstone
			}
			rs = append(rs, r)
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			latest[string(r.Key)] = r
		}
	}
	// Unique keys roll the overwrites out of the active segment.
	for i := 0; i < 60; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("filler-%d", i)), Value: []byte("0123456789012345678901234567890123456789")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		fillers = append(fillers, r)
	}
	want := len(latest) + len(fillers)

	part, ok := b.partition(topic, 0)
	if !ok {
		t.Fatal("no partition")
	}
	for {
		got := recordCount(t, part)
		if got == want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not compacted: %d records, want %d", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}

	recs := consumeN(t, ctx, addr, topic, kgo.NewOffset().AtStart(), want)
	if len(recs) != want {
		t.Fatalf("consumed %d records, want %d", len(recs), want)
	}
	byKey := map[string]*kgo.Record{}
	for _, r := range recs {
		if _, dup := byKey[string(r.Key)]; dup {
			t.Fatalf("key %s twice", r.Key)
		}
		byKey[string(r.Key)] = r
	}
	for _, w := range append(fillers, mapValues(latest)...) {
		g, ok := byKey[string(w.Key)]
		if !ok {
			t.Fatalf("key %s missing", w.Key)
		}
		if g.Offset != w.Offset || string(g.Value) != string(w.Value) || (g.Value == nil) != (w.Value == nil) {
			t.Fatalf("key %s: got %q at %d, want %q at %d", w.Key, g.Value, g.Offset, w.Value, w.Offset)
		}
	}
}

func mapValues(m map[string]*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range m {
		out = append(out, r)
	}
	return out
}

// A cleanup.policy changed to compact by AlterConfigs reaches the log,
// and the cleaner then compacts it.
func TestCompactionPolicyAltered(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "log.cleaner.backoff.ms=20", "log.cleaner.min.cleanable.ratio=0.01")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "altered"
	segBytes := "1024"
	adm := kadm.NewClient(newClient(t, addr))
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes}, topic); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 5)), Value: []byte(fmt.Sprintf("value-%03d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	part, _ := b.partition(topic, 0)
	if _, needed := part.CleanableRatio(); needed {
		t.Fatal("a delete-policy log needs cleaning")
	}
	compact := "compact"
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &compact}}, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v %v", err, rs)
	}
	if !part.Config().Log.Compacts() {
		t.Fatal("the log did not get cleanup.policy=compact")
	}
	for {
		if recordCount(t, part) < 100 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("not compacted after the policy change")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// __consumer_offsets is compacted like any compact topic, and the
// coordinator's replay at start-up reads across the gaps.
func TestCompactedOffsetsTopicReplays(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	sets := []string{"offsets.topic.num.partitions=1", "log.cleaner.backoff.ms=20", "log.cleaner.min.cleanable.ratio=0.01"}
	b, addr := startBroker(t, dir, sets...)
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	commit := func(at int64) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: at, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, "billing", offs); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
	}
	commit(0) // creates the topic
	segBytes := "1024"
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: &segBytes}}, offsetsTopic); err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %v %v", err, rs)
	}
	const commits = 200
	for i := int64(1); i <= commits; i++ {
		commit(i)
	}
	part, ok := b.partition(offsetsTopic, 0)
	if !ok {
		t.Fatal("no __consumer_offsets partition")
	}
	for recordCount(t, part) > commits/2 {
		if ctx.Err() != nil {
			t.Fatal("__consumer_offsets not compacted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, addr = startBroker(t, dir, sets...)
	got, err := kadm.NewClient(newClient(t, addr)).FetchOffsets(ctx, "billing")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch: %v %v", err, got.Error())
	}
	if o, _ := got.Lookup("orders", 0); o.At != commits {
		t.Fatalf("after restart: orders/0 = %+v, want %d", o, commits)
	}
}
