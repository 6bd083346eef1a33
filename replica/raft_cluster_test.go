package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// pnode is one broker of a test cluster of partitions on raft: a host,
// its group-state store and a crashable in-memory FS.
type pnode struct {
	id     uint64
	fs     *vfs.MemFS
	states *crashStore
	host   *Host
	parts  map[GroupID]*Partition
	inject vfs.Injector // when set (before start), faults of the node's FS
}

// pcluster is several brokers in one process holding replicas of the
// same groups, over a chaosNet, driven by logical ticks.
type pcluster struct {
	t          *testing.T
	net        *chaosNet
	nodes      map[uint64]*pnode
	voters     []uint64            // the nodes started by startAll
	ids        []uint64            // every node
	joining    map[uint64][]uint64 // a node joining as a learner: its initial learners
	joinVoters map[uint64][]uint64 // and voters
	exactJoin  map[uint64]bool     // a node joining with the initial voters exactly (RaftConfig.Joining)
	minTerm    map[uint64]uint64   // a joining node's RaftConfig.MinTerm
	preferred  map[uint64]bool     // a node's RaftConfig.Preferred
	groups     []GroupID
	cfg        TopicConfig
	lagTime    time.Duration
	// onLeader, when set, gives each replica's RaftConfig.OnLeaderChange
	// (node id, group, and the partition once opened).
	onLeader func(id uint64, g GroupID, p *atomic.Pointer[Partition]) func(lead, term uint64)
	// state, when set, gives each replica's RaftConfig.SnapshotState.
	state func(id uint64, g GroupID) SnapshotState
	// throttle, when set, gives each host started its HostConfig.Throttle.
	throttle func(id uint64) *Throttle
	// hostCfg, when set, adjusts each host's configuration before it
	// starts.
	hostCfg func(cfg *HostConfig)
	// now, when set, is every partition's clock (Options.Log.Now).
	now func() time.Time
}

func newPCluster(t *testing.T, nodes, groups int, seed uint64) *pcluster {
	t.Helper()
	c := &pcluster{t: t, net: newChaosNet(seed), nodes: map[uint64]*pnode{}, joining: map[uint64][]uint64{}, joinVoters: map[uint64][]uint64{}, exactJoin: map[uint64]bool{}, minTerm: map[uint64]uint64{}, preferred: map[uint64]bool{}, cfg: DefaultTopicConfig(), lagTime: DefaultReplicaLagTime}
	for i := 1; i <= nodes; i++ {
		c.voters = append(c.voters, uint64(i))
	}
	for g := 0; g < groups; g++ {
		c.groups = append(c.groups, GroupID{TopicID: [16]byte{0xab, byte(g)}, Partition: int32(g)})
	}
	for _, id := range c.voters {
		c.addNode(id)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.stop(n.id)
		}
	})
	return c
}

func (c *pcluster) dir(g GroupID) string {
	return filepath.Join("/data", g.String())
}

