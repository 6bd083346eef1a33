package meta

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Failure handling. Pebble treats a failed WAL write or fsync as fatal: it
// calls Logger.Fatalf (which panics here) or panics itself, and its commit
// pipeline is unusable afterwards; a panic raised while it had a mutex
// unlocked can even leave the process wedged or make the runtime abort
// ("sync: unlock of unlocked mutex"). So the store keeps Pebble away from a
// full disk (the reserve, reserve.go), turns any commit failure or panic
// into an ErrStorage error, and never commits to that Pebble instance
// again: the next change closes it, opens the folder afresh and reloads the
// state from disk, which holds exactly the commits that made it.

// closeTimeout bounds how long closing a failed Pebble instance may take;
// one whose pipeline is wedged is abandoned.
const closeTimeout = 5 * time.Second

// writableLocked reports whether a change may be made now, reopening
// Pebble after a failed commit and checking the reserve. writeMu is held.
func (s *Store) writableLocked() error {
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		if err := s.reopenLocked(); err != nil {
			return err
		}
	}
	if err := s.fdr.check(); err != nil {
		return err
	}
	return s.checkReserveLocked()
}

// commitLocked commits b with pebble.Sync. Any failure, a panic included,
// marks the store failed and is returned wrapping ErrStorage; what names
// the batch in the message.
func (s *Store) commitLocked(b *pebble.Batch, what string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble panicked: %v", r)
		}
		if err != nil {
			s.failed = fmt.Errorf("%w: commit of %s failed (the store reopens on the next change): %w", ErrStorage, what, err)
			s.opts.Logger.Error("meta: metadata commit failed; changes fail until the store reopens", "what", what, "err", err)
			err = s.failed
			return
		}
		s.commits++
	}()
	return b.Commit(pebble.Sync)
}

// reopenLocked replaces a failed Pebble instance: closes it (bounded by
// closeTimeout), opens the folder again and reloads the state. On failure
// the store stays failed (with the new error) and the next change tries
// again. writeMu is held.
func (s *Store) reopenLocked() error {
	s.mu.Lock()
	old := s.db
	s.db = nil // readers of the log see s.failed meanwhile
	s.mu.Unlock()
	if old != nil {
		done := make(chan error, 1)
		go func() { done <- closeDB(old) }()
		select {
		case err := <-done:
			if err != nil {
				s.opts.Logger.Warn("meta: closing the failed metadata store", "err", err)
			}
		case <-time.After(closeTimeout):
			s.opts.Logger.Error("meta: the failed metadata store does not close; abandoning it")
		}
	}
	db, err := s.openDB()
	if err == nil {
		var st *state
		var next uint64
		var rep int64
		if st, next, rep, err = load(db); err == nil {
			s.mu.Lock()
			s.db, s.st, s.next, s.repNext = db, st, next, rep
			s.mu.Unlock()
			s.opts.Logger.Info("meta: metadata store reopened after a failed commit", "next_offset", next)
			s.failed = nil
			return nil
		}
		closeDB(db)
	}
	if !errors.Is(err, ErrStorage) {
		err = fmt.Errorf("%w: reopen after a failed commit: %w", ErrStorage, err)
	}
	s.failed = err
	return err
}

// closeDB closes db, turning a panic into an error.
func closeDB(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: close: pebble panicked: %v", ErrStorage, r)
		}
	}()
	return db.Close()
}
