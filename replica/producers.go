package replica

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicemq/sluice/segment/batch"
)

// Idempotent producer errors (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER and
// INVALID_PRODUCER_EPOCH; the server maps them to those codes).
var (
	ErrOutOfOrderSequence   = errors.New("replica: out of order sequence number")
	ErrInvalidProducerEpoch = errors.New("replica: producer epoch is older than the current one")
)

// cachedBatches is how many of a producer's latest batches are kept to
// recognise a retry (Kafka keeps 5, the most in-flight requests an
// idempotent producer may have).
const cachedBatches = 5

// producerBatch is one appended batch of an idempotent producer.
type producerBatch struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
	logAppendTime          int64
}

// producerEntry is one producer id's state in one partition.
type producerEntry struct {
	epoch int16
	// txnFirst is the offset of the first record of the producer's
	// ongoing transaction, -1 when none (Kafka's
	// ProducerStateEntry.currentTxnFirstOffset).
	txnFirst int64
	// coordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker, -1 when none (Kafka's
	// ProducerStateEntry.coordinatorEpoch).
	coordinatorEpoch int32
	// lastTimestamp is the max timestamp (ms) of the producer's newest
	// batch, what producer.id.expiration.ms counts from (Kafka's
	// ProducerStateEntry.lastTimestamp).
	lastTimestamp int64
	batches       []producerBatch // oldest first, at most cachedBatches
}

func (e *producerEntry) last() *producerBatch { return &e.batches[len(e.batches)-1] }

// lastSeqOf is a batch's last sequence number; sequences wrap at
// math.MaxInt32 back to 0, as Kafka's do.
func lastSeqOf(h *batch.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

func nextSeq(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// producerState tracks idempotent and transactional producers of one
// partition (Kafka's ProducerStateManager). It is guarded by the
// Partition's append mutex.
type producerState map[int64]*producerEntry

// check decides what to do with an incoming batch h: a retry of one of
// the latest batches returns that batch (dup), an acceptable batch returns
// nil, anything else an error.
func (ps producerState) check(h *batch.Header) (dup *producerBatch, err error) {
	if h.ProducerID < 0 {
		if h.Transactional() {
			return nil, errTxnNoProducer
		}
		return nil, nil
	}
	e := ps[h.ProducerID]
	if e != nil && h.ProducerEpoch == e.epoch && !h.Transactional() && e.txnFirst >= 0 {
		// ProducerAppendInfo.appendDataBatch: a producer inside a
		// transaction writes transactional batches only.
		return nil, fmt.Errorf("%w: a non-transactional batch from producer %d, whose transaction from offset %d is ongoing", ErrInvalidTxnState, h.ProducerID, e.txnFirst)
	}
	switch {
	case e != nil && h.ProducerEpoch < e.epoch:
		return nil, ErrInvalidProducerEpoch
	case h.BaseSequence < 0:
		// No sequence: the broker's own transactional writes (the group
		// coordinator's TxnOffsetCommit records; Kafka checks no
		// sequence for AppendOrigin.COORDINATOR).
	case e == nil:
		// A producer the partition has no state for (new, or its batches
		// were removed by retention or DeleteRecords before a restart)
		// may start at any sequence (KIP-360; ProducerAppendInfo's
		// checkSequence with NO_PRODUCER_EPOCH).
	case h.ProducerEpoch < e.epoch:
		return nil, ErrInvalidProducerEpoch
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, ErrOutOfOrderSequence
		}
	case len(e.batches) == 0:
		// Known at this epoch only from a marker (a transaction
		// version 2 marker bumped the epoch, or the producer's
		// batches were never seen): its sequences start at 0 (Kafka's
		// ProducerAppendInfo.checkSequence: an entry with an epoch and
		// no batch has no last sequence, and only 0 follows none).
		// Snapshots keep a producer's batches, so retention and
		// DeleteRecords do not lead here; an unknown producer is e ==
		// nil above.
		if h.BaseSequence != 0 {
			return nil, ErrOutOfOrderSequence
		}
	default:
		last := lastSeqOf(h)
		for i := range e.batches {
			if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
				return b, nil
			}
		}
		if h.BaseSequence != nextSeq(e.last().lastSeq) {
			return nil, ErrOutOfOrderSequence
		}
	}
	return nil, nil
}

// entry returns pid's entry at epoch, created or moved to a newer epoch
// (the sequences start again; an ongoing transaction and the coordinator
// epoch stay: Kafka's ProducerStateEntry.maybeUpdateProducerEpoch).
func (ps producerState) entry(pid int64, epoch int16) *producerEntry {
	e := ps[pid]
	switch {
	case e == nil:
		e = &producerEntry{epoch: epoch, txnFirst: -1, coordinatorEpoch: -1}
		ps[pid] = e
	case epoch > e.epoch:
		e.epoch = epoch
		e.batches = nil
	}
	return e
}

