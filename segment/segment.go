package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/index"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// segment is one segment: a .log file of record batches with its offset and
// time indexes. All mutation happens under the owning Log's mutex.
type segment struct {
	base int64
	dir  string
	// log is the .log file: pinned open while the segment is active (or
	// being recovered or written by the cleaner), else opened on demand
	// through the Log's FileCache.
	log     *logFile
	offIdx  *index.OffsetIndex
	timeIdx *index.TimeIndex
	// The index files, kept to sync them without touching the index
	// objects from the flusher. Both are nil once a closed segment is
	// synced (closeIndexFiles): its indexes are held in memory whole.
	offFile, timeFile vfs.File

	size int64 // bytes of valid batches in the .log file
	next int64 // offset after the last batch; base when empty

	maxTs         int64 // largest batch max timestamp seen, -1 when none
	offsetOfMaxTs int64 // last offset of the first batch carrying maxTs (Kafka's shallow offset)
	firstTs       int64 // the first batch's max timestamp (segment.ms roll), -1 when none
	created       time.Time
	lastModified  time.Time // of the .log file: the last append, or the file's mtime

	bytesSinceIndex int64
	offCap, timeCap int // index capacities in entries

	// modSeq is the Log's writeSeq at the segment's last change (guarded
	// by Log.mu): a Sync whose snapshot predates it did not cover it.
	modSeq uint64

	// deleted is set when the segment is taken out of service; a Sync that
	// snapshotted it before then ignores its closed files.
	deleted atomic.Bool

	// Raft (see raft.go and raftindex.go). rpos holds one entry per
	// batch of the .log, in file order: bits 0-30 its position, bit 31
	// set for an internal batch; internals the positions of the internal
	// batches (a read splits its ranges around them). rfirst is the raft
	// index of the first batch, 0 for a segment outside the raft log
	// (compacted by the cleaner); rprev the term of entry rfirst-1.
	// rfile is the .raftindex file, written whole when the segment is
	// sealed or the log closed, kept open until it is synced.
	rpos      []uint32
	internals []int64
	rfirst    uint64
	rprev     uint64
	rfile     vfs.File

	// Transaction index (txnindex.go): txn is nil while the segment has
	// no .txnindex file; txnFile is its open file, nil once a closed
	// segment's entries are synced (they stay in memory). txnWrites
	// counts changes, txnSynced the count the last sync covered.
	txn                  *index.TxnIndex
	txnFile              vfs.File
	txnWrites, txnSynced uint64

	// unverified are the byte spans recovery trusted without reading
	// (guarded by Log.verifyMu); needsVerify is set while there are any.
	// See verifyRanges.
	unverified  []span
	needsVerify atomic.Bool
}

func (s *segment) path(kind FileKind) string {
	return filepath.Join(s.dir, MakeFileName(s.base, kind))
}

func indexCaps(cfg *Config) (off, tim int) {
	return cfg.SegmentIndexBytes / index.OffsetEntrySize, cfg.SegmentIndexBytes / index.TimeEntrySize
}

// createSegment creates the three files of a new, empty, active segment.
func createSegment(fs vfs.FS, c *FileCache, dir string, base int64, cfg *Config, now time.Time) (*segment, error) {
	return createSegmentFiles(fs, c, dir, base, cfg, now, "")
}

