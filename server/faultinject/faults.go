package faultinject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/sluicemq/sluice/segment/vfs"
)

// State is the faults in force: the control file's JSON object (see the
// package doc). The zero value is no faults.
type State struct {
	FsyncDelayMs  int64 `json:"fsync_delay_ms"`
	WriteDelayMs  int64 `json:"write_delay_ms"`
	FailWrites    bool  `json:"fail_writes"`
	ClockOffsetMs int64 `json:"clock_offset_ms"`
}

// LogAttrs returns the state as slog key-value pairs.
func (s State) LogAttrs() []any {
	return []any{"fsync_delay_ms", s.FsyncDelayMs, "write_delay_ms", s.WriteDelayMs,
		"fail_writes", s.FailWrites, "clock_offset_ms", s.ClockOffsetMs}
}

// Parse decodes a control file: one JSON object with only the fields of
// State, delays not negative.
func Parse(data []byte) (State, error) {
	var s State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return State{}, fmt.Errorf("faultinject: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return State{}, errors.New("faultinject: data after the JSON object")
	}
	if s.FsyncDelayMs < 0 || s.WriteDelayMs < 0 {
		return State{}, fmt.Errorf("faultinject: negative delay (fsync_delay_ms %d, write_delay_ms %d)", s.FsyncDelayMs, s.WriteDelayMs)
	}
	return s, nil
}

// Faults holds the state in force, swapped atomically, and makes the
// file systems and the clock that obey it. The zero value is not usable:
// call New or Watch.
type Faults struct {
	st atomic.Pointer[State]
}

// New returns Faults with no faults in force.
func New() *Faults {
	f := &Faults{}
	f.st.Store(&State{})
	return f
}

// Load returns the state in force.
func (f *Faults) Load() State { return *f.st.Load() }

// Set puts s in force and reports whether it differs from the state it
// replaced.
func (f *Faults) Set(s State) (changed bool) {
	return *f.st.Swap(&s) != s
}

// Now is the faulted wall clock: time.Now() plus clock_offset_ms. t.Add
// shifts the monotonic reading alike, so two readings under one offset
// differ by the real elapsed time; never compare a reading with one of
// time.Now (see the package doc).
func (f *Faults) Now() time.Time {
	return time.Now().Add(time.Duration(f.st.Load().ClockOffsetMs) * time.Millisecond)
}

func sleepMs(ms int64) {
	if ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

// FS wraps a partition-log FS (server Options.FS): fsync and write
// delays, and EIO on writes while fail_writes is set (see the package
// doc). It is built on vfs.NewErrorFS, so File.Fd passes through and
// sendfile reads keep working.
func (f *Faults) FS(inner vfs.FS) vfs.FS {
	return vfs.NewErrorFS(inner, logInjector{f})
}

// logInjector is the vfs.Injector of FS.
type logInjector struct{ f *Faults }

// failOps are the operations fail_writes fails: the ones that change
// the disk.
var failOps = map[vfs.Op]bool{
	vfs.OpCreate: true, vfs.OpRemove: true, vfs.OpRemoveAll: true, vfs.OpRename: true,
	vfs.OpMkdirAll: true, vfs.OpSyncDir: true, vfs.OpWrite: true, vfs.OpTruncate: true,
	vfs.OpSync: true,
}

// MaybeError sleeps the delay of op, then fails it with EIO when
// fail_writes is set and op changes the disk.
func (i logInjector) MaybeError(op vfs.Op, path string) error {
	s := i.f.st.Load()
	switch op {
	case vfs.OpSync, vfs.OpSyncDir:
		sleepMs(s.FsyncDelayMs)
	case vfs.OpWrite:
		sleepMs(s.WriteDelayMs)
	}
	if s.FailWrites && failOps[op] {
		return EIO(op.String(), path)
	}
	return nil
}

// EIO is the error of a failed operation: a *fs.PathError wrapping
// syscall.EIO, as the OS reports a failing disk.
func EIO(op, path string) error {
	return &fs.PathError{Op: "faultinject " + op, Path: path, Err: syscall.EIO}
}

// MetaFS wraps the metadata and raft-state Pebble FS (server
// Options.MetaFS): every Sync, SyncData and SyncTo of a file or a
// directory sleeps fsync_delay_ms first. It never fails an operation.
func (f *Faults) MetaFS(inner pebblevfs.FS) pebblevfs.FS {
	return errorfs.Wrap(inner, pebbleInjector{f})
}

// pebbleInjector is the errorfs.Injector of MetaFS.
type pebbleInjector struct{ f *Faults }

func (pebbleInjector) String() string { return "faultinject" }

func (i pebbleInjector) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		sleepMs(i.f.st.Load().FsyncDelayMs)
	}
	return nil
}

// apply puts s in force and logs it when it changed.
func (f *Faults) apply(s State, logger *slog.Logger) {
	if f.Set(s) {
		logger.Info("sluice: faults: applied", s.LogAttrs()...)
	}
}
