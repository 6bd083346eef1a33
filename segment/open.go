package segment

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Open opens (creating if needed) the partition log in dir and recovers it.
//
// Recovery: leftover ".deleted" files and orphan index files are removed.
// After a clean shutdown (recorded in the checkpoint) the indexes are
// trusted and only the active segment's tail after its last index entry is
// scanned. Otherwise every segment from the one holding the recovery point
// on is scanned from its start: each batch's length, CRC and offsets are
// checked, the indexes are rebuilt, and the log is cut at the first torn or
// corrupt batch (that segment is truncated and every later one deleted), so
// nothing corrupt is ever served and the log stays a prefix. That cut is
// made only where a crash can tear data (the active segment, or segments
// from the recovery point on after an unclean shutdown); damage in a
// closed segment that must be whole (synced, or closed cleanly) opens the
// log damaged instead (see DamageError): nothing on disk changes. Offset gaps
// (compaction's) are accepted in segments known to be cleanable (see
// recover); without a trusted checkpoint, in every closed segment.
// Segments below the recovery point were synced with their indexes; they
// are rescanned only when an index is missing or does not fit its log.
func Open(fs vfs.FS, dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FileCache == nil {
		opts.FileCache = defaultFileCache()
	}
	if opts.CleanerDedupeBufferBytes <= 0 {
		opts.CleanerDedupeBufferBytes = DefaultCleanerDedupeBufferBytes
	}
	l := &Log{fs: fs, files: opts.FileCache, dir: dir, cfg: cfg, opts: opts, tombstoneHorizon: -1, raftRetain: math.MaxUint64, flushCh: make(chan struct{}, 1), cfgCh: make(chan struct{}, 1), done: make(chan struct{})}
	l.groupCond = sync.NewCond(&l.groupMu)
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// A new partition folder: its entry in the parent must be durable
		// before anything synced inside it can be.
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	if err := l.recover(); err != nil {
		for _, s := range l.segs {
			s.closeFiles()
		}
		return nil, fmt.Errorf("segment: open %s: %w", dir, err)
	}
	l.retireRecovered()
	l.lastSync = opts.Now()
	if !opts.noFlusher {
		l.wg.Add(1)
		go l.flusher()
	}
	return l, nil
}

