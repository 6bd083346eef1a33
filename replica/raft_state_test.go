package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func TestGroupStateEncoding(t *testing.T) {
	for _, st := range []GroupState{
		{},
		{HardState: raftpb.HardState{Term: 7, Vote: 2, Commit: 99}, Applied: 98, ConfIndex: 40, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}},
		{HardState: raftpb.HardState{Term: 7, Commit: 10}, Applied: 10, ConfIndex: 25, ConfState: raftpb.ConfState{Voters: []uint64{4, 5, 6}, Learners: []uint64{7}}},
		{HardState: raftpb.HardState{Term: 1 << 40, Commit: 5}, Applied: 5, ConfState: raftpb.ConfState{Voters: []uint64{1, 4}, Learners: []uint64{5}, VotersOutgoing: []uint64{1, 2, 3}, LearnersNext: []uint64{3}, AutoLeave: true}},
	} {
		b := encodeGroupState(nil, st)
		got, err := decodeGroupState(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("got %+v, want %+v", got, st)
		}
		// Every cut and every flipped byte is refused.
		for i := 0; i < len(b); i++ {
			if _, err := decodeGroupState(b[:i]); !errors.Is(err, ErrStateCorrupt) {
				t.Fatalf("a value cut at %d: %v", i, err)
			}
			d := append([]byte(nil), b...)
			d[i] ^= 0x10
			if _, err := decodeGroupState(d); !errors.Is(err, ErrStateCorrupt) {
				t.Fatalf("a value with byte %d flipped: %v", i, err)
			}
		}
	}
}

// A version 1 value (no confIndex) still decodes, its ConfIndex the
// applied index its ConfState holds.
func TestGroupStateVersion1(t *testing.T) {
	st := GroupState{HardState: raftpb.HardState{Term: 7, Vote: 2, Commit: 99}, Applied: 98, ConfIndex: 98, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}}
	v2 := encodeGroupState(nil, st)
	v1 := append([]byte{stateVersion1}, v2[1:33]...) // without confIndex
	v1 = append(v1, v2[41:len(v2)-stateCRCLen]...)
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	got, err := decodeGroupState(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("got %+v, want %+v", got, st)
	}
}

