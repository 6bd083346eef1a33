package server

import (
	"sync"
	"time"

	"github.com/sluicemq/sluice/segment"
)

// recoverySummary gathers into one line the recoveries after an unclean
// shutdown of the logs a broker opens while it starts: a broker killed
// with thousands of partitions logs one line for them, not one each.
// A log that needed repair (a truncated tail, dropped segments) is still
// logged on its own by segment, naming its partition. Logs opened later
// (a partition created or moved here) log their own line, as before.
type recoverySummary struct {
	mu       sync.Mutex
	on       bool
	start    time.Time
	logs     int64
	segments int64
	bytes    int64
}

// onRecovered is segment.Options.OnRecovered for every log the broker
// opens.
func (b *Broker) onRecovered(st segment.RecoveryStats) {
	s := &b.recovery
	s.mu.Lock()
	if s.on {
		s.logs++
		s.segments += st.SegmentsScanned
		s.bytes += st.BytesScanned
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	b.logger.Info("segment: recovered after an unclean shutdown",
		"dir", st.Dir, "segments_scanned", st.SegmentsScanned, "bytes_scanned", st.BytesScanned)
}

// startRecoverySummary begins gathering; endRecoverySummary logs the line
// (when any log was recovered) and stops.
func (b *Broker) startRecoverySummary() {
	s := &b.recovery
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on, s.start = true, time.Now()
}

func (b *Broker) endRecoverySummary() {
	s := &b.recovery
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on && s.logs > 0 {
		b.logger.Info("sluice: recovered logs after an unclean shutdown",
			"partitions", s.logs, "segments_scanned", s.segments, "bytes_scanned", s.bytes,
			"took", time.Since(s.start).Round(time.Millisecond))
	}
	s.on = false
}
