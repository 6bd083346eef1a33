package server

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"syscall"

	"github.com/sluicemq/sluice/segment/vfs"
)

// lockLogDir creates a log dir if needed, takes its .lock (one broker per
// log dir, as Kafka's) and checks that the broker can create files in it.
// Its errors name log.dirs, the folder and the cause: another broker
// holding the lock is told apart from a folder the broker cannot write.
func lockLogDir(fs vfs.FS, dir string) (io.Closer, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, logDirError(dir, "cannot be created", err)
	}
	lock, err := fs.Lock(filepath.Join(dir, lockName))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("server: log.dirs: %s is in use by another broker process (it holds %s); stop that one or choose another log.dirs: %w", dir, lockName, err)
	}
	if err != nil {
		return nil, logDirError(dir, "cannot be locked", err)
	}
	// The lock file can exist from an earlier run in a folder that is no
	// longer writable: create and remove a file to find out now, not at
	// the first partition.
	probe := filepath.Join(dir, probeName)
	f, err := fs.Create(probe)
	if err == nil {
		err = errors.Join(f.Close(), fs.Remove(probe))
	}
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		lock.Close()
		return nil, logDirError(dir, "is not writable", err)
	}
	// A full disk is not a reason to stay down: the broker serves what it
	// holds and answers writes KAFKA_STORAGE_ERROR until space frees
	// (faults.go; TestFullDiskResumes).
	return lock, nil
}

// logDirError is a log dir's start-up failure, with its cause in words
// when the error says it.
func logDirError(dir, what string, err error) error {
	cause := ""
	switch {
	case errors.Is(err, syscall.EROFS):
		cause = "it is on a read-only file system"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		cause = "permission denied: the broker's user cannot write there"
	case errors.Is(err, syscall.ENOSPC):
		cause = "no space left on its device"
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EEXIST):
		cause = "a file is in the way: the path, or a folder above it, is a file"
	case errors.Is(err, syscall.EISDIR):
		cause = lockName + " is a folder"
	}
	if cause == "" {
		return fmt.Errorf("server: log.dirs: %s %s: %w", dir, what, err)
	}
	return fmt.Errorf("server: log.dirs: %s %s (%s): %w", dir, what, cause, err)
}
