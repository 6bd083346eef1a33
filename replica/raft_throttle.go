package replica

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"golang.org/x/time/rate"
)

// Replication throttles: Kafka's replication quotas (KIP-73), which pace
// only the replication of throttled replicas, so that moving a partition
// (a replica catching up or being added) cannot starve the live traffic
// to in-sync replicas. Kafka's keys map onto a Throttle as:
//
//	leader.replication.throttled.rate      SetRates(leader, _), bytes/s (a broker config)
//	follower.replication.throttled.rate    SetRates(_, follower), bytes/s (a broker config)
//	leader.replication.throttled.replicas  SetLeaderThrottled: for the groups this broker
//	                                       leads whose topic lists it, the replicas that are
//	                                       learners or out of the ISR (a topic config)
//	follower.replication.throttled.replicas SetFollowerThrottled: the groups where this
//	                                       broker is a throttled follower catching up
//
// Kafka throttles the leader's fetch responses and the follower's fetch
// requests; raft pushes, so the leader paces the appends (MsgApp) and
// snapshots (MsgSnap) it sends to a throttled replica, and a throttled
// follower the appends it receives. A message is sized by its entries'
// Data (and a snapshot's Data): the records, not raft's envelope.
// Heartbeats, votes, responses and every message of a pair not listed
// pass at once, never queued.
//
// Each direction is one lane: a token bucket (golang.org/x/time/rate) of
// the direction's rate, burst a tenth of a second's worth (at least
// 64 KiB), and a FIFO queue of the messages that found it empty. A
// message goes at once only when its lane's queue is empty and the
// bucket holds its size (or the burst, for a message larger than the
// burst, which leaves the bucket in debt); otherwise it queues behind
// the others and the throttle's goroutine sends it when the bucket
// allows, so a lane's messages keep their order. A queue over
// throttleQueueBytes (64 MiB) drops what arrives (raft sends it again);
// a snapshot dropped is reported failed to raft (Host.ReportSnapshotFailure's
// effect), which sends a new one later.
//
// Compacted topics' segment files travel out of band
// (raft_snapfiles.go) and are not paced by the throttle.

// throttleQueueBytes bounds the bytes a lane holds back.
const throttleQueueBytes = 64 << 20

// throttleMinBurst is the least burst of a lane's bucket, in bytes.
const throttleMinBurst = 64 << 10

// ErrThrottleInUse reports a Throttle given to a second host.
var ErrThrottleInUse = errors.New("replica: the throttle is used by another host")

// Throttle paces the catch-up traffic of raft groups: the append
// (MsgApp) and snapshot (MsgSnap) messages a host sends as leader to
// throttled replicas, at the leader rate, and the appends it receives as
// a follower of throttled groups, at the follower rate (see the top of
// the file). Rates are bytes per second of entry data; 0 or negative is
// unlimited (the default). Give it to one host (HostConfig.Throttle),
// which starts its goroutine and stops it at Close. It is safe for
// concurrent use.
type Throttle struct {
	now func() time.Time // the clock; tests set it before use

	// conf is what Set* last set, read by the hosts' workers and
	// receivers without a lock.
	conf atomic.Pointer[throttleConf]

	// outMu and inMu order each lane's sends (the fast path and the
	// goroutine's releases): a message queued is never overtaken by one
	// of its lane sent later. Each is held across one transport Send or
	// one delivery to the host, and taken before mu.
	outMu, inMu sync.Mutex

	mu      sync.Mutex // leaf: the lanes
	out, in lane
	host    *Host
	wake    chan struct{} // buffered: the goroutine has work
	stop    chan struct{}
	done    chan struct{}

	// What the lanes act through, set by attach (tests set their own).
	sendFn     func([]GroupMessage)
	deliverFn  func([]GroupMessage)
	snapFailFn func(GroupID, uint64)
}

// throttleConf is one setting of a Throttle, immutable once published.
type throttleConf struct {
	leaderRate, followerRate int64
	leader                   map[throttlePair]struct{}
	follower                 map[GroupID]bool
}

type throttlePair struct {
	group GroupID
	to    uint64
}

