package coordinator

import (
	"context"
	"math"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction APIs, as Kafka 4.x's TransactionCoordinator and
// KafkaApis answer them.

// transit is t's next state before the change is made: a copy whose
// previous producer id is t's producer id and whose update time is nowMs
// (Kafka's prepareTransitionTo).
func (t *txnMeta) transit(nowMs int64) *txnMeta {
	n := t.clone()
	n.prevProducerID = t.producerID
	n.updateMs = nowMs
	return n
}

// prepareFence is the abort of t, Ongoing, with a bumped epoch that fences
// its producer: Kafka's prepareFenceProducerEpoch followed by
// endTransaction's PrepareAbort (InitProducerId of an ongoing transaction,
// timeouts). Transaction version 2 bumps once more as it prepares the
// abort (KIP-890: Kafka's endTransaction sets the fenced epoch, then
// prepareAbortOrCommit bumps it). The version is the transaction's own
// client transaction version here; Kafka 4 uses the cluster's finalized
// transaction.version for timeouts. It returns nil when the epoch is
// already Short.MaxValue (Kafka refuses to fence it).
func prepareFence(t *txnMeta, nowMs int64) *txnMeta {
	if t.epoch == math.MaxInt16 {
		return nil
	}
	n := t.transit(nowMs)
	n.state = txnPrepareAbort
	n.nextProducerID = -1
	n.epoch, n.lastEpoch = t.epoch+1, -1
	if t.tv >= 2 && t.epoch < math.MaxInt16-1 {
		n.epoch, n.lastEpoch = t.epoch+2, t.epoch+1
	}
	return n
}

// timedOutTxn is a transaction abortTimedOut found past its timeout: t
// with the producer id and epoch it had then.
type timedOutTxn struct {
	t     *txnMeta
	pid   int64
	epoch int16
}

// fenceAbort aborts d.t with an epoch bump, then sends its markers, if,
// under the shard's lock, it is still the Ongoing transaction of d's
// producer id and epoch, no change to it is pending and it is still past
// its timeout (its producer may have completed the transaction and begun
// another since d was found: that one is not fenced). It answers 0, or
// why it did not.
func (c *TxnCoordinator) fenceAbort(ctx context.Context, s *txnShard, d timedOutTxn) int16 {
	t := d.t
	s.mu.Lock()
	switch {
	case s.gone:
		s.mu.Unlock()
		return kerr.NotCoordinator.Code
	case s.txns[t.id] != t || t.producerID != d.pid:
		s.mu.Unlock()
		return kerr.InvalidProducerIDMapping.Code
	case t.pending:
		s.mu.Unlock()
		return kerr.ConcurrentTransactions.Code
	case t.epoch != d.epoch:
		s.mu.Unlock()
		return kerr.ProducerFenced.Code
	case t.state != txnOngoing || !t.timedOut(c.now()):
		s.mu.Unlock()
		return kerr.InvalidTxnState.Code
	}
	next := prepareFence(t, c.now())
	if next == nil {
		s.mu.Unlock()
		return kerr.ProducerFenced.Code
	}
	t.pending = true
	s.mu.Unlock()
	if code := c.write(ctx, s, t, next, false); code != 0 {
		return code
	}
	c.startMarkers(s, t)
	return 0
}

// expectedProducer is InitProducerId v3+'s producer id and epoch (KIP-360).
type expectedProducer struct {
	pid   int64
	epoch int16
}

// InitProducerID answers InitProducerId for a transactional id (Kafka's
// handleInitProducerId; a nil or empty TransactionalID answers
// INVALID_REQUEST): a new id gets a new producer id at epoch 0; a known
// one has its epoch bumped, fencing its previous producer, or, once the
// epoch is exhausted, a new producer id; an Ongoing transaction is first
// aborted with a bumped epoch and the answer is CONCURRENT_TRANSACTIONS
// (the producer retries); a prepared one answers CONCURRENT_TRANSACTIONS.
// From v3 a producer id and epoch in the request are checked as KIP-360
// says (a retry of a bump that succeeded gets the same epoch back).
// PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4 (KIP-588).
func (c *TxnCoordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	pid, epoch, code := c.initProducerID(ctx, req)
	if code == kerr.ProducerFenced.Code && req.Version < 4 {
		code = kerr.InvalidProducerEpoch.Code
	}
	resp.ErrorCode = code
	if code == 0 {
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
	}
	return resp
}

func (c *TxnCoordinator) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (int64, int16, int16) {
	var expect *expectedProducer
	if req.Version >= 3 {
		switch {
		case req.ProducerID == -1 && req.ProducerEpoch == -1:
		case req.ProducerID == -1 || req.ProducerEpoch == -1:
			return -1, -1, kerr.InvalidRequest.Code
		default:
			expect = &expectedProducer{req.ProducerID, req.ProducerEpoch}
		}
	}
	if req.TransactionalID == nil || *req.TransactionalID == "" {
		return -1, -1, kerr.InvalidRequest.Code
	}
	id := *req.TransactionalID
	timeout := req.TransactionTimeoutMillis
	if timeout <= 0 || int64(timeout) > c.cfg.MaxTimeout.Milliseconds() {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return -1, -1, code
	}
	newID := int64(-1)
	for {
		s.mu.Lock()
		if s.gone {
			s.mu.Unlock()
			return -1, -1, kerr.NotCoordinator.Code
		}
		t, fresh := s.txns[id], false
		if t == nil {
			if newID < 0 {
				s.mu.Unlock()
				if newID, code = c.newProducerID(); code != 0 {
					return -1, -1, code
				}
				continue
			}
			t = &txnMeta{
				id: id, producerID: newID, prevProducerID: -1, nextProducerID: -1,
				epoch: -1, lastEpoch: -1, timeoutMs: timeout, state: txnEmpty,
				parts: map[TxnPartition]struct{}{}, startMs: -1, updateMs: c.now(),
			}
			s.txns[id], fresh, newID = t, true, -1
		}
		next, fence, needID, code := c.prepareInit(t, timeout, expect, newID)
		if needID {
			s.mu.Unlock()
			if newID, code = c.newProducerID(); code != 0 {
				return -1, -1, code
			}
			continue
		}
		if code != 0 {
			if fresh {
				delete(s.txns, id)
			}
			s.mu.Unlock()
			return -1, -1, code
		}
		t.pending = true
		s.mu.Unlock()
		if code := c.write(ctx, s, t, next, fresh); code != 0 {
			return -1, -1, code
		}
		if fence {
			c.startMarkers(s, t)
			return -1, -1, kerr.ConcurrentTransactions.Code
		}
		return next.producerID, next.epoch, 0
	}
}

// prepareInit is Kafka's prepareInitProducerIdTransit under the shard's
// lock: the state to write, whether it is an epoch fence (an abort), or
// needID when a new producer id is needed and rotID (one allocated
// already, or -1) is not one.
func (c *TxnCoordinator) prepareInit(t *txnMeta, timeout int32, expect *expectedProducer, rotID int64) (next *txnMeta, fence, needID bool, code int16) {
	if t.pending {
		return nil, false, false, kerr.ConcurrentTransactions.Code
	}
	// KIP-360: fence the producer unless the metadata was just created,
	// the producer id is the current one (its epoch is checked below), or
	// it is the previous one with an exhausted epoch (a retry of a
	// rotation whose answer was lost).
	if expect != nil && t.epoch != -1 && expect.pid != t.producerID &&
		(expect.pid != t.prevProducerID || !epochExhausted(expect.epoch)) {
		return nil, false, false, kerr.ProducerFenced.Code
	}
	now := c.now()
	switch t.state {
	case txnPrepareCommit, txnPrepareAbort:
		return nil, false, false, kerr.ConcurrentTransactions.Code
	case txnOngoing:
		n := prepareFence(t, now)
		if n == nil {
			return nil, false, false, kerr.ProducerFenced.Code
		}
		return n, true, false, 0
	case txnEmpty, txnCompleteCommit, txnCompleteAbort:
	default:
		// Dead and PrepareEpochFence are never a transaction's state here
		// (Kafka: IllegalStateException).
		return nil, false, false, kerr.UnknownServerError.Code
	}
	n := t.transit(now)
	n.state, n.timeoutMs, n.startMs, n.nextProducerID = txnEmpty, timeout, -1, -1
	n.parts = map[TxnPartition]struct{}{}
	if epochExhausted(t.epoch) && (expect == nil || expect.epoch == t.epoch) {
		// prepareProducerIdRotation.
		if rotID < 0 {
			return nil, false, true, 0
		}
		n.producerID, n.epoch, n.lastEpoch = rotID, 0, -1
		if expect != nil {
			n.lastEpoch = t.epoch
		}
		return n, false, false, 0
	}
	// prepareIncrementProducerEpoch.
	switch {
	case expect == nil:
		n.epoch, n.lastEpoch = t.epoch+1, -1
	case t.epoch == -1 || expect.epoch == t.epoch:
		n.epoch, n.lastEpoch = t.epoch+1, t.epoch
	case expect.epoch == t.lastEpoch:
		n.epoch, n.lastEpoch = t.epoch, t.lastEpoch // a retry: same epoch
	default:
		return nil, false, false, kerr.ProducerFenced.Code
	}
	return n, false, false, 0
}

// addPartitions is Kafka's handleAddPartitionsToTransaction: the
// partitions join the transaction (it becomes Ongoing, starting it if it
// was not). tv is the client transaction version of the request.
func (c *TxnCoordinator) addPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TxnPartition, tv int16) int16 {
	wait := c.cfg.ConcurrentWait
	if tv >= 2 && c.cfg.BrokerAddWait > 0 {
		wait = c.cfg.BrokerAddWait
	}
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return code
	}
	s.mu.Lock()
	queuedOn := s.txns[id]
	q := queueAdd(queuedOn, pid, epoch, parts, tv, wait)
	t := c.awaitCompleted(ctx, s, id, pid, epoch, wait)
	unqueueAdd(queuedOn, q)
	switch {
	case s.gone:
		s.mu.Unlock()
		return kerr.NotCoordinator.Code
	case t != nil && t.completing() && t.completesInto(pid, epoch):
		s.mu.Unlock()
		return kerr.ConcurrentTransactions.Code
	case t == nil || t.producerID != pid:
		s.mu.Unlock()
		return kerr.InvalidProducerIDMapping.Code
	case t.epoch != epoch:
		s.mu.Unlock()
		return kerr.ProducerFenced.Code
	case t.pending, t.state == txnPrepareCommit, t.state == txnPrepareAbort:
		s.mu.Unlock()
		return kerr.ConcurrentTransactions.Code
	case t.state == txnOngoing && t.hasAll(parts):
		s.mu.Unlock()
		return 0
	case t.state != txnOngoing && t.state != txnEmpty && t.state != txnCompleteCommit && t.state != txnCompleteAbort:
		s.mu.Unlock()
		return kerr.InvalidTxnState.Code
	}
	n := t.transit(c.now())
	if t.state != txnOngoing {
		n.startMs = n.updateMs
	}
	n.state, n.tv = txnOngoing, tv
	for _, p := range parts {
		n.parts[p] = struct{}{}
	}
	t.pending = true
	s.mu.Unlock()
	return c.write(ctx, s, t, n, false)
}

