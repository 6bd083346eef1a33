package meta

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fakeRaft stands in for the raft-replicated metadata log: Propose appends
// an entry and returns its offset at once ("committed"); one applier
// goroutine per store delivers the entries in order to ApplyReplicated,
// and can be paused.
type fakeRaft struct {
	mu      sync.Mutex
	cond    *sync.Cond
	entries []fakeEntry
	next    int64
	paused  map[*Store]bool
	stopped bool
	wg      sync.WaitGroup
}

type fakeEntry struct {
	first int64
	recs  [][]byte
}

func newFakeRaft(t *testing.T) *fakeRaft {
	f := &fakeRaft{paused: map[*Store]bool{}}
	f.cond = sync.NewCond(&f.mu)
	t.Cleanup(f.stop)
	return f
}

// fakeReplicator proposes to f while controller is set.
type fakeReplicator struct {
	f          *fakeRaft
	controller atomic.Bool
}

func (r *fakeReplicator) Propose(ctx context.Context, recs [][]byte) (int64, error) {
	if !r.controller.Load() {
		return 0, fmt.Errorf("fake raft: %w", ErrNotController)
	}
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	first := f.next
	f.entries = append(f.entries, fakeEntry{first, slices.Clone(recs)})
	f.next += int64(len(recs))
	f.cond.Broadcast()
	return first, nil
}

// open opens a replicated store in dir on fs, with its applier running.
func (f *fakeRaft) open(t *testing.T, fs vfs.FS, dir string, controller bool, seed uint64) (*Store, *fakeReplicator) {
	t.Helper()
	r := &fakeReplicator{f: f}
	r.controller.Store(controller)
	opts := testOptions(seed)
	opts.FS = fs
	opts.Replicator = r
	s := mustOpen(t, dir, opts)
	t.Cleanup(func() { s.Close() })
	f.startApplier(t, s)
	return s, r
}

func (f *fakeRaft) startApplier(t *testing.T, s *Store) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		i := 0
		for {
			f.mu.Lock()
			for !f.stopped && (f.paused[s] || i >= len(f.entries)) {
				f.cond.Wait()
			}
			if f.stopped {
				f.mu.Unlock()
				return
			}
			e := f.entries[i]
			f.mu.Unlock()
			if err := s.ApplyReplicated(e.first, e.recs); err != nil {
				if errors.Is(err, ErrClosed) {
					return
				}
				t.Errorf("ApplyReplicated(%d): %v", e.first, err)
				return
			}
			i++
		}
	}()
}

func (f *fakeRaft) pause(s *Store, p bool) {
	f.mu.Lock()
	f.paused[s] = p
	f.cond.Broadcast()
	f.mu.Unlock()
}

func (f *fakeRaft) stop() {
	f.mu.Lock()
	f.stopped = true
	f.cond.Broadcast()
	f.mu.Unlock()
	f.wg.Wait()
}

// caughtUp waits until s applied every entry proposed so far.
func (f *fakeRaft) caughtUp(t *testing.T, s *Store) {
	t.Helper()
	f.mu.Lock()
	last := f.next - 1
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReplicated(ctx, last); err != nil {
		t.Fatalf("WaitReplicated(%d): %v", last, err)
	}
}

// sameState checks that two stores hold the same state, byte for byte,
// and that each equals its own log.
func sameState(t *testing.T, a, b *Store) {
	t.Helper()
	if da, db := dumpState(t, a), dumpState(t, b); da != db {
		t.Fatalf("stored states differ:\n%s\nand:\n%s", da, db)
	}
	if a.ReplicatedOffset() != b.ReplicatedOffset() || a.Offset() != b.Offset() {
		t.Fatalf("offsets: replicated %d and %d, local %d and %d", a.ReplicatedOffset(), b.ReplicatedOffset(), a.Offset(), b.Offset())
	}
	checkConsistent(t, a)
	checkConsistent(t, b)
}

