package server

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// A paused broker (SIGSTOP, a frozen VM, a stalled host) that resumes
// still believes what it believed when it stopped: raft on it still
// thinks it leads partitions another broker has led for seconds, until
// its first heartbeat round trip (or CheckQuorum) tells it otherwise, and
// requests that waited in its sockets are answered first. Such a zombie
// leader cannot commit a write, but it can serve a stale read: the chaos
// runner (tools/chaos) saw a resumed former group coordinator answer an
// OffsetFetch with an offset the new coordinator had already superseded.
//
// pauseGuard notices pauses: a goroutine beats every pauseBeat on the
// monotonic clock; a beat later than pauseGap after the previous one
// means the process did not run for that long, and the broker is suspect
// for pauseHold from then on (long enough for raft to hear of a newer
// term). A request that finds the last beat older than pauseGap is
// suspect too: it may run before the beating goroutine after a resume.
// While suspect, the group coordinator answers NOT_COORDINATOR and Fetch,
// ListOffsets and OffsetForLeaderEpoch answer NOT_LEADER_OR_FOLLOWER (no
// leader named) for replicated partitions: retriable errors, after which clients ask the
// cluster again. Writes need no guard (a zombie leader cannot commit).
// Only a clustered broker runs it.
const (
	pauseBeat = 100 * time.Millisecond
	pauseGap  = 2 * time.Second
	pauseHold = 2 * time.Second
)

// pauseGuard is read on every fetched partition of a replicated leader,
// so it holds no lock: the times are nanoseconds since base (monotonic
// readings), in atomics.
type pauseGuard struct {
	logger *slog.Logger
	now    func() time.Time // the monotonic clock: time.Now (tests set it)
	base   time.Time

	last  atomic.Int64 // the last beat
	until atomic.Int64 // suspect before this
}

func newPauseGuard(logger *slog.Logger) *pauseGuard {
	g := &pauseGuard{logger: logger, now: time.Now, base: time.Now()}
	g.setLast(g.base)
	g.until.Store(math.MinInt64) // never suspect before a late beat
	return g
}

func (g *pauseGuard) nanos(t time.Time) int64 { return int64(t.Sub(g.base)) }

// setLast records a beat at t (tests set it back to stage a pause).
func (g *pauseGuard) setLast(t time.Time) { g.last.Store(g.nanos(t)) }

// run beats until ctx ends.
func (g *pauseGuard) run(ctx context.Context) {
	t := time.NewTicker(pauseBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.beat()
		}
	}
}

func (g *pauseGuard) beat() {
	now := g.nanos(g.now())
	gap := time.Duration(now - g.last.Load()) // only beat (and tests) store last
	if gap > pauseGap {
		g.until.Store(now + int64(pauseHold)) // before last moves: no reader sees neither
	}
	g.last.Store(now)
	if gap > pauseGap {
		g.logger.Warn("sluice: the broker did not run for a while (paused or starved); it serves no reads as a leader or coordinator until raft has caught up",
			"gap_ms", gap.Milliseconds(), "hold_ms", pauseHold.Milliseconds())
	}
}

// suspect reports whether the broker may have been paused just now. A nil
// guard (a single node) never is.
func (g *pauseGuard) suspect() bool {
	if g == nil {
		return false
	}
	now := g.nanos(g.now())
	return time.Duration(now-g.last.Load()) > pauseGap || now < g.until.Load()
}
