package replica

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// The leader reports its replicas' progress: caught-up times follow the
// injected clock while a follower keeps up, and stay behind for one cut
// off from the leader. Followers answer ErrNotRaftLeader.
func TestHostProgress(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.clock.advance(time.Hour)
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	lead := n.leader(id)
	var lag, keep uint64
	for fid := range n.nodes {
		if fid == lead {
			continue
		}
		if lag == 0 {
			lag = fid
		} else {
			keep = fid
		}
	}
	if _, err := n.nodes[lag].host.Progress(id); !errors.Is(err, ErrNotRaftLeader) {
		t.Fatalf("a follower's Progress: %v", err)
	}
	propose := func(k int) {
		for i := 0; i < k; i++ {
			if err := n.nodes[lead].host.Propose(id, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	propose(3)
	caughtUp := func(pr []ReplicaProgress, rid uint64) (time.Time, uint64) {
		for _, p := range pr {
			if p.ID == rid {
				return p.CaughtUp, p.Match
			}
		}
		t.Fatalf("replica %d missing from %+v", rid, pr)
		return time.Time{}, 0
	}
	n.drive("every follower caught up", func() bool {
		pr, err := n.nodes[lead].host.Progress(id)
		if err != nil || len(pr) != 3 {
			return false
		}
		st, _ := n.nodes[lead].host.Status(id)
		for _, p := range pr {
			if p.Match != st.Commit || p.Learner {
				return false
			}
		}
		return true
	})
	t0 := n.clock.Now()
	n.mu.Lock()
	n.cut[[2]uint64{lead, lag}] = true
	n.cut[[2]uint64{lag, lead}] = true
	n.mu.Unlock()
	// The cut-off follower falls behind before the clock moves (it was
	// caught up until then).
	propose(2)
	n.drive("the kept follower holding the new entries", func() bool {
		pr, err := n.nodes[lead].host.Progress(id)
		if err != nil {
			return false
		}
		_, match := caughtUp(pr, keep)
		_, leadMatch := caughtUp(pr, lead)
		return match == leadMatch
	})
	n.clock.advance(10 * time.Second)
	propose(1)
	n.drive("the kept follower catching up after the clock moved", func() bool {
		pr, err := n.nodes[lead].host.Progress(id)
		if err != nil {
			return false
		}
		at, _ := caughtUp(pr, keep)
		return at.After(t0)
	})
	pr, err := n.nodes[lead].host.Progress(id)
	if err != nil {
		t.Fatal(err)
	}
	if at, match := caughtUp(pr, lag); at.After(t0) {
		t.Fatalf("the cut-off follower (match %d) caught up at %v, after %v", match, at, t0)
	}
	if at, _ := caughtUp(pr, lead); !at.Equal(n.clock.Now()) {
		t.Fatalf("the leader's own caught-up time %v, now %v", at, n.clock.Now())
	}
	n.mu.Lock()
	clear(n.cut)
	n.mu.Unlock()
	n.drive("the healed follower caught up", func() bool {
		pr, err := n.nodes[lead].host.Progress(id)
		if err != nil {
			return false
		}
		at, _ := caughtUp(pr, lag)
		return at.After(t0)
	})
}

// Every replica hears of each leader (lead, term) in term order, never
// a leader at a term another replica saw someone else lead, and lead 0
// while it knows none.
func TestHostLeaderObserver(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	first := n.leader(id)
	st, _ := n.nodes[first].host.Status(id)
	n.drive("every replica told of the leader", func() bool {
		for _, tn := range n.nodes {
			ch := tn.machines[id].leaderChanges()
			if len(ch) == 0 || ch[len(ch)-1] != [2]uint64{first, st.Term} {
				return false
			}
		}
		return true
	})
	// Cut the leader off: the others elect another, and the old leader
	// steps down (CheckQuorum: its liveness woke it) to lead 0.
	n.isolate(first)
	var second uint64
	n.drive("a new leader", func() bool {
		for _, tn := range n.nodes {
			if tn.id == first {
				continue
			}
			ch := tn.machines[id].leaderChanges()
			if l := ch[len(ch)-1]; l[0] != 0 && l[0] != first {
				second = l[0]
				return true
			}
		}
		return false
	})
	n.drive("the old leader stepping down", func() bool {
		ch := n.nodes[first].machines[id].leaderChanges()
		return ch[len(ch)-1][0] == 0
	})
	leaderOf := map[uint64]uint64{} // term -> lead
	for _, tn := range n.nodes {
		ch := tn.machines[id].leaderChanges()
		if !slices.IsSortedFunc(ch, func(a, b [2]uint64) int { return int(a[1]) - int(b[1]) }) {
			t.Fatalf("node %d: terms out of order: %v", tn.id, ch)
		}
		for _, c := range ch {
			if c[0] == 0 {
				continue
			}
			if l, ok := leaderOf[c[1]]; ok && l != c[0] {
				t.Fatalf("term %d led by %d and %d", c[1], l, c[0])
			}
			leaderOf[c[1]] = c[0]
		}
	}
	t.Logf("leaders by term %v (second %d)", leaderOf, second)
}

// Tracking a leader's progress allocates nothing once its replicas are
// known.
func TestTrackProgressAllocs(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	h := n.nodes[n.leader(id)].host
	if _, err := h.Progress(id); err != nil {
		t.Fatal(err)
	}
	g := h.group(id)
	// Run it in the group's worker, as the host does.
	var allocs float64
	if err := h.call(id, false, func(g *group) error {
		allocs = testing.AllocsPerRun(100, func() { h.trackProgress(g) })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("trackProgress allocated %.1f times per call (group %s)", allocs, g.id)
	}
}
