package index

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// File is the subset of the storage file interface that an index needs.
// segment/vfs.File satisfies it. Sizes and offsets are in bytes.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Truncate changes the file's size in bytes; growing it fills with zeros.
	Truncate(size int64) error
	// Sync makes the file's data durable.
	Sync() error
	// Size returns the file's current size in bytes.
	Size() (int64, error)
}

var (
	// ErrFull is returned by Append when the index has no room for another
	// entry: it holds maxBytes (rounded down to whole entries), was opened
	// read-only, or was trimmed. The caller rolls the segment.
	ErrFull = errors.New("index: full")
	// ErrNotMonotonic is returned (wrapped, with the offending values) by
	// Append when the entry does not sort after the last one.
	ErrNotMonotonic = errors.New("index: entry not monotonic")
	// ErrOffsetOutOfRange is returned (wrapped) by Append when the offset is
	// below the segment's base offset or more than math.MaxUint32 above it,
	// so it cannot be stored as a relative offset. The caller rolls the
	// segment.
	ErrOffsetOutOfRange = errors.New("index: offset out of segment range")
	// ErrCorrupt is the package's corruption marker. Opening never returns
	// it: bad file contents just end the entries, and the segment rebuilds
	// them from the log. It exists so callers can mark an index that needs
	// rebuilding with this package's sentinel.
	ErrCorrupt = errors.New("index: corrupt")
)

// readChunkEntries is how many entries open reads per ReadAt.
const readChunkEntries = 4096

// store is what both indexes share: the encoded entries in memory and the
// bookkeeping that keeps the file in step with them.
//
// The file always holds buf[:written] at offset 0. Bytes [len(buf), high)
// of the file may hold entries that were dropped from memory (truncation) and
// must be zeroed before a reopen could read them. junkEnd > 0 marks a
// read-only index whose file still has unread, unvalidated bytes after the
// loaded entries, up to junkEnd; they are harmless until an entry changes
// (see truncate).
type store struct {
	f          File
	entrySize  int
	buf        []byte // encoded entries, len(buf) = Len()*entrySize
	maxEntries int    // capacity in entries
	written    int    // buf[:written] is on the file
	high       int    // file bytes [0, high) may hold entry data
	junkEnd    int64  // see above; 0 when none
	fileSize   int64  // the file's size in bytes, as this index left it
}

// open loads the entries of f, which are valid while valid(prev, cur)
// holds (prev is nil for the first entry), and, when writable, removes
// everything after them and preallocates the file to maxBytes rounded down
// to whole entries (DefaultMaxBytes when maxBytes <= 0).
func (s *store) open(f File, entrySize, maxBytes int, writable bool, valid func(prev, cur []byte) bool) error {
	s.f, s.entrySize = f, entrySize
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("index: size: %w", err)
	}
	s.fileSize = size
	if err := s.load(size, valid); err != nil {
		return err
	}
	// A lone all-zero entry is the preallocated tail, not an entry (it can
	// only pass valid in the time index; see the package doc).
	if len(s.buf) == entrySize && !slices.ContainsFunc(s.buf, func(b byte) bool { return b != 0 }) {
		s.buf = s.buf[:0]
	}
	n := len(s.buf)
	s.written, s.high = n, n
	if !writable {
		s.maxEntries = n / entrySize
		if size > int64(n) {
			s.junkEnd = size
		}
		return nil
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	s.maxEntries = max(maxBytes/entrySize, n/entrySize)
	// Drop whatever follows the entries (a zero tail, a torn write, garbage)
	// by truncating it away rather than reading or writing it, then
	// preallocate: growing a file fills it with zeros.
	if size > int64(n) {
		if err := s.truncateFile(int64(n)); err != nil {
			return err
		}
	}
	return s.truncateFile(int64(s.maxEntries * entrySize))
}