// record notes an appended data batch (also used to rebuild from the
// log) and returns the first offset of the transaction it began, -1 when
// it began none (a transactional batch outside a transaction begins one:
// Kafka's ProducerAppendInfo.appendDataBatch).
func (ps producerState) record(h *batch.Header, logAppendTime int64) (began int64) {
	if h.ProducerID < 0 {
		return -1
	}
	e := ps.entry(h.ProducerID, h.ProducerEpoch)
	began = -1
	if h.Transactional() && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
		began = h.BaseOffset
	}
	if h.BaseSequence >= 0 && len(e.batches) == cachedBatches {
		e.batches = append(e.batches[:0], e.batches[1:]...)
	}
	if h.BaseSequence >= 0 {
		e.batches = append(e.batches, producerBatch{
			firstSeq: h.BaseSequence, lastSeq: lastSeqOf(h),
			baseOffset: h.BaseOffset, lastOffset: h.LastOffset(), logAppendTime: logAppendTime,
		})
	}
	e.lastTimestamp = h.MaxTimestamp
	if logAppendTime >= 0 {
		e.lastTimestamp = logAppendTime
	}
	return began
}

// checkMarker checks a transaction marker for producer pid against its
// state (Kafka's ProducerAppendInfo.appendEndTxnMarker): an epoch older
// than the producer's is ErrInvalidProducerEpoch, a coordinator epoch
// older than its last marker's ErrTransactionCoordinatorFenced. tv is the
// marker's transaction version (WriteTxnMarkers v2, KIP-1228; 0 when not
// known, as for a marker read from the log): from 2 on, the epoch rule is
// markerEpochV2's.
func (ps producerState) checkMarker(pid int64, epoch int16, coordinatorEpoch int32, tv int16) error {
	e := ps[pid]
	switch {
	case e == nil:
		return nil
	case tv >= 2 && !markerEpochV2(epoch, e.epoch, e.txnFirst >= 0):
		return fmt.Errorf("%w: transaction version %d marker of producer %d at epoch %d, the producer's is %d (transaction ongoing: %t)", ErrInvalidProducerEpoch, tv, pid, epoch, e.epoch, e.txnFirst >= 0)
	case epoch < e.epoch:
		return fmt.Errorf("%w: marker of producer %d at epoch %d, the producer's is %d", ErrInvalidProducerEpoch, pid, epoch, e.epoch)
	case coordinatorEpoch < e.coordinatorEpoch:
		return fmt.Errorf("%w: marker of producer %d with coordinator epoch %d, its last marker's was %d", ErrTransactionCoordinatorFenced, pid, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// markerEpochV2 is the producer epoch rule for a marker of transaction
// version 2 (KIP-1228, Kafka 4.2's ProducerAppendInfo.checkProducerEpoch
// with the marker's transactionVersion): such a marker carries the epoch
// the coordinator bumped as it ended the transaction (KIP-890), so it must
// be above the producer's epoch, current, at which the transaction's own
// batches were written. An equal epoch is the marker of a transaction the
// producer already ended at that epoch: while the producer has a
// transaction ongoing (ongoing: its next one, at that epoch) it is a late
// marker that must not end it, and is refused; with none ongoing it is the
// coordinator sending the written marker again (a lost answer, or a new
// coordinator completing the prepared transaction), accepted as Kafka
// accepts it since KAFKA-19999. A marker of a lower transaction version
// only has to be at or above current.
func markerEpochV2(epoch, current int16, ongoing bool) bool {
	return epoch > current || epoch == current && !ongoing
}

// recordMarker notes a written transaction marker at offset (also used to
// rebuild from the log): the producer's ongoing transaction ends, and the
// offset of its first record is returned (-1 when none was ongoing, as
// after a retried marker). ts is the marker batch's timestamp (ms).
func (ps producerState) recordMarker(pid int64, epoch int16, coordinatorEpoch int32, ts int64) (first int64) {
	e := ps.entry(pid, epoch)
	first = e.txnFirst
	e.txnFirst = -1
	e.coordinatorEpoch = coordinatorEpoch
	e.lastTimestamp = ts
	return first
}

// expire removes the producers whose newest batch's timestamp is
// expirationMs or more before nowMs (Kafka's
// ProducerStateManager.removeExpiredProducers, producer.id.expiration.ms)
// and returns how many it removed. A removed producer is unknown again: its
// next batch may start at any sequence (KIP-360).
func (ps producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range ps {
		// A producer inside a transaction is kept until its marker
		// (Kafka's isProducerExpired).
		if e.txnFirst < 0 && nowMs-e.lastTimestamp >= expirationMs {
			delete(ps, id)
			n++
		}
	}
	return n
}
