package perf

import (
	"context"
	"time"
)

// clock is time, replaced in tests.
type clock interface {
	Now() time.Time
	// SleepUntil waits until t; false if ctx is done first.
	SleepUntil(ctx context.Context, t time.Time) bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// schedule is when a run's records are due and when it ends.
type schedule struct {
	start time.Time
	// rate is the target in records/s; 0 is max rate (no due times).
	rate float64
	// n is the number of records; 0 is no limit.
	n int64
	// end is the end of --duration; zero is no limit. At a fixed rate
	// the records due before it are sent (rate x duration of them).
	end time.Time
}

// due is when record i is due at a fixed rate: start + i/rate.
func (s schedule) due(i int64) time.Time {
	return s.start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
}

// pace issues the records of one of stride senders: indices first,
// first+stride, first+2*stride, ... At a fixed rate it waits for each
// record's due time and calls send(i, due), so latency counts from when
// the record was due, however late it is sent (a sender that fell behind
// sends the records it owes back to back). At max rate it calls
// send(i, now) at once. It stops after the schedule's n records or at its
// end, or when ctx is done, and returns the number of records it issued.
func pace(ctx context.Context, clk clock, s schedule, first, stride int64, send func(i int64, from time.Time)) int64 {
	var issued int64
	for i := first; s.n <= 0 || i < s.n; i += stride {
		if ctx.Err() != nil {
			break
		}
		var from time.Time
		if s.rate > 0 {
			from = s.due(i)
			if !s.end.IsZero() && !from.Before(s.end) {
				break
			}
			if !clk.SleepUntil(ctx, from) {
				break
			}
		} else {
			from = clk.Now()
			if !s.end.IsZero() && !from.Before(s.end) {
				break
			}
		}
		send(i, from)
		issued++
	}
	return issued
}
