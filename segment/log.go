package segment

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Errors returned by Log methods. Corrupt input batches return errors
// wrapping ErrCorrupt (the same value as batch.ErrCorrupt).
var (
	ErrCorrupt          = batch.ErrCorrupt
	ErrClosed           = errors.New("segment: log closed")
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrFailed marks a log that hit a write, truncate or sync error: the
	// state of its files is unknown, so it refuses further writes until it
	// is reopened (recovery then finds what is really on disk).
	ErrFailed = errors.New("segment: log failed after an IO error")
)

// OutOfRangeError is returned for an offset outside [LogStartOffset,
// LogEndOffset]; it wraps ErrOffsetOutOfRange and carries the bounds a
// Kafka OFFSET_OUT_OF_RANGE answer needs.
type OutOfRangeError struct {
	Offset, LogStartOffset, LogEndOffset int64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("segment: offset %d out of range [%d, %d]", e.Offset, e.LogStartOffset, e.LogEndOffset)
}

// Unwrap returns ErrOffsetOutOfRange.
func (e *OutOfRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// RecoveryStats are the counts of one log's recovery after an unclean
// shutdown (Options.OnRecovered).
type RecoveryStats struct {
	Dir             string // the log's directory
	SegmentsScanned int64
	BytesScanned    int64
}

// Options are a Log's collaborators.
type Options struct {
	// Now is the clock (segment.ms by age, retention, LogAppendTime).
	// Default time.Now.
	Now func() time.Time
	// Logger receives one line per notable event, such as a recovery
	// truncation or an IO failure (not per append or roll). Default
	// slog.Default().
	Logger *slog.Logger
	// OnRecovered, when set, receives the counts of a recovery after an
	// unclean shutdown that found nothing to repair, instead of the
	// Logger's line for it, so that a caller opening many logs can log
	// one line for them all. Repairs (a truncated tail, dropped segments)
	// are logged by Logger either way.
	OnRecovered func(RecoveryStats)
	// CleanerDedupeBufferBytes bounds the memory of a clean's offset map
	// (Kafka's log.cleaner.dedupe.buffer.size), counted as each key's
	// bytes plus OffsetMapEntryOverhead: a clean maps dirty segments until
	// the next would not fit, and cleans only up to the end of the last
	// one mapped (the first dirty segment is always mapped, so a clean
	// always progresses). Default (0) DefaultCleanerDedupeBufferBytes,
	// 128 MiB.
	CleanerDedupeBufferBytes int64
	// OnFail, when set, is called once when the log fails (an IO error
	// or damage; see Failed), with the error. It runs with the log's lock
	// held: it must not block or call the log.
	OnFail func(error)
	// FileCache holds the open descriptors of closed segments' .log files
	// (see FileCache); pass one cache to every Log of a broker, so that
	// its limit bounds them all. Default (nil): one process-wide cache of
	// DefaultOpenFilesMax descriptors shared by every Log opened without
	// one.
	FileCache *FileCache
	// OnSync, when set, is called after each group sync of the log's
	// files (Sync's fsyncs, led by one caller for the whole group) with
	// the time they took; nil costs nothing. Brokers feed their fsync
	// latency histogram from it. It must not block or call the log.
	OnSync func(time.Duration)

	// noFlusher turns off the background flusher (roll-triggered syncs and
	// flush.ms), for tests whose output must not depend on its timing.
	noFlusher bool
}

// Log is one partition's log: a folder of segments. It is safe for
// concurrent use: appends are serialized, reads run concurrently with each
// other and with appends, and Sync commits in groups.
type Log struct {
	fs    vfs.FS
	files *FileCache // Options.FileCache or the default
	dir   string
	cfg   Config
	opts  Options

	// mu guards everything below it. Appends and mutations hold it
	// exclusively; reads hold it shared while they look up positions.
	mu             sync.RWMutex
	segs           []*segment // ordered by base offset; the last is active
	logStartOffset int64
	writeSeq       uint64     // incremented by every change to the files
	unsynced       []*segment // closed segments with unsynced data, oldest first
	txnDirty       []*segment // segments whose transaction index changed since synced (txnindex.go)
	dirDirty       bool       // folder entries changed since the last SyncDir
	unflushed      int64      // records appended since the last sync
	lastSync       time.Time
	failed         error
	damage         *DamageError // where the log is damaged (see Damage), or nil
	closed         bool
	deletes        []*pendingDelete
	// truncEpoch counts tail truncations; a Sync that started before one
	// must not advance the recovery point past the truncated segment.
	truncEpoch uint64
	// firstDirty is the cleaner offset: every offset below it has been
	// cleaned (see Clean). It is persisted in the checkpoint.
	firstDirty int64
	// Raft (raft.go): FirstIndex is raftPrevIndex+1, raftPrevTerm is
	// Term(raftPrevIndex); lastTerm is the term of the last entry
	// (raftPrevTerm when there is none); raftRetain is the bound below
	// which retention and the cleaner may remove entries
	// (SetRaftRetainFrom; math.MaxUint64, no bound, by default).
	raftPrevIndex, raftPrevTerm uint64
	lastTerm                    uint64
	raftRetain                  uint64
	raftLog                     bool           // see termGuard
	swapped                     map[int64]bool // recovery only: segments a clean's swap replaced

	// tombstoneHorizon is the earliest delete horizon (ms) the last clean
	// wrote or kept (a tombstone's or a transaction marker's), or -1: once
	// the clock passes it a clean can drop them whatever the dirty ratio.
	// Not persisted.
	tombstoneHorizon int64
	// cleans counts the cleaned segments swapped in since Open (see
	// Cleans).
	cleans uint64

	// syncMu serializes a Sync leader's fsyncs with a clean's commit and
	// truncation; syncedSeq is the writeSeq the last fsync covered. ckptMu serializes checkpoint writes; recoveryPoint is the
	// value last written.
	// verifyMu guards the segments' unverified spans (a leaf).
	verifyMu sync.Mutex
	// cleanMu serializes Clean.
	cleanMu sync.Mutex

	syncMu sync.Mutex
	// groupMu guards syncing (a Sync leads a group commit) and syncedSeq;
	// groupCond is signalled when a leader finishes. Lock order: syncMu,
	// then groupMu (a leaf).
	groupMu       sync.Mutex
	groupCond     *sync.Cond
	syncing       bool
	syncedSeq     uint64
	ckptMu        sync.Mutex
	recoveryPoint int64
	durableLSO    int64 // the log start offset the checkpoint holds

	flushCh chan struct{} // a roll asks the flusher to sync
	cfgCh   chan struct{} // SetConfig wakes the flusher
	done    chan struct{}
	wg      sync.WaitGroup
}

// Dir returns the partition folder.
func (l *Log) Dir() string { return l.dir }

// Config returns the log's configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig changes the configuration (a topic config change); it applies
// to later appends, rolls and retention passes.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// segment.index.bytes sizes index files when segments are created or
	// opened; a change applies from the next roll on.
	l.cfg = cfg
	select {
	case l.cfgCh <- struct{}{}:
	default:
	}
	return nil
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// LogEndOffset returns the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().next
}

