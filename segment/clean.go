package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// ErrCleanAborted is returned by Clean when the log changed under it (a
// truncation, retention deleting a segment being cleaned, or Close): the
// cleaned files are discarded and nothing changes; a later Clean retries.
var ErrCleanAborted = errors.New("segment: clean aborted: the log changed")

// CleanStats describes one Clean.
type CleanStats struct {
	// FirstDirty and End bound the dirty section the offset map covered:
	// [FirstDirty, End). End is the new cleaner offset. Both are 0 when
	// nothing was cleanable.
	FirstDirty, End int64
	Segments        int   // segments written (a run of merged segments counts once; unchanged lone ones are not rewritten)
	BytesRead       int64 // bytes of the segments examined
	BytesWritten    int64 // bytes of the rewritten segments
	RecordsRemoved  int64 // records dropped (superseded keys, expired tombstones, aborted transactions, removed markers)
	BatchesRemoved  int64 // batches left with no record and dropped (removed markers included)
	MarkersRemoved  int64 // transaction markers dropped past their delete horizon
}

// cleanable is the part of a log a clean may touch, computed under l.mu.
type cleanable struct {
	segs       []*segment // from the one holding the log start offset to the last cleanable one
	sizes      []int64    // their sizes
	idxLens    [][2]int   // their offset and time index entry counts
	nexts      []int64    // the base offset of the segment after each
	firstDirty int64      // the cleaner offset, clamped into the range
	end        int64      // base offset of the first segment not cleanable
	cleanBytes int64      // bytes of segments below firstDirty
	dirtyBytes int64      // bytes of segments from the one holding firstDirty to end
	forced     bool       // max.compaction.lag.ms or a passed tombstone horizon
}

// cleanableLocked returns what a clean may touch now: closed segments that
// end at or below upperBound and the recovery point rp (synced data only),
// stopping before the first dirty segment whose largest timestamp is less
// than min.compaction.lag.ms old (Kafka's LogCleanerManager.cleanableOffsets).
func (l *Log) cleanableLocked(upperBound, rp int64, now time.Time) cleanable {
	c := cleanable{firstDirty: l.firstDirty}
	nowMs := now.UnixMilli()
	start := l.segmentIndex(l.logStartOffset)
	k := start
	for ; k < len(l.segs)-1; k++ {
		s, end := l.segs[k], l.segs[k+1].base
		if end > upperBound || end > rp || !l.raftRemovableLocked(s) {
			// Never past the raft retain bound: a clean changes batch
			// counts, so cleaned segments leave the raft log.
			break
		}
		if l.cfg.MinCompactionLagMs > 0 && end > l.firstDirty && nowMs-segmentLargestTs(s) < l.cfg.MinCompactionLagMs {
			break
		}
	}
	c.segs = slices.Clone(l.segs[start:k]) // l.segs changes in place (swapIn)
	if len(c.segs) == 0 {
		return cleanable{}
	}
	c.end = l.segs[k].base
	c.firstDirty = min(max(c.firstDirty, l.logStartOffset), c.end)
	var firstDirtySeg *segment
	for i, s := range c.segs {
		c.sizes = append(c.sizes, s.size)
		c.idxLens = append(c.idxLens, [2]int{s.offIdx.Len(), s.timeIdx.Len()})
		c.nexts = append(c.nexts, l.segs[start+i+1].base)
		if l.segs[start+i+1].base <= c.firstDirty {
			c.cleanBytes += s.size
			continue
		}
		c.dirtyBytes += s.size
		if firstDirtySeg == nil {
			firstDirtySeg = s
		}
	}
	if firstDirtySeg != nil && l.cfg.MaxCompactionLagMs < nowMs {
		// Kafka: the first dirty segment's first batch timestamp.
		ts := firstDirtySeg.firstTs
		if ts < 0 {
			var buf [batch.HeaderSize]byte
			if h, err := firstDirtySeg.headerAt(0, &buf); err == nil {
				ts = h.MaxTimestamp
			}
		}
		c.forced = ts >= 0 && nowMs-ts > l.cfg.MaxCompactionLagMs
	}
	if l.tombstoneHorizon >= 0 && nowMs >= l.tombstoneHorizon {
		c.forced = true
	}
	return c
}

// segmentLargestTs is the segment's largest timestamp, or its last
// modification time when it has none (Kafka's LogSegment.largestTimestamp).
func segmentLargestTs(s *segment) int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	return s.lastModified.UnixMilli()
}

// ratio is the dirty ratio: dirty bytes over cleanable bytes.
func (c *cleanable) ratio() float64 {
	if c.dirtyBytes == 0 {
		return 0
	}
	return float64(c.dirtyBytes) / float64(c.cleanBytes+c.dirtyBytes)
}

