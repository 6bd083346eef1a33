package replica

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// throttleClock is a Throttle's clock in tests.
type throttleClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *throttleClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *throttleClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// throttleRig is a Throttle without its goroutine: the test pumps it on
// a fake clock and records what it sends and delivers.
type throttleRig struct {
	t        *Throttle
	clock    *throttleClock
	sent     []GroupMessage
	sentAt   []time.Time
	got      []GroupMessage
	snapFail [][2]uint64
}

func newThrottleRig() *throttleRig {
	r := &throttleRig{t: NewThrottle(), clock: &throttleClock{now: time.Unix(1000, 0)}}
	r.t.now = r.clock.Now
	r.t.sendFn = func(ms []GroupMessage) {
		for _, m := range ms {
			r.sent = append(r.sent, m)
			r.sentAt = append(r.sentAt, r.clock.Now())
		}
	}
	r.t.deliverFn = func(ms []GroupMessage) { r.got = append(r.got, ms...) }
	r.t.snapFailFn = func(g GroupID, to uint64) { r.snapFail = append(r.snapFail, [2]uint64{uint64(g.Partition), to}) }
	return r
}

// app is a leader's append from 1 to `to` of one entry of size bytes,
// after entry index.
func app(g GroupID, to, index uint64, size int) GroupMessage {
	return GroupMessage{Group: g, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: to, Index: index,
		Entries: []raftpb.Entry{{Index: index + 1, Data: make([]byte, size)}}}}
}

func msgOf(g GroupID, typ raftpb.MessageType, to uint64) GroupMessage {
	return GroupMessage{Group: g, Msg: raftpb.Message{Type: typ, From: 1, To: to}}
}

// The leader lane paces the appends to the listed replica at its rate,
// in order, and lets everything else through at once.
func TestThrottleLeaderPacing(t *testing.T) {
	r := newThrottleRig()
	g, other := GroupID{Partition: 1}, GroupID{Partition: 2}
	const rate = 1 << 20 // 1 MiB/s: burst 102,400 bytes
	r.t.SetRates(rate, 0)
	r.t.SetLeaderThrottled(map[GroupID][]uint64{g: {4}})

	// Unlisted: another replica, another group, heartbeats, votes,
	// responses.
	r.t.send([]GroupMessage{app(g, 2, 0, 1<<20), app(other, 4, 0, 1<<20), msgOf(g, raftpb.MsgHeartbeat, 4), msgOf(g, raftpb.MsgVote, 4), msgOf(g, raftpb.MsgAppResp, 4)})
	if len(r.sent) != 5 {
		t.Fatalf("%d of 5 unthrottled messages went", len(r.sent))
	}
	r.sent, r.sentAt = nil, nil

	// 20 appends of 64 KiB to replica 4: the first goes (the bucket
	// starts full), the others wait for the rate.
	const size = 64 << 10
	var msgs []GroupMessage
	for i := range 20 {
		msgs = append(msgs, app(g, 4, uint64(i), size))
	}
	start := r.clock.Now()
	r.t.send(msgs[:10])
	r.t.send([]GroupMessage{msgOf(g, raftpb.MsgHeartbeat, 4)}) // passes the queue
	r.t.send(msgs[10:])
	if len(r.sent) != 2 || r.sent[0].Msg.Index != 0 || r.sent[1].Msg.Type != raftpb.MsgHeartbeat {
		t.Fatalf("sent at once: %v", indexes(r.sent))
	}
	st := r.t.Stats()
	if st.LeaderDelayedMsgs != 19 || st.LeaderDelayedBytes != 19*size || st.LeaderQueuedBytes != 19*size {
		t.Fatalf("stats %+v", st)
	}
	for r.t.Stats().LeaderQueuedBytes > 0 {
		if wait := r.t.pump(); wait > 0 {
			r.clock.advance(wait)
		}
	}
	r.t.pump()
	var apps []GroupMessage
	var at []time.Time
	for i, m := range r.sent {
		if m.Msg.Type == raftpb.MsgApp {
			apps, at = append(apps, m), append(at, r.sentAt[i])
		}
	}
	if got := indexes(apps); !slices.Equal(got, seq(0, 20)) {
		t.Fatalf("appends in order %v", got)
	}
	// Each left once the bucket, refilled at the rate after its first
	// 102,400 bytes, covered it: no sooner, and all of them in
	// (20*64 KiB - burst)/rate.
	burst := int64(rate / 10)
	for i := 1; i < 20; i++ {
		earliest := time.Duration(float64(int64(i+1)*size-burst) / rate * float64(time.Second))
		if d := at[i].Sub(start); d < earliest-time.Millisecond || d > earliest+2*time.Millisecond {
			t.Fatalf("append %d left after %v, want %v", i, d, earliest)
		}
	}
	if st := r.t.Stats(); st.LeaderQueuedBytes != 0 || st.LeaderDroppedBytes != 0 {
		t.Fatalf("stats %+v", st)
	}

	// A message larger than the burst goes with a full bucket and leaves
	// it in debt, which the next one waits out.
	r.clock.advance(time.Second)
	r.t.pump()
	r.sent, r.sentAt = nil, nil
	start = r.clock.Now()
	r.t.send([]GroupMessage{app(g, 4, 100, 1<<20), app(g, 4, 101, 1)})
	for len(r.sent) < 2 {
		r.clock.advance(r.t.pump())
	}
	if d := r.sentAt[1].Sub(start); d < 900*time.Millisecond || d > time.Second {
		t.Fatalf("the append after 1 MiB left after %v, want about (1 MiB - burst)/rate", d)
	}

	// Rates off: what is queued goes at the next pump.
	r.sent = nil
	r.t.send([]GroupMessage{app(g, 4, 200, 1<<20), app(g, 4, 201, 1<<20)})
	r.t.SetRates(0, 0)
	r.t.pump()
	if got := indexes(r.sent); len(got) != 2 {
		t.Fatalf("after the rate was lifted: %v", got)
	}
}