// LogStartOffset returns the first offset that can be read.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset
}

// Size returns the bytes held by the log's segment files (indexes excluded).
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments returns the number of segments, the active one included.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// AppendOptions are the fields the log may set in an appended batch.
type AppendOptions struct {
	// SetLeaderEpoch stamps LeaderEpoch into the batch's
	// partitionLeaderEpoch field (the raft term, under replication).
	SetLeaderEpoch bool
	LeaderEpoch    int32
	// LogAppendTime makes the broker's clock the batch's timestamp: the max
	// timestamp field and the timestamp-type attribute bit are set and the
	// CRC recomputed (Kafka's message.timestamp.type=LogAppendTime).
	LogAppendTime bool
	// Checked, when set, is the batch's header as the caller parsed it
	// after checking the batch itself (ValidateAppend, or a replicated
	// entry whose leader did): the append then trusts the batch and runs
	// neither the CRC nor the record walk again. Nil: the append checks it.
	Checked *batch.Header
}

// AppendResult describes an appended batch.
type AppendResult struct {
	BaseOffset int64 // offset assigned to the first record
	LastOffset int64 // offset of the last record
	// LogAppendTime is the timestamp the log set, in ms, or -1.
	LogAppendTime int64
	// NeedSync says the flush policy wants this append synced before it
	// counts as flushed: flush.messages (as configured when the append
	// ran) records have been appended since the last Sync. AppendWith
	// never syncs; the caller calls Sync (a group commit) outside its own
	// locks.
	NeedSync bool
	// Rolled says the append started a new active segment, whose base
	// offset is BaseOffset (the caller may snapshot state derived from the
	// log below it, as Kafka snapshots producer state at each roll).
	Rolled bool
	// Index is the raft index the batch got (every stored batch is one
	// raft entry; see raft.go).
	Index uint64
	// TruncatedTo is, when AppendEntry first truncated a divergent tail,
	// the log end offset that truncation left (state derived from the
	// log past it, such as producer state and leader epochs, must be
	// rebuilt); -1 otherwise.
	TruncatedTo int64
}