// queueAdd queues an add of parts on t (s.mu held) when it will wait for
// t's completion (awaitCompleted's condition), so that the completion can
// fold it in (foldQueuedAdds); nil otherwise.
func queueAdd(t *txnMeta, pid int64, epoch int16, parts []TxnPartition, tv int16, wait time.Duration) *queuedAdd {
	if wait <= 0 || !t.awaited(pid, epoch) {
		return nil
	}
	q := &queuedAdd{pid: pid, epoch: epoch, parts: parts, tv: tv}
	t.queued = append(t.queued, q)
	return q
}

// unqueueAdd removes q from t's queue (s.mu held) if the completion did
// not take it.
func unqueueAdd(t *txnMeta, q *queuedAdd) {
	if t == nil || q == nil {
		return
	}
	if i := slices.Index(t.queued, q); i >= 0 {
		t.queued = slices.Delete(t.queued, i, i+1)
	}
}

func (t *txnMeta) hasAll(parts []TxnPartition) bool {
	for _, p := range parts {
		if _, ok := t.parts[p]; !ok {
			return false
		}
	}
	return true
}

// verifyPartitions is Kafka's handleVerifyPartitionsInTransaction
// (AddPartitionsToTxn v4+ with VerifyOnly, KIP-890 part 1): each partition
// answers NONE if it is in the transaction, TRANSACTION_ABORTABLE if not;
// the transaction's own errors (unknown or other producer id:
// INVALID_PRODUCER_ID_MAPPING, other epoch: PRODUCER_FENCED, prepared:
// CONCURRENT_TRANSACTIONS) answer every partition.
func (c *TxnCoordinator) verifyPartitions(id string, pid int64, epoch int16, parts []TxnPartition) (map[TxnPartition]int16, int16) {
	if id == "" {
		return nil, kerr.InvalidRequest.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return nil, code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.txns[id]
	switch {
	case s.gone:
		return nil, kerr.NotCoordinator.Code
	case t == nil || t.producerID != pid:
		return nil, kerr.InvalidProducerIDMapping.Code
	case t.epoch != epoch:
		return nil, kerr.ProducerFenced.Code
	case t.state == txnPrepareCommit || t.state == txnPrepareAbort:
		return nil, kerr.ConcurrentTransactions.Code
	}
	out := make(map[TxnPartition]int16, len(parts))
	for _, p := range parts {
		if _, ok := t.parts[p]; ok {
			out[p] = 0
		} else {
			out[p] = kerr.TransactionAbortable.Code
		}
	}
	return out, 0
}

// AddPartitionsToTxn answers AddPartitionsToTxn. v0-v3 (the client's): one
// transaction; every partition gets the transaction's error, or, when
// PartitionExists refuses some, UNKNOWN_TOPIC_OR_PARTITION for those and
// OPERATION_NOT_ATTEMPTED for the others; PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH below v2 (KIP-588). v4-v5 (brokers', batched):
// each transaction is added, or with VerifyOnly verified
// (verifyPartitions); v5 adds with client transaction version 2 (KIP-890
// part 2).
func (c *TxnCoordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var parts []TxnPartition
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				parts = append(parts, TxnPartition{rt.Topic, p})
			}
		}
		errs := map[TxnPartition]int16{}
		if c.cfg.PartitionExists != nil {
			for _, p := range parts {
				if !c.cfg.PartitionExists(p) {
					errs[p] = kerr.UnknownTopicOrPartition.Code
				}
			}
		}
		if len(errs) > 0 {
			for _, p := range parts {
				if _, ok := errs[p]; !ok {
					errs[p] = kerr.OperationNotAttempted.Code
				}
			}
		} else {
			code := c.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, 0)
			if code == kerr.ProducerFenced.Code && req.Version < 2 {
				code = kerr.InvalidProducerEpoch.Code
			}
			for _, p := range parts {
				errs[p] = code
			}
		}
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, errs[TxnPartition{rt.Topic, p}]
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	tv := int16(0)
	if req.Version > 4 {
		tv = 2
	}
	for _, rtx := range req.Transactions {
		var parts []TxnPartition
		for _, rt := range rtx.Topics {
			for _, p := range rt.Partitions {
				parts = append(parts, TxnPartition{rt.Topic, p})
			}
		}
		var errs map[TxnPartition]int16
		var code int16
		if rtx.VerifyOnly {
			errs, code = c.verifyPartitions(rtx.TransactionalID, rtx.ProducerID, rtx.ProducerEpoch, parts)
		} else {
			code = c.addPartitions(ctx, rtx.TransactionalID, rtx.ProducerID, rtx.ProducerEpoch, parts, tv)
		}
		stx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		stx.TransactionalID = rtx.TransactionalID
		for _, rt := range rtx.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				if errs != nil {
					sp.ErrorCode = errs[TxnPartition{rt.Topic, p}]
				}
				st.Partitions = append(st.Partitions, sp)
			}
			stx.Topics = append(stx.Topics, st)
		}
		resp.Transactions = append(resp.Transactions, stx)
	}
	return resp
}

