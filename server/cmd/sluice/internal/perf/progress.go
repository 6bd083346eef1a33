package perf

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressEvery is how often the progress line is rewritten.
const progressEvery = time.Second

// startProgress rewrites one line on w every second ("\r" and an erase
// to the line's end): records so far, the last second's records/s and
// MB/s, and the p99 latency so far. The returned stop erases the line.
// A nil w shows nothing.
func startProgress(w io.Writer, st *stats, verb string) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		var lastRecs, lastBytes int64
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				recs, bytes, p99 := st.snapshot()
				fmt.Fprint(w, "\r"+progressLine(verb, recs, recs-lastRecs, bytes-lastBytes, now.Sub(last), p99)+"\x1b[K")
				lastRecs, lastBytes, last = recs, bytes, now
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		fmt.Fprint(w, "\r\x1b[K")
	}
}

// progressLine is "N records sent, R records/sec (M MB/sec), p99 so far
// P ms" for dRecs records and dBytes bytes in the last d.
func progressLine(verb string, recs, dRecs, dBytes int64, d time.Duration, p99 time.Duration) string {
	secs := d.Seconds()
	if secs <= 0 {
		secs = 1
	}
	return fmt.Sprintf("%d records %s, %.1f records/sec (%.2f MB/sec), %.2f ms p99 so far",
		recs, verb, float64(dRecs)/secs, float64(dBytes)/mib/secs, float64(p99)/float64(time.Millisecond))
}
