package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Sync() error { return fdatasync(f.File) }

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

func (osFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

type osLock struct{ f *os.File }

// Close releases the flock explicitly before closing: a flock belongs to
// the open file description, which a child this process is starting
// shares until its exec has closed its copy of the descriptor (after
// fork returned in the parent, on Linux); closing alone would leave the
// lock held in that window, and a Lock right after it, as a restart in
// the same process takes, would fail with ErrLocked.
func (l osLock) Close() error {
	unlockErr := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if err := l.f.Close(); err != nil {
		return err
	}
	if unlockErr != nil {
		return fmt.Errorf("vfs: unlock %s: %w", l.f.Name(), unlockErr)
	}
	return nil
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s: %w", ErrLocked, name, err)
		}
		return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
	}
	return osLock{f}, nil
}
