package segment

import (
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/segment/batch"
)

// TruncateTo removes every batch whose last offset is >= offset from the
// tail of the log (a follower dropping a divergent suffix). A batch holding
// offset goes whole, so the new log end offset, which it returns, may be
// below offset (Kafka's LogSegment.truncateTo). An offset at or past the log
// end offset changes nothing; one below the log start offset empties the
// log and restarts it at offset (TruncateFullyAndStartAt); a negative one
// is an error. The truncation is durable after the next Sync.
//
// It holds syncMu throughout, so no Sync is in flight while it runs: a
// Sync never covers half a truncation.
func (l *Log) TruncateTo(offset int64) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("segment: truncate to negative offset %d", offset)
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.RLock()
	err := l.writableLocked()
	leo, lso := l.active().next, l.logStartOffset
	base := l.segs[l.segmentIndex(offset)].base
	l.mu.RUnlock()
	if err != nil {
		return 0, err
	}
	if offset >= leo {
		return leo, nil
	}
	if offset < lso {
		return offset, l.truncateFullyLocked(offset)
	}
	// A truncation inside a synced segment must not be trusted by a
	// recovery: lower the recovery point durably first.
	if err := l.lowerRecoveryPoint(base, offset); err != nil {
		return 0, err
	}
	l.mu.Lock()
	leo, lsoLowered, err := l.truncateLocked(offset)
	l.mu.Unlock()
	if err != nil || !lsoLowered {
		return leo, err
	}
	// The batch holding the log start offset went whole: persist the lower
	// log start offset.
	return leo, l.writeCheckpoint()
}

func (l *Log) truncateLocked(offset int64) (leo int64, lsoLowered bool, err error) {
	if err := l.writableLocked(); err != nil {
		return 0, false, err
	}
	if offset >= l.active().next {
		return l.active().next, false, nil
	}
	i := l.segmentIndex(offset)
	s := l.segs[i]
	for len(l.segs) > i+1 {
		last := l.active()
		l.deleteSegmentLocked(last)
		l.segs = l.segs[:len(l.segs)-1]
	}
	l.unsynced = slices.DeleteFunc(l.unsynced, func(u *segment) bool { return u == s })
	if err := s.log.pin(); err != nil {
		return 0, false, l.failLocked("truncate", err)
	}
	if err := s.reopenIndexesWritable(&l.cfg); err != nil {
		return 0, false, l.failLocked("truncate", err)
	}
	var buf [batch.HeaderSize]byte
	pos, _, found, err := s.find(offset, &buf)
	if err != nil {
		return 0, false, l.failLocked("truncate", err)
	}
	if found {
		if err := s.truncateAt(pos, &l.cfg); err != nil {
			return 0, false, l.failLocked("truncate", err)
		}
	}
	s.closeRaftFile()
	removeStaleRaftIndex(l, s)
	if err := l.truncateTxnLocked(s); err != nil {
		return 0, false, l.failLocked("truncate", err)
	}
	l.afterTruncateLocked(s)
	if s.next < l.logStartOffset {
		l.logStartOffset = s.next
		lsoLowered = true
	}
	return s.next, lsoLowered, nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty
// at offset (>= 0), which becomes both the log start and log end offset (a
// follower too far behind the leader's log start offset). The new log
// start offset is persisted before it returns.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("segment: restart at negative offset %d", offset)
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.truncateFullyLocked(offset)
}

// truncateFullyLocked is TruncateFullyAndStartAt; syncMu must be held.
func (l *Log) truncateFullyLocked(offset int64) error {
	if err := l.lowerRecoveryPoint(offset, offset); err != nil {
		return err
	}
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	old := l.segs
	for _, s := range old {
		l.deleteSegmentLocked(s)
	}
	s, err := createSegment(l.fs, l.files, l.dir, offset, &l.cfg, l.opts.Now())
	if err != nil {
		// Keep the old (now deleted) segment list so the log stays
		// well-formed; it refuses writes from here on.
		err = l.failLocked("truncate", err)
		l.mu.Unlock()
		return err
	}
	// The raft log empties too: FirstIndex stays, every entry is gone.
	s.rfirst, s.rprev = l.raftPrevIndex+1, l.raftPrevTerm
	l.lastTerm = l.raftPrevTerm
	l.segs = []*segment{s}
	l.unsynced = nil
	l.logStartOffset = offset
	l.writeSeq++
	l.truncEpoch++
	l.mu.Unlock()
	return l.writeCheckpoint()
}

// lowerRecoveryPoint durably lowers the recovery point to at most rp and
// the cleaner offset to at most dirty (what a truncation removes is no
// longer clean: offsets there will be written again).
func (l *Log) lowerRecoveryPoint(rp, dirty int64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	dirtyLowered := dirty < l.firstDirty
	l.firstDirty = min(l.firstDirty, dirty)
	l.mu.Unlock()
	if rp >= l.recoveryPoint && !dirtyLowered {
		return nil
	}
	return l.writeCheckpointLocked(min(rp, l.recoveryPoint), false)
}
