package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// ErrInjected is the error the injectors of this package return (wrapped
// with the operation and path); test with errors.Is.
var ErrInjected = errors.New("vfs: injected error")

// Op is an operation an Injector can fail.
type Op int

// The operations, one per FS method and per File method that can fail.
const (
	OpCreate Op = iota
	OpOpen
	OpOpenReadWrite
	OpRemove
	OpRemoveAll
	OpRename
	OpMkdirAll
	OpList
	OpStat
	OpSyncDir
	OpLock
	OpRead
	OpWrite
	OpTruncate
	OpSync
	OpSize
	OpClose
)

var opNames = [...]string{
	OpCreate:        "Create",
	OpOpen:          "Open",
	OpOpenReadWrite: "OpenReadWrite",
	OpRemove:        "Remove",
	OpRemoveAll:     "RemoveAll",
	OpRename:        "Rename",
	OpMkdirAll:      "MkdirAll",
	OpList:          "List",
	OpStat:          "Stat",
	OpSyncDir:       "SyncDir",
	OpLock:          "Lock",
	OpRead:          "Read",
	OpWrite:         "Write",
	OpTruncate:      "Truncate",
	OpSync:          "Sync",
	OpSize:          "Size",
	OpClose:         "Close",
}

func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Injector decides whether an operation fails. MaybeError is called before
// the operation with its path (for File methods, the name the file was
// opened with; for Rename, oldname); a non-nil result is returned to the
// caller instead of performing the operation. It may be called from many
// goroutines at once.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError calls f(op, path).
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

func injected(op Op, path string) error {
	return fmt.Errorf("%w: %s %s", ErrInjected, op, path)
}

// OnOp returns an Injector that fails the n-th (1-based) call of op whose
// path contains pathSubstring (every path contains ""), and only that call,
// with an error wrapping ErrInjected. Calls are counted atomically, so the
// Injector is safe for concurrent use; which of several concurrent calls is
// the n-th is up to the scheduler. OnOp panics if n < 1.
func OnOp(op Op, pathSubstring string, n int) Injector {
	if n < 1 {
		panic(fmt.Sprintf("vfs: OnOp(%s, %q, %d): n must be at least 1", op, pathSubstring, n))
	}
	var calls atomic.Int64
	return InjectorFunc(func(o Op, path string) error {
		if o != op || !strings.Contains(path, pathSubstring) {
			return nil
		}
		if calls.Add(1) == int64(n) {
			return injected(o, path)
		}
		return nil
	})
}

// Always returns an Injector that fails every call of op whose path
// contains pathSubstring, with an error wrapping ErrInjected.
func Always(op Op, pathSubstring string) Injector {
	return InjectorFunc(func(o Op, path string) error {
		if o == op && strings.Contains(path, pathSubstring) {
			return injected(o, path)
		}
		return nil
	})
}

// NewErrorFS returns an FS that asks inj before every FS method and every
// method of the Files it opens, and returns inj's error instead of calling
// fs when there is one. An injected error is clean: the operation is not
// performed (a failed WriteAt writes nothing and returns 0), except Close,
// which still closes the underlying file, as close(2) releases the
// descriptor even when it reports an error. File.Fd cannot fail, and the
// Closer returned by Lock is not wrapped.
func NewErrorFS(fs FS, inj Injector) FS {
	return &errorFS{fs: fs, inj: inj}
}

type errorFS struct {
	fs  FS
	inj Injector
}

func (e *errorFS) wrap(name string, f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errorFile{name: name, f: f, inj: e.inj}, nil
}

func (e *errorFS) Create(name string) (File, error) {
	if err := e.inj.MaybeError(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	return e.wrap(name, f, err)
}

func (e *errorFS) Open(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	return e.wrap(name, f, err)
}

func (e *errorFS) OpenReadWrite(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpenReadWrite, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenReadWrite(name)
	return e.wrap(name, f, err)
}

func (e *errorFS) Remove(name string) error {
	if err := e.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.inj.MaybeError(OpRemoveAll, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.inj.MaybeError(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.inj.MaybeError(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errorFS) List(dir string) ([]string, error) {
	if err := e.inj.MaybeError(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

func (e *errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.inj.MaybeError(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *errorFS) SyncDir(dir string) error {
	if err := e.inj.MaybeError(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

func (e *errorFS) Lock(name string) (io.Closer, error) {
	if err := e.inj.MaybeError(OpLock, name); err != nil {
		return nil, err
	}
	return e.fs.Lock(name)
}

type errorFile struct {
	name string
	f    File
	inj  Injector
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.inj.MaybeError(OpTruncate, f.name); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Sync() error {
	if err := f.inj.MaybeError(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *errorFile) Size() (int64, error) {
	if err := f.inj.MaybeError(OpSize, f.name); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *errorFile) Close() error {
	if err := f.inj.MaybeError(OpClose, f.name); err != nil {
		f.f.Close()
		return err
	}
	return f.f.Close()
}

func (f *errorFile) Fd() uintptr { return f.f.Fd() }