func (l *Log) recover() error {
	if err := l.recoverInstall(); err != nil { // install.go
		return err
	}
	swapped, err := l.completeSwaps()
	if err != nil {
		return err
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, name := range names {
		if n, ok := ParseFileName(name); ok && !n.Deleted && n.Kind == KindLog {
			logs[n.Base] = true
			bases = append(bases, n.Base)
		}
	}
	slices.Sort(bases)
	for _, name := range names {
		n, ok := ParseFileName(name)
		stray := (ok && (n.Deleted || !logs[n.Base])) || name == CheckpointName+".tmp" || strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, truncSuffix)
		if stray {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
		}
	}

	ckpt, haveCkpt, err := ReadCheckpoint(l.fs, l.dir)
	if err != nil {
		return err
	}
	if haveCkpt && ckpt.RaftReset {
		// A ResetAt was under way: the log restarts empty at the log
		// start offset it recorded, whatever segments are left.
		for _, b := range bases {
			if err := l.removeSegmentFiles(b); err != nil {
				return err
			}
		}
		bases = nil
		l.dirDirty = true
	}
	clean := haveCkpt && ckpt.CleanShutdown
	l.recoveryPoint = ckpt.RecoveryPoint
	l.firstDirty = ckpt.CleanerOffset
	if !haveCkpt {
		l.recoveryPoint, l.firstDirty = 0, 0
		if len(bases) > 0 {
			l.opts.Logger.Warn("segment: no trusted "+CheckpointName+" (missing or damaged): rescanning every segment; offset gaps in closed segments are taken as compaction's",
				"dir", l.dir, "segments", len(bases))
		}
	}
	// Offset gaps are compaction's only in a segment that ends at or below
	// the recovery point (synced whole: only those are cleaned), or below
	// the cleaner offset (a truncation may make a cleaned segment the
	// active one, above the recovery point). Elsewhere a gap means lost
	// unsynced data. Without a trusted checkpoint neither is known: a
	// closed segment may then have gaps up to the next segment's base
	// (Kafka's recovery never requires contiguous offsets), so losing the
	// checkpoint costs a rescan, never cleaned data. Offsets must still
	// strictly increase, and CRC errors, torn tails and overlaps still cut
	// the log.
	syncedRP := l.recoveryPoint
	guard := recoveryGuard{ckpt: ckpt, on: haveCkpt && ckpt.RaftLog && !clean}

	var scanned, scannedBytes, truncatedBytes, dropped int64
	logRecovery := func() {
		// One line per partition whose recovery had work to do (Kafka
		// logs its recovery of each log the same way).
		// An empty log had nothing to recover: no line.
		if scanned > 0 && (scannedBytes > 0 || truncatedBytes > 0 || dropped > 0) && (!clean || truncatedBytes > 0 || dropped > 0) {
			end := int64(0)
			if len(l.segs) > 0 {
				end = l.segs[len(l.segs)-1].next
			}
			if l.opts.OnRecovered != nil && truncatedBytes == 0 && dropped == 0 {
				l.opts.OnRecovered(RecoveryStats{Dir: l.dir, SegmentsScanned: scanned, BytesScanned: scannedBytes})
				return
			}
			l.opts.Logger.Info("segment: recovered after an unclean shutdown",
				"dir", l.dir, "segments_scanned", scanned, "bytes_scanned", scannedBytes,
				"bytes_truncated", truncatedBytes, "segments_dropped", dropped, "log_end_offset", end)
		}
	}
	for i, base := range bases {
		s, rebuilt, err := openSegment(l.fs, l.files, l.dir, base, &l.cfg, false)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		last := i == len(bases)-1
		fullScan := rebuilt || swapped[base] || (!clean && base >= l.segmentBase(bases, l.recoveryPoint))
		synced := !last && bases[i+1] <= syncedRP
		gapLimit := l.firstDirty // a gap may end at or below it
		if synced || (!haveCkpt && !last) {
			gapLimit = bases[i+1]
		}
		// A closed segment that was synced whole (below the recovery
		// point, or every segment after a clean shutdown) must be intact:
		// damage there is not a crash's torn tail, and cutting it would
		// delete the later segments with it. The log then stops at the
		// damage and changes nothing on disk (see DamageError).
		mustBeWhole := !last && (clean || synced)
		var cut int64
		if !fullScan {
			if ok, err := l.loadTrusted(s, bases, i); err != nil {
				var d *DamageError
				if !errors.As(err, &d) {
					return err
				}
				l.damageLocked(d)
				break
			} else if !ok {
				fullScan = true
			}
		}
		if fullScan {
			if err := s.reopenIndexesWritable(&l.cfg); err != nil {
				return err
			}
			s.offIdx.Reset()
			s.timeIdx.Reset()
			s.resetSummary()
			s.unverified = nil // the scan checks every batch
			s.needsVerify.Store(false)
			var reason error
			cut, reason, err = s.scan(0, &l.cfg, gapLimit, !mustBeWhole, guard.at(s.base, mustBeWhole))
			if err != nil {
				return err
			}
			if cut > 0 && mustBeWhole {
				scanned++
				scannedBytes += s.size + cut
				l.damageLocked(&DamageError{File: s.path(KindLog), Position: s.size, Offset: s.next, Reason: reason})
				break
			}
			scanned++
			scannedBytes += s.size + cut
			truncatedBytes += cut
			if cut > 0 {
				l.opts.Logger.Warn("segment: recovery truncated a torn or corrupt tail",
					"file", s.path(KindLog), "position", s.size, "bytes", cut, "reason", reason)
			}
			if !last {
				if err := s.seal(); err != nil {
					return err
				}
			}
			if synced && cut == 0 {
				// Its data was synced: only the rebuilt indexes were not,
				// so sync them now rather than lower the recovery point.
				if err := s.syncAll(); err != nil {
					return err
				}
			} else {
				l.unsynced = append(l.unsynced, s)
			}
		}
		// A gap after a whole synced segment is compaction's; anywhere else
		// (or an overlap) what follows was never synced: the log is a prefix.
		if !last && fullScan && s.next != bases[i+1] && !(cut == 0 && s.next < bases[i+1] && bases[i+1] <= gapLimit) {
			if mustBeWhole {
				l.damageLocked(&DamageError{File: s.path(KindLog), Position: s.size, Offset: s.next,
					Reason: fmt.Errorf("%w: it ends at offset %d but the next segment starts at %d: a segment file is missing or damaged", ErrCorrupt, s.next, bases[i+1])})
				break
			}
			l.opts.Logger.Warn("segment: recovery dropped segments after a gap",
				"dir", l.dir, "segment", s.path(KindLog), "end", s.next, "next", bases[i+1])
			dropped = int64(len(bases) - i - 1)
			for _, b := range bases[i+1:] {
				if err := l.removeSegmentFiles(b); err != nil {
					return err
				}
			}
			l.dirDirty = true
			break
		}
		if !last {
			// Done with this closed segment: its descriptors go to
			// the file cache now, not after the whole log (a
			// partition of thousands of segments opened them all).
			l.retireSegment(s)
		}
	}

	logRecovery()
	if l.damage != nil {
		l.swapped = swapped
		return l.openDamaged()
	}
	// No transaction index entry past its segment's end (its marker was
	// cut, or the entry is an unsynced one torn into garbage).
	for _, s := range l.segs {
		if err := l.truncateTxnLocked(s); err != nil {
			return err
		}
	}

	// A completed swap means the clean that wrote it committed: everything
	// up to the end of its last segment was cleaned (the checkpoint may not
	// say so yet).
	for i, s := range l.segs {
		if swapped[s.base] && i+1 < len(l.segs) {
			l.firstDirty = max(l.firstDirty, l.segs[i+1].base)
		}
	}

	// The log start offset: the checkpoint's, when it is inside the log.
	if len(l.segs) > 0 {
		l.logStartOffset = l.segs[0].base
	}
	if haveCkpt && ckpt.LogStartOffset > l.logStartOffset {
		l.logStartOffset = ckpt.LogStartOffset
	}
	if len(l.segs) == 0 || l.logStartOffset > l.active().next {
		// Empty, or the data below a persisted log start offset was lost:
		// start a fresh log there (Kafka's truncateFullyAndStartAt).
		for _, s := range l.segs {
			s.closeFiles()
			if err := l.removeSegmentFiles(s.base); err != nil {
				return err
			}
		}
		s, err := createSegment(l.fs, l.files, l.dir, l.logStartOffset, &l.cfg, l.opts.Now())
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		l.unsynced = nil
		l.dirDirty = true
	}
	// Segments wholly below the log start offset go.
	for len(l.segs) > 1 && l.segs[1].base <= l.logStartOffset {
		l.deleteSegmentLocked(l.segs[0])
		l.segs = l.segs[1:]
	}
	act := l.active()
	l.unsynced = slices.DeleteFunc(l.unsynced, func(s *segment) bool { return s == act })
	if err := act.reopenIndexesWritable(&l.cfg); err != nil {
		return err
	}
	if act.firstTs < 0 && act.size > 0 {
		var buf [batch.HeaderSize]byte
		if h, err := act.headerAt(0, &buf); err == nil {
			act.firstTs = h.MaxTimestamp
		}
	}
	l.writeSeq = 1 // recovery may have changed files; the first Sync syncs
	if l.recoveryPoint > l.active().base {
		l.recoveryPoint = l.active().base
	}
	if len(l.unsynced) > 0 && l.recoveryPoint > l.unsynced[0].base {
		l.recoveryPoint = l.unsynced[0].base
	}
	l.firstDirty = min(l.firstDirty, l.active().next)
	if err := l.recoverRaft(ckpt, haveCkpt, swapped); err != nil {
		return err
	}
	// From here on, a crash is an unclean shutdown.
	if err := writeCheckpoint(l.fs, l.dir, l.checkpointLocked(l.recoveryPoint, false)); err != nil {
		return err
	}
	l.durableLSO = l.logStartOffset
	return nil
}

