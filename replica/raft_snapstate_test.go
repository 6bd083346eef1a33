package replica

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// fakeMachine is a state machine fed by a partition's records (the
// metadata store stands for one in production): its state is the values
// applied, in order, and the next offset to apply. It lives across a
// node's restarts, as a durable store would.
type fakeMachine struct {
	mu       sync.Mutex
	next     int64
	vals     []string
	restores int
	saves    int
}

// apply applies the committed records of p from the machine's next
// offset; it returns false when p's log starts after it (it cannot).
func (m *fakeMachine) apply(t *testing.T, p *Partition) bool {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	hw := p.HighWatermark()
	for m.next < hw {
		if m.next < p.LogStartOffset() {
			return false
		}
		data, res, err := p.ReadBytes(nil, m.next, 1<<20)
		res.Release()
		if err != nil {
			t.Fatal(err)
		}
		sp, vals, err := decodeValues(data)
		if err != nil {
			t.Fatal(err)
		}
		if sp.first != m.next {
			t.Fatalf("read at %d returned offset %d", m.next, sp.first)
		}
		m.vals = append(m.vals, vals...)
		m.next = sp.next
	}
	return true
}

func (m *fakeMachine) Save(next int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next < next {
		return nil, fmt.Errorf("applied up to %d, not %d", m.next, next)
	}
	m.saves++
	return []byte(strconv.FormatInt(m.next, 10) + ";" + strings.Join(m.vals, ",")), nil
}

func (m *fakeMachine) NextOffset() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

func (m *fakeMachine) Restore(data []byte) error {
	n, vals, ok := strings.Cut(string(data), ";")
	if !ok {
		return errors.New("bad state")
	}
	next, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if next <= m.next {
		return nil
	}
	m.next, m.vals = next, strings.Split(vals, ",")
	m.restores++
	return nil
}

// TestSnapshotCarriesState: a follower down while the others' retention
// removed what its state machine still needed catches up by a snapshot
// that carries the leader's machine state (SnapshotState), and its machine
// ends equal to the others'.
func TestSnapshotCarriesState(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testSnapshotCarriesState(t, false) })
	// A crash inside ApplySnapshot after Restore and before the log reset:
	// the machine holds the leader's state, the log and raft state are the
	// old ones. The node still catches up (raft sends the snapshot again;
	// its Restore is a no-op).
	t.Run("crash after restore", func(t *testing.T) { testSnapshotCarriesState(t, true) })
}

func testSnapshotCarriesState(t *testing.T, crashAfterRestore bool) {
	c := newPCluster(t, 3, 1, 7)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.RetentionBytes = 2048
	machines := map[uint64]*fakeMachine{}
	for _, id := range c.voters {
		machines[id] = &fakeMachine{}
	}
	c.state = func(id uint64, _ GroupID) SnapshotState { return machines[id] }
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	produce := func(from, n int) {
		t.Helper()
		p := c.nodes[1].parts[g]
		var last *Pending
		for i := range n {
			pd, err := p.ProduceWith(valueBatch(fmt.Sprintf("v%d", from+i)), ProduceOptions{Acks: AcksAll})
			if err != nil {
				t.Fatal(err)
			}
			last = pd
		}
		if _, err := c.wait(last); err != nil {
			t.Fatal(err)
		}
		c.settle()
		for _, n := range c.up() {
			if !machines[n.id].apply(t, n.parts[g]) {
				t.Fatalf("node %d's machine is behind its log start", n.id)
			}
		}
	}
	produce(0, 5)
	c.stop(3)
	produce(5, 100)
	// The retention bound moves at each raft apply, to the entry of the
	// machine's next offset then: one more entry after the machines
	// applied the others.
	produce(105, 1)
	for _, id := range []uint64{1, 2} {
		if _, err := c.nodes[id].parts[g].DeleteOldSegments(); err != nil {
			t.Fatal(err)
		}
	}
	if lso := c.nodes[1].parts[g].LogStartOffset(); lso <= machines[3].next {
		t.Fatalf("log start offset %d, not past node 3's machine (%d)", lso, machines[3].next)
	}
	if crashAfterRestore {
		data, err := machines[1].Save(0)
		if err != nil {
			t.Fatal(err)
		}
		if err := machines[3].Restore(data); err != nil {
			t.Fatal(err)
		}
	}
	c.start(3)
	p3 := c.nodes[3].parts[g]
	c.drive("node 3 to catch up", func() bool {
		return p3.HighWatermark() == c.nodes[1].parts[g].HighWatermark() && machines[3].apply(t, p3)
	})
	if p3.LogStartOffset() <= 5 {
		t.Fatalf("node 3's log starts at %d: no snapshot was installed", p3.LogStartOffset())
	}
	if machines[3].restores != 1 {
		t.Fatalf("node 3's machine restored %d times, want 1", machines[3].restores)
	}
	produce(106, 3)
	if !slices.Equal(machines[3].vals, machines[1].vals) || machines[3].next != machines[1].next {
		t.Fatalf("node 3's machine at %d: %v\nnode 1's at %d: %v", machines[3].next, machines[3].vals, machines[1].next, machines[1].vals)
	}
	if len(machines[1].vals) != 109 {
		t.Fatalf("%d values, want 109", len(machines[1].vals))
	}
}

