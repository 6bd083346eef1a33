package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
)

// BenchmarkAppend appends appendBatch (16 x 1 KiB incompressible records,
// built once and re-used: Append only stamps its base offset) to a fresh
// segment.Log with the default config, on the file system b.TempDir is on.
// One op is one batch; MB/s counts the batch's bytes.
//
//   - pagecache: no Sync in the timed region. Appends land in the page
//     cache. So that the figure is the append path's and not the disk's
//     (once dirty pages pass vm.dirty_background_ratio the kernel writes
//     them back, and past vm.dirty_ratio it throttles writers to disk
//     speed, which is what fsync-1MiB measures), every drainBytes the timer
//     is stopped and both the log and the peer are synced.
//   - fsync-1MiB: l.Sync after every MiB appended (a group commit), and at
//     the end, inside the timed region.
//
// The peer is a plain os.File in the same folder that gets the same bytes
// with the same pattern: one write per batch, fdatasync after the same
// batches as the log's Sync (fsync-1MiB only), a new file where the log
// rolls. Its writes are interleaved with the log's a MiB at a time, outside
// the benchmark timer, so both see the same disk, page cache and background
// writeback. plain-MB/s is its bandwidth and ratio is the log's MB/s over it.
func BenchmarkAppend(b *testing.B) {
	b.Run("pagecache", func(b *testing.B) { benchAppend(b, false) })
	b.Run("fsync-1MiB", func(b *testing.B) { benchAppend(b, true) })
}

func benchAppend(b *testing.B, fsync bool) {
	dir := b.TempDir()
	cfg := segment.DefaultConfig()
	l, err := openLog(filepath.Join(dir, "sluice"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	}()
	p, err := newPlainLog(filepath.Join(dir, "plain"), cfg.SegmentBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.close(); err != nil {
			b.Error(err)
		}
	}()
	// Make both folders' creation durable before timing, so the first
	// group does not pay for it on one side only.
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}

	bt := bytes.Clone(appendBatch())
	size := int64(len(bt))
	b.SetBytes(size)
	b.ReportAllocs()

	var plainTime time.Duration
	pending, pendingBytes := 0, int64(0) // batches since the last group end
	undrained := int64(0)                // pagecache: bytes since the last drain
	endGroup := func() {
		if fsync {
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		start := time.Now()
		if err := p.write(bt, pending, fsync); err != nil {
			b.Fatal(err)
		}
		plainTime += time.Since(start)
		if undrained += pendingBytes; !fsync && undrained >= drainBytes {
			if err := errors.Join(l.Sync(), p.sync()); err != nil {
				b.Fatal(err)
			}
			undrained = 0
		}
		b.StartTimer()
		pending, pendingBytes = 0, 0
	}

	// A counted loop rather than b.Loop: the last group's Sync belongs in
	// the timed region, after the last Append.
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(bt); err != nil {
			b.Fatal(err)
		}
		pending++
		pendingBytes += size
		if pendingBytes >= groupBytes {
			endGroup()
		}
	}
	if pending > 0 {
		endGroup()
	}
	b.StopTimer()

	total := size * int64(b.N)
	logMBps, plainMBps := mbps(total, b.Elapsed()), mbps(total, plainTime)
	b.ReportMetric(plainMBps, "plain-MB/s")
	if plainMBps > 0 {
		b.ReportMetric(logMBps/plainMBps, "ratio")
	}
}

// plainLog writes like a segment log with nothing else: positional writes
// at the end of a file, fdatasync, a new file when segmentBytes would be
// exceeded (as segment.bytes rolls the log).
type plainLog struct {
	dir          string
	segmentBytes int64
	f            *os.File
	fd           int
	size         int64
	files        int
}

func newPlainLog(dir string, segmentBytes int64) (*plainLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &plainLog{dir: dir, segmentBytes: segmentBytes}
	if err := p.roll(); err != nil {
		return nil, err
	}
	return p, syncDir(dir)
}

func (p *plainLog) roll() error {
	if p.f != nil {
		if err := p.f.Close(); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("%020d.log", p.files)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	p.f, p.fd, p.size = f, int(f.Fd()), 0
	p.files++
	return nil
}

// write writes b n times, then fdatasyncs when sync is set.
func (p *plainLog) write(b []byte, n int, sync bool) error {
	for range n {
		if p.size > 0 && p.size+int64(len(b)) > p.segmentBytes {
			if err := p.roll(); err != nil {
				return err
			}
		}
		if _, err := p.f.WriteAt(b, p.size); err != nil {
			return err
		}
		p.size += int64(len(b))
	}
	if sync {
		return p.sync()
	}
	return nil
}

func (p *plainLog) sync() error { return syscall.Fdatasync(p.fd) }

func (p *plainLog) close() error { return p.f.Close() }

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