// CleanableRatio returns the log's dirty ratio below upperBound (the high
// watermark) as Clean would see it: dirty bytes / (clean + dirty bytes) of
// the cleanable segments, and whether the log needs cleaning now: its
// cleanup.policy includes compact and the ratio reaches
// min.cleanable.dirty.ratio, or max.compaction.lag.ms has passed for its
// oldest dirty segment, or a delete horizon (a tombstone's, a marker's)
// written by an earlier clean has passed.
func (l *Log) CleanableRatio(upperBound int64) (ratio float64, needed bool) {
	l.ckptMu.Lock()
	rp := l.recoveryPoint
	l.ckptMu.Unlock()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.cfg.Compacts() || l.closed || l.failed != nil {
		return 0, false
	}
	c := l.cleanableLocked(upperBound, rp, l.opts.Now())
	r := c.ratio()
	return r, len(c.segs) > 0 && ((c.dirtyBytes > 0 && r >= l.cfg.MinCleanableDirtyRatio) || c.forced)
}

// Clean compacts the log (Kafka's log cleaner, one pass): in the closed,
// synced segments below upperBound (the caller's high watermark) and
// outside min.compaction.lag.ms, only the latest record of each key is
// kept. The latest offset of each key is taken from the dirty section,
// from the cleaner offset to the end of the cleanable range; then every
// cleanable segment from the log start offset on is rewritten without the
// records whose key has a later offset. Offsets do not change (gaps
// appear). Records without a key are kept. Tombstones (null values) follow
// KIP-534: a batch that keeps one gets the delete horizon now +
// delete.retention.ms (attribute bit 6, in baseTimestamp) the first time it
// is cleaned, and a later clean after the horizon drops them. Records of
// aborted transactions go and never supersede others (buildMaps). A
// transaction marker stays while the clean reads a data batch of its
// transaction; after that it gets a delete horizon as tombstones do, and a
// clean past the horizon drops it (cleanFilter.marker). A producer's last
// batch and last data batch are kept, as empty headers when all their
// records go, so producer state rebuilt from headers stays right, and so
// is the last batch of each run of adjacent segments cleaned into one
// (groupSegments). Unchanged lone segments are left alone. The new
// cleaner offset is persisted.
//
// Clean does not look at the dirty ratio (see CleanableRatio) nor at
// cleanup.policy: the caller decides. Reads and appends continue during a
// clean; the segment list changes at once under the log's lock, so a Read
// sees all old or all new segments, and replaced files stay readable for
// file.delete.delay.ms.
//
// Crash safety: each run's replacement is written as ".cleaned" files and
// synced; all are then renamed ".swap" (indexes first, the .log last) and
// the folder synced: that is the commit point, after which recovery
// completes the swap. The cleaner offset is persisted, then the old files
// are renamed ".deleted" and the ".swap" files to the segments' names.
func (l *Log) Clean(upperBound int64) (CleanStats, error) {
	var st CleanStats
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.ckptMu.Lock()
	rp := l.recoveryPoint
	l.ckptMu.Unlock()
	now := l.opts.Now()
	l.mu.RLock()
	if err := l.writableLocked(); err != nil {
		l.mu.RUnlock()
		return st, err
	}
	c := l.cleanableLocked(upperBound, rp, now)
	cfg, epoch := l.cfg, l.truncEpoch
	var tail []*segment // the segments after the cleanable ones
	var tailSizes []int64
	if len(c.segs) > 0 {
		tail = slices.Clone(l.segs[slices.Index(l.segs, c.segs[len(c.segs)-1])+1:])
		for _, s := range tail {
			tailSizes = append(tailSizes, s.size)
		}
	}
	l.mu.RUnlock()
	if len(c.segs) == 0 {
		return st, nil
	}
	st.FirstDirty, st.End = c.firstDirty, c.end

	aborted, err := abortedBatches(append(slices.Clone(c.segs), tail...), append(slices.Clone(c.sizes), tailSizes...))
	if err != nil {
		return st, l.cleanReadError(err, epoch, c.segs, tail)
	}
	offsets, lastOfProducer, lastOfSeg, mapped, err := l.buildMaps(c, tail, tailSizes, aborted)
	if err != nil {
		return st, l.cleanReadError(err, epoch, c.segs, tail)
	}
	if mapped < len(c.segs) {
		// The offset map is full: clean up to the last segment mapped; the
		// cleaner offset advances that far only.
		c.segs, c.sizes, c.idxLens, c.nexts = c.segs[:mapped], c.sizes[:mapped], c.idxLens[:mapped], c.nexts[:mapped]
		c.end, lastOfSeg = c.nexts[mapped-1], lastOfSeg[:mapped]
		st.End = c.end
	}
	groups := groupSegments(&c, &cfg)
	f := cleanFilter{offsets: offsets, lastOfProducer: lastOfProducer, aborted: aborted, groupEnds: map[int64]bool{}, txnSeen: map[int64]bool{}, nowMs: now.UnixMilli(), horizon: now.UnixMilli() + cfg.DeleteRetentionMs, earliest: -1}
	for _, g := range groups {
		// Each group's last batch stays (see cleanFilter.batch).
		for i := g[1] - 1; i >= g[0]; i-- {
			if lastOfSeg[i] >= 0 {
				f.groupEnds[lastOfSeg[i]] = true
				break
			}
		}
	}

	// Rewrite, in offset order; unchanged segments are left alone.
	var done []*cleanedSegment
	abort := func(err error) (CleanStats, error) {
		for _, d := range done {
			d.discard(l.fs)
		}
		return st, err
	}
	for _, g := range groups {
		for i := g[0]; i < g[1]; i++ {
			st.BytesRead += c.sizes[i]
		}
		cs, err := l.cleanSegments(c.segs[g[0]:g[1]], c.sizes[g[0]:g[1]], &cfg, &f, now)
		if err != nil {
			return abort(l.cleanReadError(err, epoch, c.segs, tail))
		}
		if cs == nil {
			continue
		}
		done = append(done, cs)
		st.BytesWritten += cs.seg.size
	}
	st.Segments = len(done)
	st.RecordsRemoved, st.BatchesRemoved, st.MarkersRemoved = f.recordsRemoved, f.batchesRemoved, f.markersRemoved

	if len(done) == 0 {
		// Already clean: only the cleaner offset moves on.
		return st, l.advanceCleanerOffset(c.end, f.earliest, epoch)
	}
	return st, l.swapIn(done, c.end, f.earliest, epoch, abort)
}

