package segment

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Transaction index (Kafka's TransactionIndex beside each LogSegment).
// A segment's <base>.txnindex lists the aborted transactions whose abort
// marker lies in the segment, in marker order (format: package index,
// txn.go: 34-byte entries, no header). The log does not derive the
// entries, it only keeps them: its owner (package replica, from its
// producer state) adds one when it has written an abort marker
// (AppendAbortedTxn), and after a restart or a truncation drops the
// entries at or above the offset its producer snapshot covers and adds
// them again while it replays the batches above it (TruncateAbortedTxns,
// then AppendAbortedTxn; Kafka's LogSegment.recover with the
// ProducerStateManager). A read_committed fetch collects them
// (AbortedTxns, Kafka's LocalLog.collectAbortedTransactions).
//
// Files are created lazily, by the first entry of a segment: a segment
// without an aborted transaction has no .txnindex. Entries are held in
// memory whole, per segment (few: one per aborted transaction), as the
// offset and time indexes are; a closed segment's file is closed once it
// is synced and reopened only to change it.
//
// Life cycle: the file goes with its segment (retention, DeleteRecords,
// truncation, ResetAt, InstallSnapshot: removed at once, being derived
// data); a tail truncation (TruncateTo, TruncateIndex) drops the entries
// whose marker it removed; the cleaner carries the entries of the markers
// it keeps into the cleaned segment (Kafka's CleanedTransactionMetadata
// appending to the cleaned segment's index), as a fourth ".cleaned" then
// ".swap" file, renamed before the .log. Recovery keeps the whole valid
// entries of each file (index.OpenTxnIndex drops a torn or invalid
// tail), drops those past the end of a segment it cut, removes a file
// whose segment is gone, and removes a segment's stale file when a
// committed swap brought no ".txnindex.swap" of its own.
//
// Durability: dirty files are synced by every Sync (with the .log data
// they describe), by Close, with their sealed segment, and by
// SyncAbortedTxns, which the owner calls before writing state that
// trusts the entries below some offset (a producer snapshot).

// AbortedTxn is one transaction index entry (index.AbortedTxn): the
// producer, the offset of the transaction's first record, of its abort
// marker (LastOffset), and the last stable offset once the marker was
// written. Offsets are Kafka offsets.
type AbortedTxn = index.AbortedTxn

// openTxnFile opens the segment's existing .txnindex, if any, read-write,
// and loads its entries (a torn tail is left on file until the next
// change; see txnWritable). A missing file is no index.
func (s *segment) openTxnFile(fs vfs.FS) error {
	f, err := fs.OpenReadWrite(s.path(KindTxnIndex))
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ix, err := index.OpenTxnIndex(f, false)
	if err != nil {
		f.Close()
		return err
	}
	s.txn, s.txnFile = ix, f
	return nil
}

// txnWritable makes the segment's transaction index ready to change:
// created if it has none (created reports it), its file reopened if it
// was closed, a torn tail cut. mu is held.
func (s *segment) txnWritable(fs vfs.FS) (created bool, err error) {
	if s.txn == nil {
		f, err := fs.Create(s.path(KindTxnIndex))
		if err != nil {
			return false, err
		}
		ix, err := index.OpenTxnIndex(f, true)
		if err != nil {
			f.Close()
			return false, err
		}
		s.txn, s.txnFile = ix, f
		return true, nil
	}
	if s.txnFile == nil {
		f, err := fs.OpenReadWrite(s.path(KindTxnIndex))
		if err != nil {
			return false, err
		}
		s.txn.Reattach(f)
		s.txnFile = f
	}
	if s.txn.Torn() {
		return false, s.txn.TruncateTo(math.MaxInt64) // cuts the file to the entries
	}
	return false, nil
}

// txnDirty reports whether the segment's transaction index changed since
// it was last synced.
func (s *segment) txnDirty() bool { return s.txnWrites != s.txnSynced }

// closeTxnFile closes the transaction index file of a segment whose
// entries are synced (the entries stay in memory). mu is held.
func (s *segment) closeTxnFile() error {
	if s.txnFile == nil || s.txnDirty() {
		return nil
	}
	err := s.txn.Close()
	s.txnFile = nil
	return err
}

// removeTxnFile closes and removes the segment's .txnindex (the segment
// is being deleted; derived data goes at once). Errors are logged.
func (l *Log) removeTxnFileLocked(s *segment) {
	if s.txn != nil {
		s.txn.Close()
		s.txnFile = nil
	}
	l.txnDirty = removeSeg(l.txnDirty, s)
	if err := l.fs.Remove(s.path(KindTxnIndex)); err != nil && !isNotExist(err) {
		l.opts.Logger.Warn("segment: remove a transaction index", "file", s.path(KindTxnIndex), "err", err)
	}
}

// noteTxnWriteLocked records a change to s's transaction index for the
// next Sync.
func (l *Log) noteTxnWriteLocked(s *segment) {
	s.txnWrites++
	if !slices.Contains(l.txnDirty, s) {
		l.txnDirty = append(l.txnDirty, s)
	}
	l.writeSeq++
	s.modSeq = l.writeSeq
}

// AppendAbortedTxn adds a to the transaction index of the segment that
// holds its marker (a.LastOffset; normally the active segment, which the
// marker was just written to). An entry already there is not added again
// (a replay meeting what the file kept); one whose marker is below the
// first segment is dropped (retention removed its segment); one whose
// marker is at or past the log end offset is an error, and so is one
// whose marker is below the segment's last entry's
// (index.ErrTxnNotMonotonic). The entry is durable after the next Sync
// or SyncAbortedTxns. An IO error fails the log (ErrFailed).
func (l *Log) AppendAbortedTxn(a AbortedTxn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if a.LastOffset >= l.active().next {
		return fmt.Errorf("%w: an aborted transaction whose marker %d is at or past the log end offset %d", ErrOffsetOutOfRange, a.LastOffset, l.active().next)
	}
	if a.FirstOffset < 0 || a.FirstOffset > a.LastOffset {
		return fmt.Errorf("segment: aborted transaction [%d, %d] is not a range", a.FirstOffset, a.LastOffset)
	}
	if a.LastOffset < l.segs[0].base {
		return nil
	}
	s := l.segs[l.segmentIndex(a.LastOffset)]
	if s.txn != nil {
		es := s.txn.Entries()
		if n := len(es); n > 0 && a.LastOffset <= es[n-1].LastOffset && slices.Contains(es, a) {
			return nil
		}
	}
	created, err := s.txnWritable(l.fs)
	if err != nil {
		return l.failLocked("transaction index", err)
	}
	if created {
		l.dirDirty = true
	}
	if err := s.txn.Append(a); err != nil {
		if errors.Is(err, index.ErrTxnNotMonotonic) {
			return err
		}
		return l.failLocked("transaction index", err)
	}
	l.noteTxnWriteLocked(s)
	return nil
}

// TruncateAbortedTxns removes the entries whose marker is at or above
// offset from every segment's transaction index (Kafka's
// TransactionIndex.truncateTo over the segments from offset on): the
// owner's replay from a producer snapshot at offset then adds them again.
// Durable after the next Sync. An IO error fails the log.
func (l *Log) TruncateAbortedTxns(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if s.txn != nil && (s.txn.Torn() || (s.txn.Len() > 0 && s.txn.Entries()[s.txn.Len()-1].LastOffset >= offset)) {
			if _, err := s.txnWritable(l.fs); err != nil {
				return l.failLocked("transaction index", err)
			}
			if err := s.txn.TruncateTo(offset); err != nil {
				return l.failLocked("transaction index", err)
			}
			l.noteTxnWriteLocked(s)
		}
		if s.base <= offset {
			break // the segments before it hold only markers below offset
		}
	}
	return nil
}

