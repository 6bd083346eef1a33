package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchAt fetches one partition from offset with the given request and
// partition limits (Fetch v12, topics by name) and returns the record
// bytes and their batches' count.
func fetchAt(t *testing.T, rc *rawConn, topic string, offset int64, maxBytes, partMaxBytes int32) (int, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 0, maxBytes, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = offset, partMaxBytes, -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.recv(rc.sendAt(req, 12)).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch response %+v", resp)
	}
	recs := resp.Topics[0].Partitions[0].RecordBatches
	n := 0
	for len(recs) >= 12 {
		size := 12 + int(uint32(recs[8])<<24|uint32(recs[9])<<16|uint32(recs[10])<<8|uint32(recs[11]))
		if size > len(recs) {
			break
		}
		recs = recs[size:]
		n++
	}
	return len(resp.Topics[0].Partitions[0].RecordBatches), n
}

// fetch.max.bytes caps a Fetch whose MaxBytes asks for more or for no
// limit (-1, 0: Kafka then returns one batch); KIP-74: the first batch is
// returned even when larger than every limit.
func TestFetchMaxBytesCap(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "", "fetch.max.bytes=4096")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, 1, 1, nil, "cap"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic("cap"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for range 10 { // ten batches of about 1.1 KiB
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat("v", 1000))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat("w", 8000))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	for _, mb := range []int32{1 << 30, 2147483647} {
		if size, batches := fetchAt(t, rc, "cap", 0, mb, 1<<30); size > 4096 || batches < 3 {
			t.Errorf("MaxBytes %d: %d bytes in %d batches, want at most fetch.max.bytes=4096 and at least 3 batches", mb, size, batches)
		}
	}
	for _, mb := range []int32{0, -1} { // Kafka: min(MaxBytes, fetch.max.bytes) < 1 leaves KIP-74's one batch
		if _, batches := fetchAt(t, rc, "cap", 0, mb, 1<<30); batches != 1 {
			t.Errorf("MaxBytes %d: %d batches, want the first one only", mb, batches)
		}
	}
	if _, batches := fetchAt(t, rc, "cap", 0, 1<<30, 1500); batches != 1 {
		t.Errorf("partition MaxBytes 1500: %d batches, want 1", batches)
	}
	if size, batches := fetchAt(t, rc, "cap", 10, 1<<30, 1<<30); batches != 1 || size < 8000 {
		t.Errorf("a batch above fetch.max.bytes: %d bytes in %d batches, want it whole (KIP-74)", size, batches)
	}
}