// load reads entries from the front of the file, ReadAt by ReadAt, until
// the first one that is not valid or the last whole entry.
func (s *store) load(size int64, valid func(prev, cur []byte) bool) error {
	es := int64(s.entrySize)
	end := size / es * es // whole entries only
	chunk := int64(readChunkEntries) * es
	s.buf = make([]byte, 0, min(end, chunk))
	for off := int64(0); off < end; {
		k := min(chunk, end-off)
		s.buf = slices.Grow(s.buf, int(k))[:off+k]
		got, err := s.f.ReadAt(s.buf[off:off+k], off)
		if err != nil && !(errors.Is(err, io.EOF) && int64(got) == k) {
			if !errors.Is(err, io.EOF) {
				return fmt.Errorf("index: read at %d: %w", off, err)
			}
			// The file shrank under us: use what was read.
			k = int64(got) / es * es
			end = off + k
		}
		for p := off; p < off+k; p += es {
			var prev []byte
			if p > 0 {
				prev = s.buf[p-es : p]
			}
			if !valid(prev, s.buf[p:p+es]) {
				// The rest is preallocated space: keep only what is
				// used (an empty index of an idle partition holds no
				// read chunk).
				s.buf = slices.Clip(bytes.Clone(s.buf[:p]))
				return nil
			}
		}
		off += k
		s.buf = s.buf[:off]
	}
	return nil
}

func (s *store) truncateFile(size int64) error {
	if size == s.fileSize {
		return nil
	}
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("index: truncate to %d bytes: %w", size, err)
	}
	s.fileSize = size
	return nil
}

func (s *store) len() int     { return len(s.buf) / s.entrySize }
func (s *store) isFull() bool { return s.len() >= s.maxEntries }

// entry returns the encoded entry i.
func (s *store) entry(i int) []byte {
	if i < 0 || i >= s.len() {
		invariantf("entry %d out of range [0, %d)", i, s.len())
	}
	p := i * s.entrySize
	return s.buf[p : p+s.entrySize : p+s.entrySize]
}

// last returns the encoded last entry, or nil when there is none.
func (s *store) last() []byte {
	if len(s.buf) == 0 {
		return nil
	}
	return s.buf[len(s.buf)-s.entrySize:]
}

// truncate keeps the first n entries. The file is brought in line by the
// next flush.
func (s *store) truncate(n int) {
	b := n * s.entrySize
	if b >= len(s.buf) {
		return
	}
	s.buf = s.buf[:b]
	s.written = min(s.written, b)
	// The unread tail of a read-only file was only known to end the entries
	// after the original last entry; once that entry can change, the tail
	// has to go too.
	if s.junkEnd > 0 {
		s.high = max(s.high, int(s.junkEnd))
		s.junkEnd = 0
	}
}

// flush writes the entries not yet on file with one WriteAt, then zeroes the
// dropped entries still on file with one more.
func (s *store) flush() error {
	n := len(s.buf)
	if s.written < n {
		if _, err := s.f.WriteAt(s.buf[s.written:], int64(s.written)); err != nil {
			return fmt.Errorf("index: write at %d: %w", s.written, err)
		}
		s.written = n
		s.high = max(s.high, n)
		s.fileSize = max(s.fileSize, int64(n))
	}
	if s.high > n {
		if _, err := s.f.WriteAt(make([]byte, s.high-n), int64(n)); err != nil {
			return fmt.Errorf("index: zero at %d: %w", n, err)
		}
		s.fileSize = max(s.fileSize, int64(s.high))
		s.high = n
	}
	return nil
}

func (s *store) sync() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("index: sync: %w", err)
	}
	return nil
}

// trim flushes, cuts the file to the entries and stops further growth.
func (s *store) trim() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.truncateFile(int64(len(s.buf))); err != nil {
		return err
	}
	s.maxEntries = s.len()
	s.high = len(s.buf)
	s.junkEnd = 0
	return nil
}

func (s *store) close() error {
	err := s.flush()
	if cerr := s.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("index: close: %w", cerr)
	}
	return err
}

// relative converts an absolute offset to one relative to base, reporting
// false when it does not fit a uint32.
func relative(offset, base int64) (uint32, bool) {
	d := offset - base
	if offset < base || d > math.MaxUint32 {
		return 0, false
	}
	return uint32(d), true
}

// clampRelative maps an absolute offset onto the relative range for
// searching: below base becomes -1 (before every entry), beyond the range
// becomes math.MaxUint32 (at or after every entry).
func clampRelative(offset, base int64) int64 {
	switch {
	case offset < base:
		return -1
	case offset-base > math.MaxUint32:
		return math.MaxUint32
	}
	return offset - base
}

// invariantf panics on a broken invariant: a bug in the caller or here,
// never bad file contents.
func invariantf(format string, args ...any) {
	panic(fmt.Sprintf("index: invariant broken: "+format, args...))
}
