package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-890 verification: the first transactional batch of a transaction to
// a partition is appended only if the coordinator has the partition in
// the producer's ongoing transaction (Produce up to v11), or once it adds
// it (Produce v12 and later). The error codes are Kafka's for each
// version.
func TestTxnProduceVerification(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.createTopic("verify", 4, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.RequestRetries(20))
	const txnID = "verify-txn"
	var pid int64
	var epoch int16
	// Twice: the second bumps the epoch to 1, so an older epoch exists.
	for range 2 {
		waitFor(t, 20*time.Second, "InitProducerId with a transactional id", func() bool {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || resp.ErrorCode != 0 {
				return false
			}
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
			return true
		})
	}
	txnBatch := func(epoch int16, seq int32) []byte {
		opts := batch.NewBuildOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, seq, true
		return batch.Build(opts, []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte("v")}})
	}
	tp, _ := b.meta.Topic("verify")
	produce := func(version int16, partition int32, data []byte) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = version, -1, 5000, kmsg.StringPtr(txnID)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "verify", tp.ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = partition, data
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.SeedBrokers()[0].Request(ctx, pinnedRequest{req, version})
		if err != nil {
			t.Fatal(err)
		}
		return kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	addPartition := func(partition int32) {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "verify", []int32{partition}
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.SeedBrokers()[0].Request(ctx, pinnedRequest{req, 3})
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
		}
	}
	check := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}

	// Not added to the transaction: refused before the append.
	check("Produce v9, partition not in the transaction", produce(9, 0, txnBatch(epoch, 0)), kerr.InvalidTxnState.Code)
	check("Produce v11, partition not in the transaction", produce(11, 0, txnBatch(epoch, 0)), kerr.TransactionAbortable.Code)
	if part, _ := b.partition("verify", 0); part.LogEndOffset() != 0 {
		t.Fatalf("a refused batch was appended: log end offset %d", part.LogEndOffset())
	}
	// Added: appended; the next batch needs no verification.
	addPartition(0)
	check("Produce v9 after AddPartitionsToTxn", produce(9, 0, txnBatch(epoch, 0)), 0)
	check("Produce v9, the transaction's second batch", produce(9, 0, txnBatch(epoch, 1)), 0)
	// Produce v12 adds the partition itself (transaction.version 2).
	check("Produce v12, partition not added", produce(12, 1, txnBatch(epoch, 0)), 0)
	desc := kmsg.NewPtrDescribeTransactionsRequest()
	desc.TransactionalIDs = []string{txnID}
	dresp, err := desc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]bool{}
	for _, rt := range dresp.TransactionStates[0].Topics {
		for _, p := range rt.Partitions {
			got[p] = true
		}
	}
	if len(got) != 2 || !got[0] || !got[1] {
		t.Fatalf("the transaction holds partitions %v, want 0 and 1", got)
	}
	// An older epoch is fenced by the coordinator.
	check("Produce v9 with an older epoch", produce(9, 2, txnBatch(epoch-1, 0)), kerr.InvalidProducerEpoch.Code)

	// Transactional records without a transactional id are refused: nothing
	// could verify them, and they could open a transaction no coordinator
	// ends (Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "verify", tp.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 3, txnBatch(epoch, 0)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.SeedBrokers()[0].Request(ctx, pinnedRequest{req, 9})
	if err != nil {
		t.Fatal(err)
	}
	check("Produce v9 of transactional records without a transactional id", kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed.Code)

	// A marker the partition refuses comes back to the coordinator as
	// the Kafka error a remote leader would answer, so it can tell fenced
	// (stop) from retriable.
	errs := markerWriter{b}.WriteMarkers(ctx, coordinator.Marker{ProducerID: pid, ProducerEpoch: epoch - 1, Commit: true, CoordinatorEpoch: 0},
		[]coordinator.TxnPartition{{Topic: "verify", Partition: 0}})
	if err := errs[coordinator.TxnPartition{Topic: "verify", Partition: 0}]; !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("a marker with an older epoch written here: %v, want INVALID_PRODUCER_EPOCH", err)
	}
}