// AddOffsetsToTxn answers AddOffsetsToTxn: groupPartition, the
// __consumer_offsets partition of req.Group, joins the transaction as
// AddPartitionsToTxn would add it (KafkaApis.handleAddOffsetsToTxnRequest).
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2 (KIP-588).
func (c *TxnCoordinator) AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest, groupPartition TxnPartition) *kmsg.AddOffsetsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	code := c.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []TxnPartition{groupPartition}, 0)
	if code == kerr.ProducerFenced.Code && req.Version < 2 {
		code = kerr.InvalidProducerEpoch.Code
	}
	resp.ErrorCode = code
	return resp
}

// EndTxn answers EndTxn: an Ongoing transaction becomes PrepareCommit or
// PrepareAbort (written), the answer is sent, and the markers are written
// in the background, then CompleteCommit or CompleteAbort. A retry of an
// end already done answers NONE; a prepared transaction answers
// CONCURRENT_TRANSACTIONS for the same result; anything else
// INVALID_TXN_STATE (Kafka's endTransactionWithTV1). v5 is transaction
// version 2 (KIP-890 part 2, Kafka's endTransaction): every end bumps the
// epoch (overflowing to a new producer id), an Empty or completed
// transaction may be aborted, a retry is recognised by the epoch one below
// the current one, and the response carries the producer id and epoch to
// use next. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2 (KIP-588).
func (c *TxnCoordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	tv := int16(0)
	if req.Version > 4 {
		tv = 2
	}
	pid, epoch, code := c.endTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv)
	if code == kerr.ProducerFenced.Code && req.Version < 2 {
		code = kerr.InvalidProducerEpoch.Code
	}
	resp.ErrorCode = code
	if code == 0 && req.Version >= 5 {
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
	}
	return resp
}

