package replica

import (
	"context"
	"errors"
	"testing"
	"time"
)

const leaseTestTick = 100 * time.Millisecond

// newLeaseCluster is a pcluster whose hosts run the defaults' timing
// (10 election ticks of 100 ms, a 1 s liveness timeout) on a clock that
// moves only with the test's ticks, so the read lease (665 ms) is in
// ticks too.
func newLeaseCluster(t *testing.T, nodes int) (*pcluster, *throttleClock) {
	clk := &throttleClock{now: time.Unix(1000, 0)} // raft_throttle_test.go
	c := newPCluster(t, nodes, 1, 1)
	c.hostCfg = func(hc *HostConfig) {
		hc.ElectionTicks, hc.LeaseTick, hc.Now = 10, leaseTestTick, clk.Now
	}
	c.startAll()
	return c, clk
}

// leaseLeader makes node 1 the leader of the cluster's group and waits
// until it holds a read lease.
func (c *pcluster) leaseLeader(clk *throttleClock) *Partition {
	c.t.Helper()
	if err := c.nodes[1].host.Campaign(c.groups[0]); err != nil {
		c.t.Fatal(err)
	}
	p := c.waitLeader(c.groups[0])
	c.awaitLease(clk, p)
	return p
}

// leaseStep is one tick of the lease clock and of every host.
func (c *pcluster) leaseStep(clk *throttleClock) {
	clk.advance(leaseTestTick)
	c.tick()
	time.Sleep(2 * time.Millisecond) // let the workers take it (a check never depends on it)
}

// awaitLease ticks until p holds a read lease.
func (c *pcluster) awaitLease(clk *throttleClock, p *Partition) {
	c.t.Helper()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := p.AwaitReadLease(ctx)
		cancel()
		if err == nil {
			return
		}
		if i > 200 {
			c.t.Fatalf("no read lease: %v", err)
		}
		c.leaseStep(clk)
	}
}

func TestReadLeaseLength(t *testing.T) {
	for _, tc := range []struct {
		cfg  HostConfig
		want time.Duration
	}{
		{HostConfig{ElectionTicks: 10, TickInterval: 100 * time.Millisecond, LivenessTimeout: time.Second}, 665 * time.Millisecond},
		// The liveness timeout is the shorter.
		{HostConfig{ElectionTicks: 20, TickInterval: 100 * time.Millisecond, LivenessTimeout: time.Second}, 855 * time.Millisecond},
		{HostConfig{ElectionTicks: 10, TickInterval: -1, LeaseTick: 100 * time.Millisecond, LivenessTimeout: time.Second}, 665 * time.Millisecond},
		{HostConfig{ElectionTicks: 10, TickInterval: -1, LivenessTimeout: time.Second}, 0},
		{HostConfig{ElectionTicks: 3, TickInterval: 100 * time.Millisecond, LivenessTimeout: time.Second}, 0},
	} {
		if got := tc.cfg.ReadLease(); got != tc.want {
			t.Errorf("%+v: lease %v, want %v", tc.cfg, got, tc.want)
		}
	}
	bad := HostConfig{NodeID: 1, Transport: chaosSender{}, HardState: NewMemStateStore(), ElectionTicks: 3, TickInterval: 100 * time.Millisecond}
	bad.EnsureDefaults()
	if err := bad.Validate(); err == nil {
		t.Error("3 election ticks of 100 ms accepted: no read lease is left")
	}
}

