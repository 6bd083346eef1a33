package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// # Transaction index (.txnindex)
//
// Kafka's TransactionIndex: one entry per aborted transaction whose abort
// marker lies in the segment, in the order the markers were written. A
// sequence of 34-byte entries, big-endian, no header:
//
//	 0       2               10              18              26              34
//	+-------+---------------+---------------+---------------+---------------+
//	|version| producerId    | firstOffset   | lastOffset    | lastStable    |
//	| int16 | int64         | int64         | int64         | Offset int64  |
//	+-------+---------------+---------------+---------------+---------------+
//
// Fields (Kafka's AbortedTxn):
//
//   - version: TxnEntryVersion (0); any other value ends the index.
//   - producerId: the producer whose transaction was aborted.
//   - firstOffset: the offset of the transaction's first record.
//   - lastOffset: the offset of the abort marker.
//   - lastStableOffset: the partition's last stable offset once the marker
//     was written.
//
// lastOffset never decreases from one entry to the next. There is no
// checksum: the index is derived from the log (its abort markers), so a
// torn or missing file is rebuilt from the batches; Open keeps the whole
// entries that pass the checks (version 0, firstOffset <= lastOffset,
// lastOffset not below the previous one) and drops the rest.

// Transaction index format constants (part of the on-disk format).
const (
	TxnEntrySize    = 34
	TxnEntryVersion = 0
)

// AbortedTxn is one entry of a transaction index. Offsets are Kafka
// offsets.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64 // the abort marker's offset
	LastStableOffset int64
}

func (a AbortedTxn) encode(b []byte) {
	be := binary.BigEndian
	be.PutUint16(b[0:], TxnEntryVersion)
	be.PutUint64(b[2:], uint64(a.ProducerID))
	be.PutUint64(b[10:], uint64(a.FirstOffset))
	be.PutUint64(b[18:], uint64(a.LastOffset))
	be.PutUint64(b[26:], uint64(a.LastStableOffset))
}

func decodeTxn(b []byte) (AbortedTxn, bool) {
	be := binary.BigEndian
	if be.Uint16(b) != TxnEntryVersion {
		return AbortedTxn{}, false
	}
	a := AbortedTxn{
		ProducerID:       int64(be.Uint64(b[2:])),
		FirstOffset:      int64(be.Uint64(b[10:])),
		LastOffset:       int64(be.Uint64(b[18:])),
		LastStableOffset: int64(be.Uint64(b[26:])),
	}
	return a, a.FirstOffset >= 0 && a.FirstOffset <= a.LastOffset
}

// ErrTxnNotMonotonic is returned (wrapped) by TxnIndex.Append when an
// entry's last offset is below the previous entry's.
var ErrTxnNotMonotonic = errors.New("index: transaction index entry not monotonic")

// TxnIndex is one segment's transaction index, held in memory whole (it
// has one entry per aborted transaction, few) and appended to its file.
// It is not safe for concurrent use.
type TxnIndex struct {
	f       File
	entries []AbortedTxn
	// torn reports that Open dropped bytes after the valid entries (a
	// torn or damaged tail): the owner may rebuild the index from the log.
	torn bool
}

// OpenTxnIndex loads f's entries: the whole, valid entries from the start
// (see the format). With writable, the file is cut to them (a torn tail
// removed); Torn reports whether anything was dropped.
func OpenTxnIndex(f File, writable bool) (*TxnIndex, error) {
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("index: size: %w", err)
	}
	ix := &TxnIndex{f: f}
	b := make([]byte, size)
	if size > 0 {
		if n, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
			return nil, fmt.Errorf("index: read transaction index: %w", err)
		}
	}
	var last int64 = -1
	n := 0
	for ; (n+1)*TxnEntrySize <= len(b); n++ {
		a, ok := decodeTxn(b[n*TxnEntrySize:])
		if !ok || a.LastOffset < last {
			break
		}
		last = a.LastOffset
		ix.entries = append(ix.entries, a)
	}
	if int64(n*TxnEntrySize) != size {
		ix.torn = true
		if writable {
			if err := f.Truncate(int64(n * TxnEntrySize)); err != nil {
				return nil, fmt.Errorf("index: truncate torn transaction index: %w", err)
			}
		}
	}
	return ix, nil
}

