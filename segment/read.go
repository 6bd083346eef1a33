package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// FileRange is a byte range of a segment file holding whole record
// batches, ready to be sent with sendfile(2) (File.Fd) or copied.
type FileRange struct {
	File     vfs.File
	Position int64 // byte position in the file
	Size     int64 // bytes
}

// ReadResult is the answer to Read. It holds a reference on each file of
// its Ranges: call Release once the bytes are sent or copied (and not
// before), or the descriptors stay open.
type ReadResult struct {
	// Ranges hold whole batches, in offset order, possibly spanning
	// segments. The files stay open and readable until Release, even if
	// retention, a clean or a truncation deletes their segment meanwhile,
	// or the FileCache evicts them.
	Ranges []FileRange
	Bytes  int64 // total size of Ranges
	// FirstOffset is the base offset of the first batch returned (it may
	// be below the requested offset: batches are returned whole), or -1.
	FirstOffset int64
	// NextOffset is the offset after the last batch returned, or the
	// requested offset when nothing was returned.
	NextOffset                   int64
	LogStartOffset, LogEndOffset int64

	refs []*fileHandle // one per range, released by Release
}

// Release drops the result's references on its files (an evicted or
// deleted segment's descriptor is closed by its last one). The Ranges'
// files must not be used after it. It may be called more than once, and
// on the zero ReadResult.
func (r *ReadResult) Release() {
	for _, h := range r.refs {
		h.release()
	}
	r.refs = nil
}

// AppendTo appends the bytes of every range to dst.
func (r *ReadResult) AppendTo(dst []byte) ([]byte, error) {
	for _, fr := range r.Ranges {
		n := len(dst)
		dst = slices.Grow(dst, int(fr.Size))[:n+int(fr.Size)] // no zeroing
		got, err := fr.File.ReadAt(dst[n:], fr.Position)
		if err != nil && (err != io.EOF || int64(got) != fr.Size) {
			return dst[:n], fmt.Errorf("segment: read %d bytes at %d: %w", fr.Size, fr.Position, err)
		}
	}
	return dst, nil
}

// NoUpperBound lets Read return batches up to the log end offset.
const NoUpperBound = math.MaxInt64

// Read returns the data batches from the one containing offset onwards, whole,
// in at most maxBytes bytes, but always at least one batch when one exists
// at or after offset (KIP-74). Only batches whose last offset is below
// upperBound are returned (the high watermark, for consumers); pass
// NoUpperBound for the log end offset.
//
// Internal batches (raft's own entries) are never returned: ranges are
// split around them and a read that meets only internal batches moves on
// to the data after them (or returns nothing at the log end offset).
//
// An offset below the log start offset or above the log end offset returns
// an *OutOfRangeError (errors.Is ErrOffsetOutOfRange); an offset equal to
// the log end offset returns an empty result.
//
// Batches appended or scanned by recovery in this process were checked
// then; the first read of a span recovery trusted without reading checks
// the CRC of each batch it returns (once: see verifyRanges). In a damaged
// log (see Damage) only offsets below the damage are served: a read at or
// past it returns the *DamageError (errors.Is ErrDamaged), and a read
// that finds a bad batch returns the batches before it, or the damage
// when there are none.
func (l *Log) Read(offset int64, maxBytes int, upperBound int64) (ReadResult, error) {
	res, checks, d, err := l.read(offset, maxBytes, upperBound)
	if d != nil {
		// A header that does not parse in a closed segment: damage,
		// found by this read (recovery trusted the segment).
		l.mu.Lock()
		l.damageLocked(d)
		l.mu.Unlock()
		if err == nil && res.Bytes == 0 {
			return res, d
		}
	}
	if err != nil || checks == nil {
		return res, err
	}
	if err := l.verifyRanges(&res, checks); err != nil {
		res.Release()
		return res, err
	}
	return res, nil
}