// openDamaged finishes the recovery of a log found damaged: the segments
// up to the damaged one are kept in memory (the damaged one ending at the
// damage), the later ones are neither opened nor removed, and nothing is
// written: not the checkpoint, not the log start offset. The log serves
// the offsets below the damage and refuses writes.
func (l *Log) openDamaged() error {
	if len(l.segs) > 0 {
		// A segment loaded from its indexes ends where the next starts;
		// the damaged one ends at the damage.
		if act := l.active(); act.next > l.damage.Offset {
			act.next = l.damage.Offset
		}
	} else {
		return l.damage
	}
	l.logStartOffset = l.segs[0].base
	if ckpt, ok, err := ReadCheckpoint(l.fs, l.dir); err == nil && ok && ckpt.LogStartOffset > l.logStartOffset {
		l.logStartOffset = min(ckpt.LogStartOffset, l.active().next)
	}
	l.durableLSO = l.logStartOffset
	l.unsynced = nil
	ckpt, haveCkpt, _ := ReadCheckpoint(l.fs, l.dir)
	return l.recoverRaft(ckpt, haveCkpt, l.swapped)
}

// segmentBase returns the base of the segment holding offset (the first
// segment's base when offset is below it).
func (l *Log) segmentBase(bases []int64, offset int64) int64 {
	i, found := slices.BinarySearch(bases, offset)
	if found || i == 0 {
		return bases[min(i, len(bases)-1)]
	}
	return bases[i-1]
}

