package server

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
)

// openOn opens a broker on log.dirs=dir over fs and returns New's error.
func openOn(t *testing.T, fs vfs.FS, dir string) error {
	t.Helper()
	cfg, err := config.Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(cfg, Options{FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		b.Close()
	}
	return err
}

// wantLogDirError checks err names log.dirs, the folder and wants.
func wantLogDirError(t *testing.T, err error, dir string, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the broker opened")
	}
	for _, w := range append([]string{"log.dirs", dir}, wants...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "another broker") {
		t.Errorf("error %q blames another broker", err)
	}
}

// A log dir the broker cannot write is reported as such, never as one
// another broker holds: a read-only file system (the lock file cannot be
// opened), a folder it may not write in (chmod 0555; when the tests run as
// root, which ignores modes, an injected EACCES), one where only the old
// .lock is writable, and a full disk.
func TestLogDirNotWritable(t *testing.T) {
	errOn := func(op vfs.Op, name string, errno syscall.Errno) vfs.FS {
		return vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(o vfs.Op, path string) error {
			if o == op && filepath.Base(path) == name {
				return &os.PathError{Op: "open", Path: path, Err: errno}
			}
			return nil
		}))
	}
	t.Run("read-only file system", func(t *testing.T) {
		dir := t.TempDir()
		wantLogDirError(t, openOn(t, errOn(vfs.OpLock, lockName, syscall.EROFS), dir), dir, "read-only file system")
	})
	t.Run("permission denied", func(t *testing.T) {
		dir := t.TempDir()
		fs := vfs.Default
		if os.Geteuid() == 0 {
			fs = errOn(vfs.OpLock, lockName, syscall.EACCES)
		} else {
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
		}
		wantLogDirError(t, openOn(t, fs, dir), dir, "permission denied")
	})
	t.Run("old lock file writable", func(t *testing.T) {
		dir := t.TempDir()
		wantLogDirError(t, openOn(t, errOn(vfs.OpCreate, probeName, syscall.EACCES), dir), dir, "is not writable", "permission denied")
		if _, err := os.Stat(filepath.Join(dir, probeName)); !os.IsNotExist(err) {
			t.Errorf("probe file left: %v", err)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		dir := t.TempDir()
		wantLogDirError(t, openOn(t, errOn(vfs.OpLock, lockName, syscall.ENOSPC), dir), dir, "no space left")
	})
	t.Run("disk full with the lock in place", func(t *testing.T) {
		// It starts: writes get KAFKA_STORAGE_ERROR until space frees.
		if err := openOn(t, errOn(vfs.OpCreate, probeName, syscall.ENOSPC), t.TempDir()); err != nil {
			t.Fatalf("a full disk whose .lock exists stopped the start: %v", err)
		}
	})
}

// A log dir that cannot be created names log.dirs and the file in the way.
func TestLogDirUnderAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		wantLogDirError(t, openOn(t, vfs.Default, dir), dir, "cannot be created", "a file is in the way")
	}
}
