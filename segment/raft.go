package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/sluicemq/sluice/segment/batch"
)

// The raft log. Every batch stored, data or internal, is one raft entry;
// its raft index is its ordinal in the log: a segment's first batch has
// the segment's first index (the previous segment's first index plus its
// batch count), and FirstIndex is the first raft segment's. The term of an
// entry is its batch's partitionLeaderEpoch (a negative epoch, from a
// batch appended without one, reads as term 0). Raft's own entries (a new
// leader's empty entry, configuration changes) are internal batches
// (package batch) that take no Kafka offset, so a log into which N records
// were produced has log end offset N whatever raft did.
//
// Sizes count every byte on disk, internal batches included
// (retention.bytes is the log's size), while timestamps ignore them (their
// timestamps are -1: a segment holding only internal batches ages from its
// last modification, as a Kafka segment without timestamps does).
//
// Retention (DeleteOldSegments, DeleteRecordsBefore) removing whole
// segments is raft log compaction: FirstIndex moves to the first remaining
// segment's first index and Term(FirstIndex-1) answers from that
// segment's .raftindex header and log.checkpoint. Neither removes entries
// at or above the bound SetRaftRetainFrom sets, and neither does the
// cleaner, which rewrites only segments wholly below it; segments it
// cleans leave the raft log (their batch counts change): FirstIndex moves
// past them, they keep serving Kafka reads but carry no raft indexes.
// ResetAt empties the log for a raft snapshot (a delete topic's);
// InstallSnapshot (install.go) puts a compacted log's snapshot in place:
// the cleaned segments the leader holds below its raft start, then an
// empty raft log.

// EntryKind is the kind of a raft entry as stored: a record batch, or one
// of raft's own entries (mirroring raftpb.EntryType without importing
// raft). Values other than EntryData are stored in the internal batch's
// record key, so they are part of the on-disk format.
type EntryKind uint8

// Entry kinds.
const (
	EntryData         EntryKind = 0 // a record batch (raftpb.EntryNormal with data)
	EntryEmpty        EntryKind = 1 // raftpb.EntryNormal without data (a new leader's entry)
	EntryConfChange   EntryKind = 2 // raftpb.EntryConfChange, data its marshalled ConfChange
	EntryConfChangeV2 EntryKind = 3 // raftpb.EntryConfChangeV2
	// EntryDeleteRecords is the replica's replicated DeleteRecords: data
	// is its payload (the replica package defines it), the raft entry
	// raftpb.EntryNormal whose data is this internal batch.
	EntryDeleteRecords EntryKind = 4
)

var entryKindNames = [...]string{"data", "empty", "confchange", "confchangev2", "deleterecords"}

// String returns the kind's name ("data", "empty", "confchange", ...).
func (k EntryKind) String() string {
	if int(k) < len(entryKindNames) {
		return entryKindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Errors of the raft API. ErrCompacted and ErrUnavailable mean what
// raft.ErrCompacted and raft.ErrUnavailable do (the replica maps them).
var (
	// ErrCompacted: the index is below FirstIndex-1 (Term) or FirstIndex
	// (Entries, TruncateIndex): retention or the cleaner removed it.
	ErrCompacted = errors.New("segment: raft index compacted")
	// ErrUnavailable: the index is past LastIndex.
	ErrUnavailable = errors.New("segment: raft index unavailable")
	// ErrRaftIndex: an append at an index outside [FirstIndex,
	// LastIndex+1], a bad kind or a term past 2^31-1.
	ErrRaftIndex = errors.New("segment: bad raft append")
)

// Entry is one raft entry read from the log.
type Entry struct {
	Index, Term uint64
	Kind        EntryKind
	// Data is, for EntryData, the whole stored batch (header included, as
	// on disk: base offset and leader epoch stamped); for the other
	// kinds, the raft entry's data. A copy: the caller owns it.
	Data []byte
	// BaseOffset and NextOffset are the Kafka offsets the entry holds,
	// [BaseOffset, NextOffset) (equal for an internal entry).
	BaseOffset, NextOffset int64
}

// epochTerm is the raft term of a batch's partitionLeaderEpoch.
func epochTerm(e int32) uint64 {
	if e < 0 {
		return 0
	}
	return uint64(e)
}

// FirstIndex returns the raft index of the first entry in the log (1 for
// a new log; LastIndex+1 when the log holds none).
func (l *Log) FirstIndex() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.raftPrevIndex + 1
}

// LastIndex returns the raft index of the last entry (FirstIndex-1 when
// there is none).
func (l *Log) LastIndex() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastIndexLocked()
}

