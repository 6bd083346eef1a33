package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// fsKinds runs each behaviour test against MemFS, Default and an ErrorFS
// that injects nothing, so all are held to the same contract. dir is an existing, empty directory.
var fsKinds = []struct {
	name string
	new  func(t *testing.T) (fs FS, dir string)
}{
	{"mem", func(t *testing.T) (FS, string) {
		fs := NewMem()
		if err := fs.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		return fs, "/data"
	}},
	{"os", func(t *testing.T) (FS, string) { return Default, t.TempDir() }},
	{"errorfs", func(t *testing.T) (FS, string) { // pass-through when nothing is injected
		fs := NewErrorFS(NewMem(), InjectorFunc(func(Op, string) error { return nil }))
		if err := fs.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		return fs, "/data"
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, fs FS, name, data string) {
	t.Helper()
	f, err := fs.Create(name)
	must(t, err)
	_, err = f.WriteAt([]byte(data), 0)
	must(t, err)
	must(t, f.Close())
}

func readFile(t *testing.T, fs FS, name string) string {
	t.Helper()
	f, err := fs.Open(name)
	must(t, err)
	defer f.Close()
	size, err := f.Size()
	must(t, err)
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !(err == io.EOF && size == 0) {
		t.Fatal(err)
	}
	return string(buf)
}

func wantNotExist(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want an error wrapping os.ErrNotExist", err)
	}
}

var behaviourTests = []struct {
	name string
	run  func(t *testing.T, fs FS, dir string)
}{
	{"write-read", func(t *testing.T, fs FS, dir string) {
		f, err := fs.Create(filepath.Join(dir, "a"))
		must(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte("hello"), 0)
		must(t, err)
		_, err = f.WriteAt([]byte("world"), 10) // leaves a hole of zeros
		must(t, err)
		if size, err := f.Size(); err != nil || size != 15 {
			t.Fatalf("Size = %d, %v; want 15", size, err)
		}
		buf := make([]byte, 15)
		n, err := f.ReadAt(buf, 0)
		must(t, err)
		if want := "hello\x00\x00\x00\x00\x00world"; n != 15 || string(buf) != want {
			t.Fatalf("ReadAt = %d %q, want %q", n, buf, want)
		}
		n, err = f.ReadAt(buf[:10], 10)
		if n != 5 || err != io.EOF {
			t.Fatalf("ReadAt past end = %d, %v; want 5, io.EOF", n, err)
		}
		must(t, f.Sync())
	}},
	{"truncate", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "a")
		writeFile(t, fs, name, "abcdef")
		f, err := fs.OpenReadWrite(name)
		must(t, err)
		must(t, f.Truncate(3))
		must(t, f.Truncate(6)) // grows with zeros, not the old bytes
		must(t, f.Close())
		if got := readFile(t, fs, name); got != "abc\x00\x00\x00" {
			t.Fatalf("got %q", got)
		}
		writeFile(t, fs, name, "x") // Create truncates
		if got := readFile(t, fs, name); got != "x" {
			t.Fatalf("got %q after Create", got)
		}
	}},
	{"open-modes", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "a")
		writeFile(t, fs, name, "abc")
		f, err := fs.Open(name)
		must(t, err)
		if _, err := f.WriteAt([]byte("x"), 0); err == nil {
			t.Fatal("WriteAt on a file from Open succeeded")
		}
		must(t, f.Close())
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("ReadAt after Close: %v", err)
		}
		f, err = fs.OpenReadWrite(name)
		must(t, err)
		_, err = f.WriteAt([]byte("X"), 1)
		must(t, err)
		must(t, f.Close())
		if got := readFile(t, fs, name); got != "aXc" {
			t.Fatalf("got %q", got)
		}
	}},
	{"not-exist", func(t *testing.T, fs FS, dir string) {
		missing := filepath.Join(dir, "missing")
		_, err := fs.Open(missing)
		wantNotExist(t, err)
		_, err = fs.OpenReadWrite(missing)
		wantNotExist(t, err)
		_, err = fs.Stat(missing)
		wantNotExist(t, err)
		_, err = fs.List(missing)
		wantNotExist(t, err)
		wantNotExist(t, fs.Remove(missing))
		wantNotExist(t, fs.Rename(missing, filepath.Join(dir, "b")))
		_, err = fs.Create(filepath.Join(missing, "a"))
		wantNotExist(t, err)
		must(t, fs.RemoveAll(missing))
	}},
	{"rename", func(t *testing.T, fs FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		writeFile(t, fs, a, "A")
		writeFile(t, fs, b, "B")
		must(t, fs.Rename(a, b))
		if got := readFile(t, fs, b); got != "A" {
			t.Fatalf("got %q", got)
		}
		_, err := fs.Stat(a)
		wantNotExist(t, err)
		must(t, fs.MkdirAll(filepath.Join(dir, "d"), 0o755))
		must(t, fs.Rename(b, filepath.Join(dir, "d", "c")))
		if got := readFile(t, fs, filepath.Join(dir, "d", "c")); got != "A" {
			t.Fatalf("got %q", got)
		}
		must(t, fs.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")))
		if got := readFile(t, fs, filepath.Join(dir, "e", "c")); got != "A" {
			t.Fatalf("got %q after renaming the directory", got)
		}
	}},
	{"remove", func(t *testing.T, fs FS, dir string) {
		d := filepath.Join(dir, "d")
		must(t, fs.MkdirAll(filepath.Join(d, "e"), 0o755))
		writeFile(t, fs, filepath.Join(d, "e", "f"), "x")
		if err := fs.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Remove of a non-empty dir: %v", err)
		}
		must(t, fs.Remove(filepath.Join(d, "e", "f")))
		must(t, fs.Remove(filepath.Join(d, "e")))
		writeFile(t, fs, filepath.Join(d, "g"), "x")
		must(t, fs.RemoveAll(d))
		_, err := fs.Stat(d)
		wantNotExist(t, err)
	}},
	{"list-stat", func(t *testing.T, fs FS, dir string) {
		for _, n := range []string{"c", "a", "b"} {
			writeFile(t, fs, filepath.Join(dir, n), n+n)
		}
		must(t, fs.MkdirAll(filepath.Join(dir, "d", "e"), 0o755))
		must(t, fs.MkdirAll(filepath.Join(dir, "d"), 0o755)) // exists: fine
		names, err := fs.List(dir)
		must(t, err)
		if want := []string{"a", "b", "c", "d"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("List = %q, want %q", names, want)
		}
		fi, err := fs.Stat(filepath.Join(dir, "b"))
		must(t, err)
		if fi.Name() != "b" || fi.Size() != 2 || fi.IsDir() || fi.ModTime().IsZero() {
			t.Fatalf("Stat(b) = %q %d %v %v", fi.Name(), fi.Size(), fi.IsDir(), fi.ModTime())
		}
		fi, err = fs.Stat(filepath.Join(dir, "d"))
		must(t, err)
		if fi.Name() != "d" || !fi.IsDir() {
			t.Fatalf("Stat(d) = %q %v", fi.Name(), fi.IsDir())
		}
		if err := fs.MkdirAll(filepath.Join(dir, "a", "x"), 0o755); err == nil {
			t.Fatal("MkdirAll below a file succeeded")
		}
		must(t, fs.SyncDir(dir))
	}},
	{"lock", func(t *testing.T, fs FS, dir string) {
		name := filepath.Join(dir, "LOCK")
		l, err := fs.Lock(name)
		must(t, err)
		if l2, err := fs.Lock(name); err == nil {
			l2.Close()
			t.Fatal("second Lock succeeded")
		} else if !errors.Is(err, ErrLocked) {
			t.Fatalf("second Lock: %v, want ErrLocked", err)
		}
		must(t, l.Close())
		l, err = fs.Lock(name)
		must(t, err)
		must(t, l.Close())
	}},
}

