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

// path dumps one command-line PATH: a folder, a .log file or an index file.
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
	n, ok := segment.ParseFileName(filepath.Base(p))
	switch {
	case ok && n.Kind == segment.KindOffsetIndex:
		d.indexFile(p, n.Base, false)
	case ok && n.Kind == segment.KindTimeIndex:
		d.indexFile(p, n.Base, true)
	case ok:
		d.logFile(p, n.Base, -1)
	default:
		d.warnf(p, -1, "not a segment file name (20-digit base offset and .log): offsets are not checked against it and its indexes are not read")
		d.logFile(p, -1, -1)
	}
}

// folder dumps a partition folder: its checkpoint, then every segment in
// base-offset order, checking with --verify that offsets continue from one
// segment to the next.
func (d *dumper) folder(dir string) {
	names, err := d.fs.List(dir)
	if err != nil {
		d.errorf("%v", err)
		return
	}
	var logs []int64
	indexes := map[int64][]string{}
	hasCkpt := false
	for _, name := range names {
		n, ok := segment.ParseFileName(name)
		switch {
		case name == checkpointName:
			hasCkpt = true
		case !ok:
		case n.Deleted:
			if d.cfg.verify {
				d.warnf(filepath.Join(dir, name), -1, "pending deletion; skipped")
			}
		case n.Kind == segment.KindLog:
			logs = append(logs, n.Base)
		default:
			indexes[n.Base] = append(indexes[n.Base], name)
		}
	}
	slices.Sort(logs)
	if d.cfg.verify {
		for base, names := range indexes {
			if _, found := slices.BinarySearch(logs, base); !found {
				for _, name := range names {
					d.warnf(filepath.Join(dir, name), -1, "index file without a .log file (the broker removes it)")
				}
			}
		}
	}
	var ckpt *segment.Checkpoint
	if hasCkpt {
		ckpt = d.checkpoint(filepath.Join(dir, checkpointName))
	}
	if len(logs) == 0 {
		d.warnf(dir, -1, "no .log files")
	}
	next := int64(-1)
	for _, base := range logs {
		if d.stop {
			return
		}
		next = d.logFile(filepath.Join(dir, segment.MakeFileName(base, segment.KindLog)), base, next)
	}
	if d.cfg.verify && !d.stop && ckpt != nil && next >= 0 {
		path := filepath.Join(dir, checkpointName)
		if ckpt.LogStartOffset > next {
			d.warnf(path, -1, "log start offset %d is past the log end offset %d: the broker would start an empty log there", ckpt.LogStartOffset, next)
		}
		if ckpt.RecoveryPoint > next {
			d.warnf(path, -1, "recovery point %d is past the log end offset %d", ckpt.RecoveryPoint, next)
		}
	}
}

// checkpoint prints (or, with --verify, checks) a folder's checkpoint. A bad
// checkpoint is a warning: the broker then assumes an unclean shutdown.
func (d *dumper) checkpoint(path string) *segment.Checkpoint {
	data, err := d.readSmall(path, 4096)
	if err != nil {
		d.warnf(path, -1, "unreadable checkpoint: %v (the broker assumes an unclean shutdown)", err)
		return nil
	}
	c, err := segment.DecodeCheckpoint(data)
	if err != nil {
		d.warnf(path, -1, "%v (the broker ignores it and assumes an unclean shutdown)", err)
		return nil
	}
	switch {
	case d.cfg.verify:
	case d.cfg.json:
		d.emit(&jsonCheckpoint{Type: "checkpoint", File: path, LogStartOffset: c.LogStartOffset,
			RecoveryPoint: c.RecoveryPoint, CleanShutdown: c.CleanShutdown})
	default:
		fmt.Fprintf(d.out, "Checkpoint %s\nlogStartOffset: %d recoveryPoint: %d cleanShutdown: %t\n",
			path, c.LogStartOffset, c.RecoveryPoint, c.CleanShutdown)
	}
	return &c
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
