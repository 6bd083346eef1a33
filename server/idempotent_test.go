package server

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceRaw sends one batch to topic partition 0 and returns the
// partition's response.
func produceRaw(t *testing.T, ctx context.Context, cl *kgo.Client, b *Broker, topic string, data []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	tp, _ := b.meta.Topic(topic)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, tp.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = data
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func idemBatch(pid int64, epoch int16, seq int32, n int) []byte {
	opts := batch.NewBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: 1000, Value: []byte("v")}
	}
	return batch.Build(opts, recs)
}

// The same idempotent batch sent twice is stored once and the retry gets
// the original offset; gaps and fenced epochs are refused; the state
// survives a restart.
func TestIdempotentProducer(t *testing.T) {
	dir := t.TempDir()
	b, addr := startBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.createTopic("idem", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr)
	check := func(data []byte, wantCode int16, wantOffset int64) {
		t.Helper()
		sp := produceRaw(t, ctx, cl, b, "idem", data)
		if sp.ErrorCode != wantCode || (wantCode == 0 && sp.BaseOffset != wantOffset) {
			t.Fatalf("got code %d offset %d, want code %d offset %d", sp.ErrorCode, sp.BaseOffset, wantCode, wantOffset)
		}
	}
	check(idemBatch(7, 0, 0, 3), 0, 0)                                  // seq 0-2
	check(idemBatch(7, 0, 3, 2), 0, 3)                                  // seq 3-4
	check(idemBatch(7, 0, 3, 2), 0, 3)                                  // retry: original offset
	check(idemBatch(7, 0, 0, 3), 0, 0)                                  // older retry, still cached
	check(idemBatch(7, 0, 9, 1), kerr.OutOfOrderSequenceNumber.Code, 0) // gap
	check(idemBatch(8, 0, 5, 1), 0, 5)                                  // unknown producer: any sequence (KIP-360)
	check(idemBatch(7, 1, 0, 1), 0, 6)                                  // new epoch from 0
	check(idemBatch(7, 2, 4, 1), kerr.OutOfOrderSequenceNumber.Code, 0) // a new epoch not from 0
	check(idemBatch(7, 0, 5, 1), kerr.InvalidProducerEpoch.Code, 0)     // fenced epoch
	part, _ := b.partition("idem", 0)
	if part.LogEndOffset() != 7 {
		t.Fatalf("log end offset %d, want 7 (duplicates stored?)", part.LogEndOffset())
	}
	cl.Close()
	b.Close()

	b2, addr2 := startBroker(t, dir)
	cl2 := newClient(t, addr2)
	cl = cl2
	b = b2
	check(idemBatch(7, 1, 0, 1), 0, 6) // retry after restart: still recognised
	check(idemBatch(7, 1, 1, 1), 0, 7)
	if part, _ := b2.partition("idem", 0); part.LogEndOffset() != 8 {
		t.Fatalf("after restart: log end offset %d, want 8", part.LogEndOffset())
	}
}