// start opens node id's host and partitions from what its FS and state
// store hold.
func (c *pcluster) start(id uint64) {
	c.t.Helper()
	n := c.nodes[id]
	var th *Throttle
	if c.throttle != nil {
		th = c.throttle(id)
	}
	hc := HostConfig{NodeID: id, Transport: c.net.sender(id), HardState: n.states, Logger: quiet(), TickInterval: -1,
		// Ticks come from the test, one per millisecond or so: a long
		// election timeout keeps a starved worker (the race detector,
		// a loaded machine) from looking dead.
		ElectionTicks: 40, Throttle: th}
	if c.hostCfg != nil {
		c.hostCfg(&hc)
	}
	h, err := NewHost(hc)
	if err != nil {
		c.t.Fatal(err)
	}
	n.host = h
	n.parts = map[GroupID]*Partition{}
	for _, g := range c.groups {
		st, _, err := n.states.Load(g)
		if err != nil {
			c.t.Fatal(err)
		}
		// A log that lost entries its saved commit covers is a
		// durability bug (raft would panic on it): say so plainly.
		if l, err := segment.Open(n.fs, c.dir(g), c.cfg.Log, segment.Options{Logger: quiet()}); err == nil {
			if st.HardState.Commit > l.LastIndex() {
				c.t.Fatalf("node %d reopens with last index %d (log end offset %d) below its saved commit %d; files %v", id, l.LastIndex(), l.LogEndOffset(), st.HardState.Commit, listFiles(n.fs, c.dir(g)))
			}
			l.Close()
		}
		var fs vfs.FS = n.fs
		if n.inject != nil {
			fs = vfs.NewErrorFS(n.fs, n.inject)
		}
		rc := &RaftConfig{Host: n.host, Group: g, State: st, Voters: c.votersOf(id), Learners: c.joining[id], ReplicaLagTime: c.lagTime,
			Snapshots: c.net.fetcher(id), Joining: c.exactJoin[id] && len(st.ConfState.Voters) == 0, MinTerm: c.minTerm[id], Preferred: c.preferred[id]}
		var opened atomic.Pointer[Partition]
		if c.onLeader != nil {
			rc.OnLeaderChange = c.onLeader(id, g, &opened)
		}
		if c.state != nil {
			rc.SnapshotState = c.state(id, g)
		}
		p, err := Open(fs, c.dir(g), c.cfg, Options{Log: segment.Options{Logger: quiet(), Now: c.now}, Raft: rc})
		if err != nil {
			c.t.Fatalf("node %d: open %s: %v", id, g, err)
		}
		opened.Store(p)
		n.parts[g] = p
	}
	c.net.setHost(id, n.host)
	c.net.setDown(id, false)
	for _, o := range c.ids {
		if o != id && c.nodes[o].host == nil {
			n.host.PeerDown(o) // what its liveness heartbeat would find
		}
	}
}

func (c *pcluster) startAll() {
	for _, id := range c.voters {
		c.start(id)
	}
}

// stop closes node id cleanly.
func (c *pcluster) stop(id uint64) {
	n := c.nodes[id]
	if n.host == nil {
		return
	}
	c.net.setDown(id, true)
	c.net.setHost(id, nil)
	for _, p := range n.parts {
		p.Close()
	}
	n.host.Close()
	n.host, n.parts = nil, nil
}

// crash stops node id as a power cut would: what its FS had not synced is
// lost (torn tails included), the group-state store keeps what it saved.
func (c *pcluster) crash(id uint64, seed int64) {
	n := c.nodes[id]
	if n.host == nil {
		return
	}
	c.net.setDown(id, true)
	c.net.setHost(id, nil)
	// The FS and the group-state store crash at the same instant: no
	// Save runs while the FS is cloned.
	n.states.gate.Lock()
	crashed := n.fs.CrashClone(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(seed), 7))})
	saved := n.states.crashed()
	n.states.gate.Unlock()
	n.states = newCrashStore(saved)
	n.host.Close()
	for _, p := range n.parts {
		p.Close()
	}
	n.fs, n.host, n.parts = crashed, nil, nil
}

// addNode adds node id, not started.
func (c *pcluster) addNode(id uint64) {
	c.nodes[id] = &pnode{id: id, fs: vfs.NewMem(), states: newCrashStore(nil)}
	c.ids = append(c.ids, id)
}

func (c *pcluster) up() []*pnode {
	var out []*pnode
	for _, id := range c.ids {
		if n := c.nodes[id]; n.host != nil {
			out = append(out, n)
		}
	}
	return out
}

// tick advances every live host's clock by one tick (not a paused
// one's: a stopped process does not tick) and releases delayed messages.
func (c *pcluster) tick() {
	for _, n := range c.up() {
		if !c.net.isPaused(n.id) {
			n.host.Tick()
		}
	}
	c.net.release()
}

// drive ticks until cond holds, failing after a deadline.
func (c *pcluster) drive(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	// One tick every 5 ms of polling: the election timeout (10 to 20
	// ticks) is then 50 to 100 ms of real time, more than a busy host
	// under -race takes to answer a heartbeat. At one tick a millisecond
	// a leader with 100 produces in flight lost its leadership to
	// CheckQuorum in a CI run, and its produce failed.
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		if i%5 == 0 {
			c.tick()
		}
		time.Sleep(time.Millisecond)
	}
}

