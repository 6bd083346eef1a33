package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// txnRetryBackoff is how long the coordinator waits before it sends markers
// to partitions that failed with a retriable error again, and before it
// retries writing a completion that failed: Kafka's retry.backoff.ms
// default, 100 ms.
const txnRetryBackoff = 100 * time.Millisecond

// startMarkers completes t, which is in PrepareCommit or PrepareAbort, in
// its own goroutine: it writes the markers to every partition of the
// transaction, then CompleteCommit or CompleteAbort (Kafka's
// TransactionMarkerChannelManager.addTxnMarkersToSend and
// tryAppendToLog). Nothing happens once the coordinator is closed.
func (c *TxnCoordinator) startMarkers(s *txnShard, t *txnMeta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.complete(s, t)
	}()
}

// complete is startMarkers' goroutine. It stops, leaving the transaction
// prepared, when the shard is unloaded (the next leader completes it after
// its Load) or a partition answers that this coordinator or the
// transaction's epoch is fenced.
func (c *TxnCoordinator) complete(s *txnShard, t *txnMeta) {
	s.mu.Lock()
	if s.gone || s.txns[t.id] != t || (t.state != txnPrepareCommit && t.state != txnPrepareAbort) {
		s.mu.Unlock()
		return
	}
	m := Marker{
		ProducerID:         t.producerID,
		ProducerEpoch:      t.epoch,
		Commit:             t.state == txnPrepareCommit,
		CoordinatorEpoch:   s.epoch,
		TransactionVersion: t.tv,
	}
	parts := t.sortedParts()
	s.mu.Unlock()

	if !c.sendMarkers(s, t.id, m, parts) {
		return
	}
	for {
		s.mu.Lock()
		if s.gone || s.txns[t.id] != t || (t.state != txnPrepareCommit && t.state != txnPrepareAbort) {
			s.mu.Unlock()
			return
		}
		if t.pending {
			s.mu.Unlock()
			if !c.sleep(s.ctx, txnRetryBackoff) {
				return
			}
			continue
		}
		next := foldQueuedAdds(t, prepareComplete(t, c.now()))
		t.pending = true
		s.mu.Unlock()
		code := c.write(s.ctx, s, t, next, false)
		if code == 0 {
			c.cfg.Logger.Debug("coordinator: transaction completed", "transactional_id", t.id, "state", next.state.String(), "next_transaction_started", next.state == txnOngoing)
			return
		}
		if !c.sleep(s.ctx, txnRetryBackoff) {
			return
		}
	}
}

// prepareComplete is Kafka's TransactionMetadata.prepareComplete: the
// prepared transaction t becomes CompleteCommit or CompleteAbort with no
// partitions; with transaction version 2, a producer id chosen when the
// epoch overflowed (nextProducerID) takes over at epoch 0.
func prepareComplete(t *txnMeta, nowMs int64) *txnMeta {
	n := t.transit(nowMs)
	n.state = txnCompleteCommit
	if t.state == txnPrepareAbort {
		n.state = txnCompleteAbort
	}
	n.parts = map[TxnPartition]struct{}{}
	if t.tv >= 2 && t.nextProducerID >= 0 {
		n.producerID, n.epoch = t.nextProducerID, 0
	}
	n.nextProducerID = -1
	return n
}

// foldQueuedAdds takes the adds queued on t (s.mu held) that the
// completed state next admits (Kafka's handleAddPartitionsToTransaction on
// a completed transaction: the same producer id and epoch) and returns
// next with them applied: the next transaction, Ongoing, started now with
// their partitions. With none, next is returned as it is. The adds of
// another producer id or epoch are left to find the transaction as it
// then is.
func foldQueuedAdds(t *txnMeta, next *txnMeta) *txnMeta {
	var take []*queuedAdd
	rest := t.queued[:0]
	for _, q := range t.queued {
		if q.pid == next.producerID && q.epoch == next.epoch {
			take = append(take, q)
		} else {
			rest = append(rest, q)
		}
	}
	clear(t.queued[len(rest):])
	t.queued = rest
	if len(take) == 0 {
		return next
	}
	// As the add's own transition from the completed state would: the
	// previous producer id is the current one (after an epoch overflow,
	// the one the completion moved to), and the transaction version the
	// highest the adds carry (AddOffsetsToTxn carries none).
	next.state, next.startMs, next.prevProducerID = txnOngoing, next.updateMs, next.producerID
	next.tv = 0
	for _, q := range take {
		next.tv = max(next.tv, q.tv)
		for _, p := range q.parts {
			next.parts[p] = struct{}{}
		}
	}
	return next
}

// sendMarkers writes m to parts until each is written or dropped. It
// reports false when it gave up: the shard was unloaded, or a partition
// answered INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED (a
// newer coordinator or epoch owns the transaction: Kafka's
// TransactionMarkerRequestCompletionHandler stops sending then).
// UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_FOR_MESSAGE_FORMAT and
// UNSUPPORTED_VERSION drop the partition (its topic is gone, or it cannot
// hold the transaction's batches); every other error is retried after
// txnRetryBackoff, the ones Kafka treats as fatal included (logged as
// errors: the transaction stays prepared until they stop).
func (c *TxnCoordinator) sendMarkers(s *txnShard, id string, m Marker, parts []TxnPartition) bool {
	for len(parts) > 0 {
		if s.ctx.Err() != nil {
			return false
		}
		errs := c.cfg.Markers.WriteMarkers(s.ctx, m, parts)
		var retry []TxnPartition
		for _, p := range parts {
			err := errs[p]
			if err == nil {
				continue
			}
			var ke *kerr.Error
			errors.As(err, &ke)
			switch ke {
			case kerr.UnknownTopicOrPartition, kerr.UnsupportedForMessageFormat, kerr.UnsupportedVersion:
				c.cfg.Logger.Info("coordinator: dropping a transaction marker", "transactional_id", id, "topic", p.Topic, "partition", p.Partition, "err", err)
			case kerr.InvalidProducerEpoch, kerr.TransactionCoordinatorFenced:
				c.cfg.Logger.Info("coordinator: stopped sending transaction markers: fenced", "transactional_id", id, "topic", p.Topic, "partition", p.Partition, "err", err)
				return false
			case kerr.CorruptMessage, kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRequiredAcks:
				c.cfg.Logger.Error("coordinator: writing a transaction marker failed; retrying", "transactional_id", id, "topic", p.Topic, "partition", p.Partition, "err", err)
				retry = append(retry, p)
			default:
				retry = append(retry, p)
			}
		}
		if len(retry) == 0 {
			return true
		}
		parts = retry
		if !c.sleep(s.ctx, txnRetryBackoff) {
			return false
		}
	}
	return true
}

// sleep waits d on the coordinator's clock; false if ctx ended first.
func (c *TxnCoordinator) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	stop := c.cfg.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		stop()
		return false
	}
}
