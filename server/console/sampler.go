package console

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The sampler feeds the throughput charts. Every SampleInterval it reads
// each topic's summed log end offsets (ListOffsets, latest: produced) and
// what was consumed: with Config.Fetched, the records the broker's Fetch
// responses sent per topic (every consumer, in a group or not, counted as
// it reads); without it (another Kafka), each topic's summed committed
// offsets over all groups (ListGroups + OffsetFetch). It keeps
// SampleWindow of samples; a chart's point is the difference of two
// consecutive samples over their time apart, in records/s, and "now" is
// the rate over the last NowWindow (at least 10 s), so that one busy or
// idle interval does not swing it. It runs in one goroutine started by
// the first request and stops by itself after idleStopAfter without one
// (an idle broker does no work), or for good at Close.

type sample struct {
	at       time.Time
	produced map[string]int64 // topic -> sum of log end offsets
	consumed map[string]int64 // topic -> records fetched (Config.Fetched), or the sum of committed offsets over groups
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
	user    User     // the last request's: whom the samples are read as
	samples []sample // oldest first
}

func newSampler(c *Console) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	return &sampler{c: c, ctx: ctx, cancel: cancel}
}

// touch records a request by u, starting the sampling goroutine if it is
// not running; the samples are then read as u.
func (s *sampler) touch(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastReq, s.user = time.Now(), u
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
	s.mu.Lock()
	u := s.user
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(WithUser(s.ctx, u), max(interval, time.Second))
	defer cancel()
	adm, err := s.c.admin(ctx)
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
	if s.c.cfg.Fetched != nil {
		for t, n := range s.c.cfg.Fetched() {
			smp.consumed[t] = n
		}
	} else if listed, err := adm.ListGroups(ctx); err == nil && len(listed) > 0 {
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
	Topic      string     `json:"topic"`
	Produce    []*float64 `json:"produce"`    // records/s; null: unknown
	Consume    []*float64 `json:"consume"`    // records/s fetched (or committed: ConsumeFrom); null: unknown
	ProduceNow *float64   `json:"produceNow"` // records/s over the last NowMs; null: not yet known
	ConsumeNow *float64   `json:"consumeNow"`
}

type ratesJSON struct {
	IntervalMs  int64        `json:"intervalMs"`
	WindowMs    int64        `json:"windowMs"`
	NowMs       int64        `json:"nowMs"`       // the span the "now" rates average over
	ConsumeFrom string       `json:"consumeFrom"` // "fetch" (records sent by this broker's Fetch responses) or "commits" (groups' committed offsets)
	Times       []int64      `json:"times"`       // ms since the epoch, the end of each rate's interval
	Topics      []seriesJSON `json:"topics"`
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
		NowMs: s.c.cfg.NowWindow.Milliseconds(), ConsumeFrom: "commits", Times: []int64{}, Topics: []seriesJSON{}}
	fetched := s.c.cfg.Fetched != nil
	if fetched {
		out.ConsumeFrom = "fetch"
	}
	if len(samples) == 0 {
		return out
	}
	// "now" averages from the latest sample at least NowWindow before
	// the last one; none until the history covers NowWindow.
	last := samples[len(samples)-1]
	from := -1
	for i := len(samples) - 2; i >= 0; i-- {
		if last.at.Sub(samples[i].at) >= s.c.cfg.NowWindow {
			from = i
			break
		}
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
			sj.Consume = append(sj.Consume, consumeRate(a, b, t, dt, fetched))
		}
		if from >= 0 {
			a := samples[from]
			dt := last.at.Sub(a.at).Seconds()
			sj.ProduceNow = rate(a.produced, last.produced, t, dt)
			sj.ConsumeNow = consumeRate(a, last, t, dt, fetched)
		}
		out.Topics = append(out.Topics, sj)
	}
	return out
}

// consumeRate is t's consume rate from a to b: nothing consumed when
// neither sample has t (never fetched, or no group commits its offsets).
// A fetch counter t lacks is 0 (not fetched yet); a group's committed
// offsets that appear are not all consumed since a, so they give none.
func consumeRate(a, b sample, t string, dt float64, fetched bool) *float64 {
	_, okA := a.consumed[t]
	_, okB := b.consumed[t]
	switch {
	case !okA && !okB:
		zero := 0.0
		return &zero
	case fetched && dt > 0:
		r := float64(max(0, b.consumed[t]-a.consumed[t])) / dt
		return &r
	}
	return rate(a.consumed, b.consumed, t, dt)
}
