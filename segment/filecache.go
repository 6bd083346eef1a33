package segment

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/segment/vfs"
)

// Descriptors. The active segment of a log keeps its three files open
// (.log, .index, .timeindex). A closed segment's indexes live in memory
// (the index package loads them whole), so once the segment is sealed and
// synced their files are closed; its .log file is opened on demand through
// a FileCache, a bounded LRU of open descriptors shared by the logs of a
// broker. A reader holds a reference on the open file while it reads (a
// Read's FileRanges until ReadResult.Release); a file evicted or deleted
// while referenced is closed when its last reference goes.

// DefaultOpenFilesMax is the descriptor limit of the process-wide cache
// used by logs opened without Options.FileCache.
const DefaultOpenFilesMax = 4096

// errFileClosed is returned by reads of a segment whose files were closed
// for good (the segment was deleted or its log closed).
var errFileClosed = errors.New("segment: segment file closed")

// FileCache is a bounded cache of open descriptors for closed segments'
// .log files, least recently used first out. One cache is shared by every
// Log of a broker (Options.FileCache). It is safe for concurrent use. Its
// mutex is a leaf: no other lock is taken and no IO is done while it is
// held (files are opened and closed outside it).
type FileCache struct {
	limit int

	mu   sync.Mutex
	lru  list.List // of *logFile with an open, unpinned handle; front is most recent
	refs int       // references held by readers
	// opens and evictions count since NewFileCache.
	opens, evictions int64
}

// NewFileCache returns a cache holding at most limit open descriptors
// (at least 1). Descriptors referenced by readers when they are evicted
// stay open, beyond the limit, until released.
func NewFileCache(limit int) *FileCache {
	return &FileCache{limit: max(limit, 1)}
}

// Limit returns the cache's descriptor limit.
func (c *FileCache) Limit() int { return c.limit }

// FileCacheStats is a snapshot of a FileCache.
type FileCacheStats struct {
	Open      int   // descriptors the cache holds open now, at most Limit
	Refs      int   // references readers hold (a Read's result until Release)
	Opens     int64 // files opened on demand since the cache was made
	Evictions int64 // descriptors evicted to stay within Limit
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{Open: c.lru.Len(), Refs: c.refs, Opens: c.opens, Evictions: c.evictions}
}

var (
	defaultCacheOnce sync.Once
	defaultCache     *FileCache
)

// defaultFileCache is the cache of logs opened without one.
func defaultFileCache() *FileCache {
	defaultCacheOnce.Do(func() { defaultCache = NewFileCache(DefaultOpenFilesMax) })
	return defaultCache
}

// fileHandle is one open descriptor of a segment's .log file.
type fileHandle struct {
	c *FileCache
	f vfs.File
	// refs is guarded by c.mu: one for the cache (or the pin) while the
	// handle is the file's current one, plus one per reader.
	refs int
	lf   *logFile // whose readers count the handle's reader references
}

// release drops a reader's reference; the last one closes the file.
func (h *fileHandle) release() {
	c := h.c
	c.mu.Lock()
	c.refs--
	h.refs--
	if h.lf != nil {
		h.lf.readers--
	}
	last := h.refs == 0
	c.mu.Unlock()
	if last {
		h.f.Close()
	}
}

// logFile is a segment's .log file. Pinned, it is open and never evicted
// (the active segment, one being recovered or written by the cleaner);
// otherwise it is opened read-only on demand through the cache.
type logFile struct {
	c  *FileCache
	fs vfs.FS
	// Guarded by c.mu.
	path   string // the file's current name (".deleted" once deleted)
	h      *fileHandle
	elem   *list.Element // in c.lru when h != nil and not pinned
	pinned bool
	gone   bool // closed for good
	// readers counts references acquire handed out and not yet released,
	// on any of the file's handles (a truncation under readers copies
	// rather than cuts: see segment.replacePrefix).
	readers int
	// fast is h while pinned, nil otherwise: writes and reads of the
	// active segment take no lock (the caller's locks keep a pinned file
	// from being closed under them).
	fast atomic.Pointer[fileHandle]
}

// newPinnedFile wraps an open file as a pinned logFile.
func newPinnedFile(c *FileCache, fs vfs.FS, path string, f vfs.File) *logFile {
	lf := &logFile{c: c, fs: fs, path: path, pinned: true}
	lf.h = &fileHandle{c: c, f: f, refs: 1, lf: lf}
	lf.fast.Store(lf.h)
	return lf
}

// readerCount returns the references readers hold on the file.
func (lf *logFile) readerCount() int {
	lf.c.mu.Lock()
	defer lf.c.mu.Unlock()
	return lf.readers
}

// replacePinned makes f, a new file now carrying lf's name, the pinned
// handle; readers holding the previous one keep reading the old file.
func (lf *logFile) replacePinned(f vfs.File) {
	c := lf.c
	c.mu.Lock()
	old := lf.dropLocked()
	lf.h = &fileHandle{c: c, f: f, refs: 1, lf: lf}
	lf.pinned = true
	lf.fast.Store(lf.h)
	c.mu.Unlock()
	if old != nil {
		old.f.Close()
	}
}