// Append validates one whole record batch b (magic 2), assigns its offsets
// and writes it. It returns the base offset. b is modified in place (the
// baseOffset field, and maxTimestamp with the CRC when it disagrees with
// the records, as Kafka's LogValidator corrects it) and must not be
// modified by the caller until Append returns. An invalid or empty batch
// returns an error wrapping ErrCorrupt and appends nothing.
//
// Append calls Sync itself when flush.messages asks for it (NeedSync),
// so it returns the base offset and an error when that Sync fails. A
// caller that serializes appends under a lock of its own should use
// AppendWith and call Sync after releasing it, so that concurrent appends
// share fsyncs.
func (l *Log) Append(b []byte) (int64, error) {
	r, err := l.AppendWith(b, AppendOptions{})
	if err == nil && r.NeedSync {
		err = l.Sync()
	}
	return r.BaseOffset, err
}

// AppendWith is Append with options (see AppendOptions), except that it
// never syncs: it reports in AppendResult.NeedSync whether flush.messages
// wants a Sync now, and leaves that to the caller.
func (l *Log) AppendWith(b []byte, opts AppendOptions) (AppendResult, error) {
	h, err := checkedHeader(b, opts.Checked)
	if err != nil {
		return AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, TruncatedTo: -1}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(b, &h, opts, 0)
}

// checkedHeader returns b's header: checked, the caller's, when set (its
// size must still be b's), else ValidateAppend's.
func checkedHeader(b []byte, checked *batch.Header) (batch.Header, error) {
	if checked == nil {
		return ValidateAppend(b)
	}
	if checked.Size() != len(b) || checked.Internal() || checked.NumRecords <= 0 {
		return *checked, fmt.Errorf("%w: a checked batch of %d bytes whose header says %d bytes, %d records", ErrCorrupt, len(b), checked.Size(), checked.NumRecords)
	}
	return *checked, nil
}

// ValidateAppend checks a batch to append as a leader checks a producer's
// (batch.ValidateRecords: CRC, records walked, decompressed if need be;
// internal batches refused), refuses an empty one, and corrects
// maxTimestamp from the records (in b, the CRC recomputed). A caller that
// ran it passes the header as AppendOptions.Checked.
func ValidateAppend(b []byte) (batch.Header, error) {
	h, recordsMaxTs, err := batch.ValidateRecords(b)
	if err != nil {
		return h, err
	}
	if h.NumRecords == 0 {
		return h, fmt.Errorf("%w: batch has no records", ErrCorrupt)
	}
	if !h.LogAppendTime() && h.MaxTimestamp != recordsMaxTs {
		// Kafka's LogValidator sets maxTimestamp from the records.
		batch.SetMaxTimestamp(b, recordsMaxTs)
		h.MaxTimestamp = recordsMaxTs
	}
	return h, nil
}

