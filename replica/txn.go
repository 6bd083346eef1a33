package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// Transactions, the partition side (KIP-98; Kafka 4.x's
// ProducerStateManager, ProducerAppendInfo and UnifiedLog are the
// specification): transactional batches begin a producer's transaction,
// a marker (a control batch, WriteTxnMarker) ends it, the last stable
// offset is the first offset of the oldest ongoing transaction (else the
// high watermark), and read_committed fetches (FetchCommitted) stop there
// and name the aborted transactions of what they return.
//
// Every replica derives the same state from the batches it writes, in log
// order (noteBatchLocked): on the append path, the raft storage's writes
// (leader and followers alike) and recovery's replay above the newest
// producer snapshot (snapshot.go). An abort marker adds its transaction
// to the transaction index of the segment it was written to
// (segment.Log.AppendAbortedTxn, Kafka's .txnindex), which the log keeps
// with the segment and read_committed fetches read
// (segment.Log.AbortedTxns); recovery drops the entries at or above the
// snapshot's offset and adds them again as it replays
// (Partition.loadProducers). Nothing here holds the aborted list.

// Transaction errors (the server maps them to Kafka's codes).
var (
	// ErrTransactionCoordinatorFenced is TRANSACTION_COORDINATOR_FENCED:
	// a marker whose coordinator epoch is older than the producer's last
	// marker's (ProducerAppendInfo.appendEndTxnMarker).
	ErrTransactionCoordinatorFenced = errors.New("replica: transaction coordinator fenced")
	// ErrInvalidTxnState is INVALID_TXN_STATE: a non-transactional batch
	// from a producer whose transaction is ongoing.
	ErrInvalidTxnState = errors.New("replica: invalid transaction state")
	// errTxnNoProducer: a transactional batch without a producer id
	// (INVALID_RECORD).
	errTxnNoProducer = fmt.Errorf("%w: a transactional batch without a producer id", ErrInvalidRecord)
)

// Control record format constants (Kafka's ControlRecordType and
// EndTransactionMarker; part of the on-disk format): the key is
// version int16 (0) + type int16, an end-transaction marker's value is
// version int16 (0) + coordinatorEpoch int32.
const (
	controlKeyVersion   = 0
	controlTypeAbort    = 0
	controlTypeCommit   = 1
	controlKeySize      = 4
	endTxnMarkerVersion = 0
	endTxnMarkerSize    = 6
)

// TxnMarker is a transaction marker (a control batch) for one producer.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool // false: abort
	CoordinatorEpoch int32
	// TransactionVersion is the transaction's version as the coordinator
	// sends it (WriteTxnMarkers v2, KIP-1228; 0 from older senders): from
	// 2 on, ProducerEpoch is the epoch the coordinator bumped as it ended
	// the transaction, which WriteTxnMarker checks with markerEpochV2's
	// rule. It is not written to the log.
	TransactionVersion int16
}

// AbortedTxn is one aborted transaction overlapping a fetched range
// (Kafka's FetchResponse AbortedTransactions entry).
type AbortedTxn struct{ ProducerID, FirstOffset int64 }

// abortedTxn is one decided transaction: its producer, its first
// record's offset, its marker's offset and, for an abort, the last stable
// offset once the marker was written (a .txnindex entry's fields).
type abortedTxn struct{ pid, first, last, lso int64 }

// entry returns a as a transaction index entry.
func (a abortedTxn) entry() segment.AbortedTxn {
	return segment.AbortedTxn{ProducerID: a.pid, FirstOffset: a.first, LastOffset: a.last, LastStableOffset: a.lso}
}

// txnLog is the partition's transaction view derived from the producer
// state, guarded by Partition.mu: ongoing maps each producer inside a
// transaction to the transaction's first offset; unreplicated lists the
// transactions whose marker is written but may not be committed yet (not
// below the high watermark when written; Kafka's
// ProducerStateManager.unreplicatedTxns), which stay unstable until it
// is. The aborted transactions are in the log's transaction index.
type txnLog struct {
	ongoing      map[int64]int64
	unreplicated []abortedTxn // lso unused
}