// Torn reports whether Open dropped a torn or invalid tail.
func (ix *TxnIndex) Torn() bool { return ix.torn }

// Append adds a at the end (written to the file, not synced). Its
// LastOffset must not be below the last entry's (ErrTxnNotMonotonic).
func (ix *TxnIndex) Append(a AbortedTxn) error {
	if n := len(ix.entries); n > 0 && a.LastOffset < ix.entries[n-1].LastOffset {
		return fmt.Errorf("%w: last offset %d after %d", ErrTxnNotMonotonic, a.LastOffset, ix.entries[n-1].LastOffset)
	}
	if a.FirstOffset < 0 || a.FirstOffset > a.LastOffset {
		return fmt.Errorf("index: aborted transaction [%d, %d] is not a range", a.FirstOffset, a.LastOffset)
	}
	if ix.f == nil {
		return errTxnNoFile
	}
	var b [TxnEntrySize]byte
	a.encode(b[:])
	if _, err := ix.f.WriteAt(b[:], int64(len(ix.entries)*TxnEntrySize)); err != nil {
		return fmt.Errorf("index: append transaction index: %w", err)
	}
	ix.entries = append(ix.entries, a)
	return nil
}

// Len returns the number of entries.
func (ix *TxnIndex) Len() int { return len(ix.entries) }

// Entries returns the entries (shared: not to be modified).
func (ix *TxnIndex) Entries() []AbortedTxn { return ix.entries }

// Scan calls fn with each entry whose transaction overlaps [from, to)
// (LastOffset >= from and FirstOffset < to), in order; Kafka's
// TransactionIndex.collectAbortedTxns. It stops at fn's first error.
func (ix *TxnIndex) Scan(from, to int64, fn func(a AbortedTxn) error) error {
	for _, a := range ix.entries {
		if a.LastOffset >= from && a.FirstOffset < to {
			if err := fn(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Collect appends to dst the entries whose transaction overlaps [from, to)
// (as Scan) and reports complete once an entry's LastStableOffset reaches
// to: every later aborted transaction, here or in a later segment, then
// starts at or after to (Kafka's TransactionIndex.collectAbortedTxns and
// its TxnIndexSearchResult.isComplete).
func (ix *TxnIndex) Collect(dst []AbortedTxn, from, to int64) ([]AbortedTxn, bool) {
	for _, a := range ix.entries {
		if a.LastOffset >= from && a.FirstOffset < to {
			dst = append(dst, a)
		}
		if a.LastStableOffset >= to {
			return dst, true
		}
	}
	return dst, false
}

// TruncateTo removes the entries whose marker is at or above offset
// (Kafka's TransactionIndex.truncateTo) and cuts the file to the rest.
func (ix *TxnIndex) TruncateTo(offset int64) error {
	n := len(ix.entries)
	for n > 0 && ix.entries[n-1].LastOffset >= offset {
		n--
	}
	if n == len(ix.entries) && !ix.torn {
		return nil
	}
	if ix.f == nil {
		return errTxnNoFile
	}
	if err := ix.f.Truncate(int64(n * TxnEntrySize)); err != nil {
		return fmt.Errorf("index: truncate transaction index: %w", err)
	}
	ix.entries = ix.entries[:n]
	ix.torn = false
	return nil
}

// Reset removes every entry.
func (ix *TxnIndex) Reset() error { return ix.TruncateTo(-1 << 62) }

// Sync makes the file durable.
func (ix *TxnIndex) Sync() error {
	if ix.f == nil {
		return errTxnNoFile
	}
	return ix.f.Sync()
}

// Close closes the file; the entries stay readable (Entries, Scan,
// Collect), and Append, TruncateTo and Sync fail until Reattach gives the
// index its file back. Closing a closed index does nothing.
func (ix *TxnIndex) Close() error {
	if ix.f == nil {
		return nil
	}
	err := ix.f.Close()
	ix.f = nil
	return err
}

// HasFile reports whether the index holds its file open (not Closed).
func (ix *TxnIndex) HasFile() bool { return ix.f != nil }

// Reattach gives a closed index its file again: f must be the same file,
// reopened read-write, holding the entries as the index left them.
func (ix *TxnIndex) Reattach(f File) { ix.f = f }

// errTxnNoFile is returned by the writes of a closed index.
var errTxnNoFile = errors.New("index: transaction index file closed")