// A probe repeated while the first copy waits replaces it in place; the
// follower lane paces the appends of listed groups only.
func TestThrottleResendAndFollower(t *testing.T) {
	r := newThrottleRig()
	g, other := GroupID{Partition: 1}, GroupID{Partition: 2}
	r.t.SetRates(1<<20, 1<<20)
	r.t.SetLeaderThrottled(map[GroupID][]uint64{g: {4}})
	r.t.send([]GroupMessage{app(g, 4, 0, 100<<10)}) // empties the bucket
	r.t.send([]GroupMessage{app(g, 4, 5, 64<<10), app(g, 4, 9, 1)})
	r.t.send([]GroupMessage{app(g, 4, 5, 80<<10)}) // raft's probe again, more entries
	st := r.t.Stats()
	if st.LeaderQueuedBytes != 80<<10+1 || st.LeaderDelayedMsgs != 2 {
		t.Fatalf("stats %+v", st)
	}
	for r.t.Stats().LeaderQueuedBytes > 0 {
		r.clock.advance(r.t.pump())
	}
	if got := indexes(r.sent); !slices.Equal(got, []uint64{0, 5, 9}) || len(r.sent[1].Msg.Entries[0].Data) != 80<<10 {
		t.Fatalf("sent %v", got)
	}

	r.t.SetFollowerThrottled(map[GroupID]bool{g: true, other: false})
	in := []GroupMessage{app(g, 2, 0, 1<<20), app(g, 2, 1, 10), app(other, 2, 0, 10), msgOf(g, raftpb.MsgHeartbeat, 2), msgOf(g, raftpb.MsgSnap, 2)}
	r.t.receive(in)
	if len(r.got) != 4 || r.t.Stats().FollowerQueuedBytes != 10 {
		t.Fatalf("delivered at once %d, stats %+v", len(r.got), r.t.Stats())
	}
	r.clock.advance(r.t.pump())
	r.t.pump()
	if len(r.got) != 5 || r.got[4].Msg.Index != 1 || r.t.Stats().FollowerDelayedBytes != 10 {
		t.Fatalf("delivered %d, stats %+v", len(r.got), r.t.Stats())
	}
}

// Over 64 MiB queued, messages are dropped; a dropped snapshot is
// reported failed, so raft sends another.
func TestThrottleQueueBound(t *testing.T) {
	r := newThrottleRig()
	g := GroupID{Partition: 3}
	r.t.SetRates(1, 0) // a byte a second: nothing leaves
	r.t.SetLeaderThrottled(map[GroupID][]uint64{g: {4}})
	data := make([]byte, 1<<20)
	for i := range 70 {
		m := app(g, 4, uint64(i), 0)
		m.Msg.Entries[0].Data = data
		r.t.send([]GroupMessage{m})
	}
	snap := msgOf(g, raftpb.MsgSnap, 4)
	snap.Msg.Snapshot = &raftpb.Snapshot{Data: data}
	r.t.send([]GroupMessage{snap})
	st := r.t.Stats()
	if st.LeaderQueuedBytes > throttleQueueBytes || st.LeaderDroppedBytes != 71<<20-st.LeaderQueuedBytes-int64(len(r.sent))<<20 {
		t.Fatalf("stats %+v, %d sent", st, len(r.sent))
	}
	if len(r.snapFail) != 1 || r.snapFail[0] != [2]uint64{3, 4} {
		t.Fatalf("snapshot failures reported %v", r.snapFail)
	}
}

func indexes(ms []GroupMessage) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.Msg.Index)
	}
	return out
}