// lso returns the last stable offset given the high watermark hw: the
// smallest first offset of a transaction ongoing, or whose marker is not
// below hw, else hw (Kafka's UnifiedLog.lastStableOffset:
// firstUnstableOffset capped by the high watermark).
func (t *txnLog) lso(hw int64) int64 {
	lso := hw
	for _, first := range t.ongoing {
		lso = min(lso, first)
	}
	for _, u := range t.unreplicated {
		if u.last >= hw {
			lso = min(lso, u.first)
		}
	}
	return lso
}

// replicated forgets the unreplicated transactions whose marker is below
// hw, the new high watermark (Kafka's
// ProducerStateManager.onHighWatermarkUpdated).
func (t *txnLog) replicated(hw int64) {
	t.unreplicated = slices.DeleteFunc(t.unreplicated, func(u abortedTxn) bool { return u.last < hw })
}

// buildMarker returns the control batch of m stamped ts (ms): attributes
// control|transactional, producer id and epoch, base sequence -1, one
// record (Kafka's MemoryRecords.withEndTransactionMarker).
func buildMarker(m TxnMarker, ts int64) []byte {
	key := make([]byte, controlKeySize)
	binary.BigEndian.PutUint16(key, controlKeyVersion)
	typ := uint16(controlTypeAbort)
	if m.Commit {
		typ = controlTypeCommit
	}
	binary.BigEndian.PutUint16(key[2:], typ)
	val := make([]byte, endTxnMarkerSize)
	binary.BigEndian.PutUint16(val, endTxnMarkerVersion)
	binary.BigEndian.PutUint32(val[2:], uint32(m.CoordinatorEpoch))
	opts := batch.NewBuildOptions()
	opts.ProducerID, opts.ProducerEpoch = m.ProducerID, m.ProducerEpoch
	opts.Control, opts.Transactional = true, true
	return batch.Build(opts, []batch.Record{{Timestamp: ts, Key: key, Value: val}})
}

// parseMarker reads the end-transaction marker of control batch b: ok is
// false for a control batch that is not one (another control type, or a
// record that does not parse: it then ends no transaction).
func parseMarker(b []byte) (commit bool, coordinatorEpoch int32, ok bool) {
	_, recs, err := batch.Records(b)
	if err != nil || len(recs) == 0 {
		return false, 0, false
	}
	k, v := recs[0].Key, recs[0].Value
	if len(k) < controlKeySize || len(v) < endTxnMarkerSize {
		return false, 0, false
	}
	switch binary.BigEndian.Uint16(k[2:]) {
	case controlTypeAbort:
	case controlTypeCommit:
		commit = true
	default:
		return false, 0, false
	}
	return commit, int32(binary.BigEndian.Uint32(v[2:])), true
}

// applyBatch records the written batch h (its base offset the log's) in
// ps and t, in log order: a data batch as producerState.record, a control
// batch (data its bytes) as a marker ending its producer's transaction.
// An abort that ended a transaction is returned (aborted set), for the
// caller to add to the log's transaction index (applyBatch itself only
// changes ps and t, so replays and tests run it alone). lat is the
// batch's LogAppendTime, -1 for CreateTime.
//
// A marker is checked here again, against the state of the batches
// before it (checkMarker): a marker with an older producer epoch, or a
// coordinator epoch older than the producer's last marker's, changes
// nothing and its error is returned. The leader checks a marker before
// proposing it, but two markers proposed at once both pass that check;
// raft's order decides which one counts, the same on every replica and
// in a replay of the log. The check here is the transaction version 1
// rule (the log does not say a marker's version; Kafka does not check a
// replicated marker's epoch at all): a version 2 marker is checked with
// its own rule as the leader proposes it (checkMarkerBatch,
// admitMarkerLocked), and what passes that passes this.
func applyBatch(ps producerState, t *txnLog, h *batch.Header, data []byte, lat int64) (aborted abortedTxn, ok bool, err error) {
	if !h.Control() {
		if first := ps.record(h, lat); first >= 0 {
			t.ongoing[h.ProducerID] = first
		}
		return aborted, false, nil
	}
	if h.ProducerID < 0 {
		return aborted, false, nil
	}
	commit, coordEpoch, isMarker := parseMarker(data)
	if !isMarker {
		return aborted, false, nil
	}
	if err := ps.checkMarker(h.ProducerID, h.ProducerEpoch, coordEpoch, 0); err != nil {
		return aborted, false, err
	}
	ts := h.MaxTimestamp
	if lat >= 0 {
		ts = lat
	}
	first := ps.recordMarker(h.ProducerID, h.ProducerEpoch, coordEpoch, ts)
	delete(t.ongoing, h.ProducerID)
	if first < 0 {
		return aborted, false, nil
	}
	t.unreplicated = append(t.unreplicated, abortedTxn{pid: h.ProducerID, first: first, last: h.BaseOffset})
	if commit {
		return aborted, false, nil
	}
	// The entry's last stable offset: as if the high watermark were just
	// past the marker (Kafka's CompletedTxn with the first unstable
	// offset after it), which bounds AbortedTxns' walk.
	return abortedTxn{pid: h.ProducerID, first: first, last: h.BaseOffset, lso: t.lso(h.BaseOffset + 1)}, true, nil
}

