package dump

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/segment"
)

// checkpointName is the partition folder's checkpoint file (segment
// package, checkpoint.go; its format is private to that package, so it is
// parsed again here).
const checkpointName = "log.checkpoint"

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
	var ckpt *checkpointInfo
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
	if d.cfg.verify && !d.stop && ckpt != nil && ckpt.err == nil && next >= 0 {
		path := filepath.Join(dir, checkpointName)
		if ckpt.logStartOffset > next {
			d.warnf(path, -1, "log start offset %d is past the log end offset %d: the broker would start an empty log there", ckpt.logStartOffset, next)
		}
		if ckpt.recoveryPoint > next {
			d.warnf(path, -1, "recovery point %d is past the log end offset %d", ckpt.recoveryPoint, next)
		}
	}
}

// checkpointInfo is a parsed log.checkpoint.
type checkpointInfo struct {
	version        int64
	logStartOffset int64
	recoveryPoint  int64
	cleanShutdown  bool
	crcValid       bool
	err            error // the file could not be parsed
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parseCheckpoint parses the segment package's checkpoint format: "key
// value" lines, the last "crc N" with N the CRC-32C of every byte before it.
func parseCheckpoint(data []byte) checkpointInfo {
	var c checkpointInfo
	i := bytes.LastIndex(bytes.TrimRight(data, "\n"), []byte("\ncrc "))
	if i < 0 {
		c.err = errors.New("no crc line")
		return c
	}
	body := data[:i+1]
	want, err := strconv.ParseUint(strings.TrimSpace(string(data[i+len("\ncrc "):])), 10, 32)
	c.crcValid = err == nil && uint32(want) == crc32.Checksum(body, castagnoli)
	vals := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			c.err = fmt.Errorf("bad line %q", line)
			return c
		}
		vals[k] = n
	}
	for _, k := range []string{"version", "log-start-offset", "recovery-point", "clean-shutdown"} {
		if _, ok := vals[k]; !ok {
			c.err = fmt.Errorf("no %s line", k)
			return c
		}
	}
	c.version, c.logStartOffset, c.recoveryPoint = vals["version"], vals["log-start-offset"], vals["recovery-point"]
	c.cleanShutdown = vals["clean-shutdown"] == 1
	return c
}

// checkpoint prints (or, with --verify, checks) a folder's checkpoint. A bad
// checkpoint is a warning: the broker then assumes an unclean shutdown.
func (d *dumper) checkpoint(path string) *checkpointInfo {
	data, err := d.readSmall(path, 4096)
	if err != nil {
		d.warnf(path, -1, "unreadable checkpoint: %v (the broker assumes an unclean shutdown)", err)
		return nil
	}
	c := parseCheckpoint(data)
	if c.err != nil {
		d.warnf(path, -1, "unreadable checkpoint: %v (the broker assumes an unclean shutdown)", c.err)
		return &c
	}
	if !c.crcValid {
		d.warnf(path, -1, "checkpoint CRC mismatch (the broker ignores it and assumes an unclean shutdown)")
	}
	switch {
	case d.cfg.verify:
	case d.cfg.json:
		d.emit(&jsonCheckpoint{Type: "checkpoint", File: path, Version: c.version, LogStartOffset: c.logStartOffset,
			RecoveryPoint: c.recoveryPoint, CleanShutdown: c.cleanShutdown, CRCValid: c.crcValid})
	default:
		fmt.Fprintf(d.out, "Checkpoint %s\nversion: %d logStartOffset: %d recoveryPoint: %d cleanShutdown: %t crcValid: %t\n",
			path, c.version, c.logStartOffset, c.recoveryPoint, c.cleanShutdown, c.crcValid)
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
