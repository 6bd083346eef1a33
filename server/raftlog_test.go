package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// A partition log written the raft way, for the client tests: three
// replicas of one raft group on three hosts over an in-memory network,
// records produced (acks=all) through whichever replica leads, leadership
// moved between produce rounds, so the log holds raft's own entries
// (internal batches: no offsets, control bit and Sluice's bit 7) between
// the data batches of several leader epochs.

// raftNet carries raft messages between hosts in one process, delivering
// deep copies (a receiver may keep or modify what it is given).
type raftNet struct {
	mu    sync.Mutex
	hosts map[uint64]*replica.Host
}

type raftNetSender struct{ n *raftNet }

func (s raftNetSender) Send(msgs []replica.GroupMessage) {
	by := map[uint64][]replica.GroupMessage{}
	for _, gm := range msgs {
		m := &gm.Msg
		if len(m.Entries) > 0 {
			ents := append(m.Entries[:0:0], m.Entries...)
			for i := range ents {
				ents[i].Data = bytes.Clone(ents[i].Data)
			}
			m.Entries = ents
		}
		if m.Snapshot != nil {
			snap := *m.Snapshot
			snap.Data = bytes.Clone(snap.Data)
			m.Snapshot = &snap
		}
		by[m.To] = append(by[m.To], gm)
	}
	s.n.mu.Lock()
	hosts := map[uint64]*replica.Host{}
	for to := range by {
		hosts[to] = s.n.hosts[to]
	}
	s.n.mu.Unlock()
	for to, ms := range by {
		if h := hosts[to]; h != nil {
			h.Deliver(ms)
		}
	}
}

// raftRound is one produce round of raftLog: the leader epoch its
// records were written in and their offsets [start, end).
type raftRound struct {
	epoch      int32
	start, end int64
}

// raftLogValue is the value of the record at offset i of a log written
// from valueBatches.
func raftLogValue(i int) string { return fmt.Sprintf("value-%03d", i) }

// raftLogTime is the timestamp of the record at offset i of a log
// written from valueBatches: an hour ago plus i ms, older than any
// internal batch raft writes.
func raftLogTime(base time.Time, i int) int64 { return base.UnixMilli() + int64(i) }

// valueBatches returns rounds of batches of perBatch records each, the
// record at offset i (counted across all) holding raftLogValue(i) at
// raftLogTime(base, i), base an hour before now.
func valueBatches(rounds, batches, perBatch int) (out [][][]byte, base time.Time) {
	out = make([][][]byte, rounds)
	base = time.Now().Add(-time.Hour)
	next := 0
	for r := range out {
		for b := 0; b < batches; b++ {
			recs := make([]batch.Record, perBatch)
			for i := range recs {
				recs[i] = batch.Record{Timestamp: raftLogTime(base, next+i), Key: []byte("k"), Value: []byte(raftLogValue(next + i))}
			}
			out[r] = append(out[r], batch.Build(batch.NewBuildOptions(), recs))
			next += perBatch
		}
	}
	return out, base
}

// raftGroup is three replicas of one partition on raft, each on its own
// host, over a raftNet, with real (fast) ticks. Every wait is bounded by
// one deadline.
type raftGroup struct {
	t        *testing.T
	ids      []uint64
	id       replica.GroupID
	hosts    map[uint64]*replica.Host
	parts    map[uint64]*replica.Partition
	root     string
	lead     uint64
	deadline time.Time
	closed   bool
}