// noteBatchLocked is applyBatch on the partition's state, an abort then
// added to the log's transaction index (after mu is released: no log lock
// is taken under it); appendMu is held, so entries reach the index in
// log order. The error is a marker's that changed nothing.
func (p *Partition) noteBatchLocked(h *batch.Header, data []byte, lat int64) error {
	p.mu.Lock()
	a, aborted, err := applyBatch(p.producers, &p.txn, h, data, lat)
	p.mu.Unlock()
	if aborted {
		// Only a failed log refuses it (it then refuses everything, and
		// its recovery replays the marker).
		if err := p.log.AppendAbortedTxn(a.entry()); err != nil {
			p.logger.Warn("replica: adding an aborted transaction to the transaction index failed", "dir", p.log.Dir(), "marker", a.last, "err", err)
		}
	}
	return err
}

// newTxnLog derives the ongoing transactions from ps.
func newTxnLog(ps producerState) txnLog {
	t := txnLog{ongoing: map[int64]int64{}}
	for id, e := range ps {
		if e.txnFirst >= 0 {
			t.ongoing[id] = e.txnFirst
		}
	}
	return t
}

// WriteTxnMarker appends m as a control batch (Kafka's: attributes
// control|transactional, one record, key = version 0 + type 0 abort/1
// commit, value = version 0 + coordinator epoch; producer id/epoch in the
// batch header, base sequence -1) and returns its offset once committed
// (acks=all semantics, as Append). Leader only: a follower returns a
// *NotLeaderError. Errors: ErrInvalidProducerEpoch when m.ProducerEpoch is
// below the producer's current epoch (with m.TransactionVersion 2 or more:
// not above it, unless equal with no transaction ongoing, a marker sent
// again; KIP-1228, see markerEpochV2), ErrTransactionCoordinatorFenced when
// m.CoordinatorEpoch is below the coordinator epoch of the producer's
// last marker (both Kafka's ProducerAppendInfo.appendEndTxnMarker). The
// marker takes one offset; every replica that writes it ends the
// producer's transaction, and an abort is listed for read_committed
// fetches.
func (p *Partition) WriteTxnMarker(ctx context.Context, m TxnMarker) (int64, error) {
	if m.ProducerID < 0 {
		return -1, fmt.Errorf("%w: a marker for producer id %d", ErrInvalidRecord, m.ProducerID)
	}
	b := buildMarker(m, p.now().UnixMilli())
	h, err := batch.ParseHeader(b)
	if err != nil {
		return -1, err
	}
	pd, err := p.propose(b, &h, appendReq{acks: AcksAll, txnVersion: m.TransactionVersion})
	if err != nil {
		return -1, err
	}
	res, err := pd.Wait(ctx)
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

// LastStableOffset returns the partition's last stable offset: the first
// offset of its oldest ongoing transaction, capped by the high watermark
// (Kafka's UnifiedLog.lastStableOffset).
func (p *Partition) LastStableOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.txn.lso(p.highWatermark)
}

