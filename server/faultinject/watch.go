package faultinject

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// EnvVar names the environment variable holding the control file's path
// (read by the faults build of the sluice binary).
const EnvVar = "SLUICE_FAULTS"

// PollInterval is how often Watch reads the control file.
const PollInterval = 50 * time.Millisecond

// Watch returns Faults that follow the control file at path: it is read
// once before Watch returns (so faults set before start-up apply from
// the first operation) and then every PollInterval until ctx is done. A
// missing file means no faults; a file that does not parse, or cannot
// be read, is logged once at WARN (until its content changes) and the
// state in force is kept. Each change of the state in force is logged at
// INFO.
func Watch(ctx context.Context, path string, logger *slog.Logger) *Faults {
	if logger == nil {
		logger = slog.Default()
	}
	w := &watcher{f: New(), path: path, logger: logger}
	logger.Info("sluice: faults: watching the control file", "path", path, "every", PollInterval.String())
	w.poll()
	go func() {
		t := time.NewTicker(PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.poll()
			}
		}
	}()
	return w.f
}

// watcher is Watch's state; only its goroutine uses it after the first
// poll.
type watcher struct {
	f      *Faults
	path   string
	logger *slog.Logger
	last   []byte // the content last applied (nil: none, or the file was missing)
	bad    string // the content or read error last warned about ("": none)
}

func (w *watcher) poll() {
	data, err := os.ReadFile(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.last, w.bad = nil, ""
		w.f.apply(State{}, w.logger)
		return
	case err != nil:
		w.warn("read error: "+err.Error(), "sluice: faults: cannot read the control file; keeping the faults in force", "path", w.path, "err", err)
		return
	}
	if w.last != nil && bytes.Equal(data, w.last) {
		w.bad = "" // back to the content in force: a bad one warns again
		return
	}
	s, err := Parse(data)
	if err != nil {
		w.warn("content: "+string(data), "sluice: faults: malformed control file; keeping the faults in force", "path", w.path, "err", err)
		return
	}
	w.last, w.bad = data, ""
	w.f.apply(s, w.logger)
}

// warn logs msg once per distinct key (a bad content or read error).
func (w *watcher) warn(key, msg string, args ...any) {
	if key == w.bad {
		return
	}
	w.bad = key
	w.logger.Warn(msg, args...)
}