// replicatedWorkload runs every typed method through the controller c.
func replicatedWorkload(t *testing.T, c *Store) {
	t.Helper()
	for id := int32(1); id <= 3; id++ {
		mustRegister(t, c, id, fmt.Sprintf("r%d", id%2))
	}
	b1, _ := c.Broker(1)
	if err := c.FenceBroker(1, b1.Epoch, false); err != nil {
		t.Fatal(err)
	}
	place, err := Place([]PlacementBroker{{1, "r1"}, {2, "r0"}, {3, "r1"}}, 4, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	ts, errs, err := c.CreateTopics([]TopicSpec{
		{Name: "a", Partitions: 4, ReplicationFactor: 2, Assignments: place, Configs: map[string]string{"k": "v"}},
		{Name: "b", Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{2}}},
		{Name: "a", Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{2}}},
		{Name: "c", Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{9}}},
	})
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], ErrTopicExists) || !errors.Is(errs[3], ErrInvalidReplicaAssignment) {
		t.Fatalf("CreateTopics: %v %v", errs, err)
	}
	if ts[0].Name != "a" || len(ts[0].Leaders) != 4 || ts[0].Configs["k"] != "v" {
		t.Fatalf("created %+v", ts[0])
	}
	more, _ := PlaceMore([]PlacementBroker{{1, "r1"}, {2, "r0"}, {3, "r1"}}, 4, 2, 2, 1)
	if err := c.AddPartitionsAssigned("a", 6, more); err != nil {
		t.Fatal(err)
	}
	errs, err = c.ChangePartitions([]PartitionChanged{
		{TopicID: ts[0].ID, Partition: 0, Leader: place[0][0], LeaderEpoch: 1, ISR: place[0]},
		{TopicID: ts[0].ID, Partition: 9, Leader: 1, LeaderEpoch: 1},
	})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrUnknownPartition) {
		t.Fatalf("ChangePartitions: %v %v", errs, err)
	}
	if err := c.AlterTopicConfigs("a", map[string]string{"x": "1"}, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetTopicConfigs("b", map[string]string{"y": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(map[string]string{"log.retention.ms": "5"}, nil); err != nil {
		t.Fatal(err)
	}
	for want := int64(0); want < 3000; want += 1000 {
		if first, err := c.AllocateProducerIDs(1000); err != nil || first != want {
			t.Fatalf("AllocateProducerIDs: %d, %v; want %d", first, err, want)
		}
	}
	if _, err := c.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTopic("b"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}

	// Reassignments, decommissioning, unregistration, per-broker configs.
	mustRegister(t, c, 4, "r0")
	mustRegister(t, c, 5, "r1")
	if err := c.DecommissionBroker(5, true); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterNodeConfigs(5, map[string]string{"num.io.threads": "4"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterNodeConfigs(9, map[string]string{"k": "v"}, nil); err != nil { // never registered
		t.Fatal(err)
	}
	a, _ := c.Topic("a")
	p0 := a.Assignments[0]
	reordered := slices.Clone(a.Assignments[2])
	slices.Reverse(reordered)
	errs, err = c.Reassign([]ReassignRequest{
		{TopicID: a.ID, Partition: 0, Target: []int32{4, p0[0]}},
		{TopicID: a.ID, Partition: 1, Target: []int32{5, 4}},
		{TopicID: a.ID, Partition: 2, Target: reordered},
		{TopicID: a.ID, Partition: 3, Target: []int32{4}},
		{TopicID: a.ID, Partition: 4},
	})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalidReplicaAssignment) || errs[2] != nil || errs[3] != nil ||
		!errors.Is(errs[4], ErrNoReassignmentInProgress) {
		t.Fatalf("Reassign: %v %v", errs, err)
	}
	if got := c.Reassignments(); len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 3 {
		t.Fatalf("Reassignments: %+v", got)
	}
	errs, err = c.ChangePartitions([]PartitionChanged{{TopicID: a.ID, Partition: 0, Leader: p0[0], LeaderEpoch: 2, ISR: []int32{p0[0], 4}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("ChangePartitions: %v %v", errs, err)
	}
	if done, err := c.CompleteReassignment(a.ID, 0); !done || err != nil {
		t.Fatalf("CompleteReassignment(0): %v %v", done, err)
	}
	if done, err := c.CompleteReassignment(a.ID, 3); done || err != nil {
		t.Fatalf("CompleteReassignment(3): %v %v", done, err)
	}
	if tp, _ := c.Topic("a"); !slices.Equal(tp.Assignments[0], []int32{4, p0[0]}) || !slices.Equal(tp.Assignments[2], reordered) {
		t.Fatalf("after the reassignments: %v", tp.Assignments)
	}
	if err := c.UnregisterBroker(5); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Broker(5); ok || c.NodeConfigs(5)["num.io.threads"] != "4" {
		t.Fatal("UnregisterBroker")
	}
	if err := c.DecommissionBroker(4, true); err != nil {
		t.Fatal(err)
	}
}

// TestReplicatedNothingToPropose: a CompleteReassignment that has nothing
// to do, and a Reassign whose requests are all refused, propose nothing
// (the Replicator here would block until the deadline).
func TestReplicatedNothingToPropose(t *testing.T) {
	rep := &blockingReplicator{}
	opts := testOptions(1)
	opts.FS = vfs.NewMem()
	opts.Replicator = rep
	opts.ProposeTimeout = time.Minute
	s := mustOpen(t, "/m", opts)
	defer s.Close()
	id := [16]byte{0: 1, 6: 0x40, 8: 0x80, 15: 1}
	var recs [][]byte
	for _, r := range []Record{BrokerRegistered{NodeID: 1}, BrokerRegistered{NodeID: 2},
		TopicRecord{Name: "t", ID: id, Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{1}}},
		PartitionReassigned{TopicID: id, Replicas: []int32{2, 1}, Adding: []int32{2}, Removing: []int32{1}}} {
		recs = append(recs, EncodeRecord(r))
	}
	if err := s.ApplyReplicated(0, recs); err != nil {
		t.Fatal(err)
	}
	if got := s.Reassignments(); len(got) != 1 {
		t.Fatalf("Reassignments: %+v", got)
	}
	if done, err := s.CompleteReassignment(id, 0); done || err != nil {
		t.Fatalf("CompleteReassignment: %v %v", done, err)
	}
	errs, err := s.Reassign([]ReassignRequest{{TopicID: id, Target: []int32{7}}, {TopicID: id, Partition: 1}})
	if err != nil || !errors.Is(errs[0], ErrInvalidReplicaAssignment) || !errors.Is(errs[1], ErrUnknownPartition) {
		t.Fatalf("Reassign: %v %v", errs, err)
	}
	if rep.calls.Load() != 0 {
		t.Fatalf("%d proposals", rep.calls.Load())
	}
}

func TestReplicatedTwoStoresAgree(t *testing.T) {
	f := newFakeRaft(t)
	fs := vfs.NewMem()
	c, _ := f.open(t, fs, "/c", true, 1)
	l, _ := f.open(t, fs, "/l", false, 2)
	replicatedWorkload(t, c)
	f.caughtUp(t, l)
	sameState(t, c, l)
	// The workload leaves moves, a decommissioning broker and per-broker
	// configs in the state.
	for _, want := range []string{" moves={", "decommissioning=true", "node 9 {k=v}"} {
		if !strings.Contains(memState(l), want) {
			t.Fatalf("no %q in the state:\n%s", want, memState(l))
		}
	}
	if memState(c) != memState(l) {
		t.Fatalf("states differ:\n%s\nand:\n%s", memState(c), memState(l))
	}
	// Epochs are replicated offsets, the same on every node.
	for _, b := range c.Brokers() {
		lb, _ := l.Broker(b.NodeID)
		if lb.Epoch != b.Epoch {
			t.Fatalf("broker %d: epoch %d and %d", b.NodeID, b.Epoch, lb.Epoch)
		}
	}
	// A node that is not the controller refuses, with Propose's error.
	if _, err := l.CreateTopic("z", 1, 1, nil); !errors.Is(err, ErrNotController) {
		t.Fatalf("follower CreateTopic: %v", err)
	}
	// Validation happens before proposing: the same errors as local mode.
	if err := l.AddPartitions("nope", 3); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("follower AddPartitions: %v", err)
	}
	rebuildUnchanged(t, c)
	rebuildUnchanged(t, l)
	sameState(t, c, l)
}

// TestReplicatedConflict: a second controller, behind on the log, proposes
// a record that was valid against its state; at apply another entry got
// in first, so every node refuses it and its proposer returns that error.
func TestReplicatedConflict(t *testing.T) {
	f := newFakeRaft(t)
	fs := vfs.NewMem()
	c1, _ := f.open(t, fs, "/c1", true, 1)
	c2, _ := f.open(t, fs, "/c2", true, 2)
	l, _ := f.open(t, fs, "/l", false, 3)
	mustRegister(t, c1, 1, "")
	f.caughtUp(t, c2)

	f.pause(c2, true)
	if _, err := c1.CreateTopic("x", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	first, err := c1.AllocateProducerIDs(10)
	if err != nil || first != 0 {
		t.Fatal(first, err)
	}
	type result struct {
		err  error
		pids error
	}
	done := make(chan result)
	go func() {
		_, err := c2.CreateTopic("x", 2, 1, nil) // valid against c2's stale state
		_, perr := c2.AllocateProducerIDs(5)     // First 0: taken by then
		done <- result{err, perr}
	}()
	// c2's proposal is committed (in the log) but not applied on c2 yet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.entries)
		f.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c2 did not propose")
		}
		time.Sleep(time.Millisecond)
	}
	f.pause(c2, false)
	r := <-done
	if !errors.Is(r.err, ErrTopicExists) {
		t.Fatalf("conflicting CreateTopic: %v", r.err)
	}
	// c2 has applied c1's block now, so its own block validates and applies.
	if r.pids != nil {
		t.Fatalf("AllocateProducerIDs after catching up: %v", r.pids)
	}
	if tp, _ := c2.Topic("x"); tp.Partitions != 1 {
		t.Fatalf("x on c2: %+v", tp)
	}
	f.caughtUp(t, c1)
	f.caughtUp(t, l)
	sameState(t, c1, c2)
	sameState(t, c1, l)
}

// TestReplicatedConflictProducerIDs: a producer-id block overtaken by
// another controller's block is refused at apply.
func TestReplicatedConflictProducerIDs(t *testing.T) {
	f := newFakeRaft(t)
	fs := vfs.NewMem()
	c1, _ := f.open(t, fs, "/c1", true, 1)
	c2, _ := f.open(t, fs, "/c2", true, 2)
	f.pause(c2, true)
	if _, err := c1.AllocateProducerIDs(10); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := c2.AllocateProducerIDs(5)
		done <- err
	}()
	waitEntries(t, f, 2)
	f.pause(c2, false)
	if err := <-done; !errors.Is(err, ErrInvalidProducerIDs) {
		t.Fatalf("overtaken block: %v", err)
	}
	f.caughtUp(t, c1)
	sameState(t, c1, c2)
}

func waitEntries(t *testing.T, f *fakeRaft, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.entries)
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestApplyReplicatedIdempotent: after a restart the applier delivers
// entries again; those below ReplicatedOffset() change nothing, and an
// entry straddling it applies only its new records.
func TestApplyReplicatedIdempotent(t *testing.T) {
	f := newFakeRaft(t)
	fs := vfs.NewMem()
	c, _ := f.open(t, fs, "/c", true, 1)
	replicatedWorkload(t, c)
	f.stop()
	f.mu.Lock()
	entries := slices.Clone(f.entries)
	f.mu.Unlock()

	opts := testOptions(2)
	opts.FS = fs
	s := mustOpen(t, "/l", opts) // local mode may apply a replicated log too
	defer func() { s.Close() }()
	for _, e := range entries[:len(entries)/2] {
		if err := s.ApplyReplicated(e.first, e.recs); err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(t, s, "/l")
	before, commits := dumpState(t, s), s.Commits()
	for _, e := range entries[:len(entries)/2] {
		if err := s.ApplyReplicated(e.first, e.recs); err != nil {
			t.Fatal(err)
		}
	}
	if dumpState(t, s) != before || s.Commits() != commits {
		t.Fatal("re-delivered entries changed the store")
	}
	// A gap is refused.
	last := entries[len(entries)-1]
	if err := s.ApplyReplicated(last.first+1, last.recs); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("gap: %v", err)
	}
	// An entry that straddles the offset: one old record, then new ones.
	e := entries[len(entries)/2]
	prev := entries[len(entries)/2-1]
	straddle := append(slices.Clone(prev.recs[len(prev.recs)-1:]), e.recs...)
	if err := s.ApplyReplicated(e.first-1, straddle); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries[len(entries)/2+1:] {
		if err := s.ApplyReplicated(e.first, e.recs); err != nil {
			t.Fatal(err)
		}
	}
	sameState(t, c, s)
	// A record that does not decode stops the applier; nothing applies.
	off, commits := s.ReplicatedOffset(), s.Commits()
	bad := [][]byte{EncodeRecord(ProducerIDBlock{First: 3000, Size: 1}), {2, 99}}
	if err := s.ApplyReplicated(off, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("undecodable: %v", err)
	}
	if s.ReplicatedOffset() != off || s.Commits() != commits {
		t.Fatal("an undecodable entry applied something")
	}
	// An entry whose records all fail still advances the offset.
	if err := s.ApplyReplicated(off, [][]byte{EncodeRecord(TopicRemoved{TopicID: [16]byte{1}})}); err != nil {
		t.Fatal(err)
	}
	if s.ReplicatedOffset() != off+1 || s.Offset() != c.Offset() {
		t.Fatalf("offsets %d %d after a refused record", s.ReplicatedOffset(), s.Offset())
	}
	s = reopen(t, s, "/l")
	if s.ReplicatedOffset() != off+1 {
		t.Fatalf("replicated offset %d after reopen, want %d", s.ReplicatedOffset(), off+1)
	}
	rebuildUnchanged(t, s)
	if s.ReplicatedOffset() != off+1 {
		t.Fatal("Rebuild lost the replicated offset")
	}
}

// TestReplicatedCrash: crash at a random point while applying; every entry
// whose ApplyReplicated returned survives, the state equals the log, and
// delivering everything again from 0 ends in the same state as a store
// that never crashed.
func TestReplicatedCrash(t *testing.T) {
	f := newFakeRaft(t)
	c, _ := f.open(t, vfs.NewMem(), "/c", true, 1)
	replicatedWorkload(t, c)
	f.stop()
	entries := slices.Clone(f.entries)
	for seed := range uint64(6) {
		fs := vfs.NewCrashableMem()
		opts := testOptions(1)
		opts.FS = fs
		s := mustOpen(t, "/meta", opts)
		r := rand.New(rand.NewPCG(seed, 5))
		crashAt := r.IntN(len(entries))
		var crashed *vfs.MemFS
		var acked int64
		for i, e := range entries {
			if i == crashAt {
				crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(seed%2) * 50, RNG: rand.New(rand.NewPCG(seed, 6))})
				acked = s.ReplicatedOffset()
			}
			if err := s.ApplyReplicated(e.first, e.recs); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		opts.FS = crashed
		s = mustOpen(t, "/meta", opts)
		if got := s.ReplicatedOffset(); got != acked {
			t.Fatalf("seed %d: replicated offset %d after the crash, want %d", seed, got, acked)
		}
		checkConsistent(t, s)
		for _, e := range entries {
			if err := s.ApplyReplicated(e.first, e.recs); err != nil {
				t.Fatal(err)
			}
		}
		sameState(t, c, s)
		s.Close()
	}
}

