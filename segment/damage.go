package segment

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluicemq/sluice/segment/batch"
)

// ErrDamaged marks a log holding data that fails its checks where it must
// be whole: a synced segment that is torn, fails a CRC, or ends before the
// next one starts. A *DamageError wraps it (and ErrFailed, so writes are
// refused as after an IO error).
var ErrDamaged = errors.New("segment: log damaged")

// DamageError describes where a log is damaged. The log serves the
// offsets below Offset, refuses reads at or past it and every write, and
// changes nothing on disk: the damaged file and every later segment stay
// as they are until an operator truncates the log there (Truncate, the
// sluice-dump truncate command) or replaces the file.
type DamageError struct {
	File     string // the damaged .log file
	Position int64  // byte position in File of the first bad batch (or its end)
	Offset   int64  // the offset the bad batch would start at: served offsets are below it
	Reason   error  // what the check found
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("segment: log damaged in %s at position %d (offset %d): %v; offsets from %d on are not served until an operator truncates the log there (sluice-dump truncate)",
		e.File, e.Position, e.Offset, e.Reason, e.Offset)
}

// Is reports ErrDamaged and ErrFailed.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged || target == ErrFailed }

// Damage returns where the log is damaged, or nil when it is not (see
// DamageError). Damage is found by recovery, or by the CRC check of the
// first read of a segment that recovery trusted without reading.
func (l *Log) Damage() *DamageError {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.damage
}

// Failed returns the error that stopped the log's writes (an IO error,
// wrapping ErrFailed, or a *DamageError), or nil.
func (l *Log) Failed() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed
}

// damageLocked records damage found at d (the lowest wins) and fails the
// log, with one log line naming the file and position.
func (l *Log) damageLocked(d *DamageError) {
	if l.damage != nil && l.damage.Offset <= d.Offset {
		return
	}
	l.damage = d
	l.failed = d
	if l.opts.OnFail != nil {
		l.opts.OnFail(d)
	}
	l.opts.Logger.Error("segment: log damaged: serving only the offsets below the damage, refusing writes; truncate it there with sluice-dump truncate once the data is given up (or restore the file)",
		"dir", l.dir, "file", d.File, "position", d.Position, "offset", d.Offset, "reason", d.Reason)
}

// A span is a byte range [from, to) of a segment's .log file.
type span struct{ from, to int64 }

// Stored batches are CRC-checked once per process before they are first
// served: recovery checks what it scans, appends check what they write,
// and a segment recovery trusted without reading (after a clean
// shutdown, or below the recovery point) keeps the spans it did not read
// in segment.unverified. Read checks the part of its answer that lies in
// them (then drops it from them) and stops before the first bad batch,
// marking the log damaged there. Every later read, sendfile included,
// serves checked bytes without reading them again.

// setUnverified records that [0, to) of s was not read by recovery.
func (s *segment) setUnverified(to int64) {
	if to <= 0 {
		return
	}
	s.unverified = []span{{0, to}}
	s.needsVerify.Store(true)
}

// verifyRanges CRC-checks the parts of res (returned by Read for a read
// at offset) that lie in unverified spans, outside the log's lock (the
// files stay readable for file.delete.delay.ms). At the first bad batch
// the log is marked damaged and res is cut before it; it returns the
// damage when nothing is left.
func (l *Log) verifyRanges(res *ReadResult, checks []uncheckedRange) error {
	var buf []byte
	for _, c := range checks {
		i, s := c.i, c.s
		fr := &res.Ranges[i]
		if !s.needsVerify.Load() || !l.overlapsUnverified(s, fr.Position, fr.Position+fr.Size) {
			continue
		}
		pos, end := fr.Position, fr.Position+fr.Size
		next := c.start
		var bad error
		for pos < end {
			var hdr [batch.HeaderSize]byte
			if _, err := fr.File.ReadAt(hdr[:], pos); err != nil && err != io.EOF {
				// A failed read is not damage: the check did not
				// run (the file may be retried, or is being deleted).
				return readFailure(res, fmt.Errorf("segment: check %s at position %d: %w", s.path(KindLog), pos, err))
			}
			h, err := batch.ParseHeader(hdr[:])
			if err != nil || h.Size() < batch.HeaderSize || pos+int64(h.Size()) > end {
				bad = fmt.Errorf("%w: batch header at position %d", ErrCorrupt, pos)
				break
			}
			if cap(buf) < h.Size() {
				buf = make([]byte, h.Size())
			}
			buf = buf[:h.Size()]
			if _, err := fr.File.ReadAt(buf, pos); err != nil && err != io.EOF {
				return readFailure(res, fmt.Errorf("segment: check %s at position %d: %w", s.path(KindLog), pos, err))
			}
			if _, err := batch.ValidateHeader(buf); err != nil {
				bad = err
				break
			}
			pos, next = pos+int64(h.Size()), h.NextOffset()
		}
		if bad == nil {
			l.markVerified(s, fr.Position, end)
			continue
		}
		d := &DamageError{File: s.path(KindLog), Position: pos, Offset: next, Reason: bad}
		l.mu.Lock()
		l.damageLocked(d)
		l.mu.Unlock()
		// Serve what lies before the bad batch.
		res.Bytes -= end - pos
		fr.Size = pos - fr.Position
		for _, r := range res.Ranges[i+1:] {
			res.Bytes -= r.Size
		}
		res.Ranges = res.Ranges[:i+1]
		if fr.Size == 0 {
			res.Ranges = res.Ranges[:i]
		}
		res.NextOffset = next
		if res.Bytes == 0 {
			res.FirstOffset = -1
			return d
		}
		return nil
	}
	return nil
}

// uncheckedRange is a range of a ReadResult (index i) in a segment with
// unchecked spans; start is the base offset of its first batch.
type uncheckedRange struct {
	i     int
	s     *segment
	start int64
}

// overlapsUnverified reports whether [from, to) of s overlaps its
// unverified spans.
func (l *Log) overlapsUnverified(s *segment, from, to int64) bool {
	l.verifyMu.Lock()
	defer l.verifyMu.Unlock()
	for _, sp := range s.unverified {
		if sp.from < to && sp.to > from {
			return true
		}
	}
	return false
}

// markVerified removes [from, to) from the unverified spans of s: its
// batches passed their checks. Concurrent readers of one unchecked range
// may both check it; none serves it unchecked.
func (l *Log) markVerified(s *segment, from, to int64) {
	l.verifyMu.Lock()
	defer l.verifyMu.Unlock()
	var out []span
	for _, sp := range s.unverified {
		if sp.to <= from || sp.from >= to {
			out = append(out, sp)
			continue
		}
		if sp.from < from {
			out = append(out, span{sp.from, from})
		}
		if sp.to > to {
			out = append(out, span{to, sp.to})
		}
	}
	s.unverified = slices.Clip(out)
	if len(out) == 0 {
		s.needsVerify.Store(false)
	}
}

// verified reports whether every byte of s has been checked.
func (s *segment) verified() bool { return !s.needsVerify.Load() }

// readFailure empties res after a read error during the first-read check:
// nothing unchecked is served, nothing is marked damaged.
func readFailure(res *ReadResult, err error) error {
	res.Ranges, res.Bytes, res.FirstOffset = nil, 0, -1
	return err
}
