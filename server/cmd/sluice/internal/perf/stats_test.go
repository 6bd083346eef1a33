package perf

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// within reports whether got is want within the histogram's 0.1%.
func within(got, want float64) bool { return math.Abs(got-want) <= want*0.001+1e-9 }

func TestStatsPercentiles(t *testing.T) {
	st := newStats()
	start := time.Unix(1000, 0)
	// 1 ms, 2 ms, ..., 1000 ms, in a scrambled order.
	for i := 0; i < 1000; i++ {
		ms := (i*7919)%1000 + 1
		st.record(start.Add(time.Duration(i)*time.Millisecond), time.Duration(ms)*time.Millisecond, 100)
	}
	st.fail(kerr.InvalidRecord)
	st.fail(errors.New("second"))
	r := st.result(Result{Command: "produce", Mode: "max-rate"}, start)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", r.Latency.P50, 500}, {"p95", r.Latency.P95, 950}, {"p99", r.Latency.P99, 990},
		{"p999", r.Latency.P999, 999}, {"max", r.Latency.Max, 1000}, {"mean", r.Latency.Mean, 500.5},
	} {
		if !within(c.got, c.want) {
			t.Errorf("%s = %v ms, want %v ms (within 0.1%%)", c.name, c.got, c.want)
		}
	}
	if r.Records != 1000 || r.Bytes != 100000 || r.Errors != 2 {
		t.Errorf("records %d bytes %d errors %d, want 1000 100000 2", r.Records, r.Bytes, r.Errors)
	}
	if !strings.HasPrefix(r.FirstError, "INVALID_RECORD") {
		t.Errorf("first error %q, want Kafka's name first", r.FirstError)
	}
	// The last record completed 999 ms after the start.
	if !within(r.Seconds, 0.999) || !within(r.RecordsPerSec, 1000/0.999) || !within(r.MBPerSec, 100000/0.999/mib) {
		t.Errorf("seconds %v records/s %v MB/s %v", r.Seconds, r.RecordsPerSec, r.MBPerSec)
	}
}

func TestStatsClamps(t *testing.T) {
	st := newStats()
	now := time.Now()
	st.record(now, -time.Second, 1) // a clock step back
	st.record(now, 0, 1)
	st.record(now, 2*time.Hour, 1)
	r := st.result(Result{}, now.Add(-time.Second))
	if r.Records != 3 {
		t.Fatalf("records %d, want 3", r.Records)
	}
	if r.Latency.P50 != 0.001 {
		t.Errorf("p50 %v ms, want the histogram's floor 0.001", r.Latency.P50)
	}
	if !within(r.Latency.Max, float64(time.Hour/time.Millisecond)) {
		t.Errorf("max %v ms, want 1 hour", r.Latency.Max)
	}
}

func TestResultOutput(t *testing.T) {
	ttf := 12.5
	r := Result{
		Command: "consume", Mode: "max-rate", Topic: "t", Records: 100000, Bytes: 100000 * 1024,
		Seconds: 2.001, RecordsPerSec: 49975.0, MBPerSec: 48.80,
		Latency: Latency{P50: 2, P95: 10, P99: 30, P999: 44, Max: 45, Mean: 3.2}, TimeToFirstRecordMs: &ttf,
	}
	want := "100000 records received, 49975.0 records/sec (48.80 MB/sec), 3.20 ms avg latency, 45.00 ms max latency, " +
		"2.00 ms 50th, 10.00 ms 95th, 30.00 ms 99th, 44.00 ms 99.9th. 12.50 ms to the first record."
	if got := r.Summary(); got != want {
		t.Errorf("summary\n got %s\nwant %s", got, want)
	}
	var b strings.Builder
	if err := r.write(&b, true); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(b.String()), &m); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	for _, k := range []string{"command", "mode", "target_records_per_sec", "topic", "records", "bytes", "seconds",
		"records_per_sec", "mb_per_sec", "latency_ms", "errors", "time_to_first_record_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, b.String())
		}
	}
	lat, _ := m["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p95", "p99", "p999", "max", "mean"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_ms has no %q: %s", k, b.String())
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine("sent", 30000, 20000, 20000*1024, time.Second, 3100*time.Microsecond)
	want := "30000 records sent, 20000.0 records/sec (19.53 MB/sec), 3.10 ms p99 so far"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