// The Pebble store keeps the states over a reopen, deletes, and refuses a
// damaged value.
func TestStateStore(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenStateStore("state", fs, quiet())
	if err != nil {
		t.Fatal(err)
	}
	a, b := GroupID{TopicID: [16]byte{1}, Partition: 0}, GroupID{TopicID: [16]byte{1}, Partition: 1}
	sa := GroupState{HardState: raftpb.HardState{Term: 3, Vote: 1, Commit: 10}, Applied: 9, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	sb := GroupState{HardState: raftpb.HardState{Term: 1, Commit: 1}, Applied: 1, ConfState: raftpb.ConfState{Voters: []uint64{2}}}
	if err := s.Save(map[GroupID]GroupState{a: sa, b: sb}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = OpenStateStore("state", fs, quiet()); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Load(a); err != nil || !ok || !reflect.DeepEqual(got, sa) {
		t.Fatalf("load: %+v %v %v", got, ok, err)
	}
	if _, ok, err := s.Load(b); err != nil || ok {
		t.Fatalf("a deleted group: %v %v", ok, err)
	}
	// Damage a's value behind the store's back.
	bad := encodeGroupState(nil, sa)
	bad[3] ^= 1
	if err := s.db.Set(stateKey(a), bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(a); !errors.Is(err, ErrStateCorrupt) {
		t.Fatalf("a damaged value: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// restart closes node id's host and starts a new one over the same
// storages, from the states its HardStateStore holds.
func (n *memNet) restart(id uint64) {
	n.t.Helper()
	n.mu.Lock()
	tn := n.nodes[id]
	n.mu.Unlock()
	tn.host.Close()
	h := mustHost(n.t, HostConfig{NodeID: id, Transport: n.sender(id), HardState: tn.hs, Logger: quiet()})
	for gid, st := range tn.storages {
		saved, ok, err := tn.hs.Load(gid)
		if err != nil || !ok {
			n.t.Fatalf("node %d group %s: no saved state (%v)", id, gid, err)
		}
		// The replica restarts with a fresh state machine that replays
		// from its applied index.
		tn.machines[gid] = &recorder{}
		if err := h.AddGroup(GroupConfig{ID: gid, Storage: st, Machine: tn.machines[gid], State: saved}); err != nil {
			n.t.Fatal(err)
		}
	}
	n.mu.Lock()
	tn.host = h
	n.mu.Unlock()
}

// A three-replica group restarted from its saved states keeps its log,
// commit and configuration (after a membership change too), then goes on
// committing.
func TestHostRestartFromSavedState(t *testing.T) {
	n, ids := newTestCluster(t, 3, 1)
	id := ids[0]
	n.drive("a leader", func() bool { return n.leader(id) != 0 })
	propose := func(from, to int) {
		t.Helper()
		n.drive("proposals accepted", func() bool {
			l := n.leader(id)
			if l == 0 {
				return false
			}
			for ; from < to; from++ {
				if err := n.nodes[l].host.Propose(id, fmt.Appendf(nil, "%d", from)); err != nil {
					return false
				}
			}
			return true
		})
	}
	propose(0, 5)
	// A membership change: node 3 becomes a learner (removed as voter).
	n.drive("node 3 demoted", func() bool {
		l := n.leader(id)
		if l == 0 {
			return false
		}
		cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 3}}}
		return n.nodes[l].host.ProposeConfChange(id, cc) == nil
	})
	allApplied := func() bool {
		var commit uint64
		for _, tn := range n.nodes {
			st, err := tn.host.Status(id)
			if err != nil || st.Applied < st.Commit || (commit != 0 && st.Commit != commit) {
				return false
			}
			commit = st.Commit
		}
		return true
	}
	n.drive("the change applied everywhere", allApplied)
	// One more entry so every replica's saved state covers the change
	// (applied is saved with the next batch).
	propose(5, 6)
	n.drive("entry 6 applied everywhere", func() bool {
		for _, tn := range n.nodes {
			if len(tn.machines[id].applied()) < 6 {
				return false
			}
		}
		return allApplied()
	})
	before := map[uint64]raft.BasicStatus{}
	for nid, tn := range n.nodes {
		st, _ := tn.host.Status(id)
		before[nid] = st
	}
	for nid := range n.nodes {
		n.restart(nid)
	}
	for nid, tn := range n.nodes {
		st, err := tn.host.Status(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Term != before[nid].Term || st.Commit != before[nid].Commit || st.Vote != before[nid].Vote {
			t.Fatalf("node %d restarted with %+v, had %+v", nid, st.HardState, before[nid].HardState)
		}
		last, _ := tn.storages[id].LastIndex()
		if last < st.Commit {
			t.Fatalf("node %d: log ends at %d, commit %d", nid, last, st.Commit)
		}
		saved, _, _ := tn.hs.Load(id)
		if !reflect.DeepEqual(saved.ConfState.Voters, []uint64{1, 2}) || !reflect.DeepEqual(saved.ConfState.Learners, []uint64{3}) {
			t.Fatalf("node %d saved conf %+v", nid, saved.ConfState)
		}
	}
	n.drive("a leader after the restart", func() bool { return n.leader(id) != 0 })
	if l := n.leader(id); l == 3 {
		t.Fatal("the learner leads")
	}
	propose(6, 8)
	n.drive("every replica applying after the restart", func() bool {
		for _, tn := range n.nodes {
			got := tn.machines[id].applied()
			// A restarted machine sees the entries above its saved
			// applied index again, then the new ones.
			if len(got) == 0 || got[len(got)-1] != "7" {
				return false
			}
		}
		return true
	})
}

// A synced Save survives a crash (everything not synced is lost).
func TestStateStoreCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := OpenStateStore("state", fs, quiet())
	if err != nil {
		t.Fatal(err)
	}
	id := GroupID{Partition: 3}
	want := GroupState{HardState: raftpb.HardState{Term: 2, Vote: 1, Commit: 4}, Applied: 3, ConfState: raftpb.ConfState{Voters: []uint64{1}}}
	if err := s.Save(map[GroupID]GroupState{id: want}, true); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	s, err = OpenStateStore("state", crashed, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok, err := s.Load(id); err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the crash: %+v %v %v", got, ok, err)
	}
}

// A host on the Pebble store: a single-replica group commits, the host
// and the store close, and the group restarts from the reopened store
// with its term and commit.
func TestHostRestartOnStateStore(t *testing.T) {
	fs := vfs.NewMem()
	store, err := OpenStateStore("state", fs, quiet())
	if err != nil {
		t.Fatal(err)
	}
	net := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	id := GroupID{Partition: 1}
	st := newMemGroupStorage()
	h := mustHost(t, HostConfig{NodeID: 1, Transport: net.sender(1), HardState: store, Logger: quiet()})
	if err := h.AddGroup(GroupConfig{ID: id, Storage: st, Machine: &recorder{}}); err == nil {
		t.Fatal("a group with no replicas joined")
	}
	if err := h.AddGroup(GroupConfig{ID: id, Storage: st, Machine: &recorder{}, State: initial(1)}); err != nil {
		t.Fatal(err)
	}
	if err := h.Campaign(id); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		for h.Propose(id, []byte("x")) != nil {
			h.Tick()
		}
	}
	var before raft.BasicStatus
	for {
		before, _ = h.Status(id)
		if saved, _, _ := store.Load(id); before.Applied == before.Commit && saved.Applied == before.Commit && before.Commit >= 4 {
			break
		}
		h.Tick()
	}
	h.Close()
	store.Close()
	if store, err = OpenStateStore("state", fs, quiet()); err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	saved, ok, err := store.Load(id)
	if err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	h = mustHost(t, HostConfig{NodeID: 1, Transport: net.sender(1), HardState: store, Logger: quiet()})
	defer h.Close()
	rec := &recorder{}
	if err := h.AddGroup(GroupConfig{ID: id, Storage: st, Machine: rec, State: saved}); err != nil {
		t.Fatal(err)
	}
	after, _ := h.Status(id)
	if after.HardState != before.HardState || after.Applied != saved.Applied {
		t.Fatalf("restarted with %+v applied %d, had %+v applied %d", after.HardState, after.Applied, before.HardState, before.Applied)
	}
}