// newRaftGroup starts the replicas and makes replica 1 the leader.
func newRaftGroup(t *testing.T) *raftGroup {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := &raftGroup{
		t: t, ids: []uint64{1, 2, 3}, id: replica.GroupID{TopicID: [16]byte{0x5a, 0x1c}, Partition: 0},
		hosts: map[uint64]*replica.Host{}, parts: map[uint64]*replica.Partition{},
		root: t.TempDir(), deadline: time.Now().Add(60 * time.Second),
	}
	t.Cleanup(g.close)
	net := &raftNet{hosts: map[uint64]*replica.Host{}}
	for _, id := range g.ids {
		h, err := replica.NewHost(replica.HostConfig{
			NodeID: id, Transport: raftNetSender{net}, HardState: replica.NewMemStateStore(),
			Logger: quiet, TickInterval: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		g.hosts[id] = h
		net.mu.Lock()
		net.hosts[id] = h
		net.mu.Unlock()
	}
	for _, id := range g.ids {
		p, err := replica.Open(vfs.Default, g.dir(id), replica.DefaultTopicConfig(), replica.Options{
			Log: segment.Options{Logger: quiet},
			// A follower out of touch leaves the ISR after a second
			// (replica.lag.time.max.ms).
			Raft: &replica.RaftConfig{Host: g.hosts[id], Group: g.id, Voters: g.ids, ReplicaLagTime: time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		g.parts[id] = p
	}
	if err := g.hosts[1].Campaign(g.id); err != nil {
		t.Fatal(err)
	}
	g.waitFor("replica 1 to lead", func() bool { return g.leaderIs(1) })
	g.lead = 1
	return g
}

// dir is replica id's partition folder.
func (g *raftGroup) dir(id uint64) string { return filepath.Join(g.root, fmt.Sprint(id), "raft-0") }

// follower returns a replica that does not lead.
func (g *raftGroup) follower() uint64 { return g.lead%3 + 1 }

func (g *raftGroup) waitFor(what string, cond func() bool) {
	g.t.Helper()
	for !cond() {
		if time.Now().After(g.deadline) {
			g.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// leaderIs reports whether every replica knows id as the leader, in one
// epoch.
func (g *raftGroup) leaderIs(id uint64) bool {
	var epoch int32 = -1
	for _, p := range g.parts {
		lead, e, ok := p.Leader()
		if !ok || lead != id || (epoch >= 0 && e != epoch) {
			return false
		}
		epoch = e
	}
	return g.parts[id].IsLeader()
}

// move hands leadership to replica to.
func (g *raftGroup) move(to uint64) {
	g.t.Helper()
	for !g.leaderIs(to) {
		if time.Now().After(g.deadline) {
			g.t.Fatalf("timed out moving leadership from %d to %d", g.lead, to)
		}
		if err := g.hosts[g.lead].TransferLeadership(g.id, to); err != nil {
			g.t.Fatal(err)
		}
		for i := 0; i < 100 && !g.leaderIs(to); i++ {
			time.Sleep(2 * time.Millisecond)
		}
	}
	g.lead = to
}

// produce produces a copy of data (acks=all) through the leader and
// returns its base offset once committed.
func (g *raftGroup) produce(data []byte) int64 {
	g.t.Helper()
	pd, err := g.parts[g.lead].ProduceWith(bytes.Clone(data), replica.ProduceOptions{Acks: replica.AcksAll})
	if err != nil {
		g.t.Fatalf("produce to replica %d: %v", g.lead, err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), g.deadline)
	defer cancel()
	res, err := pd.Wait(ctx)
	if err != nil {
		g.t.Fatalf("produce to replica %d: %v", g.lead, err)
	}
	return res.BaseOffset
}

func (g *raftGroup) close() {
	if g.closed {
		return
	}
	g.closed = true
	for _, id := range g.ids {
		if p := g.parts[id]; p != nil {
			p.Close()
		}
	}
	for _, id := range g.ids {
		if h := g.hosts[id]; h != nil {
			h.Close()
		}
	}
}

// raftLog writes a partition log the raft way into dir: each round's
// batches produced (acks=all) through the replica leading then,
// leadership moving to the next replica before every round after the
// first (twice before the last, so one leader epoch holds no record). It
// returns the rounds and the raft indexes the log holds beyond its
// batches (raft's own entries). dir is a copy of a follower's partition
// folder, every replica closed.
func raftLog(t *testing.T, dir string, rounds [][][]byte) ([]raftRound, int) {
	t.Helper()
	g := newRaftGroup(t)
	var out []raftRound
	next, nbatches := int64(0), 0
	for r, bs := range rounds {
		if r > 0 {
			g.move(g.follower())
			if r == len(rounds)-1 {
				g.move(g.follower()) // an epoch without records
			}
		}
		round := raftRound{epoch: g.parts[g.lead].LeaderEpoch(), start: next}
		for _, data := range bs {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			if off := g.produce(data); off != next {
				t.Fatalf("round %d: batch at offset %d, want %d", r, off, next)
			}
			next += int64(h.LastOffsetDelta) + 1
			nbatches++
		}
		round.end = next
		out = append(out, round)
	}
	// Every replica has applied everything (the high watermark is the
	// same function of the log on each).
	g.waitFor("every replica's high watermark", func() bool {
		for _, p := range g.parts {
			if p.HighWatermark() != next {
				return false
			}
		}
		return true
	})
	// Copy a follower's folder: its log is the leader's, batch for batch.
	from := g.follower()
	g.close()
	l, err := segment.Open(vfs.Default, g.dir(from), replica.DefaultTopicConfig().Log, segment.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	internal := int(l.LastIndex()-l.FirstIndex()+1) - nbatches
	if l.LogEndOffset() != next {
		t.Fatalf("replica %d's log ends at offset %d, want %d", from, l.LogEndOffset(), next)
	}
	l.Close()
	if err := copyDir(g.dir(from), dir); err != nil {
		t.Fatal(err)
	}
	// The files hold raft's entries as internal batches, between data
	// batches, as the client tests need.
	kinds := rawBatchKinds(t, dir)
	if got := strings.Count(kinds, "i"); got != internal {
		t.Fatalf("the segment files hold %d internal batches, the raft log %d entries of raft's own (%s)", got, internal, kinds)
	}
	if !strings.Contains(strings.Trim(kinds, "i"), "i") {
		t.Fatalf("no internal batch between data batches: %s", kinds)
	}
	return out, internal
}

// rawBatchKinds walks dir's segment files and returns one letter per
// batch, in log order: "d" for data, "i" for internal (raft's own).
func rawBatchKinds(t *testing.T, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names) // zero-padded base offsets
	var kinds strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if h.Attributes&batch.InternalBit != 0 {
				kinds.WriteByte('i')
			} else {
				kinds.WriteByte('d')
			}
			data = data[h.Size():]
		}
	}
	return kinds.String()
}

// copyDir copies the regular files of src into dst (created if needed).
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// installRaftLog makes dir's topic-0 folder (a broker's, stopped) hold
// the raft-written log in src: every file but partition.metadata is
// replaced, and the partition's raft group state in the broker's state
// store (__sluice_raft) is made to match it, as a broker that wrote that
// log and then stopped would have left it: the term at least the log's
// last, everything committed, the configuration the broker's own (the
// group's, as the broker created it: itself alone). Without that the
// broker's one-voter group would resume from the state of the empty log
// it had created (commit 0, an older term), which does not describe the
// log installed.
func installRaftLog(t *testing.T, logDir, topic string, topicID [16]byte, src string) {
	t.Helper()
	dst := filepath.Join(logDir, topic+"-0")
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == partitionMetadataName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyDir(src, dst); err != nil {
		t.Fatal(err)
	}

	l, err := segment.Open(vfs.Default, dst, replica.DefaultTopicConfig().Log, segment.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	last := l.LastIndex()
	lastTerm, err := l.Term(last)
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	states, err := replica.OpenStateStore(filepath.Join(logDir, raftStateDirName), pebblevfs.Default, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer states.Close()
	id := replica.GroupID{TopicID: topicID, Partition: 0}
	st, ok, err := states.Load(id)
	if err != nil || !ok {
		t.Fatalf("the broker holds no raft state for %s-0 (%v)", topic, err)
	}
	hs := st.HardState
	if lastTerm > hs.Term {
		hs.Term, hs.Vote = lastTerm, 0
	}
	hs.Commit = last
	// Every configuration change the log may hold is the three-replica
	// group's, never to be applied here (ConfIndex); the records are
	// applied again from the start (Applied 0: Apply is idempotent).
	st = replica.GroupState{HardState: hs, ConfState: st.ConfState, Applied: 0, ConfIndex: last}
	if err := states.Save(map[replica.GroupID]replica.GroupState{id: st}, true); err != nil {
		t.Fatal(err)
	}
}