// FetchCommitted is Fetch for a read_committed consumer: the batches from
// offset up to the last stable offset (not the high watermark), and
// AbortedTransactions, the aborted transactions whose [first record,
// marker] range overlaps [offset, end of the returned batches) (Kafka's
// UnifiedLog.collectAbortedTransactions), oldest marker first. The
// offsets, the aborted list and the records come from one view.
func (p *Partition) FetchCommitted(offset int64, maxBytes int) (FetchResult, error) {
	p.mu.Lock()
	fr := FetchResult{HighWatermark: p.highWatermark, Changed: p.changed}
	fr.LastStableOffset = p.txn.lso(p.highWatermark)
	p.mu.Unlock()
	fr.LogStartOffset = p.log.LogStartOffset()
	if maxBytes <= 0 {
		return fr, nil
	}
	for {
		cleans := p.log.Cleans()
		var err error
		fr.Records, err = p.log.Read(offset, maxBytes, fr.LastStableOffset)
		if err != nil {
			return fr, err
		}
		fr.LogStartOffset = fr.Records.LogStartOffset
		fr.AbortedTransactions = nil
		if fr.Records.Bytes > 0 {
			if fr.AbortedTransactions, err = p.collectLiveAborted(offset, fr.Records.NextOffset); err != nil {
				fr.Records.Release()
				return fr, err
			}
		}
		// A transaction whose marker is gone now had no data left when
		// this Read began unless three cleans (its data's, its marker's
		// horizon, the marker's removal) ran in between: then read again.
		if p.log.Cleans()-cleans < 3 {
			return fr, nil
		}
		fr.Records.Release()
	}
}

// collectLiveAborted returns the aborted transactions of the log's
// transaction index whose range overlaps [from, to) (segment.Log.
// AbortedTxns), less those whose marker the log no longer has whole
// (segment.Log.TxnMarkerGone): the cleaner removes a marker once its
// transaction has no data left and delete.retention.ms has passed, or
// empties it, and a read_committed consumer handed that transaction
// would skip its producer's later transactional batches, waiting for the
// abort marker. Kafka's cleaner drops the entry from the cleaned
// .txnindex (CleanedTransactionMetadata); Sluice's carries the entries
// of the control batches it keeps, and this check covers an emptied one.
func (p *Partition) collectLiveAborted(from, to int64) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for _, a := range p.log.AbortedTxns(from, to) {
		gone, err := p.log.TxnMarkerGone(a.LastOffset)
		if err != nil {
			return nil, err
		}
		if !gone {
			out = append(out, AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return out, nil
}

// ProducerInfo is one producer's state in the partition (DescribeProducers,
// KIP-664).
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32 // -1 when no batch is known
	LastTimestamp         int64 // ms
	CoordinatorEpoch      int32 // -1 when no marker was written
	CurrentTxnStartOffset int64 // -1 none
}

// Producers returns the state of every producer the partition knows, by
// producer id.
func (p *Partition) Producers() []ProducerInfo {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers))
	for id, e := range p.producers {
		last := int32(-1)
		if len(e.batches) > 0 {
			last = e.last().lastSeq
		}
		out = append(out, ProducerInfo{
			ProducerID: id, ProducerEpoch: e.epoch, LastSequence: last, LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnFirst,
		})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return int(min(max(a.ProducerID-b.ProducerID, -1), 1)) })
	return out
}

// checkMarkerBatch checks marker batch b (header h) of transaction version
// tv with checkMarker.
func checkMarkerBatch(ps producerState, h *batch.Header, b []byte, tv int16) error {
	_, coordEpoch, ok := parseMarker(b)
	if !ok {
		return fmt.Errorf("%w: a control batch that is no transaction marker", ErrInvalidRecord)
	}
	return ps.checkMarker(h.ProducerID, h.ProducerEpoch, coordEpoch, tv)
}

// rebuildTxnIndex brings the log's transaction index in line with a
// replay from the producer snapshot at from: the entries at or above
// from go, then listed (a version 2 snapshot's aborted transactions,
// below from; those the files already hold are skipped) and aborts (the
// replay's, in log order) are added, and all of it synced before a later
// snapshot can rely on it.
func (p *Partition) rebuildTxnIndex(from int64, listed, aborts []abortedTxn) error {
	if err := p.log.TruncateAbortedTxns(from); err != nil {
		return fmt.Errorf("replica: truncating the transaction index to %d: %w", from, err)
	}
	for _, a := range listed {
		// Files written since hold them already; an entry out of
		// order there is one they hold otherwise (skipped).
		if err := p.log.AppendAbortedTxn(a.entry()); err != nil && !errors.Is(err, segment.ErrTxnNotMonotonic) {
			return fmt.Errorf("replica: adding a snapshot's aborted transactions to the transaction index: %w", err)
		}
	}
	for _, a := range aborts {
		if err := p.log.AppendAbortedTxn(a.entry()); err != nil {
			return fmt.Errorf("replica: rebuilding the transaction index: %w", err)
		}
	}
	return p.log.SyncAbortedTxns()
}