// createSegmentFiles creates a new segment's files with suffix after their
// names (empty, or the cleaner's ".cleaned").
func createSegmentFiles(fs vfs.FS, c *FileCache, dir string, base int64, cfg *Config, now time.Time, suffix string) (*segment, error) {
	s := &segment{base: base, dir: dir, next: base, maxTs: -1, offsetOfMaxTs: base, firstTs: -1, created: now, lastModified: now}
	s.offCap, s.timeCap = indexCaps(cfg)
	f, err := fs.Create(s.path(KindLog) + suffix)
	if err != nil {
		return nil, err
	}
	s.log = newPinnedFile(c, fs, s.path(KindLog)+suffix, f)
	if s.offFile, err = fs.Create(s.path(KindOffsetIndex) + suffix); err != nil {
		s.closeFiles()
		return nil, err
	}
	if s.timeFile, err = fs.Create(s.path(KindTimeIndex) + suffix); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.openIndexes(cfg, true); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// openSegment opens an existing segment's files. Missing index files are
// created empty and rebuilt is set, telling recovery to rescan the log.
func openSegment(fs vfs.FS, c *FileCache, dir string, base int64, cfg *Config, writable bool) (s *segment, rebuilt bool, err error) {
	s = &segment{base: base, dir: dir, next: base, maxTs: -1, offsetOfMaxTs: base, firstTs: -1}
	s.offCap, s.timeCap = indexCaps(cfg)
	f, err := fs.OpenReadWrite(s.path(KindLog))
	if err != nil {
		return nil, false, err
	}
	s.log = newPinnedFile(c, fs, s.path(KindLog), f)
	if s.size, err = s.log.Size(); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if fi, err := fs.Stat(s.path(KindLog)); err == nil {
		s.created, s.lastModified = fi.ModTime(), fi.ModTime()
	}
	open := func(kind FileKind) (vfs.File, error) {
		f, err := fs.OpenReadWrite(s.path(kind))
		if errors.Is(err, os.ErrNotExist) {
			rebuilt = true
			f, err = fs.Create(s.path(kind))
		}
		return f, err
	}
	if s.offFile, err = open(KindOffsetIndex); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if s.timeFile, err = open(KindTimeIndex); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if err := s.openIndexes(cfg, writable); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if err := s.openTxnFile(fs); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	return s, rebuilt, nil
}

func (s *segment) openIndexes(cfg *Config, writable bool) error {
	var err error
	if s.offIdx, err = index.OpenOffsetIndex(s.offFile, s.base, cfg.SegmentIndexBytes, writable); err != nil {
		return err
	}
	s.timeIdx, err = index.OpenTimeIndex(s.timeFile, s.base, cfg.SegmentIndexBytes, writable)
	return err
}

// reopenIndexesWritable makes a closed segment's indexes appendable again
// (after a tail truncation made it the active segment), reopening their
// files if closeIndexFiles closed them.
func (s *segment) reopenIndexesWritable(cfg *Config) error {
	if err := s.offIdx.Flush(); err != nil {
		return err
	}
	if err := s.timeIdx.Flush(); err != nil {
		return err
	}
	if s.offFile == nil {
		if err := s.openIndexFiles(); err != nil {
			return err
		}
	}
	return s.openIndexes(cfg, true)
}

// openIndexFiles reopens both index files read-write (they were closed by
// closeIndexFiles), through the FS the .log file came from.
func (s *segment) openIndexFiles() error {
	fs := s.log.fs
	off, err := fs.OpenReadWrite(s.path(KindOffsetIndex))
	if err != nil {
		return err
	}
	tim, err := fs.OpenReadWrite(s.path(KindTimeIndex))
	if err != nil {
		off.Close()
		return err
	}
	s.offFile, s.timeFile = off, tim
	return nil
}

// closeIndexFiles closes the index files of a closed segment whose indexes
// are on disk and synced: the index objects keep every entry in memory and
// do not touch their files again unless reopenIndexesWritable reopens
// them. It does nothing when an index has entries not yet written.
func (s *segment) closeIndexFiles() error {
	s.closeRaftFile()
	terr := s.closeTxnFile()
	if s.offFile == nil {
		return terr
	}
	if err := errors.Join(s.offIdx.Flush(), s.timeIdx.Flush()); err != nil {
		return err
	}
	err := errors.Join(terr, s.offFile.Close(), s.timeFile.Close())
	s.offFile, s.timeFile = nil, nil
	return err
}

// retire releases what a closed, synced segment need not hold: its index
// files are closed and its .log file goes to the cache.
func (s *segment) retire() {
	s.closeIndexFiles()
	s.log.unpin()
}

func (s *segment) closeFiles() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.close())
	}
	for _, f := range []vfs.File{s.offFile, s.timeFile, s.rfile} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	s.rfile = nil
	if s.txn != nil {
		errs = append(errs, s.txn.Close())
		s.txnFile = nil
	}
	return errors.Join(errs...)
}

// seal is called when the segment stops being the active one: the time
// index gets a last entry holding the segment's max timestamp (so a reopen
// knows it without a scan, as Kafka does) and both indexes are trimmed.
func (s *segment) seal() error {
	if s.maxTs >= 0 {
		if err := s.timeIdx.Append(s.maxTs, s.offsetOfMaxTs); err != nil && !errors.Is(err, index.ErrFull) {
			return err
		}
	}
	if err := s.offIdx.Trim(); err != nil {
		return err
	}
	return s.timeIdx.Trim()
}

// syncAll syncs the log and both index files.
func (s *segment) syncAll() error {
	if err := s.offIdx.Flush(); err != nil {
		return err
	}
	if err := s.timeIdx.Flush(); err != nil {
		return err
	}
	if err := errors.Join(s.log.Sync(), syncFile(s.offFile), syncFile(s.timeFile), syncFile(s.rfile), syncFile(s.txnFile)); err != nil {
		return err
	}
	s.txnSynced = s.txnWrites
	return nil
}