// transaction.version 2, back to back: a producer sends its next
// transaction's first batches (Produce v12, which adds their partitions)
// as soon as EndTxn v5 answers, while the previous transaction's markers
// are still being written to the same partitions; the coordinator adds
// the partitions once those markers are written, and a marker written
// meanwhile voids the verification guard the produce took, so the broker
// verifies again instead of refusing the batch (INVALID_TXN_STATE). An
// abort of an empty next transaction sent at once is told to retry
// (CONCURRENT_TRANSACTIONS), never fenced. Every committed record is read
// at read_committed, no aborted one.
func TestTxnV2BackToBack(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, parts, rounds = "v2", 4, 30
	if _, err := b.createTopic(topic, parts, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.RequestRetries(20))
	const txnID = "v2-txn"
	var pid int64
	var epoch int16
	waitFor(t, 20*time.Second, "InitProducerId with a transactional id", func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return true
	})
	request := func(req kmsg.Request, version int16) kmsg.Response {
		t.Helper()
		resp, err := cl.SeedBrokers()[0].Request(ctx, pinnedRequest{req, version})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// endTxn retries CONCURRENT_TRANSACTIONS and returns the epoch to use
	// next.
	endTxn := func(commit bool) {
		t.Helper()
		for {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
			resp := request(req, 5).(*kmsg.EndTxnResponse)
			switch resp.ErrorCode {
			case 0:
				pid, epoch = resp.ProducerID, resp.ProducerEpoch
				return
			case kerr.ConcurrentTransactions.Code:
				time.Sleep(5 * time.Millisecond) // a retry's backoff; ctx bounds the retries
			default:
				t.Fatalf("EndTxn v5 (commit %v) at epoch %d: %v", commit, epoch, kerr.ErrorForCode(resp.ErrorCode))
			}
		}
	}
	value := func(round, p int) string { return fmt.Sprintf("r%d-p%d", round, p) }
	for round := range rounds {
		// One batch per partition, sequence 0: the epoch is new.
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, kmsg.StringPtr(txnID)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p := range parts {
			opts := batch.NewBuildOptions()
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, 0, true
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			rp.Records = batch.Build(opts, []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(value(round, p))}})
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		for {
			resp := request(req, 12).(*kmsg.ProduceResponse)
			retry := false
			for _, rp := range resp.Topics[0].Partitions {
				switch rp.ErrorCode {
				case 0:
				case kerr.NotEnoughReplicas.Code: // the coordinator could not answer yet
					retry = true
				default:
					t.Fatalf("round %d: Produce v12 at epoch %d, partition %d: %v", round, epoch, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
			if !retry {
				break
			}
			// Only the partitions that failed are sent again.
			var again []kmsg.ProduceRequestTopicPartition
			for i, rp := range resp.Topics[0].Partitions {
				if rp.ErrorCode != 0 {
					again = append(again, req.Topics[0].Partitions[i])
				}
			}
			req.Topics[0].Partitions = again
			time.Sleep(5 * time.Millisecond) // a retry's backoff; ctx bounds the retries
		}
		endTxn(true)
		if round%3 == 2 {
			endTxn(false) // the next transaction, empty, aborted at once
		}
	}
	got := consumeIsolated(t, ctx, []string{addr}, topic, true, rounds*parts)
	if len(got) != rounds*parts {
		t.Fatalf("read_committed read %d records, want %d", len(got), rounds*parts)
	}
	seen := map[string]bool{}
	for _, v := range got {
		seen[v] = true
	}
	for round := range rounds {
		for p := range parts {
			if !seen[value(round, p)] {
				t.Fatalf("committed record %s not read", value(round, p))
			}
		}
	}
}
