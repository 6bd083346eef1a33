package server

import "math"

// rateSensor measures a rate as Kafka's Rate over a SampledStat: samples
// windows of window each, a record going to the current sample (a new one
// once the current is window old), samples older than samples × window
// dropped. The rate is the samples' total over the elapsed time since the
// oldest sample began, counted as at least samples-1 full windows (Kafka's
// Rate.windowSize), per second. Not safe for concurrent use.
type rateSensor struct {
	samples []rateSample
	cur     int
	last    int64 // unix ms of the latest record (inactive sensor expiry)

	// A controller_mutation_rate sensor is a token bucket instead
	// (quota_mutation.go): bucket once it is, its tokens at tokensMs.
	bucket   bool
	tokens   float64
	tokensMs int64
}

type rateSample struct {
	start int64 // unix ms the sample began
	value float64
}

func newRateSensor(samples int, nowMs int64) *rateSensor {
	s := &rateSensor{samples: make([]rateSample, samples), last: nowMs}
	for i := range s.samples {
		s.samples[i].start = nowMs
	}
	return s
}

// record adds v at nowMs.
func (s *rateSensor) record(v float64, nowMs, windowMs int64) {
	s.last = nowMs
	if nowMs-s.samples[s.cur].start >= windowMs {
		s.cur = (s.cur + 1) % len(s.samples)
		s.samples[s.cur] = rateSample{start: nowMs}
	}
	s.samples[s.cur].value += v
}

// rate returns the rate per second at nowMs and the window it is
// measured over in milliseconds.
func (s *rateSensor) rate(nowMs, windowMs int64) (perSec float64, spanMs int64) {
	expire := int64(len(s.samples)) * windowMs
	total, oldest := 0.0, nowMs
	for i := range s.samples {
		sm := &s.samples[i]
		if nowMs-sm.start >= expire {
			*sm = rateSample{start: nowMs} // obsolete: reset (Kafka's purgeObsoleteSamples)
		}
		total += sm.value
		oldest = min(oldest, sm.start)
	}
	spanMs = nowMs - oldest
	if full, want := spanMs/windowMs, int64(len(s.samples)-1); full < want {
		spanMs += (want - full) * windowMs
	}
	if spanMs <= 0 {
		spanMs = windowMs
	}
	return total * 1000 / float64(spanMs), spanMs
}

// throttleMs is Kafka's QuotaUtils.throttleTime: the delay that brings an
// observed rate over bound back to it, (observed - bound) / bound × the
// measured window, in milliseconds; 0 within the bound. It is at most
// math.MaxInt32 (a tiny bound's +Inf included).
func throttleMs(observed, bound float64, spanMs int64) int64 {
	if observed <= bound || bound <= 0 {
		return 0
	}
	t := (observed-bound)/bound*float64(spanMs) + 0.5
	if !(t < math.MaxInt32) { // +Inf and NaN too
		return math.MaxInt32
	}
	return int64(t)
}