// cleanReadError returns ErrCleanAborted in place of err when the log
// changed under the clean in a way that explains a failed read or rebuild
// (a file closed, an EOF, a batch past a shrunk file): it was truncated,
// closed or failed since the snapshot (epoch), or a segment the clean reads
// (segs, tail) was deleted. Otherwise err stands: the files are damaged.
func (l *Log) cleanReadError(err error, epoch uint64, segs, tail []*segment) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.truncEpoch != epoch || l.closed || l.failed != nil {
		return fmt.Errorf("%w (%v)", ErrCleanAborted, err)
	}
	for _, s := range append(slices.Clone(segs), tail...) {
		if s.deleted.Load() {
			return fmt.Errorf("%w (%v)", ErrCleanAborted, err)
		}
	}
	return err
}

// runIndexLocked returns the index in l.segs of the run olds, or -1 when
// they are no longer all there, in a row.
func (l *Log) runIndexLocked(olds []*segment) int {
	i := slices.Index(l.segs, olds[0])
	if i < 0 || i+len(olds) > len(l.segs) {
		return -1
	}
	for j, s := range olds {
		if l.segs[i+j] != s {
			return -1
		}
	}
	return i
}

// advanceCleanerOffset records and persists a clean that changed no
// segment, unless the log was truncated, closed or failed meanwhile.
func (l *Log) advanceCleanerOffset(end, horizon int64, epoch uint64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	if l.truncEpoch != epoch || l.closed || l.failed != nil {
		l.mu.Unlock()
		return ErrCleanAborted
	}
	l.firstDirty = max(l.firstDirty, end)
	l.tombstoneHorizon = horizon
	l.mu.Unlock()
	return l.writeCheckpointLocked(l.recoveryPoint, false)
}

