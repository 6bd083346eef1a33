package segment

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// RepairPlan is what TruncateFolder does (or, with apply false, would
// do) to a partition folder.
type RepairPlan struct {
	// Segment is the .log file cut, and Position the byte position it is
	// cut at (its size is kept when nothing of it goes).
	Segment  string
	Position int64
	// Bytes is how many bytes of Segment go.
	Bytes int64
	// EndOffset is the log end offset after the cut: the first offset
	// not kept. It is below the requested offset when a batch holding the
	// requested offset, or a bad batch before it, starts lower.
	EndOffset int64
	// Damage is the check a batch before the requested offset failed
	// (the cut is there), or nil.
	Damage error
	// Removed are the later segments' files that go, whole.
	Removed []string
}

// TruncateFolder cuts the partition log in dir (which no Log may have
// open) so that it ends before offset: the segment holding offset is cut
// at the first batch that holds offset or comes after it, or at the first
// batch before it that fails its checks (length, CRC, offsets), and every
// later segment is removed. This is an operator's repair of a damaged log
// (see DamageError): it deletes data, so it only does so with apply set;
// otherwise it reports what it would do. The cut segment's indexes are
// removed (the next Open rebuilds them) and the checkpoint is rewritten
// as after an unclean shutdown, with the recovery point at or below the
// cut segment, so the next Open rescans it. An offset below the first
// segment's base offset is an error.
func TruncateFolder(fs vfs.FS, dir string, offset int64, apply bool) (RepairPlan, error) {
	var plan RepairPlan
	names, err := fs.List(dir)
	if err != nil {
		return plan, err
	}
	var bases []int64
	for _, name := range names {
		if n, ok := ParseFileName(name); ok && !n.Deleted && n.Kind == KindLog {
			bases = append(bases, n.Base)
		}
	}
	slices.Sort(bases)
	if len(bases) == 0 {
		return plan, fmt.Errorf("segment: %s holds no segment", dir)
	}
	if offset < bases[0] {
		return plan, fmt.Errorf("segment: offset %d is below the first segment's base offset %d", offset, bases[0])
	}
	i, found := slices.BinarySearch(bases, offset)
	if !found {
		i--
	}
	base := bases[i]
	plan.Segment = filepath.Join(dir, MakeFileName(base, KindLog))
	f, err := fs.Open(plan.Segment)
	if err != nil {
		return plan, err
	}
	size, err := f.Size()
	if err == nil {
		plan.Position, plan.EndOffset, plan.Damage, err = cutPoint(f, size, base, offset)
	}
	f.Close()
	if err != nil {
		return plan, err
	}
	plan.Bytes = size - plan.Position
	for _, b := range bases[i+1:] {
		for _, k := range []FileKind{KindLog, KindOffsetIndex, KindTimeIndex, KindRaftIndex, KindTxnIndex} {
			name := filepath.Join(dir, MakeFileName(b, k))
			if _, err := fs.Stat(name); err == nil {
				plan.Removed = append(plan.Removed, name)
			}
		}
	}
	if !apply {
		return plan, nil
	}
	ckpt, haveCkpt, err := ReadCheckpoint(fs, dir)
	if err != nil {
		return plan, err
	}
	// The checkpoint first: from here on the next Open rescans the cut
	// segment, whatever else a crash leaves done.
	rp := base
	if haveCkpt {
		rp = min(ckpt.RecoveryPoint, base)
	}
	lso := min(ckpt.LogStartOffset, plan.EndOffset)
	nc := ckpt // the raft fields stay: the cut keeps the log's start
	nc.LogStartOffset, nc.RecoveryPoint, nc.CleanShutdown, nc.CleanerOffset = lso, rp, false, min(ckpt.CleanerOffset, plan.EndOffset)
	if err := writeCheckpoint(fs, dir, nc); err != nil {
		return plan, err
	}
	for _, name := range slices.Backward(plan.Removed) {
		if err := fs.Remove(name); err != nil && !isNotExist(err) {
			return plan, err
		}
	}
	if plan.Bytes > 0 {
		w, err := fs.OpenReadWrite(plan.Segment)
		if err != nil {
			return plan, err
		}
		err = w.Truncate(plan.Position)
		if err == nil {
			err = w.Sync()
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return plan, err
		}
	}
	for _, k := range []FileKind{KindOffsetIndex, KindTimeIndex, KindRaftIndex} {
		if err := fs.Remove(filepath.Join(dir, MakeFileName(base, k))); err != nil && !isNotExist(err) {
			return plan, err
		}
	}
	// The transaction index cannot be rebuilt from the .log alone (its
	// owner's producer state derives it): keep the entries below the cut.
	if err := truncateTxnFile(fs, filepath.Join(dir, MakeFileName(base, KindTxnIndex)), plan.EndOffset); err != nil {
		return plan, err
	}
	return plan, fs.SyncDir(dir)
}

// cutPoint walks the batches of a segment file from its start and returns
// the position of the first one whose base offset is >= offset or whose
// last offset is (a batch goes whole), or of the first that fails its
// checks (damage says why); end is the offset the cut leaves as the log
// end offset.
func cutPoint(f vfs.File, size, base, offset int64) (pos, end int64, damage error, err error) {
	end = base
	var buf []byte
	for pos < size {
		var hdr [batch.HeaderSize]byte
		if pos+batch.HeaderSize > size {
			return pos, end, fmt.Errorf("%w: torn batch header at position %d", ErrCorrupt, pos), nil
		}
		if _, err := f.ReadAt(hdr[:], pos); err != nil && err != io.EOF {
			return 0, 0, nil, err
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil || h.Size() < batch.HeaderSize || pos+int64(h.Size()) > size {
			return pos, end, fmt.Errorf("%w: batch at position %d has a bad length or runs past the end", ErrCorrupt, pos), nil
		}
		if cap(buf) < h.Size() {
			buf = make([]byte, h.Size())
		}
		buf = buf[:h.Size()]
		if _, err := f.ReadAt(buf, pos); err != nil && err != io.EOF {
			return 0, 0, nil, err
		}
		if _, err := batch.ValidateHeader(buf); err != nil {
			return pos, end, err, nil
		}
		if h.BaseOffset < end {
			return pos, end, fmt.Errorf("%w: batch at position %d starts at offset %d, below %d", ErrCorrupt, pos, h.BaseOffset, end), nil
		}
		if h.LastOffset() >= offset {
			return pos, h.BaseOffset, nil, nil
		}
		pos, end = pos+int64(h.Size()), h.NextOffset()
	}
	return pos, end, nil, nil
}
