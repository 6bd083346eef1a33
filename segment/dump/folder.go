package dump

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/sluicemq/sluice/segment"
)

const checkpointName = segment.CheckpointName

// path dumps one command-line PATH: a folder, a checkpoint, a .log file
// or an index file.
func (d *dumper) path(p string) {
	fi, err := d.fs.Stat(p)
	if err != nil {
		d.errorf("%v", err)
		return
	}
	if fi.IsDir() {
		d.folder(p)
		return
	}
	if filepath.Base(p) == checkpointName {
		d.checkpointFile(p)
		return
	}
	n, ok := segment.ParseFileName(filepath.Base(p))
	switch {
	case ok && n.Kind == segment.KindOffsetIndex:
		d.indexFile(p, n.Base, false)
	case ok && n.Kind == segment.KindTimeIndex:
		d.indexFile(p, n.Base, true)
	case ok && n.Kind == segment.KindRaftIndex:
		d.raftIndexFile(p)
	case ok && n.Kind == segment.KindTxnIndex:
		d.txnIndexFile(p)
	case ok:
		d.logFile(p, n.Base, prevSegment{})
	default:
		d.warnf(p, -1, "not a segment file name (20-digit base offset and .log): offsets are not checked against it and its indexes are not read")
		d.logFile(p, -1, prevSegment{})
	}
}

// folder dumps a partition folder: its checkpoint, then every segment in
// base-offset order, checking that offsets continue from one segment to
// the next.
func (d *dumper) folder(dir string) {
	names, err := d.fs.List(dir)
	if err != nil {
		d.errorf("%v", err)
		return
	}
	slices.Sort(names)
	var logs []int64
	var indexes []segment.FileName
	hasCkpt := false
	pending := 0 // files renamed .deleted, removed after file.delete.delay.ms
	for _, name := range names {
		n, ok := segment.ParseFileName(name)
		switch {
		case name == checkpointName:
			hasCkpt = true
		case !ok:
		case n.Deleted:
			pending++
		case n.Kind == segment.KindLog:
			logs = append(logs, n.Base)
		default:
			indexes = append(indexes, n)
		}
	}
	if pending > 0 {
		d.notef(dir, "%d files pending deletion (.deleted, left by retention or the log cleaner) skipped", pending)
	}
	slices.Sort(logs)
	for _, n := range indexes {
		if _, found := slices.BinarySearch(logs, n.Base); !found {
			d.warnf(filepath.Join(dir, n.String()), -1, "index file without a .log file (the broker removes it)")
		}
	}
	var ckpt *segment.Checkpoint
	if hasCkpt {
		if ckpt = d.checkpoint(filepath.Join(dir, checkpointName)); d.stop {
			return
		}
	}
	if len(logs) == 0 {
		d.errorf("no segment .log files in %s", dir)
		return
	}
	prev := prevSegment{next: -1}
	for _, base := range logs {
		if d.stop {
			return
		}
		path := filepath.Join(dir, segment.MakeFileName(base, segment.KindLog))
		prev = prevSegment{path: path, next: d.logFile(path, base, prev)}
	}
	if !d.stop && ckpt != nil && prev.next >= 0 {
		path := filepath.Join(dir, checkpointName)
		if ckpt.LogStartOffset > prev.next {
			d.warnf(path, -1, "log start offset %d is past the log end offset %d: the broker would start an empty log there", ckpt.LogStartOffset, prev.next)
		}
		if ckpt.RecoveryPoint > prev.next {
			d.warnf(path, -1, "recovery point %d is past the log end offset %d", ckpt.RecoveryPoint, prev.next)
		}
	}
}

// checkpoint prints (or, with --verify, checks) a checkpoint file. A
// damaged or unreadable one is a problem, although the broker survives it:
// it ignores the file and recovers every segment, as after a crash.
func (d *dumper) checkpoint(path string) *segment.Checkpoint {
	data, err := d.readSmall(path, 4096)
	if err != nil {
		d.problemf(path, -1, "unreadable checkpoint: %v (the broker would recover every segment, as after a crash)", err)
		return nil
	}
	c, err := segment.DecodeCheckpoint(data)
	if err != nil {
		d.problemf(path, -1, "%v (the broker ignores a damaged checkpoint and recovers every segment, as after a crash)", err)
		return nil
	}
	switch {
	case d.cfg.verify:
	case d.cfg.json:
		jc := jsonCheckpoint{Type: "checkpoint", File: path, LogStartOffset: c.LogStartOffset,
			RecoveryPoint: c.RecoveryPoint, CleanShutdown: c.CleanShutdown}
		if c.HasRaft {
			jc.RaftStartOffset, jc.RaftPrevIndex, jc.RaftPrevTerm = &c.RaftStartOffset, &c.RaftPrevIndex, &c.RaftPrevTerm
		}
		d.emit(&jc)
	default:
		fmt.Fprintf(d.out, "Checkpoint %s\nlogStartOffset: %d recoveryPoint: %d cleanShutdown: %t",
			path, c.LogStartOffset, c.RecoveryPoint, c.CleanShutdown)
		if c.HasRaft {
			fmt.Fprintf(d.out, " raftStartOffset: %d raftPrevIndex: %d raftPrevTerm: %d raftLog: %t", c.RaftStartOffset, c.RaftPrevIndex, c.RaftPrevTerm, c.RaftLog)
		}
		fmt.Fprintln(d.out)
	}
	return &c
}

// checkpointFile dumps or verifies a checkpoint given as PATH. Alone, it
// cannot be checked against the log end offset.
func (d *dumper) checkpointFile(path string) {
	c := d.checkpoint(path)
	if c == nil || !d.cfg.verify {
		return
	}
	d.verified = append(d.verified, verifiedItem{
		text: fmt.Sprintf("checkpoint %s: logStartOffset: %d recoveryPoint: %d cleanShutdown: %t (its CRC and fields; give its folder to check it against the log)",
			path, c.LogStartOffset, c.RecoveryPoint, c.CleanShutdown),
		json: &jsonVerifiedFile{Type: "verified", File: path, Kind: "checkpoint"},
	})
}

// readSmall reads a whole file of at most limit bytes.
func (d *dumper) readSmall(path string, limit int64) ([]byte, error) {
	f, err := d.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d expected", size, limit)
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(data)) {
		return nil, err
	}
	return data, nil
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
