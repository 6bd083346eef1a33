package dump

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// logReader reads the batches of a .log file front to back. It checks only
// the framing: a batch length that fits the file and a batch header with
// magic 2. A framing error ends the file: what follows cannot be found.
type logReader struct {
	r    *bufio.Reader
	size int64 // file size in bytes
	pos  int64 // position of the next batch
	buf  []byte
}

func newLogReader(f vfs.File, size int64) *logReader {
	return &logReader{r: bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20), size: size}
}

// errTorn marks a batch cut short by the end of the file.
var errTorn = errors.New("torn batch")

// next returns the batch at lr.pos and its header, io.EOF at the end of the
// file, or a framing error. b is valid until the next call.
func (lr *logReader) next() (pos int64, b []byte, h batch.Header, err error) {
	pos = lr.pos
	left := lr.size - pos
	if left <= 0 {
		return pos, nil, h, io.EOF
	}
	if left < batch.HeaderSize {
		return pos, nil, h, fmt.Errorf("%w: %d bytes at the end of the file, a batch header needs %d", errTorn, left, batch.HeaderSize)
	}
	var head [batch.LengthOverhead]byte
	if _, err := io.ReadFull(lr.r, head[:]); err != nil {
		return pos, nil, h, fmt.Errorf("read: %w", err)
	}
	length := int32(binary.BigEndian.Uint32(head[batch.OffLength:]))
	n := int64(length) + batch.LengthOverhead
	switch {
	case n < batch.HeaderSize:
		return pos, nil, h, fmt.Errorf("%w: batchLength %d is below the minimum %d", batch.ErrCorrupt, length, batch.HeaderSize-batch.LengthOverhead)
	case n > left:
		return pos, nil, h, fmt.Errorf("%w: batchLength %d means %d bytes, %d left in the file", errTorn, length, n, left)
	}
	if int64(cap(lr.buf)) < n {
		lr.buf = make([]byte, n)
	}
	b = lr.buf[:n]
	copy(b, head[:])
	if _, err := io.ReadFull(lr.r, b[batch.LengthOverhead:]); err != nil {
		return pos, nil, h, fmt.Errorf("read: %w", err)
	}
	if h, err = batch.ParseHeader(b); err != nil {
		return pos, nil, h, err
	}
	lr.pos += n
	return pos, b, h, nil
}

// prevSegment is the segment before the one being read, in a folder.
type prevSegment struct {
	path string // "" for none
	next int64  // the offset after its last batch; -1 when unknown
}

// logFile dumps (or verifies) one .log file whose base offset, from its
// name, is base (-1 when unknown); prev is the folder's previous segment.
// It returns the offset after the file's last batch (base for an empty
// file), or -1 when a problem leaves it unknown.
func (d *dumper) logFile(path string, base int64, prev prevSegment) (next int64) {
	d.segments++
	f, err := d.fs.Open(path)
	if err != nil {
		d.errorf("%v", err)
		return -1
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		d.problemf(path, -1, "%v", err)
		return -1
	}
	switch {
	case d.cfg.verify:
	case d.cfg.json:
		d.emit(&jsonSegment{Type: "segment", File: path, BaseOffset: base, Size: size})
	default:
		fmt.Fprintf(d.out, "Dumping %s\n", path)
		if base >= 0 {
			fmt.Fprintf(d.out, "Log starting offset: %d\n", base)
		}
	}
	if d.checkSegmentStart(path, base, prev); d.stop {
		return -1
	}
	next = base
	var ic *indexChecker
	d.raft = nil
	if base >= 0 {
		if ic = d.openIndexes(path, base); d.stop {
			return -1
		}
		d.openRaftIndex(path, base)
	}
	lr := newLogReader(f, size)
	for !d.stop {
		pos, b, h, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			d.problemf(path, pos, "%v; the rest of the file (%d bytes) is not read", err, size-pos)
			return -1
		}
		d.batch(path, base, pos, b, &h, &next, ic)
	}
	if ic != nil && !d.stop {
		ic.finish(lr.pos, next)
	}
	if r := d.raft; r != nil && !d.stop && (r.bad || r.n != len(r.f.Pos)) {
		d.warnf(r.path, -1, "the raft index does not match the .log's %d batches (an active segment's is written at roll and close; the broker rebuilds it)", r.n)
	}
	d.raft = nil
	return next
}

