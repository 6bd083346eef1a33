package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

// steadyProducer produces one-record acks=all batches, a new value per
// attempt, to whichever of parts leads, until stopped; it records the
// offset of every acknowledged value. It never ticks (the test's drive
// loops do).
type steadyProducer struct {
	parts  []*Partition
	prefix string
	stop   chan struct{}
	done   chan struct{}

	mu    sync.Mutex
	acked map[string]int64
	fails int
}

func startProducer(prefix string, parts []*Partition) *steadyProducer {
	sp := &steadyProducer{parts: parts, prefix: prefix, stop: make(chan struct{}), done: make(chan struct{}), acked: map[string]int64{}}
	go sp.run()
	return sp
}

func (sp *steadyProducer) run() {
	defer close(sp.done)
	for i := 0; ; i++ {
		select {
		case <-sp.stop:
			return
		default:
		}
		var lead *Partition
		for _, p := range sp.parts {
			if p.IsLeader() {
				lead = p
				break
			}
		}
		if lead == nil {
			time.Sleep(time.Millisecond)
			continue
		}
		v := fmt.Sprintf("%s%d", sp.prefix, i)
		pd, err := lead.ProduceWith(valueBatch(v), ProduceOptions{Acks: AcksAll})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var res = noResult
			res, err = pd.Wait(ctx)
			cancel()
			if err == nil {
				sp.mu.Lock()
				sp.acked[v] = res.BaseOffset
				sp.mu.Unlock()
				continue
			}
		}
		sp.mu.Lock()
		sp.fails++
		sp.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// ackedCount returns how many values were acknowledged so far.
func (sp *steadyProducer) ackedCount() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.acked)
}

// halt stops the producer and returns what it acknowledged.
func (sp *steadyProducer) halt() map[string]int64 {
	close(sp.stop)
	<-sp.done
	return sp.acked
}

// checkAcked fails unless every acknowledged value is on p exactly once,
// at its offset.
func checkAcked(t *testing.T, p *Partition, acked map[string]int64) {
	t.Helper()
	vals := records(t, p)
	lso := p.LogStartOffset()
	seen := map[string]int{}
	for _, v := range vals {
		seen[v]++
	}
	for v, off := range acked {
		if off < lso {
			continue // removed by retention
		}
		if seen[v] != 1 {
			t.Fatalf("acknowledged %s held %d times", v, seen[v])
		}
		if i := off - lso; i >= int64(len(vals)) || vals[i] != v {
			t.Fatalf("acknowledged %s at offset %d, not found there (%d records from %d)", v, off, len(vals), lso)
		}
	}
}

// leaderOf returns the live replica that leads g in the newest term, or
// nil.
func (c *pcluster) leaderOf(g GroupID) *Partition {
	var best *Partition
	for _, n := range c.up() {
		p := n.parts[g]
		if p.IsLeader() && (best == nil || p.LeaderEpoch() > best.LeaderEpoch()) {
			best = p
		}
	}
	return best
}

// reconfigure runs change on g's leader until raft took it (retrying on
// ErrConfChangePending and while there is no leader), then ticks until
// the leader applied a configuration that satisfies done.
func (c *pcluster) reconfigure(g GroupID, what string, change func(p *Partition) error, done func(voters, learners []uint64) bool) {
	c.t.Helper()
	c.drive(what+" proposed", func() bool {
		p := c.leaderOf(g)
		if p == nil {
			return false
		}
		err := change(p)
		switch {
		case err == nil:
			return true
		case errors.Is(err, ErrConfChangePending), errors.Is(err, ErrNotLeader), errors.Is(err, ErrLeaderNotAvailable):
			return false
		}
		c.t.Fatalf("%s: %v", what, err)
		return false
	})
	c.drive(what+" applied", func() bool {
		p := c.leaderOf(g)
		if p == nil {
			return false
		}
		v, l, err := p.Membership()
		return err == nil && done(v, l)
	})
}

func (c *pcluster) addLearner(g GroupID, id uint64) {
	c.t.Helper()
	c.reconfigure(g, fmt.Sprintf("add learner %d", id), func(p *Partition) error { return p.AddLearner(id) },
		func(_, l []uint64) bool { return slices.Contains(l, id) })
}