func TestBehaviour(t *testing.T) {
	for _, k := range fsKinds {
		for _, tc := range behaviourTests {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				fs, dir := k.new(t)
				tc.run(t, fs, dir)
			})
		}
	}
}

func TestMemPaths(t *testing.T) {
	fs := NewMem()
	must(t, fs.MkdirAll("a/b", 0o755))
	writeFile(t, fs, "/a/./b/../b/f", "x")
	if got := readFile(t, fs, "a/b/f"); got != "x" {
		t.Fatalf("got %q", got)
	}
	f, err := fs.Open("/a/b/f")
	must(t, err)
	if f.Fd() != InvalidFd {
		t.Fatal("MemFS file has an Fd")
	}
	fi, err := fs.Stat("/")
	must(t, err)
	if !fi.IsDir() {
		t.Fatal("root is not a directory")
	}
	if _, err := fs.Open("/a"); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

// crashFS returns a MemFS with a durable directory /d holding a durable,
// synced file /d/f with contents "synced".
func crashFS(t *testing.T) *MemFS {
	fs := NewMem()
	must(t, fs.MkdirAll("/d", 0o755))
	f, err := fs.Create("/d/f")
	must(t, err)
	_, err = f.WriteAt([]byte("synced"), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	must(t, fs.SyncDir("/d"))
	return fs
}

func wantFile(t *testing.T, fs FS, name, want string) {
	t.Helper()
	if got := readFile(t, fs, name); got != want {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

func wantGone(t *testing.T, fs FS, name string) {
	t.Helper()
	_, err := fs.Stat(name)
	wantNotExist(t, err)
}

func TestCrashData(t *testing.T) {
	fs := crashFS(t)
	f, err := fs.OpenReadWrite("/d/f")
	must(t, err)
	_, err = f.WriteAt([]byte("+more"), 6)
	must(t, err)
	wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced")
	must(t, f.Sync())
	wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced+more")
	_, err = f.WriteAt([]byte("S"), 0) // unsynced overwrite in place
	must(t, err)
	wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced+more")

	must(t, f.Truncate(2)) // unsynced shrink reverts
	wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced+more")
	must(t, f.Close())
	writeFile(t, fs, "/d/f", "new") // Create's truncation too
	wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced+more")
}

func TestCrashEntries(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		fs := crashFS(t)
		f, err := fs.Create("/d/g")
		must(t, err)
		_, err = f.WriteAt([]byte("data"), 0)
		must(t, err)
		must(t, f.Sync()) // data durable, name not
		wantGone(t, fs.CrashClone(CrashOptions{}), "/d/g")
		must(t, fs.SyncDir("/d"))
		wantFile(t, fs.CrashClone(CrashOptions{}), "/d/g", "data")
	})
	t.Run("rename", func(t *testing.T) {
		fs := crashFS(t)
		writeFile(t, fs, "/d/g", "old g")
		must(t, fs.SyncDir("/d"))
		must(t, fs.Rename("/d/f", "/d/g"))
		c := fs.CrashClone(CrashOptions{})
		wantFile(t, c, "/d/f", "synced")
		wantFile(t, c, "/d/g", "") // durable entry, data never synced
		must(t, fs.SyncDir("/d"))
		c = fs.CrashClone(CrashOptions{})
		wantGone(t, c, "/d/f")
		wantFile(t, c, "/d/g", "synced") // the node keeps its synced data
	})
	t.Run("rename-across-dirs", func(t *testing.T) {
		fs := crashFS(t)
		must(t, fs.MkdirAll("/e", 0o755))
		must(t, fs.Rename("/d/f", "/e/f"))
		must(t, fs.SyncDir("/e")) // new name durable, old removal not
		c := fs.CrashClone(CrashOptions{})
		wantFile(t, c, "/d/f", "synced")
		wantFile(t, c, "/e/f", "synced")
	})
	t.Run("remove", func(t *testing.T) {
		fs := crashFS(t)
		f, err := fs.OpenReadWrite("/d/f")
		must(t, err)
		_, err = f.WriteAt([]byte("unsynced"), 0)
		must(t, err)
		must(t, f.Close())
		must(t, fs.Remove("/d/f"))
		wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced")
		must(t, fs.SyncDir("/d"))
		wantGone(t, fs.CrashClone(CrashOptions{}), "/d/f")
	})
	t.Run("remove-all", func(t *testing.T) {
		fs := crashFS(t)
		must(t, fs.RemoveAll("/d"))
		wantFile(t, fs.CrashClone(CrashOptions{}), "/d/f", "synced")
		must(t, fs.SyncDir("/"))
		wantGone(t, fs.CrashClone(CrashOptions{}), "/d")
	})
	t.Run("mkdirall-durable", func(t *testing.T) {
		fs := NewMem()
		must(t, fs.MkdirAll("/x/y/z", 0o755))
		fi, err := fs.CrashClone(CrashOptions{}).Stat("/x/y/z")
		must(t, err)
		if !fi.IsDir() {
			t.Fatal("not a directory")
		}
	})
}

func TestCrashCloneIndependent(t *testing.T) {
	fs := crashFS(t)
	c := fs.CrashClone(CrashOptions{})
	writeFile(t, c, "/d/f", "clone")
	wantFile(t, fs, "/d/f", "synced")
	writeFile(t, fs, "/d/f", "orig")
	wantFile(t, c, "/d/f", "clone")
	// The clone starts fully durable.
	wantFile(t, c.CrashClone(CrashOptions{}), "/d/f", "synced")
	wantFile(t, fs.CrashClone(CrashOptions{}).CrashClone(CrashOptions{}), "/d/f", "synced")
}

func TestCrashTorn(t *testing.T) {
	const synced, full = "synced", "synced+0123456789abcdefghijklmnopqrstuvwxyz"
	fs := crashFS(t)
	f, err := fs.OpenReadWrite("/d/f")
	must(t, err)
	_, err = f.WriteAt([]byte(full[len(synced):]), int64(len(synced)))
	must(t, err)

	var longer, garbled, exact int
	for seed := range uint64(200) {
		c := fs.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 0))})
		got := readFile(t, c, "/d/f")
		if !bytes.HasPrefix([]byte(got), []byte(synced)) || len(got) > len(full) {
			t.Fatalf("seed %d: %q does not start with the synced data or is too long", seed, got)
		}
		if len(got) > len(synced) {
			longer++
		}
		if got == full[:len(got)] {
			exact++
		} else {
			garbled++
		}
		again := fs.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 0))})
		if readFile(t, again, "/d/f") != got {
			t.Fatalf("seed %d: not reproducible", seed)
		}
	}
	if longer == 0 || garbled == 0 || exact == 0 {
		t.Fatalf("over 200 seeds: %d kept a tail, %d garbled, %d exact", longer, garbled, exact)
	}

	// An unsynced overwrite of synced bytes is never torn in.
	_, err = f.WriteAt([]byte("S"), 0)
	must(t, err)
	for seed := range uint64(20) {
		c := fs.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(seed, 0))})
		wantFile(t, c, "/d/f", synced)
	}
}