func (l *Log) lastIndexLocked() uint64 {
	a := l.active()
	return a.rfirst + a.count() - 1
}

// locateLocked returns the segment and file position of entry i, which
// must lie in [FirstIndex, LastIndex].
func (l *Log) locateLocked(i uint64) (*segment, int64, error) {
	if i <= l.raftPrevIndex {
		return nil, 0, fmt.Errorf("%w: entry %d, first index %d", ErrCompacted, i, l.raftPrevIndex+1)
	}
	if last := l.lastIndexLocked(); i > last {
		return nil, 0, fmt.Errorf("%w: entry %d, last index %d", ErrUnavailable, i, last)
	}
	k := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].rfirst > i }) - 1
	if k < 0 || l.segs[k].rfirst == 0 || i-l.segs[k].rfirst >= l.segs[k].count() {
		panicf("segment: raft index %d not in any segment of %s", i, l.dir)
	}
	s := l.segs[k]
	return s, int64(s.rpos[i-s.rfirst] & raftPosMask), nil
}

// Term returns the term of entry i, for i in [FirstIndex-1, LastIndex]:
// ErrCompacted below, ErrUnavailable above.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case i == l.raftPrevIndex:
		return l.raftPrevTerm, nil
	case i < l.raftPrevIndex:
		return 0, fmt.Errorf("%w: term of %d, first index %d", ErrCompacted, i, l.raftPrevIndex+1)
	case i == l.lastIndexLocked():
		return l.lastTerm, nil
	}
	s, pos, err := l.locateLocked(i)
	if err != nil {
		return 0, err
	}
	var buf [batch.HeaderSize]byte
	h, err := s.headerAt(pos, &buf)
	if err != nil {
		return 0, fmt.Errorf("segment: term of entry %d: %w", i, err)
	}
	return epochTerm(h.PartitionLeaderEpoch), nil
}

// OffsetAfter returns the Kafka offset after entry i (the base offset of
// the next data record): the high watermark when i is the commit index.
// It answers for i in [FirstIndex-1, LastIndex].
func (l *Log) OffsetAfter(i uint64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i == l.raftPrevIndex {
		return l.segs[l.firstRaftSegLocked()].base, nil
	}
	s, pos, err := l.locateLocked(i)
	if err != nil {
		return 0, err
	}
	var buf [batch.HeaderSize]byte
	h, err := s.headerAt(pos, &buf)
	if err != nil {
		return 0, fmt.Errorf("segment: offset after entry %d: %w", i, err)
	}
	return h.NextOffset(), nil
}

// IndexAtOffset returns the raft index of the data entry holding offset
// (base offset <= offset < next offset). An offset at or past the log end
// offset is ErrUnavailable; one below the log start offset, or in a
// segment outside the raft log (cleaned), ErrCompacted.
func (l *Log) IndexAtOffset(offset int64) (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if offset >= l.active().next {
		return 0, fmt.Errorf("%w: offset %d, log end offset %d", ErrUnavailable, offset, l.active().next)
	}
	if offset < l.logStartOffset {
		return 0, fmt.Errorf("%w: offset %d, log start offset %d", ErrCompacted, offset, l.logStartOffset)
	}
	s := l.segs[l.segmentIndex(offset)]
	if s.rfirst == 0 {
		return 0, fmt.Errorf("%w: offset %d is in a segment outside the raft log", ErrCompacted, offset)
	}
	var buf [batch.HeaderSize]byte
	pos, _, ok, err := s.find(offset, &buf)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: offset %d", ErrUnavailable, offset)
	}
	k := sort.Search(len(s.rpos), func(i int) bool { return int64(s.rpos[i]&raftPosMask) >= pos })
	if k == len(s.rpos) || int64(s.rpos[k]&raftPosMask) != pos {
		panicf("segment: the batch at position %d of %s is not in its raft index", pos, s.path(KindLog))
	}
	return s.rfirst + uint64(k), nil
}

