package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that remembers, besides its current state, what
// a crash would leave behind (see CrashClone). It is safe for concurrent use.
//
// Paths are cleaned with filepath.Clean and resolved from the root "/";
// relative paths are treated as if they started with "/", so "a/b", "/a/b"
// and "/a/./b/" name the same file. Directories are real nodes: a file can
// only be created in an existing directory (MkdirAll creates them).
//
// Errors mirror the OS: they are *os.PathError or *os.LinkError values
// holding a syscall.Errno, so errors.Is(err, os.ErrNotExist) and
// errors.Is(err, os.ErrExist) work as with Default. Deliberate differences
// from Default, each stricter: Open and OpenReadWrite of a directory fail
// with EISDIR, and SyncDir of a regular file fails with ENOTDIR.
//
// Files returned by Open are read-only: WriteAt and Truncate fail with
// EBADF. Fd always returns InvalidFd. Lock is exclusive within the MemFS:
// a second Lock of the same file fails until the first is closed (locks
// belong to the file node, like flock(2) to the inode, so removing and
// recreating the file frees the name).
type MemFS struct {
	// mu guards the tree: every directory's current and synced entries,
	// and every node's lock flag. It is taken before any node's mu.
	mu   sync.Mutex
	root *memNode
}

// memNode is a file or a directory. A rename moves the node, so a file
// keeps its data (current and synced) under its new name.
type memNode struct {
	isDir bool

	// Directories only, guarded by MemFS.mu: the current entries, and the
	// entries as of the last SyncDir (what a crash leaves).
	children       map[string]*memNode
	syncedChildren map[string]*memNode

	// locked is guarded by MemFS.mu.
	locked bool

	// mu guards the file data, so ReadAt, WriteAt, Sync and Size on open
	// files never take MemFS.mu.
	mu      sync.RWMutex
	data    []byte // current contents
	synced  []byte // contents as of the last Sync (what a crash leaves)
	modTime time.Time
}

func newDirNode() *memNode {
	return &memNode{
		isDir:          true,
		children:       map[string]*memNode{},
		syncedChildren: map[string]*memNode{},
		modTime:        time.Now(),
	}
}

// NewMem returns an empty in-memory FS holding only the root directory "/".
// Every MemFS is crashable: see CrashClone.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode()}
}

// NewCrashableMem is NewMem. It exists for readers who know Pebble, where
// only the crashable MemFS tracks synced state; here every MemFS does.
func NewCrashableMem() *MemFS { return NewMem() }

var _ FS = (*MemFS)(nil)

// splitPath cleans name and returns its components below the root; the
// root itself has none.
func splitPath(name string) []string {
	p := filepath.ToSlash(filepath.Clean("/" + name))
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// walkDir returns the directory named by parts. fs.mu must be held.
func (fs *MemFS) walkDir(parts []string) (*memNode, syscall.Errno) {
	n := fs.root
	for _, c := range parts {
		next, ok := n.children[c]
		if !ok {
			return nil, syscall.ENOENT
		}
		if !next.isDir {
			return nil, syscall.ENOTDIR
		}
		n = next
	}
	return n, 0
}

// lookup returns the parent directory of name, name's last component and
// the node it names (nil if absent). The root has no parent: it returns
// (nil, "", root). fs.mu must be held.
func (fs *MemFS) lookup(name string) (parent *memNode, base string, n *memNode, errno syscall.Errno) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", fs.root, 0
	}
	parent, errno = fs.walkDir(parts[:len(parts)-1])
	if errno != 0 {
		return nil, "", nil, errno
	}
	base = parts[len(parts)-1]
	return parent, base, parent.children[base], 0
}

func pathErr(op, name string, errno syscall.Errno) error {
	return &os.PathError{Op: op, Path: name, Err: errno}
}

// openFile implements Create, OpenReadWrite, Open and Lock's file creation.
func (fs *MemFS) openFile(op, name string, create, truncate bool) (*memNode, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	parent, base, n, errno := fs.lookup(name)
	if errno != 0 {
		return nil, pathErr(op, name, errno)
	}
	if n == nil {
		if !create {
			return nil, pathErr(op, name, syscall.ENOENT)
		}
		n = &memNode{modTime: time.Now()}
		parent.children[base] = n
		return n, nil
	}
	if n.isDir {
		return nil, pathErr(op, name, syscall.EISDIR)
	}
	if truncate {
		n.mu.Lock()
		n.data = nil
		n.modTime = time.Now()
		n.mu.Unlock()
	}
	return n, nil
}