func (c *pcluster) promote(g GroupID, id uint64) {
	c.t.Helper()
	// Promote once caught up (what the broker's reassignment does).
	c.drive(fmt.Sprintf("learner %d caught up", id), func() bool {
		p := c.leaderOf(g)
		if p == nil {
			return false
		}
		prog, err := p.Progress()
		if err != nil {
			return false
		}
		for _, pr := range prog {
			if pr.ID == id {
				return !pr.CaughtUp.IsZero()
			}
		}
		return false
	})
	c.reconfigure(g, fmt.Sprintf("promote %d", id), func(p *Partition) error { return p.PromoteLearner(id) },
		func(v, _ []uint64) bool { return slices.Contains(v, id) })
}

// remove removes replica id, moving the leadership away from it first.
func (c *pcluster) remove(g GroupID, id uint64) {
	c.t.Helper()
	c.drive(fmt.Sprintf("leadership away from %d", id), func() bool {
		p := c.leaderOf(g)
		if p == nil {
			return false
		}
		if p.rs.self != id {
			return true
		}
		if err := p.RemoveReplica(id); !errors.Is(err, ErrRemoveLeader) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderNotAvailable) {
			c.t.Fatalf("RemoveReplica of the leader: %v, want ErrRemoveLeader", err)
		}
		v, _, _ := p.Membership()
		for _, to := range v {
			if to != id {
				if err := p.TransferLeadership(to); err != nil && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderNotAvailable) {
					c.t.Fatalf("transfer to %d: %v", to, err)
				}
				break
			}
		}
		return false
	})
	c.reconfigure(g, fmt.Sprintf("remove %d", id), func(p *Partition) error { return p.RemoveReplica(id) },
		func(v, l []uint64) bool { return !slices.Contains(v, id) && !slices.Contains(l, id) })
}

// join starts node id (adding it to the cluster if new) as a replica
// joining the group: its initial voters given, itself a learner.
func (c *pcluster) join(id uint64, initialVoters ...uint64) {
	c.t.Helper()
	if _, ok := c.nodes[id]; !ok {
		c.addNode(id)
	}
	c.joining[id] = []uint64{id}
	c.joinVoters[id] = initialVoters
	c.start(id)
}

// wipe stops node id and gives it an empty disk and state store (a
// broker that lost the replica's data).
func (c *pcluster) wipe(id uint64) {
	c.stop(id)
	c.nodes[id].fs = vfs.NewMem()
	c.nodes[id].states = newCrashStore(nil)
}

func (c *pcluster) membershipOf(id uint64, g GroupID) (voters, learners []uint64) {
	c.t.Helper()
	v, l, err := c.nodes[id].parts[g].Membership()
	if err != nil {
		c.t.Fatal(err)
	}
	return v, l
}

// settleOn ticks until the given nodes have the same log end offset and
// high watermark as g's leader, and applied its commit.
func (c *pcluster) settleOn(g GroupID, ids ...uint64) {
	c.t.Helper()
	c.drive(fmt.Sprintf("nodes %v to agree", ids), func() bool {
		lead := c.leaderOf(g)
		if lead == nil || lead.HighWatermark() != lead.LogEndOffset() {
			return false
		}
		ls, err := lead.rs.host.Status(g)
		if err != nil {
			return false
		}
		for _, id := range ids {
			p := c.nodes[id].parts[g]
			st, err := c.nodes[id].host.Status(g)
			if err != nil || p.LogEndOffset() != lead.LogEndOffset() || p.HighWatermark() != lead.HighWatermark() || st.Applied < ls.Commit {
				return false
			}
		}
		return true
	})
}

