package replica

import "sync"

// schedState is a group's place in the scheduler.
type schedState uint8

const (
	schedIdle       schedState = iota
	schedQueued                // in the queue
	schedProcessing            // a worker has it
	schedRequeue               // a worker has it, and more work arrived
)

// scheduler hands groups with pending work to workers, each group to one
// worker at a time, in the order their work arrived (CockroachDB's
// raftScheduler). Its mutex is a leaf lock.
type scheduler struct {
	mu      sync.Mutex
	cond    sync.Cond // work queued, or stopped
	idle    sync.Cond // a group was handed back (waitIdle)
	queue   []*group
	stopped bool
}

func newScheduler() *scheduler {
	s := &scheduler{}
	s.cond.L = &s.mu
	s.idle.L = &s.mu
	return s
}

// enqueue notes that g has work: it is queued unless it already is, or is
// being handled (then it is queued again once done).
func (s *scheduler) enqueue(g *group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch g.sstate {
	case schedIdle:
		g.sstate = schedQueued
		s.queue = append(s.queue, g)
		s.cond.Signal()
	case schedProcessing:
		g.sstate = schedRequeue
	}
}

// enqueueAll is enqueue for many groups under one lock (Tick).
func (s *scheduler) enqueueAll(gs []*group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	queued := false
	for _, g := range gs {
		switch g.sstate {
		case schedIdle:
			g.sstate = schedQueued
			s.queue = append(s.queue, g)
			queued = true
		case schedProcessing:
			g.sstate = schedRequeue
		}
	}
	if queued {
		s.cond.Broadcast()
	}
}

// again is enqueue from the worker handling g (raft has more to do).
func (s *scheduler) again(g *group) { s.enqueue(g) }

// next waits for work and appends up to max groups to batch; it returns
// nil once the scheduler is stopped.
func (s *scheduler) next(batch []*group, max int) []*group {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.stopped {
		s.cond.Wait()
	}
	if s.stopped {
		return nil
	}
	n := min(max, len(s.queue))
	for _, g := range s.queue[:n] {
		g.sstate = schedProcessing
		batch = append(batch, g)
	}
	s.queue = append(s.queue[:0], s.queue[n:]...)
	return batch
}

// done returns g after a worker handled it.
func (s *scheduler) done(g *group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.idle.Broadcast()
	if g.sstate == schedRequeue {
		g.sstate = schedQueued
		s.queue = append(s.queue, g)
		s.cond.Signal()
		return
	}
	g.sstate = schedIdle
}

func (s *scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.cond.Broadcast()
	s.idle.Broadcast()
}

// waitIdle waits until no worker handles g (it may still be queued: a
// worker then skips it, see Host.step). It returns at once once the
// scheduler is stopped.
func (s *scheduler) waitIdle(g *group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for (g.sstate == schedProcessing || g.sstate == schedRequeue) && !s.stopped {
		s.idle.Wait()
	}
}