// Create creates or truncates the named file and opens it read-write. The
// new directory entry is durable only after SyncDir of the parent; the
// truncation only after Sync.
func (fs *MemFS) Create(name string) (File, error) {
	n, err := fs.openFile("open", name, true, true)
	if err != nil {
		return nil, err
	}
	return &memFile{name: name, n: n, writable: true}, nil
}

// Open opens an existing file read-only.
func (fs *MemFS) Open(name string) (File, error) {
	n, err := fs.openFile("open", name, false, false)
	if err != nil {
		return nil, err
	}
	return &memFile{name: name, n: n}, nil
}

// OpenReadWrite opens an existing file read-write without truncating it.
func (fs *MemFS) OpenReadWrite(name string) (File, error) {
	n, err := fs.openFile("open", name, false, false)
	if err != nil {
		return nil, err
	}
	return &memFile{name: name, n: n, writable: true}, nil
}

// Remove removes a file or an empty directory. The removal is durable only
// after SyncDir of the parent; until then a crash brings the entry back.
func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	parent, base, n, errno := fs.lookup(name)
	switch {
	case errno != 0:
		return pathErr("remove", name, errno)
	case parent == nil:
		return pathErr("remove", name, syscall.EBUSY)
	case n == nil:
		return pathErr("remove", name, syscall.ENOENT)
	case n.isDir && len(n.children) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(parent.children, base)
	return nil
}

// RemoveAll removes name and everything below it; a missing name is not an
// error. Only name's entry in its parent changes: the removed subtree keeps
// its own entries, so a crash before SyncDir of the parent brings all of it
// back as it was durably.
func (fs *MemFS) RemoveAll(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	parent, base, n, errno := fs.lookup(name)
	switch {
	case errno == syscall.ENOENT || (errno == 0 && n == nil):
		return nil
	case errno != 0:
		return pathErr("unlinkat", name, errno)
	case parent == nil:
		return pathErr("unlinkat", name, syscall.EBUSY)
	}
	delete(parent.children, base)
	return nil
}

// Rename renames oldname to newname, replacing newname if it is a file (or
// an empty directory when oldname is a directory). The node moves, so a
// file's synced data goes with it. Both directory entries change only in
// the current state: a crash before SyncDir of the new parent loses the new
// name, and before SyncDir of the old parent keeps the old one.
func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	linkErr := func(errno syscall.Errno) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errno}
	}
	oldParent, oldBase, n, errno := fs.lookup(oldname)
	if errno == 0 && n == nil {
		errno = syscall.ENOENT
	}
	if errno != 0 {
		return linkErr(errno)
	}
	newParent, newBase, target, errno := fs.lookup(newname)
	if errno != 0 {
		return linkErr(errno)
	}
	if oldParent == nil || newParent == nil {
		return linkErr(syscall.EBUSY)
	}
	if target == n {
		return nil
	}
	if n.isDir {
		oldParts, newParts := splitPath(oldname), splitPath(newname)
		if len(newParts) > len(oldParts) &&
			strings.Join(newParts[:len(oldParts)], "/") == strings.Join(oldParts, "/") {
			return linkErr(syscall.EINVAL) // into its own subtree
		}
	}
	if target != nil {
		switch {
		case !n.isDir && target.isDir:
			return linkErr(syscall.EISDIR)
		case n.isDir && !target.isDir:
			return linkErr(syscall.ENOTDIR)
		case n.isDir && len(target.children) > 0:
			return linkErr(syscall.ENOTEMPTY)
		}
	}
	delete(oldParent.children, oldBase)
	newParent.children[newBase] = n
	return nil
}

// MkdirAll creates dir and any missing parents. Unlike other changes, each
// directory it creates is durable at once, as if the caller had synced that
// one entry of its parent. perm is ignored.
func (fs *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.root
	for _, c := range splitPath(dir) {
		next, ok := n.children[c]
		if !ok {
			next = newDirNode()
			n.children[c] = next
			n.syncedChildren[c] = next
		} else if !next.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = next
	}
	return nil
}