// ThrottleStats counts a Throttle's work, bytes of entry data, since
// NewThrottle (Delayed, Dropped) or now (Queued).
type ThrottleStats struct {
	// LeaderDelayed and FollowerDelayed are the bytes (and messages) that
	// waited for the rate: each message is counted once, when queued.
	LeaderDelayedBytes, FollowerDelayedBytes int64
	LeaderDelayedMsgs, FollowerDelayedMsgs   int64
	// LeaderQueued and FollowerQueued are the bytes waiting now.
	LeaderQueuedBytes, FollowerQueuedBytes int64
	// LeaderDropped and FollowerDropped are the bytes dropped because the
	// lane's queue was full (raft sends them again).
	LeaderDroppedBytes, FollowerDroppedBytes int64
}

// NewThrottle returns a throttle with both rates unlimited and nothing
// throttled.
func NewThrottle() *Throttle {
	t := &Throttle{now: time.Now, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	t.conf.Store(&throttleConf{})
	return t
}

// SetRates sets the leader and follower rates, in bytes per second of
// entry data; 0 or negative is unlimited. Messages already queued are
// paced at the new rate (all released at once when it becomes unlimited).
func (t *Throttle) SetRates(leaderBytesPerSec, followerBytesPerSec int64) {
	t.mu.Lock()
	now := t.now()
	t.out.setRate(now, leaderBytesPerSec)
	t.in.setRate(now, followerBytesPerSec)
	c := *t.conf.Load()
	c.leaderRate, c.followerRate = leaderBytesPerSec, followerBytesPerSec
	t.conf.Store(&c)
	t.mu.Unlock()
	t.poke()
}

// SetLeaderThrottled replaces the set of (group, replica) pairs whose
// appends and snapshots from this host are paced at the leader rate: the
// caller lists, for the groups this broker leads whose topic throttles
// this broker as leader (leader.replication.throttled.replicas), the
// replicas that are learners or out of the ISR. The map is not kept.
func (t *Throttle) SetLeaderThrottled(set map[GroupID][]uint64) {
	m := map[throttlePair]struct{}{}
	for g, ids := range set {
		for _, id := range ids {
			m[throttlePair{g, id}] = struct{}{}
		}
	}
	t.mu.Lock()
	c := *t.conf.Load()
	c.leader = m
	t.conf.Store(&c)
	t.mu.Unlock()
}

// SetFollowerThrottled replaces the set of groups whose inbound appends
// this host paces at the follower rate: the groups where this broker is
// a throttled follower catching up (follower.replication.throttled.replicas).
// Only true entries count. The map is not kept.
func (t *Throttle) SetFollowerThrottled(set map[GroupID]bool) {
	m := map[GroupID]bool{}
	for g, on := range set {
		if on {
			m[g] = true
		}
	}
	t.mu.Lock()
	c := *t.conf.Load()
	c.follower = m
	t.conf.Store(&c)
	t.mu.Unlock()
}

// Stats returns the throttle's counts.
func (t *Throttle) Stats() ThrottleStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return ThrottleStats{
		LeaderDelayedBytes: t.out.delayedBytes, FollowerDelayedBytes: t.in.delayedBytes,
		LeaderDelayedMsgs: t.out.delayedMsgs, FollowerDelayedMsgs: t.in.delayedMsgs,
		LeaderQueuedBytes: t.out.queued, FollowerQueuedBytes: t.in.queued,
		LeaderDroppedBytes: t.out.droppedBytes, FollowerDroppedBytes: t.in.droppedBytes,
	}
}

// attach binds the throttle to h (NewHost) and starts its goroutine.
func (t *Throttle) attach(h *Host) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.host != nil {
		return ErrThrottleInUse
	}
	t.host = h
	t.sendFn = h.cfg.Transport.Send
	t.deliverFn = h.deliverNow
	t.snapFailFn = h.reportSnapshotFailureAsync
	go t.run()
	return nil
}

// close stops the goroutine (Host.Close, after the workers); what is
// queued is dropped.
func (t *Throttle) close() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
}

func (t *Throttle) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// msgBytes sizes a message for the throttle: its entries' data and its
// snapshot's data, in bytes.
func msgBytes(m *raftpb.Message) int64 {
	var n int64
	for i := range m.Entries {
		n += int64(len(m.Entries[i].Data))
	}
	if m.Snapshot != nil {
		n += int64(len(m.Snapshot.Data))
	}
	return n
}

