package segment

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/segment/vfs"
)

// Format: each partition folder holds one small text file, CheckpointName,
// replaced atomically (write CheckpointName+".tmp", sync, rename, sync the
// folder). Lines are "key value"; the first line is the format version and
// the last line is the CRC-32C (decimal) of every byte before it:
//
//	version 3
//	log-start-offset 1200
//	recovery-point 4096
//	clean-shutdown 0
//	cleaner-offset 2048
//	raft-start-offset 1200
//	raft-prev-index 17
//	raft-prev-term 3
//	raft-reset 0
//	raft-log 1
//	raft-rp-term 3
//	crc 123456789
//
// log-start-offset: the first offset readable (it may sit inside a segment
// after DeleteRecords). recovery-point: every segment with a base offset
// below it is synced with its indexes; recovery rescans the segments from
// the one holding it. clean-shutdown: 1 when the log was closed cleanly and
// nothing has been written since, so recovery may trust the indexes.
// cleaner-offset (version 2, log compaction): the cleaner's first dirty
// offset; every offset below it has been cleaned, so no key has two records
// there. Version 1 files (without it) are still read, as cleaner offset 0.
//
// Version 3 adds the raft log's start (see raft.go): raft-start-offset is
// the base offset of the first segment whose batches carry raft indexes
// (segments below it were compacted out of the raft log by the cleaner or
// are about to be deleted); raft-prev-index and raft-prev-term are the
// index and term of the entry just before that segment's first entry, so
// FirstIndex = raft-prev-index+1 and Term(FirstIndex-1) answers after
// retention, compaction or a reset. raft-reset 1 says a ResetAt was under
// way: recovery removes every segment and starts the log empty at
// log-start-offset. raft-log 1 says the log has been written as a raft
// log (AppendEntry, ResetAt): recovery then checks the terms of the
// batches it scans (see termGuard); raft-rp-term is the term of the last
// entry below the recovery point (where that check starts). Version 1 and 2 files are read as raft-prev-index 0,
// term 0, raft start at the first segment (HasRaft false). Version 3 is
// always written.
const (
	CheckpointName    = "log.checkpoint"
	checkpointVersion = 3
)

// Checkpoint is the content of a partition folder's checkpoint file.
type Checkpoint struct {
	LogStartOffset int64 // the first readable offset
	RecoveryPoint  int64 // segments with a lower base offset are synced with their indexes
	CleanShutdown  bool  // closed cleanly, nothing written since
	CleanerOffset  int64 // the cleaner's first dirty offset (0: nothing cleaned)

	// Raft fields (version 3). HasRaft is false when read from an older file.
	HasRaft         bool
	RaftStartOffset int64  // base offset of the first segment with raft indexes
	RaftPrevIndex   uint64 // FirstIndex-1
	RaftPrevTerm    uint64 // Term(FirstIndex-1)
	RaftReset       bool   // a ResetAt was under way
	RaftLog         bool   // written as a raft log: recovery checks terms
	RaftRPTerm      uint64 // the term of the last entry below RecoveryPoint
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (c Checkpoint) encode() []byte {
	var b bytes.Buffer
	clean := 0
	if c.CleanShutdown {
		clean = 1
	}
	reset := 0
	if c.RaftReset {
		reset = 1
	}
	fmt.Fprintf(&b, "version %d\nlog-start-offset %d\nrecovery-point %d\nclean-shutdown %d\ncleaner-offset %d\n",
		checkpointVersion, c.LogStartOffset, c.RecoveryPoint, clean, c.CleanerOffset)
	raftLog := 0
	if c.RaftLog {
		raftLog = 1
	}
	fmt.Fprintf(&b, "raft-start-offset %d\nraft-prev-index %d\nraft-prev-term %d\nraft-reset %d\nraft-log %d\nraft-rp-term %d\n",
		c.RaftStartOffset, int64(c.RaftPrevIndex), int64(c.RaftPrevTerm), reset, raftLog, int64(c.RaftRPTerm))
	fmt.Fprintf(&b, "crc %d\n", crc32.Checksum(b.Bytes(), crcTable))
	return b.Bytes()
}

// ErrBadCheckpoint is returned by DecodeCheckpoint for a checkpoint file
// that is damaged or of an unknown version.
var ErrBadCheckpoint = errors.New("segment: bad checkpoint file")

// DecodeCheckpoint parses a checkpoint file's bytes (format above). It
// returns an error wrapping ErrBadCheckpoint when the CRC line is missing or
// wrong, a line is malformed, or the version is unknown.
func DecodeCheckpoint(data []byte) (Checkpoint, error) {
	i := bytes.LastIndex(bytes.TrimRight(data, "\n"), []byte("\ncrc "))
	if i < 0 {
		return Checkpoint{}, fmt.Errorf("%w: no crc line", ErrBadCheckpoint)
	}
	body, crcLine := data[:i+1], strings.TrimSpace(string(data[i+1:]))
	want, err := strconv.ParseUint(strings.TrimPrefix(crcLine, "crc "), 10, 32)
	if err != nil || uint32(want) != crc32.Checksum(body, crcTable) {
		return Checkpoint{}, fmt.Errorf("%w: checksum mismatch", ErrBadCheckpoint)
	}
	var c Checkpoint
	vals := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return Checkpoint{}, fmt.Errorf("%w: line %q", ErrBadCheckpoint, line)
		}
		vals[k] = n
	}
	if v := vals["version"]; v != 1 && v != 2 && v != checkpointVersion {
		return Checkpoint{}, fmt.Errorf("%w: version %d", ErrBadCheckpoint, vals["version"])
	}
	c.LogStartOffset = vals["log-start-offset"]
	c.RecoveryPoint = vals["recovery-point"]
	c.CleanShutdown = vals["clean-shutdown"] == 1
	c.CleanerOffset = vals["cleaner-offset"]
	if vals["version"] >= 3 {
		c.HasRaft = true
		c.RaftStartOffset = vals["raft-start-offset"]
		c.RaftPrevIndex = uint64(vals["raft-prev-index"])
		c.RaftPrevTerm = uint64(vals["raft-prev-term"])
		c.RaftReset = vals["raft-reset"] == 1
		c.RaftLog = vals["raft-log"] == 1
		c.RaftRPTerm = uint64(vals["raft-rp-term"])
	}
	return c, nil
}

// ReadCheckpoint reads dir's checkpoint, or ok=false when there is none or
// it cannot be trusted (then recovery assumes an unclean shutdown).
func ReadCheckpoint(fs vfs.FS, dir string) (c Checkpoint, ok bool, err error) {
	path := filepath.Join(dir, CheckpointName)
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{}, false, nil
	} else if err != nil {
		return Checkpoint{}, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return Checkpoint{}, false, err
	}
	if size > 4096 {
		return Checkpoint{}, false, nil
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return Checkpoint{}, false, err
	}
	c, derr := DecodeCheckpoint(data)
	return c, derr == nil, nil
}

// writeCheckpoint replaces the checkpoint file atomically and durably.
func writeCheckpoint(fs vfs.FS, dir string, c Checkpoint) error {
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, CheckpointName), c.encode())
}