// checkSegmentStart checks that a segment's base offset is not below the
// offset after the previous segment. A gap is fine: log compaction leaves
// them (a cleaned segment keeps its base offset while its last batches may
// be gone).
func (d *dumper) checkSegmentStart(path string, base int64, prev prevSegment) {
	if prev.path == "" || prev.next < 0 || base < 0 {
		return
	}
	if base < prev.next {
		d.problemf(path, 0, "segment base offset %d overlaps the previous segment %s, which holds offsets up to %d: offsets go backwards",
			base, filepath.Base(prev.path), prev.next-1)
	}
}

// checkHeader is batch.ValidateHeader, except that a CRC mismatch is
// reported in decimal, as the dump prints the crc field.
func checkHeader(b []byte, h *batch.Header) error {
	if crc := batch.Checksum(b); crc != h.CRC {
		return fmt.Errorf("%w: crc mismatch: the header says %d, the bytes give %d", batch.ErrCorrupt, h.CRC, crc)
	}
	_, err := batch.ValidateHeader(b)
	return err
}

// batch handles one framed batch at pos. next is the offset expected after
// the previous batch (-1 when unknown), advanced past this batch. After a
// problem that makes the offsets untrustworthy, next becomes -1 and the
// segment's indexes are no longer checked, so one problem is reported
// once, not again at every later batch.
func (d *dumper) batch(path string, base, pos int64, b []byte, h *batch.Header, next *int64, ic *indexChecker) {
	herr := checkHeader(b, h)
	d.batches++
	raftIndex := d.raft.index(path, pos)
	if h.Internal() {
		d.internalBatch(path, pos, b, h, herr, next, raftIndex)
		return
	}
	d.records += int64(h.NumRecords)
	lost := func() { *next = -1; ic.disable() }
	if !d.cfg.verify {
		d.printBatch(path, pos, h, herr == nil, raftIndex)
	}
	if herr != nil {
		d.problemf(path, pos, "%v", herr)
		lost()
		return
	}
	switch {
	case d.cfg.verify:
		// Iterate checks the CRC and every record. Batch.Validate would
		// also want the offset deltas a producer writes (0..n-1), which
		// batches rewritten by the log cleaner no longer have.
		if _, err := batch.Iterate(b, func(*batch.Record) error { return nil }); err != nil {
			d.problemf(path, pos, "%v", err)
			return
		}
	case d.cfg.records:
		if _, err := batch.Iterate(b, func(r *batch.Record) error {
			d.printRecord(path, pos, h, r)
			return nil
		}); err != nil {
			d.problemf(path, pos, "%v", err) // the header, and so the offsets, are sound
		}
	}
	switch {
	case h.LastOffsetDelta < 0:
		d.problemf(path, pos, "batch at offset %d holds no offsets (lastOffsetDelta %d)", h.BaseOffset, h.LastOffsetDelta)
		lost()
		return
	case *next >= 0 && h.BaseOffset < *next:
		d.problemf(path, pos, "batch offsets [%d, %d] go backwards or overlap: the previous batch (or the segment's base offset) puts the next offset at %d",
			h.BaseOffset, h.LastOffset(), *next)
		lost()
		return
	}
	// A gap (h.BaseOffset > *next) is fine: compaction leaves them.
	if base >= 0 && h.LastOffset()-base > math.MaxInt32 {
		d.problemf(path, pos, "batch last offset %d is more than 2^31-1 above the segment base offset %d", h.LastOffset(), base)
		lost()
		return
	}
	*next = h.NextOffset()
	if ic != nil {
		ic.batch(pos, h)
	}
}
