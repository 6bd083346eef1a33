package replica

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// memGroupStorage is a GroupStorage in memory that tracks what is durable:
// Sync makes the appended entries durable, the HardStateStore the
// HardState.
type memGroupStorage struct {
	*raft.MemoryStorage

	mu       sync.Mutex
	state    GroupState // from SetState
	appended uint64     // last index appended
	durable  uint64     // last index synced
}

func newMemGroupStorage() *memGroupStorage {
	return &memGroupStorage{MemoryStorage: raft.NewMemoryStorage()}
}

// initial is the synthetic initial state of a group of voters.
func initial(voters ...uint64) GroupState {
	return GroupState{ConfState: raftpb.ConfState{Voters: voters}}
}

func (s *memGroupStorage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.HardState, s.state.ConfState, nil
}

func (s *memGroupStorage) SetState(st GroupState) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	s.MemoryStorage.SetHardState(st.HardState)
}

func (s *memGroupStorage) Append(ents []raftpb.Entry) error {
	if err := s.MemoryStorage.Append(ents); err != nil {
		return err
	}
	s.mu.Lock()
	s.appended = ents[len(ents)-1].Index
	s.durable = min(s.durable, s.appended) // a replaced tail is no longer durable
	s.mu.Unlock()
	return nil
}

func (s *memGroupStorage) ApplySnapshot(snap raftpb.Snapshot) error {
	return s.MemoryStorage.ApplySnapshot(snap)
}

func (s *memGroupStorage) Sync() error {
	s.mu.Lock()
	s.durable = s.appended
	s.mu.Unlock()
	return nil
}

func (s *memGroupStorage) durableIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}

// memHardStates is the in-memory HardStateStore the tests read.
type memHardStates = MemStateStore

func newMemHardStates() *memHardStates { return NewMemStateStore() }

func (m *MemStateStore) get(id GroupID) raftpb.HardState {
	st, _, _ := m.Load(id)
	return st.HardState
}

// recorder is a StateMachine that keeps the data of applied normal
// entries, and the leadership changes it was told of (LeaderObserver).
type recorder struct {
	mu    sync.Mutex
	data  []string
	leads [][2]uint64 // lead, term
}

func (r *recorder) LeaderChanged(lead, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leads = append(r.leads, [2]uint64{lead, term})
}

func (r *recorder) leaderChanges() [][2]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.leads)
}

func (r *recorder) Apply(ents []raftpb.Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range ents {
		if e.Type == raftpb.EntryNormal && len(e.Data) > 0 {
			r.data = append(r.data, string(e.Data))
		}
	}
}

func (r *recorder) applied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.data)
}

// testNode is one broker's host with its groups' storages.
type testNode struct {
	id       uint64
	host     *Host
	hs       *memHardStates
	storages map[GroupID]*memGroupStorage
	machines map[GroupID]*recorder
}

// memNet connects hosts in memory. Before a message leaves, it checks the
// raft contract against the sender's durable state: the sender's HardState
// of the message's term is durable, a vote is durable before it is
// granted, and entries are durable before they are acknowledged.
type memNet struct {
	t     *testing.T
	clock fakeClock
	mu    sync.Mutex
	nodes map[uint64]*testNode
	cut   map[[2]uint64]bool // from, to: dropped
	bad   []string
}

func (n *memNet) sender(from uint64) Transport { return netSender{n, from} }

// fakeClock is a clock tests move by hand (HostConfig.Now).
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

type netSender struct {
	n    *memNet
	from uint64
}

func (s netSender) Send(msgs []GroupMessage) {
	n := s.n
	n.mu.Lock()
	src := n.nodes[s.from]
	by := map[uint64][]GroupMessage{}
	for _, gm := range msgs {
		m := gm.Msg
		n.check(src, gm)
		if n.cut[[2]uint64{m.From, m.To}] {
			continue
		}
		by[m.To] = append(by[m.To], gm)
	}
	dsts := map[uint64]*testNode{}
	for to := range by {
		dsts[to] = n.nodes[to]
	}
	n.mu.Unlock()
	for to, ms := range by {
		if d := dsts[to]; d != nil {
			d.host.Deliver(ms)
		}
	}
}

// isolate cuts node id off from the others, and has every side's
// liveness report the other down (as the TCP transport's timeout does).
func (n *memNet) isolate(id uint64) {
	n.mu.Lock()
	var others []*testNode
	for oid, tn := range n.nodes {
		if oid != id {
			n.cut[[2]uint64{id, oid}] = true
			n.cut[[2]uint64{oid, id}] = true
			others = append(others, tn)
		}
	}
	self := n.nodes[id]
	n.mu.Unlock()
	for _, tn := range others {
		tn.host.PeerDown(id)
		self.host.PeerDown(tn.id)
	}
}

