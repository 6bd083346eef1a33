package replica

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Three hosts over loopback TCP: groups elect leaders and replicate; a
// host whose transport closes (a broker stopping) leaves the others
// committing.
func TestHostsOverTCP(t *testing.T) {
	const nodes, groups, each = 3, 5, 20
	n := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	var voters []uint64
	for i := uint64(1); i <= nodes; i++ {
		voters = append(voters, i)
	}
	var ids []GroupID
	for g := 0; g < groups; g++ {
		ids = append(ids, GroupID{TopicID: [16]byte{9, byte(g)}, Partition: int32(g)})
	}
	tps := map[uint64]*TCPTransport{}
	for _, id := range voters {
		tp, err := ListenTCP(id, "127.0.0.1:0", quiet())
		if err != nil {
			t.Fatal(err)
		}
		tps[id] = tp
	}
	for _, id := range voters {
		for _, peer := range voters {
			if peer != id {
				tps[id].SetPeer(peer, tps[peer].Addr().String())
			}
		}
		tn := &testNode{id: id, hs: newMemHardStates(), storages: map[GroupID]*memGroupStorage{}, machines: map[GroupID]*recorder{}}
		tn.host = mustHost(t, HostConfig{NodeID: id, Transport: tps[id], HardState: tn.hs, Logger: quiet()})
		tps[id].SetHost(tn.host)
		for _, gid := range ids {
			st, rec := newMemGroupStorage(), &recorder{}
			tn.storages[gid], tn.machines[gid] = st, rec
			if err := tn.host.AddGroup(GroupConfig{ID: gid, Storage: st, Machine: rec, State: initial(voters...)}); err != nil {
				t.Fatal(err)
			}
		}
		n.nodes[id] = tn
	}
	t.Cleanup(func() {
		for id, tn := range n.nodes {
			tps[id].Close()
			tn.host.Close()
		}
	})
	allLeaders := func() bool {
		for _, id := range ids {
			if n.leader(id) == 0 {
				return false
			}
		}
		return true
	}
	n.drive("leaders over TCP", allLeaders)
	propose := func(from int) {
		for _, id := range ids {
			lead := n.nodes[n.leader(id)]
			for i := from; i < from+each; i++ {
				if err := lead.host.Propose(id, []byte(fmt.Sprintf("%d", i))); err != nil {
					t.Fatalf("propose: %v", err)
				}
			}
		}
	}
	applied := func(tn *testNode, want int) bool {
		for _, id := range ids {
			if len(tn.machines[id].applied()) < want {
				return false
			}
		}
		return true
	}
	propose(0)
	n.drive("every replica applying", func() bool {
		for _, tn := range n.nodes {
			if !applied(tn, each) {
				return false
			}
		}
		return true
	})
	// Stop node 3's transport and host: the other two elect and commit.
	tps[3].Close()
	n.nodes[3].host.Close()
	gone := n.nodes[3]
	delete(n.nodes, 3)
	n.drive("leaders without node 3", allLeaders)
	propose(each)
	n.drive("the two live replicas applying", func() bool { return applied(n.nodes[1], 2*each) && applied(n.nodes[2], 2*each) })
	for _, id := range ids {
		want := make([]string, 2*each)
		for i := range want {
			want[i] = fmt.Sprint(i)
		}
		for _, tn := range n.nodes {
			if got := tn.machines[id].applied(); !slices.Equal(got, want) {
				t.Fatalf("group %s node %d applied %v", id, tn.id, got)
			}
		}
	}
	n.nodes[3] = gone // closed by the cleanup
}

func TestRaftFrameRoundTrip(t *testing.T) {
	msgs := []GroupMessage{
		{Group: GroupID{TopicID: [16]byte{1, 2}, Partition: 7}, Msg: raftpb.Message{Type: raftpb.MsgApp, To: 2, From: 1, Term: 3, Index: 9, Entries: []raftpb.Entry{{Term: 3, Index: 10, Data: []byte("batch")}}}},
		{Group: GroupID{Partition: 1}, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, To: 2, From: 1, Term: 3}},
		{Group: GroupID{Partition: 2}, Quiesce: true, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, To: 2, From: 1, Term: 3, Commit: 9, Index: 9}},
	}
	f := encodeRaftFrame(nil, msgs)
	got, err := decodeRaftFrame(f[4:])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Fatalf("got %+v", got)
	}
	for i := 4; i < len(f); i++ {
		if _, err := decodeRaftFrame(f[4:i]); err == nil {
			t.Fatalf("a frame cut at %d decoded", i)
		}
	}
	// An unknown flag is refused; an empty frame is a heartbeat.
	bad := append([]byte(nil), f...)
	bad[4+4+20] |= 0x80
	if _, err := decodeRaftFrame(bad[4:]); err == nil {
		t.Fatal("a frame with an unknown flag decoded")
	}
	hb := encodeRaftFrame(nil, nil)
	if got, err := decodeRaftFrame(hb[4:]); err != nil || len(got) != 0 {
		t.Fatalf("a heartbeat frame: %v %v", got, err)
	}
}

