package replica

import (
	"testing"

	"go.etcd.io/raft/v3"
)

// quiesced reports whether every group on every live node is quiesced.
func (n *memNet) quiesced(except ...uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
outer:
	for id, tn := range n.nodes {
		for _, e := range except {
			if e == id {
				continue outer
			}
		}
		if st := tn.host.Stats(); st.Quiesced != st.Groups {
			return false
		}
	}
	return true
}

// driveTicks is drive, returning how many ticks it took.
func (n *memNet) driveTicks(what string, cond func() bool) int {
	n.t.Helper()
	ticks := 0
	n.drive(what, func() bool {
		if cond() {
			return true
		}
		ticks++
		return false
	})
	return ticks
}

// leaderAmong returns the group's leader when exactly one of nodes
// leads it.
func (n *memNet) leaderAmong(id GroupID, nodes ...uint64) uint64 {
	var lead uint64
	for _, nid := range nodes {
		st, err := n.nodes[nid].host.Status(id)
		if err != nil {
			return 0
		}
		if st.RaftState == raft.StateLeader {
			if lead != 0 {
				return 0
			}
			lead = nid
		}
	}
	return lead
}

// Idle groups quiesce on every replica; Tick then costs nothing per
// group; a proposal wakes its group, commits everywhere, and the group
// quiesces again.
func TestHostQuiesce(t *testing.T) {
	n, ids := newTestCluster(t, 3, 30)
	n.drive("a leader in every group", func() bool {
		for _, id := range ids {
			if n.leader(id) == 0 {
				return false
			}
		}
		return true
	})
	n.drive("every group quiesced", func() bool { return n.quiesced() })
	for _, tn := range n.nodes {
		if a := testing.AllocsPerRun(100, tn.host.Tick); a != 0 {
			t.Fatalf("Tick over quiesced groups allocated %.1f times", a)
		}
		tn.host.sched.mu.Lock()
		queued := len(tn.host.sched.queue)
		tn.host.sched.mu.Unlock()
		if queued != 0 {
			t.Fatalf("node %d: Tick queued %d quiesced groups", tn.id, queued)
		}
	}
	id := ids[7]
	lead := n.leader(id)
	if err := n.nodes[lead].host.Propose(id, []byte("wake")); err != nil {
		t.Fatal(err)
	}
	n.drive("the proposal applied everywhere", func() bool {
		for _, tn := range n.nodes {
			if got := tn.machines[id].applied(); len(got) != 1 || got[0] != "wake" {
				return false
			}
		}
		return true
	})
	n.drive("every group quiesced again", func() bool { return n.quiesced() })
	// Followers learned the final commit from the quiesce message.
	st, _ := n.nodes[lead].host.Status(id)
	for _, tn := range n.nodes {
		if fs, _ := tn.host.Status(id); fs.Commit != st.Commit || fs.Applied != st.Commit {
			t.Fatalf("node %d: commit %d applied %d, leader's commit %d", tn.id, fs.Commit, fs.Applied, st.Commit)
		}
	}
	// And every replica saved it as applied, quiesced as it is.
	n.drive("the applied index saved everywhere", func() bool {
		for _, tn := range n.nodes {
			if saved, _, _ := tn.hs.Load(id); saved.Applied != st.Commit || saved.HardState.Commit != st.Commit {
				return false
			}
		}
		return true
	})
}

// Tick over 1,000 quiesced groups schedules none of them.
func TestHostTickQuiescedCostsNothing(t *testing.T) {
	hs := newMemHardStates()
	net := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	h := mustHost(t, HostConfig{NodeID: 1, Transport: net.sender(1), HardState: hs, Logger: quiet()})
	defer h.Close()
	tn := &testNode{id: 1, host: h, hs: hs, storages: map[GroupID]*memGroupStorage{}}
	net.nodes[1] = tn
	for i := 0; i < 1000; i++ {
		id := GroupID{Partition: int32(i)}
		st := newMemGroupStorage()
		tn.storages[id] = st
		if err := h.AddGroup(GroupConfig{ID: id, Storage: st, Machine: &recorder{}, State: initial(1)}); err != nil {
			t.Fatal(err)
		}
	}
	net.drive("1,000 single-replica groups quiesced", func() bool { return h.Stats().Quiesced == 1000 })
	if a := testing.AllocsPerRun(1000, h.Tick); a != 0 {
		t.Fatalf("Tick allocated %.1f times", a)
	}
	h.sched.mu.Lock()
	defer h.sched.mu.Unlock()
	if len(h.sched.queue) != 0 {
		t.Fatalf("Tick queued %d groups", len(h.sched.queue))
	}
}

