package coordinator

import (
	"sort"
	"sync"
	"time"
)

// manualClock is a Clock that moves only when Advance is called. Due
// callbacks run synchronously inside Advance, in time order, without the
// clock's lock held (they may call AfterFunc again).
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[int]*manualTimer
}

type manualTimer struct {
	at  time.Time
	seq int
	f   func()
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Unix(1_700_000_000, 0), timers: map[int]*manualTimer{}}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	id := c.seq
	c.timers[id] = &manualTimer{at: c.now.Add(d), seq: id, f: f}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[id]
		delete(c.timers, id)
		return ok
	}
}

// Advance moves the clock by d, running every callback that falls due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due []*manualTimer
		for _, t := range c.timers {
			if !t.at.After(end) {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			c.now = end
			c.mu.Unlock()
			return
		}
		sort.Slice(due, func(i, j int) bool {
			if !due[i].at.Equal(due[j].at) {
				return due[i].at.Before(due[j].at)
			}
			return due[i].seq < due[j].seq
		})
		t := due[0]
		delete(c.timers, t.seq)
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}