// AbortedTxns returns the aborted transactions whose [first record,
// marker] range overlaps [from, upTo), oldest marker first, walking the
// transaction indexes from the segment holding from until an entry's
// last stable offset reaches upTo (Kafka's
// LocalLog.collectAbortedTransactions: no later transaction can then
// start below upTo) or the last segment.
func (l *Log) AbortedTxns(from, upTo int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for _, s := range l.segs[l.segmentIndex(from):] {
		if s.txn == nil {
			continue
		}
		var done bool
		if out, done = s.txn.Collect(out, from, upTo); done {
			break
		}
	}
	return out
}

// txnSync is one transaction index file a sync covers: the writes it
// had when the sync took its snapshot.
type txnSync struct {
	s      *segment
	f      vfs.File
	writes uint64
}

// txnSyncsLocked snapshots the dirty transaction index files for a sync.
func (l *Log) txnSyncsLocked() []txnSync {
	var out []txnSync
	for _, s := range l.txnDirty {
		if s.txnFile != nil {
			out = append(out, txnSync{s, s.txnFile, s.txnWrites})
		}
	}
	return out
}

// syncTxnFiles fsyncs the files of syncs (no lock held; syncMu keeps
// them open). A deleted segment's file may be closed under it: ignored.
func syncTxnFiles(syncs []txnSync) error {
	for _, t := range syncs {
		if err := t.f.Sync(); err != nil && !t.s.deleted.Load() {
			return err
		}
	}
	return nil
}

// txnSyncedLocked records a successful sync of syncs: the segments not
// written since leave the dirty list, and a closed segment's file is
// closed unless its .log still waits for a sync (which closes it).
func (l *Log) txnSyncedLocked(syncs []txnSync) {
	for _, t := range syncs {
		t.s.txnSynced = max(t.s.txnSynced, t.writes)
		if t.s.txnDirty() {
			continue
		}
		l.txnDirty = removeSeg(l.txnDirty, t.s)
		if !t.s.deleted.Load() && t.s != l.active() && !slices.Contains(l.unsynced, t.s) {
			t.s.closeTxnFile()
		}
	}
}

