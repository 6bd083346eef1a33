package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
)

// moveAway calls TransferLeadershipAway on p until the replica it names
// leads (asking again every 100 ticks, as a controlled shutdown polls)
// and returns it.
func (c *pcluster) moveAway(p *Partition) uint64 {
	c.t.Helper()
	to, err := p.TransferLeadershipAway()
	if err != nil {
		c.t.Fatalf("TransferLeadershipAway: %v", err)
	}
	ticks := 0
	c.drive(fmt.Sprintf("node %d to lead", to), func() bool {
		ticks++
		if ticks%100 == 0 && p.IsLeader() {
			again, err := p.TransferLeadershipAway()
			if err != nil {
				c.t.Fatalf("TransferLeadershipAway again: %v", err)
			}
			if again != to {
				c.t.Fatalf("TransferLeadershipAway picked node %d, then node %d", to, again)
			}
		}
		return c.leads(to)
	})
	return to
}

// campaign has node id stand for election every 20 ticks until it leads.
func (c *pcluster) campaign(id uint64) {
	c.t.Helper()
	ticks := 0
	c.drive(fmt.Sprintf("node %d to lead", id), func() bool {
		if ticks%20 == 0 {
			c.nodes[id].host.Campaign(c.groups[0])
		}
		ticks++
		return c.leads(id)
	})
}

// TestTransferLeadershipAway: a leader hands leadership to the in-sync
// voter with the lowest id among the equally caught up, produce
// continues there; a replica reported down is not picked; a follower is
// refused with NOT_LEADER_OR_FOLLOWER; a group of one voter has no
// target.
func TestTransferLeadershipAway(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.startAll()
	g := c.groups[0]
	c.campaign(1)
	p1 := c.nodes[1].parts[g]
	if _, err := c.produceWait(p1, valueBatch("a"), AcksAll); err != nil {
		t.Fatal(err)
	}
	c.settle()
	c.drive("an ISR of 3", func() bool { return len(p1.ISR()) == 3 })
	if _, err := c.nodes[2].parts[g].TransferLeadershipAway(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("TransferLeadershipAway on a follower: %v, want ErrNotLeader", err)
	}
	if to := c.moveAway(p1); to != 2 {
		t.Fatalf("leadership moved to node %d, want node 2 (in sync, the lowest id)", to)
	}
	p2 := c.nodes[2].parts[g]
	if _, err := c.produceWait(p2, valueBatch("b"), AcksAll); err != nil {
		t.Fatalf("produce on the new leader: %v", err)
	}
	// Node 1 stops (reported down, still in the ISR within the lag
	// time): node 3 is the target.
	c.stop(1)
	c.drive("an ISR of 3 on node 2", func() bool { return len(p2.ISR()) >= 2 })
	if to := c.moveAway(p2); to != 3 {
		t.Fatalf("leadership moved to node %d, want node 3 (node 1 is down)", to)
	}
	p3 := c.nodes[3].parts[g]
	if _, err := c.produceWait(p3, valueBatch("c"), AcksLeader); err != nil {
		t.Fatalf("produce on the new leader: %v", err)
	}
	// Node 2 stops too: nobody in sync and up.
	c.stop(2)
	if to, err := p3.TransferLeadershipAway(); !errors.Is(err, ErrNoTransferTarget) {
		t.Fatalf("TransferLeadershipAway with every other replica down: %d, %v; want ErrNoTransferTarget", to, err)
	}
	c.start(1)
	c.start(2)
	c.settle()
	if got := records(t, c.waitLeader(g)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("records %v", got)
	}

	one := newPCluster(t, 1, 1, 2)
	one.startAll()
	lone := one.waitLeader(one.groups[0])
	if to, err := lone.TransferLeadershipAway(); !errors.Is(err, ErrNoTransferTarget) {
		t.Fatalf("TransferLeadershipAway in a group of one voter: %d, %v; want ErrNoTransferTarget", to, err)
	}
}

func TestPickTransferTarget(t *testing.T) {
	prog := []ReplicaProgress{{ID: 1, Match: 10}, {ID: 2, Match: 8}, {ID: 3, Match: 9}, {ID: 4, Match: 9}, {ID: 5, Match: 12, Learner: true}}
	none := func(uint64) bool { return false }
	for _, tc := range []struct {
		isr  []uint64
		down func(uint64) bool
		want uint64
	}{
		{[]uint64{1, 2, 3, 4}, none, 3},                                    // most caught up, then the lowest id
		{[]uint64{1, 2, 4}, none, 4},                                       // only the ISR
		{[]uint64{1, 2, 3, 4}, func(id uint64) bool { return id == 3 }, 4}, // not down
		{[]uint64{1, 5}, none, 0},                                          // learners never
		{[]uint64{1}, none, 0},
	} {
		if got := pickTransferTarget(1, tc.isr, prog, tc.down); got != tc.want {
			t.Errorf("isr %v: picked %d, want %d", tc.isr, got, tc.want)
		}
	}
}

