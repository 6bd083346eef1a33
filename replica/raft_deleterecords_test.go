package replica

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// TestDeleteRecordsEntryRoundTrip: a DeleteRecords entry is stored as an
// internal batch of its kind (taking no offset) and read back as the
// bytes proposed.
func TestDeleteRecordsEntryRoundTrip(t *testing.T) {
	l, err := segment.Open(vfs.NewMem(), "/p", DefaultTopicConfig().Log, segment.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := newLogStorage(l, raftpb.HardState{}, raftpb.ConfState{Voters: []uint64{1}})
	del := deleteRecordsEntry(1)
	ents := []raftpb.Entry{
		{Index: 1, Term: 1},
		{Index: 2, Term: 1, Data: valueBatch("a", "b")},
		{Index: 3, Term: 1, Data: del},
	}
	w, err := s.appendEntries(ents)
	if err != nil {
		t.Fatal(err)
	}
	if w[2].Kind != segment.EntryDeleteRecords || w[2].Result.BaseOffset != 2 || l.LogEndOffset() != 2 {
		t.Fatalf("stored as %v at %d, log end offset %d", w[2].Kind, w[2].Result.BaseOffset, l.LogEndOffset())
	}
	got, err := s.Entries(1, 4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got[2].Type != raftpb.EntryNormal || !bytes.Equal(got[2].Data, del) {
		t.Fatalf("read back %v %x, want the proposal %x", got[2].Type, got[2].Data, del)
	}
	if k, payload, ok, err := internalEntry(got[2].Data); !ok || err != nil || k != segment.EntryDeleteRecords {
		t.Fatalf("internalEntry: %v %v %v", k, ok, err)
	} else if off, err := decodeDeleteRecords(payload); err != nil || off != 1 {
		t.Fatalf("decoded %d, %v", off, err)
	}
	if _, _, ok, _ := internalEntry(got[1].Data); ok {
		t.Fatal("a record batch taken for an internal entry")
	}
	// Another internal kind as a normal entry's data is refused.
	bad := batch.BuildInternal(0, 0, uint8(segment.EntryEmpty), nil)
	if _, err := s.appendEntries([]raftpb.Entry{{Index: 4, Term: 1, Data: bad}}); err == nil {
		t.Fatal("an empty entry's internal batch as entry data was stored")
	}
	if _, err := decodeDeleteRecords([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1}); !errors.Is(err, errBadDeleteRecords) {
		t.Fatalf("version 2: %v", err)
	}
}

// TestDeleteRecordsReplicated: three replicas; DeleteRecords on the
// leader moves every replica's log start offset (mid-segment), a
// follower that was down while the leader's log start passed its whole
// log catches up by snapshot and ends at the same log start offset, a
// leader change keeps it, and a crashed follower replays it.
func TestDeleteRecordsReplicated(t *testing.T) {
	c := newPCluster(t, 3, 1, 3)
	c.cfg.Log.SegmentBytes = 1024
	c.startAll()
	g := c.groups[0]
	c.campaign(1)
	lead := c.nodes[1].parts[g]
	produce := func(p *Partition, n int, from int) {
		t.Helper()
		for i := range n {
			if _, err := c.produceWait(p, valueBatch(fmt.Sprintf("v%d", from+i)), AcksAll); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A delete entry takes no offset, so settle (equal log end offsets
	// and high watermarks) may return before a follower applied it: wait
	// for the log start offsets themselves.
	lsos := func(want int64) {
		t.Helper()
		c.drive(fmt.Sprintf("every replica's log start offset at %d", want), func() bool {
			for _, n := range c.up() {
				if n.parts[g].LogStartOffset() != want {
					return false
				}
			}
			return true
		})
	}
	produce(lead, 40, 0)
	c.settle()
	if got := c.deleteRecords(lead, 17); got != "low watermark 17" {
		t.Fatalf("DeleteRecords: %s", got)
	}
	if lead.LogStartOffset() != 17 {
		t.Fatalf("the leader returned before applying: log start offset %d", lead.LogStartOffset())
	}
	c.settle()
	lsos(17)
	// Node 3 stops; the leader's log start offset moves past everything
	// node 3 holds.
	lastOf3 := c.nodes[3].parts[g].log.LastIndex()
	c.stop(3)
	produce(lead, 100, 40)
	if got := c.deleteRecords(lead, 131); got != "low watermark 131" {
		t.Fatalf("DeleteRecords: %s", got)
	}
	if first := lead.log.FirstIndex(); first <= lastOf3+1 {
		t.Fatalf("the leader's first index %d: node 3 (last index %d) would not need a snapshot", first, lastOf3)
	}
	if base := lead.log.SnapshotSegments(); len(base) > 0 {
		t.Fatalf("a delete topic has segments below its raft start: %v", base)
	}
	c.start(3)
	c.settle()
	lsos(131)
	if got, want := records(t, c.nodes[3].parts[g]), records(t, lead); fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 9 {
		t.Fatalf("node 3 serves %v, the leader %v", got, want)
	}
	// A leader change keeps it; node 2 crashes and replays.
	c.moveAway(lead)
	c.crash(2, 5)
	c.start(2)
	c.settle()
	lsos(131)
	newLead := c.waitLeader(g)
	produce(newLead, 3, 200)
	if got := c.deleteRecords(newLead, -1); got != "low watermark 143" {
		t.Fatalf("DeleteRecords: %s", got)
	}
	c.settle()
	lsos(143)
}
