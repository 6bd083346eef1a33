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

// Format: each partition folder holds one small text file, checkpointName,
// replaced atomically (write checkpointName+".tmp", sync, rename, sync the
// folder). Lines are "key value"; the first line is the format version and
// the last line is the CRC-32C (decimal) of every byte before it:
//
//	version 1
//	log-start-offset 1200
//	recovery-point 4096
//	clean-shutdown 0
//	crc 123456789
//
// log-start-offset: the first offset readable (it may sit inside a segment
// after DeleteRecords). recovery-point: every segment with a base offset
// below it is synced with its indexes; recovery rescans the segments from
// the one holding it. clean-shutdown: 1 when the log was closed cleanly and
// nothing has been written since, so recovery may trust the indexes.
const (
	checkpointName    = "log.checkpoint"
	checkpointVersion = 1
)

type checkpoint struct {
	logStartOffset int64
	recoveryPoint  int64
	cleanShutdown  bool
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (c checkpoint) encode() []byte {
	var b bytes.Buffer
	clean := 0
	if c.cleanShutdown {
		clean = 1
	}
	fmt.Fprintf(&b, "version %d\nlog-start-offset %d\nrecovery-point %d\nclean-shutdown %d\n",
		checkpointVersion, c.logStartOffset, c.recoveryPoint, clean)
	fmt.Fprintf(&b, "crc %d\n", crc32.Checksum(b.Bytes(), crcTable))
	return b.Bytes()
}

var errBadCheckpoint = errors.New("segment: bad checkpoint file")

func decodeCheckpoint(data []byte) (checkpoint, error) {
	i := bytes.LastIndex(bytes.TrimRight(data, "\n"), []byte("\ncrc "))
	if i < 0 {
		return checkpoint{}, fmt.Errorf("%w: no crc line", errBadCheckpoint)
	}
	body, crcLine := data[:i+1], strings.TrimSpace(string(data[i+1:]))
	want, err := strconv.ParseUint(strings.TrimPrefix(crcLine, "crc "), 10, 32)
	if err != nil || uint32(want) != crc32.Checksum(body, crcTable) {
		return checkpoint{}, fmt.Errorf("%w: checksum mismatch", errBadCheckpoint)
	}
	var c checkpoint
	vals := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return checkpoint{}, fmt.Errorf("%w: line %q", errBadCheckpoint, line)
		}
		vals[k] = n
	}
	if vals["version"] != checkpointVersion {
		return checkpoint{}, fmt.Errorf("%w: version %d", errBadCheckpoint, vals["version"])
	}
	c.logStartOffset = vals["log-start-offset"]
	c.recoveryPoint = vals["recovery-point"]
	c.cleanShutdown = vals["clean-shutdown"] == 1
	return c, nil
}

// readCheckpoint returns the checkpoint, or ok=false when there is none or
// it cannot be trusted (then recovery assumes an unclean shutdown).
func readCheckpoint(fs vfs.FS, dir string) (c checkpoint, ok bool, err error) {
	path := filepath.Join(dir, checkpointName)
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{}, false, nil
	} else if err != nil {
		return checkpoint{}, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return checkpoint{}, false, err
	}
	if size > 4096 {
		return checkpoint{}, false, nil
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return checkpoint{}, false, err
	}
	c, derr := decodeCheckpoint(data)
	return c, derr == nil, nil
}

// writeCheckpoint replaces the checkpoint file atomically and durably.
func writeCheckpoint(fs vfs.FS, dir string, c checkpoint) error {
	path := filepath.Join(dir, checkpointName)
	tmp := path + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	data := c.encode()
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}
