package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetsTopicAndSimpleCommits: the first group lookup creates
// __consumer_offsets (internal, compacted, offsets.topic.num.partitions
// partitions); offsets committed outside a group membership are fetched
// back, survive a restart, and sit in the group's partition as Kafka's
// OffsetCommitKey/Value records.
func TestOffsetsTopicAndSimpleCommits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	b, addr := startBroker(t, dir, "offsets.topic.num.partitions=7")
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 17, LeaderEpoch: -1, Metadata: "m0"})
	offs.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 4, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "billing", offs)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	check := func(adm *kadm.Client) {
		t.Helper()
		got, err := adm.FetchOffsets(ctx, "billing")
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch: %v %v", err, got.Error())
		}
		if o, _ := got.Lookup("orders", 0); o.At != 17 || o.Metadata != "m0" {
			t.Errorf("orders/0 = %+v, want 17 m0", o)
		}
		if o, _ := got.Lookup("orders", 1); o.At != 4 {
			t.Errorf("orders/1 = %+v, want 4", o)
		}
	}
	check(adm)

	// The internal topic as clients see it.
	md, err := adm.Metadata(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[offsetsTopic]
	if td.Err != nil || !td.IsInternal || len(td.Partitions) != 7 {
		t.Fatalf("%s metadata: err %v internal %v partitions %d", offsetsTopic, td.Err, td.IsInternal, len(td.Partitions))
	}
	rc, err := adm.DescribeTopicConfigs(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On(offsetsTopic, nil); err != nil || configValue(v.Configs, "cleanup.policy") != "compact" {
		t.Fatalf("cleanup.policy of %s: %v %q", offsetsTopic, err, configValue(v.Configs, "cleanup.policy"))
	}

	// The records, read as a Kafka tool would, are in the group's partition.
	p := coordinator.Partition("billing", 7)
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{offsetsTopic: {p: kgo.NewOffset().AtStart()}}))
	fs := cl.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	var n int
	fs.EachRecord(func(r *kgo.Record) {
		var k kmsg.OffsetCommitKey
		var v kmsg.OffsetCommitValue
		if err := k.ReadFrom(r.Key); err != nil || k.Group != "billing" || k.Topic != "orders" {
			t.Errorf("key %+v: %v", k, err)
		}
		if err := v.ReadFrom(r.Value); err != nil || (k.Partition == 0 && v.Offset != 17) {
			t.Errorf("value %+v: %v", v, err)
		}
		n++
	})
	if n != 2 {
		t.Fatalf("%d offset records in %s-%d, want 2", n, offsetsTopic, p)
	}

	// A restart replays the partition.
	b.Close()
	_, addr = startBroker(t, dir, "offsets.topic.num.partitions=7")
	adm2 := kadm.NewClient(newClient(t, addr))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := adm2.FetchOffsets(ctx, "billing")
		if err == nil && got.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch after restart: %v %v", err, got.Error())
		}
		time.Sleep(20 * time.Millisecond)
	}
	check(adm2)

	// A commit to a topic that does not exist is refused per partition.
	bad := kadm.Offsets{}
	bad.Add(kadm.Offset{Topic: "nope", Partition: 0, At: 1, LeaderEpoch: -1})
	resp, err = adm2.CommitOffsets(ctx, "billing", bad)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := resp.Lookup("nope", 0); o.Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("commit to a missing topic: %v", o.Err)
	}
}

func configValue(cs []kadm.Config, key string) string {
	for _, c := range cs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// TestOffsetsTopicProtected: clients cannot write to, delete from, create,
// delete or grow __consumer_offsets (Kafka refuses appends and record
// deletion on internal topics; Sluice also refuses the topic operations,
// which would drop or move every group's offsets), and a broker restarted
// with a different offsets.topic.num.partitions keeps using the topic's
// real count.
func TestOffsetsTopicProtected(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	b, addr := startBroker(t, dir, "offsets.topic.num.partitions=3")
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "data", Partition: 0, At: 9, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "keep", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r)
	}

	p := coordinator.Partition("keep", 3)
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: offsetsTopic, Partition: p, Key: []byte{0, 1, 0}, Value: []byte("x")})
	if err := res.FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", offsetsTopic, err)
	}
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{offsetsTopic: {p: {Topic: offsetsTopic, Partition: p, At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(offsetsTopic, p); !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Errorf("delete records of %s: %v", offsetsTopic, r.Err)
	}
	if r, err := adm.DeleteTopics(ctx, offsetsTopic); err != nil || !errors.Is(r[offsetsTopic].Err, kerr.InvalidRequest) {
		t.Errorf("delete %s: %v %v", offsetsTopic, err, r[offsetsTopic].Err)
	}
	if r, err := adm.CreatePartitions(ctx, 2, offsetsTopic); err != nil || !errors.Is(r[offsetsTopic].Err, kerr.InvalidPartitions) {
		t.Errorf("grow %s: %v %v", offsetsTopic, err, r[offsetsTopic].Err)
	}

	b.Close()
	_, addr = startBroker(t, dir, "offsets.topic.num.partitions=7")
	adm = kadm.NewClient(newClient(t, addr))
	got, err := adm.FetchOffsets(ctx, "keep")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch after restart with another partition count: %v %v", err, got.Error())
	}
	if o, _ := got.Lookup("data", 0); o.At != 9 {
		t.Fatalf("offset after restart: %+v", o)
	}
	if r, err := adm.CreateTopics(ctx, 1, 1, nil, "__consumer_offsets"); err == nil && r[offsetsTopic].Err == nil {
		t.Errorf("creating %s again succeeded", offsetsTopic)
	}
}