// Over TCP with quiescence: idle groups quiesce; when the host leading
// them stops, the transport's liveness timeout reports it down and the
// others elect at once, with no one ticking for them.
func TestTCPLivenessFailover(t *testing.T) {
	const nodes, groups = 3, 10
	n := &memNet{t: t, nodes: map[uint64]*testNode{}, cut: map[[2]uint64]bool{}}
	voters := []uint64{1, 2, 3}
	var ids []GroupID
	for g := 0; g < groups; g++ {
		ids = append(ids, GroupID{TopicID: [16]byte{7, byte(g)}, Partition: int32(g)})
	}
	tps := map[uint64]*TCPTransport{}
	for _, id := range voters {
		tp, err := ListenTCP(id, "127.0.0.1:0", quiet())
		if err != nil {
			t.Fatal(err)
		}
		tps[id] = tp
	}
	for _, id := range voters {
		for _, peer := range voters {
			if peer != id {
				tps[id].SetPeer(peer, tps[peer].Addr().String())
			}
		}
		tn := &testNode{id: id, hs: newMemHardStates(), storages: map[GroupID]*memGroupStorage{}, machines: map[GroupID]*recorder{}}
		// Ticks of 50 ms: raft's own election would take 0.5 to 1 s.
		tn.host = mustHost(t, HostConfig{NodeID: id, Transport: tps[id], HardState: tn.hs, Logger: quiet(),
			TickInterval: 50 * time.Millisecond, LivenessInterval: 20 * time.Millisecond, LivenessTimeout: 100 * time.Millisecond})
		tps[id].SetHost(tn.host)
		for _, gid := range ids {
			st, rec := newMemGroupStorage(), &recorder{}
			tn.storages[gid], tn.machines[gid] = st, rec
			if err := tn.host.AddGroup(GroupConfig{ID: gid, Storage: st, Machine: rec, State: initial(voters...)}); err != nil {
				t.Fatal(err)
			}
		}
		n.nodes[id] = tn
	}
	t.Cleanup(func() {
		for id, tn := range n.nodes {
			tps[id].Close()
			tn.host.Close()
		}
	})
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, id := range ids {
		if err := n.nodes[1].host.Campaign(id); err != nil {
			t.Fatal(err)
		}
	}
	wait("node 1 leading every group", func() bool {
		for _, id := range ids {
			if n.leader(id) != 1 {
				return false
			}
		}
		return true
	})
	wait("every group quiesced", func() bool { return n.quiesced() })
	start := time.Now()
	tps[1].Close()
	n.nodes[1].host.Close()
	wait("new leaders", func() bool {
		for _, id := range ids {
			if n.leaderAmong(id, 2, 3) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("new leaders %v after node 1 stopped", time.Since(start))
	// Polled: under load a group may have elected a new leader before node
	// 1 stopped (its liveness lapsing on a starved machine), so the new
	// leaders can come before the transports notice the stop.
	for _, id := range []uint64{2, 3} {
		wait(fmt.Sprintf("node %d's transport reporting node 1 down", id), func() bool {
			tps[id].mu.Lock()
			defer tps[id].mu.Unlock()
			return tps[id].down[1]
		})
	}
}

// A batch of catch-up appends larger than a frame may be (raft sends its
// whole in-flight bound at once) is cut into frames below maxRaftFrame:
// the receiver refused the single frame and closed the connection, so a
// new replica caught up by retries at a few MB/s.
func TestRaftFrameCut(t *testing.T) {
	entry := raftpb.Entry{Index: 1, Term: 1, Data: make([]byte, 1<<20)}
	var batch []GroupMessage
	for i := range 100 {
		batch = append(batch, GroupMessage{Msg: raftpb.Message{Type: raftpb.MsgApp, To: 2, Index: uint64(i), Entries: []raftpb.Entry{entry}}})
	}
	frames, total := 0, 0
	for rest := batch; len(rest) > 0; frames++ {
		n := frameCut(rest, frameTarget)
		if n < 1 {
			t.Fatalf("a frame of %d messages", n)
		}
		if size := len(encodeRaftFrame(nil, rest[:n])); size > maxRaftFrame || (n > 1 && size > frameTarget+raftMsgHeader*n+8) {
			t.Fatalf("frame %d: %d messages, %d bytes", frames, n, size)
		}
		total += n
		rest = rest[n:]
	}
	if total != len(batch) || frames < 100<<20/frameTarget {
		t.Fatalf("%d messages in %d frames", total, frames)
	}
	// A message alone over the target still goes (in a frame of its own).
	big := []GroupMessage{{Msg: raftpb.Message{Type: raftpb.MsgApp, Entries: []raftpb.Entry{{Data: make([]byte, frameTarget+1)}}}}, batch[0]}
	if n := frameCut(big, frameTarget); n != 1 {
		t.Fatalf("frameCut of an oversized first message: %d", n)
	}
}
