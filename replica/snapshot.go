package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/segment/vfs"
)

// Producer snapshots (Kafka's ProducerStateManager snapshot files) keep the
// idempotent producers' state across what removes batches: a Partition
// writes one at every segment roll (at the new segment's base offset) and
// at Close (at the log end offset). Open loads the newest snapshot at or
// below the log end offset and replays only the batches at or above it, so
// a producer whose batches retention or DeleteRecords removed is still
// known after a restart (its epoch fenced, its retries deduplicated), and
// opening a long log does not scan it whole. Retention never deletes the
// active segment, so the newest snapshot's offset is never below the log
// start offset of a log that was shut down or rolled since it was written.
//
// Format: the file is named <offset>.snapshot, the offset zero-padded to 20
// digits (Kafka's name), and holds the state of every batch below that
// offset. Integers are big-endian:
//
//	magic    uint32  0x534c5053 ("SLPS")
//	version  uint16  3 (1 and 2 are still read)
//	crc      uint32  CRC-32C (Castagnoli) of every byte after this field
//	count    uint32  number of producers
//	producer × count:
//	  producerId     int64
//	  epoch          int16
//	  lastTimestamp  int64   ms; the newest batch's (or marker's) max timestamp
//	  txnFirst       int64   version 2 on: first offset of the ongoing transaction, -1 none
//	  coordEpoch     int32   version 2 on: coordinator epoch of the last marker, -1 none
//	  batches        uint8   1 to 5 (version 2 on: 0 to 5), oldest first
//	  batch × batches:
//	    firstSeq, lastSeq        int32
//	    baseOffset, lastOffset   int64
//	    logAppendTime            int64  ms, or -1
//	aborted  uint32  version 2 only: number of aborted transactions
//	aborted × count (version 2 only), oldest marker first:
//	  producerId, firstOffset, lastOffset, lastStableOffset  int64
//
// Version 3 (written since the segments keep Kafka's .txnindex, see
// segment/txnindex.go) is version 2 without the aborted transactions: a
// snapshot file holds producers only, and the aborted transactions are
// in the transaction index of the segment of each marker. A snapshot's
// offset promises that those below it are durable there
// (Partition.snapshotLocked syncs them first); loadProducers drops the
// entries at or above it and adds them again while it replays.
//
// Version 2 listed the aborted transactions whose marker is below the
// snapshot's offset (and at or above the log start offset when it was
// written). Loading one (a log written before the .txnindex) adds its
// list to the transaction indexes, which had none. A raft snapshot's
// producer state is still sent as version 2 (snapMetadata), its list the
// leader's aborted transactions below the snapshot, so that a follower
// installing a compacted topic's segments gets their entries (and a
// follower of the previous version reads it as before). A version 1
// snapshot loads with no transaction ongoing and none aborted.
//
// A snapshot is written to <name>.tmp, synced and renamed; a file that
// fails its checks is logged and removed, and Open falls back to an older
// one (or the log start offset). Snapshots above the log end offset (the
// log lost an unsynced tail in a crash) are removed.

const (
	snapshotExt     = ".snapshot"
	snapshotTmpExt  = ".snapshot.tmp"
	snapshotMagic   = 0x534c5053
	snapshotVersion = 3
	// snapshotVersionAborted is the version that lists aborted
	// transactions (a raft snapshot's producer state).
	snapshotVersionAborted = 2
	snapshotDigits         = 20
	snapshotHeader         = 4 + 2 + 4 // magic, version, crc
	snapshotBatch          = 4 + 4 + 8 + 8 + 8
	snapshotAborted        = 4 * 8
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// errBadSnapshot reports a snapshot file that fails its checks.
	errBadSnapshot = errors.New("replica: bad producer snapshot")
)

func snapshotName(offset int64) string {
	return fmt.Sprintf("%0*d%s", snapshotDigits, offset, snapshotExt)
}

// parseSnapshotName returns the offset of a snapshot file name.
func parseSnapshotName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, snapshotExt)
	if !ok || len(digits) != snapshotDigits {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, err == nil && off >= 0
}

// encodeSnapshot returns ps in the snapshot format (version 3),
// producers in id order.
func encodeSnapshot(ps producerState) []byte { return encodeSnapshotVersion(ps, nil, snapshotVersion) }

// encodeSnapshotTxn returns ps and the aborted transactions in the
// version 2 format (a raft snapshot's producer state), producers in id
// order.
func encodeSnapshotTxn(ps producerState, aborted []abortedTxn) []byte {
	return encodeSnapshotVersion(ps, aborted, snapshotVersionAborted)
}