// appendLocked stamps and writes the checked batch b (header h) at the
// end of the log; wantIndex, when not 0, is the raft index it must get.
// mu must be held.
func (l *Log) appendLocked(b []byte, h *batch.Header, opts AppendOptions, wantIndex uint64) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, TruncatedTo: -1}
	if err := l.writableLocked(); err != nil {
		return res, err
	}
	if wantIndex != 0 && wantIndex != l.lastIndexLocked()+1 {
		return res, fmt.Errorf("%w: append of entry %d, the last is %d", ErrRaftIndex, wantIndex, l.lastIndexLocked())
	}
	now := l.opts.Now()
	if opts.LogAppendTime && !h.Internal() {
		ts := now.UnixMilli()
		batch.SetLogAppendTime(b, ts)
		h.MaxTimestamp = ts
		h.Attributes |= batch.TimestampTypeBit
		res.LogAppendTime = ts
	}
	if opts.SetLeaderEpoch {
		batch.SetPartitionLeaderEpoch(b, opts.LeaderEpoch)
		h.PartitionLeaderEpoch = opts.LeaderEpoch
	}
	h.BaseOffset = l.active().next
	batch.SetBaseOffset(b, h.BaseOffset)
	if l.shouldRollLocked(h, now) {
		if err := l.rollLocked(now); err != nil {
			return res, err
		}
		res.Rolled = true
	}
	if err := l.writeLocked(b, h); err != nil {
		return res, err
	}
	l.active().lastModified = now
	l.unflushed += int64(h.NumRecords)
	res.NeedSync = l.unflushed >= l.cfg.FlushMessages
	res.BaseOffset, res.LastOffset = h.BaseOffset, h.LastOffset()
	res.Index = l.lastIndexLocked()
	return res, nil
}

func (l *Log) writableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// failLocked records an IO error that leaves the files in an unknown state.
func (l *Log) failLocked(op string, err error) error {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %s %s: %w", ErrFailed, op, l.dir, err)
		l.opts.Logger.Error("segment: log failed", "dir", l.dir, "op", op, "err", err)
		if l.opts.OnFail != nil {
			l.opts.OnFail(l.failed)
		}
	}
	return l.failed
}

// fail is failLocked for a caller that does not hold mu.
func (l *Log) fail(op string, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(op, err)
}

// writeLocked writes b at the end of the active segment.
func (l *Log) writeLocked(b []byte, h *batch.Header) error {
	s := l.active()
	pos := s.size
	if _, err := s.log.WriteAt(b, pos); err != nil {
		return l.failLocked("write", err)
	}
	s.size += int64(len(b))
	s.addPosition(pos, h.Internal())
	l.lastTerm = epochTerm(h.PartitionLeaderEpoch)
	l.writeSeq++
	s.modSeq = l.writeSeq
	if err := s.track(h, pos, &l.cfg); err != nil {
		return l.failLocked("index", err)
	}
	return nil
}

// shouldRollLocked applies Kafka's roll rules (LogSegment.shouldRoll) to
// the active segment for an incoming batch h.
func (l *Log) shouldRollLocked(h *batch.Header, now time.Time) bool {
	s := l.active()
	if s.size == 0 {
		return false
	}
	n := int64(h.Size())
	if s.endsInternal() && s.size+n <= math.MaxInt32 && h.LastOffset()-s.base <= math.MaxInt32 {
		// A closed segment always ends with a data batch (see
		// endsInternal); the next batch goes here.
		return false
	}
	if s.size+n > l.cfg.SegmentBytes {
		return true
	}
	if s.firstTs >= 0 {
		if h.MaxTimestamp-s.firstTs > l.cfg.SegmentMs {
			return true
		}
	} else if now.Sub(s.created).Milliseconds() > l.cfg.SegmentMs {
		return true
	}
	return s.full(n, h.LastOffset())
}

// rollLocked seals the active segment and starts a new one at the log end
// offset. The sealed segment is synced in the background.
func (l *Log) rollLocked(now time.Time) error {
	old := l.active()
	if err := old.seal(); err != nil {
		return l.failLocked("seal", err)
	}
	if err := old.writeRaftIndex(l.fs); err != nil {
		return l.failLocked("seal", err)
	}
	old.log.unpin() // its index files stay open until it is synced
	s, err := createSegment(l.fs, l.files, l.dir, old.next, &l.cfg, now)
	if err != nil {
		return l.failLocked("roll", err)
	}
	s.rfirst, s.rprev = old.rfirst+old.count(), l.lastTerm
	l.segs = append(l.segs, s)
	l.unsynced = append(l.unsynced, old)
	l.dirDirty = true
	l.writeSeq++
	old.modSeq = l.writeSeq
	select {
	case l.flushCh <- struct{}{}:
	default:
	}
	return nil
}

