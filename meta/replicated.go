package meta

import (
	"context"
	"errors"
	"fmt"
)

// Replicated mode. The metadata log is a raft-replicated partition; this
// package is its state machine. On every node an applier reads each
// committed entry and calls ApplyReplicated, which applies the entry's
// records to the local Store (the local log keeps the records that applied,
// at its own contiguous offsets, and replicated/next the next replicated
// offset to apply, in the same batch). On the active controller the typed
// methods validate as in local mode, propose their records through the
// Replicator, wait until the applier has applied them, and return the
// outcome of the apply: a record valid when proposed may still be refused
// at apply if another entry got in first, and every node refuses it alike.

// ErrNotController is returned (possibly wrapped) by Replicator.Propose
// when this node is not the active controller; the typed methods return
// Propose's error unchanged then, so errors.Is works.
var ErrNotController = errors.New("meta: not the active controller")

// Replicator replicates metadata records: the raft-replicated metadata log.
type Replicator interface {
	// Propose replicates recs (EncodeRecord output) as one entry of the
	// metadata log and returns once it is committed, with the replicated
	// offset of recs[0]; the records take consecutive offsets. It returns
	// an error wrapping ErrNotController when this node is not the active
	// controller, and ctx's error once ctx is done.
	Propose(ctx context.Context, recs [][]byte) (first int64, err error)
}

// change makes the records build returns one change, and returns the
// outcome of each. build reads the current state (never modifying it) and
// returns the records or an error that refuses the whole change. In local
// mode the records are appended under writeMu in one batch; in replicated
// mode they are checked, the valid ones proposed as one entry and waited
// for (propose). err is a failure of the whole change (nothing applied).
func (s *Store) change(build func(st *state) ([]Record, error)) ([]outcome, error) {
	if s.opts.Replicator == nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		if err := s.writableLocked(); err != nil {
			return nil, err
		}
		recs, err := build(s.st)
		if err != nil {
			return nil, err
		}
		return s.appendManyLocked(recs, false, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ProposeTimeout)
	defer cancel()
	return s.propose(ctx, build)
}

// propose is change in replicated mode. It holds proposeMu throughout (not
// writeMu: the applier needs that while the proposal waits) and mu only
// while it builds and checks the records.
func (s *Store) propose(ctx context.Context, build func(st *state) ([]Record, error)) ([]outcome, error) {
	select {
	case s.proposeMu <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("meta: waiting to propose: %w", ctx.Err())
	}
	defer func() { <-s.proposeMu }()

	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	recs, err := build(s.st)
	var errs []error
	if err == nil {
		errs = s.st.check(recs)
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	outs := make([]outcome, len(recs))
	var enc [][]byte
	var idx []int // the record of each proposed one
	for i, rec := range recs {
		if errs[i] != nil {
			outs[i].err = errs[i]
			continue
		}
		enc = append(enc, EncodeRecord(rec))
		idx = append(idx, i)
	}
	if len(enc) == 0 {
		return outs, nil
	}

	s.mu.Lock()
	s.pending = map[int64]outcome{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.pending = nil
		s.mu.Unlock()
	}()
	first, err := s.opts.Replicator.Propose(ctx, enc)
	if errors.Is(err, ErrNotController) {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("meta: propose: %w", err)
	}
	last := first + int64(len(enc)) - 1
	if err := s.WaitReplicated(ctx, last); err != nil {
		return nil, fmt.Errorf("meta: proposed offsets [%d, %d] not applied: %w", first, last, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, i := range idx {
		o, ok := s.pending[first+int64(j)]
		if !ok {
			return nil, fmt.Errorf("meta: replicated offset %d was applied before it was proposed (Propose returned offset %d)", first+int64(j), first)
		}
		outs[i] = o
	}
	return outs, nil
}

// check plans recs in order against st as one batch (st unchanged) and
// returns each record's validation error.
func (st *state) check(recs []Record) []error {
	work := st
	if len(recs) > 1 {
		work = st.clone()
	}
	errs := make([]error, len(recs))
	for i, rec := range recs {
		d, err := work.plan(rec)
		if errs[i] = err; err == nil && len(recs) > 1 {
			work.apply(d)
		}
	}
	return errs
}

// Check is a dry run: it validates recs in order, as one batch, against
// the current state and returns each record's error (nil: it would apply).
// Nothing changes. A BrokerFenced of a BrokerRegistered in the same batch
// is checked against the registration's unstamped Epoch.
func (s *Store) Check(recs []Record) []error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.st.check(recs)
}

// ApplyReplicated applies one committed entry of the replicated metadata
// log: recs (EncodeRecord output) at the replicated offsets first, first+1,
// .... The applier calls it on every node, controller included, for every
// entry in log order. Records below ReplicatedOffset() are skipped (after
// a restart the applier delivers entries again), so it is idempotent.
// Each other record is decoded, stamped (a BrokerRegistered's Epoch
// becomes its offset), validated and applied, or skipped if it does not
// apply to the state (every node skips the same ones); the applied ones
// and the new replicated offset are committed in ONE synced Pebble batch,
// and a waiting typed method gets the outcome of its records.
//
// Errors: ErrCorrupt (nothing applied) if a record does not decode: the
// applier must stop; ErrOutOfOrder if first is past ReplicatedOffset()
// (a gap); ErrStorage or ErrClosed as for any change.
func (s *Store) ApplyReplicated(first int64, recs [][]byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	next := s.repNext // only writers change it, under writeMu
	if first < 0 || first > next {
		return fmt.Errorf("%w: entry at replicated offset %d, but the next to apply is %d", ErrOutOfOrder, first, next)
	}
	skip := next - first
	if skip >= int64(len(recs)) {
		return nil
	}
	decoded := make([]Record, 0, int64(len(recs))-skip)
	for i, b := range recs[skip:] {
		r, err := DecodeRecord(b)
		if err != nil {
			return fmt.Errorf("replicated offset %d: %w", next+int64(i), err)
		}
		decoded = append(decoded, r)
	}
	_, err := s.appendManyLocked(decoded, true, next)
	return err
}

// ReplicatedOffset returns the next replicated offset to apply (0 for a
// fresh store): every offset below it has been applied or skipped.
func (s *Store) ReplicatedOffset() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.repNext
}

// WaitReplicated returns nil once ReplicatedOffset() > off, ctx.Err() if
// ctx ends first, ErrClosed if the store closes first.
func (s *Store) WaitReplicated(ctx context.Context, off int64) error {
	for {
		s.mu.RLock()
		done, closed, ch := s.repNext > off, s.closed, s.applied
		s.mu.RUnlock()
		switch {
		case done:
			return nil
		case closed:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
