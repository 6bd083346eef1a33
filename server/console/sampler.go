package console

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The sampler feeds the throughput charts. Every SampleInterval it reads
// each topic's summed log end offsets (ListOffsets, latest) and each
// topic's summed committed offsets over all groups (ListGroups +
// OffsetFetch), and keeps SampleWindow of samples; a rate is the
// difference of two samples over their time apart, in records/s. It runs
// in one goroutine started by the first API request and stops by itself
// after idleStopAfter without one (an idle broker does no work), or for
// good at Close.

type sample struct {
	at       time.Time
	produced map[string]int64 // topic -> sum of log end offsets
	consumed map[string]int64 // topic -> sum of committed offsets, over groups
}

type sampler struct {
	c      *Console
	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	running bool
	stopped bool
	lastReq time.Time
	samples []sample // oldest first
}

func newSampler(c *Console) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	return &sampler{c: c, ctx: ctx, cancel: cancel}
}

// touch records a request, starting the sampling goroutine if it is not
// running.
func (s *sampler) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastReq = time.Now()
	if s.running || s.stopped {
		return
	}
	s.running = true
	s.wg.Add(1)
	go s.run()
}

func (s *sampler) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func (s *sampler) run() {
	defer s.wg.Done()
	interval := s.c.cfg.SampleInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.sampleOnce(interval)
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		if time.Since(s.lastReq) > idleStopAfter {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

func (s *sampler) sampleOnce(interval time.Duration) {
	ctx, cancel := context.WithTimeout(s.ctx, max(interval, time.Second))
	defer cancel()
	adm, err := s.c.admin()
	if err != nil {
		return
	}
	m, err := adm.Metadata(ctx)
	if err != nil {
		return
	}
	smp := sample{at: time.Now(), produced: map[string]int64{}, consumed: map[string]int64{}}
	if names := m.Topics.Names(); len(names) > 0 {
		ends, err := adm.ListEndOffsets(ctx, names...)
		if err != nil && len(ends) == 0 {
			return
		}
		for t, ps := range ends {
			var sum int64
			for _, o := range ps {
				if o.Err != nil {
					sum = -1 // unknown: no rate from this sample
					break
				}
				sum += o.Offset
			}
			if sum >= 0 {
				smp.produced[t] = sum
			}
		}
	}
	if listed, err := adm.ListGroups(ctx); err == nil && len(listed) > 0 {
		for _, f := range adm.FetchManyOffsets(ctx, listed.Groups()...) {
			for _, o := range f.Fetched.Sorted() {
				if o.Err == nil && o.At >= 0 {
					smp.consumed[o.Topic] += o.At
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, smp)
	cut := smp.at.Add(-s.c.cfg.SampleWindow - interval)
	i := 0
	for i < len(s.samples) && s.samples[i].at.Before(cut) {
		i++
	}
	s.samples = slices.Delete(s.samples, 0, i)
}

type seriesJSON struct {
	Topic   string     `json:"topic"`
	Produce []*float64 `json:"produce"` // records/s; null: unknown
	Consume []*float64 `json:"consume"` // records/s committed by groups; null: unknown
}

type ratesJSON struct {
	IntervalMs int64        `json:"intervalMs"`
	WindowMs   int64        `json:"windowMs"`
	Times      []int64      `json:"times"` // ms since the epoch, the end of each rate's interval
	Topics     []seriesJSON `json:"topics"`
}

func rate(a, b map[string]int64, t string, dt float64) *float64 {
	x, okA := a[t]
	y, okB := b[t]
	if !okA || !okB || dt <= 0 {
		return nil
	}
	r := float64(max(0, y-x)) / dt // a deleted group or topic is not negative throughput
	return &r
}

// rates are the per-topic records/s between consecutive samples.
func (s *sampler) rates() ratesJSON {
	s.mu.Lock()
	samples := slices.Clone(s.samples)
	s.mu.Unlock()
	out := ratesJSON{IntervalMs: s.c.cfg.SampleInterval.Milliseconds(), WindowMs: s.c.cfg.SampleWindow.Milliseconds(),
		Times: []int64{}, Topics: []seriesJSON{}}
	if len(samples) == 0 {
		return out
	}
	topics := map[string]bool{}
	for t := range samples[len(samples)-1].produced {
		topics[t] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	slices.Sort(names)
	for i := 1; i < len(samples); i++ {
		out.Times = append(out.Times, samples[i].at.UnixMilli())
	}
	for _, t := range names {
		sj := seriesJSON{Topic: t, Produce: []*float64{}, Consume: []*float64{}}
		for i := 1; i < len(samples); i++ {
			a, b := samples[i-1], samples[i]
			dt := b.at.Sub(a.at).Seconds()
			sj.Produce = append(sj.Produce, rate(a.produced, b.produced, t, dt))
			c := rate(a.consumed, b.consumed, t, dt)
			_, okA := a.consumed[t]
			_, okB := b.consumed[t]
			if !okA && !okB { // no group commits offsets of t: nothing consumed
				zero := 0.0
				c = &zero
			}
			sj.Consume = append(sj.Consume, c)
		}
		out.Topics = append(out.Topics, sj)
	}
	return out
}
