package console

import (
	"testing"
	"time"
)

// The charts' "now" is the rate over at least NowWindow (10 s): none
// before the history covers it, then from the latest sample that far
// back; the consume rate comes from Config.Fetched's counters.
func TestSamplerNowAndFetchedRates(t *testing.T) {
	fetched := map[string]int64{}
	c := New(Config{SampleInterval: 2 * time.Second, NowWindow: time.Second, Fetched: func() map[string]int64 { return fetched }})
	defer c.Close()
	if c.cfg.NowWindow != 10*time.Second {
		t.Fatalf("NowWindow %v: less than 10 s must be raised to it", c.cfg.NowWindow)
	}
	t0 := time.Unix(1_700_000_000, 0)
	add := func(sec int, produced, consumed int64) {
		smp := sample{at: t0.Add(time.Duration(sec) * time.Second), produced: map[string]int64{"t": produced}, consumed: map[string]int64{}}
		if consumed >= 0 {
			smp.consumed["t"] = consumed
		}
		c.samp.samples = append(c.samp.samples, smp)
	}
	// Produced: 100/s, with a burst of 1000 in the last interval.
	// Consumed (fetched): nothing until 4 s, then 50/s.
	add(0, 0, -1)
	add(2, 200, -1)
	add(4, 400, 0)
	add(6, 600, 100)
	add(8, 800, 200)
	r := c.samp.rates()
	if r.ConsumeFrom != "fetch" || r.NowMs != 10000 || len(r.Times) != 4 || len(r.Topics) != 1 {
		t.Fatalf("rates %+v", r)
	}
	if s := r.Topics[0]; s.ProduceNow != nil || s.ConsumeNow != nil {
		t.Fatalf("a current rate from 8 s of history: %v %v", s.ProduceNow, s.ConsumeNow)
	}
	if s := r.Topics[0]; *s.Consume[0] != 0 || *s.Consume[2] != 50 || *s.Produce[0] != 100 {
		t.Fatalf("per-interval rates: produce %v consume %v", deref(s.Produce), deref(s.Consume))
	}
	add(10, 1000, 300)
	add(12, 2200, 400) // the burst
	r = c.samp.rates()
	s := r.Topics[0]
	// From the sample at 2 s (10 s before the last): (2200-200)/10, (400-0)/10.
	if s.ProduceNow == nil || *s.ProduceNow != 200 || s.ConsumeNow == nil || *s.ConsumeNow != 40 {
		t.Fatalf("now: produce %v consume %v, want 200 and 40", deref([]*float64{s.ProduceNow}), deref([]*float64{s.ConsumeNow}))
	}
	if last := *s.Produce[len(s.Produce)-1]; last != 600 {
		t.Fatalf("the last interval's produce rate %v, want 600 (the chart keeps the burst)", last)
	}
}

func deref(vs []*float64) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		if v != nil {
			out[i] = *v
		}
	}
	return out
}