// swapIn commits and swaps in the replacements (see Clean), unless the log
// was truncated, closed or failed since the clean took its snapshot
// (epoch), or retention deleted a replaced segment. It holds syncMu
// throughout, so no truncation (which holds it too) runs between the
// commit and the swap.
//
// The commit (renames to ".swap" and the folder sync) runs outside mu:
// those files are the clean's own (cleanMu keeps out other cleans, and no
// reader or writer knows them), so reads and appends go on meanwhile.
// Retention may delete a replaced segment in that window, as it may before
// the swap below; the swap then discards that run. Only the swap itself,
// renames and the segment list, runs under mu.
func (l *Log) swapIn(done []*cleanedSegment, end, horizon int64, epoch uint64, abort func(error) (CleanStats, error)) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	changed := l.truncEpoch != epoch || l.closed || l.failed != nil
	for _, d := range done {
		changed = changed || l.runIndexLocked(d.olds) < 0
	}
	l.mu.RUnlock()
	if changed {
		_, err := abort(ErrCleanAborted)
		return err
	}
	for _, d := range done {
		rpos, err := d.seg.walkPositions()
		if err != nil {
			_, aerr := abort(err)
			return aerr
		}
		d.seg.setPositions(rpos)
	}
	// The segments below end leave the raft log before any is replaced
	// (their batch counts change): FirstIndex moves to the first segment
	// at or after end, durably, so recovery never numbers a cleaned
	// segment's batches.
	l.mu.Lock()
	for _, s := range l.segs {
		if s.base < end && s != l.active() {
			s.rfirst, s.rprev = 0, 0
		}
	}
	raftMoved := l.raftStartMovedLocked()
	l.mu.Unlock()
	if raftMoved {
		if err := l.writeCheckpointLocked(l.recoveryPoint, false); err != nil {
			_, aerr := abort(err)
			return aerr
		}
	}
	// Commit: every replacement becomes ".swap", the .log last, in
	// offset order; then the folder is synced.
	for _, d := range done {
		if err := d.rename(l.fs, cleanedSuffix, swapSuffix); err != nil {
			// Undo: a committed ".swap" left behind would be completed by
			// recovery, however the log changes meanwhile.
			var errs []error
			for _, d := range done {
				if derr := d.discard(l.fs); derr != nil && d.suffix == swapSuffix {
					errs = append(errs, derr)
				}
			}
			if len(errs) > 0 {
				err = l.fail("clean: discard a committed swap", errors.Join(append(errs, err)...))
			}
			return err
		}
		d.suffix = swapSuffix
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		// Recovery may or may not complete the swap: either is a valid
		// log, but the state of the files is unknown.
		closeCleaned(done)
		return l.fail("clean", err)
	}
	l.mu.Lock()
	l.firstDirty = max(l.firstDirty, end)
	l.tombstoneHorizon = horizon
	l.mu.Unlock()
	// The cleaner offset is durable before the swapped segments, with
	// their gaps, carry their plain names (recovery accepts gaps in a
	// trusted segment only below it).
	if err := l.writeCheckpointLocked(l.recoveryPoint, false); err != nil {
		closeCleaned(done) // the log failed; recovery completes the swap
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, d := range done {
		i := l.runIndexLocked(d.olds)
		if i < 0 {
			// Retention deleted some of it meanwhile: recovery would
			// complete this swap, which only brings back segments below
			// the log start offset, but must not see it once later
			// cleans have changed the segments after it.
			if err := d.discard(l.fs); err != nil {
				closeCleaned(done[k+1:])
				return l.failLocked("clean: discard a committed swap", err)
			}
			continue
		}
		for _, old := range d.olds {
			l.deleteSegmentLocked(old)
		}
		if err := d.rename(l.fs, swapSuffix, ""); err != nil {
			closeCleaned(done[k:]) // not swapped in
			return l.failLocked("clean swap", err)
		}
		d.suffix = ""
		d.seg.log.setPath(d.seg.path(KindLog))
		d.seg.retire() // synced by cleanSegments
		last := d.olds[len(d.olds)-1]
		d.seg.next = last.next
		d.seg.created, d.seg.lastModified = d.olds[0].created, last.lastModified
		l.writeSeq++
		d.seg.modSeq = l.writeSeq
		l.segs = slices.Replace(l.segs, i, i+len(d.olds), d.seg)
		l.cleans++
	}
	// The next Sync makes the plain names durable; until then recovery
	// completes the swap from the ".swap" files.
	l.dirDirty = true
	return nil
}

// closeCleaned closes the files of replacements that were not swapped in,
// leaving the files themselves for recovery.
func closeCleaned(done []*cleanedSegment) {
	for _, d := range done {
		d.seg.closeFiles()
	}
}

// groupSegments splits the cleanable segments into runs that are cleaned
// into one segment each, named by the run's first base offset (Kafka's
// groupSegmentsBySize): a run's segments together fit segment.bytes, the
// index capacities and a relative offset of 2^31-1. It returns [from, to)
// index pairs into c.segs.
func groupSegments(c *cleanable, cfg *Config) [][2]int {
	offCap, timeCap := indexCaps(cfg)
	var groups [][2]int
	for i := 0; i < len(c.segs); {
		j, size, offs, times := i+1, c.sizes[i], c.idxLens[i][0], c.idxLens[i][1]
		for ; j < len(c.segs); j++ {
			size, offs, times = size+c.sizes[j], offs+c.idxLens[j][0], times+c.idxLens[j][1]
			if size > cfg.SegmentBytes || size > math.MaxInt32 || offs > offCap || times >= timeCap ||
				c.nexts[j]-1-c.segs[i].base > math.MaxInt32 {
				break
			}
		}
		groups = append(groups, [2]int{i, j})
		i = j
	}
	return groups
}

