package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// The leader epoch cache (Kafka's LeaderEpochFileCache): for each leader
// epoch the log has, the offset of its first batch. Under raft the leader
// epoch is the leader's term, stamped in every batch's partitionLeaderEpoch
// field, raft's own (zero-offset) entries included, so a new leader's
// epoch starts at the log end offset when it takes over, as Kafka's
// makeLeader assigns it. OffsetForLeaderEpoch (KIP-101, KIP-279) answers
// from it, and a follower truncating a divergent tail truncates it.
//
// Format: the partition folder's leader-epoch-checkpoint file (Kafka's
// name and text layout): a version line (0), a count line, then one
// "epoch startOffset" line per epoch, oldest first:
//
//	0
//	2
//	0 0
//	3 120
//
// It is replaced atomically (written to .tmp, synced, renamed, the folder
// synced) whenever the cache changes, which is once per leader epoch and
// at truncations: before the first batch of a new epoch is synced, so the
// file never lacks an epoch the durable log holds. At Open, entries
// starting beyond the log end offset (a crash lost the log's tail) are
// dropped.

const (
	epochFileName    = "leader-epoch-checkpoint"
	epochFileVersion = 0
)

var errBadEpochFile = errors.New("replica: bad leader-epoch-checkpoint")

// epochEntry is one leader epoch and the offset of its first batch.
type epochEntry struct {
	epoch       int32
	startOffset int64
}

// epochCache is a partition's leader epochs, oldest first, with strictly
// increasing epochs and non-decreasing start offsets. It is guarded by
// the Partition's mutex.
type epochCache struct {
	entries []epochEntry
}

// latest returns the newest epoch, or -1 when there is none.
func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].epoch
}

// assign records that epoch starts at offset, if it is newer than every
// epoch known; it reports whether the cache changed. Entries the new one
// contradicts (an epoch as new or newer, or a start offset at or beyond
// offset) are removed first, as Kafka's assign does: an epoch that
// holds no record is not kept.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if epoch < 0 {
		return false
	}
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if epoch <= last.epoch {
			return false
		}
	}
	for len(c.entries) > 0 {
		last := c.entries[len(c.entries)-1]
		if last.epoch < epoch && last.startOffset < offset {
			break
		}
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, epochEntry{epoch: epoch, startOffset: offset})
	return true
}

// truncateFromEnd removes the epochs starting at or beyond endOffset (a
// follower truncated its log to endOffset; Kafka's truncateFromEnd) and
// reports whether the cache changed.
func (c *epochCache) truncateFromEnd(endOffset int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].startOffset >= endOffset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateAbove removes the epochs newer than epoch (the newest term left
// in a truncated log) and reports whether the cache changed.
func (c *epochCache) truncateAbove(epoch int32) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].epoch > epoch {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops the epochs wholly below startOffset (the log
// start offset moved up) and moves the first remaining epoch's start up
// to it (Kafka's truncateFromStart); it reports whether the cache changed.
func (c *epochCache) truncateFromStart(startOffset int64) bool {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].startOffset <= startOffset {
		i++
	}
	changed := i > 0
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].startOffset < startOffset {
		c.entries[0].startOffset = startOffset
		changed = true
	}
	return changed
}

// endOffsetFor answers OffsetForLeaderEpoch (Kafka's
// LeaderEpochFileCache.endOffsetFor): the largest epoch <= requested and
// the offset where the next epoch starts, logEndOffset for the latest
// epoch; (-1, -1) for an epoch newer than every epoch known or a negative
// one; (requested, first epoch's start offset) for an epoch older than
// every epoch known.
func (c *epochCache) endOffsetFor(requested int32, logEndOffset int64) (int32, int64) {
	if requested < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if requested == c.latest() {
		return requested, logEndOffset
	}
	// The first epoch newer than requested.
	hi := -1
	for i, e := range c.entries {
		if e.epoch > requested {
			hi = i
			break
		}
	}
	switch {
	case hi < 0:
		return -1, -1
	case hi == 0:
		return requested, c.entries[0].startOffset
	default:
		return c.entries[hi-1].epoch, c.entries[hi].startOffset
	}
}

// epochOf returns the epoch of the batch holding offset: the newest epoch
// starting at or below it, or -1.
func (c *epochCache) epochOf(offset int64) int32 {
	epoch := int32(-1)
	for _, e := range c.entries {
		if e.startOffset > offset {
			break
		}
		epoch = e.epoch
	}
	return epoch
}

func (c *epochCache) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", epochFileVersion, len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.startOffset)
	}
	return b.Bytes()
}

