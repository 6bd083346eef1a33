package replica

import (
	"bytes"
	"context"
	"fmt"

	"github.com/sluicemq/sluice/segment/batch"
)

// The record log: a partition as the broker's own record stores use it.
// __consumer_offsets (the group coordinator's records) and
// __cluster_metadata (the metadata log) are partitions like any other,
// written and read through the same Partition as data partitions; these
// helpers are the record-level view both use: appending the broker's
// records as one batch, and scanning committed records batch by batch.

// Record is one record the broker writes or reads back: its key and
// value (nil for null).
type Record struct {
	Key, Value []byte
}

// AppendRecords writes recs as one uncompressed batch, every record
// stamped ts (ms since the Unix epoch), and returns the first record's
// offset once the batch is committed (Append: acks=all; a follower
// returns a *NotLeaderError). The batch is one atomic unit: a reader of
// ScanRecords gets its records together.
func (p *Partition) AppendRecords(ctx context.Context, ts int64, opts AppendOptions, recs []Record) (int64, error) {
	res, err := p.Append(ctx, buildRecords(ts, recs), opts)
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

// AppendRecordsAsync is AppendRecords without the wait: the Pending's
// Wait returns once the batch is committed. Batches appended one after
// another commit in that order (AppendAsync).
func (p *Partition) AppendRecordsAsync(ts int64, opts AppendOptions, recs []Record) (*Pending, error) {
	return p.AppendAsync(buildRecords(ts, recs), opts)
}

func buildRecords(ts int64, recs []Record) []byte {
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{Timestamp: ts, Key: r.Key, Value: r.Value}
	}
	return batch.Build(batch.NewBuildOptions(), rs)
}

// ProducerTag is the producer a batch is stamped with: its id and epoch
// (-1: none) and whether the batch is transactional.
type ProducerTag struct {
	ID            int64
	Epoch         int16
	Transactional bool
}

// AppendRecordsAs is AppendRecords with the batch stamped with a producer:
// id, epoch, transactional bit (base sequence -1: no idempotence check,
// Kafka writes TxnOffsetCommit records so). The producer's epoch is still
// checked (ErrInvalidProducerEpoch), and a transactional batch begins the
// producer's transaction in the partition, which its marker
// (WriteTxnMarker) ends. opts.VerifyTxn and opts.Guard apply the
// verification guard (txn_guard.go) as to a produce.
func (p *Partition) AppendRecordsAs(ctx context.Context, ts int64, prod ProducerTag, opts AppendOptions, recs []Record) (int64, error) {
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{Timestamp: ts, Key: r.Key, Value: r.Value}
	}
	bo := batch.NewBuildOptions()
	bo.ProducerID, bo.ProducerEpoch, bo.Transactional = prod.ID, prod.Epoch, prod.Transactional
	res, err := p.Append(ctx, batch.Build(bo, rs), opts)
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

// ScannedBatch is one batch ScanBatches hands: its records in the scanned
// range, or, for a control batch, its marker.
type ScannedBatch struct {
	First    int64 // offset of the first record handed (control: the marker's offset)
	Producer ProducerTag
	Control  bool
	Commit   bool // a control batch's marker type (true: commit)
	Records  []Record
}

// ScanRecords reads the committed records of [from, to) (to is capped at
// the high watermark) and hands fn those of each data batch, in offset
// order: first is the offset of the first record handed, recs alias buf
// (or copies) and are valid only during the call. Control batches and records
// outside the range (before a log start offset inside a batch, or a
// batch partly applied) are skipped. It returns buf for reuse and the
// offset to scan from next (to, or where fn's error stopped it: the
// batch fn refused is scanned again).
func (p *Partition) ScanRecords(buf []byte, from, to int64, fn func(first int64, recs []Record) error) ([]byte, int64, error) {
	return p.ScanBatches(buf, from, to, func(b *ScannedBatch) error {
		if b.Control {
			return nil
		}
		return fn(b.First, b.Records)
	})
}

// ScanBatches is ScanRecords with each batch's producer and control
// information: control batches (transaction markers) are handed too, with
// Records empty and Commit set from the marker; a control batch that is no
// transaction marker is skipped. b and its records are valid only during
// the call.
func (p *Partition) ScanBatches(buf []byte, from, to int64, fn func(b *ScannedBatch) error) ([]byte, int64, error) {
	to = min(to, p.HighWatermark())
	var sb ScannedBatch
	for from < to {
		b, res, err := p.ReadBytes(buf[:0], from, 1<<20)
		buf = b
		if err != nil {
			return buf, from, err
		}
		if res.NextOffset <= from {
			return buf, from, fmt.Errorf("replica: scan stuck at offset %d", from)
		}
		for rest := buf; len(rest) > 0; {
			h, err := batch.ParseHeader(rest)
			if err != nil {
				return buf, from, err
			}
			bb := rest[:h.Size()]
			rest = rest[h.Size():]
			if h.LastOffset() < from {
				continue
			}
			if h.BaseOffset >= to {
				return buf, to, nil
			}
			sb = ScannedBatch{
				First:    -1,
				Producer: ProducerTag{ID: h.ProducerID, Epoch: h.ProducerEpoch, Transactional: h.Transactional()},
				Control:  h.Control(),
				Records:  sb.Records[:0],
			}
			if h.Control() {
				commit, _, ok := parseMarker(bb)
				if ok && h.BaseOffset >= from {
					sb.First, sb.Commit = h.BaseOffset, commit
					if err := fn(&sb); err != nil {
						return buf, h.BaseOffset, err
					}
				}
				from = min(h.LastOffset()+1, to)
				continue
			}
			// A compressed batch's records alias Iterate's own buffer,
			// which it reuses once it returns: they are copied.
			copied := h.Codec() != batch.CodecNone
			if _, err := batch.Iterate(bb, func(r *batch.Record) error {
				if r.Offset < from || r.Offset >= to {
					return nil
				}
				if sb.First < 0 {
					sb.First = r.Offset
				}
				rec := Record{Key: r.Key, Value: r.Value}
				if copied {
					rec.Key, rec.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				}
				sb.Records = append(sb.Records, rec)
				return nil
			}); err != nil {
				return buf, from, err
			}
			if len(sb.Records) > 0 {
				if err := fn(&sb); err != nil {
					return buf, sb.First, err
				}
			}
			from = min(h.LastOffset()+1, to)
		}
		from = max(from, min(res.NextOffset, to))
	}
	return buf, to, nil
}