func (c *TxnCoordinator) endTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool, tv int16) (int64, int16, int16) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return -1, -1, code
	}
	newID := int64(-1)
	for {
		s.mu.Lock()
		t := s.txns[id]
		if tv >= 2 {
			// The producer's next transaction may end before the
			// previous one's markers are written (the epoch the
			// previous EndTxn answered is the prepared state's): wait
			// for them as AddPartitionsToTxn does.
			t = c.awaitCompleted(ctx, s, id, pid, epoch, c.cfg.ConcurrentWait)
		}
		if s.gone {
			s.mu.Unlock()
			return -1, -1, kerr.NotCoordinator.Code
		}
		if t == nil {
			s.mu.Unlock()
			return -1, -1, kerr.InvalidProducerIDMapping.Code
		}
		var next *txnMeta
		var needID bool
		if tv >= 2 {
			next, needID, code = c.prepareEndTV2(t, pid, epoch, commit, newID)
		} else {
			next, code = c.prepareEndTV1(t, pid, epoch, commit)
		}
		if needID {
			s.mu.Unlock()
			if newID, code = c.newProducerID(); code != 0 {
				return -1, -1, code
			}
			continue
		}
		if code != 0 || next == nil { // an error, or a retry answered NONE
			curID, curEpoch := t.producerID, t.epoch
			s.mu.Unlock()
			return curID, curEpoch, code
		}
		t.pending = true
		s.mu.Unlock()
		if code := c.write(ctx, s, t, next, false); code != 0 {
			return -1, -1, code
		}
		c.startMarkers(s, t)
		if next.nextProducerID >= 0 {
			// KIP-890: the client sees the exhausted epoch followed by epoch
			// 0 of the new producer id.
			return next.nextProducerID, 0, 0
		}
		return next.producerID, next.epoch, 0
	}
}

