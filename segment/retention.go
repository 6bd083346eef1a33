package segment

import (
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// pendingDelete is a segment renamed to ".deleted" whose files are closed
// and removed file.delete.delay.ms later (Kafka's asynchronous delete), so
// FileRanges already handed to readers stay valid.
type pendingDelete struct {
	once  sync.Once
	seg   *segment
	fs    interface{ Remove(string) error }
	paths []string

	mu    sync.Mutex  // guards timer: set after AfterFunc returns, read by run from any goroutine
	timer *time.Timer // nil when the delete runs at once
}

func (d *pendingDelete) run() {
	d.mu.Lock()
	t := d.timer
	d.mu.Unlock()
	if t != nil {
		t.Stop() // a no-op when run is the timer's own callback
	}
	d.once.Do(func() {
		d.seg.closeFiles()
		for _, p := range d.paths {
			d.fs.Remove(p)
		}
	})
}

// deleteSegmentLocked takes s out of service: its files are renamed with
// the ".deleted" suffix now and removed after file.delete.delay.ms. The
// caller removes s from l.segs.
func (l *Log) deleteSegmentLocked(s *segment) {
	s.deleted.Store(true)
	d := &pendingDelete{seg: s, fs: l.fs}
	renameFailed := false
	s.closeRaftFile()
	l.removeTxnFileLocked(s) // derived data: removed now
	for _, k := range []FileKind{KindLog, KindOffsetIndex, KindTimeIndex, KindRaftIndex} {
		from := s.path(k)
		to := filepath.Join(l.dir, FileName{Base: s.base, Kind: k, Deleted: true}.String())
		if k == KindRaftIndex {
			// Derived data, and absent for the active segment: removed now.
			if err := l.fs.Remove(from); err != nil && !isNotExist(err) {
				l.opts.Logger.Warn("segment: remove for delete failed", "file", from, "err", err)
			}
			continue
		}
		if err := l.fs.Rename(from, to); err != nil {
			l.opts.Logger.Warn("segment: rename for delete failed; removing now", "file", from, "err", err)
			to, renameFailed = from, true
		}
		if k == KindLog {
			s.log.setPath(to) // a reader may reopen it until it is closed
		}
		d.paths = append(d.paths, to)
	}
	for i, u := range l.unsynced {
		if u == s {
			l.unsynced = append(l.unsynced[:i:i], l.unsynced[i+1:]...)
			break
		}
	}
	l.dirDirty = true
	l.writeSeq++
	if l.cfg.FileDeleteDelayMs == 0 || l.closed || renameFailed {
		d.run()
		return
	}
	d.mu.Lock()
	d.timer = time.AfterFunc(time.Duration(l.cfg.FileDeleteDelayMs)*time.Millisecond, func() {
		d.run()
		l.mu.Lock()
		for i, p := range l.deletes {
			if p == d {
				l.deletes = append(l.deletes[:i:i], l.deletes[i+1:]...)
				break
			}
		}
		l.mu.Unlock()
	})
	d.mu.Unlock()
	l.deletes = append(l.deletes, d)
}

// DeleteOldSegments applies retention as of now: closed segments are
// deleted, oldest first, while one of these holds (Kafka's rules, checked
// in this order): the next segment starts at or below the log start offset;
// the segment's largest timestamp is more than retention.ms old (a segment
// without timestamps counts from its last append); the log
// would still hold at least retention.bytes without it. The last two apply
// only when cleanup.policy includes delete. The active segment
// is never deleted, nor a segment holding raft entries at or above the
// SetRaftRetainFrom bound (nor any after it). Deleting raft segments moves
// FirstIndex, which is persisted in the checkpoint before it returns. The log start offset moves up to the first remaining
// segment. It returns the number of segments deleted.
func (l *Log) DeleteOldSegments() (int, error) {
	// syncMu keeps Sync from syncing the folder between the deletions and
	// the checkpoint: the checkpoint's own folder sync makes both durable
	// together, so recovery never finds the raft log's first segment gone
	// with the checkpoint still naming it.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	n, raftMoved, err := l.deleteOldSegments()
	if err == nil && raftMoved {
		err = l.writeCheckpoint() // FirstIndex moved
	}
	return n, err
}

func (l *Log) deleteOldSegments() (deleted int, raftMoved bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, false, err
	}
	defer func() { raftMoved = deleted > 0 && l.raftStartMovedLocked() }()
	nowMs := l.opts.Now().UnixMilli()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	for len(l.segs) > 1 {
		s := l.segs[0]
		if !l.raftRemovableLocked(s) {
			// Raft may still need its entries (SetRaftRetainFrom).
			return deleted, false, nil
		}
		largest := s.maxTs
		if largest < 0 {
			largest = s.lastModified.UnixMilli() // Kafka: the file's last modified time
		}
		switch {
		case l.segs[1].base <= l.logStartOffset:
		case !l.cfg.Deletes():
			// cleanup.policy=compact: retention deletes nothing (Kafka).
			return deleted, false, nil
		case l.cfg.RetentionMs >= 0 && nowMs-largest > l.cfg.RetentionMs:
		case l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes:
		default:
			return deleted, false, nil
		}
		total -= s.size
		l.deleteSegmentLocked(s)
		l.segs = l.segs[1:]
		l.logStartOffset = max(l.logStartOffset, l.segs[0].base)
		deleted++
	}
	return deleted, false, nil
}