// heal joins every node again and reports every peer up.
func (n *memNet) heal() {
	n.mu.Lock()
	clear(n.cut)
	var all []*testNode
	for _, tn := range n.nodes {
		all = append(all, tn)
	}
	n.mu.Unlock()
	for _, a := range all {
		for _, b := range all {
			if a != b {
				a.host.PeerUp(b.id)
			}
		}
	}
}

// check notes a contract violation by message gm of node src. n.mu held.
func (n *memNet) check(src *testNode, gm GroupMessage) {
	m := gm.Msg
	hs := src.hs.get(gm.Group)
	switch m.Type {
	case raftpb.MsgPreVote, raftpb.MsgPreVoteResp:
		return // a pre-vote's term is not persisted
	}
	if m.Term > hs.Term {
		n.bad = append(n.bad, fmt.Sprintf("node %d group %s: %s at term %d sent before its term was durable (durable %d)", src.id, gm.Group, m.Type, m.Term, hs.Term))
	}
	if m.Type == raftpb.MsgVoteResp && !m.Reject && hs.Vote != m.To {
		n.bad = append(n.bad, fmt.Sprintf("node %d group %s: vote for %d granted before it was durable (durable vote %d)", src.id, gm.Group, m.To, hs.Vote))
	}
	if m.Type == raftpb.MsgAppResp && !m.Reject {
		if d := src.storages[gm.Group].durableIndex(); m.Index > d {
			n.bad = append(n.bad, fmt.Sprintf("node %d group %s: acknowledged index %d with %d durable", src.id, gm.Group, m.Index, d))
		}
	}
}