// Kafka's default log.cleaner.dedupe.buffer.size, and the bytes an offset
// map entry costs beyond its key's (string header, offset, map overhead).
const (
	DefaultCleanerDedupeBufferBytes = 128 << 20
	OffsetMapEntryOverhead          = 48
)

// buildMaps reads the dirty section [c.firstDirty, c.end) for the latest
// offset of each key, and every batch header from the cleanable segments
// to the end of the log (as of the sizes taken under the lock) for each
// producer's last batch and last data batch, and the last offset of each
// cleanable segment's last batch (-1 when empty). Below those sizes the files do not change,
// but for a truncation or deletion, which Clean detects before the swap.
//
// The offset map holds whole dirty segments within
// Options.CleanerDedupeBufferBytes (at least one): mapped is the number of
// c.segs it covers (len(c.segs) unless the bound stopped it), and the
// clean must not go past them.
//
// The batches of aborted transactions (aborted, from abortedBatches) add
// no key: their records are never read by a read_committed consumer and
// must not make a committed record older (Kafka's LogCleaner skips them
// when it builds the offset map).
func (l *Log) buildMaps(c cleanable, tail []*segment, tailSizes []int64, aborted map[int64]bool) (offsets map[string]int64, lastOf map[int64]producerLast, lastOfSeg []int64, mapped int, err error) {
	offsets, lastOf = map[string]int64{}, map[int64]producerLast{}
	for range c.segs {
		lastOfSeg = append(lastOfSeg, -1)
	}
	mapped = len(c.segs)
	var used int64
	dirtyMapped := 0
	segs, sizes := append(slices.Clone(c.segs), tail...), append(slices.Clone(c.sizes), tailSizes...)
	for i, s := range segs {
		mapKeys := i < mapped && c.nexts[i] > c.firstDirty
		var segKeys map[string]int64
		if mapKeys {
			segKeys = map[string]int64{}
		}
		err = eachBatch(s, sizes[i], mapKeys, func(h *batch.Header, b []byte) error {
			if h.ProducerID >= 0 {
				pl, ok := lastOf[h.ProducerID]
				if !ok {
					pl.data = -1
				}
				pl.batch = h.LastOffset()
				if !h.Control() {
					pl.data = h.LastOffset()
				}
				lastOf[h.ProducerID] = pl
			}
			if i < len(c.segs) {
				lastOfSeg[i] = h.LastOffset()
			}
			if b == nil || h.LastOffset() < c.firstDirty || h.Control() || aborted[h.BaseOffset] {
				return nil
			}
			_, err := batch.Iterate(b, func(r *batch.Record) error {
				if r.Key != nil && r.Offset >= c.firstDirty {
					segKeys[string(r.Key)] = r.Offset
				}
				return nil
			})
			return err
		})
		if err != nil {
			return nil, nil, nil, 0, err
		}
		if !mapKeys {
			continue
		}
		var add int64
		for k := range segKeys {
			if _, ok := offsets[k]; !ok {
				add += int64(len(k)) + OffsetMapEntryOverhead
			}
		}
		if dirtyMapped > 0 && used+add > l.opts.CleanerDedupeBufferBytes {
			mapped = i // this segment and the later ones wait for the next clean
			continue
		}
		for k, o := range segKeys {
			offsets[k] = o
		}
		used += add
		dirtyMapped++
	}
	return offsets, lastOf, lastOfSeg, mapped, nil
}

