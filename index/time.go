package index

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// TimeEntry is one time index entry: Timestamp is the largest timestamp seen
// in the segment up to and including the record at Offset.
type TimeEntry struct {
	Timestamp int64 // milliseconds since the Unix epoch; -1 for "none"
	Offset    int64 // absolute offset
}

// TimeIndex is a segment's sparse time index (.timeindex file). See the
// package doc for the format. It is not safe for concurrent use.
type TimeIndex struct {
	s    store
	base int64
}

// OpenTimeIndex loads the time index in f, whatever its size (0 for a new
// file), for the segment whose first offset is baseOffset. Entries are read
// up to the first one whose timestamp does not strictly increase or whose
// offset decreases; the rest is dropped. A lone all-zero entry is the zero
// tail (see the package doc). When writable,
// the dropped bytes are removed from f and f is preallocated to maxBytes
// rounded down to a multiple of TimeEntrySize (DefaultMaxBytes when
// maxBytes <= 0), or to the loaded entries if they are larger. When not
// writable, f is not modified and Append returns ErrFull. Errors come from
// f; bad contents are not an error.
func OpenTimeIndex(f File, baseOffset int64, maxBytes int, writable bool) (*TimeIndex, error) {
	if baseOffset < 0 {
		return nil, fmt.Errorf("index: negative base offset %d", baseOffset)
	}
	ix := &TimeIndex{base: baseOffset}
	if err := ix.s.open(f, TimeEntrySize, maxBytes, writable, validTimeEntry); err != nil {
		return nil, err
	}
	return ix, nil
}

// validTimeEntry reports whether cur may follow prev (nil for the first
// entry, which then follows the empty index's {-1, base}): the timestamp
// strictly increases and the relative offset does not decrease. An
// all-zero entry thus only passes as the first one; store.open drops it
// when nothing follows it (see the package doc).
func validTimeEntry(prev, cur []byte) bool {
	ts, rel := int64(binary.BigEndian.Uint64(cur)), binary.BigEndian.Uint32(cur[8:])
	if prev == nil {
		return ts > -1
	}
	return ts > int64(binary.BigEndian.Uint64(prev)) && rel >= binary.BigEndian.Uint32(prev[8:])
}

// Append records that the segment's largest timestamp (ms) is timestamp as
// of the record at offset, in memory only; Flush writes it. As Kafka's
// maybeAppend, it does nothing and returns nil when timestamp <=
// Last().Timestamp (so negative timestamps are never stored). Errors:
// ErrOffsetOutOfRange if offset-baseOffset does not fit a uint32;
// ErrNotMonotonic if offset < Last().Offset; ErrFull if the entry would be
// appended but the index has no room (IsFull).
func (ix *TimeIndex) Append(timestamp, offset int64) error {
	rel, ok := relative(offset, ix.base)
	if !ok {
		return fmt.Errorf("%w: offset %d, base offset %d", ErrOffsetOutOfRange, offset, ix.base)
	}
	last := ix.Last()
	if offset < last.Offset {
		return fmt.Errorf("%w: offset %d before last offset %d", ErrNotMonotonic, offset, last.Offset)
	}
	if timestamp <= last.Timestamp {
		return nil
	}
	if ix.s.isFull() {
		return ErrFull
	}
	ix.s.buf = binary.BigEndian.AppendUint64(ix.s.buf, uint64(timestamp))
	ix.s.buf = binary.BigEndian.AppendUint32(ix.s.buf, rel)
	return nil
}

func (ix *TimeIndex) ts(i int) int64 {
	return int64(binary.BigEndian.Uint64(ix.s.buf[i*TimeEntrySize:]))
}

func (ix *TimeIndex) rel(i int) uint32 {
	return binary.BigEndian.Uint32(ix.s.buf[i*TimeEntrySize+8:])
}

// Lookup returns the entry with the largest timestamp <= timestamp (ms), or
// {-1, baseOffset} when there is none. As in Kafka, callers then scan the
// log from the batch holding the returned offset for the first record with a
// timestamp >= timestamp: no earlier batch holds one.
func (ix *TimeIndex) Lookup(timestamp int64) TimeEntry {
	i := sort.Search(ix.Len(), func(i int) bool { return ix.ts(i) > timestamp })
	if i == 0 {
		return TimeEntry{Timestamp: -1, Offset: ix.base}
	}
	return ix.Entry(i - 1)
}

// Last returns the last entry, or {-1, baseOffset} when the index is empty.
func (ix *TimeIndex) Last() TimeEntry {
	if ix.Len() == 0 {
		return TimeEntry{Timestamp: -1, Offset: ix.base}
	}
	return ix.Entry(ix.Len() - 1)
}

// Len returns the number of entries.
func (ix *TimeIndex) Len() int { return ix.s.len() }

// Entry returns entry i, 0 <= i < Len(); it panics otherwise.
func (ix *TimeIndex) Entry(i int) TimeEntry {
	e := ix.s.entry(i)
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(e)),
		Offset:    ix.base + int64(binary.BigEndian.Uint32(e[8:])),
	}
}

// IsFull reports whether the index has no room for one more entry.
func (ix *TimeIndex) IsFull() bool { return ix.s.isFull() }

// TruncateTo drops the entries with offset >= offset, in memory; the next
// Flush brings the file in line.
func (ix *TimeIndex) TruncateTo(offset int64) {
	target := clampRelative(offset, ix.base)
	ix.s.truncate(sort.Search(ix.Len(), func(i int) bool { return int64(ix.rel(i)) >= target }))
}

// Reset drops all entries, in memory; the next Flush zeroes them on file.
func (ix *TimeIndex) Reset() { ix.s.truncate(0) }

// Flush writes the entries not yet on file with one WriteAt and, after a
// truncation, zeroes the dropped entries that were on file with one more, so
// a reopen does not bring them back. It does not sync. A failed Flush can be
// retried.
func (ix *TimeIndex) Flush() error { return ix.s.flush() }

// Sync flushes, then makes the file durable.
func (ix *TimeIndex) Sync() error { return ix.s.sync() }

// Trim flushes, then truncates the file to exactly SizeBytes() bytes, as for
// a segment that is no longer active. The index keeps its entries but can no
// longer grow: Append returns ErrFull for an entry it would store (until a
// truncation frees room). It does not sync.
func (ix *TimeIndex) Trim() error { return ix.s.trim() }

// Close flushes and closes the file. It neither trims nor syncs.
func (ix *TimeIndex) Close() error { return ix.s.close() }

// SizeBytes returns the size in bytes of the entries: Len()*TimeEntrySize.
func (ix *TimeIndex) SizeBytes() int { return len(ix.s.buf) }