// A partition under a steady acks=all producer moves from {1,2,3} to
// {2,3,4}: learner 4 is added, promoted once caught up, the leadership
// leaves 1, 1 is removed. Every acknowledged record is on the new
// replicas once, at its offset; the removed replica, still running, gets
// no more entries and does not disturb the group.
func TestMembershipMove(t *testing.T) {
	c := newPCluster(t, 3, 1, 11)
	c.startAll()
	g := c.groups[0]
	c.drive("node 1 to lead", func() bool {
		if c.leads(1) {
			return true
		}
		if err := c.nodes[1].host.Campaign(g); err != nil {
			t.Fatal(err)
		}
		return false
	})
	c.join(4, 1, 2, 3)
	parts := []*Partition{c.nodes[1].parts[g], c.nodes[2].parts[g], c.nodes[3].parts[g], c.nodes[4].parts[g]}
	sp := startProducer("r", parts)
	c.drive("some records", func() bool { return sp.ackedCount() >= 20 })

	lead := c.leaderOf(g)
	if err := lead.PromoteLearner(4); !errors.Is(err, ErrInvalidConfChange) {
		t.Fatalf("promote a non-replica: %v", err)
	}
	if err := c.nodes[2].parts[g].AddLearner(4); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddLearner on a follower: %v", err)
	}
	c.addLearner(g, 4)
	if err := c.leaderOf(g).AddLearner(4); err != nil {
		t.Fatalf("AddLearner of a learner: %v, want nil", err)
	}
	if err := c.leaderOf(g).TransferLeadership(4); !errors.Is(err, ErrInvalidConfChange) {
		t.Fatalf("transfer to a learner: %v", err)
	}
	c.drive("records while 4 learns", func() bool { return sp.ackedCount() >= 40 })
	c.promote(g, 4)
	c.drive("records with 4 voting", func() bool { return sp.ackedCount() >= 60 })
	c.remove(g, 1)
	if v, l := c.membershipOf(2, g); !slices.Equal(v, []uint64{2, 3, 4}) || len(l) != 0 {
		t.Fatalf("node 2's configuration: voters %v learners %v", v, l)
	}

	// The removed replica still runs: no more entries reach it, it does
	// not lead, and the group's leader and term do not move while the
	// producer goes on for many election timeouts.
	c.drive("the leader to apply its removal", func() bool {
		st, err := c.nodes[1].host.Status(g)
		return err == nil && st.Applied == st.Commit
	})
	removed := c.nodes[1].parts[g]
	leo := removed.LogEndOffset()
	lead = c.leaderOf(g)
	epoch := lead.LeaderEpoch()
	before := sp.ackedCount()
	for range 400 { // 10 election timeouts of the harness's 40 ticks
		c.tick()
		// drive's pace (a tick every 5 ms): at one a millisecond, a
		// loaded machine's workers fell behind the heartbeats and a
		// follower's election timeout moved the leadership.
		time.Sleep(5 * time.Millisecond)
	}
	c.drive("records after the removal", func() bool { return sp.ackedCount() >= before+20 })
	if removed.IsLeader() {
		t.Fatal("the removed replica claims to lead")
	}
	if got := removed.LogEndOffset(); got != leo {
		t.Fatalf("the removed replica's log end moved from %d to %d", leo, got)
	}
	if l := c.leaderOf(g); l != lead || l.LeaderEpoch() != epoch {
		t.Fatalf("the leadership moved from %d (epoch %d) after the removal", lead.rs.self, epoch)
	}
	acked := sp.halt()
	c.stop(1)
	c.settleOn(g, 2, 3, 4)
	for _, id := range []uint64{2, 3, 4} {
		checkAcked(t, c.nodes[id].parts[g], acked)
	}
	if !slices.Equal(records(t, c.nodes[4].parts[g]), records(t, c.nodes[2].parts[g])) {
		t.Fatal("node 4's records differ from node 2's")
	}
	t.Logf("%d records acknowledged, %d attempts failed", len(acked), sp.fails)
}

// Replication factor 3 -> 1, then 1 -> 3 with two new brokers, under a
// producer.
func TestMembershipReplicationFactor(t *testing.T) {
	c := newPCluster(t, 3, 1, 12)
	c.startAll()
	g := c.groups[0]
	c.waitLeader(g)
	parts := []*Partition{c.nodes[1].parts[g], c.nodes[2].parts[g], c.nodes[3].parts[g]}
	sp := startProducer("r", parts)
	c.drive("some records", func() bool { return sp.ackedCount() >= 20 })
	keep := c.leaderOf(g).rs.self
	for _, id := range []uint64{1, 2, 3} {
		if id != keep {
			c.remove(g, id)
		}
	}
	lead := c.leaderOf(g)
	if err := lead.RemoveReplica(keep); !errors.Is(err, ErrRemoveLeader) {
		t.Fatalf("remove the only voter: %v", err)
	}
	if v, l, _ := lead.Membership(); !slices.Equal(v, []uint64{keep}) || len(l) != 0 {
		t.Fatalf("after 3 -> 1: voters %v learners %v", v, l)
	}
	n := sp.ackedCount()
	c.drive("records with one replica", func() bool { return sp.ackedCount() >= n+20 })
	acked := sp.halt()
	for _, id := range []uint64{1, 2, 3} {
		if id != keep {
			c.stop(id)
		}
	}
	// 1 -> 3: two new brokers join, replaying the log (from the group's
	// initial voters) with its two removals.
	c.join(4, 1, 2, 3)
	c.join(5, 1, 2, 3)
	sp = startProducer("s", []*Partition{c.nodes[keep].parts[g], c.nodes[4].parts[g], c.nodes[5].parts[g]})
	for _, id := range []uint64{4, 5} {
		c.addLearner(g, id)
		c.promote(g, id)
	}
	n = sp.ackedCount()
	c.drive("records with three replicas", func() bool { return sp.ackedCount() >= n+20 })
	for v, o := range sp.halt() {
		acked[v] = o
	}
	c.settleOn(g, keep, 4, 5)
	want := []uint64{keep, 4, 5}
	slices.Sort(want)
	for _, id := range want {
		if v, l := c.membershipOf(id, g); !slices.Equal(v, want) || len(l) != 0 {
			t.Fatalf("node %d after 1 -> 3: voters %v learners %v", id, v, l)
		}
		checkAcked(t, c.nodes[id].parts[g], acked)
	}
}

