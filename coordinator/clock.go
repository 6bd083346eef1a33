package coordinator

import "time"

// Clock is the coordinator's time source: session timeouts, rebalance
// delays and offset expiry use it, so tests can drive time by hand.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine after d; stop cancels it and
	// reports whether it did so before f started.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
