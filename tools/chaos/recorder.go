package chaos

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Recorder collects the operations of a run's clients, safe for
// concurrent use. Times are since the start it was made with (Go's
// monotonic clock, so a stepped wall clock does not move them).
type Recorder struct {
	start time.Time

	mu  sync.Mutex
	ops []Op
}

// NewRecorder returns a Recorder whose time 0 is start.
func NewRecorder(start time.Time) *Recorder { return &Recorder{start: start} }

// Since is the time since the run's start.
func (r *Recorder) Since() time.Duration { return time.Since(r.start) }

// Invoke records op as invoked now (op.Start = Since()), with Outcome Info
// and End zero until Complete says otherwise, and returns its id for
// Complete.
func (r *Recorder) Invoke(op Op) (id int) {
	op.Start, op.End, op.Outcome = r.Since(), 0, Info
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return len(r.ops) - 1
}

// Complete completes the operation id: End = Since(), then f (under the
// recorder's lock, so it must not call the recorder) fills in its
// Outcome, Offset, Records, ... An operation completes once; a second
// Complete is ignored.
func (r *Recorder) Complete(id int, f func(*Op)) {
	end := r.Since()
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 0 || id >= len(r.ops) || r.ops[id].End != 0 {
		return
	}
	op := &r.ops[id]
	start := op.Start
	op.End = end
	if f != nil {
		f(op)
	}
	op.Start = start // f fills in results, never the invocation
	if op.End < op.Start {
		op.End = op.Start
	}
}

// Add records an operation that is already complete (a poll, an
// assignment); an op with End zero gets End = Since(), and one with Start
// zero gets Start = End.
func (r *Recorder) Add(op Op) {
	if op.End == 0 {
		op.End = r.Since()
	}
	if op.Start == 0 || op.Start > op.End {
		op.Start = op.End
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// Ops returns a copy of the operations, sorted by Start (ties in the
// order they were recorded). Slices and maps inside are shared, not
// copied: treat them as read-only.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	ops := slices.Clone(r.ops)
	r.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return ops
}

// Assignment is one group consumer's assignment of a topic, as its kgo
// callbacks tell it, recorded as OpAssign operations of its process: each
// change records the whole new owned set. The checker restarts its
// tracking of a partition only where an OpAssign newly assigns it, so a
// partition assigned again while owned (kgo hands a topic whose cursors a
// new session must assign in full) is recorded as lost, then assigned.
type Assignment struct {
	rec  *Recorder
	base Op

	mu    sync.Mutex
	owned map[int32]bool
}

// NewAssignment returns the assignment of topic to process, a member of
// group, recorded in rec.
func NewAssignment(rec *Recorder, process, topic, group string) *Assignment {
	return &Assignment{rec: rec, base: Op{Process: process, Kind: OpAssign, Outcome: OK, Topic: topic, Group: group},
		owned: map[int32]bool{}}
}

// Opts are the kgo options that feed a: OnPartitionsAssigned,
// OnPartitionsRevoked and OnPartitionsLost.
func (a *Assignment) Opts() []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { a.change(m[a.base.Topic], true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { a.change(m[a.base.Topic], false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { a.change(m[a.base.Topic], false) }),
	}
}

// change applies a callback's partitions (added or removed) and records
// the new owned set.
func (a *Assignment) change(parts []int32, add bool) {
	a.mu.Lock()
	if add && slices.ContainsFunc(parts, func(p int32) bool { return a.owned[p] }) {
		var kept []int32
		for p := range a.owned {
			if !slices.Contains(parts, p) {
				kept = append(kept, p)
			}
		}
		slices.Sort(kept)
		a.record(kept)
	}
	for _, p := range parts {
		if add {
			a.owned[p] = true
		} else {
			delete(a.owned, p)
		}
	}
	owned := make([]int32, 0, len(a.owned))
	for p := range a.owned {
		owned = append(owned, p)
	}
	a.mu.Unlock()
	slices.Sort(owned)
	a.record(owned)
}

func (a *Assignment) record(parts []int32) {
	op := a.base
	op.Parts = parts
	a.rec.Add(op)
}

// WorkloadConfig is what every workload needs.
type WorkloadConfig struct {
	Seeds []string // bootstrap brokers, host:port
	// Rand makes every random choice of the workload (seeded by the run's
	// seed). It is not safe for concurrent use: a workload draws one
	// seed per goroutine from it at start (rand.New(rand.NewPCG(...)))
	// and never touches it afterwards.
	Rand       *rand.Rand
	Rec        *Recorder
	Topic      string // created by the caller
	Partitions int32  // Topic's partition count
	Logger     *slog.Logger
}

// Workload is a running workload.
type Workload interface {
	// Stop stops issuing new operations, waits (bounded by ctx) for
	// in-flight ones (a producer flush), closes the clients; ops still
	// unfinished stay Info.
	Stop(ctx context.Context) error
}

func (cfg *WorkloadConfig) logger() *slog.Logger {
	if cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return cfg.Logger
}

// childRand derives an independent generator from cfg.Rand; call it only
// from the goroutine that starts the workload.
func (cfg *WorkloadConfig) childRand() *rand.Rand {
	return rand.New(rand.NewPCG(cfg.Rand.Uint64(), cfg.Rand.Uint64()))
}

// jitter is d scaled by a uniform factor in [0.5, 1.5).
func jitter(rnd *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(rnd.Int64N(int64(d)+1))
}

// sleepCtx sleeps d or until ctx is done; it reports whether ctx is
// still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// waitGroupCtx waits for wg or ctx; it returns ctx's error if ctx ended
// first.
func waitGroupCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopper is the shared part of the workloads' Stop: a context whose
// cancel stops issuing operations and a wait group of the goroutines
// issuing them.
type stopper struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newStopper() *stopper {
	// Not derived from StartX's ctx: the workload runs until Stop.
	ctx, cancel := context.WithCancel(context.Background())
	return &stopper{ctx: ctx, cancel: cancel}
}

func (s *stopper) goFn(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// kgoLogger logs a kgo client's messages at level and above to l.
type kgoLogger struct {
	l     *slog.Logger
	level kgo.LogLevel
}

func (k kgoLogger) Level() kgo.LogLevel { return k.level }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	sl := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		sl = slog.LevelError
	case kgo.LogLevelWarn:
		sl = slog.LevelWarn
	case kgo.LogLevelInfo:
		sl = slog.LevelInfo
	}
	k.l.Log(context.Background(), sl, "kgo: "+msg, keyvals...)
}