// moveTo456 moves g from {1,2,3} to {4,5,6}: learners 4, 5, 6 (started
// as joiners), each promoted, then 1, 2, 3 removed; then 1, 2, 3 stop.
// between runs after each change (records, retention).
func (c *pcluster) moveTo456(g GroupID, between func(step string)) {
	c.t.Helper()
	for _, id := range []uint64{4, 5, 6} {
		c.join(id, 1, 2, 3)
	}
	for _, id := range []uint64{4, 5, 6} {
		c.addLearner(g, id)
		between(fmt.Sprintf("add %d", id))
	}
	for _, id := range []uint64{4, 5, 6} {
		c.promote(g, id)
		between(fmt.Sprintf("promote %d", id))
	}
	for _, id := range []uint64{1, 2, 3} {
		c.remove(g, id)
		between(fmt.Sprintf("remove %d", id))
	}
	for _, id := range []uint64{1, 2, 3} {
		c.stop(id)
	}
}

// produceN produces n one-record batches v<from>.. to g's leader, acks=all.
func (c *pcluster) produceN(g GroupID, from, n int) {
	c.t.Helper()
	for i := range n {
		for {
			lead := c.leaderOf(g)
			if lead == nil {
				c.tick()
				continue
			}
			if _, err := c.produceWait(lead, valueBatch(fmt.Sprintf("v%d", from+i)), AcksAll); err == nil {
				break
			}
		}
	}
}

// A replica joins a group whose log starts at index 1 after several
// reconfigurations ({1,2,3} moved to {4,5,6}): opened with the group's
// initial voters and itself as a learner, it replays every change and
// ends with the group's configuration. So does node 1, one of the first
// replicas, coming back with an empty disk.
func TestMembershipJoinReplaysLog(t *testing.T) {
	c := newPCluster(t, 3, 1, 13)
	c.startAll()
	g := c.groups[0]
	c.waitLeader(g)
	next := 0
	c.moveTo456(g, func(string) { c.produceN(g, next, 3); next += 3 })
	if first := c.leaderOf(g).log.FirstIndex(); first != 1 {
		t.Fatalf("the leader's log starts at %d", first)
	}
	c.join(7, 1, 2, 3)
	c.addLearner(g, 7)
	c.wipe(1)
	c.join(1, 1, 2, 3)
	c.addLearner(g, 1)
	c.produceN(g, next, 3)
	c.settleOn(g, 4, 5, 6, 7, 1)
	want := records(t, c.leaderOf(g))
	for _, id := range []uint64{4, 5, 6, 7, 1} {
		v, l := c.membershipOf(id, g)
		if !slices.Equal(v, []uint64{4, 5, 6}) || !slices.Equal(l, []uint64{1, 7}) {
			t.Fatalf("node %d: voters %v learners %v, want [4 5 6] [1 7]", id, v, l)
		}
		if got := records(t, c.nodes[id].parts[g]); !slices.Equal(got, want) {
			t.Fatalf("node %d: records %v, want %v", id, got, want)
		}
	}
	// The joiners restart from what they saved.
	c.stop(7)
	c.start(7)
	c.produceN(g, next+3, 1)
	c.settleOn(g, 7)
	if v, l := c.membershipOf(7, g); !slices.Equal(v, []uint64{4, 5, 6}) || !slices.Equal(l, []uint64{1, 7}) {
		t.Fatalf("node 7 after a restart: voters %v learners %v", v, l)
	}
}

