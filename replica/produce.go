package replica

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// Produce applies Kafka's LogValidator rules to a client's records for one
// partition, from the topic configuration in force, then appends them (see
// append) and returns the Pending commit. records must be exactly one
// magic-2 record batch; it may be replaced by a recompressed copy and is
// modified in place otherwise. Errors, in the order checked:
//   - ErrInternalTopic: the partition belongs to an internal topic;
//   - segment.ErrCorrupt: fewer bytes than a batch header;
//   - ErrInvalidRecord: empty records, a magic-0/1 message set, a base
//     offset other than 0, no records or a lastOffsetDelta that does not
//     fit the record count, more than one batch, a control batch or the
//     delete-horizon bit (both are the broker's own), a record without a
//     key on a compacted topic;
//   - ErrRecordTooLarge: the batch exceeds max.message.bytes, as sent
//     or once recompressed to compression.type;
//   - segment.ErrCorrupt: a bad CRC, record count or record encoding;
//   - the producer-state and log errors of append.
func (p *Partition) Produce(records []byte) (*Pending, error) {
	return p.ProduceWith(records, ProduceOptions{Acks: AcksAll})
}

// ProduceOptions are a produce request's choices.
type ProduceOptions struct {
	// Acks is the request's acks (AcksAll, AcksLeader, AcksNone): what
	// the Pending waits for (commit, or the leader's durable append) and
	// whether min.insync.replicas applies (AcksAll only). A one-voter
	// group's leader commits what it made durable at once, so both wait
	// for the same there.
	Acks int16
	// VerifyTxn applies KIP-890's verification rule (Kafka's
	// transaction.partition.verification.enable): a transactional batch
	// that does not continue its producer's ongoing transaction in the
	// partition is refused with ErrInvalidTxnState unless Guard is the
	// producer's current guard (StartTxnVerification, txn_guard.go).
	VerifyTxn bool
	// Guard is the guard StartTxnVerification returned before the batch
	// was verified with the transaction coordinator (NoTxnGuard: none).
	Guard TxnGuard
}

// ProduceWith is Produce with options. A replicated partition's follower
// returns a *NotLeaderError (ErrNotLeader, or ErrLeaderNotAvailable during
// an election); acks=all with fewer in-sync replicas than
// min.insync.replicas returns ErrNotEnoughReplicas. Both append nothing.
func (p *Partition) ProduceWith(records []byte, opts ProduceOptions) (*Pending, error) {
	if p.internal {
		return &Pending{res: noResult}, fmt.Errorf("%w: clients cannot append to it", ErrInternalTopic)
	}
	cfg := p.Config()
	records, h, err := validate(records, &cfg)
	if err != nil {
		return &Pending{res: noResult}, err
	}
	return p.propose(records, &h, appendReq{logAppendTime: cfg.LogAppendTime, acks: opts.Acks, verifyTxn: opts.VerifyTxn, guard: opts.Guard})
}

// validate checks records against cfg and returns what is to be stored,
// records itself or a copy recompressed with the topic's codec, with its
// header. It is the only check of the batch: CRC, records walked
// (segment.ValidateAppend, which corrects maxTimestamp in place), keys
// on a compacted topic, run in the producer's goroutine; the log, and
// every replica of a raft partition, trust the header it returns
// (segment.AppendOptions.Checked).
func validate(records []byte, cfg *TopicConfig) ([]byte, batch.Header, error) {
	out, err := validateClient(records, cfg)
	if err != nil {
		return nil, batch.Header{}, err
	}
	h, err := segment.ValidateAppend(out) // what is stored: recompressed, its records too
	return out, h, err
}