// send is the host's Transport.Send through the throttle (called by the
// workers; never blocks on the rate).
func (t *Throttle) send(msgs []GroupMessage) {
	c := t.conf.Load()
	if c.leaderRate <= 0 || len(c.leader) == 0 {
		t.sendFn(msgs)
		return
	}
	paced := func(m *GroupMessage) bool {
		if typ := m.Msg.Type; typ != raftpb.MsgApp && typ != raftpb.MsgSnap {
			return false
		}
		_, ok := c.leader[throttlePair{m.Group, m.Msg.To}]
		return ok
	}
	t.through(&t.outMu, &t.out, msgs, paced, t.sendFn)
}

// receive is Host.Deliver through the throttle (called by the
// transport's receivers).
func (t *Throttle) receive(msgs []GroupMessage) {
	c := t.conf.Load()
	if c.followerRate <= 0 || len(c.follower) == 0 {
		t.deliverFn(msgs)
		return
	}
	paced := func(m *GroupMessage) bool { return m.Msg.Type == raftpb.MsgApp && c.follower[m.Group] }
	t.through(&t.inMu, &t.in, msgs, paced, t.deliverFn)
}

// through passes msgs on with fn, those paced through lane l: at once
// while the lane has no queue and its bucket allows, else queued.
func (t *Throttle) through(order *sync.Mutex, l *lane, msgs []GroupMessage, paced func(*GroupMessage) bool, fn func([]GroupMessage)) {
	var free, lane []GroupMessage
	for i := range msgs {
		if paced(&msgs[i]) {
			lane = append(lane, msgs[i])
		} else {
			free = append(free, msgs[i])
		}
	}
	if len(free) > 0 {
		fn(free)
	}
	if len(lane) == 0 {
		return
	}
	order.Lock()
	defer order.Unlock()
	t.mu.Lock()
	now := t.now()
	pass := lane[:0]
	var dropped []GroupMessage
	queued := false
	for i := range lane {
		switch l.admit(now, lane[i]) {
		case admitPass:
			pass = append(pass, lane[i])
		case admitQueued:
			queued = true
		case admitDropped:
			dropped = append(dropped, lane[i])
		}
	}
	t.mu.Unlock()
	if queued {
		t.poke()
	}
	if len(pass) > 0 {
		fn(pass)
	}
	for _, m := range dropped {
		if m.Msg.Type == raftpb.MsgSnap && t.snapFailFn != nil && l == &t.out {
			t.snapFailFn(m.Group, m.Msg.To)
		}
	}
}