// The same join when the leader's retention compacted the log: the
// joiner gets a snapshot, whose ConfState is the leader's current one.
// When retention ran before or during the move, configuration changes
// that ConfState already holds are still in the log the joiner takes
// after the snapshot: replayed over it, adding learners 4, 5 and 6
// again would demote the voters 4, 5 and 6 and leave none (etcd raft
// panics: "removed all voters"); the snapshot's conf index says which
// changes it holds, and the joiner skips them.
func TestMembershipJoinBySnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  string // retention runs after this step of the move
	}{
		{"after the move", "end"},
		{"in the move", "add 4"},
		{"before the move", "start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newPCluster(t, 3, 1, 14)
			c.cfg.Log.SegmentBytes = 1024
			c.cfg.Log.RetentionBytes = 2048
			c.startAll()
			g := c.groups[0]
			c.waitLeader(g)
			next := 0
			retention := func() {
				c.produceN(g, next, 60)
				next += 60
				c.settleOn(g, c.members(g)...)
				for _, n := range c.up() {
					if _, err := n.parts[g].DeleteOldSegments(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.cut == "start" {
				retention()
			}
			c.moveTo456(g, func(step string) {
				c.produceN(g, next, 2)
				next += 2
				if step == tc.cut {
					// Retention right after the first learner was
					// added; the rest of the move stays in the
					// retained log.
					retention()
				}
			})
			if tc.cut == "end" {
				retention()
			}
			lead := c.leaderOf(g)
			if lead.log.FirstIndex() <= 1 {
				t.Fatalf("retention left the leader's log at %d", lead.log.FirstIndex())
			}
			c.join(7, 1, 2, 3)
			c.addLearner(g, 7)
			c.produceN(g, next, 3)
			c.settleOn(g, 4, 5, 6, 7)
			if c.nodes[7].parts[g].LogStartOffset() != lead.LogStartOffset() {
				t.Fatalf("node 7 starts at %d, the leader at %d", c.nodes[7].parts[g].LogStartOffset(), lead.LogStartOffset())
			}
			want := records(t, lead)
			for _, id := range []uint64{4, 5, 6, 7} {
				v, l := c.membershipOf(id, g)
				if !slices.Equal(v, []uint64{4, 5, 6}) || !slices.Equal(l, []uint64{7}) {
					t.Fatalf("node %d: voters %v learners %v, want [4 5 6] [7]", id, v, l)
				}
				if got := records(t, c.nodes[id].parts[g]); !slices.Equal(got, want) {
					t.Fatalf("node %d: records %v, want %v", id, got, want)
				}
			}
			// Promoted, the joiner votes and can lead.
			c.promote(g, 7)
			c.remove(g, c.leaderOf(g).rs.self)
			c.produceN(g, next+3, 2)
		})
	}
}

// members returns g's replicas as its leader last applied them.
func (c *pcluster) members(g GroupID) []uint64 {
	c.t.Helper()
	var v, l []uint64
	c.drive("a leader's membership", func() bool {
		p := c.leaderOf(g)
		if p == nil {
			return false
		}
		var err error
		v, l, err = p.Membership()
		return err == nil
	})
	return append(v, l...)
}

// A second change while one is pending is refused, not silently dropped
// by raft: two proposals in one worker pass.
func TestMembershipPendingRefused(t *testing.T) {
	c := newPCluster(t, 3, 1, 15)
	c.startAll()
	g := c.groups[0]
	lead := c.waitLeader(g)
	c.produceN(g, 0, 1)
	h := lead.rs.host
	var first, second error
	err := h.call(g, true, func(gr *group) error {
		first = h.proposeSingleChangeIn(gr, raftpb.ConfChangeAddLearnerNode, 4)
		second = h.proposeSingleChangeIn(gr, raftpb.ConfChangeAddLearnerNode, 5)
		return nil
	})
	if err != nil || first != nil || !errors.Is(second, ErrConfChangePending) {
		t.Fatalf("call %v, first %v, second %v (want nil, nil, ErrConfChangePending)", err, first, second)
	}
	// Later it goes through.
	c.addLearner(g, 5)
	v, l, _ := c.leaderOf(g).Membership()
	if !slices.Equal(v, []uint64{1, 2, 3}) || !slices.Equal(l, []uint64{4, 5}) {
		t.Fatalf("voters %v learners %v", v, l)
	}
}

// Open without Options.Raft fails: every partition is a raft group. A
// one-voter group's leader has no replica to hand its leadership to.
func TestOpenWithoutRaft(t *testing.T) {
	fs := vfs.NewMem()
	if p, err := Open(fs, "/p", DefaultTopicConfig(), Options{Log: segment.Options{Logger: quiet()}}); !errors.Is(err, ErrNoRaft) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("Open without Options.Raft: %v, want ErrNoRaft", err)
	}
	p, err := openVoter(t, fs, "/p", DefaultTopicConfig(), Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if v, l, err := p.Membership(); err != nil || !slices.Equal(v, []uint64{1}) || len(l) != 0 {
		t.Fatalf("Membership: voters %v learners %v, %v", v, l, err)
	}
	if _, err := p.TransferLeadershipAway(); !errors.Is(err, ErrNoTransferTarget) {
		t.Fatalf("TransferLeadershipAway: %v, want ErrNoTransferTarget", err)
	}
	if err := p.TransferLeadership(2); !errors.Is(err, ErrInvalidConfChange) {
		t.Fatalf("TransferLeadership to a replica that is not a voter: %v", err)
	}
}

// Node 1, one of the first replicas {1, 2, 3}, was at one time the
// group's only voter (3 -> 1), then the partition moved to {4}. Back with
// an empty disk, opened with the initial voters, its replay would remove
// every voter of its view: the group leaves its host with an error
// instead of etcd raft panicking the broker. Opened with the current
// configuration instead, after the leader's retention compacted the log,
// it joins by snapshot.
func TestMembershipRejoinNeedsSnapshot(t *testing.T) {
	c := newPCluster(t, 3, 1, 16)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.RetentionBytes = 2048
	c.startAll()
	g := c.groups[0]
	c.drive("node 1 to lead", func() bool {
		if c.leads(1) {
			return true
		}
		if err := c.nodes[1].host.Campaign(g); err != nil {
			t.Fatal(err)
		}
		return false
	})
	c.produceN(g, 0, 3)
	c.remove(g, 2)
	c.remove(g, 3)
	c.join(4, 1, 2, 3)
	c.addLearner(g, 4)
	c.promote(g, 4)
	c.remove(g, 1)
	for _, id := range []uint64{2, 3} {
		c.stop(id)
	}
	c.produceN(g, 3, 3)

	c.wipe(1)
	c.join(1, 1, 2, 3)
	c.addLearner(g, 1)
	c.drive("node 1's group to fail", func() bool {
		_, err := c.nodes[1].host.Status(g)
		return errors.Is(err, ErrNoGroup)
	})
	if c.nodes[1].parts[g].IsLeader() {
		t.Fatal("the failed replica leads")
	}

	// Its initial voters were itself alone: Open refuses at once.
	h, err := NewHost(HostConfig{NodeID: 9, Transport: c.net.sender(9), HardState: NewMemStateStore(), Logger: quiet(), TickInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if p, err := Open(vfs.NewMem(), "/x", c.cfg, Options{Log: segment.Options{Logger: quiet()}, Raft: &RaftConfig{Host: h, Group: g, Voters: []uint64{9}, Learners: []uint64{9}}}); err == nil {
		p.Close()
		t.Fatal("a joiner whose initial voters are itself alone opened")
	}

	// The remedy: the current configuration, and a snapshot. The failed
	// learner is removed first: a replica that lost its log while the
	// leader tracks its match would be sent a commit index above its
	// empty log (etcd raft panics on that: "tocommit(14) is out of
	// range").
	c.remove(g, 1)
	c.produceN(g, 6, 60)
	c.settleOn(g, 4)
	if _, err := c.leaderOf(g).DeleteOldSegments(); err != nil {
		t.Fatal(err)
	}
	if c.leaderOf(g).log.FirstIndex() <= 1 {
		t.Fatal("retention did not compact the leader's log")
	}
	voters, _, err := c.leaderOf(g).Membership()
	if err != nil {
		t.Fatal(err)
	}
	c.wipe(1)
	c.join(1, voters...)
	c.addLearner(g, 1)
	c.produceN(g, 66, 2)
	c.settleOn(g, 4, 1)
	if v, l := c.membershipOf(1, g); !slices.Equal(v, []uint64{4}) || !slices.Equal(l, []uint64{1}) {
		t.Fatalf("node 1: voters %v learners %v", v, l)
	}
	if !slices.Equal(records(t, c.nodes[1].parts[g]), records(t, c.leaderOf(g))) {
		t.Fatal("node 1's records differ from the leader's")
	}
}

// A leader that applies its own removal (a raw ConfChange: RemoveReplica
// refuses it) steps down at once (StepDownOnRemoval): it no longer
// claims to lead, the others elect a leader of the new configuration,
// and commits go on without it.
func TestMembershipRemovedLeaderStepsDown(t *testing.T) {
	c := newPCluster(t, 3, 1, 17)
	c.startAll()
	g := c.groups[0]
	lead := c.waitLeader(g)
	c.produceN(g, 0, 3)
	self := lead.rs.self
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode, NodeID: self}}}
	if err := lead.rs.host.ProposeConfChange(g, cc); err != nil {
		t.Fatal(err)
	}
	c.drive("the removed leader to step down", func() bool { return !lead.IsLeader() })
	var next *Partition
	c.drive("a leader of the new configuration", func() bool {
		next = c.leaderOf(g)
		if next == nil || next == lead {
			return false
		}
		v, _, err := next.Membership()
		return err == nil && !slices.Contains(v, self)
	})
	c.produceN(g, 3, 3)
	for range 200 {
		c.tick()
		time.Sleep(time.Millisecond)
	}
	if lead.IsLeader() {
		t.Fatal("the removed replica leads again")
	}
	if l := c.leaderOf(g); l != next {
		t.Fatalf("the leadership moved again, from %d", next.rs.self)
	}
}

