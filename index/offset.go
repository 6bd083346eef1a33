package index

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// OffsetEntry is one offset index entry: the record batch holding Offset
// starts Position bytes into the segment's .log file.
type OffsetEntry struct {
	Offset   int64  // absolute offset
	Position uint32 // byte position in the .log file
}

// OffsetIndex is a segment's sparse offset index (.index file). See the
// package doc for the format. It is not safe for concurrent use.
type OffsetIndex struct {
	s    store
	base int64
}

// OpenOffsetIndex loads the offset index in f, whatever its size (0 for a
// new file), for the segment whose first offset is baseOffset. Entries are
// read up to the first one that is not strictly increasing in both relative
// offset and position (a zero tail, a torn write, garbage); the rest is
// dropped. When writable, the dropped bytes are removed from f and f is
// preallocated to maxBytes rounded down to a multiple of OffsetEntrySize
// (DefaultMaxBytes when maxBytes <= 0), or to the loaded entries if they are
// larger. When not writable, f is not modified and Append returns ErrFull.
// Errors come from f; bad contents are not an error.
func OpenOffsetIndex(f File, baseOffset int64, maxBytes int, writable bool) (*OffsetIndex, error) {
	if baseOffset < 0 {
		return nil, fmt.Errorf("index: negative base offset %d", baseOffset)
	}
	ix := &OffsetIndex{base: baseOffset}
	if err := ix.s.open(f, OffsetEntrySize, maxBytes, writable, validOffsetEntry); err != nil {
		return nil, err
	}
	return ix, nil
}

// validOffsetEntry reports whether cur may follow prev (nil for the first
// entry): relative offset and position strictly increase, and position 0 is
// never indexed.
func validOffsetEntry(prev, cur []byte) bool {
	rel, pos := binary.BigEndian.Uint32(cur), binary.BigEndian.Uint32(cur[4:])
	if prev == nil {
		return pos > 0
	}
	return rel > binary.BigEndian.Uint32(prev) && pos > binary.BigEndian.Uint32(prev[4:])
}

// Append adds an entry for the batch holding offset at byte position
// position of the .log file, in memory only; Flush writes it. Errors:
// ErrOffsetOutOfRange if offset-baseOffset does not fit a uint32;
// ErrNotMonotonic if offset or position is not greater than the last
// entry's, or position is 0 (the first batch is never indexed); ErrFull if
// the index has no room (IsFull).
func (ix *OffsetIndex) Append(offset int64, position uint32) error {
	rel, ok := relative(offset, ix.base)
	if !ok {
		return fmt.Errorf("%w: offset %d, base offset %d", ErrOffsetOutOfRange, offset, ix.base)
	}
	var e [OffsetEntrySize]byte
	binary.BigEndian.PutUint32(e[:], rel)
	binary.BigEndian.PutUint32(e[4:], position)
	if !validOffsetEntry(ix.s.last(), e[:]) {
		if ix.Len() == 0 {
			return fmt.Errorf("%w: offset %d at position 0, which is never indexed", ErrNotMonotonic, offset)
		}
		last := ix.Last()
		return fmt.Errorf("%w: offset %d position %d after offset %d position %d",
			ErrNotMonotonic, offset, position, last.Offset, last.Position)
	}
	if ix.s.isFull() {
		return ErrFull
	}
	ix.s.buf = append(ix.s.buf, e[:]...)
	return nil
}

func (ix *OffsetIndex) rel(i int) uint32 {
	return binary.BigEndian.Uint32(ix.s.buf[i*OffsetEntrySize:])
}

func (ix *OffsetIndex) pos(i int) uint32 {
	return binary.BigEndian.Uint32(ix.s.buf[i*OffsetEntrySize+4:])
}

// Lookup returns the entry with the largest offset <= offset, or
// {baseOffset, 0} (the segment's start) when there is none.
func (ix *OffsetIndex) Lookup(offset int64) OffsetEntry {
	target := clampRelative(offset, ix.base)
	i := sort.Search(ix.Len(), func(i int) bool { return int64(ix.rel(i)) > target })
	if i == 0 {
		return OffsetEntry{Offset: ix.base}
	}
	return ix.Entry(i - 1)
}

// LookupPosition returns the entry with the largest position <= position
// (bytes), or {baseOffset, 0} when there is none.
func (ix *OffsetIndex) LookupPosition(position uint32) OffsetEntry {
	i := sort.Search(ix.Len(), func(i int) bool { return ix.pos(i) > position })
	if i == 0 {
		return OffsetEntry{Offset: ix.base}
	}
	return ix.Entry(i - 1)
}

// Last returns the last entry, or {baseOffset, 0} when the index is empty.
func (ix *OffsetIndex) Last() OffsetEntry {
	if ix.Len() == 0 {
		return OffsetEntry{Offset: ix.base}
	}
	return ix.Entry(ix.Len() - 1)
}

// Len returns the number of entries.
func (ix *OffsetIndex) Len() int { return ix.s.len() }

// Entry returns entry i, 0 <= i < Len(); it panics otherwise.
func (ix *OffsetIndex) Entry(i int) OffsetEntry {
	e := ix.s.entry(i)
	return OffsetEntry{
		Offset:   ix.base + int64(binary.BigEndian.Uint32(e)),
		Position: binary.BigEndian.Uint32(e[4:]),
	}
}

// IsFull reports whether the index has no room for one more entry.
func (ix *OffsetIndex) IsFull() bool { return ix.s.isFull() }

// TruncateTo drops the entries with offset >= offset, in memory; the next
// Flush brings the file in line.
func (ix *OffsetIndex) TruncateTo(offset int64) {
	target := clampRelative(offset, ix.base)
	ix.s.truncate(sort.Search(ix.Len(), func(i int) bool { return int64(ix.rel(i)) >= target }))
}

// TruncateToPosition drops the entries with position >= pos (bytes), in
// memory; the next Flush brings the file in line.
func (ix *OffsetIndex) TruncateToPosition(pos uint32) {
	ix.s.truncate(sort.Search(ix.Len(), func(i int) bool { return ix.pos(i) >= pos }))
}

// Reset drops all entries, in memory; the next Flush zeroes them on file.
func (ix *OffsetIndex) Reset() { ix.s.truncate(0) }

// Flush writes the entries not yet on file with one WriteAt and, after a
// truncation, zeroes the dropped entries that were on file with one more, so
// a reopen does not bring them back. It does not sync. A failed Flush can be
// retried.
func (ix *OffsetIndex) Flush() error { return ix.s.flush() }

// Sync flushes, then makes the file durable.
func (ix *OffsetIndex) Sync() error { return ix.s.sync() }

// Trim flushes, then truncates the file to exactly SizeBytes() bytes, as
// for a segment that is no longer active. The index keeps its entries but
// can no longer grow: Append returns ErrFull (until a truncation frees
// room). It does not sync.
func (ix *OffsetIndex) Trim() error { return ix.s.trim() }

// Close flushes and closes the file. It neither trims nor syncs.
func (ix *OffsetIndex) Close() error { return ix.s.close() }

// SizeBytes returns the size in bytes of the entries: Len()*OffsetEntrySize.
func (ix *OffsetIndex) SizeBytes() int { return len(ix.s.buf) }