// blockingReplicator never commits: Propose waits for its context.
type blockingReplicator struct{ calls atomic.Int32 }

func (b *blockingReplicator) Propose(ctx context.Context, _ [][]byte) (int64, error) {
	b.calls.Add(1)
	<-ctx.Done()
	return 0, ctx.Err()
}

// committingReplicator commits but nobody applies.
type committingReplicator struct{}

func (committingReplicator) Propose(context.Context, [][]byte) (int64, error) { return 0, nil }

func TestReplicatedTimeouts(t *testing.T) {
	for name, rep := range map[string]Replicator{"propose": &blockingReplicator{}, "apply": committingReplicator{}} {
		opts := testOptions(1)
		opts.FS = vfs.NewMem()
		opts.Replicator = rep
		opts.ProposeTimeout = 20 * time.Millisecond
		s := mustOpen(t, "/m", opts)
		if _, err := s.CreateTopic("t", 1, 1, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v", name, err)
		}
		if len(s.Topics()) != 0 || s.Offset() != 0 {
			t.Fatalf("%s: applied without a commit", name)
		}
		// Nothing valid to propose: no Propose at all.
		if b, ok := rep.(*blockingReplicator); ok {
			calls := b.calls.Load()
			if _, err := s.CreateTopic("a/b", 1, 1, nil); !errors.Is(err, ErrInvalidTopicName) || b.calls.Load() != calls {
				t.Fatalf("invalid name: %v, %d calls", err, b.calls.Load()-calls)
			}
		}
		s.Close()
	}
}

func TestWaitReplicated(t *testing.T) {
	s, _ := openTemp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitReplicated(ctx, -1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.WaitReplicated(ctx, 1) }()
	if err := s.ApplyReplicated(0, [][]byte{EncodeRecord(ProducerIDBlock{First: 0, Size: 1})}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("returned at offset 1: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	if err := s.ApplyReplicated(1, [][]byte{EncodeRecord(ProducerIDBlock{First: 1, Size: 1})}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	if err := s.WaitReplicated(short, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	go func() { done <- s.WaitReplicated(ctx, 5) }()
	s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
