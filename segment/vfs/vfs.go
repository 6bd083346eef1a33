// Package vfs is the file system seam of Sluice's storage code. Storage code
// (segment logs, indexes, checkpoints) never calls package os directly: it
// takes an FS, so tests can substitute an in-memory file system that can
// crash (dropping everything not synced) and one that injects errors on
// chosen operations and paths.
//
// Three implementations live here:
//
//   - Default: the operating system's file system.
//   - NewMem / NewCrashableMem: an in-memory file system. Its CrashClone
//     returns the state a machine would find after power loss: file data
//     only up to each file's last Sync (optionally plus a torn prefix of
//     what followed), and directory entries (creations, renames, removals)
//     only up to the parent directory's last SyncDir.
//   - NewErrorFS: wraps another FS and fails the operations an Injector
//     chooses.
//
// The model follows Pebble's vfs package (vfs.NewCrashableMem, errorfs).
package vfs

import (
	"errors"
	"io"
	"os"
)

// ErrLocked is Lock's error when the lock is held elsewhere; test with
// errors.Is.
var ErrLocked = errors.New("vfs: locked by another process")

// File is an open file. Writes are positional (WriteAt), so callers keep
// their own write offsets and readers may share the file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Truncate changes the file's size in bytes; growing it fills with zeros.
	Truncate(size int64) error
	// Sync makes the file's data durable (fdatasync on Linux). It does not
	// make the file's directory entry durable: see FS.SyncDir.
	Sync() error
	// Size returns the file's current size in bytes.
	Size() (int64, error)
	// Fd returns the OS file descriptor, or InvalidFd when the file is not
	// backed by the OS (then callers must copy instead of using sendfile).
	Fd() uintptr
}

// InvalidFd is returned by File.Fd for files with no OS descriptor.
const InvalidFd = ^uintptr(0)

// FS is the file system interface used by storage code. Paths are joined
// with path/filepath; names passed to List are directories.
type FS interface {
	// Create creates or truncates the named file and opens it read-write.
	Create(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file read-write without truncating it.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything below it.
	RemoveAll(name string) error
	// Rename atomically renames oldname to newname, replacing newname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of a directory's entries, sorted.
	List(dir string) ([]string, error)
	// Stat returns the size of the named file and whether it is a directory.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals
	// of its children) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on the named file, creating it
	// if needed. Closing the returned Closer releases it. A lock held
	// elsewhere (another process, or another Lock of the file) fails with
	// an error wrapping ErrLocked; failing to open or create the file
	// (a read-only folder) fails with that error, not ErrLocked.
	Lock(name string) (io.Closer, error)
}