func decodeEpochs(data []byte) ([]epochEntry, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != strconv.Itoa(epochFileVersion) {
		return nil, fmt.Errorf("%w: unknown version line %q", errBadEpochFile, lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q does not match %d lines", errBadEpochFile, lines[1], len(lines)-2)
	}
	out := make([]epochEntry, 0, n)
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %q", errBadEpochFile, l)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || off < 0 {
			return nil, fmt.Errorf("%w: line %q", errBadEpochFile, l)
		}
		if k := len(out); k > 0 && (int32(epoch) <= out[k-1].epoch || off < out[k-1].startOffset) {
			return nil, fmt.Errorf("%w: line %q is out of order", errBadEpochFile, l)
		}
		out = append(out, epochEntry{epoch: int32(epoch), startOffset: off})
	}
	return out, nil
}

// readEpochFile returns the entries of dir's leader-epoch-checkpoint, or
// ok=false when there is none.
func readEpochFile(fs vfs.FS, dir string) (entries []epochEntry, ok bool, err error) {
	f, err := fs.Open(filepath.Join(dir, epochFileName))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, false, err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	entries, err = decodeEpochs(data)
	return entries, err == nil, err
}

// writeEpochFile replaces dir's leader-epoch-checkpoint with c's entries.
func writeEpochFile(fs vfs.FS, dir string, c *epochCache) error {
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, epochFileName), c.encode())
}

// loadEpochs reads the leader epoch cache at Open: the
// leader-epoch-checkpoint file with the epochs beyond the log end offset
// dropped, or, for a log without one (written before Sluice kept it),
// the epochs of its batch headers.
func (p *Partition) loadEpochs() error {
	entries, ok, err := readEpochFile(p.fs, p.log.Dir())
	if err != nil && !errors.Is(err, errBadEpochFile) {
		return err
	}
	if ok {
		p.epochs.entries = entries
		p.epochs.truncateFromEnd(p.log.LogEndOffset() + 1)
		if l := p.log.LastIndex(); l >= p.log.FirstIndex() {
			// A crash lost the tail of a newer epoch: drop it.
			if t, err := p.log.Term(l); err == nil && t > 0 {
				p.epochs.truncateAbove(int32(t))
			}
		}
	} else {
		if err != nil {
			p.logger.Warn("replica: the leader-epoch-checkpoint is unreadable; rebuilding it from the log", "dir", p.log.Dir(), "err", err)
		}
		err := p.log.ScanHeaders(p.log.LogStartOffset(), func(h batch.Header) error {
			p.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			return nil
		})
		if err != nil {
			return err
		}
	}
	p.epochs.truncateFromStart(p.log.LogStartOffset())
	return nil
}

// noteEpoch records that a batch of epoch was written at offset, writing
// the leader-epoch-checkpoint when that starts a new epoch (once per
// epoch, before the batch is synced). A failed write is logged: the
// cache in memory stays right, and the next Open rebuilds what the file
// lacks only from its own entries, so it is retried at the next change.
func (p *Partition) noteEpoch(epoch int32, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.epochs.assign(epoch, offset) {
		return
	}
	p.saveEpochsLocked()
}

func (p *Partition) saveEpochsLocked() {
	if err := writeEpochFile(p.fs, p.log.Dir(), &p.epochs); err != nil {
		p.logger.Warn("replica: writing the leader-epoch-checkpoint failed", "dir", p.log.Dir(), "err", err)
	}
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101; Kafka's
// LeaderEpochFileCache.endOffsetFor) from the log's leader epochs: the
// largest epoch <= epoch the log has and the offset where the epoch
// after it starts (the log end offset for the latest epoch); (-1, -1)
// for a negative epoch or one newer than every epoch of the log.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	leo, lso := p.log.LogEndOffset(), p.log.LogStartOffset()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epochs.truncateFromStart(lso) // retention moved the start
	return p.epochs.endOffsetFor(epoch, leo)
}

// EpochOf returns the leader epoch of the batch holding offset (the
// epoch ListOffsets reports with an offset): the newest epoch of the log
// starting at or below it, the current leader epoch when the log has
// none.
func (p *Partition) EpochOf(offset int64) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.epochs.epochOf(offset); e >= 0 {
		return e
	}
	return p.leaderEpoch
}

// LatestEpoch returns the newest leader epoch of the log, the current
// leader epoch when the log has none (ListOffsets' latest).
func (p *Partition) LatestEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.epochs.latest(); e >= 0 {
		return e
	}
	return p.leaderEpoch
}