// joinExact starts node id (adding it to the cluster if new) as a joining
// replica given the group's initial voters exactly (RaftConfig.Joining),
// as the broker opens one.
func (c *pcluster) joinExact(id uint64, initialVoters ...uint64) {
	c.t.Helper()
	if _, ok := c.nodes[id]; !ok {
		c.addNode(id)
	}
	delete(c.joining, id)
	c.joinVoters[id] = initialVoters
	c.exactJoin[id] = true
	c.start(id)
}

// The history of TestMembershipRejoinNeedsSnapshot (node 1, one of the
// first replicas, was once the only voter; the partition then moved to
// {4}), but node 1 rejoins as the broker opens a joiner: the initial
// voters exactly and Joining. Its replay passes through the
// configuration in which it alone was a voter without standing for
// election (it does not tick until it caught up), and it ends a learner
// of {4} with the leader's records. Without the joining guard it elects
// itself in that old configuration.
func TestMembershipRejoinReplaysExactHistory(t *testing.T) {
	c := newPCluster(t, 3, 1, 17)
	c.startAll()
	g := c.groups[0]
	c.drive("node 1 to lead", func() bool {
		if c.leads(1) {
			return true
		}
		if err := c.nodes[1].host.Campaign(g); err != nil {
			t.Fatal(err)
		}
		return false
	})
	c.produceN(g, 0, 3)
	c.remove(g, 2)
	c.remove(g, 3)
	// Written while 1 was the only voter: over raft's 1 MiB per append,
	// so a replica replaying the log gets them in several appends and
	// stops, between two, in the configuration where 1 alone votes.
	big := strings.Repeat("x", 256<<10)
	for i := range 12 {
		if _, err := c.produceWait(c.leaderOf(g), valueBatch(fmt.Sprintf("big%d-%s", i, big)), AcksAll); err != nil {
			t.Fatal(err)
		}
	}
	c.join(4, 1, 2, 3)
	c.addLearner(g, 4)
	c.promote(g, 4)
	for _, id := range []uint64{2, 3} {
		c.stop(id) // removed: nothing of theirs is needed
	}
	c.settleOn(g, 1, 4)
	c.drive("node 4 to lead", func() bool {
		if c.leads(4) {
			return true
		}
		var nl *NotLeaderError
		if err := c.nodes[1].parts[g].TransferLeadership(4); err != nil && !errors.As(err, &nl) {
			t.Fatal(err)
		}
		return false
	})
	c.remove(g, 1)
	c.produceN(g, 6, 3)

	c.wipe(1)
	c.joinExact(1, 1, 2, 3)
	c.addLearner(g, 1)
	// Cut off from the leader as soon as its replay reached the
	// configuration where it was the only voter: a replica that ticked
	// now would elect itself there.
	c.drive("node 1's replay to reach its old sole-voter configuration", func() bool {
		v, _, err := c.nodes[1].parts[g].Membership()
		return err == nil && slices.Equal(v, []uint64{1})
	})
	c.net.partition([]uint64{1}, []uint64{4})
	for range 100 {
		c.tick()
	}
	if c.nodes[1].parts[g].IsLeader() {
		t.Fatal("the joining replica elected itself in an old configuration of its replay")
	}
	c.net.heal()
	c.produceN(g, 9, 3)
	c.settleOn(g, 4, 1)
	if v, l := c.membershipOf(1, g); !slices.Equal(v, []uint64{4}) || !slices.Equal(l, []uint64{1}) {
		t.Fatalf("node 1: voters %v learners %v, want [4] [1]", v, l)
	}
	if !slices.Equal(records(t, c.nodes[1].parts[g]), records(t, c.leaderOf(g))) {
		t.Fatal("node 1's records differ from the leader's")
	}
	if _, err := c.nodes[1].host.Status(g); err != nil {
		t.Fatalf("node 1's group: %v", err)
	}
	// Caught up, it is an ordinary learner; promoted, it can lead.
	c.promote(g, 1)
	c.produceN(g, 12, 3)
	c.settleOn(g, 4, 1)
}

