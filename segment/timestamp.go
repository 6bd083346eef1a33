package segment

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/segment/batch"
)

// errFound stops a record iteration early.
var errFound = errors.New("found")

// readBatch reads the whole batch at pos.
func (s *segment) readBatch(pos int64, h *batch.Header) ([]byte, error) {
	b := make([]byte, h.Size())
	if _, err := s.log.ReadAt(b, pos); err != nil {
		return nil, fmt.Errorf("segment: read batch %s at %d: %w", s.path(KindLog), pos, err)
	}
	return b, nil
}

// OffsetForTimestamp returns the first record (in offset order, at or after
// the log start offset) whose timestamp is >= ts, searching inside batches:
// Kafka's ListOffsets semantics. ok is false when there is none (Kafka then
// answers offset -1). Timestamps are ms since the epoch.
func (l *Log) OffsetForTimestamp(ts int64) (offset, recordTs int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	lso := l.logStartOffset
	var buf [batch.HeaderSize]byte
	for i := l.segmentIndex(lso); i < len(l.segs); i++ {
		s := l.segs[i]
		if s.maxTs < ts || s.next <= lso {
			continue
		}
		from := max(s.timeIdx.Lookup(ts).Offset, lso)
		pos, h, found, err := s.find(from, &buf)
		if err != nil {
			return -1, -1, false, err
		}
		for found && pos < s.size {
			if h.MaxTimestamp >= ts && h.LastOffset() >= lso {
				b, err := s.readBatch(pos, &h)
				if err != nil {
					return -1, -1, false, err
				}
				_, err = batch.Iterate(b, func(r *batch.Record) error {
					if r.Offset >= lso && r.Timestamp >= ts {
						offset, recordTs = r.Offset, r.Timestamp
						return errFound
					}
					return nil
				})
				if err == errFound {
					return offset, recordTs, true, nil
				} else if err != nil {
					return -1, -1, false, err
				}
			}
			pos += int64(h.Size())
			if pos >= s.size {
				break
			}
			if h, err = s.headerAt(pos, &buf); err != nil {
				return -1, -1, false, err
			}
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp returns the largest record timestamp in the log and the
// offset of the first record carrying it (ListOffsets -3, KIP-734); ok is
// false when the log holds no batch.
func (l *Log) MaxTimestamp() (ts, offset int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var best *segment
	for _, s := range l.segs[l.segmentIndex(l.logStartOffset):] {
		if s.size > 0 && (best == nil || s.maxTs > best.maxTs) {
			best = s
		}
	}
	if best == nil {
		return -1, -1, false, nil
	}
	var buf [batch.HeaderSize]byte
	pos, h, found, err := best.find(best.offsetOfMaxTs, &buf)
	if err != nil || !found {
		return best.maxTs, best.offsetOfMaxTs, err == nil, err
	}
	b, err := best.readBatch(pos, &h)
	if err != nil {
		return -1, -1, false, err
	}
	offset = h.LastOffset()
	_, err = batch.Iterate(b, func(r *batch.Record) error {
		if r.Timestamp == h.MaxTimestamp {
			offset = r.Offset
			return errFound
		}
		return nil
	})
	if err != nil && err != errFound {
		return -1, -1, false, err
	}
	return h.MaxTimestamp, offset, true, nil
}