// prepareEndTV1 is Kafka's endTransactionWithTV1 for a client's EndTxn,
// under the shard's lock: the state to write, or nil with the code to
// answer (0: a retry of what is done).
func (c *TxnCoordinator) prepareEndTV1(t *txnMeta, pid int64, epoch int16, commit bool) (*txnMeta, int16) {
	switch {
	case t.producerID != pid:
		return nil, kerr.InvalidProducerIDMapping.Code
	case t.epoch != epoch:
		return nil, kerr.ProducerFenced.Code
	case t.pending:
		return nil, kerr.ConcurrentTransactions.Code
	}
	switch t.state {
	case txnOngoing:
		n := t.transit(c.now())
		n.state, n.tv = txnPrepareAbort, 0
		if commit {
			n.state = txnPrepareCommit
		}
		return n, 0
	case txnCompleteCommit, txnCompleteAbort:
		if commit == (t.state == txnCompleteCommit) {
			return nil, 0
		}
	case txnPrepareCommit, txnPrepareAbort:
		if commit == (t.state == txnPrepareCommit) {
			return nil, kerr.ConcurrentTransactions.Code
		}
	case txnEmpty:
	default:
		return nil, kerr.UnknownServerError.Code
	}
	return nil, kerr.InvalidTxnState.Code
}