func BenchmarkTickQuiesced(b *testing.B) {
	h := mustHost(b, HostConfig{NodeID: 1, Transport: netSender{&memNet{nodes: map[uint64]*testNode{}}, 1}, HardState: newMemHardStates(), Logger: quiet()})
	defer h.Close()
	for i := 0; i < 1000; i++ {
		if err := h.AddGroup(GroupConfig{ID: GroupID{Partition: int32(i)}, Storage: newMemGroupStorage(), Machine: &recorder{}, State: initial(1)}); err != nil {
			b.Fatal(err)
		}
	}
	for h.Stats().Quiesced < 1000 {
		h.Tick()
	}
	b.ResetTimer()
	for range b.N {
		h.Tick()
	}
}

// The leader's host stops (nothing from it is delivered, the others'
// liveness reports it down): every group it led elects a new leader in
// fewer ticks than raft's election timeout, quiesced or not.
func TestHostLeaderDownFailover(t *testing.T) {
	n, ids := newTestCluster(t, 3, 20)
	// Node 1 leads every group.
	for _, id := range ids {
		if err := n.nodes[1].host.Campaign(id); err != nil {
			t.Fatal(err)
		}
	}
	n.drive("node 1 leading every group", func() bool {
		for _, id := range ids {
			if n.leader(id) != 1 {
				return false
			}
		}
		return true
	})
	n.drive("every group quiesced", func() bool { return n.quiesced() })
	n.isolate(1)
	ticks := n.driveTicks("new leaders on nodes 2 and 3", func() bool {
		for _, id := range ids {
			if n.leaderAmong(id, 2, 3) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("new leaders after %d ticks", ticks)
	if ticks >= 10 {
		t.Fatalf("failover took %d ticks, raft's election timeout is 10", ticks)
	}
	// They commit without node 1.
	for _, id := range ids[:3] {
		lead := n.leaderAmong(id, 2, 3)
		if err := n.nodes[lead].host.Propose(id, []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
	n.drive("commits without node 1", func() bool {
		for _, id := range ids[:3] {
			for _, nid := range []uint64{2, 3} {
				if len(n.nodes[nid].machines[id].applied()) != 1 {
					return false
				}
			}
		}
		return true
	})
	// Node 1 steps down (its liveness woke its groups: CheckQuorum), and
	// once healed follows.
	n.drive("node 1 stepping down", func() bool {
		for _, id := range ids {
			if st, _ := n.nodes[1].host.Status(id); st.RaftState == raft.StateLeader {
				return false
			}
		}
		return true
	})
	n.heal()
	n.drive("node 1 catching up", func() bool {
		for _, id := range ids[:3] {
			if len(n.nodes[1].machines[id].applied()) != 1 {
				return false
			}
		}
		return true
	})
	n.drive("every group quiesced after the heal", func() bool { return n.quiesced() })
}

// A follower cut off while its group quiesces misses the quiesce message
// and keeps ticking; its elections (pre-votes) do not disrupt the group:
// once healed the leader and term are unchanged and it quiesces too.
func TestHostMissedQuiesceDoesNotDisrupt(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	lead := n.leader(id)
	before, _ := n.nodes[lead].host.Status(id)
	var f uint64
	for fid := range n.nodes {
		if fid != lead {
			f = fid
			break
		}
	}
	n.mu.Lock()
	for other := range n.nodes {
		if other != f {
			n.cut[[2]uint64{f, other}] = true
			n.cut[[2]uint64{other, f}] = true
		}
	}
	n.mu.Unlock()
	n.drive("the others quiesced", func() bool { return n.quiesced(f) })
	if n.nodes[f].host.Stats().Quiesced != 0 {
		t.Fatal("the cut-off follower quiesced")
	}
	// The cut-off follower stands for election (a pre-vote), then goes
	// on ticking through several election timeouts.
	n.drive("a pre-vote", func() bool {
		st, _ := n.nodes[f].host.Status(id)
		return st.RaftState == raft.StatePreCandidate
	})
	k := 0
	n.drive("60 more ticks", func() bool { k++; return k > 60 })
	n.mu.Lock()
	clear(n.cut)
	n.mu.Unlock()
	n.drive("every replica quiesced after the heal", func() bool { return n.quiesced() })
	for _, tn := range n.nodes {
		st, _ := tn.host.Status(id)
		if st.Term != before.Term || st.Lead != lead {
			t.Fatalf("node %d: term %d leader %d after the heal, was term %d leader %d", tn.id, st.Term, st.Lead, before.Term, lead)
		}
	}
}