// loadTrusted fills in a segment's summary from its indexes without
// scanning it (the active one is scanned from its last index entry). It
// reports false when the indexes do not fit the log, asking for a rescan.
func (l *Log) loadTrusted(s *segment, bases []int64, i int) (bool, error) {
	last := s.offIdx.Last()
	if int64(last.Position) >= max(s.size, 1) && s.offIdx.Len() > 0 {
		return false, nil
	}
	if te := s.timeIdx.Last(); s.timeIdx.Len() > 0 {
		s.maxTs, s.offsetOfMaxTs = te.Timestamp, te.Offset
	}
	var buf [batch.HeaderSize]byte
	if i < len(bases)-1 {
		// A closed segment: its last entries must name real batches (one
		// or two header reads; index files carry no checksum).
		s.next = bases[i+1]
		if s.offIdx.Len() > 0 {
			if h, err := s.headerAt(int64(last.Position), &buf); err != nil || h.LastOffset() != last.Offset || last.Offset >= s.next {
				return false, nil
			}
		}
		if s.timeIdx.Len() > 0 {
			te := s.timeIdx.Last()
			_, h, found, err := s.find(te.Offset, &buf)
			if err != nil || !found || h.LastOffset() != te.Offset || h.MaxTimestamp != te.Timestamp {
				return false, nil
			}
		} else if s.size > 0 {
			// A sealed segment with batches always has a time index entry
			// unless none of its batches has a timestamp: check the first.
			if h, err := s.headerAt(0, &buf); err != nil || h.MaxTimestamp >= 0 {
				return false, nil
			}
		}
		// Its batches must end where the next segment starts: walk the
		// headers after the last index entry (at most about
		// index.interval.bytes of them).
		pos, end := int64(0), s.base
		if s.offIdx.Len() > 0 {
			pos = int64(last.Position)
		}
		for pos < s.size {
			h, err := s.headerAt(pos, &buf)
			if err != nil {
				return false, nil
			}
			pos, end = pos+int64(h.Size()), h.NextOffset()
		}
		// A gap is what compaction leaves, and only below the cleaner offset.
		if end > s.next || (end < s.next && s.next > l.firstDirty) {
			return false, &DamageError{File: s.path(KindLog), Position: s.size, Offset: min(end, s.next),
				Reason: fmt.Errorf("%w: it ends at offset %d but the next segment starts at %d: a segment file is missing or damaged", ErrCorrupt, end, s.next)}
		}
		s.setUnverified(s.size)
		return true, nil
	}
	// The active segment: scan from the last index entry to the end.
	if s.offIdx.Len() > 0 {
		h, err := s.headerAt(int64(last.Position), &buf)
		if err != nil || h.LastOffset() != last.Offset {
			return false, nil
		}
		s.next = h.BaseOffset
	}
	size := s.size
	s.size = int64(last.Position)
	if err := s.reopenIndexesWritable(&l.cfg); err != nil {
		return false, err
	}
	s.setUnverified(s.size)
	cut, reason, err := s.scan(int64(last.Position), &l.cfg, l.firstDirty, true, nil) // after a clean shutdown: synced
	if err != nil {
		return false, err
	}
	if cut > 0 {
		l.opts.Logger.Warn("segment: recovery truncated a corrupt tail after a clean shutdown",
			"file", s.path(KindLog), "position", s.size, "bytes", size-s.size, "reason", reason)
	}
	return true, nil
}

