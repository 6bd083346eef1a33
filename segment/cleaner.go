package segment

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Cleaner compacts registered logs in the background (Kafka's LogCleaner):
// each of its worker goroutines (log.cleaner.threads) repeatedly picks the
// registered log with the highest dirty ratio among those that need
// cleaning (see Log.CleanableRatio: cleanup.policy includes compact and
// the ratio reaches min.cleanable.dirty.ratio, or max.compaction.lag.ms or
// a tombstone's or marker's delete horizon forces it), and no other
// worker is cleaning, and runs Log.Clean on it; when no log needs
// cleaning it sleeps log.cleaner.backoff.ms.
//
// A log whose clean fails (other than ErrCleanAborted: a damaged batch, an
// IO error) is marked uncleanable (Kafka's KAFKA-7215) and skipped, so it
// cannot starve the others by keeping the highest dirty ratio; it is tried
// again after a backoff of 10 × log.cleaner.backoff.ms, doubling after each
// further failure up to an hour, so a transient error heals.
type Cleaner struct {
	threads int
	backoff time.Duration
	logger  *slog.Logger
	now     func() time.Time // the clock for uncleanable backoffs; tests set it

	mu          sync.Mutex
	idle        *sync.Cond              // signalled when a clean finishes
	logs        map[*Log]func() int64   // registered logs and their upper bounds
	busy        map[*Log]bool           // logs being cleaned
	uncleanable map[*Log]uncleanableLog // logs whose last clean failed
	stop        chan struct{}
	wg          sync.WaitGroup
}

// uncleanableLog is a log skipped after a failed clean until retry.
type uncleanableLog struct {
	retry   time.Time
	backoff time.Duration // the wait before retry; doubles on each failure
}

// Uncleanable backoff bounds: the first wait is uncleanableFactor ×
// log.cleaner.backoff.ms (at least minUncleanableBackoff), doubling up to
// maxUncleanableBackoff.
const (
	uncleanableFactor     = 10
	minUncleanableBackoff = 10 * time.Millisecond
	maxUncleanableBackoff = time.Hour
)

// Kafka's defaults for log.cleaner.threads and log.cleaner.backoff.ms.
const (
	DefaultCleanerThreads = 1
	DefaultCleanerBackoff = 15 * time.Second
)

// NewCleaner returns a stopped cleaner; call Start. threads below 1 count
// as 1.
func NewCleaner(threads int, backoff time.Duration, logger *slog.Logger) *Cleaner {
	if logger == nil {
		logger = slog.Default()
	}
	c := &Cleaner{threads: max(threads, 1), backoff: backoff, logger: logger, now: time.Now,
		logs: map[*Log]func() int64{}, busy: map[*Log]bool{}, uncleanable: map[*Log]uncleanableLog{}}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// Add registers l. upperBound returns the offset a clean must stay below
// (the partition's high watermark); nil means the log end offset.
func (c *Cleaner) Add(l *Log, upperBound func() int64) {
	if upperBound == nil {
		upperBound = func() int64 { return NoUpperBound }
	}
	c.mu.Lock()
	c.logs[l] = upperBound
	c.mu.Unlock()
}

// Remove unregisters l and waits for a clean of it in progress, so the
// caller may close it.
func (c *Cleaner) Remove(l *Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.logs, l)
	delete(c.uncleanable, l)
	for c.busy[l] {
		c.idle.Wait()
	}
}

// Start runs the worker goroutines until Close; it does nothing if the
// cleaner already runs.
func (c *Cleaner) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		return
	}
	c.stop = make(chan struct{})
	stop := c.stop
	for i := 0; i < c.threads; i++ {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c.CleanOnce() {
					continue
				}
				t := time.NewTimer(c.backoff)
				select {
				case <-stop:
					t.Stop()
					return
				case <-t.C:
				}
			}
		}()
	}
}

// Close stops the workers and waits for cleans in progress.
func (c *Cleaner) Close() {
	c.mu.Lock()
	stop := c.stop
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		c.wg.Wait()
	}
}

// CleanOnce cleans the filthiest registered log that needs it, if any,
// and reports whether it cleaned one. Logs marked uncleanable are skipped
// until their retry time.
func (c *Cleaner) CleanOnce() bool {
	c.mu.Lock()
	var (
		best      *Log
		bestUpper int64
		bestRatio = -1.0
	)
	now := c.now()
	for l, upper := range c.logs {
		if c.busy[l] {
			continue
		}
		if u, ok := c.uncleanable[l]; ok && now.Before(u.retry) {
			continue
		}
		u := upper()
		if r, needed := l.CleanableRatio(u); needed && r > bestRatio {
			best, bestUpper, bestRatio = l, u, r
		}
	}
	if best == nil {
		c.mu.Unlock()
		return false
	}
	c.busy[best] = true
	c.mu.Unlock()

	st, err := best.Clean(bestUpper)
	if err == nil {
		c.logger.Info("segment: cleaned log", "dir", best.Dir(), "dirty_ratio", bestRatio,
			"segments", st.Segments, "records_removed", st.RecordsRemoved, "bytes_before", st.BytesRead, "cleaner_offset", st.End)
	}

	c.mu.Lock()
	u, wasUncleanable := c.uncleanable[best]
	switch {
	case err == nil:
		if wasUncleanable {
			delete(c.uncleanable, best)
			c.logger.Info("segment: a log marked uncleanable was cleaned again", "dir", best.Dir())
		}
	case errors.Is(err, ErrCleanAborted), errors.Is(err, ErrClosed):
	default:
		if _, registered := c.logs[best]; registered {
			if wasUncleanable {
				u.backoff = min(2*u.backoff, maxUncleanableBackoff)
			} else {
				u.backoff = min(max(uncleanableFactor*c.backoff, minUncleanableBackoff), maxUncleanableBackoff)
			}
			u.retry = c.now().Add(u.backoff)
			c.uncleanable[best] = u
			if wasUncleanable {
				c.logger.Warn("segment: clean of an uncleanable log failed again", "dir", best.Dir(), "err", err, "retry_in", u.backoff)
			} else {
				c.logger.Error("segment: clean failed; the log is marked uncleanable and skipped until retry",
					"dir", best.Dir(), "err", err, "retry_in", u.backoff)
			}
		}
	}
	delete(c.busy, best)
	c.idle.Broadcast()
	c.mu.Unlock()
	return err == nil
}