// full reports whether the segment cannot take a batch of n bytes whose
// last offset is lastOffset without rolling (indexes full, relative offset
// or position overflow). Byte and time limits are the Log's.
func (s *segment) full(n int64, lastOffset int64) bool {
	return s.offIdx.Len() >= s.offCap ||
		s.timeIdx.Len() >= s.timeCap-1 || // one slot is kept for seal
		lastOffset-s.base > math.MaxInt32 ||
		s.size+n > math.MaxInt32
}

// track updates the in-memory summary (max timestamp, first timestamp,
// index entries) for a batch at pos; it is shared by append and recovery.
func (s *segment) track(h *batch.Header, pos int64, cfg *Config) error {
	if h.Internal() {
		// No offset, no timestamp: internal batches are in no index but
		// the raft index (writeLocked, buildPositions).
		s.bytesSinceIndex += int64(h.Size())
		return nil
	}
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.offsetOfMaxTs = h.MaxTimestamp, h.LastOffset()
	}
	if pos == 0 || (s.firstTs < 0 && s.next == s.base) {
		s.firstTs = h.MaxTimestamp // the first data batch
	}
	if s.bytesSinceIndex > int64(cfg.IndexIntervalBytes) && !s.offIdx.IsFull() && s.timeIdx.Len() < s.timeCap-1 {
		// Kafka's convention: the entry holds the batch's last offset and
		// the batch's position (LogSegment.append). A full index (only in
		// recovery, after index settings shrank) just stops indexing: the
		// index is advisory and never a reason to cut the log; the next
		// append rolls.
		if err := s.offIdx.Append(h.LastOffset(), uint32(pos)); err != nil {
			return err
		}
		if err := s.timeIdx.Append(s.maxTs, s.offsetOfMaxTs); err != nil && !errors.Is(err, index.ErrFull) {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(h.Size())
	s.next = h.NextOffset()
	return nil
}

// headerAt reads the batch header at pos.
func (s *segment) headerAt(pos int64, buf *[batch.HeaderSize]byte) (batch.Header, error) {
	if pos+batch.HeaderSize > s.size {
		return batch.Header{}, fmt.Errorf("%w: header at position %d past segment end %d", batch.ErrCorrupt, pos, s.size)
	}
	if _, err := s.log.ReadAt(buf[:], pos); err != nil {
		return batch.Header{}, err
	}
	h, err := batch.ParseHeader(buf[:])
	if err == nil && h.Size() < batch.HeaderSize {
		err = fmt.Errorf("%w: batch at position %d has length %d", batch.ErrCorrupt, pos, h.Length)
	}
	if err == nil && pos+int64(h.Size()) > s.size {
		err = fmt.Errorf("%w: batch at position %d runs past segment end %d", batch.ErrCorrupt, pos, s.size)
	}
	return h, err
}

// find returns the position and header of the first batch in the segment
// whose last offset is >= offset; ok is false when there is none.
func (s *segment) find(offset int64, buf *[batch.HeaderSize]byte) (pos int64, h batch.Header, ok bool, err error) {
	if offset >= s.next {
		return 0, h, false, nil
	}
	e := s.offIdx.Lookup(offset)
	pos = int64(e.Position)
	if pos > 0 {
		// Index files carry no checksum: an entry must point at the batch
		// it names, or the segment is scanned from its start.
		if h, err = s.headerAt(pos, buf); err != nil || h.LastOffset() != e.Offset {
			pos = 0
		} else if h.LastOffset() >= offset {
			return pos, h, true, nil
		} else {
			pos += int64(h.Size())
		}
	}
	for pos < s.size {
		h, err = s.headerAt(pos, buf)
		if err != nil {
			return 0, h, false, err
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return 0, h, false, nil
}

// scan validates batches from pos to the end of the .log file, tracking
// each into the indexes, and truncates the file at the first invalid or
// torn batch. It returns how many bytes it cut. Each batch must start where
// the one before it ended, or, in a cleaned segment, anywhere after it if
// it starts at or below gapLimit (offset gaps below it are compaction's);
// only there may a batch be empty (a producer's last batch, or the last
// cleanable one, that the cleaner emptied).
//
// With cutOK false the file is left as it is: the summary ends before the
// first bad batch and cut reports the bytes after it.
func (s *segment) scan(pos int64, cfg *Config, gapLimit int64, cutOK bool, g *termGuard) (cut int64, reason error, err error) {
	fileSize, err := s.log.Size()
	if err != nil {
		return 0, nil, err
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.log, pos, fileSize-pos), 1<<20)
	var buf []byte
	expect := s.next
	for pos < fileSize {
		reason = func() error {
			var lenBuf [12]byte
			if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
				return fmt.Errorf("torn batch header: %w", err)
			}
			n := int64(int32(binary.BigEndian.Uint32(lenBuf[8:]))) + batch.LengthOverhead
			if n < batch.HeaderSize || pos+n > fileSize {
				return fmt.Errorf("batch length %d does not fit", n)
			}
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			copy(buf, lenBuf[:])
			if _, err := io.ReadFull(r, buf[12:]); err != nil {
				return fmt.Errorf("torn batch: %w", err)
			}
			h, err := batch.ValidateHeader(buf)
			if err != nil {
				return err
			}
			if h.Internal() {
				// Its term is checked too (the CRC covers a copy).
				if _, _, _, err := batch.ParseInternal(buf); err != nil {
					return err
				}
			}
			if err := g.check(&h); err != nil {
				return err
			}
			// The CRC does not cover baseOffset: offsets are a function of
			// the log prefix, so each batch must start where the one
			// before it ended, except in a cleaned segment.
			bad := h.BaseOffset != expect || h.NumRecords == 0
			if h.BaseOffset <= gapLimit {
				bad = h.BaseOffset < expect || (h.NumRecords == 0 && h.BaseOffset >= gapLimit)
			}
			if h.Internal() {
				// An internal batch takes no offset: it starts at the
				// next one (ValidateHeader checked its shape).
				bad = h.BaseOffset != expect && !(h.BaseOffset <= gapLimit && h.BaseOffset > expect)
			} else if h.LastOffsetDelta < 0 {
				bad = true
			}
			if bad {
				return fmt.Errorf("batch offsets [%d, %d], expected a batch starting at %d", h.BaseOffset, h.LastOffset(), expect)
			}
			if err := s.track(&h, pos, cfg); err != nil {
				return fmt.Errorf("index: %w", err)
			}
			expect = h.NextOffset()
			pos += n
			return nil
		}()
		if reason != nil {
			break
		}
	}
	s.size = pos
	if pos < fileSize && !cutOK {
		return fileSize - pos, reason, nil
	}
	if pos < fileSize {
		if err := s.log.Truncate(pos); err != nil {
			return 0, reason, err
		}
		return fileSize - pos, reason, nil
	}
	return 0, nil, nil
}

// truncateAt cuts the segment at pos (a batch boundary) and recomputes its
// summary and indexes by rescanning what remains. Tail truncation is rare
// (replica divergence), and the rescan keeps the summary exact.
func (s *segment) truncateAt(pos int64, cfg *Config) error {
	if pos < s.size && s.log.readerCount() > 0 {
		// A held ReadResult may cover bytes at or past pos: appends after
		// the truncation must not overwrite them (see replacePrefix).
		if err := s.replacePrefix(pos); err != nil {
			return err
		}
	}
	if err := s.log.Truncate(pos); err != nil {
		return err
	}
	s.truncatePositions(pos)
	// Keep the index entries below the cut and rescan from the last one:
	// the time index entries up to it hold the max timestamp so far.
	s.offIdx.TruncateToPosition(uint32(pos))
	from := int64(0)
	var buf [batch.HeaderSize]byte
	if e := s.offIdx.Last(); s.offIdx.Len() > 0 {
		if h, err := s.headerAt(int64(e.Position), &buf); err == nil && h.LastOffset() == e.Offset {
			s.timeIdx.TruncateTo(e.Offset + 1)
			firstTs := s.firstTs
			s.resetSummary()
			s.firstTs = firstTs
			if te := s.timeIdx.Last(); s.timeIdx.Len() > 0 {
				s.maxTs, s.offsetOfMaxTs = te.Timestamp, te.Offset
			}
			from, s.next = int64(e.Position), h.BaseOffset
		}
	}
	if from == 0 {
		s.offIdx.Reset()
		s.timeIdx.Reset()
		s.resetSummary()
	}
	_, reason, err := s.scan(from, cfg, math.MaxInt64, true, nil) // checked batches: a cleaned segment may have gaps
	if err != nil {
		return err
	}
	if reason != nil {
		return fmt.Errorf("segment: rescan after truncation: %w", reason)
	}
	return nil
}

// resetSummary forgets everything tracked about the segment's batches.
func (s *segment) resetSummary() {
	s.size, s.next = 0, s.base
	s.maxTs, s.offsetOfMaxTs, s.firstTs = -1, s.base, -1
	s.bytesSinceIndex = 0
}

// jump returns the index entry with the largest position such that the
// batches between end and it fit in left bytes and all lie below upper;
// its Position is 0 when there is none.
func (s *segment) jump(end, left, upper int64) index.OffsetEntry {
	limit := min(end+left, math.MaxUint32)
	e := s.offIdx.LookupPosition(uint32(limit))
	if e.Offset > upper {
		if e2 := s.offIdx.Lookup(upper); e2.Position < e.Position {
			e = e2
		}
	}
	return e
}
