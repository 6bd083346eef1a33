package server

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// A replicated partition's refusals reach clients as Kafka's codes: a
// follower answers Produce and Fetch with NOT_LEADER_OR_FOLLOWER and, from
// Produce v10 and Fetch v12 on (KIP-951), the current leader's id and
// epoch; a leader with fewer in-sync replicas than min.insync.replicas
// answers acks=all with NOT_ENOUGH_REPLICAS. The broker serves one raft
// replica in place of its own partition (a test hook: brokers are not
// replicated yet).
func TestRaftPartitionErrorsToClients(t *testing.T) {
	t.Parallel()
	const topic = "nl"
	g := newRaftGroup(t)
	g.move(2) // a leader epoch past the first
	g.produce(oneBatch())
	b, addr := startBroker(t, "")
	tm, err := b.createTopic(topic, 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	tp := topicPartition{topic, 0}
	serve := func(p *replica.Partition) {
		b.mu.Lock()
		b.parts[tp] = p
		b.mu.Unlock()
	}
	own, _ := b.partition(topic, 0)
	t.Cleanup(func() { serve(own) }) // before the broker closes
	leader := g.parts[g.lead]
	wantID, wantEpoch := int32(g.lead), leader.LeaderEpoch()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	produce := func(cl *kgo.Client) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, tm.ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = oneBatch()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	fetch := func(cl *kgo.Client) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 10, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, tm.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	newest := newClient(t, addr)
	older := newClient(t, addr, kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(0, 9)  // Produce before KIP-951
		v.SetMaxKeyVersion(1, 11) // Fetch before KIP-951
		return v
	}()))

	serve(g.parts[g.follower()])
	if sp := produce(newest); sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != wantID || sp.CurrentLeader.LeaderEpoch != wantEpoch {
		t.Errorf("produce to a follower: error %d, current leader %+v; want %d, leader %d epoch %d", sp.ErrorCode, sp.CurrentLeader, kerr.NotLeaderForPartition.Code, wantID, wantEpoch)
	}
	if sp := produce(older); sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != -1 || sp.CurrentLeader.LeaderEpoch != -1 {
		t.Errorf("produce v9 to a follower: error %d, current leader %+v; want %d without a hint", sp.ErrorCode, sp.CurrentLeader, kerr.NotLeaderForPartition.Code)
	}
	if sp := fetch(newest); sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != wantID || sp.CurrentLeader.LeaderEpoch != wantEpoch || len(sp.RecordBatches) != 0 {
		t.Errorf("fetch from a follower: error %d, current leader %+v, %d bytes; want %d, leader %d epoch %d", sp.ErrorCode, sp.CurrentLeader, len(sp.RecordBatches), kerr.NotLeaderForPartition.Code, wantID, wantEpoch)
	}
	if sp := fetch(older); sp.ErrorCode != kerr.NotLeaderForPartition.Code || len(sp.RecordBatches) != 0 {
		t.Errorf("fetch v11 from a follower: error %d, %d bytes; want %d", sp.ErrorCode, len(sp.RecordBatches), kerr.NotLeaderForPartition.Code)
	}

	// ListOffsets and OffsetForLeaderEpoch go to the leader too (Kafka's
	// fetchOnlyFromLeader for clients). Sent to the broker directly: the
	// client would retry NOT_LEADER_OR_FOLLOWER on its own.
	lreq := func() *kmsg.ListOffsetsRequest {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	ereq := func() *kmsg.OffsetForLeaderEpochRequest {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = wantEpoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	direct := newest.SeedBrokers()[0]
	listOffsets := func() kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		resp, err := direct.Request(ctx, lreq())
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	endOffset := func() kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		resp, err := direct.Request(ctx, ereq())
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	if sp := listOffsets(); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("ListOffsets at a follower: error %d, offset %d; want %d", sp.ErrorCode, sp.Offset, kerr.NotLeaderForPartition.Code)
	}
	if sp := endOffset(); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("OffsetForLeaderEpoch at a follower: error %d, end offset %d; want %d", sp.ErrorCode, sp.EndOffset, kerr.NotLeaderForPartition.Code)
	}

	serve(leader)
	if sp := listOffsets(); sp.ErrorCode != 0 || sp.Offset != 1 || sp.LeaderEpoch != wantEpoch {
		t.Errorf("ListOffsets at the leader: error %d, offset %d epoch %d; want 1 in epoch %d", sp.ErrorCode, sp.Offset, sp.LeaderEpoch, wantEpoch)
	}
	if sp := endOffset(); sp.ErrorCode != 0 || sp.EndOffset != 1 || sp.LeaderEpoch != wantEpoch {
		t.Errorf("OffsetForLeaderEpoch at the leader: error %d, epoch %d end offset %d; want epoch %d end 1", sp.ErrorCode, sp.LeaderEpoch, sp.EndOffset, wantEpoch)
	}
	if sp := produce(newest); sp.ErrorCode != 0 || sp.BaseOffset != 1 {
		t.Fatalf("produce to the leader: error %d, base offset %d", sp.ErrorCode, sp.BaseOffset)
	}
	if sp := fetch(newest); sp.ErrorCode != 0 || sp.HighWatermark != 2 || len(sp.RecordBatches) == 0 {
		t.Fatalf("fetch from the leader: error %d, high watermark %d, %d bytes", sp.ErrorCode, sp.HighWatermark, len(sp.RecordBatches))
	}
	cfg := leader.Config()
	cfg.MinInsyncReplicas = 3
	if err := leader.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	g.hosts[g.lead].PeerDown(g.follower())
	g.waitFor("the ISR to shrink", func() bool { return len(leader.ISR()) < 3 })
	if sp := produce(newest); sp.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Errorf("produce with 2 in sync, min.insync.replicas=3: error %d, want %d", sp.ErrorCode, kerr.NotEnoughReplicas.Code)
	}
}

// oneBatch is a batch of one record.
func oneBatch() []byte {
	data, _ := valueBatches(1, 1, 1)
	return data[0][0]
}