// TestMemRace exercises concurrent use of one file and of the tree; run it
// with -race.
func TestMemRace(t *testing.T) {
	fs := NewMem()
	must(t, fs.MkdirAll("/d", 0o755))
	w, err := fs.Create("/d/f")
	must(t, err)
	r, err := fs.Open("/d/f")
	must(t, err)
	const chunk, chunks = 64, 500
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := bytes.Repeat([]byte{'x'}, chunk)
		for i := range chunks {
			if _, err := w.WriteAt(buf, int64(i*chunk)); err != nil {
				t.Error(err)
				return
			}
			if i%50 == 0 {
				if err := w.Sync(); err != nil {
					t.Error(err)
				}
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, chunk)
			for i := range chunks {
				n, err := r.ReadAt(buf, int64(i*chunk/2))
				if err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				for _, b := range buf[:n] {
					if b != 'x' {
						t.Errorf("read %q", b)
						return
					}
				}
				if _, err := r.Size(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			fs.CrashClone(CrashOptions{Rand: rand.New(rand.NewPCG(uint64(i), 1))})
			if _, err := fs.Stat("/d/f"); err != nil {
				t.Error(err)
			}
			if _, err := fs.List("/d"); err != nil {
				t.Error(err)
			}
			if err := fs.SyncDir("/d"); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if size, err := r.Size(); err != nil || size != chunk*chunks {
		t.Fatalf("Size = %d, %v", size, err)
	}
}