// leader returns the replica every live node (not paused) agrees leads
// g, or nil.
func (c *pcluster) leader(g GroupID) *Partition {
	var lead uint64
	for _, n := range c.up() {
		if c.net.isPaused(n.id) {
			continue // hears nothing: its view is stale
		}
		id, _, ok := n.parts[g].Leader()
		if !ok || (lead != 0 && id != lead) {
			return nil
		}
		lead = id
	}
	if n := c.nodes[lead]; n != nil && n.host != nil && n.parts[g].IsLeader() {
		return n.parts[g]
	}
	return nil
}

func (c *pcluster) waitLeader(g GroupID) *Partition {
	c.t.Helper()
	var p *Partition
	c.drive("a leader of "+g.String(), func() bool { p = c.leader(g); return p != nil })
	return p
}

// produceWait produces b to p and ticks until the Pending completes.
func (c *pcluster) produceWait(p *Partition, b []byte, acks int16) (segment.AppendResult, error) {
	c.t.Helper()
	pd, err := p.ProduceWith(b, ProduceOptions{Acks: acks})
	if err != nil {
		return noResult, err
	}
	return c.wait(pd)
}

// wait ticks until pd completes.
func (c *pcluster) wait(pd *Pending) (segment.AppendResult, error) {
	c.t.Helper()
	done := false
	var res segment.AppendResult
	var err error
	c.drive("a produce to complete", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		res, err = pd.Wait(ctx)
		done = !errors.Is(err, context.DeadlineExceeded)
		return done
	})
	return res, err
}

// records returns the values of every record p serves from its log start
// offset below its high watermark, failing on a gap in the offsets or an
// internal batch served (readAll, decodeValues).
func records(t *testing.T, p *Partition) []string {
	t.Helper()
	vals, err := readAll(p)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func valueBatch(vals ...string) []byte {
	recs := make([]batch.Record, len(vals))
	for i, v := range vals {
		recs[i] = batch.Record{Value: []byte(v), Timestamp: 1000}
	}
	return batch.Build(batch.NewBuildOptions(), recs)
}

func idempotentBatch(pid int64, epoch int16, seq int32, vals ...string) []byte {
	recs := make([]batch.Record, len(vals))
	for i, v := range vals {
		recs[i] = batch.Record{Value: []byte(v), Timestamp: 1000}
	}
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, epoch, seq
	return batch.Build(o, recs)
}

func listFiles(fs *vfs.MemFS, dir string) []string {
	names, _ := fs.List(dir)
	var out []string
	for _, n := range names {
		st, err := fs.Stat(filepath.Join(dir, n))
		if err == nil {
			out = append(out, fmt.Sprintf("%s:%d", n, st.Size()))
		}
	}
	return out
}

// crashStore is a MemStateStore that a crash can snapshot atomically with
// the FS (gate), keeping only what was synced: an unsynced Save is lost
// in a crash unless a later synced one made it durable (Pebble's WAL).
type crashStore struct {
	*MemStateStore
	gate    sync.Mutex
	durable map[GroupID]GroupState
	// refuse, when set (before the node starts), fails the saves it
	// returns true for.
	refuse func(GroupState) bool
}

// newCrashStore returns a store holding states, durable.
func newCrashStore(states map[GroupID]GroupState) *crashStore {
	s := &crashStore{MemStateStore: NewMemStateStore(), durable: map[GroupID]GroupState{}}
	if len(states) > 0 {
		s.MemStateStore.Save(states, true)
		s.durable = s.MemStateStore.snapshot()
	}
	return s
}

func (s *crashStore) Save(states map[GroupID]GroupState, sync bool) error {
	s.gate.Lock()
	defer s.gate.Unlock()
	for _, st := range states {
		if s.refuse != nil && s.refuse(st) {
			return errors.New("test: group state save refused")
		}
	}
	if err := s.MemStateStore.Save(states, sync); err != nil {
		return err
	}
	if sync {
		s.durable = s.MemStateStore.snapshot()
	}
	return nil
}

// crashed returns what a crash now keeps; the caller holds gate.
func (s *crashStore) crashed() map[GroupID]GroupState { return maps.Clone(s.durable) }

// votersOf is the initial voters node id starts with (without state).
func (c *pcluster) votersOf(id uint64) []uint64 {
	if v, ok := c.joinVoters[id]; ok {
		return v
	}
	return c.voters
}