// prepareEndTV2 is Kafka's endTransaction for transaction version 2
// (KIP-890 part 2), for a client's EndTxn, under the shard's lock: the
// state to write (with the epoch bumped), or nil with the code to answer
// (0: a retry of what is done); needID when the epoch is exhausted and
// newID (-1 or one allocated already) is needed as the next producer id.
//
//	                 Abort           Commit
//	                 retry  current  retry  current
//	Empty            PF     bump     PF     ITS
//	Ongoing          PF     bump     PF     bump
//	PrepareAbort     CT     CT       ITS    CT
//	PrepareCommit    ITS    CT       CT     CT
//	CompleteAbort    NONE   bump     ITS    ITS
//	CompleteCommit   ITS    bump     NONE   ITS
//
// (retry: the request's epoch is the current one minus one, or the last
// epoch of the previous producer id after an overflow; PF
// PRODUCER_FENCED, ITS INVALID_TXN_STATE, CT CONCURRENT_TRANSACTIONS.)
//
// A prepared transaction at the request's own epoch differs from Kafka,
// which answers PRODUCER_FENCED: the prepared epoch is the one the
// previous EndTxn answered, so the request is the producer's next
// transaction ending (an abort of one that added nothing yet, say)
// before the previous one's markers are written; it is told to retry
// (CONCURRENT_TRANSACTIONS) and meets the completed state then. Kafka's
// markers are written in milliseconds; a Sluice marker is a raft write
// per partition, and franz-go aborts such a transaction whenever its
// TxnOffsetCommit met the previous one still completing.
func (c *TxnCoordinator) prepareEndTV2(t *txnMeta, pid int64, epoch int16, commit bool, newID int64) (*txnMeta, bool, int16) {
	retryOnOverflow := t.prevProducerID == pid && epoch == math.MaxInt16-1 && t.epoch == 0
	retryOnBump := int32(t.epoch) == int32(epoch)+1
	var valid bool
	switch t.state {
	case txnPrepareCommit, txnPrepareAbort:
		valid = retryOnBump || epoch == t.epoch
	case txnCompleteCommit, txnCompleteAbort:
		valid = retryOnBump || retryOnOverflow || epoch == t.epoch
	default:
		valid = epoch == t.epoch
	}
	isRetry := retryOnBump || retryOnOverflow
	switch {
	case t.completing() && t.completesInto(pid, epoch):
		// The next transaction of the producer id this one's
		// overflow moves to, before the markers are written.
		return nil, false, kerr.ConcurrentTransactions.Code
	case t.producerID != pid && !retryOnOverflow:
		return nil, false, kerr.InvalidProducerIDMapping.Code
	case !valid:
		return nil, false, kerr.ProducerFenced.Code
	case t.pending:
		return nil, false, kerr.ConcurrentTransactions.Code
	}
	bump := func(state kmsg.TransactionState, noPartitions bool) (*txnMeta, bool, int16) {
		n := t.transit(c.now())
		n.state, n.tv, n.nextProducerID = state, 2, -1
		if epochExhausted(t.epoch) {
			if newID < 0 {
				return nil, true, 0
			}
			n.nextProducerID = newID
		}
		if t.epoch < math.MaxInt16 {
			n.epoch, n.lastEpoch = t.epoch+1, t.epoch
		}
		if noPartitions {
			n.startMs = n.updateMs
		}
		return n, false, 0
	}
	switch t.state {
	case txnOngoing:
		if commit {
			return bump(txnPrepareCommit, false)
		}
		return bump(txnPrepareAbort, false)
	case txnCompleteCommit:
		switch {
		case commit && isRetry:
			return nil, false, 0
		case !commit && !isRetry:
			return bump(txnPrepareAbort, true)
		}
	case txnCompleteAbort:
		switch {
		case !commit && isRetry:
			return nil, false, 0
		case !commit:
			return bump(txnPrepareAbort, true)
		}
	case txnPrepareCommit, txnPrepareAbort:
		if !isRetry || commit == (t.state == txnPrepareCommit) {
			return nil, false, kerr.ConcurrentTransactions.Code
		}
	case txnEmpty:
		if !commit {
			return bump(txnPrepareAbort, true)
		}
	default:
		return nil, false, kerr.UnknownServerError.Code
	}
	return nil, false, kerr.InvalidTxnState.Code
}

// DescribeTransactions answers DescribeTransactions (KIP-664; Kafka's
// handleDescribeTransactions): each id's state, or NOT_COORDINATOR /
// COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE for its shard,
// INVALID_REQUEST for an empty id, TRANSACTIONAL_ID_NOT_FOUND for an
// unknown one.
func (c *TxnCoordinator) DescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ErrorCode = c.describe(id, &st)
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func (c *TxnCoordinator) describe(id string, st *kmsg.DescribeTransactionsResponseTransactionState) int16 {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return kerr.CoordinatorNotAvailable.Code
	case id == "":
		return kerr.InvalidRequest.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.txns[id]
	if s.gone {
		return kerr.NotCoordinator.Code
	}
	if t == nil || t.state == txnDead {
		return kerr.TransactionalIDNotFound.Code
	}
	st.State = t.state.String()
	st.TimeoutMillis = t.timeoutMs
	st.StartTimestamp = t.startMs
	st.ProducerID, st.ProducerEpoch = t.producerID, t.epoch
	for _, p := range t.sortedParts() {
		if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
			tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tt.Topic = p.Topic
			st.Topics = append(st.Topics, tt)
		}
		tt := &st.Topics[len(st.Topics)-1]
		tt.Partitions = append(tt.Partitions, p.Partition)
	}
	return 0
}

