package server

// Transaction verification (KIP-890): before a partition leader appends
// the first batch of a transaction to a partition, it asks the
// transaction coordinator whether the partition is in the producer's
// ongoing transaction, so a late or zombie producer's batch cannot open a
// transaction the coordinator will never end (a hanging transaction).
// Produce up to v11 verifies (AddPartitionsToTxn v4+ with VerifyOnly);
// Produce v12 and later, sent by clients of transaction.version 2, adds
// the partition to the transaction (the client no longer sends
// AddPartitionsToTxn). Kafka's AddPartitionsToTxnManager and
// ReplicaManager.appendRecords decide the error codes: a fenced producer
// gets INVALID_PRODUCER_EPOCH, a partition not in the transaction
// INVALID_TXN_STATE (TRANSACTION_ABORTABLE from Produce v11, which knows
// it), and a coordinator that cannot answer now NOT_ENOUGH_REPLICAS, which
// every producer retries without a metadata refresh.
//
// The window between the verification and the append is guarded as
// Kafka's VerificationGuard guards it: the partition hands out a guard
// before the verification (replica.Partition.StartTxnVerification), a
// marker or transactional batch of the producer appended in between voids
// it, and the append refuses a batch whose guard is void with
// INVALID_TXN_STATE (replica/txn_guard.go). Without it, a batch verified
// before its transaction was aborted and appended after the abort marker
// would be adopted by the producer's next transaction, whose commit would
// make an aborted record visible to read_committed consumers.

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// verifyTimeout bounds a verification round trip to the coordinator.
const verifyTimeout = 5 * time.Second

// txnBatch is a transactional batch of a produce request to verify.
type txnBatch struct {
	topic     string
	partition int32
	pid       int64
	epoch     int16
}

// transactionalBatch returns the producer of records and its base
// sequence when it is a transactional batch (ok false otherwise, and for
// records the partition will refuse anyway).
func transactionalBatch(records []byte) (pid int64, epoch int16, seq int32, ok bool) {
	h, err := batch.ParseHeader(records)
	if err != nil || !h.Transactional() || h.Control() || h.ProducerID < 0 {
		return -1, -1, -1, false
	}
	return h.ProducerID, h.ProducerEpoch, h.BaseSequence, true
}

// verifyTxn verifies (or, with add, adds) batches' partitions with the
// transaction coordinator of txnID and returns the produce error code of
// each partition that failed (keyed by its index in batches). Batches of
// one request share one producer (Kafka refuses more: INVALID_RECORD is
// the partition's own check).
func (b *Broker) verifyTxn(ctx context.Context, txnID string, batches []txnBatch, add bool, produceVersion int16) map[int]int16 {
	failed := map[int]int16{}
	failAll := func(code int16) map[int]int16 {
		for i := range batches {
			failed[i] = produceVerifyCode(code, produceVersion)
		}
		return failed
	}
	if len(batches) == 0 {
		return failed
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txnID, batches[0].pid, batches[0].epoch, !add
	byTopic := map[string]int{}
	for _, tb := range batches {
		if tb.pid != tx.ProducerID || tb.epoch != tx.ProducerEpoch {
			return failAll(kerr.InvalidRecord.Code)
		}
		i, ok := byTopic[tb.topic]
		if !ok {
			i = len(tx.Topics)
			byTopic[tb.topic] = i
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = tb.topic
			tx.Topics = append(tx.Topics, t)
		}
		tx.Topics[i].Partitions = append(tx.Topics[i].Partitions, tb.partition)
	}
	req.Transactions = append(req.Transactions, tx)

	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	if err := b.ensureInternalTopic(b.txnTopicSpec()); err != nil {
		return failAll(kerr.CoordinatorNotAvailable.Code)
	}
	node, _, _, err := b.coordinatorOf(txnTopic, txnID, b.cfg.InterBrokerListenerName)
	if err != nil {
		return failAll(kerr.CoordinatorNotAvailable.Code)
	}
	var resp *kmsg.AddPartitionsToTxnResponse
	if node == b.cfg.NodeID {
		resp = b.txn.AddPartitionsToTxn(ctx, req)
	} else {
		kresp, err := b.cl.brokers.request(ctx, node, req)
		if err != nil {
			return failAll(kerr.NetworkException.Code)
		}
		resp = kresp.(*kmsg.AddPartitionsToTxnResponse)
	}
	if resp.ErrorCode != 0 {
		return failAll(resp.ErrorCode)
	}
	codes := map[txnBatch]int16{}
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				codes[txnBatch{topic: t.Topic, partition: p.Partition, pid: tx.ProducerID, epoch: tx.ProducerEpoch}] = p.ErrorCode
			}
		}
	}
	for i, tb := range batches {
		code, ok := codes[tb]
		if !ok {
			code = kerr.InvalidTxnState.Code // unanswered: not verified
		}
		if code != 0 {
			failed[i] = produceVerifyCode(code, produceVersion)
		}
	}
	return failed
}

// produceVerifyCode is the produce error of a verification's error code
// (AddPartitionsToTxnManager's and ReplicaManager's translations).
func produceVerifyCode(code int16, produceVersion int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		if produceVersion <= 10 {
			return kerr.InvalidTxnState.Code // older clients do not know it
		}
		return code
	case kerr.ConcurrentTransactions.Code, kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState.Code
	}
	return code
}

