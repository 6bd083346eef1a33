package perf

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock moves only when slept on or stepped.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) bool {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
	return ctx.Err() == nil
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type sent struct {
	i        int64
	due, now time.Time
}

func TestPaceFixedRate(t *testing.T) {
	clk := &fakeClock{now: time.Unix(0, 0)}
	start := clk.Now()
	s := schedule{start: start, rate: 200, end: start.Add(time.Second)}
	var got []sent
	n := pace(context.Background(), clk, s, 0, 1, func(i int64, due time.Time) {
		got = append(got, sent{i, due, clk.Now()})
		if i == 50 {
			clk.step(100 * time.Millisecond) // the client blocks for 100 ms
		}
	})
	if n != 200 || len(got) != 200 {
		t.Fatalf("issued %d (%d sends) in 1 s at 200 records/s, want 200", n, len(got))
	}
	for k, g := range got {
		wantDue := start.Add(time.Duration(k) * 5 * time.Millisecond)
		if g.i != int64(k) || !g.due.Equal(wantDue) {
			t.Fatalf("send %d: record %d due %v, want record %d due %v", k, g.i, g.due.Sub(start), k, wantDue.Sub(start))
		}
		if g.now.Before(g.due) {
			t.Errorf("record %d sent at %v, before it was due at %v", g.i, g.now.Sub(start), g.due.Sub(start))
		}
	}
	// After the stall, the 19 records that fell due during it go at once,
	// each keeping its own due time: their latency includes the wait.
	for i := 51; i <= 69; i++ {
		if lag := got[i].now.Sub(got[i].due); lag <= 0 {
			t.Errorf("record %d sent %v after due, want late (behind the stall)", i, lag)
		}
	}
	if lag := got[70].now.Sub(got[70].due); lag != 0 {
		t.Errorf("record 70 sent %v after due, want on time again", lag)
	}
}

func TestPaceStrided(t *testing.T) {
	clk := &fakeClock{now: time.Unix(0, 0)}
	s := schedule{start: clk.Now(), rate: 1000, n: 10}
	var all []int64
	var mu sync.Mutex
	for p := int64(0); p < 3; p++ {
		pace(context.Background(), clk, s, p, 3, func(i int64, due time.Time) {
			mu.Lock()
			all = append(all, i)
			mu.Unlock()
			if want := s.start.Add(time.Duration(i) * time.Millisecond); !due.Equal(want) {
				t.Errorf("record %d due %v, want %v", i, due, want)
			}
		})
	}
	slices.Sort(all)
	if !slices.Equal(all, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("3 senders issued %v, want each of 0..9 once", all)
	}
}

func TestPaceMaxRate(t *testing.T) {
	clk := &fakeClock{now: time.Unix(0, 0)}
	s := schedule{start: clk.Now(), end: clk.Now().Add(time.Second)}
	n := pace(context.Background(), clk, s, 0, 1, func(i int64, from time.Time) {
		if !from.Equal(clk.Now()) {
			t.Errorf("record %d: latency counts from %v, want the send %v", i, from, clk.Now())
		}
		clk.step(time.Millisecond)
	})
	if n != 1000 {
		t.Errorf("issued %d in 1 s at 1 ms a send, want 1000", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = pace(ctx, clk, schedule{start: clk.Now(), n: 100}, 0, 1, func(i int64, _ time.Time) {
		if i == 9 {
			cancel()
		}
	})
	if n != 10 {
		t.Errorf("issued %d, want 10 (cancelled after the tenth)", n)
	}
}
