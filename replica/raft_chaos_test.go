package replica

import (
	"math/rand/v2"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
)

// chaosNet is an in-memory network for raft hosts that can drop, delay,
// reorder, duplicate and partition messages, and stop nodes. Messages are
// deep-copied on the way, as a real transport would (a follower stamps
// offsets into the bytes it writes). Delayed messages are released in a
// random order by release (tests call it between ticks). Its choices come
// from one seeded source, so a seed names a run's network behaviour (the
// hosts' workers still interleave freely).
type chaosNet struct {
	mu      sync.Mutex
	rng     *rand.Rand
	hosts   map[uint64]*Host
	down    map[uint64]bool    // stopped nodes: nothing to or from them
	paused  map[uint64]bool    // paused nodes (SIGSTOP): as down, but no liveness report
	cut     map[[2]uint64]bool // from, to: dropped
	delayed []chaosMsg         // held back until release
	drop    float64            // probability a message is lost
	dup     float64            // probability a message is delivered twice
	delay   float64            // probability a message is held back
	sent    int
	// snapFetches counts the snapshot-file requests of chaosFetcher.
	snapFetches int
	// snapFail is how many more snapshot-file requests fail.
	snapFail int
	// snapGate, when set, holds every snapshot-file request until it is
	// closed (a slow transfer); snapHeld counts those waiting.
	snapGate chan struct{}
	snapHeld int
	// hold, when set, picks messages to keep back until releaseHeld
	// (held).
	hold func(from uint64, gm GroupMessage) bool
	held []chaosMsg
}

type chaosMsg struct {
	to uint64
	gm GroupMessage
}

func newChaosNet(seed uint64) *chaosNet {
	return &chaosNet{
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		hosts:  map[uint64]*Host{},
		down:   map[uint64]bool{},
		paused: map[uint64]bool{},
		cut:    map[[2]uint64]bool{},
	}
}

func (n *chaosNet) sender(from uint64) Transport { return chaosSender{n, from} }

type chaosSender struct {
	n    *chaosNet
	from uint64
}

// cloneMessage deep-copies what a receiver may modify or keep.
func cloneMessage(m raftpb.Message) raftpb.Message {
	if len(m.Entries) > 0 {
		ents := make([]raftpb.Entry, len(m.Entries))
		for i, e := range m.Entries {
			e.Data = append([]byte(nil), e.Data...)
			ents[i] = e
		}
		m.Entries = ents
	}
	if m.Snapshot != nil {
		s := *m.Snapshot
		s.Data = append([]byte(nil), s.Data...)
		m.Snapshot = &s
	}
	return m
}

func (s chaosSender) Send(msgs []GroupMessage) {
	n := s.n
	n.mu.Lock()
	by := map[uint64][]GroupMessage{}
	for _, gm := range msgs {
		to := gm.Msg.To
		n.sent++
		if n.down[s.from] || n.down[to] || n.paused[s.from] || n.paused[to] || n.cut[[2]uint64{s.from, to}] {
			continue
		}
		if n.drop > 0 && n.rng.Float64() < n.drop {
			continue
		}
		gm.Msg = cloneMessage(gm.Msg)
		if n.hold != nil && n.hold(s.from, gm) {
			n.held = append(n.held, chaosMsg{to: to, gm: gm})
			continue
		}
		if n.dup > 0 && n.rng.Float64() < n.dup {
			n.delayed = append(n.delayed, chaosMsg{to: to, gm: GroupMessage{Group: gm.Group, Msg: cloneMessage(gm.Msg)}})
		}
		if n.delay > 0 && n.rng.Float64() < n.delay {
			n.delayed = append(n.delayed, chaosMsg{to: to, gm: gm})
			continue
		}
		by[to] = append(by[to], gm)
	}
	hosts := map[uint64]*Host{}
	for to := range by {
		hosts[to] = n.hosts[to]
	}
	n.mu.Unlock()
	for to, ms := range by {
		if h := hosts[to]; h != nil {
			h.Deliver(ms)
		}
	}
}