// A replica that rejoins with an empty log (its broker deleted the data
// once it was removed, then the partition moved back) grants no vote
// until it caught up. The chaos runner's no-leader-after-heal
// (tools/chaos/FINDINGS.md): node 1, cut off, misses the removal of node
// 3 that node 2, leading a newer term, commits with node 3's
// acknowledgement; node 3 is wiped and opened again as a joiner whose
// initial configuration is {1,2,3}; node 2 is cut off in turn. Node 1's
// view is still {1,2,3}, and the joiner's empty log is no newer than
// node 1's: had it voted, node 1 would lead without the committed
// removal, and node 2, holding it, could never follow that leader
// (etcd raft ignores an append below its commit), so a later
// configuration {2,3} would elect no one.
func TestMembershipRejoinerGrantsNoVote(t *testing.T) {
	c := newPCluster(t, 3, 1, 18)
	c.startAll()
	g := c.groups[0]
	c.campaign(1)
	c.produceN(g, 0, 3)
	c.settleOn(g, 1, 2, 3)

	c.net.partition([]uint64{1}, []uint64{2, 3})
	c.campaign(2)
	c.remove(g, 3)
	if v, _ := c.membershipOf(1, g); !slices.Contains(v, 3) {
		t.Fatalf("node 1 learned of the removal while cut off: voters %v", v)
	}
	c.wipe(3)
	// The broker opens the joiner at the newest leader epoch its metadata
	// holds: node 2's, which reported the removal (RaftConfig.MinTerm).
	c.minTerm[3] = uint64(c.nodes[2].parts[g].LeaderEpoch())
	c.joinExact(3, 1, 2, 3)
	c.net.heal()
	c.net.partition([]uint64{2}, []uint64{1, 3})
	// Node 1 may still think it leads term 1 until it hears of term 2
	// (from the joiner, which starts there); no election of a newer term
	// may succeed without node 2.
	p1, p3 := c.nodes[1].parts[g], c.nodes[3].parts[g]
	hw := p1.HighWatermark()
	for range 300 {
		c.tick()
		time.Sleep(time.Millisecond)
		if (p1.IsLeader() && p1.LeaderEpoch() > 1) || p3.IsLeader() {
			t.Fatalf("a leader elected with the joiner's vote, without the committed removal of node 3: node 1 leads %v epoch %d, node 3 leads %v",
				p1.IsLeader(), p1.LeaderEpoch(), p3.IsLeader())
		}
	}
	if p1.IsLeader() {
		t.Fatalf("node 1 still leads epoch %d: the joiner followed a deposed leader", p1.LeaderEpoch())
	}
	if got := p1.HighWatermark(); got != hw {
		t.Fatalf("node 1's high watermark moved from %d to %d without node 2", hw, got)
	}
	c.net.heal()
	c.drive("a leader of {1,2}", func() bool {
		p := c.leaderOf(g)
		if p == nil {
			return false
		}
		v, _, err := p.Membership()
		return err == nil && slices.Equal(v, []uint64{1, 2})
	})
	c.addLearner(g, 3)
	c.produceN(g, 3, 3)
	c.settleOn(g, 1, 2, 3)
	c.promote(g, 3)
	c.remove(g, 1)
	c.produceN(g, 6, 3)
	c.settleOn(g, 2, 3)
	for _, id := range []uint64{2, 3} {
		if v, _ := c.membershipOf(id, g); !slices.Equal(v, []uint64{2, 3}) {
			t.Fatalf("node %d: voters %v, want [2 3]", id, v)
		}
	}
}