// DeleteRecordsBefore advances the log start offset to offset (Kafka's
// DeleteRecords): records below it are no longer readable, segments wholly
// below it are deleted, and the new log start offset is persisted before it
// returns. An offset at or below the current log start offset changes
// nothing; one above the log end offset returns an *OutOfRangeError. It
// returns the log start offset.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.syncMu.Lock() // see DeleteOldSegments
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	lso, leo := l.logStartOffset, l.active().next
	if offset > leo {
		l.mu.Unlock()
		return lso, &OutOfRangeError{Offset: offset, LogStartOffset: lso, LogEndOffset: leo}
	}
	raftMoved := false
	if offset > lso {
		l.logStartOffset = offset
		for len(l.segs) > 1 && l.segs[1].base <= offset && l.raftRemovableLocked(l.segs[0]) {
			l.deleteSegmentLocked(l.segs[0])
			l.segs = l.segs[1:]
			raftMoved = true
		}
		raftMoved = raftMoved && l.raftStartMovedLocked()
	}
	lso = l.logStartOffset
	l.mu.Unlock()
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if l.durableLSO >= lso && !raftMoved {
		return lso, nil
	}
	// Persist it, also when retention moved it (retention does not).
	if err := l.writeCheckpointLocked(l.recoveryPoint, false); err != nil {
		return lso, err
	}
	return lso, nil
}

// Sweeper runs retention (DeleteOldSegments) on a set of logs every
// retention.check.interval.ms (Kafka's log.retention.check.interval.ms,
// default 300000).
type Sweeper struct {
	interval time.Duration
	logger   *slog.Logger

	mu   sync.Mutex
	logs map[*Log]struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms.
const DefaultRetentionCheckInterval = 300000 * time.Millisecond

// NewSweeper returns a stopped sweeper; call Start.
func NewSweeper(interval time.Duration, logger *slog.Logger) *Sweeper {
	if logger == nil {
		logger = slog.Default()
	}
	return &Sweeper{interval: interval, logger: logger, logs: map[*Log]struct{}{}}
}

// Add starts sweeping l.
func (w *Sweeper) Add(l *Log) {
	w.mu.Lock()
	w.logs[l] = struct{}{}
	w.mu.Unlock()
}

// Remove stops sweeping l.
func (w *Sweeper) Remove(l *Log) {
	w.mu.Lock()
	delete(w.logs, l)
	w.mu.Unlock()
}

// Start runs a sweep every interval until Stop; it does nothing if the
// sweeper already runs.
func (w *Sweeper) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		return
	}
	w.stop = make(chan struct{})
	w.wg.Add(1)
	stop := w.stop
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				w.SweepOnce()
			}
		}
	}()
}

// Stop stops the sweeper and waits for a sweep in progress.
func (w *Sweeper) Stop() {
	w.mu.Lock()
	stop := w.stop
	w.stop = nil
	w.mu.Unlock()
	if stop != nil {
		close(stop)
		w.wg.Wait()
	}
}

// SweepOnce applies retention to every log now.
func (w *Sweeper) SweepOnce() {
	w.mu.Lock()
	logs := make([]*Log, 0, len(w.logs))
	for l := range w.logs {
		logs = append(logs, l)
	}
	w.mu.Unlock()
	for _, l := range logs {
		n, err := l.DeleteOldSegments()
		if err != nil {
			continue
		}
		if n > 0 {
			w.logger.Info("segment: retention deleted segments", "dir", l.Dir(), "segments", n, "log_start_offset", l.LogStartOffset())
		}
	}
}