// release delivers the held-back messages in a random order (to nodes
// still up).
func (n *chaosNet) release() {
	n.mu.Lock()
	held := n.delayed
	n.delayed = nil
	n.rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	type delivery struct {
		h  *Host
		gm GroupMessage
	}
	var out []delivery
	for _, m := range held {
		if n.down[m.to] || n.down[m.gm.Msg.From] || n.paused[m.to] || n.paused[m.gm.Msg.From] {
			continue
		}
		if h := n.hosts[m.to]; h != nil {
			out = append(out, delivery{h, m.gm})
		}
	}
	n.mu.Unlock()
	for _, d := range out {
		d.h.Deliver([]GroupMessage{d.gm})
	}
}

// releaseHeld stops holding messages back and delivers those held, in
// the order sent.
func (n *chaosNet) releaseHeld() {
	n.mu.Lock()
	held := n.held
	n.held, n.hold = nil, nil
	hosts := map[uint64]*Host{}
	for _, m := range held {
		hosts[m.to] = n.hosts[m.to]
	}
	n.mu.Unlock()
	for _, m := range held {
		if h := hosts[m.to]; h != nil {
			h.Deliver([]GroupMessage{m.gm})
		}
	}
}

// setHost registers (or, with nil, unregisters) node id's host.
func (n *chaosNet) setHost(id uint64, h *Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h == nil {
		delete(n.hosts, id)
	} else {
		n.hosts[id] = h
	}
}

// setDown stops or restarts delivery to and from node id, and tells the
// other hosts, as the TCP transport's liveness heartbeat would
// (Host.PeerDown, PeerUp).
func (n *chaosNet) setDown(id uint64, down bool) {
	n.mu.Lock()
	n.down[id] = down
	var others []*Host
	for o, h := range n.hosts {
		if o != id {
			others = append(others, h)
		}
	}
	n.mu.Unlock()
	for _, h := range others {
		if down {
			h.PeerDown(id)
		} else {
			h.PeerUp(id)
		}
	}
}

// pause stops delivery to and from node id without telling anyone, as a
// stopped process (SIGSTOP) looks until the liveness timeout; with
// paused false, delivery resumes.
func (n *chaosNet) pause(id uint64, paused bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused[id] = paused
}

func (n *chaosNet) isPaused(id uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused[id]
}

// liveness tells the hosts of a and b that the other went down or came
// back.
func (n *chaosNet) liveness(a, b uint64, down bool) {
	n.mu.Lock()
	ha, hb := n.hosts[a], n.hosts[b]
	n.mu.Unlock()
	for _, x := range []struct {
		h    *Host
		peer uint64
	}{{ha, b}, {hb, a}} {
		switch {
		case x.h == nil:
		case down:
			x.h.PeerDown(x.peer)
		default:
			x.h.PeerUp(x.peer)
		}
	}
}

// partition cuts the links between the two sides (both directions);
// heal restores every link.
func (n *chaosNet) partition(a, b []uint64) {
	n.mu.Lock()
	for _, x := range a {
		for _, y := range b {
			n.cut[[2]uint64{x, y}] = true
			n.cut[[2]uint64{y, x}] = true
		}
	}
	n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			n.liveness(x, y, true)
		}
	}
}

func (n *chaosNet) heal() {
	n.mu.Lock()
	var pairs [][2]uint64
	for p := range n.cut {
		pairs = append(pairs, p)
	}
	clear(n.cut)
	n.mu.Unlock()
	for _, p := range pairs {
		n.liveness(p[0], p[1], false)
	}
}

// setFaults sets the drop, duplicate and delay probabilities.
func (n *chaosNet) setFaults(drop, dup, delay float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop, n.dup, n.delay = drop, dup, delay
}

// isCut reports whether the link from a to b is cut.
func (n *chaosNet) isCut(a, b uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[[2]uint64{a, b}]
}

func (n *chaosNet) sentCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sent
}
