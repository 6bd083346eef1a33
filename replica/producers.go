package replica

import (
	"errors"
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

// producerState tracks idempotent producers of one partition (Kafka's
// ProducerStateManager, without transactions). It is guarded by the
// Partition's append mutex.
type producerState map[int64]*producerEntry

// check decides what to do with an incoming batch h: a retry of one of
// the latest batches returns that batch (dup), an acceptable batch returns
// nil, anything else an error.
func (ps producerState) check(h *batch.Header) (dup *producerBatch, err error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	e := ps[h.ProducerID]
	switch {
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

// record notes an appended batch (also used to rebuild from the log).
func (ps producerState) record(h *batch.Header, logAppendTime int64) {
	if h.ProducerID < 0 {
		return
	}
	e := ps[h.ProducerID]
	if e == nil || h.ProducerEpoch > e.epoch {
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps[h.ProducerID] = e
	}
	if len(e.batches) == cachedBatches {
		e.batches = append(e.batches[:0], e.batches[1:]...)
	}
	e.batches = append(e.batches, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: lastSeqOf(h),
		baseOffset: h.BaseOffset, lastOffset: h.LastOffset(), logAppendTime: logAppendTime,
	})
	e.lastTimestamp = h.MaxTimestamp
	if logAppendTime >= 0 {
		e.lastTimestamp = logAppendTime
	}
}

// expire removes the producers whose newest batch's timestamp is
// expirationMs or more before nowMs (Kafka's
// ProducerStateManager.removeExpiredProducers, producer.id.expiration.ms)
// and returns how many it removed. A removed producer is unknown again: its
// next batch may start at any sequence (KIP-360).
func (ps producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range ps {
		if nowMs-e.lastTimestamp >= expirationMs {
			delete(ps, id)
			n++
		}
	}
	return n
}
