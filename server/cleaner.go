package server

import (
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/server/config"
)

// The log cleaner (Kafka's LogCleaner): compaction of topics whose
// cleanup.policy includes compact. Every partition log is registered; the
// cleaner only cleans those whose policy says so (checked on each pass, so
// a cleanup.policy changed by AlterConfigs applies from the next pass),
// and never at or past the partition's high watermark. The topic-level
// settings (delete.retention.ms, min.cleanable.dirty.ratio,
// min/max.compaction.lag.ms) reach the logs through logConfig; the broker
// keys log.cleaner.enable, log.cleaner.threads and log.cleaner.backoff.ms
// are applied here.

// newCleaner returns the broker's cleaner, not started, or nil when
// log.cleaner.enable is false.
func newCleaner(cfg config.Config, logger *slog.Logger) *segment.Cleaner {
	if !cfg.LogCleanerEnable {
		return nil
	}
	return segment.NewCleaner(int(cfg.LogCleanerThreads), time.Duration(cfg.LogCleanerBackoffMs)*time.Millisecond, logger)
}

// startCleaner starts the cleaner, if enabled.
func (b *Broker) startCleaner() {
	if b.clean != nil {
		b.clean.Start()
	}
}

// stopCleaner stops the cleaner and waits for a clean in progress.
func (b *Broker) stopCleaner() {
	if b.clean != nil {
		b.clean.Close()
	}
}

// cleanerDedupeShare is one cleaner thread's share of
// log.cleaner.dedupe.buffer.size (Kafka divides it the same way), at least
// 1 MiB so a clean always maps something useful.
func (b *Broker) cleanerDedupeShare() int64 {
	threads := max(int64(b.cfg.LogCleanerThreads), 1)
	return max(b.cfg.LogCleanerDedupeBufferSize/threads, 1<<20)
}
