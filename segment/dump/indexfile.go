package dump

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/sluicemq/sluice/segment"
)

// indexFile prints the entries of one index file given as PATH and checks
// them: that they are in order, and, when the segment's .log file is next
// to it, that they point where they should (as --verify does for a folder).
func (d *dumper) indexFile(path string, base int64, isTime bool) {
	if !d.cfg.verify && !d.cfg.json {
		fmt.Fprintf(d.out, "Dumping %s\n", path)
	}
	c := newIndexChecker(d)
	var n int
	kind, jsonKind := "offset index", "offsetIndex"
	if isTime {
		kind, jsonKind = "time index", "timeIndex"
		c.timePath = path
		if c.tim = d.loadTimeIndex(path, base); c.tim == nil {
			return
		}
		n = c.tim.Len()
		for i := range n {
			e := c.tim.Entry(i)
			switch {
			case d.cfg.verify:
			case d.cfg.json:
				d.emit(&jsonTimeEntry{Type: "timeIndexEntry", File: path, Entry: i, Timestamp: e.Timestamp, Offset: e.Offset})
			default:
				fmt.Fprintf(d.out, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
			}
		}
	} else {
		c.offPath = path
		if c.off = d.loadOffsetIndex(path, base); c.off == nil {
			return
		}
		n = c.off.Len()
		for i := range n {
			e := c.off.Entry(i)
			switch {
			case d.cfg.verify:
			case d.cfg.json:
				d.emit(&jsonOffsetEntry{Type: "offsetIndexEntry", File: path, Entry: i, Offset: e.Offset, Position: e.Position})
			default:
				fmt.Fprintf(d.out, "offset: %d position: %d\n", e.Offset, e.Position)
			}
		}
	}
	if d.stop {
		return
	}
	logPath := filepath.Join(filepath.Dir(path), segment.MakeFileName(base, segment.KindLog))
	against := d.checkIndexAgainstLog(c, path, logPath, base)
	if d.stop || !d.cfg.verify {
		return
	}
	text := fmt.Sprintf("%s %s: %s, in order and checked against %s", kind, path, plural(n, "entry", "entries"), filepath.Base(logPath))
	if !against {
		text = fmt.Sprintf("%s %s: %s, in order only (not checked against batches: %s is missing)", kind, path, plural(n, "entry", "entries"), filepath.Base(logPath))
	}
	d.verified = append(d.verified, verifiedItem{text: text,
		json: &jsonVerifiedFile{Type: "verified", File: path, Kind: jsonKind, Entries: &n, CheckedAgainstLog: &against}})
}

// checkIndexAgainstLog runs c, which holds the one index at path, over the
// batch headers of the segment's .log file at logPath. It returns false,
// with a warning, when there is no such file.
func (d *dumper) checkIndexAgainstLog(c *indexChecker, path, logPath string, base int64) bool {
	f, err := d.fs.Open(logPath)
	if isNotExist(err) {
		d.warnf(path, -1, "%s is missing: the entries were checked for order only, not against the batches", filepath.Base(logPath))
		return false
	} else if err != nil {
		d.problemf(logPath, -1, "%v", err)
		return false
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		d.problemf(logPath, -1, "%v", err)
		return false
	}
	lr := newLogReader(f, size)
	next := base
	for !d.stop {
		pos, b, h, err := lr.next()
		if err == io.EOF {
			break
		}
		if err == nil {
			err = checkHeader(b, &h)
		}
		if err != nil {
			d.problemf(logPath, pos, "%v; the index entries past it are not checked (check the .log itself)", err)
			return true
		}
		c.batch(pos, &h)
		next = h.NextOffset()
	}
	if !d.stop {
		c.finish(lr.pos, next)
	}
	return true
}