// A leader cut off from its followers stops serving reads before the
// other side can elect a leader and commit a write: at every tick, if
// the new leader committed, the old one's lease check refuses. It
// refuses while it still believes it leads (CheckQuorum has not deposed
// it), and a lease holds again after the heal.
func TestReadLeaseCutOff(t *testing.T) {
	c, clk := newLeaseCluster(t, 3)
	g := c.groups[0]
	old := c.leaseLeader(clk)
	if _, err := c.produceWait(old, valueBatch("a"), AcksAll); err != nil {
		t.Fatal(err)
	}
	c.awaitLease(clk, old)
	hw := old.HighWatermark()

	// The cut, as the network makes it: the transports notice only after
	// their liveness timeout (1 s: ten ticks), when the test reports it.
	c.net.mu.Lock()
	for _, o := range []uint64{2, 3} {
		c.net.cut[[2]uint64{1, o}], c.net.cut[[2]uint64{o, 1}] = true, true
	}
	c.net.mu.Unlock()
	refusedAt, committedAt := -1, -1
	var pending *Pending
	for tick := 1; tick <= 60 && (refusedAt < 0 || committedAt < 0); tick++ {
		c.leaseStep(clk)
		if tick == 10 {
			c.net.liveness(1, 2, true)
			c.net.liveness(1, 3, true)
		}
		// A new leader commits: its high watermark passes the old one.
		for _, id := range []uint64{2, 3} {
			p := c.nodes[id].parts[g]
			if p.IsLeader() && pending == nil {
				pd, err := p.ProduceWith(valueBatch("b"), ProduceOptions{Acks: AcksAll})
				if err == nil {
					pending = pd
				}
			}
			if committedAt < 0 && p.HighWatermark() > hw {
				committedAt = tick
			}
		}
		err := old.CheckReadLease()
		if err == nil && committedAt >= 0 {
			t.Fatalf("tick %d: the new side committed (at tick %d) and the old leader still holds a read lease", tick, committedAt)
		}
		if err != nil && refusedAt < 0 {
			refusedAt = tick
			var nl *NotLeaderError
			if !errors.As(err, &nl) || !nl.NoLease || !errors.Is(err, ErrNotLeader) {
				t.Fatalf("tick %d: refusal %v, want a NotLeaderError with NoLease", tick, err)
			}
			if !old.IsLeader() {
				t.Fatalf("tick %d: the old leader was deposed before its lease expired; the test shows nothing", tick)
			}
		}
	}
	if refusedAt < 0 || committedAt < 0 {
		t.Fatalf("refused at tick %d, new side committed at tick %d", refusedAt, committedAt)
	}
	t.Logf("the old leader refused reads from tick %d, the new side committed at tick %d", refusedAt, committedAt)

	c.net.heal()
	var lead *Partition
	for i := 0; lead == nil || lead == old; i++ {
		if i > 500 {
			t.Fatal("no single leader after the heal")
		}
		c.leaseStep(clk)
		lead = c.leader(g)
	}
	if old.CheckReadLease() == nil {
		t.Fatal("the deposed leader holds a read lease")
	}
	c.awaitLease(clk, lead)
}

// A leader with a leadership transfer pending serves no read on its
// lease (the target's campaign ignores CheckQuorum's lease), nor for a
// lease length after; then it renews.
func TestReadLeaseTransferPending(t *testing.T) {
	c, clk := newLeaseCluster(t, 3)
	p := c.leaseLeader(clk)
	// Node 3 cannot hear the leader, so the transfer stays pending.
	c.net.mu.Lock()
	c.net.cut[[2]uint64{1, 3}] = true
	c.net.mu.Unlock()
	if err := p.TransferLeadership(3); err != nil {
		t.Fatal(err)
	}
	// The clock has not moved: only the transfer can refuse.
	if err := p.CheckReadLease(); err == nil {
		t.Fatal("a leader with a transfer pending holds a read lease")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.AwaitReadLease(ctx); err == nil {
		t.Fatal("a leader with a transfer pending renewed its read lease")
	}
	// Raft abandons the transfer after an election timeout; a lease
	// length later the leader renews (node 2 acknowledges).
	c.awaitLease(clk, p)
	if !p.IsLeader() {
		t.Fatal("leadership moved; the test wanted the transfer abandoned")
	}
}

// A quiesced leader's lease runs out with nothing renewing it; the next
// read renews it on demand, without a tick.
func TestReadLeaseQuiescedRenewsOnDemand(t *testing.T) {
	c, clk := newLeaseCluster(t, 3)
	g := c.groups[0]
	p := c.leaseLeader(clk)
	for i := 0; c.nodes[1].host.Stats().Quiesced == 0; i++ {
		if i > 200 {
			t.Fatal("the leader does not quiesce")
		}
		c.leaseStep(clk)
	}
	clk.advance(time.Second) // no tick: the group sleeps
	if c.nodes[1].host.LeaseValid(g) {
		t.Fatal("a lease outlived its length")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.AwaitReadLease(ctx); err != nil {
		t.Fatalf("a quiesced leader did not renew on demand: %v", err)
	}
}

// A group of one voter needs no lease; a follower never holds one.
func TestReadLeaseSingleVoterAndFollower(t *testing.T) {
	c := newPCluster(t, 1, 1, 1) // no LeaseTick: no lease for replicated groups
	c.startAll()
	g := c.groups[0]
	p := c.waitLeader(g)
	if err := p.CheckReadLease(); err != nil {
		t.Fatalf("a single voter: %v", err)
	}

	c3, clk := newLeaseCluster(t, 3)
	c3.leaseLeader(clk)
	err := c3.nodes[2].parts[g].CheckReadLease()
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.NoLease || nl.Leader != 1 {
		t.Fatalf("a follower: %v, want NotLeaderError naming leader 1", err)
	}
}
