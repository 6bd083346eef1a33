package server

import (
	"context"
	"log/slog"
	"sync"
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
// ListOffsets and OffsetForLeaderEpoch answer LEADER_NOT_AVAILABLE for
// replicated partitions: retriable errors, after which clients ask the
// cluster again. Writes need no guard (a zombie leader cannot commit).
// Only a clustered broker runs it.
const (
	pauseBeat = 100 * time.Millisecond
	pauseGap  = 2 * time.Second
	pauseHold = 2 * time.Second
)

type pauseGuard struct {
	logger *slog.Logger
	now    func() time.Time // the monotonic clock: time.Now (tests set it)

	mu    sync.Mutex
	last  time.Time // the last beat
	until time.Time // suspect before this
}

func newPauseGuard(logger *slog.Logger) *pauseGuard {
	return &pauseGuard{logger: logger, now: time.Now, last: time.Now()}
}

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
	now := g.now()
	g.mu.Lock()
	gap := now.Sub(g.last)
	if gap > pauseGap {
		g.until = now.Add(pauseHold)
	}
	g.last = now
	g.mu.Unlock()
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
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	return now.Sub(g.last) > pauseGap || now.Before(g.until)
}