// firstRaftSegLocked returns the index in l.segs of the first segment
// with raft indexes (the active one at least).
func (l *Log) firstRaftSegLocked() int {
	return sort.Search(len(l.segs), func(k int) bool { return l.segs[k].rfirst != 0 })
}

// entryOverhead bounds what raftpb.Entry's fields other than Data take
// in raft's size measure.
const entryOverhead = 32

// Entries returns the entries [lo, hi), in order, stopping before the one
// that would take their total size past maxBytes (each counted as its
// stored batch's size plus 32 bytes, at least raft's own measure of the
// entry), but always at least one when lo < hi (raft's maxSize). lo below
// FirstIndex is ErrCompacted, hi past LastIndex+1 ErrUnavailable. The
// batches are located under the log's read lock and read after it, from
// file references held meanwhile (as Read's ranges are).
func (l *Log) Entries(lo, hi, maxBytes uint64) ([]Entry, error) {
	type ref struct {
		fh        *fileHandle
		path      string
		pos, size int64
	}
	var refs []ref
	defer func() {
		for _, r := range refs {
			r.fh.release()
		}
	}()
	err := func() error {
		l.mu.RLock()
		defer l.mu.RUnlock()
		if lo <= l.raftPrevIndex {
			return fmt.Errorf("%w: entries from %d, first index %d", ErrCompacted, lo, l.raftPrevIndex+1)
		}
		if last := l.lastIndexLocked(); hi > last+1 {
			return fmt.Errorf("%w: entries to %d, last index %d", ErrUnavailable, hi, last)
		}
		var total uint64
		for i := lo; i < hi; i++ {
			s, pos, err := l.locateLocked(i)
			if err != nil {
				return err
			}
			end := s.size
			if k := i - s.rfirst + 1; k < s.count() {
				end = int64(s.rpos[k] & raftPosMask)
			}
			total += uint64(end-pos) + entryOverhead
			if len(refs) > 0 && total > maxBytes {
				break
			}
			fh, err := s.log.acquire()
			if err != nil {
				return fmt.Errorf("segment: entry %d: %w", i, err)
			}
			refs = append(refs, ref{fh: fh, path: s.path(KindLog), pos: pos, size: end - pos})
		}
		return nil
	}()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(refs))
	for k, r := range refs {
		e, err := readEntry(lo+uint64(k), r.fh, r.path, r.pos, r.size)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// readEntry reads entry i, the batch of size bytes at pos of the file fh.
func readEntry(i uint64, fh *fileHandle, path string, pos, size int64) (Entry, error) {
	b := make([]byte, size)
	if n, err := fh.f.ReadAt(b, pos); err != nil && (err != io.EOF || int64(n) != size) {
		return Entry{}, fmt.Errorf("segment: entry %d: read %s at %d: %w", i, path, pos, err)
	}
	h, err := batch.ParseHeader(b)
	if err == nil && h.Size() != len(b) {
		err = fmt.Errorf("%w: batch of %d bytes where the raft index has %d", ErrCorrupt, h.Size(), len(b))
	}
	if err != nil {
		return Entry{}, fmt.Errorf("segment: entry %d at %s position %d: %w", i, path, pos, err)
	}
	e := Entry{Index: i, Term: epochTerm(h.PartitionLeaderEpoch), Kind: EntryData, Data: b, BaseOffset: h.BaseOffset, NextOffset: h.NextOffset()}
	if h.Internal() {
		_, kind, data, err := batch.ParseInternal(b)
		if err != nil {
			return Entry{}, fmt.Errorf("segment: entry %d at %s position %d: %w", i, path, pos, err)
		}
		e.Kind, e.Data = EntryKind(kind), append([]byte{}, data...)
	}
	return e, nil
}

// AppendEntry writes raft entry index with term term. For EntryData, data
// is one record batch, checked as AppendWith checks it and modified in
// place (baseOffset set to the log end offset, partitionLeaderEpoch to
// term: fields outside the CRC; maxTimestamp corrected and LogAppendTime
// applied as AppendWith does); opts.SetLeaderEpoch is ignored. Other kinds
// store data (may be empty) in an internal batch at the log end offset,
// taking no offset. When index <= LastIndex, the entries from index on are
// first removed (TruncateIndex) and AppendResult.TruncatedTo says where the
// log end offset went. index must be in [FirstIndex, LastIndex+1]
// (ErrRaftIndex otherwise) and term at most 2^31-1, never below the term
// of entry index-1, and for a data entry equal to it: as in etcd raft's
// log, a term starts with its leader's empty entry (ErrRaftIndex
// otherwise; recovery checks terms the same way, see termGuard). It never
// syncs (see AppendWith and Sync). A raft log is written with AppendEntry
// only.
func (l *Log) AppendEntry(index, term uint64, kind EntryKind, data []byte, opts AppendOptions) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, TruncatedTo: -1}
	if term > math.MaxInt32 {
		return res, fmt.Errorf("%w: term %d does not fit a leader epoch", ErrRaftIndex, term)
	}
	var b []byte
	var h batch.Header
	var err error
	switch kind {
	case EntryData:
		b = data
		if h, err = checkedHeader(b, opts.Checked); err != nil {
			return res, err
		}
	case EntryEmpty, EntryConfChange, EntryConfChangeV2, EntryDeleteRecords:
		b = batch.BuildInternal(0, int32(term), uint8(kind), data)
		h, _ = batch.ParseHeader(b)
	default:
		return res, fmt.Errorf("%w: entry kind %d", ErrRaftIndex, kind)
	}
	if err := l.markRaftLog(); err != nil {
		return res, err
	}
	first, last := l.FirstIndex(), l.LastIndex()
	if index < first || index > last+1 {
		return res, fmt.Errorf("%w: append of entry %d outside [%d, %d]", ErrRaftIndex, index, first, last+1)
	}
	prev, err := l.Term(index - 1)
	if err != nil {
		return res, err
	}
	if term < prev || (kind == EntryData && term != prev) {
		// Raft's log: terms never decrease, and a new term starts with
		// its leader's (internal) empty entry. Recovery relies on it
		// (termGuard). Checked before any truncation: a refused append
		// changes nothing.
		return res, fmt.Errorf("%w: %s entry %d of term %d after an entry of term %d", ErrRaftIndex, kind, index, term, prev)
	}
	truncated := int64(-1)
	if index <= last {
		if truncated, err = l.TruncateIndex(index); err != nil {
			return res, err
		}
	}
	opts.SetLeaderEpoch, opts.LeaderEpoch = true, int32(term)
	l.mu.Lock()
	if l.lastTerm != prev {
		l.mu.Unlock() // a concurrent writer: raft has one
		return res, fmt.Errorf("%w: the log changed under the append of entry %d", ErrRaftIndex, index)
	}
	res, err = l.appendLocked(b, &h, opts, index)
	l.mu.Unlock()
	res.TruncatedTo = truncated
	return res, err
}

