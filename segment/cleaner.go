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
// a tombstone horizon forces it), and no other worker is cleaning, and
// runs Log.Clean on it; when no log needs cleaning it sleeps
// log.cleaner.backoff.ms.
type Cleaner struct {
	threads int
	backoff time.Duration
	logger  *slog.Logger

	mu   sync.Mutex
	idle *sync.Cond            // signalled when a clean finishes
	logs map[*Log]func() int64 // registered logs and their upper bounds
	busy map[*Log]bool         // logs being cleaned
	stop chan struct{}
	wg   sync.WaitGroup
}

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
	c := &Cleaner{threads: max(threads, 1), backoff: backoff, logger: logger, logs: map[*Log]func() int64{}, busy: map[*Log]bool{}}
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
// and reports whether it cleaned one.
func (c *Cleaner) CleanOnce() bool {
	c.mu.Lock()
	var (
		best      *Log
		bestUpper int64
		bestRatio = -1.0
	)
	for l, upper := range c.logs {
		if c.busy[l] {
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
	switch {
	case err == nil:
		c.logger.Info("segment: cleaned log", "dir", best.Dir(), "dirty_ratio", bestRatio,
			"segments", st.Segments, "records_removed", st.RecordsRemoved, "bytes_before", st.BytesRead, "cleaner_offset", st.End)
	case errors.Is(err, ErrCleanAborted), errors.Is(err, ErrClosed):
	default:
		c.logger.Warn("segment: clean failed", "dir", best.Dir(), "err", err)
	}

	c.mu.Lock()
	delete(c.busy, best)
	c.idle.Broadcast()
	c.mu.Unlock()
	return err == nil
}