// Roll forces a new active segment (when the active one is not empty).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if s := l.active(); s.size == 0 || s.endsInternal() {
		return nil // see shouldRollLocked
	}
	return l.rollLocked(l.opts.Now())
}

// Sync makes every append that returned before it was called durable: the
// data of the active segment, of segments sealed since the last sync (with
// their indexes) and the folder's entries. Concurrent callers share one
// fsync (group commit): a caller whose appends an fsync in flight or just
// finished already covers returns without one.
//
// One caller at a time leads: it runs the fsyncs while the others wait on
// groupCond, and when it is done every waiter wakes at once, so those it
// covered return without queueing behind the next leader's fsync (which
// a plain mutex queue would make them do), and one of the rest leads the
// next group.
func (l *Log) Sync() error {
	l.mu.RLock()
	target := l.writeSeq
	l.mu.RUnlock()

	l.groupMu.Lock()
	for l.syncing && l.syncedSeq < target {
		l.groupCond.Wait()
	}
	if l.syncedSeq >= target {
		l.groupMu.Unlock()
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.failed
	}
	l.syncing = true
	l.groupMu.Unlock()
	defer func() {
		l.groupMu.Lock()
		l.syncing = false
		l.groupCond.Broadcast()
		l.groupMu.Unlock()
	}()
	return l.leadSync()
}

// leadSync is Sync's fsyncs, run by the group's leader under syncMu.
func (l *Log) leadSync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.failed != nil {
		l.mu.Unlock()
		return l.failed
	}
	seq := l.writeSeq
	sealed := append([]*segment(nil), l.unsynced...)
	active := l.active()
	epoch, rp := l.truncEpoch, active.base
	dirDirty := l.dirDirty
	l.dirDirty = false
	unflushed := l.unflushed
	txns := l.txnSyncsLocked()
	l.mu.Unlock()

	var err error
	if l.opts.OnSync != nil {
		start := time.Now()
		defer func() {
			if err == nil {
				l.opts.OnSync(time.Since(start))
			}
		}()
	}
	for _, s := range sealed {
		if err = errors.Join(s.log.Sync(), syncFile(s.offFile), syncFile(s.timeFile), syncFile(s.rfile)); err != nil && !s.deleted.Load() {
			break
		}
		err = nil
	}
	if err == nil {
		if err = active.log.Sync(); err != nil && active.deleted.Load() {
			err = nil
		}
	}
	if err == nil {
		err = syncTxnFiles(txns)
	}
	if err == nil && dirDirty {
		err = l.fs.SyncDir(l.dir)
	}
	l.mu.Lock()
	if err != nil {
		err = l.failLocked("sync", err)
		l.mu.Unlock()
		return err
	}
	l.unsynced = removeSynced(l.unsynced, sealed, seq)
	l.txnSyncedLocked(txns)
	for _, s := range sealed {
		// Synced and closed: its indexes need no descriptors any more.
		if !s.deleted.Load() && s != l.active() && !slices.Contains(l.unsynced, s) {
			s.closeIndexFiles()
		}
	}
	l.unflushed -= unflushed
	l.lastSync = l.opts.Now()
	l.mu.Unlock()
	l.groupMu.Lock()
	l.syncedSeq = seq
	l.groupMu.Unlock()
	if len(sealed) > 0 {
		return l.advanceRecoveryPoint(rp, epoch)
	}
	return nil
}

// syncFile syncs f unless it is nil (an index file closed once synced).
func syncFile(f vfs.File) error {
	if f == nil {
		return nil
	}
	return f.Sync()
}

