package vfs

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

func wantInjected(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("got %v, want an error wrapping ErrInjected", err)
	}
}

func TestErrorFSNthWrite(t *testing.T) {
	mem := NewMem()
	must(t, mem.MkdirAll("/d", 0o755))
	fs := NewErrorFS(mem, OnOp(OpWrite, "seg", 3))
	seg, err := fs.Create("/d/seg.log")
	must(t, err)
	other, err := fs.Create("/d/other")
	must(t, err)
	for i := range 5 {
		_, err := other.WriteAt([]byte("o"), int64(i)) // not counted
		must(t, err)
		n, err := seg.WriteAt([]byte{'a' + byte(i)}, int64(i))
		if i == 2 {
			wantInjected(t, err)
			if n != 0 {
				t.Fatalf("injected write wrote %d bytes", n)
			}
			continue
		}
		must(t, err)
	}
	if got := readFile(t, mem, "/d/seg.log"); got != "ab\x00de" {
		t.Fatalf("got %q", got)
	}
}

// TestErrorFSEveryOp fails each operation in turn and checks that the
// error comes back and, where visible, that nothing was done.
func TestErrorFSEveryOp(t *testing.T) {
	var failOp atomic.Int64
	failOp.Store(-1)
	mem := NewMem()
	fs := NewErrorFS(mem, InjectorFunc(func(op Op, path string) error {
		if int64(op) == failOp.Load() {
			return injected(op, path)
		}
		return nil
	}))
	must(t, fs.MkdirAll("/d", 0o755))
	f, err := fs.Create("/d/f")
	must(t, err)
	_, err = f.WriteAt([]byte("abc"), 0)
	must(t, err)

	cases := []struct {
		op   Op
		call func() error
	}{
		{OpCreate, func() error { _, err := fs.Create("/d/g"); return err }},
		{OpOpen, func() error { _, err := fs.Open("/d/f"); return err }},
		{OpOpenReadWrite, func() error { _, err := fs.OpenReadWrite("/d/f"); return err }},
		{OpRemove, func() error { return fs.Remove("/d/f") }},
		{OpRemoveAll, func() error { return fs.RemoveAll("/d") }},
		{OpRename, func() error { return fs.Rename("/d/f", "/d/h") }},
		{OpMkdirAll, func() error { return fs.MkdirAll("/e", 0o755) }},
		{OpList, func() error { _, err := fs.List("/d"); return err }},
		{OpStat, func() error { _, err := fs.Stat("/d/f"); return err }},
		{OpSyncDir, func() error { return fs.SyncDir("/d") }},
		{OpLock, func() error { _, err := fs.Lock("/d/LOCK"); return err }},
		{OpRead, func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{OpWrite, func() error { _, err := f.WriteAt([]byte("zzzz"), 0); return err }},
		{OpTruncate, func() error { return f.Truncate(0) }},
		{OpSync, func() error { return f.Sync() }},
		{OpSize, func() error { _, err := f.Size(); return err }},
	}
	for _, tc := range cases {
		failOp.Store(int64(tc.op))
		wantInjected(t, tc.call())
	}
	failOp.Store(-1)
	names, err := mem.List("/d")
	must(t, err)
	if len(names) != 1 || names[0] != "f" {
		t.Fatalf("after injected failures /d holds %q", names)
	}
	if _, err := mem.Stat("/e"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("injected MkdirAll created /e: %v", err)
	}
	wantFile(t, mem, "/d/f", "abc")
	if _, err := mem.CrashClone(CrashOptions{}).Stat("/d/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("injected SyncDir made /d/f durable: %v", err)
	}
	if f.Fd() != InvalidFd {
		t.Fatal("Fd not passed through")
	}

	// An injected Close still closes the file underneath.
	failOp.Store(int64(OpClose))
	wantInjected(t, f.Close())
	failOp.Store(-1)
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("ReadAt after injected Close: %v", err)
	}
}

func TestAlways(t *testing.T) {
	inj := Always(OpSyncDir, "wal")
	for range 3 {
		wantInjected(t, inj.MaybeError(OpSyncDir, "/data/wal"))
	}
	if err := inj.MaybeError(OpSyncDir, "/data/log"); err != nil {
		t.Fatal(err)
	}
	if err := inj.MaybeError(OpSync, "/data/wal"); err != nil {
		t.Fatal(err)
	}
}

func TestOnOpConcurrent(t *testing.T) {
	inj := OnOp(OpSync, "", 7)
	var failures atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if inj.MaybeError(OpSync, "/x") != nil {
				failures.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n != 1 {
		t.Fatalf("%d calls failed, want exactly 1", n)
	}
}

func TestErrorFSOnDefault(t *testing.T) {
	dir := t.TempDir()
	fs := NewErrorFS(Default, OnOp(OpSync, "", 2))
	f, err := fs.Create(dir + "/a")
	must(t, err)
	defer f.Close()
	must(t, f.Sync())
	wantInjected(t, f.Sync())
	must(t, f.Sync())
	if f.Fd() == InvalidFd {
		t.Fatal("OS file lost its Fd through ErrorFS")
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{
		OpCreate: "Create", OpOpenReadWrite: "OpenReadWrite", OpClose: "Close", Op(99): "Op(99)",
	} {
		if got := op.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(op), got, want)
		}
	}
}