// TestRaftSnapDataVersions: a snapshot with a state is version 6 (3 with
// a conf index) and decodes back; one without is version 4 (1 with a
// conf index).
func TestRaftSnapDataVersions(t *testing.T) {
	d := raftSnapData{nextOffset: 42, epochs: []epochEntry{{epoch: 1, startOffset: 0}}, producers: []byte("p"), state: []byte("machine state")}
	b := encodeRaftSnap(d)
	if b[4] != raftSnapState+raftSnapConf {
		t.Fatalf("version %d", b[4])
	}
	got, err := decodeRaftSnap(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.state) != "machine state" || got.nextOffset != 42 || string(got.producers) != "p" || len(got.epochs) != 1 {
		t.Fatalf("decoded %+v", got)
	}
	d.state = nil
	b = encodeRaftSnap(d)
	if b[4] != raftSnapVersion+raftSnapConf {
		t.Fatalf("version %d without a state", b[4])
	}
	if got, err := decodeRaftSnap(b); err != nil || got.state != nil {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	d.state = []byte{}
	b = encodeRaftSnap(d) // an empty state is still a state
	if got, err := decodeRaftSnap(b); err != nil || got.state == nil || b[4] != raftSnapState+raftSnapConf {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// A truncated state is refused.
	b = encodeRaftSnap(raftSnapData{nextOffset: 1, state: []byte("abc")})
	bad := append([]byte{}, b[:len(b)-5]...)
	if _, err := decodeRaftSnap(bad); err == nil {
		t.Fatal("a truncated snapshot decoded")
	}
}

// TestRetentionKeepsWhatTheStateNeeds: a replica's retention never removes
// records its own state machine has not applied yet, however far its
// raft apply got.
func TestRetentionKeepsWhatTheStateNeeds(t *testing.T) {
	c := newPCluster(t, 3, 1, 3)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.RetentionBytes = 2048
	machines := map[uint64]*fakeMachine{}
	for _, id := range c.voters {
		machines[id] = &fakeMachine{}
	}
	c.state = func(id uint64, _ GroupID) SnapshotState { return machines[id] }
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	p1 := c.nodes[1].parts[g]
	var last *Pending
	for i := range 100 {
		pd, err := p1.ProduceWith(valueBatch(fmt.Sprintf("v%d", i)), ProduceOptions{Acks: AcksAll})
		if err != nil {
			t.Fatal(err)
		}
		last = pd
	}
	if _, err := c.wait(last); err != nil {
		t.Fatal(err)
	}
	c.settle()
	// Node 2's machine applied only a little; node 1's everything.
	p2 := c.nodes[2].parts[g]
	machines[1].apply(t, p1)
	machines[2].mu.Lock()
	machines[2].next, machines[2].vals = 10, nil // as if it applied v0..v9
	machines[2].mu.Unlock()
	// One more entry: the raft apply moves the bound.
	pd, err := p1.ProduceWith(valueBatch("last"), ProduceOptions{Acks: AcksAll})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.wait(pd); err != nil {
		t.Fatal(err)
	}
	c.settle()
	for _, p := range []*Partition{p1, p2} {
		if _, err := p.DeleteOldSegments(); err != nil {
			t.Fatal(err)
		}
	}
	if ls := p2.LogStartOffset(); ls > 10 {
		t.Fatalf("node 2's log starts at %d, past its machine's next offset 10", ls)
	}
	if ls := p1.LogStartOffset(); ls <= 10 {
		t.Fatalf("node 1's log starts at %d: retention removed nothing", ls)
	}
	if !machines[2].apply(t, p2) || len(machines[2].vals) != 91 {
		t.Fatalf("node 2's machine applied %d values", len(machines[2].vals))
	}
}

// TestSnapshotAckAfterRetention: a follower's acknowledgement of a
// snapshot reaches the leader only after the leader's retention removed
// the entries right after the snapshot (its answer was slow or lost, and
// the nudge came later). etcd raft keeps such a follower in
// StateSnapshot, paused, for good; the host has the leader send a newer
// snapshot, and the follower catches up.
func TestSnapshotAckAfterRetention(t *testing.T) {
	c := newPCluster(t, 3, 1, 11)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.RetentionBytes = 2048
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	lead := c.nodes[1].parts[g]
	produce := func(from, n int, settle bool) {
		t.Helper()
		var last *Pending
		for i := range n {
			pd, err := lead.ProduceWith(valueBatch(fmt.Sprintf("v%d", from+i)), ProduceOptions{Acks: AcksAll})
			if err != nil {
				t.Fatal(err)
			}
			last = pd
		}
		if _, err := c.wait(last); err != nil {
			t.Fatal(err)
		}
		if settle {
			c.settle()
		}
	}
	retention := func() {
		t.Helper()
		for _, id := range []uint64{1, 2} {
			if _, err := c.nodes[id].parts[g].DeleteOldSegments(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 5, true)
	c.stop(3)
	produce(5, 100, true)
	retention()
	// Node 3's answers to the leader are held back: the snapshot's
	// acknowledgement (and any nudge) arrives late.
	c.net.mu.Lock()
	c.net.hold = func(from uint64, gm GroupMessage) bool {
		return from == 3 && gm.Msg.Type == raftpb.MsgAppResp && !gm.Msg.Reject
	}
	c.net.mu.Unlock()
	c.start(3)
	p3 := c.nodes[3].parts[g]
	c.drive("node 3 to install a snapshot", func() bool { return p3.LogStartOffset() > 5 })
	installed := p3.LogStartOffset()
	// Meanwhile the leader's log moves on past the snapshot.
	produce(105, 100, false) // node 3 cannot settle: its answers are held
	retention()
	if lso := lead.LogStartOffset(); lso <= installed {
		t.Fatalf("the leader's log starts at %d, not past node 3's snapshot (%d)", lso, installed)
	}
	c.net.releaseHeld()
	c.drive("node 3 to catch up", func() bool { return p3.HighWatermark() == lead.HighWatermark() })
	if p3.LogStartOffset() <= installed {
		t.Fatalf("node 3's log starts at %d: it caught up without a newer snapshot", p3.LogStartOffset())
	}
	produce(205, 3, true)
	c.drive("node 3 to follow", func() bool { return p3.HighWatermark() == lead.HighWatermark() })
	if got, want := records(t, p3), records(t, lead); !slices.Equal(got, want) {
		t.Fatalf("node 3 serves %v\nthe leader %v", got, want)
	}
}
