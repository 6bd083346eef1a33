package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The histogram's range: 1 µs to 1 hour, 3 significant digits (every
// value is kept within 0.1%). Longer latencies are recorded as 1 hour.
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histDigits  = 3
)

// mib is Kafka's MB in MB/sec: 1024*1024 bytes.
const mib = 1024 * 1024

// stats counts records, bytes, failures and latencies; safe for
// concurrent use (promises run on the clients' goroutines).
type stats struct {
	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	records  int64
	bytes    int64
	errors   int64
	firstErr error
	aborted  int64     // records failed because the run was interrupted
	first    time.Time // the first record's completion
	last     time.Time // the latest record's completion
}

func newStats() *stats {
	return &stats{hist: hdrhistogram.New(histLowest, histHighest, histDigits)}
}

// record counts one record of n bytes completed at now after latency.
func (s *stats) record(now time.Time, latency time.Duration, n int) {
	us := int64(latency / time.Microsecond)
	if us < histLowest {
		us = histLowest
	} else if us > histHighest {
		us = histHighest
	}
	s.mu.Lock()
	_ = s.hist.RecordValue(us) // in range: clamped above
	s.records++
	s.bytes += int64(n)
	if s.first.IsZero() {
		s.first = now
	}
	if now.After(s.last) {
		s.last = now
	}
	s.mu.Unlock()
}

// fail counts one failed record.
func (s *stats) fail(err error) {
	s.mu.Lock()
	s.errors++
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.mu.Unlock()
}

// abort counts one record failed by the run's interruption.
func (s *stats) abort() {
	s.mu.Lock()
	s.aborted++
	s.mu.Unlock()
}

// snapshot is what progress prints: counts and the p99 so far.
func (s *stats) snapshot() (records, bytes int64, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records, s.bytes, time.Duration(s.hist.ValueAtQuantile(99)) * time.Microsecond
}

// Result is one run's figures, the object --json prints.
type Result struct {
	// Command is produce, consume or e2e.
	Command string `json:"command"`
	// Mode is max-rate, fixed-rate or one-at-a-time (e2e's default).
	Mode string `json:"mode"`
	// TargetRate is --throughput in records/s; 0 unless fixed-rate.
	TargetRate float64 `json:"target_records_per_sec"`
	Topic      string  `json:"topic"`
	// Records completed: acknowledged (produce), received (consume, e2e).
	Records int64 `json:"records"`
	// Bytes of their keys and values.
	Bytes int64 `json:"bytes"`
	// Seconds from the start of the run to the last record's completion.
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// MBPerSec is in MiB/s (1024*1024 bytes), as Kafka's tools.
	MBPerSec float64 `json:"mb_per_sec"`
	// Latency is the records' latency distribution in milliseconds.
	Latency Latency `json:"latency_ms"`
	// Errors is the number of records that failed; FirstError the first
	// failure, with Kafka's error name when it is a Kafka error.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Aborted counts the records failed because the run was interrupted
	// (SIGINT) before they were sent; they are not errors.
	Aborted int64 `json:"aborted,omitempty"`
	// TimeToFirstRecordMs (consume) is from the start of the run (the
	// client's creation) to the first record's receipt, group join
	// included.
	TimeToFirstRecordMs *float64 `json:"time_to_first_record_ms,omitempty"`

	// started is set once the load began (the topic was there): a run
	// that failed before has no result to print.
	started bool
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// result fills r's figures from s, for a run that started at start.
func (s *stats) result(r Result, start time.Time) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.started = true
	r.Records, r.Bytes, r.Errors, r.Aborted = s.records, s.bytes, s.errors, s.aborted
	if s.firstErr != nil {
		r.FirstError = errorText(s.firstErr)
	}
	if !s.last.IsZero() {
		r.Seconds = s.last.Sub(start).Seconds()
	}
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / mib / r.Seconds
	}
	r.Latency = latencyOf(s.hist)
	return r
}

// latencyOf is h's distribution (in µs) in milliseconds.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50:  ms(h.ValueAtQuantile(50)),
		P95:  ms(h.ValueAtQuantile(95)),
		P99:  ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)),
		Max:  ms(h.Max()),
		Mean: h.Mean() / 1000,
	}
}

// Summary is r as one line in the style of ProducerPerformance's final
// line ("N records sent, R records/sec (M MB/sec), A ms avg latency, X ms
// max latency, P ms 50th, P ms 95th, P ms 99th, P ms 99.9th."), the
// percentiles with two decimals where Kafka prints whole milliseconds.
func (r Result) Summary() string {
	verb := map[string]string{"produce": "sent", "consume": "received", "e2e": "sent and received"}[r.Command]
	s := fmt.Sprintf("%d records %s, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.",
		r.Records, verb, r.RecordsPerSec, r.MBPerSec, r.Latency.Mean, r.Latency.Max, r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.P999)
	if r.TimeToFirstRecordMs != nil {
		s += fmt.Sprintf(" %.2f ms to the first record.", *r.TimeToFirstRecordMs)
	}
	if r.Aborted > 0 {
		s += fmt.Sprintf(" %d records abandoned by the interruption.", r.Aborted)
	}
	return s
}

// write prints r: one JSON object, or the summary line and, below it,
// the failures.
func (r Result) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return enc.Encode(r)
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}
