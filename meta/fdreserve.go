package meta

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The descriptor reserve. Pebble treats a file it cannot create while
// rotating its write-ahead log as fatal, and in that path its panic
// escapes with its mutex already unlocked ("sync: unlock of unlocked
// mutex", which no recover catches): a broker whose connections or
// partitions used up RLIMIT_NOFILE was killed by its next metadata write.
// So the store holds a few spare descriptors (/dev/null opened), and
// Pebble runs on an FS whose opening calls, on EMFILE or ENFILE, give one
// spare back to the process and retry: Pebble's file then takes its
// place. The spares are taken again by later calls, when descriptors are
// free.

const fdSpares = 4

type fdReserveFS struct {
	vfs.FS
	mu        sync.Mutex
	spares    []*os.File
	onRelease func()                   // tests: a spare was given back
	openSpare func() (*os.File, error) // default: os.Open(os.DevNull)
}

func newFDReserveFS(fs vfs.FS) *fdReserveFS {
	r := &fdReserveFS{FS: fs, openSpare: func() (*os.File, error) { return os.Open(os.DevNull) }}
	r.refill()
	return r
}

// refill takes spares up to fdSpares while descriptors are free.
func (r *fdReserveFS) refill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.spares) < fdSpares {
		f, err := r.openSpare()
		if err != nil {
			return
		}
		r.spares = append(r.spares, f)
	}
}

// release gives one spare back; false when none is left.
func (r *fdReserveFS) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spares) == 0 {
		return false
	}
	r.spares[len(r.spares)-1].Close()
	r.spares = r.spares[:len(r.spares)-1]
	if r.onRelease != nil {
		r.onRelease()
	}
	return true
}

// check refuses a change (before it reaches Pebble) while the spares
// cannot be topped up: the process is out of descriptors, and a WAL
// rotation in that change could find none. Once descriptors return, so do
// the spares and the changes.
func (r *fdReserveFS) check() error {
	r.refill()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spares) < fdSpares {
		return fmt.Errorf("%w: the process is out of file descriptors (RLIMIT_NOFILE); metadata changes resume once some are free", ErrStorage)
	}
	return nil
}

// Close gives every spare back.
func (r *fdReserveFS) Close() {
	for r.release() {
	}
}

func tooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// retry runs open, once more after releasing a spare when it ran out of
// descriptors; otherwise it tops the spares up.
func retry[T any](r *fdReserveFS, open func() (T, error)) (T, error) {
	v, err := open()
	for err != nil && tooManyFiles(err) && r.release() {
		v, err = open()
	}
	if err == nil {
		r.refill()
	}
	return v, err
}

func (r *fdReserveFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return retry(r, func() (vfs.File, error) { return r.FS.Create(name, c) })
}

func (r *fdReserveFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return retry(r, func() (vfs.File, error) { return r.FS.Open(name, opts...) })
}

func (r *fdReserveFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return retry(r, func() (vfs.File, error) { return r.FS.OpenReadWrite(name, c, opts...) })
}

func (r *fdReserveFS) OpenDir(name string) (vfs.File, error) {
	return retry(r, func() (vfs.File, error) { return r.FS.OpenDir(name) })
}

func (r *fdReserveFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return retry(r, func() (vfs.File, error) { return r.FS.ReuseForWrite(oldname, newname, c) })
}

func (r *fdReserveFS) Lock(name string) (io.Closer, error) {
	return retry(r, func() (io.Closer, error) { return r.FS.Lock(name) })
}

func (r *fdReserveFS) List(dir string) ([]string, error) {
	return retry(r, func() ([]string, error) { return r.FS.List(dir) })
}

func (r *fdReserveFS) Unwrap() vfs.FS { return r.FS }