func seq(from, n int) []uint64 {
	var out []uint64
	for i := range n {
		out = append(out, uint64(from+i))
	}
	return out
}

// A Throttle serves one host.
func TestThrottleOneHost(t *testing.T) {
	th := NewThrottle()
	net := newChaosNet(1)
	h, err := NewHost(HostConfig{NodeID: 1, Transport: net.sender(1), HardState: NewMemStateStore(), Logger: quiet(), TickInterval: -1, Throttle: th})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := NewHost(HostConfig{NodeID: 2, Transport: net.sender(2), HardState: NewMemStateStore(), Logger: quiet(), TickInterval: -1, Throttle: th}); !errors.Is(err, ErrThrottleInUse) {
		t.Fatalf("a second host: %v", err)
	}
}

// A learner catching up under a leader throttle takes at least
// (bytes - burst - one message)/rate (a floor the throttle's bucket
// guarantees, never a ceiling: nothing here waits on a machine's speed
// but the deadlines), the throttle holding back all but the first
// message, while an acks=all producer to the in-sync voters keeps
// committing meanwhile; then the same under a follower throttle on the
// learner.
func TestThrottleCatchUp(t *testing.T) {
	for _, side := range []string{"leader", "follower"} {
		t.Run(side, func(t *testing.T) {
			const rate = 1 << 20
			backlog := 2 << 20
			if testing.Short() {
				backlog = 1 << 20
			}
			c := newPCluster(t, 3, 1, 21)
			throttles := map[uint64]*Throttle{}
			c.throttle = func(id uint64) *Throttle {
				th := NewThrottle()
				throttles[id] = th
				return th
			}
			c.startAll()
			g := c.groups[0]
			lead := c.waitLeader(g)
			// The backlog: 32 KiB batches.
			val := string(make([]byte, 32<<10))
			var last *Pending
			for range backlog / (32 << 10) {
				pd, err := lead.ProduceWith(valueBatch(val), ProduceOptions{Acks: AcksAll})
				if err != nil {
					t.Fatal(err)
				}
				last = pd
			}
			if _, err := c.wait(last); err != nil {
				t.Fatal(err)
			}
			target := lead.log.LastIndex()
			c.join(4, 1, 2, 3)
			var th *Throttle
			if side == "leader" {
				th = throttles[lead.rs.self]
				th.SetRates(rate, 0)
				th.SetLeaderThrottled(map[GroupID][]uint64{g: {4}})
			} else {
				th = throttles[4]
				th.SetRates(0, rate)
				th.SetFollowerThrottled(map[GroupID]bool{g: true})
			}
			sp := startProducer("p", []*Partition{c.nodes[1].parts[g], c.nodes[2].parts[g], c.nodes[3].parts[g]})
			start := time.Now()
			c.addLearner(g, 4)
			match := func() uint64 {
				prog, err := c.leaderOf(g).Progress()
				if err != nil {
					return 0
				}
				for _, pr := range prog {
					if pr.ID == 4 {
						return pr.Match
					}
				}
				return 0
			}
			// The producer's records commit while the learner is still
			// behind the backlog.
			n := sp.ackedCount()
			c.drive("records acknowledged while the learner catches up", func() bool { return sp.ackedCount() >= n+20 })
			if m := match(); m >= target {
				t.Fatalf("the learner caught up (match %d, backlog to %d) before 20 records were acknowledged", m, target)
			}
			c.drive("the learner to catch up", func() bool { return match() >= target })
			took := time.Since(start)
			acked := sp.halt()
			st := th.Stats()
			burst := int64(rate / 10)
			floor := time.Duration(float64(int64(backlog)-burst-(1<<20)) / rate * float64(time.Second))
			t.Logf("%s throttle: %d bytes caught up in %v (floor %v), stats %+v, %d records acknowledged meanwhile", side, backlog, took, floor, st, len(acked))
			if took < floor {
				t.Fatalf("caught up in %v, under the throttle's floor %v", took, floor)
			}
			// Only the first message (at most raft's 1 MiB) and a probe
			// can pass at once.
			delayed := st.LeaderDelayedBytes + st.FollowerDelayedBytes
			if min := int64(backlog) - 1<<20 - 64<<10; delayed < min {
				t.Fatalf("only %d bytes delayed of a %d-byte backlog (want %d)", delayed, backlog, min)
			}
			if st.LeaderDroppedBytes+st.FollowerDroppedBytes != 0 {
				t.Fatalf("dropped: %+v", st)
			}
			th.SetRates(0, 0)
			c.settleOn(g, 1, 2, 3, 4)
			checkAcked(t, c.nodes[4].parts[g], acked)
			if !slices.Equal(records(t, c.nodes[4].parts[g]), records(t, c.leaderOf(g))) {
				t.Fatal("the learner's records differ from the leader's")
			}
		})
	}
}
