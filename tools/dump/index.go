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

// indexChecker checks a segment's two indexes against its batches as they
// are read, in one pass: offset index entries are sorted by position and
// time index entries by offset, as the batches are.
type indexChecker struct {
	d                 *dumper
	offPath, timePath string
	off               *index.OffsetIndex // nil when missing or unreadable
	tim               *index.TimeIndex
	oi, ti            int   // next entry to match
	runMax            int64 // largest batch max timestamp so far, -1 for none
}

// openIndexes loads the indexes next to the .log file at logPath, read-only,
// and checks that nothing but zeros follows their entries.
func (d *dumper) openIndexes(logPath string, base int64) *indexChecker {
	dir := filepath.Dir(logPath)
	c := &indexChecker{d: d, runMax: -1,
		offPath:  filepath.Join(dir, segment.MakeFileName(base, segment.KindOffsetIndex)),
		timePath: filepath.Join(dir, segment.MakeFileName(base, segment.KindTimeIndex)),
	}
	var err error
	c.off, err = loadIndex(d, c.offPath, func(f vfs.File) (*index.OffsetIndex, int, error) {
		ix, err := index.OpenOffsetIndex(f, base, 0, false)
		if err != nil {
			return nil, 0, err
		}
		return ix, ix.SizeBytes(), nil
	}, index.OffsetEntrySize)
	if err != nil || d.stop {
		return c
	}
	c.tim, _ = loadIndex(d, c.timePath, func(f vfs.File) (*index.TimeIndex, int, error) {
		ix, err := index.OpenTimeIndex(f, base, 0, false)
		if err != nil {
			return nil, 0, err
		}
		return ix, ix.SizeBytes(), nil
	}, index.TimeEntrySize)
	return c
}

// loadIndex opens path read-only and loads it with open, which returns the
// index and the bytes its entries take; then it checks the rest of the
// file. A missing file is a warning and returns a nil index.
func loadIndex[T any](d *dumper, path string, open func(vfs.File) (*T, int, error), entrySize int) (*T, error) {
	f, err := d.fs.Open(path)
	if isNotExist(err) {
		d.warnf(path, -1, "missing (the broker rebuilds it from the log)")
		return nil, nil
	} else if err != nil {
		d.problemf(path, -1, "%v", err)
		return nil, err
	}
	defer f.Close()
	ix, n, err := open(f)
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return nil, err
	}
	d.checkTail(path, f, int64(n), entrySize)
	return ix, nil
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
			d.problemf(c.offPath, at, "offset index entry %d (offset %d, position %d) does not point at the start of a batch (the batch before position %d starts earlier or later)",
				c.oi, e.Offset, e.Position, pos)
			return
		}
		if e.Offset != h.BaseOffset && e.Offset != h.LastOffset() {
			d.problemf(c.offPath, at, "offset index entry %d maps offset %d to position %d, but the batch there holds offsets [%d, %d]",
				c.oi, e.Offset, e.Position, h.BaseOffset, h.LastOffset())
			return
		}
		c.oi++
	}
	c.runMax = max(c.runMax, h.MaxTimestamp)
	for c.tim != nil && c.ti < c.tim.Len() && !d.stop {
		e := c.tim.Entry(c.ti)
		if e.Offset > h.LastOffset() {
			break
		}
		at := int64(c.ti * index.TimeEntrySize)
		if e.Offset < h.BaseOffset {
			d.problemf(c.timePath, at, "time index entry %d (timestamp %d, offset %d) points at an offset no batch holds", c.ti, e.Timestamp, e.Offset)
			return
		}
		if e.Timestamp != c.runMax {
			d.problemf(c.timePath, at, "time index entry %d says the max timestamp up to offset %d is %d, but the batches up to the one holding it (offsets [%d, %d]) have max timestamp %d",
				c.ti, e.Offset, e.Timestamp, h.BaseOffset, h.LastOffset(), c.runMax)
			return
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
		return
	}
	if c.tim != nil && c.ti < c.tim.Len() {
		e := c.tim.Entry(c.ti)
		c.d.problemf(c.timePath, int64(c.ti*index.TimeEntrySize), "time index entry %d (timestamp %d, offset %d) points past the segment's last offset %d",
			c.ti, e.Timestamp, e.Offset, next-1)
	}
}

// indexFile prints the entries of one index file (PATH was an index).
func (d *dumper) indexFile(path string, base int64, isTime bool) {
	f, err := d.fs.Open(path)
	if err != nil {
		d.errorf("%v", err)
		return
	}
	defer f.Close()
	if !d.cfg.verify && !d.cfg.json {
		fmt.Fprintf(d.out, "Dumping %s\n", path)
	}
	if isTime {
		ix, err := index.OpenTimeIndex(f, base, 0, false)
		if err != nil {
			d.problemf(path, -1, "%v", err)
			return
		}
		for i := range ix.Len() {
			e := ix.Entry(i)
			switch {
			case d.cfg.verify:
			case d.cfg.json:
				d.emit(&jsonTimeEntry{Type: "timeIndexEntry", File: path, Entry: i, Timestamp: e.Timestamp, Offset: e.Offset})
			default:
				fmt.Fprintf(d.out, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
			}
		}
		d.checkTail(path, f, int64(ix.SizeBytes()), index.TimeEntrySize)
		return
	}
	ix, err := index.OpenOffsetIndex(f, base, 0, false)
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return
	}
	for i := range ix.Len() {
		e := ix.Entry(i)
		switch {
		case d.cfg.verify:
		case d.cfg.json:
			d.emit(&jsonOffsetEntry{Type: "offsetIndexEntry", File: path, Entry: i, Offset: e.Offset, Position: e.Position})
		default:
			fmt.Fprintf(d.out, "offset: %d position: %d\n", e.Offset, e.Position)
		}
	}
	d.checkTail(path, f, int64(ix.SizeBytes()), index.OffsetEntrySize)
}
