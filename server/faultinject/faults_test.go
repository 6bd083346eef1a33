package faultinject

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment/vfs"
)

// elapsed runs fn and returns how long it took.
func elapsed(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}

// Delays: lower bounds only (a loaded machine may be slower, never faster).
func TestFSDelays(t *testing.T) {
	f := New()
	fs := f.FS(vfs.NewMem())
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	file, err := fs.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	f.Set(State{FsyncDelayMs: 150})
	if d := elapsed(func() {
		if err := file.Sync(); err != nil {
			t.Fatal(err)
		}
	}); d < 150*time.Millisecond {
		t.Fatalf("Sync with fsync_delay_ms=150 took %v", d)
	}
	if d := elapsed(func() {
		if err := fs.SyncDir("/d"); err != nil {
			t.Fatal(err)
		}
	}); d < 150*time.Millisecond {
		t.Fatalf("SyncDir with fsync_delay_ms=150 took %v", d)
	}
	f.Set(State{WriteDelayMs: 150})
	if d := elapsed(func() {
		if _, err := file.WriteAt([]byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}); d < 150*time.Millisecond {
		t.Fatalf("WriteAt with write_delay_ms=150 took %v", d)
	}
}

func TestMetaFSDelaysSync(t *testing.T) {
	f := New()
	fs := f.MetaFS(pebblevfs.NewMem())
	file, err := fs.Create("a", pebblevfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	f.Set(State{FsyncDelayMs: 150})
	for name, sync := range map[string]func() error{"Sync": file.Sync, "SyncData": file.SyncData} {
		if d := elapsed(func() {
			if err := sync(); err != nil {
				t.Fatal(err)
			}
		}); d < 150*time.Millisecond {
			t.Fatalf("%s with fsync_delay_ms=150 took %v", name, d)
		}
	}
	dir, err := fs.OpenDir("")
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if d := elapsed(func() { dir.Sync() }); d < 150*time.Millisecond {
		t.Fatalf("directory Sync with fsync_delay_ms=150 took %v", d)
	}
}

// fail_writes: every disk-changing operation fails with EIO, reads keep
// working, and clearing it makes the same operations work again.
func TestFSFailWrites(t *testing.T) {
	f := New()
	fs := f.FS(vfs.NewMem())
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	file, err := fs.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	f.Set(State{FailWrites: true})
	isEIO := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("%s while failing: err %v, want EIO", what, err)
		}
	}
	_, err = file.WriteAt([]byte("world"), 5)
	isEIO("WriteAt", err)
	isEIO("Sync", file.Sync())
	isEIO("Truncate", file.Truncate(0))
	_, err = fs.Create("/d/b")
	isEIO("Create", err)
	isEIO("Rename", fs.Rename("/d/a", "/d/c"))
	isEIO("Remove", fs.Remove("/d/a"))
	isEIO("RemoveAll", fs.RemoveAll("/d"))
	isEIO("MkdirAll", fs.MkdirAll("/e", 0o755))
	isEIO("SyncDir", fs.SyncDir("/d"))
	// Reads work, and the failed operations changed nothing.
	buf := make([]byte, 16)
	n, err := file.ReadAt(buf, 0)
	if string(buf[:n]) != "hello" || (err != nil && n != 5) {
		t.Fatalf("ReadAt while failing: %q %v", buf[:n], err)
	}
	if names, err := fs.List("/d"); err != nil || len(names) != 1 || names[0] != "a" {
		t.Fatalf("List while failing: %v %v", names, err)
	}
	r, err := fs.Open("/d/a")
	if err != nil {
		t.Fatalf("Open while failing: %v", err)
	}
	r.Close()

	f.Set(State{})
	if _, err := file.WriteAt([]byte("world"), 5); err != nil {
		t.Fatalf("WriteAt after clearing: %v", err)
	}
	if err := file.Sync(); err != nil {
		t.Fatalf("Sync after clearing: %v", err)
	}
	if err := vfs.WriteFileAtomic(fs, "/d/b", []byte("x")); err != nil {
		t.Fatalf("create, rename, sync dir after clearing: %v", err)
	}
	if err := fs.Remove("/d/b"); err != nil {
		t.Fatalf("Remove after clearing: %v", err)
	}
}