// read is Read under the read lock, without the first-read check; checks
// names the ranges that lie in segments with unchecked spans (nil when
// none does, the common case: no allocation); d
// is damage the read found (res then holds what lies before it).
func (l *Log) read(offset int64, maxBytes int, upperBound int64) (res ReadResult, checks []uncheckedRange, d *DamageError, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	leo := l.active().next
	res = ReadResult{FirstOffset: -1, NextOffset: offset, LogStartOffset: l.logStartOffset, LogEndOffset: leo}
	if l.damage != nil && offset >= l.damage.Offset {
		// Past the damage is the damage, not out of range: the data
		// may still be on disk beyond it (a consumer told
		// OFFSET_OUT_OF_RANGE would reset its position).
		return res, nil, nil, l.damage
	}
	if offset < l.logStartOffset || offset > leo {
		return res, nil, nil, &OutOfRangeError{Offset: offset, LogStartOffset: l.logStartOffset, LogEndOffset: leo}
	}
	if l.closed {
		return res, nil, nil, ErrClosed
	}
	upper := min(upperBound, leo)
	if l.damage != nil {
		upper = min(upper, l.damage.Offset) // offsets past it returned above
	}
	budget := int64(max(maxBytes, 0))
	var buf [batch.HeaderSize]byte
	fail := func(fh *fileHandle, err error) (ReadResult, []uncheckedRange, *DamageError, error) {
		if fh != nil {
			fh.release()
		}
		res.Release()
		res.Ranges, res.Bytes, res.FirstOffset = nil, 0, -1
		return res, nil, nil, err
	}
	for i := l.segmentIndex(offset); i < len(l.segs) && offset < upper; i++ {
		s := l.segs[i]
		fh, err := s.log.acquire()
		if err != nil {
			res.Release()
			return ReadResult{FirstOffset: -1, NextOffset: res.NextOffset, LogStartOffset: res.LogStartOffset, LogEndOffset: leo}, nil, nil,
				fmt.Errorf("segment: read %s at %d: %w", s.path(KindLog), offset, err)
		}
		pos, h, ok, err := s.find(offset, &buf)
		if err != nil {
			if errors.Is(err, ErrCorrupt) && s != l.active() {
				fh.release()
				d = s.locateDamage(&buf)
				break
			}
			return fail(fh, fmt.Errorf("segment: read %s at %d: %w", s.path(KindLog), offset, err))
		}
		if !ok {
			fh.release()
			continue
		}
		// The segment is read in runs of data batches: internal batches
		// (raft's own entries) are never served, so each one ends a run
		// and is skipped; every run is one FileRange with its own
		// reference.
		stop, segDone := false, false
		for !stop && !segDone {
			for h.Internal() {
				pos += int64(h.Size())
				if pos >= s.size {
					segDone = true
					break
				}
				if h, err = s.headerAt(pos, &buf); err != nil {
					if errors.Is(err, ErrCorrupt) && s != l.active() {
						d = &DamageError{File: s.path(KindLog), Position: pos, Offset: offset, Reason: err}
						stop = true
						break
					}
					return fail(fh, fmt.Errorf("segment: read %s at position %d: %w", s.path(KindLog), pos, err))
				}
			}
			if stop || segDone {
				break
			}
			limit := s.nextInternal(pos) // this run ends there
			start, end := pos, pos
			startOffset := h.BaseOffset
			for {
				if h.LastOffset() >= upper || (res.Bytes > 0 && res.Bytes+int64(h.Size()) > budget) {
					stop = true
					break
				}
				if res.FirstOffset < 0 {
					res.FirstOffset = h.BaseOffset
				}
				end += int64(h.Size())
				res.Bytes += int64(h.Size())
				offset = h.NextOffset()
				if end >= limit {
					break
				}
				// Skip ahead over whole batches the budget and bound allow: the
				// run's tail at once, or up to an index entry (entries sit
				// on batch boundaries).
				left := budget - res.Bytes
				if left < batch.HeaderSize {
					stop = true
					break
				}
				if limit == s.size && s.next <= upper && s.size-end <= left {
					res.Bytes += s.size - end
					end, offset = s.size, s.next
					break
				}
				if e := s.jump(end, left, upper); e.Position > 0 && int64(e.Position) > end && int64(e.Position) <= limit {
					// Index files carry no checksum: jump only to an entry that
					// names the batch at its position.
					if jh, err := s.headerAt(int64(e.Position), &buf); err == nil && jh.LastOffset() == e.Offset {
						res.Bytes += int64(e.Position) - end
						end, h, offset = int64(e.Position), jh, jh.BaseOffset
						continue
					}
				}
				if h, err = s.headerAt(end, &buf); err != nil {
					if errors.Is(err, ErrCorrupt) && s != l.active() {
						d = &DamageError{File: s.path(KindLog), Position: end, Offset: offset, Reason: err}
						stop = true
						break
					}
					return fail(fh, fmt.Errorf("segment: read %s at position %d: %w", s.path(KindLog), end, err))
				}
				offset = h.BaseOffset
			}
			if end > start {
				ref := fh
				if fh == nil {
					if ref, err = s.log.acquire(); err != nil {
						return fail(nil, fmt.Errorf("segment: read %s at %d: %w", s.path(KindLog), offset, err))
					}
				}
				fh = nil
				res.Ranges = append(res.Ranges, FileRange{File: ref.f, Position: start, Size: end - start})
				res.refs = append(res.refs, ref)
				if s.needsVerify.Load() {
					checks = append(checks, uncheckedRange{i: len(res.Ranges) - 1, s: s, start: startOffset})
				}
			}
			if end >= s.size {
				segDone = true
			} else if !stop {
				// end is an internal batch's position: h is its header.
				pos = end
				if h, err = s.headerAt(pos, &buf); err != nil {
					return fail(fh, fmt.Errorf("segment: read %s at position %d: %w", s.path(KindLog), pos, err))
				}
			}
		}
		if fh != nil {
			fh.release()
		}
		if stop {
			break
		}
	}
	res.NextOffset = offset
	return res, checks, d, nil
}

// ReadBytes is Read followed by copying the batches into dst. The result
// is already released: its Ranges' files must not be used.
func (l *Log) ReadBytes(dst []byte, offset int64, maxBytes int, upperBound int64) ([]byte, ReadResult, error) {
	res, err := l.Read(offset, maxBytes, upperBound)
	if err != nil {
		return dst, res, err
	}
	dst, err = res.AppendTo(dst)
	res.Release()
	return dst, res, err
}

