package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// smallCompactConfig is a compacted log's config with small segments.
func smallCompactConfig() Config {
	cfg := testConfig()
	cfg.CleanupPolicy = PolicyCompact
	cfg.SegmentBytes = 300
	return cfg
}

// flipByte inverts the byte at pos of the file at path (bit rot).
func flipByte(t *testing.T, mem *vfs.MemFS, path string, pos int64) {
	t.Helper()
	f, err := mem.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// openFilled opens a log on fs holding n synced one-record batches over
// three keys.
func openFilled(t *testing.T, fs vfs.FS, cfg Config, n int) *Log {
	t.Helper()
	l := openTest(t, fs, cfg, nil)
	fillKeyed(t, l, n, 3, "v")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return l
}

// fillKeyed appends n one-record batches cycling through keys keys.
func fillKeyed(t *testing.T, l *Log, n, keys int, tag string) {
	t.Helper()
	for j := 0; j < n; j++ {
		rec := batch.Record{Timestamp: 1, Key: []byte(fmt.Sprintf("k%d", j%keys)), Value: []byte(fmt.Sprintf("%s%d", tag, j))}
		mustAppend(t, l, batch.Build(batch.NewBuildOptions(), []batch.Record{rec}))
	}
}

// A cleaned log reopened without a trusted checkpoint (lost, failing its
// CRC, oversized) keeps everything: the compaction gaps in its closed
// segments are not taken for lost data.
func TestCleanedLogWithoutTrustedCheckpoint(t *testing.T) {
	ckpt := filepath.Join("/p/topic-0", CheckpointName)
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, mem *vfs.MemFS)
	}{
		{"missing", func(t *testing.T, mem *vfs.MemFS) {
			if err := mem.Remove(ckpt); err != nil {
				t.Fatal(err)
			}
		}},
		{"crc mismatch", func(t *testing.T, mem *vfs.MemFS) { flipByte(t, mem, ckpt, 0) }},
		{"oversized", func(t *testing.T, mem *vfs.MemFS) {
			f, err := mem.OpenReadWrite(ckpt)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.WriteAt(make([]byte, 5000), 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallCompactConfig()
			mem := vfs.NewMem()
			l := openFilled(t, mem, cfg, 60)
			if st, err := l.Clean(NoUpperBound); err != nil || st.RecordsRemoved == 0 {
				t.Fatalf("clean: %+v, %v", st, err)
			}
			fillKeyed(t, l, 10, 3, "w") // more data after the cleaned part
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			leo, want := l.LogEndOffset(), readAll(t, l, 0)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, mem)
			l = openTest(t, mem, cfg, nil)
			defer l.Close()
			got := readAll(t, l, 0)
			if l.LogEndOffset() != leo || len(got) != len(want) {
				t.Fatalf("reopen without a trusted checkpoint: log end offset %d (was %d), %d batches (were %d)", l.LogEndOffset(), leo, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("batch %d: %+v, was %+v", i, got[i], want[i])
				}
			}
			// The log cleans again from scratch.
			if _, err := l.Clean(NoUpperBound); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Without a trusted checkpoint, offsets must still strictly increase: a
// batch whose base offset goes backwards cuts the log there.
func TestNoCheckpointStillRefusesBackwardOffsets(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 300
	mem := vfs.NewMem()
	l := openFilled(t, mem, cfg, 20)
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	l.Close()
	if err := mem.Remove(filepath.Join("/p/topic-0", CheckpointName)); err != nil {
		t.Fatal(err)
	}
	// The second batch of the first segment claims the first one's offset
	// (baseOffset is not covered by the CRC).
	f, err := mem.OpenReadWrite(filepath.Join("/p/topic-0", MakeFileName(0, KindLog)))
	if err != nil {
		t.Fatal(err)
	}
	var hdr [batch.HeaderSize]byte
	f.ReadAt(hdr[:], 0)
	h, err := batch.ParseHeader(hdr[:])
	if err != nil {
		t.Fatal(err)
	}
	var zero [8]byte
	binary.BigEndian.PutUint64(zero[:], 0)
	f.WriteAt(zero[:], int64(h.Size()))
	f.Close()
	l = openTest(t, mem, cfg, nil)
	defer l.Close()
	if leo := l.LogEndOffset(); leo != 1 {
		t.Fatalf("log end offset %d after a backwards offset at 1: want the log cut at 1", leo)
	}
}

// With file.delete.delay.ms > 0 the segments a clean replaces are removed
// by a timer; its callback and the code that armed it must not race (run
// with -race).
func TestCleanDelayedDeleteNoRace(t *testing.T) {
	cfg := smallCompactConfig()
	cfg.FileDeleteDelayMs = 1
	mem := vfs.NewMem()
	l := openTest(t, mem, cfg, nil)
	defer l.Close()
	for round := 0; round < 5; round++ {
		fillKeyed(t, l, 30, 3, fmt.Sprintf("r%d-", round))
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Clean(NoUpperBound); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the replaced segments to be removed", func() bool {
		names, err := mem.List("/p/topic-0")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if fn, ok := ParseFileName(n); ok && fn.Deleted {
				return false
			}
		}
		return true
	})
	readAll(t, l, 0)
}

// countFS counts open files whose names contain a clean's suffixes.
type countFS struct {
	vfs.FS
	mu   sync.Mutex
	open map[*countFile]string
}

type countFile struct {
	vfs.File
	fs *countFS
}

func (c *countFS) track(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !(strings.Contains(name, cleanedSuffix) || strings.Contains(name, swapSuffix)) {
		return f, err
	}
	cf := &countFile{File: f, fs: c}
	c.mu.Lock()
	c.open[cf] = name
	c.mu.Unlock()
	return cf, nil
}

func (c *countFS) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	return c.track(name, f, err)
}