// run is the throttle's goroutine: it sends each lane's queued messages
// as the lane's bucket allows.
func (t *Throttle) run() {
	defer close(t.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		wait := t.pump()
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-t.stop:
			timer.Stop()
			return
		case <-t.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// pump releases what each lane's bucket allows now and returns how long
// until the next queued message may go (0: nothing queued).
func (t *Throttle) pump() time.Duration {
	var wait time.Duration
	for _, d := range [2]struct {
		order *sync.Mutex
		l     *lane
		fn    func([]GroupMessage)
	}{{&t.outMu, &t.out, t.sendFn}, {&t.inMu, &t.in, t.deliverFn}} {
		d.order.Lock()
		t.mu.Lock()
		due, w := d.l.release(t.now())
		t.mu.Unlock()
		if len(due) > 0 {
			d.fn(due)
		}
		d.order.Unlock()
		if w > 0 && (wait == 0 || w < wait) {
			wait = w
		}
	}
	return wait
}

// lane is one direction of a Throttle (guarded by Throttle.mu).
type lane struct {
	lim    *rate.Limiter // nil: unlimited
	q      []laneMsg
	base   uint64 // seq of q[0]
	next   uint64 // seq of the next message queued
	queued int64  // bytes in q
	// apps finds a queued append by its group, ends and index, so a
	// resend replaces it in place (see admit).
	apps map[appKey]uint64

	delayedBytes, delayedMsgs int64
	droppedBytes              int64
}

type laneMsg struct {
	gm   GroupMessage
	size int64
}

// appKey names an append: a resend of the same append (a probe, which
// raft repeats at every heartbeat response until the follower answers)
// has the same key.
type appKey struct {
	group    GroupID
	from, to uint64
	index    uint64 // the entry before the append's first
}

type admitResult int

const (
	admitPass admitResult = iota
	admitQueued
	admitDropped
)

func (l *lane) setRate(now time.Time, bytesPerSec int64) {
	if bytesPerSec <= 0 {
		l.lim = nil
		return
	}
	burst := int(min(max(bytesPerSec/10, throttleMinBurst), 1<<30))
	if l.lim == nil {
		l.lim = rate.NewLimiter(rate.Limit(bytesPerSec), burst)
		return
	}
	l.lim.SetLimitAt(now, rate.Limit(bytesPerSec))
	l.lim.SetBurstAt(now, burst)
}

// admit takes a paced message at now: it passes when nothing is queued
// and the bucket allows it, else it queues (or, over the bound, drops).
// An append from the same index to the same replica as one still queued
// replaces that one where it stands: raft in StateProbe sends the same
// append again at every heartbeat response until the follower answers,
// and a lane slower than the heartbeat would otherwise hold (and pay
// for) one copy per heartbeat. In StateReplicate appends start where the
// previous ended, so none replaces another.
func (l *lane) admit(now time.Time, gm GroupMessage) admitResult {
	n := msgBytes(&gm.Msg)
	if len(l.q) == 0 {
		if ok, _ := l.take(now, n); ok {
			return admitPass
		}
	}
	key := appKey{gm.Group, gm.Msg.From, gm.Msg.To, gm.Msg.Index}
	if gm.Msg.Type == raftpb.MsgApp {
		if seq, ok := l.apps[key]; ok {
			old := &l.q[seq-l.base]
			if l.queued-old.size+n > throttleQueueBytes {
				l.droppedBytes += n
				return admitDropped
			}
			l.queued += n - old.size
			*old = laneMsg{gm: gm, size: n}
			return admitQueued
		}
	}
	if l.queued+n > throttleQueueBytes {
		l.droppedBytes += n
		return admitDropped
	}
	if gm.Msg.Type == raftpb.MsgApp {
		if l.apps == nil {
			l.apps = map[appKey]uint64{}
		}
		l.apps[key] = l.next
	}
	if len(l.q) == 0 {
		l.base = l.next
	}
	l.next++
	l.q = append(l.q, laneMsg{gm: gm, size: n})
	l.queued += n
	l.delayedBytes += n
	l.delayedMsgs++
	return admitQueued
}

// release pops the queued messages the bucket allows at now, in order,
// and returns them with how long until the next may go (0: none left).
func (l *lane) release(now time.Time) ([]GroupMessage, time.Duration) {
	var out []GroupMessage
	for len(l.q) > 0 {
		ok, wait := l.take(now, l.q[0].size)
		if !ok {
			return out, wait
		}
		m := &l.q[0].gm
		if m.Msg.Type == raftpb.MsgApp {
			key := appKey{m.Group, m.Msg.From, m.Msg.To, m.Msg.Index}
			if l.apps[key] == l.base {
				delete(l.apps, key)
			}
		}
		out = append(out, *m)
		l.queued -= l.q[0].size
		l.q[0] = laneMsg{}
		l.q = l.q[1:]
		l.base++
	}
	l.q = nil // let the backing array go
	return out, 0
}

// take consumes n bytes of tokens at now if the bucket holds them (or
// holds a full burst, for n over the burst: the bucket goes into debt,
// which the next messages wait out); otherwise it reports how long until
// it will (at least 1 ms).
func (l *lane) take(now time.Time, n int64) (bool, time.Duration) {
	if l.lim == nil || n == 0 {
		return true, 0
	}
	burst := int64(l.lim.Burst())
	need := min(n, burst)
	if tokens := l.lim.TokensAt(now); tokens < float64(need) {
		// Rounded up, and a microsecond more: the bucket's float
		// arithmetic must hold need when the wait is over.
		wait := time.Duration(math.Ceil((float64(need)-tokens)/float64(l.lim.Limit())*float64(time.Second))) + time.Microsecond
		return false, max(wait, time.Millisecond)
	}
	for left := n; left > 0; left -= min(left, burst) {
		l.lim.ReserveN(now, int(min(left, burst))) // within the burst: always granted
	}
	return true, 0
}