// TestOnLeaderChange: every replica hears each change of its view of the
// leader or term, in order, after its partition answers the new view
// (IsLeader, Leader, LeaderEpoch), lead 0 included.
func TestOnLeaderChange(t *testing.T) {
	type event struct{ lead, term uint64 }
	var mu sync.Mutex
	events := map[uint64][]event{}
	var bad []string
	c := newPCluster(t, 3, 1, 1)
	c.onLeader = func(id uint64, g GroupID, opened *atomic.Pointer[Partition]) func(lead, term uint64) {
		return func(lead, term uint64) {
			mu.Lock()
			defer mu.Unlock()
			if evs := events[id]; len(evs) > 0 && evs[len(evs)-1] == (event{lead, term}) {
				bad = append(bad, fmt.Sprintf("node %d: told %d/%d twice in a row", id, lead, term))
			}
			events[id] = append(events[id], event{lead, term})
			p := opened.Load()
			if p == nil {
				return // during Open: the partition is not known yet
			}
			got, epoch, ok := p.Leader()
			if got != lead || ok != (lead != 0) || p.IsLeader() != (lead == id) || (lead != 0 && epoch != int32(term)) {
				bad = append(bad, fmt.Sprintf("node %d: told leader %d term %d, the partition answers leader %d (ok %v) epoch %d, leading %v", id, lead, term, got, ok, epoch, p.IsLeader()))
			}
		}
	}
	c.startAll()
	g := c.groups[0]
	c.campaign(1)
	c.settle()
	c.moveAway(c.nodes[1].parts[g])
	// The leader (node 2) stops: the others forget it (lead 0), then
	// elect one of them.
	c.stop(2)
	lead := c.waitLeader(g)
	newLead, _, _ := lead.Leader()
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
	for _, id := range []uint64{1, 3} {
		evs := events[id]
		var leads []uint64
		for i, e := range evs {
			if i > 0 && e.term < evs[i-1].term {
				t.Errorf("node %d: the term went back: %v", id, evs)
			}
			if len(leads) == 0 || leads[len(leads)-1] != e.lead {
				leads = append(leads, e.lead)
			}
		}
		// Leader 1, then 2 (a transfer may pass through no leader), then
		// none once node 2 is down, then the new one.
		if i := slices.Index(leads, 1); i < 0 || !slices.Contains(leads[i:], 2) || leads[len(leads)-1] != newLead || !slices.Contains(leads[slices.Index(leads, 2):], 0) {
			t.Errorf("node %d heard the leaders %v (events %v)", id, leads, evs)
		}
		last := evs[len(evs)-1]
		p := c.nodes[id].parts[g]
		if lead, epoch, _ := p.Leader(); lead != last.lead || epoch != int32(last.term) {
			t.Errorf("node %d: last told %v, the partition answers %d/%d", id, last, lead, epoch)
		}
	}
}

// TestRaftPartitionContract: what the broker relies on. Append (the
// broker's own writes) on a leader returns once committed (acks=all) and
// a *NotLeaderError on a follower; Close takes the group off the host (so
// its HardStateStore entry may be deleted); a group that does not name
// the host's node is refused at Open.
func TestRaftPartitionContract(t *testing.T) {
	c := newPCluster(t, 3, 1, 4)
	c.startAll()
	g := c.groups[0]
	c.campaign(1)
	appendWait := func(p *Partition, vals ...string) (segment.AppendResult, error) {
		type out struct {
			res segment.AppendResult
			err error
		}
		done := make(chan out, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := p.Append(ctx, valueBatch(vals...), AppendOptions{LogAppendTime: true})
			done <- out{res, err}
		}()
		var o out
		c.drive("an Append to return", func() bool {
			select {
			case o = <-done:
				return true
			default:
				return false
			}
		})
		return o.res, o.err
	}
	lead := c.nodes[1].parts[g]
	res, err := appendWait(lead, "x", "y")
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 1 || res.LogAppendTime < 0 {
		t.Fatalf("Append on the leader: %+v, %v", res, err)
	}
	if hw := lead.HighWatermark(); hw != 2 {
		t.Fatalf("Append returned before its commit: high watermark %d", hw)
	}
	var nle *NotLeaderError
	if _, err := appendWait(c.nodes[2].parts[g], "z"); !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) || nle.Leader != 1 {
		t.Fatalf("Append on a follower: %v, want a NotLeaderError naming node 1", err)
	}
	// Close takes the group off the host.
	if err := c.nodes[3].parts[g].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[3].host.Status(g); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Status after Close: %v, want ErrNoGroup", err)
	}
	if err := c.nodes[3].states.Delete(g); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes[3].parts, g)
	// A group whose voters leave out the host's node is refused.
	other := GroupID{TopicID: [16]byte{0xee}, Partition: 7}
	_, err = Open(c.nodes[1].fs, "/data/other", c.cfg, Options{
		Log:  segment.Options{Logger: quiet()},
		Raft: &RaftConfig{Host: c.nodes[1].host, Group: other, Voters: []uint64{2, 3}},
	})
	if !errors.Is(err, ErrNotAReplica) {
		t.Fatalf("Open of a group without the host's node: %v, want ErrNotAReplica", err)
	}
	if _, err := c.nodes[1].host.Status(other); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("the refused group is on the host: %v", err)
	}
	// A learner of the group is one of its replicas.
	p, err := Open(c.nodes[1].fs, "/data/other", c.cfg, Options{
		Log:  segment.Options{Logger: quiet()},
		Raft: &RaftConfig{Host: c.nodes[1].host, Group: other, Voters: []uint64{2, 3}, Learners: []uint64{1}},
	})
	if err != nil {
		t.Fatalf("Open as a learner: %v", err)
	}
	p.Close()
}