// mustHost starts a host; tests tick it themselves unless cfg says
// otherwise.
func mustHost(t testing.TB, cfg HostConfig) *Host {
	t.Helper()
	if cfg.TickInterval == 0 {
		cfg.TickInterval = -1
	}
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestCluster starts hosts 1..nodes, each with the same groups.
func newTestCluster(t *testing.T, nodes, groups int) (*memNet, []GroupID) {
	t.Helper()
	n := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	var voters []uint64
	for i := 1; i <= nodes; i++ {
		voters = append(voters, uint64(i))
	}
	var ids []GroupID
	for g := 0; g < groups; g++ {
		ids = append(ids, GroupID{TopicID: [16]byte{byte(g >> 8), byte(g)}, Partition: int32(g)})
	}
	for _, id := range voters {
		tn := &testNode{id: id, hs: newMemHardStates(), storages: map[GroupID]*memGroupStorage{}, machines: map[GroupID]*recorder{}}
		tn.host = mustHost(t, HostConfig{NodeID: id, Transport: n.sender(id), HardState: tn.hs, Logger: quiet(), Now: n.clock.Now})
		for _, gid := range ids {
			st := newMemGroupStorage()
			rec := &recorder{}
			tn.storages[gid], tn.machines[gid] = st, rec
			if err := tn.host.AddGroup(GroupConfig{ID: gid, Storage: st, Machine: rec, State: initial(voters...)}); err != nil {
				t.Fatal(err)
			}
		}
		n.nodes[id] = tn
	}
	t.Cleanup(func() {
		for _, tn := range n.nodes {
			tn.host.Close()
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, b := range n.bad {
			t.Error(b)
		}
	})
	return n, ids
}

// drive ticks every host until cond holds, failing after a deadline.
func (n *memNet) drive(what string, cond func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			n.t.Fatalf("timed out waiting for %s", what)
		}
		n.mu.Lock()
		nodes := make([]*testNode, 0, len(n.nodes))
		for _, tn := range n.nodes {
			nodes = append(nodes, tn)
		}
		n.mu.Unlock()
		for _, tn := range nodes {
			tn.host.Tick()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// leader returns the group's leader when every live node agrees on one.
func (n *memNet) leader(id GroupID) uint64 {
	var lead uint64
	for _, tn := range n.nodes {
		st, err := tn.host.Status(id)
		if err != nil {
			return 0
		}
		if st.RaftState == raft.StateLeader {
			if lead != 0 {
				return 0
			}
			lead = tn.id
		}
	}
	return lead
}

// Three hosts, 20 groups: every group elects a leader, proposals commit
// on every replica in one order, and no message leaves before the state
// it depends on is durable (memNet.check).
func TestHostReplicates(t *testing.T) {
	n, ids := newTestCluster(t, 3, 20)
	n.drive("a leader in every group", func() bool {
		for _, id := range ids {
			if n.leader(id) == 0 {
				return false
			}
		}
		return true
	})
	const each = 30
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lead := n.nodes[n.leader(id)]
			for i := 0; i < each; i++ {
				if err := lead.host.Propose(id, []byte(fmt.Sprintf("%s/%d", id, i))); err != nil {
					t.Errorf("propose to group %s: %v", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n.drive("every proposal applied on every replica", func() bool {
		for _, id := range ids {
			for _, tn := range n.nodes {
				if len(tn.machines[id].applied()) < each {
					return false
				}
			}
		}
		return true
	})
	for _, id := range ids {
		want := n.nodes[1].machines[id].applied()
		for i := range want {
			if want[i] != fmt.Sprintf("%s/%d", id, i) {
				t.Fatalf("group %s applied %q at %d", id, want[i], i)
			}
		}
		for _, tn := range n.nodes {
			if got := tn.machines[id].applied(); !slices.Equal(got, want) {
				t.Fatalf("group %s: node %d applied %v, node 1 %v", id, tn.id, got, want)
			}
		}
	}
	// HardStates were batched: fewer synced writes than groups times
	// changes.
	t.Logf("node 1: %d HardState writes for %d groups", n.nodes[1].hs.Saves(), len(ids))
}

// A follower cut off from the others does not stop the group; once
// healed it catches up. A proposal to a follower is dropped (produce goes
// to the leader only).
func TestHostMinorityPartition(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	lead := n.leader(id)
	var follower uint64
	for fid := range n.nodes {
		if fid != lead {
			follower = fid
			break
		}
	}
	if err := n.nodes[follower].host.Propose(id, []byte("x")); err == nil {
		t.Fatal("a follower accepted a proposal")
	}
	n.mu.Lock()
	for other := range n.nodes {
		if other != follower {
			n.cut[[2]uint64{follower, other}] = true
			n.cut[[2]uint64{other, follower}] = true
		}
	}
	n.mu.Unlock()
	for i := 0; i < 10; i++ {
		if err := n.nodes[lead].host.Propose(id, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	n.drive("the majority applying", func() bool { return len(n.nodes[lead].machines[id].applied()) == 10 })
	if got := len(n.nodes[follower].machines[id].applied()); got != 0 {
		t.Fatalf("the cut-off follower applied %d", got)
	}
	n.mu.Lock()
	clear(n.cut)
	n.mu.Unlock()
	n.drive("the healed follower catching up", func() bool { return len(n.nodes[follower].machines[id].applied()) == 10 })
}

// Membership changes: a new replica joins as a learner (from the group's
// initial state, replaying the log), catches up, is promoted, and an old
// replica is removed; the group then commits with the new replica set
// while the removed one is cut off.
func TestHostMembershipChange(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	lead := n.leader(id)
	for i := 0; i < 5; i++ {
		if err := n.nodes[lead].host.Propose(id, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Node 4 starts from the group's initial state.
	tn := &testNode{id: 4, hs: newMemHardStates(), storages: map[GroupID]*memGroupStorage{}, machines: map[GroupID]*recorder{}}
	tn.host = mustHost(t, HostConfig{NodeID: 4, Transport: n.sender(4), HardState: tn.hs, Logger: quiet()})
	st, rec := newMemGroupStorage(), &recorder{}
	tn.storages[id], tn.machines[id] = st, rec
	if err := tn.host.AddGroup(GroupConfig{ID: id, Storage: st, Machine: rec, State: initial(1, 2, 3)}); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.nodes[4] = tn
	n.mu.Unlock()
	change := func(typ raftpb.ConfChangeType, node uint64) {
		t.Helper()
		cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: node}}}
		var err error
		n.drive(fmt.Sprintf("%s %d accepted", typ, node), func() bool {
			l := n.leader(id)
			if l == 0 {
				return false
			}
			err = n.nodes[l].host.ProposeConfChange(id, cc)
			return err == nil
		})
	}
	change(raftpb.ConfChangeAddLearnerNode, 4)
	n.drive("the learner catching up", func() bool { return len(rec.applied()) == 5 })
	if st, _ := tn.host.Status(id); st.RaftState != raft.StateFollower || st.Lead == 0 {
		t.Fatalf("the learner's state %v, leader %d", st.RaftState, st.Lead)
	}
	change(raftpb.ConfChangeAddNode, 4)
	lead = n.leader(id)
	var victim uint64
	for _, v := range []uint64{1, 2, 3} {
		if v != lead {
			victim = v
			break
		}
	}
	change(raftpb.ConfChangeRemoveNode, victim)
	// Cut off the removed replica and the other old follower: only the
	// leader and node 4 remain, a majority of the new voters (leader,
	// other, 4) but not of the old four, so commits prove the change.
	var other uint64
	for _, v := range []uint64{1, 2, 3} {
		if v != lead && v != victim {
			other = v
		}
	}
	n.drive("the removal applied by the leader and node 4", func() bool {
		for _, nid := range []uint64{lead, 4} {
			if st, err := n.nodes[nid].host.Status(id); err != nil || st.Applied < st.Commit || st.Commit == 0 {
				return false
			}
		}
		return n.leader(id) == lead
	})
	n.mu.Lock()
	for _, gone := range []uint64{victim, other} {
		for nid := range n.nodes {
			n.cut[[2]uint64{gone, nid}] = true
			n.cut[[2]uint64{nid, gone}] = true
		}
	}
	n.mu.Unlock()
	for i := 5; i < 10; i++ {
		if err := n.nodes[lead].host.Propose(id, []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("propose with the new replica set: %v", err)
		}
	}
	n.drive("the leader and node 4 applying without the others", func() bool {
		return len(n.nodes[lead].machines[id].applied()) == 10 && len(rec.applied()) == 10
	})
}

// With TickInterval the host ticks itself: groups elect leaders with no
// one calling Tick.
func TestHostTicksItself(t *testing.T) {
	n := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	id := GroupID{Partition: 1}
	voters := []uint64{1, 2, 3}
	for _, nid := range voters {
		tn := &testNode{id: nid, hs: newMemHardStates(), storages: map[GroupID]*memGroupStorage{}, machines: map[GroupID]*recorder{}}
		tn.host = mustHost(t, HostConfig{NodeID: nid, Transport: n.sender(nid), HardState: tn.hs, Logger: quiet(), TickInterval: 5 * time.Millisecond})
		st, rec := newMemGroupStorage(), &recorder{}
		tn.storages[id], tn.machines[id] = st, rec
		if err := tn.host.AddGroup(GroupConfig{ID: id, Storage: st, Machine: rec, State: initial(voters...)}); err != nil {
			t.Fatal(err)
		}
		n.nodes[nid] = tn
	}
	defer func() {
		for _, tn := range n.nodes {
			tn.host.Close()
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for n.leader(id) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no leader without manual ticks")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failingStorage fails its next Sync when armed.
type failingStorage struct {
	*memGroupStorage
	fail atomic.Bool
}

func (f *failingStorage) Sync() error {
	if f.fail.CompareAndSwap(true, false) {
		return errors.New("injected sync failure")
	}
	return f.memGroupStorage.Sync()
}

// A group whose storage fails leaves the host (its RawNode handed out a
// Ready that was never made durable: etcd raft panicked at the next
// Ready, killing the broker); its calls fail, the host and its other
// groups go on, and the group can be added again from its storage.
func TestHostStorageFailureRemovesGroup(t *testing.T) {
	hs := newMemHardStates()
	net := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	h := mustHost(t, HostConfig{NodeID: 1, Transport: net.sender(1), HardState: hs, Logger: quiet()})
	defer h.Close()
	bad, good := GroupID{Partition: 1}, GroupID{Partition: 2}
	fst := &failingStorage{memGroupStorage: newMemGroupStorage()}
	if err := h.AddGroup(GroupConfig{ID: bad, Storage: fst, Machine: &recorder{}, State: initial(1)}); err != nil {
		t.Fatal(err)
	}
	grec := &recorder{}
	if err := h.AddGroup(GroupConfig{ID: good, Storage: newMemGroupStorage(), Machine: grec, State: initial(1)}); err != nil {
		t.Fatal(err)
	}
	net.nodes[1] = &testNode{id: 1, host: h, hs: hs, storages: map[GroupID]*memGroupStorage{bad: fst.memGroupStorage}}
	for _, id := range []GroupID{bad, good} {
		if err := h.Campaign(id); err != nil {
			t.Fatal(err)
		}
	}
	waitLeader := func(id GroupID) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if st, err := h.Status(id); err == nil && st.RaftState == raft.StateLeader {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s elected no leader", id)
			}
			h.Tick()
			time.Sleep(time.Millisecond)
		}
	}
	waitLeader(bad)
	waitLeader(good)
	fst.fail.Store(true)
	h.Propose(bad, []byte("lost")) // accepted, then its sync fails
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := h.Propose(bad, []byte("x")); errors.Is(err, ErrNoGroup) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group whose storage failed is still on the host")
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.Propose(good, []byte("y")); err != nil {
		t.Fatalf("the other group: %v", err)
	}
	// Added again from its storage, it serves again.
	saved, ok, err := hs.Load(bad)
	if err != nil || !ok {
		t.Fatalf("the group's saved state: %v, %v", ok, err)
	}
	if err := h.AddGroup(GroupConfig{ID: bad, Storage: fst.memGroupStorage, Machine: &recorder{}, State: saved}); err != nil {
		t.Fatal(err)
	}
	h.Campaign(bad)
	waitLeader(bad)
	if err := h.Propose(bad, []byte("z")); err != nil {
		t.Fatalf("the group added again: %v", err)
	}
}