// SyncAbortedTxns makes every transaction index entry appended or
// truncated so far durable, with the folder entries of new files. The
// owner calls it before writing state that trusts the entries below an
// offset (a producer snapshot), since a Sync in flight may have taken its
// snapshot before the entry. An IO error fails the log.
func (l *Log) SyncAbortedTxns() error {
	// Nothing dirty: every entry is durable, with its file's folder
	// entry (a file is created with its first entry, and a Sync drops
	// the segment from txnDirty only after its folder sync).
	l.mu.RLock()
	clean, closed, failed := len(l.txnDirty) == 0, l.closed, l.failed
	l.mu.RUnlock()
	if clean && !closed && failed == nil {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.failed != nil {
		l.mu.Unlock()
		return l.failed
	}
	if l.closed {
		// Its files may be closed; the caller's snapshot is not needed
		// (and is safer not written: Close may not have synced yet).
		l.mu.Unlock()
		return ErrClosed
	}
	syncs := l.txnSyncsLocked()
	dirDirty := l.dirDirty && len(syncs) > 0
	if dirDirty {
		l.dirDirty = false
	}
	l.mu.Unlock()
	if len(syncs) == 0 {
		return nil
	}
	err := syncTxnFiles(syncs)
	if err == nil && dirDirty {
		err = l.fs.SyncDir(l.dir)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.failLocked("sync transaction index", err)
	}
	l.txnSyncedLocked(syncs)
	return nil
}

// NumAbortedTxns returns the number of transaction index entries the log
// holds in memory, over every segment (for tests and metrics).
func (l *Log) NumAbortedTxns() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, s := range l.segs {
		if s.txn != nil {
			n += s.txn.Len()
		}
	}
	return n
}

// truncateTxnLocked drops the entries of s's transaction index whose
// marker is at or past s's end (a tail truncation or a recovery cut
// removed it). mu is held, or recovery runs.
func (l *Log) truncateTxnLocked(s *segment) error {
	if s.txn == nil || (!s.txn.Torn() && (s.txn.Len() == 0 || s.txn.Entries()[s.txn.Len()-1].LastOffset < s.next)) {
		return nil
	}
	if _, err := s.txnWritable(l.fs); err != nil {
		return err
	}
	if err := s.txn.TruncateTo(s.next); err != nil {
		return err
	}
	l.noteTxnWriteLocked(s)
	return nil
}

// runAbortedTxns returns the transaction index entries of a run of
// segments being cleaned, in order, and whether the run's first segment
// has a .txnindex (the cleaned segment, named by its base, then gets one
// even if empty, so that completing the swap replaces the old file).
func (l *Log) runAbortedTxns(segs []*segment) ([]AbortedTxn, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for _, s := range segs {
		if s.txn != nil {
			out = append(out, s.txn.Entries()...)
		}
	}
	return out, segs[0].txn != nil
}

// carryAbortedTxns gives a cleaned segment (its files named with suffix)
// the entries of txns whose marker it kept (kept: the control batches it
// holds, by offset; Kafka's cleaner keeps an aborted transaction's entry
// with its marker), in a file created when there is one or when always
// is set. The file is synced with the segment (syncAll).
func (s *segment) carryAbortedTxns(fs vfs.FS, txns []AbortedTxn, always bool, kept map[int64]bool, suffix string) error {
	var carry []AbortedTxn
	for _, a := range txns {
		if kept[a.LastOffset] {
			carry = append(carry, a)
		}
	}
	if len(carry) == 0 && !always {
		return nil
	}
	f, err := fs.Create(s.path(KindTxnIndex) + suffix)
	if err != nil {
		return err
	}
	ix, err := index.OpenTxnIndex(f, true)
	if err != nil {
		f.Close()
		return err
	}
	s.txn, s.txnFile = ix, f
	for _, a := range carry {
		if err := ix.Append(a); err != nil {
			return err
		}
	}
	return nil
}

// truncateTxnFile drops the entries of the transaction index file at
// path whose marker is at or above offset (and a torn tail), synced; a
// missing file is nothing to do.
func truncateTxnFile(fs vfs.FS, path string, offset int64) error {
	f, err := fs.OpenReadWrite(path)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ix, err := index.OpenTxnIndex(f, true)
	if err == nil {
		err = ix.TruncateTo(offset)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// ErrTxnNotMonotonic is returned (wrapped) by AppendAbortedTxn for an
// entry whose marker is below the last entry's of its segment.
var ErrTxnNotMonotonic = index.ErrTxnNotMonotonic