// recoveryGuard hands recovery's full scans a termGuard for a raft log's
// segments after an unclean shutdown, starting from the checkpoint's term
// at the recovery point (or at the raft start) and carried from one
// scanned segment to the next.
type recoveryGuard struct {
	ckpt    Checkpoint
	on      bool
	started bool
	g       termGuard
}

// at returns the guard for the segment at base (nil when none applies);
// a segment that must be whole is followed but never cut (its scan reports
// damage instead).
func (r *recoveryGuard) at(base int64, mustBeWhole bool) *termGuard {
	if !r.on || base < r.ckpt.RaftStartOffset {
		return nil
	}
	if !r.started {
		r.started = true
		r.g = termGuard{on: true, last: r.ckpt.RaftRPTerm}
		if base == r.ckpt.RaftStartOffset {
			r.g.last = r.ckpt.RaftPrevTerm
		}
	}
	if mustBeWhole {
		r.g.on = false // synced data: trusted (the guard resumes after it)
		return &r.g
	}
	r.g.on = true
	return &r.g
}

// recoverRaft gives every segment its raft positions and first index once
// the segments are recovered (see raftindex.go for the rules): the
// segments below the checkpoint's raft start are outside the raft log;
// the first raft segment's first index and previous term are the
// checkpoint's when it names that segment, else its .raftindex header's
// (retention deleted the segment the checkpoint names and crashed before
// the checkpoint moved), else 1 and 0 (a log from before raft indexes, or
// without a trusted checkpoint); each later segment's follows the one
// before. A .raftindex that does not fit is rebuilt from the .log and
// written again (synced at once for closed segments).
func (l *Log) recoverRaft(ckpt Checkpoint, haveCkpt bool, swapped map[int64]bool) error {
	l.raftLog = haveCkpt && ckpt.RaftLog
	start := 0
	if haveCkpt && ckpt.HasRaft {
		for start < len(l.segs)-1 && l.segs[start].base < ckpt.RaftStartOffset {
			start++
		}
	}
	var next, prevTerm uint64
	for i, s := range l.segs {
		hdr, rpos, ok, err := s.readRaftIndexFile(l.fs)
		if err != nil {
			return err
		}
		if swapped[s.base] {
			// A clean's replacement swapped in by recovery: the
			// .raftindex is the old segment's, whatever it looks like.
			ok = false
		}
		if !ok {
			if rpos, err = s.walkPositions(); err != nil && l.damage == nil {
				return err
			} // a damaged log serves what can be read, raft included
		}
		s.setPositions(rpos)
		if i < start {
			s.rfirst, s.rprev = 0, 0
			continue
		}
		if i == start {
			switch {
			case haveCkpt && ckpt.HasRaft && s.base == ckpt.RaftStartOffset:
				next, prevTerm = ckpt.RaftPrevIndex+1, ckpt.RaftPrevTerm
			case ok && hdr.first > 0:
				next, prevTerm = hdr.first, hdr.prevTerm
			default:
				next, prevTerm = 1, 0
			}
			l.raftPrevIndex, l.raftPrevTerm = next-1, prevTerm
		}
		s.rfirst, s.rprev = next, prevTerm
		next += s.count()
		if n := len(s.rpos); n > 0 {
			var buf [batch.HeaderSize]byte
			h, err := s.headerAt(int64(s.rpos[n-1]&raftPosMask), &buf)
			if err != nil && l.damage == nil {
				return err
			}
			prevTerm = epochTerm(h.PartitionLeaderEpoch)
		}
		if (!ok || hdr.first != s.rfirst || hdr.prevTerm != s.rprev) && s != l.active() && l.damage == nil {
			if err := s.writeRaftIndex(l.fs); err != nil {
				return err
			}
			err := s.rfile.Sync()
			s.closeRaftFile()
			if err != nil {
				return err
			}
			l.dirDirty = true
		}
	}
	l.lastTerm = prevTerm
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

func (l *Log) removeSegmentFiles(base int64) error {
	for _, k := range []FileKind{KindLog, KindOffsetIndex, KindTimeIndex, KindRaftIndex, KindTxnIndex} {
		if err := l.fs.Remove(filepath.Join(l.dir, MakeFileName(base, k))); err != nil && !isNotExist(err) {
			return err
		}
	}
	return nil
}

// batchesEnd returns the offset after the last batch of a whole .log file
// (one the cleaner wrote and synced), or 0 when it has none.
func batchesEnd(fs vfs.FS, path string) (int64, error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	var buf [batch.HeaderSize]byte
	end := int64(0)
	for pos := int64(0); pos+batch.HeaderSize <= size; {
		if _, err := f.ReadAt(buf[:], pos); err != nil {
			return 0, err
		}
		h, err := batch.ParseHeader(buf[:])
		if err != nil || h.Size() < batch.HeaderSize {
			return 0, fmt.Errorf("%w: %s at %d: %v", ErrCorrupt, path, pos, err)
		}
		pos, end = pos+int64(h.Size()), h.NextOffset()
	}
	return end, nil
}

// completeSwaps finishes or undoes a clean that a crash interrupted (see
// Log.Clean): ".cleaned" files are removed; a segment whose ".log.swap"
// file exists was committed, so its ".swap" files replace the segment's
// files, and the other old segments it spans are removed (a swap may
// replace a run of segments); ".swap" index files without their ".log.swap"
// are removed. It returns the bases of the swapped-in segments, which
// recovery rescans.
func (l *Log) completeSwaps() (map[int64]bool, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, err
	}
	committed := map[int64]bool{}
	for _, name := range names {
		if n, ok := ParseFileName(strings.TrimSuffix(name, swapSuffix)); ok && strings.HasSuffix(name, swapSuffix) && n.Kind == KindLog && !n.Deleted {
			committed[n.Base] = true
		}
	}
	// A committed swap replaces the run of old segments it spans (the
	// cleaner keeps each run's last batch), so those end by its end. A
	// segment inside its span that runs past its end is newer than the
	// swap (a stale ".swap" a failed clean could not remove): refuse
	// rather than delete it.
	ends := map[int64]int64{}
	for base := range committed {
		end, err := batchesEnd(l.fs, filepath.Join(l.dir, MakeFileName(base, KindLog)+swapSuffix))
		if err != nil {
			return nil, err
		}
		ends[base] = end
		for _, name := range names {
			n, ok := ParseFileName(name)
			if !ok || n.Deleted || n.Kind != KindLog || n.Base <= base || n.Base >= end {
				continue
			}
			path := filepath.Join(l.dir, name)
			if segEnd, err := batchesEnd(l.fs, path); err == nil && segEnd > end {
				return nil, fmt.Errorf("%w: %s runs to offset %d, past the end %d of the committed clean %s that spans it: refusing to delete it (if the segment is right, remove the stale %s files)",
					ErrCorrupt, path, segEnd, end, MakeFileName(base, KindLog)+swapSuffix, MakeFileName(base, KindLog)[:20]+".*"+swapSuffix)
			}
		}
	}
	changed := false
	// Index files first, the .log last: the .log.swap is the commit mark.
	for _, kind := range []FileKind{KindOffsetIndex, KindTimeIndex, KindTxnIndex, KindLog} {
		for _, name := range names {
			path := filepath.Join(l.dir, name)
			switch {
			case strings.HasSuffix(name, cleanedSuffix):
				if kind == KindLog {
					changed = true
					if err := l.fs.Remove(path); err != nil {
						return nil, err
					}
				}
			case strings.HasSuffix(name, swapSuffix):
				n, ok := ParseFileName(strings.TrimSuffix(name, swapSuffix))
				if !ok || n.Deleted || n.Kind != kind {
					continue
				}
				changed = true
				if !committed[n.Base] {
					err = l.fs.Remove(path)
				} else {
					err = l.fs.Rename(path, filepath.Join(l.dir, MakeFileName(n.Base, kind)))
				}
				if err != nil {
					return nil, err
				}
			}
		}
	}
	// A committed swap replaces the run of old segments it spans (the
	// cleaner keeps each run's last batch): remove the others of the run.
	for base, end := range ends {
		for _, name := range names {
			if n, ok := ParseFileName(name); ok && !n.Deleted && n.Base > base && n.Base < end {
				if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil && !isNotExist(err) {
					return nil, err
				}
			}
		}
	}
	if changed {
		if len(committed) > 0 {
			l.opts.Logger.Warn("segment: recovery completed an interrupted clean", "dir", l.dir, "segments", len(committed))
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, err
		}
	}
	return committed, nil
}