// List returns the sorted names of a directory's current entries.
func (fs *MemFS) List(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, errno := fs.walkDir(splitPath(dir))
	if errno != 0 {
		return nil, pathErr("open", dir, errno)
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Stat describes the named file or directory.
func (fs *MemFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, base, n, errno := fs.lookup(name)
	if errno == 0 && n == nil {
		errno = syscall.ENOENT
	}
	if errno != 0 {
		return nil, pathErr("stat", name, errno)
	}
	if base == "" {
		base = "/"
	}
	return n.stat(base), nil
}

// SyncDir makes dir's current entries durable: after it, a crash leaves
// exactly the entries dir has now. It is not recursive, and it makes no
// file data durable (see File.Sync).
func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, _, n, errno := fs.lookup(dir)
	if errno == 0 && n == nil {
		errno = syscall.ENOENT
	}
	if errno == 0 && !n.isDir {
		errno = syscall.ENOTDIR
	}
	if errno != 0 {
		return pathErr("sync", dir, errno)
	}
	n.syncedChildren = make(map[string]*memNode, len(n.children))
	for name, c := range n.children {
		n.syncedChildren[name] = c
	}
	return nil
}

// Lock creates the named file if needed (like Create, the new entry is
// durable only after SyncDir) and locks it. It fails with ErrLocked while
// another Lock of the same file node is open.
func (fs *MemFS) Lock(name string) (io.Closer, error) {
	n, err := fs.openFile("open", name, true, false)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n.locked {
		return nil, fmt.Errorf("%w: %w", ErrLocked, pathErr("lock", name, syscall.EWOULDBLOCK))
	}
	n.locked = true
	return &memLock{fs: fs, name: name, n: n}, nil
}

type memLock struct {
	fs     *MemFS
	name   string
	n      *memNode
	closed bool // guarded by fs.mu
}

func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.closed {
		return &os.PathError{Op: "close", Path: l.name, Err: os.ErrClosed}
	}
	l.closed = true
	l.n.locked = false
	return nil
}

// stat describes n under the given name. It takes n.mu.
func (n *memNode) stat(name string) os.FileInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return memFileInfo{name: name, size: int64(len(n.data)), isDir: n.isDir, modTime: n.modTime}
}

type memFileInfo struct {
	name    string
	size    int64
	isDir   bool
	modTime time.Time
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) IsDir() bool        { return fi.isDir }
func (fi memFileInfo) ModTime() time.Time { return fi.modTime }
func (fi memFileInfo) Sys() any           { return nil }
func (fi memFileInfo) Mode() os.FileMode {
	if fi.isDir {
		return os.ModeDir | 0o755
	}
	return 0o644
}

// memFile is an open MemFS file. Its methods touch only the node's data, so
// a file stays usable after its name is removed or renamed, as on Unix.
type memFile struct {
	name     string
	n        *memNode
	writable bool
	closed   atomic.Bool
}

func (f *memFile) check(op string, write bool) error {
	if f.closed.Load() {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	if write && !f.writable {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if len(p) == 0 {
		return 0, nil
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.resize(end)
	}
	copy(f.n.data[off:], p)
	f.n.modTime = time.Now()
	return len(p), nil
}

// resize sets len(n.data) to size, zero-filling any growth. n.mu must be
// held for writing.
func (n *memNode) resize(size int64) {
	old := int64(len(n.data))
	switch {
	case size <= old:
		n.data = n.data[:size]
	case size <= int64(cap(n.data)):
		n.data = n.data[:size]
		clear(n.data[old:]) // bytes left by an earlier shrink
	default:
		grown := make([]byte, size, max(size, 2*int64(cap(n.data))))
		copy(grown, n.data)
		n.data = grown
	}
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.resize(size)
	f.n.modTime = time.Now()
	return nil
}

// Sync makes the file's current data durable, as fdatasync(2) does for the
// inode whichever descriptor it is called on (so Sync on a read-only file
// also works). It does not make the file's directory entry durable.
func (f *memFile) Sync() error {
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.synced = append([]byte(nil), f.n.data...)
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

func (f *memFile) Fd() uintptr { return InvalidFd }
