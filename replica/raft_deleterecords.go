package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// DeleteRecords on raft: the leader checks Kafka's rules against its high
// watermark and proposes the absolute offset as a raft entry; every
// replica moves its log start offset when it applies the entry, in log
// order with the records around it, so the replicas agree on the log
// start offset at every index. The leader's call returns once the entry
// committed and it applied it itself, with its new log start offset.
//
// The entry is an internal batch (segment.EntryDeleteRecords, attribute
// bit 7 with the control bit: it takes no offset and is never served).
// As a raft entry it is raftpb.EntryNormal whose Data is that internal
// batch, built with base offset 0 and term 0 (batch.BuildInternal), so
// the leader's proposal and the entry read back from any replica's log
// are the same bytes; a data entry's batch never has bit 7 (produce
// refuses it), so the two cannot be confused. In the log the internal
// batch holds the entry's own term, as every internal batch does.
//
// Format of the internal batch's data (the payload), part of the on-disk
// format, integers big-endian:
//
//	version  uint8  1
//	offset   int64  the new log start offset asked for (>= 0; the
//	                leader resolved -1 to its high watermark)
//
// Applying it is idempotent (an offset at or below the log start offset
// changes nothing), so the entries raft delivers again after a restart
// change nothing either. A follower that catches up by snapshot gets the
// leader's log start offset from the entries above the snapshot: an
// entry that moved it into a segment the leader still holds is above the
// snapshot's index (it was proposed after the offsets it deletes), and
// one below the snapshot's index moved it at most to the snapshot's next
// offset, where the follower's log starts. A compacted topic's snapshot
// carries the log start offset itself (raft_snapshot.go).
const (
	deleteRecordsVersion = 1
	deleteRecordsSize    = 1 + 8
)

// DefaultDeleteRecordsTimeout bounds DeleteRecords' wait for its raft
// entry to commit and apply (DeleteRecordsContext takes a deadline of the
// caller's instead).
const DefaultDeleteRecordsTimeout = 30 * time.Second

var errBadDeleteRecords = errors.New("replica: bad delete-records entry")

// deleteRecordsEntry returns the raft entry data of a DeleteRecords below
// offset.
func deleteRecordsEntry(offset int64) []byte {
	payload := append([]byte{deleteRecordsVersion}, binary.BigEndian.AppendUint64(nil, uint64(offset))...)
	return batch.BuildInternal(0, 0, uint8(segment.EntryDeleteRecords), payload)
}

// decodeDeleteRecords decodes an EntryDeleteRecords payload.
func decodeDeleteRecords(payload []byte) (int64, error) {
	if len(payload) != deleteRecordsSize || payload[0] != deleteRecordsVersion {
		return 0, fmt.Errorf("%w: %d bytes, version %v", errBadDeleteRecords, len(payload), payload[:min(1, len(payload))])
	}
	off := int64(binary.BigEndian.Uint64(payload[1:]))
	if off < 0 {
		return 0, fmt.Errorf("%w: offset %d", errBadDeleteRecords, off)
	}
	return off, nil
}

// internalEntry reports whether a raftpb.EntryNormal's data is an
// internal batch (a replicated operation, not a record batch) and
// returns its kind and payload.
func internalEntry(data []byte) (kind segment.EntryKind, payload []byte, ok bool, err error) {
	if len(data) < batch.HeaderSize {
		return 0, nil, false, nil
	}
	h, err := batch.ParseHeader(data)
	if err != nil || !h.Internal() {
		return 0, nil, false, nil // a record batch
	}
	kind, payload, err = internalPayload(data)
	return kind, payload, true, err
}

// internalPayload returns the kind and payload of an internal batch (its
// header already parsed) that must be a replicated operation.
func internalPayload(data []byte) (kind segment.EntryKind, payload []byte, err error) {
	_, k, payload, err := batch.ParseInternal(data)
	if err != nil {
		return 0, nil, err
	}
	if segment.EntryKind(k) != segment.EntryDeleteRecords {
		return 0, nil, fmt.Errorf("replica: a raft entry's data is an internal batch of kind %s", segment.EntryKind(k))
	}
	return segment.EntryKind(k), payload, nil
}

