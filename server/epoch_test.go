package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetForLeaderEpoch(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("epochs"), kgo.AllowAutoTopicCreation())
	for i := 0; i < 4; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(epoch, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	part, _ := b.partition("epochs", 0)
	ep := part.LeaderEpoch() // the raft term of the partition's leader
	if p := ask(ep, ep); p.ErrorCode != 0 || p.LeaderEpoch != ep || p.EndOffset != 4 {
		t.Fatalf("epoch %d: %+v", ep, p)
	}
	if p := ask(ep+3, -1); p.ErrorCode != 0 || p.EndOffset != -1 {
		t.Fatalf("future epoch: %+v", p)
	}
	if p := ask(ep, ep+5); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer current epoch: %+v", p)
	}
}