// ListTransactions answers ListTransactions (KIP-664; Kafka's
// listTransactionStates) over every loaded shard, sorted by transactional
// id: filtered by state names (unknown ones are returned in
// UnknownStateFilters and ignored, as Kafka does), producer ids, duration (v1,
// KIP-994: only transactions running longer than DurationFilterMillis ms;
// -1 none) and a transactional id pattern (v2, KIP-1152: a regular
// expression that must match the whole id; Go's RE2 syntax here, Java's in
// Kafka; INVALID_REGULAR_EXPRESSION if it does not compile).
// COORDINATOR_LOAD_IN_PROGRESS while any shard loads.
func (c *TxnCoordinator) ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	shards := make([]*txnShard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()

	states := map[kmsg.TransactionState]bool{}
	for _, name := range req.StateFilters {
		if st, ok := txnStateByName[name]; ok {
			states[st] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	var re *regexp.Regexp
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
	}
	duration := req.DurationFilterMillis
	if req.Version < 1 {
		duration = -1
	}
	now := c.now()
	include := func(t *txnMeta) bool {
		switch {
		case t.state == txnDead:
			return false
		case len(pids) > 0 && !pids[t.producerID]:
			return false
		case len(states) > 0 && !states[t.state]:
			return false
		case duration >= 0 && now-t.startMs <= duration:
			return false
		case re != nil:
			return re.MatchString(t.id)
		}
		return true
	}
	for _, s := range shards {
		s.mu.Lock()
		loading := s.loading
		if !loading && !s.gone {
			for _, t := range s.txns {
				if include(t) {
					lt := kmsg.NewListTransactionsResponseTransactionState()
					lt.TransactionalID, lt.ProducerID, lt.TransactionState = t.id, t.producerID, t.state.String()
					resp.TransactionStates = append(resp.TransactionStates, lt)
				}
			}
		}
		s.mu.Unlock()
		if loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			resp.TransactionStates = nil
			return resp
		}
	}
	sort.Slice(resp.TransactionStates, func(i, j int) bool {
		return resp.TransactionStates[i].TransactionalID < resp.TransactionStates[j].TransactionalID
	})
	return resp
}

// completesInto reports whether pid at epoch is the producer id and epoch
// t's completion moves to after a TV2 epoch overflow (the EndTxn that
// prepared it answered them already).
func (t *txnMeta) completesInto(pid int64, epoch int16) bool {
	return t.nextProducerID >= 0 && t.nextProducerID == pid && epoch == 0
}

// completing reports whether t is being completed (a write in flight, or
// its markers being written).
func (t *txnMeta) completing() bool {
	return t.pending || t.state == txnPrepareCommit || t.state == txnPrepareAbort
}

// awaited reports whether a request of the producer (pid, epoch) waits
// for t (nil: none) to complete: t is completing, and its producer is the
// request's or the one the completion moves to.
func (t *txnMeta) awaited(pid int64, epoch int16) bool {
	return t != nil && t.completing() && (t.producerID == pid && t.epoch == epoch || t.completesInto(pid, epoch))
}

// awaitCompleted returns id's transaction once the producer's (pid,
// epoch) previous transaction is no longer completing, or after wait
// (real time), or when ctx ends, whichever is first; the
// caller then answers as it finds it (CONCURRENT_TRANSACTIONS if it is
// still completing). s.mu is held on entry and on return.
func (c *TxnCoordinator) awaitCompleted(ctx context.Context, s *txnShard, id string, pid int64, epoch int16, wait time.Duration) *txnMeta {
	t := s.txns[id]
	if wait <= 0 || !t.awaited(pid, epoch) {
		return t
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !s.gone && s.txns[id] == t && t.completing() {
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			s.mu.Lock()
			return s.txns[id]
		case <-ctx.Done():
			s.mu.Lock()
			return s.txns[id]
		}
		s.mu.Lock()
	}
	return s.txns[id]
}
