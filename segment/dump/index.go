package dump

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// indexChecker checks a segment's indexes against its batches as they are
// read, in one pass: offset index entries are sorted by position and time
// index entries by offset, as the batches are. An index is dropped (set to
// nil) after its first problem, so a plain dump reports it once.
type indexChecker struct {
	d                 *dumper
	offPath, timePath string
	off               *index.OffsetIndex // nil when missing, unreadable or dropped
	tim               *index.TimeIndex
	oi, ti            int   // next entry to match
	runMax            int64 // largest batch max timestamp so far, -1 for none
	prevPos           int64 // position of the previous batch, -1 for none
}

func newIndexChecker(d *dumper) *indexChecker {
	return &indexChecker{d: d, runMax: -1, prevPos: -1}
}

// openIndexes loads the indexes next to the .log file at logPath, read-only,
// and checks that nothing but zeros follows their entries.
func (d *dumper) openIndexes(logPath string, base int64) *indexChecker {
	dir := filepath.Dir(logPath)
	c := newIndexChecker(d)
	c.offPath = filepath.Join(dir, segment.MakeFileName(base, segment.KindOffsetIndex))
	c.timePath = filepath.Join(dir, segment.MakeFileName(base, segment.KindTimeIndex))
	if c.off = d.loadOffsetIndex(c.offPath, base); d.stop {
		return c
	}
	c.tim = d.loadTimeIndex(c.timePath, base)
	return c
}

func (d *dumper) loadOffsetIndex(path string, base int64) *index.OffsetIndex {
	return loadIndex(d, path, func(f vfs.File) (*index.OffsetIndex, int, error) {
		ix, err := index.OpenOffsetIndex(f, base, 0, false)
		if err != nil {
			return nil, 0, err
		}
		return ix, ix.SizeBytes(), nil
	}, index.OffsetEntrySize)
}

func (d *dumper) loadTimeIndex(path string, base int64) *index.TimeIndex {
	return loadIndex(d, path, func(f vfs.File) (*index.TimeIndex, int, error) {
		ix, err := index.OpenTimeIndex(f, base, 0, false)
		if err != nil {
			return nil, 0, err
		}
		return ix, ix.SizeBytes(), nil
	}, index.TimeEntrySize)
}

// loadIndex opens path read-only and loads it with open, which returns the
// index and the bytes its entries take; then it checks the rest of the
// file. A missing file is a warning; it and a problem return nil.
func loadIndex[T any](d *dumper, path string, open func(vfs.File) (*T, int, error), entrySize int) *T {
	f, err := d.fs.Open(path)
	if isNotExist(err) {
		d.warnf(path, -1, "missing (the broker rebuilds it from the log)")
		return nil
	} else if err != nil {
		d.problemf(path, -1, "%v", err)
		return nil
	}
	defer f.Close()
	ix, n, err := open(f)
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return nil
	}
	d.checkTail(path, f, int64(n), entrySize)
	return ix
}

// checkTail reports non-zero bytes after an index's loaded entries, which
// start at byte from: the index loader stops at the first entry that is out
// of order (or garbage) and silently drops the rest, so such bytes mean a
// bad entry. Zeros are the preallocated space of an active segment's index.
func (d *dumper) checkTail(path string, f vfs.File, from int64, entrySize int) {
	size, err := f.Size()
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return
	}
	buf := make([]byte, 64<<10)
	for off := from; off < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		for i := range n {
			if buf[i] != 0 {
				p := off + int64(i)
				entry := (p - from) / int64(entrySize)
				at := from + entry*int64(entrySize)
				d.problemf(path, at, "index entry %d is out of order or garbage (entries must increase; only zeros may follow the last one); it and every later entry are ignored",
					at/int64(entrySize))
				return
			}
		}
		off += int64(n)
		if err != nil && err != io.EOF {
			d.problemf(path, off, "%v", err)
			return
		}
		if n == 0 {
			return
		}
	}
}

// disable stops checking the indexes (c may be nil).
func (c *indexChecker) disable() {
	if c != nil {
		c.off, c.tim = nil, nil
	}
}

// batch matches the index entries that belong to the batch at pos.
func (c *indexChecker) batch(pos int64, h *batch.Header) {
	d := c.d
	for c.off != nil && c.oi < c.off.Len() && !d.stop {
		e := c.off.Entry(c.oi)
		if int64(e.Position) > pos {
			break
		}
		at := int64(c.oi * index.OffsetEntrySize)
		if int64(e.Position) < pos {
			where := fmt.Sprintf("it falls inside the batch at position %d (the next batch starts at position %d)", c.prevPos, pos)
			if c.prevPos < 0 {
				where = fmt.Sprintf("the first batch starts at position %d", pos)
			}
			d.problemf(c.offPath, at, "offset index entry %d (offset %d, position %d) does not point at the start of a batch: %s",
				c.oi, e.Offset, e.Position, where)
			c.off = nil
			break
		}
		if e.Offset != h.BaseOffset && e.Offset != h.LastOffset() {
			d.problemf(c.offPath, at, "offset index entry %d maps offset %d to position %d, but the batch there holds offsets [%d, %d]",
				c.oi, e.Offset, e.Position, h.BaseOffset, h.LastOffset())
			c.off = nil
			break
		}
		c.oi++
	}
	c.prevPos = pos
	c.runMax = max(c.runMax, h.MaxTimestamp)
	for c.tim != nil && c.ti < c.tim.Len() && !d.stop {
		e := c.tim.Entry(c.ti)
		if e.Offset > h.LastOffset() {
			break
		}
		at := int64(c.ti * index.TimeEntrySize)
		if e.Offset < h.BaseOffset {
			d.problemf(c.timePath, at, "time index entry %d (timestamp %d, offset %d) points at an offset no batch holds", c.ti, e.Timestamp, e.Offset)
			c.tim = nil
			break
		}
		if e.Timestamp != c.runMax {
			d.problemf(c.timePath, at, "time index entry %d says the max timestamp up to offset %d is %d, but the batches up to the one holding it (offsets [%d, %d]) have max timestamp %d",
				c.ti, e.Offset, e.Timestamp, h.BaseOffset, h.LastOffset(), c.runMax)
			c.tim = nil
			break
		}
		c.ti++
	}
}

// finish reports entries left after the last batch: they point past the
// log (end is the position after the last batch, next the offset after it).
func (c *indexChecker) finish(end, next int64) {
	if c.off != nil && c.oi < c.off.Len() {
		e := c.off.Entry(c.oi)
		c.d.problemf(c.offPath, int64(c.oi*index.OffsetEntrySize), "offset index entry %d (offset %d, position %d) does not point at a batch (the log's batches end at position %d)",
			c.oi, e.Offset, e.Position, end)
		if c.d.stop {
			return
		}
	}
	if c.tim != nil && c.ti < c.tim.Len() {
		e := c.tim.Entry(c.ti)
		c.d.problemf(c.timePath, int64(c.ti*index.TimeEntrySize), "time index entry %d (timestamp %d, offset %d) points past the segment's last offset %d",
			c.ti, e.Timestamp, e.Offset, next-1)
	}
}