// DeleteRecords moves the log start offset up to offset (-1: the high
// watermark) and returns the new log start offset (Kafka's
// DeleteRecords). An offset past the high watermark returns an error
// wrapping ErrOffsetOutOfRange; one at or below the log start offset
// changes nothing and returns the log start offset. An internal topic's
// partition returns ErrInternalTopic, a topic whose cleanup.policy is
// compact only ErrPolicyViolation.
//
// Only the leader answers (a follower returns a *NotLeaderError); the
// delete is a raft entry every replica applies, and
// the call returns once it committed and this replica applied it, waiting
// up to DefaultDeleteRecordsTimeout (see DeleteRecordsContext).
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultDeleteRecordsTimeout)
	defer cancel()
	return p.DeleteRecordsContext(ctx, offset)
}

// DeleteRecordsContext is DeleteRecords waiting until ctx ends at most
// (the request's timeout) for its entry to commit and apply; then it
// returns ctx's error, and the delete may still take effect (it is
// proposed).
func (p *Partition) DeleteRecordsContext(ctx context.Context, offset int64) (int64, error) {
	if p.internal {
		return -1, fmt.Errorf("%w: records of an internal topic cannot be deleted", ErrInternalTopic)
	}
	if !p.IsLeader() {
		// DeleteRecords goes to the leader (Kafka's
		// Partition.deleteRecordsOnLeader).
		return -1, p.notLeader("DeleteRecords goes to the partition leader")
	}
	if cfg := p.Config().Log; !cfg.Deletes() {
		return -1, fmt.Errorf("%w: Records of partitions of a topic with cleanup.policy=%s cannot be deleted", ErrPolicyViolation, cfg.CleanupPolicy)
	}
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: offset %d is outside [0, high watermark %d]", ErrOffsetOutOfRange, offset, hw)
	}
	if lso := p.LogStartOffset(); offset <= lso {
		return lso, nil // nothing to replicate
	}
	rs := p.rs
	data := deleteRecordsEntry(offset)
	pr := rs.newProposal(data, batch.Header{ProducerID: -1}, AcksAll)
	pr.del = true
	rs.track(pr)
	err := rs.host.post(rs.id, func(rn *raft.RawNode) error {
		if err := rn.Propose(data); err != nil {
			p.failProposal(pr, p.notLeader(err.Error()))
			return err
		}
		pr.propTerm = rn.BasicStatus().Term
		rs.proposed = append(rs.proposed, pr)
		return nil
	})
	if err != nil {
		p.failProposal(pr, p.notLeader(err.Error()))
	}
	res, err := pr.pd.Wait(ctx)
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil // the log start offset after the entry applied
}

// deleteBefore moves the log's start offset up to offset and removes the
// producer snapshots below it, but the one at the raft log's start, which
// a raft snapshot sends.
func (p *Partition) deleteBefore(offset int64) (int64, error) {
	lso, err := p.log.DeleteRecordsBefore(offset)
	if err != nil {
		return lso, err
	}
	keep := lso
	if start, err := p.log.OffsetAfter(p.log.FirstIndex() - 1); err == nil {
		keep = min(keep, start)
	}
	p.snapMu.Lock()
	if err := pruneSnapshots(p.fs, p.log.Dir(), keep); err != nil {
		p.logger.Warn("replica: removing old producer snapshots failed", "dir", p.log.Dir(), "err", err)
	}
	p.snapMu.Unlock()
	return lso, nil
}

// deleteOutcome is what applying one delete-records entry did.
type deleteOutcome struct {
	lso int64
	err error
}

// applyDeletes applies the delete-records entries among ents (committed,
// in log order) and returns their outcomes by index, nil when there is
// none. Called by the worker from Apply.
func (p *Partition) applyDeletes(ents []raftpb.Entry) map[uint64]deleteOutcome {
	var out map[uint64]deleteOutcome
	for i := range ents {
		e := &ents[i]
		if e.Type != raftpb.EntryNormal {
			continue
		}
		kind, payload, ok, err := internalEntry(e.Data)
		if !ok {
			continue
		}
		if out == nil {
			out = map[uint64]deleteOutcome{}
		}
		var off int64
		if err == nil && kind == segment.EntryDeleteRecords {
			off, err = decodeDeleteRecords(payload)
		}
		if err != nil {
			p.logger.Error("replica: a committed raft entry does not decode", "group", p.rs.id.String(), "index", e.Index, "err", err)
			out[e.Index] = deleteOutcome{lso: -1, err: err}
			continue
		}
		lso, err := p.deleteBefore(off)
		if err != nil {
			p.logger.Error("replica: applying DeleteRecords failed", "group", p.rs.id.String(), "index", e.Index, "offset", off, "err", err)
			lso = -1
		}
		out[e.Index] = deleteOutcome{lso: lso, err: err}
	}
	return out
}