// verifyProduce verifies the transactional batches of req that open a
// transaction in their partition (txn_verify.go's rules) and returns the
// error code of each partition that failed and the guard each verified
// one's append must carry. Topics writable refuses are skipped: their
// partitions are answered TOPIC_AUTHORIZATION_FAILED and must not be
// added to the transaction (v12+ adds them; Kafka filters unauthorized
// topics before handleProduceAppend).
func (b *Broker) verifyProduce(ctx context.Context, req *kmsg.ProduceRequest, writable func(topic string) bool) (map[topicPartition]int16, map[topicPartition]replica.TxnGuard) {
	if req.TransactionID == nil || *req.TransactionID == "" {
		// Transactional records need a transactional id (Kafka's
		// handleProduceRequest: TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
		// without one nothing verifies them, and one could open a
		// transaction no coordinator ends.
		var out map[topicPartition]int16
		for _, rt := range req.Topics {
			name := rt.Topic
			if req.Version >= 13 {
				if t, ok := b.meta.TopicByID(rt.TopicID); ok {
					name = t.Name
				}
			}
			for _, rp := range rt.Partitions {
				if _, _, _, ok := transactionalBatch(rp.Records); ok {
					if out == nil {
						out = map[topicPartition]int16{}
					}
					out[topicPartition{name, rp.Partition}] = kerr.TransactionalIDAuthorizationFailed.Code
				}
			}
		}
		return out, nil
	}
	if !b.cfg.TransactionPartitionVerificationEnable {
		return nil, nil
	}
	var (
		batches []txnBatch
		parts   []*replica.Partition // batches[i]'s
		guards  map[topicPartition]replica.TxnGuard
		waiting map[topicPartition]int16 // behind an unappended batch
	)
	for _, rt := range req.Topics {
		name := rt.Topic
		if req.Version >= 13 {
			t, ok := b.meta.TopicByID(rt.TopicID)
			if !ok {
				continue
			}
			name = t.Name
		}
		if !writable(name) {
			continue
		}
		for _, rp := range rt.Partitions {
			part, ok := b.partition(name, rp.Partition)
			if !ok || !part.IsLeader() {
				continue // answered by the append
			}
			pid, epoch, seq, ok := transactionalBatch(rp.Records)
			if !ok {
				continue
			}
			if req.Version < 12 {
				// Only a transaction.version 2 producer's epoch
				// ends with its transaction (EndTxn v5 bumps it),
				// so only there is a lowest sequence sure to be
				// forgotten with a transaction that failed.
				seq = -1
			}
			g, need, behind := part.StartTxnVerificationAt(pid, epoch, seq)
			if !need {
				continue
			}
			if behind {
				// An earlier batch of the transaction has not
				// been appended (its verification failed
				// retriably): this one waits for it.
				if waiting == nil {
					waiting = map[topicPartition]int16{}
				}
				waiting[topicPartition{name, rp.Partition}] = kerr.NotEnoughReplicas.Code
				continue
			}
			if guards == nil {
				guards = map[topicPartition]replica.TxnGuard{}
			}
			guards[topicPartition{name, rp.Partition}] = g
			batches = append(batches, txnBatch{topic: name, partition: rp.Partition, pid: pid, epoch: epoch})
			parts = append(parts, part)
		}
	}
	if len(batches) == 0 {
		return waiting, nil
	}
	failed := b.verifyTxn(ctx, *req.TransactionID, batches, req.Version >= 12, req.Version)
	if req.Version >= 12 {
		b.reverifyVoided(ctx, *req.TransactionID, batches, parts, guards, failed, true, req.Version)
	}
	out := make(map[topicPartition]int16, len(failed)+len(waiting))
	for tp, code := range waiting {
		out[tp] = code
	}
	for i, code := range failed {
		out[topicPartition{batches[i].topic, batches[i].partition}] = code
	}
	return out, guards
}

// reverifyRounds bounds how often a batch whose guard was voided while it
// was verified is verified again.
const reverifyRounds = 3

// reverifyVoided verifies again the batches whose verification succeeded
// but whose guard a marker or transactional batch of the producer voided
// meanwhile (their append would be refused with INVALID_TXN_STATE), with
// a new guard, and records the new guards and errors in guards and
// failed. The common case is the previous transaction's marker: a client
// of transaction.version 2 produces its next transaction's first batch as
// soon as EndTxn answers, and the coordinator adds the partition only once
// the previous transaction's markers, this partition's among them, are
// written (Kafka's broker retries its CONCURRENT_TRANSACTIONS answer, each
// retry a new verification). A transaction that ended meanwhile fails the
// new verification instead (its epoch was bumped, or the partition is no
// longer in it). Only for Produce v12 and later (transaction.version 2,
// whose EndTxn bumps the epoch): under version 1 a client abort keeps
// the epoch, and a late batch of the aborted transaction verified again
// would join the producer's next transaction if it added the partition,
// the very adoption the guard exists to prevent.
func (b *Broker) reverifyVoided(ctx context.Context, txnID string, batches []txnBatch, parts []*replica.Partition, guards map[topicPartition]replica.TxnGuard, failed map[int]int16, add bool, produceVersion int16) {
	for range reverifyRounds {
		var again []int
		for i, tb := range batches {
			if _, ok := failed[i]; ok {
				continue
			}
			tp := topicPartition{tb.topic, tb.partition}
			if parts[i].TxnGuardHeld(tb.pid, tb.epoch, guards[tp]) {
				continue
			}
			g, need := parts[i].StartTxnVerification(tb.pid, tb.epoch) // its sequence is known already
			if !need {
				continue // ongoing now: the append needs no guard
			}
			guards[tp] = g
			again = append(again, i)
		}
		if len(again) == 0 {
			return
		}
		sub := make([]txnBatch, len(again))
		for j, i := range again {
			sub[j] = batches[i]
		}
		for j, code := range b.verifyTxn(ctx, txnID, sub, add, produceVersion) {
			failed[again[j]] = code
		}
	}
}