// acquire returns the open handle with a reference the caller releases,
// opening the file if the cache had closed it.
func (lf *logFile) acquire() (*fileHandle, error) {
	c := lf.c
	c.mu.Lock()
	for {
		if lf.gone {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", errFileClosed, lf.path)
		}
		if h := lf.h; h != nil {
			h.refs++
			c.refs++
			lf.readers++
			if lf.elem != nil {
				c.lru.MoveToFront(lf.elem)
			}
			c.mu.Unlock()
			return h, nil
		}
		// Make room first, so that opening never goes past the limit.
		victims := c.evictToLocked(c.limit - 1)
		path := lf.path
		c.mu.Unlock()
		closeHandles(victims)
		f, err := lf.fs.Open(path)
		c.mu.Lock()
		if err != nil {
			if isNotExist(err) && lf.path != path {
				continue // renamed meanwhile (a delete): try the new name
			}
			c.mu.Unlock()
			return nil, err
		}
		if lf.h != nil || lf.gone {
			// Another reader opened it, or it was closed, meanwhile.
			c.mu.Unlock()
			f.Close()
			c.mu.Lock()
			continue
		}
		h := &fileHandle{c: c, f: f, refs: 2, lf: lf}
		lf.h = h
		lf.elem = c.lru.PushFront(lf)
		c.opens++
		c.refs++
		lf.readers++
		victims = c.evictToLocked(c.limit)
		c.mu.Unlock()
		closeHandles(victims)
		return h, nil
	}
}

// evictToLocked takes least recently used handles out of the cache until
// it holds at most n, and returns those whose last reference went, to be
// closed after c.mu is released.
func (c *FileCache) evictToLocked(n int) []*fileHandle {
	var victims []*fileHandle
	for c.lru.Len() > n {
		lf := c.lru.Back().Value.(*logFile)
		c.evictions++
		if h := lf.dropLocked(); h != nil {
			victims = append(victims, h)
		}
	}
	return victims
}

// dropLocked detaches lf's handle, dropping the cache's (or pin's)
// reference; it returns the handle when that was the last one.
func (lf *logFile) dropLocked() *fileHandle {
	h := lf.h
	if h == nil {
		return nil
	}
	if lf.elem != nil {
		lf.c.lru.Remove(lf.elem)
		lf.elem = nil
	}
	lf.h = nil
	h.refs--
	if h.refs == 0 {
		return h
	}
	return nil
}

func closeHandles(hs []*fileHandle) error {
	var errs []error
	for _, h := range hs {
		errs = append(errs, h.f.Close())
	}
	return errors.Join(errs...)
}

// unpin hands a pinned file to the cache (the segment was sealed): it may
// be evicted from now on.
func (lf *logFile) unpin() {
	c := lf.c
	c.mu.Lock()
	if !lf.pinned || lf.gone {
		c.mu.Unlock()
		return
	}
	lf.pinned = false
	lf.fast.Store(nil)
	var victims []*fileHandle
	if lf.h != nil {
		lf.elem = c.lru.PushFront(lf)
		victims = c.evictToLocked(c.limit)
	}
	c.mu.Unlock()
	closeHandles(victims)
}

// pin opens the file read-write and keeps it open until unpin or close
// (a truncation made a closed segment the active one). Readers holding
// the previous handle keep it until they release it.
func (lf *logFile) pin() error {
	c := lf.c
	c.mu.Lock()
	if lf.pinned || lf.gone {
		c.mu.Unlock()
		return nil
	}
	path := lf.path
	c.mu.Unlock()
	f, err := lf.fs.OpenReadWrite(path)
	if err != nil {
		return err
	}
	c.mu.Lock()
	old := lf.dropLocked()
	lf.h = &fileHandle{c: c, f: f, refs: 1, lf: lf}
	lf.pinned = true
	lf.fast.Store(lf.h)
	c.mu.Unlock()
	if old != nil {
		old.f.Close()
	}
	return nil
}

// setPath records the file's new name after a rename.
func (lf *logFile) setPath(p string) {
	lf.c.mu.Lock()
	lf.path = p
	lf.c.mu.Unlock()
}

// close closes the file for good; a descriptor still referenced by
// readers is closed by the last release.
func (lf *logFile) close() error {
	c := lf.c
	c.mu.Lock()
	if lf.gone {
		c.mu.Unlock()
		return nil
	}
	lf.gone = true
	lf.fast.Store(nil)
	h := lf.dropLocked()
	c.mu.Unlock()
	if h != nil {
		return h.f.Close()
	}
	return nil
}

// pinnedFile returns the open file of a pinned logFile (for writes, which
// only the active or a new segment receives), or nil.
func (lf *logFile) pinnedFile() vfs.File {
	if h := lf.fast.Load(); h != nil {
		return h.f
	}
	return nil
}

// with runs fn on the open file, holding a reference meanwhile.
func (lf *logFile) with(fn func(f vfs.File) error) error {
	h, err := lf.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	return fn(h.f)
}

// ReadAt reads from the file (io.ReaderAt), opening it if need be.
func (lf *logFile) ReadAt(p []byte, off int64) (n int, err error) {
	if f := lf.pinnedFile(); f != nil {
		return f.ReadAt(p, off)
	}
	err = lf.with(func(f vfs.File) error {
		n, err = f.ReadAt(p, off)
		return err
	})
	return n, err
}

// WriteAt writes to a pinned file.
func (lf *logFile) WriteAt(p []byte, off int64) (int, error) {
	f := lf.pinnedFile()
	if f == nil {
		return 0, fmt.Errorf("segment: write to %s, which is not open for writing", lf.path)
	}
	return f.WriteAt(p, off)
}

// Truncate truncates a pinned file.
func (lf *logFile) Truncate(size int64) error {
	f := lf.pinnedFile()
	if f == nil {
		return fmt.Errorf("segment: truncate %s, which is not open for writing", lf.path)
	}
	return f.Truncate(size)
}

// Sync syncs the file's data, opening it if need be (fdatasync covers the
// inode's data whichever descriptor it is called on).
func (lf *logFile) Sync() error { return lf.with(func(f vfs.File) error { return f.Sync() }) }

// Size returns the file's size in bytes.
func (lf *logFile) Size() (n int64, err error) {
	err = lf.with(func(f vfs.File) error {
		n, err = f.Size()
		return err
	})
	return n, err
}