// TruncateIndex removes every entry >= index (a follower's divergent
// tail) and returns the new log end offset; an index past LastIndex
// changes nothing, one below FirstIndex is ErrCompacted. It is one
// operation for recovery: the recovery point is lowered durably first, so
// a crash at any point reopens the log with the tail either still whole or
// cut at a batch boundary (recovery rescans it and rebuilds its indexes
// and raft index). It is durable after the next Sync. A ReadResult held
// on the cut segment keeps its bytes: see segment.replacePrefix.
func (l *Log) TruncateIndex(index uint64) (int64, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.RLock()
	err := l.writableLocked()
	leo := l.active().next
	var s *segment
	var pos int64
	if err == nil {
		if index <= l.raftPrevIndex {
			err = fmt.Errorf("%w: truncate at entry %d, first index %d", ErrCompacted, index, l.raftPrevIndex+1)
		} else if index <= l.lastIndexLocked() {
			s, pos, err = l.locateLocked(index)
		}
	}
	var off int64
	if err == nil && s != nil {
		var buf [batch.HeaderSize]byte
		var h batch.Header
		h, err = s.headerAt(pos, &buf)
		off = h.BaseOffset
	}
	l.mu.RUnlock()
	if err != nil || s == nil {
		return leo, err
	}
	if err := l.lowerRecoveryPoint(s.base, off); err != nil {
		return 0, err
	}
	l.mu.Lock()
	leo, lsoLowered, err := l.truncateSegmentLocked(s, pos)
	l.mu.Unlock()
	if err != nil || !lsoLowered {
		return leo, err
	}
	return leo, l.writeCheckpoint()
}