// encodeSnapshotVersion encodes ps as version v (2 or 3), with aborted
// in version 2.
func encodeSnapshotVersion(ps producerState, aborted []abortedTxn, v uint16) []byte {
	ids := make([]int64, 0, len(ps))
	for id := range ps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := make([]byte, snapshotHeader, snapshotHeader+8+len(ids)*(31+cachedBatches*snapshotBatch)+len(aborted)*snapshotAborted)
	binary.BigEndian.PutUint32(b[0:], snapshotMagic)
	binary.BigEndian.PutUint16(b[4:], v)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := ps[id]
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirst))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = append(b, byte(len(e.batches)))
		for _, pb := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.baseOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.logAppendTime))
		}
	}
	if v != snapshotVersionAborted {
		binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[snapshotHeader:], castagnoli))
		return b
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(aborted)))
	for _, a := range aborted {
		b = binary.BigEndian.AppendUint64(b, uint64(a.pid))
		b = binary.BigEndian.AppendUint64(b, uint64(a.first))
		b = binary.BigEndian.AppendUint64(b, uint64(a.last))
		b = binary.BigEndian.AppendUint64(b, uint64(a.lso))
	}
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[snapshotHeader:], castagnoli))
	return b
}

// decodeSnapshot parses a snapshot's producers; any inconsistency returns
// an error wrapping errBadSnapshot.
func decodeSnapshot(b []byte) (producerState, error) {
	ps, _, err := decodeSnapshotTxn(b)
	return ps, err
}

// decodeSnapshotTxn parses a snapshot of version 1, 2 or 3: its producers
// and aborted transactions (listed in version 2 only).
func decodeSnapshotTxn(b []byte) (producerState, []abortedTxn, error) {
	bad := func(format string, args ...any) (producerState, []abortedTxn, error) {
		return nil, nil, fmt.Errorf("%w: "+format, append([]any{errBadSnapshot}, args...)...)
	}
	if len(b) < snapshotHeader+4 {
		return bad("%d bytes is too short", len(b))
	}
	if m := binary.BigEndian.Uint32(b); m != snapshotMagic {
		return bad("magic %#x", m)
	}
	v := binary.BigEndian.Uint16(b[4:])
	if v < 1 || v > snapshotVersion {
		return bad("version %d", v)
	}
	if want, got := binary.BigEndian.Uint32(b[6:]), crc32.Checksum(b[snapshotHeader:], castagnoli); want != got {
		return bad("crc %#x, computed %#x", want, got)
	}
	fixed, minBatches := 19, 1 // a producer's bytes before its batches
	if v >= 2 {
		fixed, minBatches = 31, 0
	}
	r := b[snapshotHeader:]
	n := binary.BigEndian.Uint32(r)
	r = r[4:]
	ps := producerState{}
	for i := uint32(0); i < n; i++ {
		if len(r) < fixed {
			return bad("producer %d of %d is cut short", i, n)
		}
		id := int64(binary.BigEndian.Uint64(r))
		e := &producerEntry{
			epoch:            int16(binary.BigEndian.Uint16(r[8:])),
			lastTimestamp:    int64(binary.BigEndian.Uint64(r[10:])),
			txnFirst:         -1,
			coordinatorEpoch: -1,
		}
		if v >= 2 {
			e.txnFirst = int64(binary.BigEndian.Uint64(r[18:]))
			e.coordinatorEpoch = int32(binary.BigEndian.Uint32(r[26:]))
			if e.txnFirst < -1 {
				return bad("producer %d's transaction starts at %d", id, e.txnFirst)
			}
		}
		nb := int(r[fixed-1])
		r = r[fixed:]
		if nb < minBatches || nb > cachedBatches || len(r) < nb*snapshotBatch {
			return bad("producer %d has %d batches in %d bytes", id, nb, len(r))
		}
		if ps[id] != nil {
			return bad("producer %d appears twice", id)
		}
		for j := 0; j < nb; j++ {
			e.batches = append(e.batches, producerBatch{
				firstSeq:      int32(binary.BigEndian.Uint32(r)),
				lastSeq:       int32(binary.BigEndian.Uint32(r[4:])),
				baseOffset:    int64(binary.BigEndian.Uint64(r[8:])),
				lastOffset:    int64(binary.BigEndian.Uint64(r[16:])),
				logAppendTime: int64(binary.BigEndian.Uint64(r[24:])),
			})
			r = r[snapshotBatch:]
		}
		ps[id] = e
	}
	var aborted []abortedTxn
	if v == snapshotVersionAborted {
		if len(r) < 4 {
			return bad("the aborted transactions' count is cut short")
		}
		na := binary.BigEndian.Uint32(r)
		r = r[4:]
		if uint64(len(r)) < uint64(na)*snapshotAborted {
			return bad("%d aborted transactions in %d bytes", na, len(r))
		}
		for i := uint32(0); i < na; i++ {
			a := abortedTxn{
				pid:   int64(binary.BigEndian.Uint64(r)),
				first: int64(binary.BigEndian.Uint64(r[8:])),
				last:  int64(binary.BigEndian.Uint64(r[16:])),
				lso:   int64(binary.BigEndian.Uint64(r[24:])),
			}
			if a.first < 0 || a.first > a.last || (len(aborted) > 0 && a.last < aborted[len(aborted)-1].last) {
				return bad("aborted transaction %d: [%d, %d]", i, a.first, a.last)
			}
			aborted = append(aborted, a)
			r = r[snapshotAborted:]
		}
	}
	if len(r) != 0 {
		return bad("%d bytes after the last producer", len(r))
	}
	return ps, aborted, nil
}