// retireRecovered hands the closed segments recovery opened to the file
// cache and closes the index files of those already synced (the others
// close theirs at the next Sync).
func (l *Log) retireRecovered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs[:len(l.segs)-1] {
		l.retireSegment(s)
	}
}

// retireSegment hands a closed segment's .log to the file cache and closes
// its index files unless a sync still needs them.
func (l *Log) retireSegment(s *segment) {
	s.log.unpin()
	if !slices.Contains(l.unsynced, s) {
		s.closeIndexFiles()
	}
}

// removeSynced drops from list the segments in done that have not changed
// since the sync's snapshot at seq.
func removeSynced(list, done []*segment, seq uint64) []*segment {
	out := list[:0]
	for _, s := range list {
		keep := true
		for _, d := range done {
			if s == d && s.modSeq <= seq {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

// advanceRecoveryPoint persists a new recovery point after the segments
// below it were synced, unless a truncation happened since the sync took
// its snapshot (epoch): the truncated segment was not part of that sync.
func (l *Log) advanceRecoveryPoint(rp int64, epoch uint64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.RLock()
	stale := l.truncEpoch != epoch
	rp = min(rp, l.active().base) // never past the active segment
	l.mu.RUnlock()
	if stale || rp <= l.recoveryPoint {
		return nil
	}
	return l.writeCheckpointLocked(rp, false)
}

// writeCheckpoint rewrites the checkpoint with the current log start
// offset and recovery point.
func (l *Log) writeCheckpoint() error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	return l.writeCheckpointLocked(l.recoveryPoint, false)
}

// writeCheckpointLocked writes the checkpoint with recovery point rp, and
// only once it is durable records rp and the log start offset written as
// the durable ones. ckptMu must be held; mu must not be.
func (l *Log) writeCheckpointLocked(rp int64, clean bool) error {
	l.mu.RLock()
	c := l.checkpointLocked(rp, clean)
	l.mu.RUnlock()
	lso := c.LogStartOffset
	if err := writeCheckpoint(l.fs, l.dir, c); err != nil {
		return l.fail("checkpoint", err)
	}
	l.recoveryPoint = rp
	l.durableLSO = lso
	return nil
}

// flusher syncs sealed segments after a roll (so the recovery point
// advances without fsyncs on the append path) and applies flush.ms.
func (l *Log) flusher() {
	defer l.wg.Done()
	for {
		// flush.ms may change (SetConfig wakes us); tick at its pace.
		var tick <-chan time.Time
		l.mu.RLock()
		ms := l.cfg.FlushMs
		l.mu.RUnlock()
		var t *time.Ticker
		if ms < math.MaxInt64/2 {
			d := min(max(time.Duration(ms)*time.Millisecond, 10*time.Millisecond), time.Second)
			t = time.NewTicker(d)
			tick = t.C
		}
		sync := false
		select {
		case <-l.done:
		case <-l.cfgCh:
		case <-l.flushCh:
			sync = true
		case <-tick:
			l.mu.RLock()
			sync = l.unflushed > 0 && l.opts.Now().Sub(l.lastSync).Milliseconds() >= l.cfg.FlushMs
			l.mu.RUnlock()
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-l.done:
			return
		default:
		}
		if sync {
			if err := l.Sync(); err != nil && !errors.Is(err, ErrFailed) {
				l.opts.Logger.Warn("segment: background sync failed", "dir", l.dir, "err", err)
			}
		}
	}
}

// Close syncs everything, seals the active segment's indexes, records a
// clean shutdown and closes the files. Deletions waiting for
// file.delete.delay.ms are carried out now.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.done)
	l.wg.Wait()

	err := l.Sync()
	l.mu.Lock()
	active := l.active()
	failed := l.failed
	if failed == nil {
		err = errors.Join(err, active.seal(), active.writeRaftIndex(l.fs), active.syncAll())
	}
	deletes := l.deletes
	l.deletes = nil
	l.mu.Unlock()
	if err == nil && failed == nil {
		l.ckptMu.Lock()
		err = l.writeCheckpointLocked(active.base, true)
		l.ckptMu.Unlock()
	}
	for _, d := range deletes {
		d.run()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		err = errors.Join(err, s.closeFiles())
	}
	return err
}
