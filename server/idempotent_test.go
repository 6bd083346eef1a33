package server

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kadm"
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
		recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("v")} // older than producer.id.expiration.ms is forgotten at a restart
	}
	return batch.Build(opts, recs)
}

// The same idempotent batch sent twice is stored once and the retry gets
// the original offset; gaps and fenced epochs are refused; the state
// survives a restart.
func TestIdempotentProducer(t *testing.T) {
	t.Parallel()
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

// A producer whose batches DeleteRecords removed is still known after a
// restart (producer snapshots): its retry is answered with the original
// offset and not stored twice, its old epoch is fenced. Kafka keeps
// producer snapshots for this; before them the restarted broker stored the
// retry as a new batch.
func TestIdempotentStateSurvivesDeleteRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, addr := startBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.createTopic("idem-del", 1, 1, map[string]string{"segment.bytes": "1024"}, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr)
	big := func(pid int64, epoch int16, seq int32) []byte {
		opts := batch.NewBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
		// Now: state older than producer.id.expiration.ms (a day, by
		// record timestamps, as Kafka counts) is dropped at open.
		return batch.Build(opts, []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: make([]byte, 400)}})
	}
	var last int64
	for seq := int32(0); seq < 3; seq++ {
		sp := produceRaw(t, ctx, cl, b, "idem-del", big(21, 4, seq))
		if sp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(sp.ErrorCode))
		}
		last = sp.BaseOffset
	}
	for i := 0; i < 6; i++ { // push producer 21's batches into closed segments
		if sp := produceRaw(t, ctx, cl, b, "idem-del", big(-1, -1, -1)); sp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	adm := kadm.NewClient(cl)
	part, _ := b.partition("idem-del", 0)
	leo := part.LogEndOffset()
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"idem-del": {0: {At: leo}}}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b, addr = startBroker(t, dir)
	cl = newClient(t, addr)
	if sp := produceRaw(t, ctx, cl, b, "idem-del", big(21, 4, 2)); sp.ErrorCode != 0 || sp.BaseOffset != last {
		t.Fatalf("retry after restart: code %d offset %d, want the original offset %d", sp.ErrorCode, sp.BaseOffset, last)
	}
	if sp := produceRaw(t, ctx, cl, b, "idem-del", big(21, 3, 3)); sp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("an older epoch after restart: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(sp.ErrorCode))
	}
	if part, _ := b.partition("idem-del", 0); part.LogEndOffset() != leo {
		t.Fatalf("log end offset %d after the retry, want %d (stored twice)", part.LogEndOffset(), leo)
	}
}