// segmentIndex returns the index of the segment holding offset: the last
// one whose base offset is <= offset (0 when offset is below them all).
func (l *Log) segmentIndex(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// TxnMarkerGone reports whether the transaction marker written at offset
// is no longer there whole: a clean removed it past its delete horizon
// (or emptied it to a header), or it is below the log start offset. Only
// a clean does that, and only after the transaction's data batches are
// gone, so the transaction needs no aborted-transaction entry any more;
// and it must not be handed one: a read_committed consumer told of an
// aborted transaction skips its producer's transactional batches until
// the abort marker, which no longer comes (Kafka's cleaner drops such
// entries from the cleaned .txnindex, CleanedTransactionMetadata). Reads
// only below the cleaner offset (above it nothing was cleaned): one
// header lookup.
func (l *Log) TxnMarkerGone(offset int64) (bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case offset < l.logStartOffset:
		return true, nil
	case offset >= l.firstDirty || len(l.segs) == 0 || (l.damage != nil && offset >= l.damage.Offset):
		return false, nil
	}
	var buf [batch.HeaderSize]byte
	_, h, ok, err := l.segs[l.segmentIndex(offset)].find(offset, &buf)
	switch {
	case err != nil:
		return false, err
	case !ok || h.BaseOffset > offset:
		return true, nil // in a gap
	}
	return h.Control() && h.NumRecords == 0, nil
}

// Cleans returns how many cleaned segments were swapped in since Open: a
// reader that must not straddle several cleans compares it before and
// after.
func (l *Log) Cleans() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cleans
}

// ScanHeaders calls fn with the header of every batch from the one holding
// offset from (clamped to the log start offset) to the log end offset, in
// order, skipping internal batches (raft's own entries, which carry no
// records or producer state), reading headers only (61 bytes each): for rebuilding state kept
// beside the log, such as idempotent producers' sequences. It holds the
// log's read lock throughout, so appends wait; an error from fn stops it
// and is returned. A header that does not parse, or whose batch runs past
// its segment, damages the log there (see Damage): the scan stops at it
// and returns nil.
func (l *Log) ScanHeaders(from int64, fn func(h batch.Header) error) error {
	return l.ScanHeadersControl(from, func(h batch.Header, _ []byte) error { return fn(h) })
}

// ScanHeadersControl is ScanHeaders handing, with the header of each
// control batch (a transaction marker; raft's internal batches are still
// skipped), the whole batch's bytes too (nil for other batches; a new
// slice, the caller's to keep), so that state derived from markers (a
// transaction's end, Kafka's ProducerStateManager replay) can be rebuilt
// from the log.
func (l *Log) ScanHeadersControl(from int64, fn func(h batch.Header, control []byte) error) error {
	d, err := l.scanHeaders(from, fn)
	if d != nil {
		l.mu.Lock()
		l.damageLocked(d)
		l.mu.Unlock()
	}
	return err
}

func (l *Log) scanHeaders(from int64, fn func(h batch.Header, control []byte) error) (*DamageError, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	from = max(from, l.logStartOffset)
	end := int64(math.MaxInt64)
	if l.damage != nil {
		end = l.damage.Offset
	}
	var buf [batch.HeaderSize]byte
	for i := l.segmentIndex(from); i < len(l.segs); i++ {
		s := l.segs[i]
		pos, h, ok, err := s.find(from, &buf)
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				return &DamageError{File: s.path(KindLog), Position: pos, Offset: max(from, s.base), Reason: err}, nil
			}
			return nil, err
		}
		if !ok {
			continue
		}
		for h.BaseOffset < end {
			if !h.Internal() {
				var control []byte
				if h.Control() {
					control = make([]byte, h.Size())
					if _, err := s.log.ReadAt(control, pos); err != nil {
						return nil, err
					}
				}
				if err := fn(h, control); err != nil {
					return nil, err
				}
			}
			pos += int64(h.Size())
			if pos >= s.size {
				break
			}
			next := h.NextOffset()
			if h, err = s.headerAt(pos, &buf); err != nil {
				if errors.Is(err, ErrCorrupt) {
					return &DamageError{File: s.path(KindLog), Position: pos, Offset: next, Reason: err}, nil
				}
				return nil, err
			}
		}
		from = s.next
	}
	return nil, nil
}

// locateDamage finds the first batch header of closed segment s that does
// not parse (a read's index lookup met it somewhere before its target).
func (s *segment) locateDamage(buf *[batch.HeaderSize]byte) *DamageError {
	pos, off := int64(0), s.base
	for pos < s.size {
		h, err := s.headerAt(pos, buf)
		if err != nil {
			return &DamageError{File: s.path(KindLog), Position: pos, Offset: off, Reason: err}
		}
		pos, off = pos+int64(h.Size()), h.NextOffset()
	}
	return &DamageError{File: s.path(KindLog), Position: pos, Offset: off, Reason: fmt.Errorf("%w: a batch header at or before offset %d did not parse", ErrCorrupt, off)}
}