// abortedBatches returns the base offsets of the transactional data
// batches of segs (with their sizes, in log order) whose transaction an
// abort marker ends within segs (Kafka's LogCleaner and
// CleanedTransactionMetadata: a transaction's batches are aborted once its
// producer's next marker is an abort). A transaction whose marker is not
// in segs is not listed: the clean's upper bound (the last stable offset)
// keeps undecided transactions out of the cleaned section.
func abortedBatches(segs []*segment, sizes []int64) (map[int64]bool, error) {
	aborted := map[int64]bool{}
	pending := map[int64][]int64{} // producer id -> its open transaction's batches
	for i, s := range segs {
		err := eachBatch(s, sizes[i], false, func(h *batch.Header, b []byte) error {
			switch {
			case h.ProducerID < 0 || !h.Transactional() || h.Internal():
			case !h.Control():
				pending[h.ProducerID] = append(pending[h.ProducerID], h.BaseOffset)
			default:
				if markerIsAbort(b) {
					for _, o := range pending[h.ProducerID] {
						aborted[o] = true
					}
				}
				delete(pending, h.ProducerID)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return aborted, nil
}

// Transaction marker types (Kafka's ControlRecordType): a control
// record's key is version int16 + type int16.
const (
	markerAbort   = 0
	markerCommit  = 1
	markerUnknown = -1
)

// markerType returns the type of control batch b's first record,
// markerUnknown when it has none or its key is too short.
func markerType(b []byte) int {
	_, recs, err := batch.Records(b)
	if err != nil || len(recs) == 0 || len(recs[0].Key) < 4 {
		return markerUnknown
	}
	return int(binary.BigEndian.Uint16(recs[0].Key[2:]))
}

// markerIsAbort reports whether control batch b is a transaction marker
// of type abort: its record's key is version int16 + type int16, type 0
// abort (Kafka's ControlRecordType.ABORT).
func markerIsAbort(b []byte) bool { return markerType(b) == markerAbort }

// eachBatch calls fn for each batch in the first size bytes of s, with the
// batch's bytes when whole is set or the batch is a control batch other
// than an internal one (a transaction marker; nil otherwise). It reads s.log only, not
// the segment's summary, so it may run without the log's lock.
func eachBatch(s *segment, size int64, whole bool, fn func(h *batch.Header, b []byte) error) error {
	fh, err := s.log.acquire() // one reference for the whole pass
	if err != nil {
		return fmt.Errorf("segment: clean %s: %w", s.path(KindLog), err)
	}
	defer fh.release()
	var buf [batch.HeaderSize]byte
	for pos := int64(0); pos < size; {
		if pos+batch.HeaderSize > size {
			return fmt.Errorf("segment: clean %s: %w: header at %d past %d", s.path(KindLog), ErrCorrupt, pos, size)
		}
		if _, err := fh.f.ReadAt(buf[:], pos); err != nil {
			return fmt.Errorf("segment: clean %s: %w", s.path(KindLog), err)
		}
		h, err := batch.ParseHeader(buf[:])
		if err == nil && (h.Size() < batch.HeaderSize || pos+int64(h.Size()) > size) {
			err = fmt.Errorf("%w: batch at %d of %d bytes past %d", ErrCorrupt, pos, h.Size(), size)
		}
		if err != nil {
			return fmt.Errorf("segment: clean %s: %w", s.path(KindLog), err)
		}
		var b []byte
		if whole || (h.Control() && !h.Internal()) {
			b = make([]byte, h.Size())
			if _, err := fh.f.ReadAt(b, pos); err != nil {
				return fmt.Errorf("segment: read batch %s at %d: %w", s.path(KindLog), pos, err)
			}
		}
		if err := fn(&h, b); err != nil {
			return fmt.Errorf("segment: clean %s at offset %d: %w", s.path(KindLog), h.BaseOffset, err)
		}
		pos += int64(h.Size())
	}
	return nil
}

// producerLast locates a producer's newest batches in the log: the last
// offset of its last batch (data or marker) and of its last data batch
// (-1 when it has none).
type producerLast struct{ batch, data int64 }

// cleanFilter decides which records a clean keeps. It sees every batch of
// the cleaned segments once, in offset order (Clean's groups in order),
// so it follows the transactions as it goes (Kafka's
// CleanedTransactionMetadata).
type cleanFilter struct {
	offsets        map[string]int64       // latest offset of each key in the dirty section
	lastOfProducer map[int64]producerLast // each producer's last batch and last data batch
	aborted        map[int64]bool         // base offsets of aborted transactions' batches (abortedBatches)
	groupEnds      map[int64]bool         // last offsets of each group's last batch
	txnSeen        map[int64]bool         // producers with a data batch of their current transaction read by this clean
	nowMs, horizon int64                  // the clock, and the horizon new tombstones and markers get
	earliest       int64                  // earliest delete horizon kept, -1 for none
	recordsRemoved int64
	batchesRemoved int64
	markersRemoved int64
}

// keep notes a delete horizon kept in the cleaned log.
func (f *cleanFilter) keep(horizon int64) {
	if f.earliest < 0 || horizon < f.earliest {
		f.earliest = horizon
	}
}

// batch returns the replacement of batch b (header h): b itself when
// nothing changes, nil when the batch goes.
func (f *cleanFilter) batch(b []byte, h batch.Header) ([]byte, error) {
	// A producer's last batch and last data batch stay, if only as an
	// empty header, for producer state (its epoch; its last sequence);
	// so does the last batch of each group of segments cleaned into one:
	// a read in the gap before an empty active segment still finds a
	// batch and moves on to the log end offset, and recovery knows which
	// old segments a ".swap" file replaces (those it spans).
	pl, isProducer := f.lastOfProducer[h.ProducerID]
	isProducer = isProducer && h.ProducerID >= 0
	retainEmpty := (isProducer && (pl.batch == h.LastOffset() || pl.data == h.LastOffset())) || f.groupEnds[h.LastOffset()]
	if h.Control() && !h.Internal() && h.ProducerID >= 0 {
		return f.marker(b, h, retainEmpty, isProducer && pl.batch == h.LastOffset())
	}
	if h.Transactional() && !h.Control() && h.ProducerID >= 0 {
		// Read, even if it goes now: its marker stays this time.
		f.txnSeen[h.ProducerID] = true
	}
	if h.Control() || (h.NumRecords == 0 && retainEmpty) {
		return b, nil
	}
	if h.NumRecords == 0 {
		f.batchesRemoved++ // an empty header no longer needed
		return nil, nil
	}
	if f.aborted[h.BaseOffset] {
		// An aborted transaction's records go (Kafka's LogCleaner
		// discards them); the producer's last batch stays as an empty
		// header.
		f.recordsRemoved += int64(h.NumRecords)
		if !retainEmpty {
			f.batchesRemoved++
			return nil, nil
		}
		out, err := batch.Rebuild(h, nil, -1)
		if err != nil {
			return nil, err
		}
		batch.SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
		return out, nil
	}
	_, recs, err := batch.Records(b)
	if err != nil {
		return nil, err
	}
	horizonPassed := h.HasDeleteHorizon() && h.BaseTimestamp <= f.nowMs
	kept := recs[:0]
	tombstones := false
	for _, r := range recs {
		if r.Key != nil {
			if latest, ok := f.offsets[string(r.Key)]; ok && latest > r.Offset {
				continue
			}
			if r.Value == nil {
				if horizonPassed {
					continue
				}
				tombstones = true
			}
		}
		kept = append(kept, r)
	}
	removed := len(recs) - len(kept)
	f.recordsRemoved += int64(removed)
	horizon := int64(-1)
	if tombstones {
		horizon = f.horizon
		if h.HasDeleteHorizon() {
			horizon = h.BaseTimestamp
		}
		f.keep(horizon)
	}
	if removed == 0 && (horizon >= 0) == h.HasDeleteHorizon() {
		return b, nil
	}
	if len(kept) == 0 && !retainEmpty {
		f.batchesRemoved++
		return nil, nil
	}
	out, err := batch.Rebuild(h, kept, horizon)
	if err != nil {
		return nil, err
	}
	batch.SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
	return out, nil
}

// marker returns the replacement of transaction marker b (header h), as
// batch does, by Kafka's rules for control batches (LogCleaner's
// checkBatchRetention, CleanedTransactionMetadata.onControlBatchRead,
// KIP-534's delete horizon in MemoryRecords.filterTo):
//
//   - A marker stays whole while this clean read a data batch of its
//     transaction (one of the producer's since its previous marker), even
//     one it drops now: a consumer may still meet those records before the
//     marker that decides them, and producer state rebuilt from the log
//     needs the marker to end the transaction.
//   - Otherwise it is removable: the first clean that finds it so rebuilds
//     it with the delete horizon now + delete.retention.ms (attribute bit
//     6, as tombstones), so a consumer that read the transaction's records
//     before they went still sees it; a clean after the horizon drops it.
//   - A marker that is its producer's last batch (last) stays whole
//     (Kafka keeps it for the producer's epoch; Sluice keeps its record
//     too, since producer state is rebuilt from the marker's record: its
//     coordinator epoch). The last batch of a group (retainEmpty) stays
//     as an empty control header once past its horizon.
//   - An empty control batch (a marker emptied by an earlier clean) is
//     removable at once; a marker of an unknown type stays.
func (f *cleanFilter) marker(b []byte, h batch.Header, retainEmpty, last bool) ([]byte, error) {
	removable := true
	if h.NumRecords > 0 {
		switch markerType(b) {
		case markerAbort, markerCommit:
			removable = !f.txnSeen[h.ProducerID]
			delete(f.txnSeen, h.ProducerID)
		default:
			removable = false
		}
	}
	switch {
	case !removable || last:
		if h.HasDeleteHorizon() && h.BaseTimestamp > f.nowMs {
			f.keep(h.BaseTimestamp)
		}
		return b, nil
	case h.NumRecords == 0 && retainEmpty:
		return b, nil
	case h.NumRecords == 0:
		f.batchesRemoved++
		return nil, nil
	case h.HasDeleteHorizon() && h.BaseTimestamp > f.nowMs:
		f.keep(h.BaseTimestamp) // the horizon is set and not yet passed
		return b, nil
	case !h.HasDeleteHorizon():
		_, recs, err := batch.Records(b)
		if err != nil {
			return nil, err
		}
		f.keep(f.horizon)
		out, err := batch.Rebuild(h, recs, f.horizon)
		if err != nil {
			return nil, err
		}
		batch.SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
		return out, nil
	}
	// Past the horizon: the marker goes.
	f.recordsRemoved += int64(h.NumRecords)
	f.markersRemoved++
	if !retainEmpty {
		f.batchesRemoved++
		return nil, nil
	}
	out, err := batch.Rebuild(h, nil, -1)
	if err != nil {
		return nil, err
	}
	batch.SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
	return out, nil
}

// cleanedSegment is the replacement of a run of segments being written or
// swapped in.
type cleanedSegment struct {
	olds   []*segment // the segments it replaces, in order
	seg    *segment
	suffix string // the files' current suffix: cleanedSuffix or swapSuffix
}

// cleanSegments writes the replacement of the run segs (with their sizes)
// as ".cleaned" files named by the first one's base offset, synced, or
// returns nil when cleaning would not change a lone segment.
func (l *Log) cleanSegments(segs []*segment, sizes []int64, cfg *Config, f *cleanFilter, now time.Time) (*cleanedSegment, error) {
	cs := &cleanedSegment{olds: segs, suffix: cleanedSuffix}
	ns, err := createSegmentFiles(l.fs, l.files, l.dir, segs[0].base, cfg, now, cleanedSuffix)
	if err != nil {
		return nil, err
	}
	cs.seg = ns
	changed := len(segs) > 1
	txns, hasTxn := l.runAbortedTxns(segs)
	kept := map[int64]bool{} // the control batches written, by offset
	for i, s := range segs {
		err = eachBatch(s, sizes[i], true, func(h *batch.Header, b []byte) error {
			out, err := f.batch(b, *h)
			if err != nil {
				return err
			}
			if out == nil || &out[0] != &b[0] {
				changed = true
			}
			if out == nil {
				return nil
			}
			nh, err := batch.ParseHeader(out)
			if err != nil {
				return err
			}
			if _, err := ns.log.WriteAt(out, ns.size); err != nil {
				return err
			}
			if nh.Control() {
				kept[nh.BaseOffset] = true
			}
			p := ns.size
			ns.size += int64(len(out))
			return ns.track(&nh, p, cfg)
		})
		if err != nil {
			cs.discard(l.fs)
			return nil, err
		}
	}
	if !changed {
		cs.discard(l.fs)
		return nil, nil
	}
	if err := ns.carryAbortedTxns(l.fs, txns, hasTxn, kept, cleanedSuffix); err != nil {
		cs.discard(l.fs)
		return nil, err
	}
	if err := errors.Join(ns.seal(), ns.syncAll()); err != nil {
		cs.discard(l.fs)
		return nil, err
	}
	return cs, nil
}

// rename renames the replacement's files from suffix from to suffix to,
// the index files first and the .log last (the .log.swap is the commit
// mark recovery looks for).
func (c *cleanedSegment) rename(fs vfs.FS, from, to string) error {
	for _, k := range []FileKind{KindOffsetIndex, KindTimeIndex, KindTxnIndex, KindLog} {
		if k == KindTxnIndex && c.seg.txn == nil {
			continue
		}
		p := c.seg.path(k)
		if err := fs.Rename(p+from, p+to); err != nil {
			return err
		}
	}
	return nil
}

// discard closes and removes the replacement's files under either suffix,
// the .log first (a ".log.swap" is the commit mark). It returns the first
// removal error other than a missing file: harmless for ".cleaned" and
// uncommitted ".swap" files (recovery removes them), but a committed swap
// left behind would be completed by recovery.
func (c *cleanedSegment) discard(fs vfs.FS) error {
	c.seg.closeFiles()
	var first error
	for _, k := range []FileKind{KindLog, KindOffsetIndex, KindTimeIndex, KindTxnIndex} {
		for _, suffix := range []string{cleanedSuffix, swapSuffix} {
			if err := fs.Remove(filepath.Join(c.seg.dir, MakeFileName(c.seg.base, k)) + suffix); err != nil && !isNotExist(err) && first == nil {
				first = err
			}
		}
	}
	return first
}