// snapshots lists the partition folder's snapshot offsets, oldest first,
// removing leftover temporary files.
func snapshots(fs vfs.FS, dir string) ([]int64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, name := range names {
		if strings.HasSuffix(name, snapshotTmpExt) {
			if err := fs.Remove(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		if off, ok := parseSnapshotName(name); ok {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// writeSnapshot writes ps as the snapshot at offset, then removes the
// snapshots no longer needed (see pruneSnapshots).
func writeSnapshot(fs vfs.FS, dir string, offset int64, b []byte, firstSegmentBase int64) error {
	name := filepath.Join(dir, snapshotName(offset))
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		fs.Remove(tmp)
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		fs.Remove(tmp)
		return err
	}
	// The new snapshot's name is durable before older ones go.
	if err := fs.SyncDir(dir); err != nil {
		return err
	}
	return pruneSnapshots(fs, dir, firstSegmentBase)
}

// pruneSnapshots removes the snapshots older than needed: every one below
// the newest snapshot at or below firstSegmentBase (the base offset of the
// log's first segment; older snapshots describe batches no longer in the
// log and are superseded by that one).
func pruneSnapshots(fs vfs.FS, dir string, firstSegmentBase int64) error {
	offs, err := snapshots(fs, dir)
	if err != nil {
		return err
	}
	keep := 0 // index of the oldest snapshot kept
	for i, off := range offs {
		if off <= firstSegmentBase {
			keep = i
		}
	}
	for _, off := range offs[:keep] {
		if err := fs.Remove(filepath.Join(dir, snapshotName(off))); err != nil {
			return err
		}
	}
	return nil
}

// loadSnapshot returns the newest usable snapshot at or below leo (its
// producers and, version 2, aborted transactions) and its offset (-1 and
// empty state when there is none). With remove, snapshots
// above leo and ones that fail their checks are removed, each with a log
// line; without, they are only skipped.
func loadSnapshot(fs vfs.FS, dir string, leo int64, remove bool, logger *slog.Logger) (producerState, []abortedTxn, int64, error) {
	offs, err := snapshots(fs, dir)
	if err != nil {
		return nil, nil, -1, err
	}
	for i := len(offs) - 1; i >= 0; i-- {
		name := filepath.Join(dir, snapshotName(offs[i]))
		if offs[i] > leo {
			if !remove {
				continue
			}
			logger.Warn("replica: producer snapshot is past the log end offset, removed", "file", name, "log_end_offset", leo)
			if err := fs.Remove(name); err != nil {
				return nil, nil, -1, err
			}
			continue
		}
		ps, aborted, err := readSnapshot(fs, name)
		if err == nil {
			return ps, aborted, offs[i], nil
		}
		if !errors.Is(err, errBadSnapshot) {
			return nil, nil, -1, err
		}
		if !remove {
			continue
		}
		logger.Warn("replica: producer snapshot failed its checks, removed", "file", name, "err", err)
		if err := fs.Remove(name); err != nil {
			return nil, nil, -1, err
		}
	}
	return producerState{}, nil, -1, nil
}

func readSnapshot(fs vfs.FS, name string) (producerState, []abortedTxn, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, nil, err
	}
	if size > 1<<30 {
		return nil, nil, fmt.Errorf("%w: %d bytes", errBadSnapshot, size)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	return decodeSnapshotTxn(b)
}

// removeSnapshotsAbove removes the snapshots at offsets above offset (a
// truncated log's: they describe batches no longer in it) and syncs the
// folder.
func removeSnapshotsAbove(fs vfs.FS, dir string, offset int64) error {
	offs, err := snapshots(fs, dir)
	if err != nil {
		return err
	}
	removed := false
	for _, off := range offs {
		if off > offset {
			if err := fs.Remove(filepath.Join(dir, snapshotName(off))); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return fs.SyncDir(dir)
	}
	return nil
}