// truncateSegmentLocked cuts the log at position pos of segment s (a batch
// boundary): later segments are deleted, s becomes the active segment.
func (l *Log) truncateSegmentLocked(s *segment, pos int64) (leo int64, lsoLowered bool, err error) {
	if err := l.writableLocked(); err != nil {
		return 0, false, err
	}
	i := -1
	for k, t := range l.segs {
		if t == s {
			i = k
		}
	}
	if i < 0 {
		return 0, false, fmt.Errorf("%w: the segment to truncate is gone", ErrCleanAborted)
	}
	for len(l.segs) > i+1 {
		last := l.active()
		l.deleteSegmentLocked(last)
		l.segs = l.segs[:len(l.segs)-1]
	}
	l.unsynced = removeSeg(l.unsynced, s)
	if err := s.log.pin(); err != nil {
		return 0, false, l.failLocked("truncate", err)
	}
	if err := s.reopenIndexesWritable(&l.cfg); err != nil {
		return 0, false, l.failLocked("truncate", err)
	}
	if pos < s.size {
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

// afterTruncateLocked updates the log's state after a tail truncation
// left s as the active segment.
func (l *Log) afterTruncateLocked(s *segment) {
	l.writeSeq++
	l.truncEpoch++
	s.modSeq = l.writeSeq
	l.firstDirty = min(l.firstDirty, s.next)
	l.lastTerm = s.rprev
	if n := len(s.rpos); n > 0 {
		var buf [batch.HeaderSize]byte
		if h, err := s.headerAt(int64(s.rpos[n-1]&raftPosMask), &buf); err == nil {
			l.lastTerm = epochTerm(h.PartitionLeaderEpoch)
		}
	}
	if s.rfirst == 0 {
		// A truncation into segments the cleaner took out of the raft
		// log (only TruncateTo reaches them, never raft, which never
		// truncates committed entries): the raft log restarts at
		// FirstIndex with this segment's batches.
		s.rfirst, s.rprev = l.raftPrevIndex+1, l.raftPrevTerm
		for _, t := range l.segs {
			if t != s {
				t.rfirst = 0
			}
		}
	}
}

// removeStaleRaftIndex removes the .raftindex of s, which a truncation made
// the active segment again (it is rewritten when s is sealed; recovery
// would rebuild a stale one anyway).
func removeStaleRaftIndex(l *Log, s *segment) {
	if err := l.fs.Remove(s.path(KindRaftIndex)); err != nil && !isNotExist(err) {
		l.opts.Logger.Warn("segment: remove a stale raft index", "file", s.path(KindRaftIndex), "err", err)
	}
}

func removeSeg(list []*segment, s *segment) []*segment {
	out := list[:0]
	for _, u := range list {
		if u != s {
			out = append(out, u)
		}
	}
	return out
}

// ResetAt empties the log for a raft snapshot (of a delete topic): every
// segment is removed and the log restarts empty with FirstIndex index+1,
// Term(index) = term and log start = log end = nextOffset. It is durable
// when it returns: log.checkpoint first records the reset (raft-reset 1),
// so a crash before the end reopens the log empty at nextOffset with those
// raft fields, never with old segments.
func (l *Log) ResetAt(index, term uint64, nextOffset int64) error {
	if nextOffset < 0 || term > math.MaxInt32 {
		return fmt.Errorf("%w: reset at offset %d, term %d", ErrRaftIndex, nextOffset, term)
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	err := l.writableLocked()
	l.mu.RUnlock()
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.raftLog = true
	l.mu.Unlock()
	c := Checkpoint{LogStartOffset: nextOffset, RecoveryPoint: nextOffset, CleanerOffset: nextOffset,
		HasRaft: true, RaftStartOffset: nextOffset, RaftPrevIndex: index, RaftPrevTerm: term, RaftReset: true,
		RaftLog: true, RaftRPTerm: term}
	if err := writeCheckpoint(l.fs, l.dir, c); err != nil {
		return l.fail("checkpoint", err)
	}
	l.mu.Lock()
	for _, s := range l.segs {
		l.deleteSegmentLocked(s)
	}
	s, err := createSegment(l.fs, l.files, l.dir, nextOffset, &l.cfg, l.opts.Now())
	if err != nil {
		// The old (deleted) segment list stays so the log is well formed;
		// it refuses writes from here on, and reopens empty.
		err = l.failLocked("reset", err)
		l.mu.Unlock()
		return err
	}
	s.rfirst, s.rprev = index+1, term
	l.segs = []*segment{s}
	l.unsynced = nil
	l.logStartOffset = nextOffset
	l.firstDirty = nextOffset
	l.raftPrevIndex, l.raftPrevTerm, l.lastTerm = index, term, term
	l.writeSeq++
	l.truncEpoch++
	l.dirDirty = false
	l.mu.Unlock()
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("reset", err)
	}
	return l.writeCheckpointLocked(nextOffset, false)
}

// SetRaftRetainFrom sets the raft compaction bound: retention
// (DeleteOldSegments), DeleteRecordsBefore's segment deletion and the
// cleaner never remove or rewrite entries at or above index (the replica
// passes its applied index). The default, math.MaxUint64, bounds nothing.
func (l *Log) SetRaftRetainFrom(index uint64) {
	l.mu.Lock()
	l.raftRetain = index
	l.mu.Unlock()
}

// raftRemovableLocked reports whether every raft entry of s lies below the
// retain bound (always for a segment outside the raft log).
func (l *Log) raftRemovableLocked(s *segment) bool {
	return s.rfirst == 0 || s.rfirst+s.count() <= l.raftRetain
}

// raftStartMovedLocked updates FirstIndex after segments at the front of
// the log were removed; it reports whether it changed.
func (l *Log) raftStartMovedLocked() bool {
	s := l.segs[l.firstRaftSegLocked()]
	if s.rfirst-1 == l.raftPrevIndex {
		return false
	}
	l.raftPrevIndex, l.raftPrevTerm = s.rfirst-1, s.rprev
	if s.count() == 0 && s == l.active() {
		l.lastTerm = s.rprev
	}
	return true
}

// checkpointLocked returns the checkpoint for the log's current state with
// recovery point rp.
func (l *Log) checkpointLocked(rp int64, clean bool) Checkpoint {
	c := Checkpoint{LogStartOffset: l.logStartOffset, RecoveryPoint: rp, CleanShutdown: clean, CleanerOffset: l.firstDirty, HasRaft: true,
		RaftPrevIndex: l.raftPrevIndex, RaftPrevTerm: l.raftPrevTerm}
	if len(l.segs) > 0 {
		c.RaftStartOffset = l.segs[l.firstRaftSegLocked()].base
	}
	c.RaftLog = l.raftLog
	c.RaftRPTerm = l.lastTerm
	for _, s := range l.segs {
		if s.base >= rp {
			c.RaftRPTerm = s.rprev // the term of the entry before s
			break
		}
	}
	return c
}

// termGuard checks, in recovery's scan of a raft log's segments, that no
// torn write changed a batch's term (partitionLeaderEpoch, which the CRC
// does not cover): terms never decrease along a raft log, a term only
// rises at an internal batch (a new leader's empty entry comes first in
// its term; internal batches carry their term where the CRC covers it,
// see batch.ParseInternal), so a data batch must carry the term of the
// entry before it. A batch that breaks this is corrupt: the scan cuts the
// log there, as at a bad CRC. Logs not written as raft logs (AppendWith
// with Kafka leader epochs) are not checked.
type termGuard struct {
	on   bool   // checking (a raft log, in raft segments)
	last uint64 // the term of the entry before the next batch
}

func (g *termGuard) check(h *batch.Header) error {
	if g == nil || !g.on {
		return nil
	}
	t := epochTerm(h.PartitionLeaderEpoch)
	switch {
	case h.Internal() && t < g.last:
		return fmt.Errorf("%w: internal batch of term %d after term %d", ErrCorrupt, t, g.last)
	case !h.Internal() && t != g.last:
		return fmt.Errorf("%w: data batch of term %d after term %d (a term starts with an internal batch)", ErrCorrupt, t, g.last)
	}
	g.last = t
	return nil
}

// markRaftLog records durably, once, that the log is a raft log (see
// termGuard); AppendEntry and ResetAt call it.
func (l *Log) markRaftLog() error {
	l.mu.RLock()
	done := l.raftLog
	l.mu.RUnlock()
	if done {
		return nil
	}
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	l.raftLog = true
	l.mu.Unlock()
	return l.writeCheckpointLocked(l.recoveryPoint, false)
}

// panicf reports a broken invariant.
func panicf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
