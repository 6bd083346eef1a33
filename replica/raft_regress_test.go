package replica

import (
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// Regression tests from a review of the replicated partition.

// Retention moved FirstIndex durably while the group state holding the
// commit index was saved unsynced and lost in a crash: the replica must
// restart (raft refuses a commit index below FirstIndex-1 and panicked).
func TestRestartAfterRetentionWithLostCommit(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.cfg.Log.SegmentBytes = 200
	c.cfg.Log.RetentionBytes = 0
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	p := c.waitLeader(g)
	for i := 0; i < 30; i++ {
		if _, err := c.produceWait(p, valueBatch(fmt.Sprintf("v%03d", i)), AcksAll); err != nil {
			t.Fatal(err)
		}
	}
	c.settle()
	if _, err := c.nodes[2].parts[g].DeleteOldSegments(); err != nil {
		t.Fatal(err)
	}
	c.crash(2, 1)
	c.start(2)
	c.settle()
}

// A Ready whose first entry replaces a divergent tail records each entry
// in the producer state once, and the leader epoch cache loses the epoch
// whose entries went even when the new entry's term is older.
func TestTruncatingAppendRecordsOnce(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.start(1) // never campaigns: no worker writes this storage
	p := c.nodes[1].parts[c.groups[0]]
	s := &partitionStorage{logStorage: p.rs.storage, p: p}
	d := func(seq int32, v string) []byte { return idempotentBatch(7, 0, seq, v) }
	if err := s.Append([]raftpb.Entry{{Index: 1, Term: 1}, {Index: 2, Term: 1, Data: d(0, "a")},
		{Index: 3, Term: 3}, {Index: 4, Term: 3, Data: d(1, "b-divergent")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append([]raftpb.Entry{{Index: 3, Term: 2}, {Index: 4, Term: 2, Data: d(1, "b")},
		{Index: 5, Term: 2, Data: d(2, "c")}}); err != nil {
		t.Fatal(err)
	}
	p.appendMu.Lock()
	n := len(p.producers[7].batches)
	p.appendMu.Unlock()
	if n != 3 {
		t.Errorf("producer 7 has %d cached batches, want 3", n)
	}
	p.mu.Lock()
	ep := append([]epochEntry(nil), p.epochs.entries...)
	p.mu.Unlock()
	if len(ep) != 2 || ep[1] != (epochEntry{2, 1}) {
		t.Errorf("leader epochs %v, want [{1 0} {2 1}]", ep)
	}
}

// Produces answered as duplicates or refused leave nothing pending.
func TestNoPendingLeak(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	p := c.waitLeader(g)
	if _, err := c.produceWait(p, idempotentBatch(9, 0, 0, "a"), AcksAll); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if pd, err := p.ProduceWith(idempotentBatch(9, 0, 0, "a"), ProduceOptions{Acks: AcksAll}); err == nil {
			c.wait(pd)
		}
		p.ProduceWith(idempotentBatch(9, 0, 5, "gap"), ProduceOptions{Acks: AcksAll})
	}
	p.rs.pmu.Lock()
	n := len(p.rs.pending)
	p.rs.pmu.Unlock()
	if n != 0 {
		t.Fatalf("%d proposals still pending", n)
	}
}
