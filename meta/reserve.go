package meta

import (
	"fmt"
	"path/filepath"
	"time"
)

// The space reserve. Options.ReserveBytes of zeros sit in reserveName in
// the store's folder. Pebble runs on an FS wrapped with vfs.OnDiskFull:
// the first write to hit ENOSPC removes the reserve and is retried once,
// so it succeeds on the space the reserve held. From then on, until the
// reserve has been written again, every change fails with ErrStorage
// before it reaches Pebble, so Pebble never meets a full disk itself (it
// treats a failed WAL write as fatal: commit.go). Each refused change
// first tries to write the reserve again (at most every reserveRetry);
// once that succeeds, space has returned and changes go through.

// releaseReserve is the disk-full callback: it removes the reserve (on the
// unwrapped FS) and marks it gone. Pebble's writes wait while it runs.
func (s *Store) releaseReserve() {
	if s.opts.ReserveBytes < 0 || s.reserveGone.Load() {
		return
	}
	path := filepath.Join(s.dir, reserveName)
	if err := s.opts.FS.Remove(path); err != nil {
		s.opts.Logger.Error("meta: disk full, and the metadata space reserve cannot be removed", "path", path, "err", err)
	} else {
		s.opts.Logger.Warn("meta: disk full: released the metadata space reserve; metadata changes fail until space returns",
			"path", path, "bytes", s.opts.ReserveBytes)
	}
	s.reserveGone.Store(true)
}

// checkReserveLocked refuses a change while the reserve is gone and
// cannot be written again. writeMu is held.
func (s *Store) checkReserveLocked() error {
	if s.opts.ReserveBytes < 0 || !s.reserveGone.Load() {
		return nil
	}
	if now := time.Now(); now.Sub(s.reserveTried) >= s.reserveRetry {
		s.reserveTried = now
		if err := s.writeReserve(); err == nil {
			s.reserveGone.Store(false)
			s.opts.Logger.Info("meta: space returned: metadata space reserve written again; metadata changes resume")
			return nil
		}
	}
	return fmt.Errorf("%w: the disk holding the metadata is full (the space reserve is in use); retry when space returns", ErrStorage)
}

// ensureReserve writes the reserve at open if it is missing; a failure
// (a disk already full) leaves it marked gone, so changes wait for space.
func (s *Store) ensureReserve() {
	if s.opts.ReserveBytes < 0 {
		return
	}
	path := filepath.Join(s.dir, reserveName)
	if fi, err := s.opts.FS.Stat(path); err == nil && fi.Size() >= s.opts.ReserveBytes {
		return
	}
	if err := s.writeReserve(); err != nil {
		s.opts.Logger.Warn("meta: cannot write the metadata space reserve (disk full?); metadata changes fail until it can be written",
			"path", path, "err", err)
		s.reserveGone.Store(true)
	}
}

// writeReserve writes the reserve file of zeros and syncs it (on the
// unwrapped FS, so a full disk does not trigger the callback); a partial
// file is removed.
func (s *Store) writeReserve() (err error) {
	path := filepath.Join(s.dir, reserveName)
	f, err := s.opts.FS.Create(path, "")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			s.opts.FS.Remove(path)
		}
	}()
	zeros := make([]byte, 64<<10)
	for left := s.opts.ReserveBytes; left > 0; {
		n := min(left, int64(len(zeros)))
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
	}
	return f.Sync()
}