func TestNowOffset(t *testing.T) {
	f := New()
	before := time.Now()
	f.Set(State{ClockOffsetMs: 3_600_000})
	now := f.Now()
	// Round(0) strips the monotonic reading: the wall clocks compare.
	if wall := now.Round(0).Sub(before.Round(0)); wall < time.Hour-time.Second || wall > time.Hour+time.Minute {
		t.Fatalf("wall clock %v ahead, want about an hour", wall)
	}
	// Two readings under one offset measure real elapsed time (through
	// their monotonic readings, which t.Add keeps, shifted alike).
	time.Sleep(20 * time.Millisecond)
	if d := f.Now().Sub(now); d < 20*time.Millisecond || d > time.Minute {
		t.Fatalf("difference of two faulted readings 20ms apart: %v", d)
	}
	f.Set(State{ClockOffsetMs: -60_000})
	if wall := f.Now().Round(0).Sub(time.Now().Round(0)); wall > -59*time.Second || wall < -61*time.Second {
		t.Fatalf("offset -60s: wall clock %v off", wall)
	}
	f.Set(State{})
	if wall := f.Now().Round(0).Sub(time.Now().Round(0)); wall > time.Second || wall < -time.Second {
		t.Fatalf("cleared offset: %v off", wall)
	}
}

func TestParse(t *testing.T) {
	s, err := Parse([]byte(`{"fsync_delay_ms": 5, "write_delay_ms": 6, "fail_writes": true, "clock_offset_ms": -7}`))
	if err != nil || s != (State{FsyncDelayMs: 5, WriteDelayMs: 6, FailWrites: true, ClockOffsetMs: -7}) {
		t.Fatalf("%+v %v", s, err)
	}
	if s, err := Parse([]byte(" {}\n")); err != nil || s != (State{}) {
		t.Fatalf("{}: %+v %v", s, err)
	}
	for _, bad := range []string{``, `{`, `{"fail_writes": 1}`, `{"fsync_delay": 5}`, `{"fsync_delay_ms": -1}`, `{} {}`, `[]`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// syncBuffer is a log sink the watcher goroutine writes while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeFile replaces path atomically, as a fault runner should.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitState polls f until its state is want.
func waitState(t *testing.T, f *Faults, want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %+v after 5s, want %+v", f.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults.json")
	writeFile(t, path, `{"fsync_delay_ms": 20}`)
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := Watch(ctx, path, slog.New(slog.NewTextHandler(logs, nil)))
	// The file at start-up is in force when Watch returns.
	if got := f.Load(); got != (State{FsyncDelayMs: 20}) {
		t.Fatalf("at start-up: %+v", got)
	}
	writeFile(t, path, `{"fail_writes": true, "clock_offset_ms": 3600000}`)
	waitState(t, f, State{FailWrites: true, ClockOffsetMs: 3600000})
	if !strings.Contains(logs.String(), "sluice: faults: applied") || !strings.Contains(logs.String(), "fail_writes=true") {
		t.Fatalf("no INFO line for the change:\n%s", logs.String())
	}

	// A malformed file: one WARN, the state kept.
	writeFile(t, path, `{"fail_writes": tru`)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "level=WARN") {
		if time.Now().After(deadline) {
			t.Fatalf("no WARN for a malformed file:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Several polls later: still the old state, still one WARN.
	time.Sleep(5 * PollInterval) // the point is that polls happen; the state must not move
	if got := f.Load(); got != (State{FailWrites: true, ClockOffsetMs: 3600000}) {
		t.Fatalf("after a malformed file: %+v", got)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines for one malformed file:\n%s", n, logs.String())
	}

	writeFile(t, path, `{}`)
	waitState(t, f, State{})
	writeFile(t, path, `{"write_delay_ms": 7}`)
	waitState(t, f, State{WriteDelayMs: 7})
	// A missing file: no faults.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, State{})
	if n := strings.Count(logs.String(), "sluice: faults: applied"); n != 5 {
		t.Fatalf("%d INFO lines for 5 changes:\n%s", n, logs.String())
	}

	// Once ctx is done the file is not followed.
	cancel()
	time.Sleep(2 * PollInterval) // let a poll in flight finish
	writeFile(t, path, `{"fail_writes": true}`)
	time.Sleep(5 * PollInterval)
	if got := f.Load(); got != (State{}) {
		t.Fatalf("after cancel: %+v", got)
	}
}

// A missing file at start-up: no faults, and no WARN.
func TestWatchMissingFile(t *testing.T) {
	logs := &syncBuffer{}
	f := Watch(t.Context(), filepath.Join(t.TempDir(), "none.json"), slog.New(slog.NewTextHandler(logs, nil)))
	if f.Load() != (State{}) || strings.Contains(logs.String(), "WARN") {
		t.Fatalf("%+v\n%s", f.Load(), logs.String())
	}
}