func (c *countFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name)
	return c.track(name, f, err)
}

func (f *countFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}

// A clean that fails while committing or swapping in its replacements
// closes the replacements' files it did not swap in.
func TestCleanSwapErrorClosesFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(op vfs.Op, path string) bool
	}{
		{"sync dir", func(op vfs.Op, path string) bool { return op == vfs.OpSyncDir }},
		{"checkpoint", func(op vfs.Op, path string) bool {
			return op == vfs.OpCreate && strings.Contains(path, CheckpointName)
		}},
		{"rename swap", func(op vfs.Op, path string) bool {
			return op == vfs.OpRename && strings.HasSuffix(path, swapSuffix)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallCompactConfig()
			var armed atomic.Bool
			inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
				if armed.Load() && tc.fail(op, path) {
					return fmt.Errorf("%w: %s %s", vfs.ErrInjected, op, path)
				}
				return nil
			})
			fs := &countFS{FS: vfs.NewErrorFS(vfs.NewMem(), inj), open: map[*countFile]string{}}
			l := openFilled(t, fs, cfg, 60)
			defer l.Close()
			armed.Store(true)
			if _, err := l.Clean(NoUpperBound); err == nil {
				t.Fatal("clean succeeded despite the injected error")
			}
			armed.Store(false)
			l.mu.RLock()
			inUse := map[vfs.File]bool{}
			for _, s := range l.segs {
				inUse[s.offFile], inUse[s.timeFile] = true, true
				l.files.mu.Lock()
				if s.log.h != nil {
					inUse[s.log.h.f] = true
				}
				l.files.mu.Unlock()
			}
			l.mu.RUnlock()
			fs.mu.Lock()
			defer fs.mu.Unlock()
			for f, name := range fs.open {
				if !inUse[f] {
					t.Errorf("file %s left open", name)
				}
			}
		})
	}
}

// Recovery refuses, rather than deletes, a segment that a committed
// ".swap" spans but that runs past the swap's end: the swap is stale (a
// failed clean could not remove it) and the segment newer.
func TestRecoveryRefusesStaleSwap(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 300
	mem := vfs.NewMem()
	l := openFilled(t, mem, cfg, 30)
	l.mu.RLock()
	b1 := l.segs[1].base
	l.mu.RUnlock()
	l.Close()
	dir := "/p/topic-0"
	read := func(name string) []byte {
		f, err := mem.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		size, _ := f.Size()
		b := make([]byte, size)
		if _, err := f.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A stale swap at base 0 that ends one batch into segment b1.
	seg1 := read(MakeFileName(b1, KindLog))
	h, err := batch.ParseHeader(seg1)
	if err != nil {
		t.Fatal(err)
	}
	swap := append(read(MakeFileName(0, KindLog)), seg1[:h.Size()]...)
	f, err := mem.Create(filepath.Join(dir, MakeFileName(0, KindLog)+swapSuffix))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(swap, 0)
	f.Close()
	_, err = Open(mem, dir, cfg, Options{Logger: quietLogger()})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "refusing to delete") {
		t.Fatalf("open with a stale swap: %v, want a refusal", err)
	}
	if _, err := mem.Stat(filepath.Join(dir, MakeFileName(b1, KindLog))); err != nil {
		t.Fatalf("segment %d gone: %v", b1, err)
	}
}