// validateClient applies the client rules to records and returns what is
// to be stored: records itself, or a copy recompressed with the topic's
// codec.
func validateClient(records []byte, cfg *TopicConfig) ([]byte, error) {
	switch {
	case len(records) == 0:
		return nil, fmt.Errorf("%w: the records are empty", ErrInvalidRecord)
	case len(records) > batch.OffMagic && records[batch.OffMagic] < batch.Magic:
		// A message set of magic 0 or 1 (LogValidator refuses them from
		// clients of Produce v3+, which Sluice serves).
		return nil, fmt.Errorf("%w: a message set of magic %d; Produce v3 and later carry record batches (magic 2)", ErrInvalidRecord, records[batch.OffMagic])
	case len(records) < batch.HeaderSize:
		return nil, fmt.Errorf("%w: records of %d bytes hold no record batch", segment.ErrCorrupt, len(records))
	}
	h, err := batch.ParseHeader(records)
	if err != nil {
		return nil, err // an unknown magic: segment.ErrCorrupt
	}
	switch {
	case h.BaseOffset != 0:
		// UnifiedLog.analyzeAndValidateRecords: the broker assigns
		// offsets, a client's batch starts at 0.
		return nil, fmt.Errorf("%w: the batch's base offset is %d, not 0", ErrInvalidRecord, h.BaseOffset)
	case h.NumRecords <= 0:
		return nil, fmt.Errorf("%w: the batch holds %d records", ErrInvalidRecord, h.NumRecords)
	case int64(h.LastOffsetDelta)+1 != int64(h.NumRecords):
		// LogValidator.validateBatch: the offsets must span the count.
		return nil, fmt.Errorf("%w: lastOffsetDelta %d does not fit the record count %d", ErrInvalidRecord, h.LastOffsetDelta, h.NumRecords)
	case h.Size() != len(records):
		return nil, fmt.Errorf("%w: records hold %d bytes, the first batch %d: one batch per partition", ErrInvalidRecord, len(records), h.Size())
	case h.Control():
		// Control records (transaction markers, raft's own entries) come
		// from the broker, never from clients (Kafka's rule).
		return nil, fmt.Errorf("%w: Clients are not allowed to write control records", ErrInvalidRecord)
	case h.Transactional() && h.ProducerID < 0:
		// A transaction belongs to a producer id (KIP-98).
		return nil, fmt.Errorf("%w: a transactional batch without a producer id", ErrInvalidRecord)
	case h.HasDeleteHorizon():
		// The delete horizon (KIP-534) is the log cleaner's mark: from a
		// client it could make a tombstone expire at once.
		return nil, fmt.Errorf("%w: the delete horizon attribute is set by the log cleaner, not by clients", ErrInvalidRecord)
	case len(records) > cfg.MaxMessageBytes:
		return nil, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes=%d", ErrRecordTooLarge, len(records), cfg.MaxMessageBytes)
	}
	if cfg.Log.Compacts() {
		if err := checkKeys(records); err != nil {
			return nil, err
		}
	}
	if !cfg.KeepProducerCodec && h.Codec() != cfg.Compression {
		// A topic whose compression.type names a codec stores batches
		// with it; "producer" keeps what the producer sent. The log
		// validates the recompressed batch (records included) on append.
		// max.message.bytes holds for the batch as stored, so it is
		// checked again (Kafka does, after any recompression).
		out, err := batch.Recompress(records, cfg.Compression)
		if err != nil {
			return nil, err
		}
		if len(out) > cfg.MaxMessageBytes {
			return nil, fmt.Errorf("%w: batch of %d bytes as stored (%s) exceeds max.message.bytes=%d", ErrRecordTooLarge, len(out), cfg.Compression, cfg.MaxMessageBytes)
		}
		return out, nil
	}
	return records, nil
}

// errNoKey stops checkKeys at the first record without a key.
var errNoKey = errors.New("record without a key")

// checkKeys refuses a batch for a compacted topic that holds a record
// without a key, as Kafka's LogValidator does (INVALID_RECORD): compaction
// keeps the last record per key, so a keyless one has no meaning there.
func checkKeys(records []byte) error {
	_, err := batch.Iterate(records, func(r *batch.Record) error {
		if r.Key == nil {
			return errNoKey
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoKey):
		return fmt.Errorf("%w: Compacted topic cannot accept message without key.", ErrInvalidRecord)
	case err != nil:
		return fmt.Errorf("%w: %v", segment.ErrCorrupt, err)
	}
	return nil
}