// A clean that cannot remove a committed ".swap" while undoing fails the
// log, so no later change can make recovery complete the stale swap.
func TestCleanUndoFailureFailsLog(t *testing.T) {
	cfg := smallCompactConfig()
	var armed atomic.Bool
	renames := 0
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if !armed.Load() {
			return nil
		}
		switch {
		case op == vfs.OpRename && strings.HasSuffix(path, KindLog.String()+cleanedSuffix):
			if renames++; renames == 2 { // the second replacement's commit
				return fmt.Errorf("%w: rename %s", vfs.ErrInjected, path)
			}
		case op == vfs.OpRemove && strings.HasSuffix(path, swapSuffix):
			return fmt.Errorf("%w: remove %s", vfs.ErrInjected, path)
		}
		return nil
	})
	l := openTest(t, vfs.NewErrorFS(vfs.NewMem(), inj), cfg, nil)
	defer l.Close()
	fillKeyed(t, l, 60, 3, "v")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if _, err := l.Clean(NoUpperBound); err == nil {
		t.Fatal("clean succeeded despite the injected error")
	}
	armed.Store(false)
	if renames < 2 {
		t.Fatalf("only %d replacements committed: the test needs two", renames)
	}
	if _, err := l.Append(mkBatch(1, 0, 10, "a")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after an undo failure: %v, want ErrFailed", err)
	}
}

// With a tiny log.cleaner.dedupe.buffer.size a clean maps only the dirty
// segments that fit (at least one), cleans up to the last of them and
// advances the cleaner offset that far; later cleans finish the job.
func TestCleanOffsetMapBound(t *testing.T) {
	cfg := smallCompactConfig()
	cfg.MinCleanableDirtyRatio = 0
	mem := vfs.NewMem()
	// About 3 keys' worth: each segment holds ~4 one-record batches with
	// distinct keys, so one dirty segment fills the map.
	bound := int64(3 * (3 + OffsetMapEntryOverhead))
	l, err := Open(mem, "/p/topic-0", cfg, Options{Logger: quietLogger(), CleanerDedupeBufferBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fillKeyed(t, l, 40, 40, "a") // 40 distinct keys
	fillKeyed(t, l, 40, 40, "b") // each key again
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	st, err := l.Clean(NoUpperBound)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	fd, active := l.firstDirty, l.active().base
	l.mu.RUnlock()
	if st.End >= active || fd != st.End || st.End <= 0 {
		t.Fatalf("bounded clean: end %d, cleaner offset %d, active segment at %d: want both stopped early", st.End, fd, active)
	}
	for i := 0; i < 100; i++ {
		if _, needed := l.CleanableRatio(NoUpperBound); !needed {
			break
		}
		if _, err := l.Clean(NoUpperBound); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.RLock()
	fd, active = l.firstDirty, l.active().base
	l.mu.RUnlock()
	if fd != active {
		t.Fatalf("cleaner offset %d after repeated cleans, want %d", fd, active)
	}
	// Cleaned in several passes, the log still holds each key's latest
	// value.
	latest, count := map[string]string{}, map[string]int{}
	for _, h := range readAll(t, l, 0) {
		data, _, err := l.ReadBytes(nil, h.BaseOffset, 1, NoUpperBound)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, _ := batch.Records(data[:h.Size()])
		for _, r := range recs {
			latest[string(r.Key)] = string(r.Value)
			if r.Offset < fd {
				count[string(r.Key)]++ // once at most below the cleaner offset
			}
		}
	}
	for j := 0; j < 40; j++ {
		k := fmt.Sprintf("k%d", j)
		if v := latest[k]; v != fmt.Sprintf("b%d", j) || count[k] > 1 {
			t.Fatalf("key %s: latest value %q, %d records below the cleaner offset; want b%d, at most once", k, v, count[k], j)
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("log end offset %d, want %d", l.LogEndOffset(), leo)
	}
}
