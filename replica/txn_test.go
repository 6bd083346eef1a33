package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// txnBatch is n records from producer pid at epoch and seq, transactional
// or not, with record timestamps ts (ms).
func txnBatch(pid int64, epoch int16, seq int32, n int, txn bool, ts int64) []byte {
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, epoch, seq, txn
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: ts, Key: []byte(fmt.Sprint("k", i)), Value: make([]byte, 100)}
	}
	return batch.Build(o, recs)
}

// txnStep is one step of a transaction scenario on a partition: a
// produce (data set) or a marker (marker set), its expected first offset
// or error, then the last stable offset and high watermark expected.
type txnStep struct {
	name    string
	data    []byte
	marker  *TxnMarker
	offset  int64
	err     error
	lso, hw int64
}

// txnScenario: producers 1 and 2 interleave transactions with a plain
// producer's batch; producer 1's first is aborted, 2's committed; the
// stale markers and the bad batches are refused.
func txnScenario() []txnStep {
	return []txnStep{
		{name: "p1 begins", data: txnBatch(1, 0, 0, 2, true, 1000), offset: 0, lso: 0, hw: 2},
		{name: "p2 begins", data: txnBatch(2, 0, 0, 1, true, 1000), offset: 2, lso: 0, hw: 3},
		{name: "plain batch", data: build(batch.Record{Timestamp: 1000, Value: []byte("plain")}), offset: 3, lso: 0, hw: 4},
		{name: "p1 continues", data: txnBatch(1, 0, 2, 1, true, 1000), offset: 4, lso: 0, hw: 5},
		{name: "p1 aborts", marker: &TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 5}, offset: 5, lso: 2, hw: 6},
		{name: "p2 commits", marker: &TxnMarker{ProducerID: 2, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 5}, offset: 6, lso: 7, hw: 7},
		{name: "stale coordinator epoch", marker: &TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 4}, err: ErrTransactionCoordinatorFenced, lso: 7, hw: 7},
		{name: "p1 begins again at epoch 1", data: txnBatch(1, 1, 0, 2, true, 2000), offset: 7, lso: 7, hw: 9},
		{name: "marker at an old epoch", marker: &TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 6}, err: ErrInvalidProducerEpoch, lso: 7, hw: 9},
		{name: "non-transactional batch inside a transaction", data: txnBatch(1, 1, 2, 1, false, 2000), err: ErrInvalidTxnState, lso: 7, hw: 9},
		{name: "transactional batch without producer", data: txnBatch(-1, -1, -1, 1, true, 2000), err: ErrInvalidRecord, lso: 7, hw: 9},
		{name: "p3 marker with no transaction", marker: &TxnMarker{ProducerID: 3, ProducerEpoch: 0, CoordinatorEpoch: 1}, offset: 9, lso: 7, hw: 10},
	}
}

// txnRunner says how a scenario's steps run: do runs a step (a raft
// cluster ticks while it waits), settle waits for a condition.
type txnRunner struct {
	do     func(op func())
	settle func(what string, cond func() bool)
}

// direct runs steps as they come (a one-voter group commits on its own).
func direct(t *testing.T) txnRunner {
	return txnRunner{do: func(op func()) { op() }, settle: func(what string, cond func() bool) { waitFor(t, what, cond) }}
}

// runTxnSteps runs steps on write (a raft partition's leader) and checks
// each replica in views (write alone when none) after each.
func runTxnSteps(t *testing.T, r txnRunner, steps []txnStep, write *Partition, views ...*Partition) {
	t.Helper()
	ctx := context.Background()
	if len(views) == 0 {
		views = []*Partition{write}
	}
	for _, st := range steps {
		var off int64
		var err error
		r.do(func() {
			if st.marker != nil {
				off, err = write.WriteTxnMarker(ctx, *st.marker)
				return
			}
			var pd *Pending
			if pd, err = write.Produce(st.data); err == nil {
				res, werr := pd.Wait(ctx)
				off, err = res.BaseOffset, werr
			}
		})
		switch {
		case st.err != nil && !errors.Is(err, st.err):
			t.Fatalf("%s: err %v, want %v", st.name, err, st.err)
		case st.err == nil && (err != nil || off != st.offset):
			t.Fatalf("%s: offset %d, %v; want %d", st.name, off, err, st.offset)
		}
		for i, p := range views {
			r.settle(fmt.Sprintf("%s: replica %d's high watermark %d", st.name, i, st.hw), func() bool { return p.HighWatermark() == st.hw })
			if got := p.LastStableOffset(); got != st.lso {
				t.Fatalf("%s: replica %d's last stable offset %d, want %d", st.name, i, got, st.lso)
			}
		}
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 10000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// checkTxnState checks what txnScenario leaves on p: read_committed
// fetches and their aborted lists, the producers' state, the batches.
func checkTxnState(t *testing.T, p *Partition) {
	t.Helper()
	for _, tc := range []struct {
		from     int64
		next     int64 // end of the records returned
		aborted  []AbortedTxn
		maxBytes int
	}{
		{from: 0, next: 7, aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}}, maxBytes: 1 << 20},
		{from: 3, next: 7, aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}}, maxBytes: 1 << 20},
		{from: 6, next: 7, maxBytes: 1 << 20},
		{from: 7, next: 7, maxBytes: 1 << 20}, // at the last stable offset: nothing
		{from: 0, next: 2, aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}}, maxBytes: 1},
	} {
		fr, err := p.FetchCommitted(tc.from, tc.maxBytes)
		if err != nil {
			t.Fatalf("FetchCommitted(%d): %v", tc.from, err)
		}
		next := tc.from
		if fr.Records.Bytes > 0 {
			next = fr.Records.NextOffset
		}
		fr.Records.Release()
		if next != tc.next || !reflect.DeepEqual(fr.AbortedTransactions, tc.aborted) || fr.LastStableOffset != 7 || fr.HighWatermark != 10 {
			t.Fatalf("FetchCommitted(%d, %d): records to %d, aborted %v, lso %d, hw %d; want to %d, aborted %v, lso 7, hw 10",
				tc.from, tc.maxBytes, next, fr.AbortedTransactions, fr.LastStableOffset, fr.HighWatermark, tc.next, tc.aborted)
		}
	}
	// read_uncommitted reads past the last stable offset, aborted records
	// included, and answers the last stable offset.
	fr, err := p.Fetch(0, 1<<20)
	fr.Records.Release()
	if err != nil || fr.Records.NextOffset != 10 || fr.LastStableOffset != 7 || fr.AbortedTransactions != nil {
		t.Fatalf("Fetch: to %d, lso %d, aborted %v, %v", fr.Records.NextOffset, fr.LastStableOffset, fr.AbortedTransactions, err)
	}
	want := []ProducerInfo{
		{ProducerID: 1, ProducerEpoch: 1, LastSequence: 1, LastTimestamp: 2000, CoordinatorEpoch: 5, CurrentTxnStartOffset: 7},
		{ProducerID: 2, ProducerEpoch: 0, LastSequence: 0, LastTimestamp: 3000, CoordinatorEpoch: 5, CurrentTxnStartOffset: -1},
		{ProducerID: 3, ProducerEpoch: 0, LastSequence: -1, LastTimestamp: 3000, CoordinatorEpoch: 1, CurrentTxnStartOffset: -1},
	}
	// Markers are stamped with the partition's clock (3000).
	got := p.Producers()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Producers:\n got %+v\nwant %+v", got, want)
	}
	type seen struct {
		first   int64
		pid     int64
		txn     bool
		control bool
		commit  bool
		n       int
	}
	var batches []seen
	if _, next, err := p.ScanBatches(nil, 0, 100, func(b *ScannedBatch) error {
		batches = append(batches, seen{b.First, b.Producer.ID, b.Producer.Transactional, b.Control, b.Commit, len(b.Records)})
		return nil
	}); err != nil || next != 10 {
		t.Fatalf("ScanBatches: next %d, %v", next, err)
	}
	wantBatches := []seen{
		{0, 1, true, false, false, 2}, {2, 2, true, false, false, 1}, {3, -1, false, false, false, 1},
		{4, 1, true, false, false, 1}, {5, 1, true, true, false, 0}, {6, 2, true, true, true, 0},
		{7, 1, true, false, false, 2}, {9, 3, true, true, false, 0},
	}
	if !reflect.DeepEqual(batches, wantBatches) {
		t.Fatalf("ScanBatches:\n got %v\nwant %v", batches, wantBatches)
	}
	var plain []int64
	if _, _, err := p.ScanRecords(nil, 0, 100, func(first int64, recs []Record) error {
		plain = append(plain, first)
		return nil
	}); err != nil || fmt.Sprint(plain) != "[0 2 3 4 7]" {
		t.Fatalf("ScanRecords hands the data batches only: %v, %v", plain, err)
	}
}

// A single replica (a one-voter group): transactional produce, commit and abort markers, the
// last stable offset, read_committed fetches; the state is the same after
// a clean reopen and after a crash (rebuilt from the log, or from the
// producer snapshots written at rolls with small segments).
func TestTxnSingleReplica(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  TopicConfig
	}{
		{"one segment", testConfig()},
		{"small segments", smallSegments()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Log.FlushMessages = 1
			mem := vfs.NewMem()
			var clock testClock
			clock.ms.Store(3000)
			opts := Options{}
			opts.Log.Now = clock.now
			p := openAt(t, mem, cfg, opts)
			runTxnSteps(t, direct(t), txnScenario(), p)
			checkTxnState(t, p)

			crashed := mem.CrashClone(vfs.CrashOptions{})
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			p = openAt(t, mem, cfg, opts)
			checkTxnState(t, p)
			p.Close()

			p = openAt(t, crashed, cfg, opts)
			defer p.Close()
			checkTxnState(t, p)
			// The transaction still ongoing ends after the restart.
			off, err := p.WriteTxnMarker(context.Background(), TxnMarker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 5})
			if err != nil || off != 10 || p.LastStableOffset() != 11 {
				t.Fatalf("abort after a crash: offset %d, lso %d, %v", off, p.LastStableOffset(), err)
			}
			fr, err := p.FetchCommitted(7, 1<<20)
			fr.Records.Release()
			if err != nil || !reflect.DeepEqual(fr.AbortedTransactions, []AbortedTxn{{ProducerID: 1, FirstOffset: 7}}) {
				t.Fatalf("FetchCommitted(7): %v, %v", fr.AbortedTransactions, err)
			}
		})
	}
}

// The producer snapshot carries the transaction state (version 3; version
// 2, a raft snapshot's, lists the aborted transactions too) and a version
// 1 snapshot still loads, with no transaction.
func TestSnapshotTxnRoundTrip(t *testing.T) {
	ps := producerState{}
	tl := newTxnLog(ps)
	h := batch.Header{ProducerID: 4, ProducerEpoch: 1, BaseSequence: 0, LastOffsetDelta: 1, BaseOffset: 10, MaxTimestamp: 5, Attributes: batch.TransactionalBit}
	applyBatch(ps, &tl, &h, nil, -1)
	m := buildMarker(TxnMarker{ProducerID: 5, ProducerEpoch: 2, CoordinatorEpoch: 9}, 77)
	mh, _ := batch.ParseHeader(m)
	mh.BaseOffset = 12
	applyBatch(ps, &tl, &mh, m, -1)
	listed := []abortedTxn{{pid: 6, first: 1, last: 3, lso: 4}}
	got, aborted, err := decodeSnapshotTxn(encodeSnapshotTxn(ps, listed))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ps) || !reflect.DeepEqual(aborted, listed) {
		t.Fatalf("version 2 round trip:\n got %+v %v\nwant %+v %v", got, aborted, ps, listed)
	}
	v3 := encodeSnapshot(ps)
	if got, aborted, err := decodeSnapshotTxn(v3); err != nil || !reflect.DeepEqual(got, ps) || aborted != nil || binary.BigEndian.Uint16(v3[4:]) != 3 {
		t.Fatalf("version 3 round trip: %+v %v %v", got, aborted, err)
	}
	if e := got[4]; e.txnFirst != 10 || e.coordinatorEpoch != -1 {
		t.Fatalf("producer 4: %+v", e)
	}
	if e := got[5]; e.txnFirst != -1 || e.coordinatorEpoch != 9 || len(e.batches) != 0 || e.lastTimestamp != 77 {
		t.Fatalf("producer 5 (a marker only): %+v", e)
	}

	// Version 1, as the previous release wrote it: producer 4 with one batch.
	v1 := []byte{0x53, 0x4c, 0x50, 0x53, 0, 1, 0, 0, 0, 0}
	body := []byte{0, 0, 0, 1}
	body = append(body, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 1)
	body = append(body, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 11, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	v1 = append(v1, body...)
	putCRC(v1)
	old, aborted, err := decodeSnapshotTxn(v1)
	if err != nil {
		t.Fatal(err)
	}
	e := old[4]
	if len(old) != 1 || aborted != nil || e.epoch != 1 || e.lastTimestamp != 5 || e.txnFirst != -1 || e.coordinatorEpoch != -1 ||
		!reflect.DeepEqual(e.batches, []producerBatch{{firstSeq: 0, lastSeq: 1, baseOffset: 10, lastOffset: 11, logAppendTime: -1}}) {
		t.Fatalf("version 1: %+v %+v", old, e)
	}
}

// putCRC sets a snapshot's CRC.
func putCRC(b []byte) {
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[snapshotHeader:], castagnoli))
}

// A raft partition: the leader writes the markers through the group, and
// every replica derives the same transaction state (producers, last
// stable offset, aborted transactions) at the same offsets; a follower
// that crashes rebuilds it from its log; a follower refuses a marker.
func TestTxnRaftPartition(t *testing.T) {
	c := newPCluster(t, 3, 1, 11)
	var clock testClock
	clock.ms.Store(3000)
	c.now = clock.now
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	lead := c.nodes[1].parts[g]
	r := raftRunner(c)
	views := []*Partition{lead, c.nodes[2].parts[g], c.nodes[3].parts[g]}
	runTxnSteps(t, r, txnScenario(), lead, views...)
	for _, p := range views {
		checkTxnState(t, p)
	}
	var nl *NotLeaderError
	if _, err := c.nodes[2].parts[g].WriteTxnMarker(context.Background(), TxnMarker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 5}); !errors.As(err, &nl) {
		t.Fatalf("a marker to a follower: %v", err)
	}

	c.crash(3, 5)
	c.start(3)
	p3 := c.nodes[3].parts[g]
	c.drive("node 3 to catch up", func() bool { return p3.HighWatermark() == 10 })
	checkTxnState(t, p3)

	// The ongoing transaction ends on every replica, the one that
	// restarted included.
	var off int64
	var err error
	r.do(func() {
		off, err = lead.WriteTxnMarker(context.Background(), TxnMarker{ProducerID: 1, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 6})
	})
	if err != nil || off != 10 {
		t.Fatalf("commit: offset %d, %v", off, err)
	}
	for i, p := range []*Partition{lead, c.nodes[2].parts[g], p3} {
		c.drive("the commit everywhere", func() bool { return p.HighWatermark() == 11 })
		if lso := p.LastStableOffset(); lso != 11 {
			t.Fatalf("replica %d: last stable offset %d after the commit", i, lso)
		}
		fr, err := p.FetchCommitted(7, 1<<20)
		fr.Records.Release()
		if err != nil || fr.Records.NextOffset != 11 || fr.AbortedTransactions != nil {
			t.Fatalf("replica %d: FetchCommitted(7) to %d, aborted %v, %v", i, fr.Records.NextOffset, fr.AbortedTransactions, err)
		}
	}
}

// The last stable offset as the high watermark moves (Kafka's
// firstUnstableOffset): an ongoing transaction holds it at its first
// offset, and so does a decided one until its marker is below the high
// watermark (a marker written but not committed may still be replaced).
func TestTxnLogLastStableOffset(t *testing.T) {
	ps := producerState{}
	tl := newTxnLog(ps)
	var aborts []abortedTxn
	data := func(pid, off int64) {
		h := batch.Header{ProducerID: pid, BaseSequence: -1, BaseOffset: off, Attributes: batch.TransactionalBit}
		applyBatch(ps, &tl, &h, nil, -1)
	}
	marker := func(pid, off int64, commit bool) {
		m := buildMarker(TxnMarker{ProducerID: pid, Commit: commit}, 1)
		h, _ := batch.ParseHeader(m)
		h.BaseOffset = off
		if a, ok, _ := applyBatch(ps, &tl, &h, m, -1); ok {
			aborts = append(aborts, a)
		}
	}
	for _, st := range []struct {
		name string
		do   func()
		hw   int64
		lso  int64
	}{
		{"nothing", func() {}, 3, 3},
		{"p1 begins at 3", func() { data(1, 3) }, 4, 3},
		{"p2 begins at 4", func() { data(2, 4) }, 5, 3},
		{"p1 commits at 5, not replicated", func() { marker(1, 5, true) }, 5, 3},
		{"p1's marker committed", func() {}, 6, 4},
		{"p2 aborts at 6, not replicated", func() { marker(2, 6, false) }, 6, 4},
		{"p2's marker committed", func() {}, 7, 7},
	} {
		st.do()
		tl.replicated(st.hw)
		if got := tl.lso(st.hw); got != st.lso {
			t.Fatalf("%s: last stable offset %d at high watermark %d, want %d", st.name, got, st.hw, st.lso)
		}
	}
	if want := []abortedTxn{{pid: 2, first: 4, last: 6, lso: 7}}; !reflect.DeepEqual(aborts, want) || len(tl.unreplicated) != 0 {
		t.Fatalf("aborted %v (want %v), unreplicated %v", aborts, want, tl.unreplicated)
	}
}

// raftRunner runs each step in a goroutine while c ticks.
func raftRunner(c *pcluster) txnRunner {
	return txnRunner{
		do: func(op func()) {
			done := make(chan struct{})
			go func() { defer close(done); op() }()
			c.drive("a step to complete", func() bool {
				select {
				case <-done:
					return true
				default:
					return false
				}
			})
		},
		settle: c.drive,
	}
}

// A replica that joins by a raft snapshot (the leader's log no longer
// starts at index 1: retention by size; records stamped now so that
// retention.ms removes none) gets the transaction state with the producer state
// the snapshot carries: the aborted transaction below its first entry,
// the ongoing one, the last stable offset.
func TestTxnJoinBySnapshot(t *testing.T) {
	c := newPCluster(t, 3, 1, 14)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.RetentionBytes = 3072
	c.startAll()
	g := c.groups[0]
	c.waitLeader(g)
	c.produceN(g, 0, 60)
	lead := c.leaderOf(g)
	r := raftRunner(c)
	var err error
	var first1, first2 int64
	r.do(func() {
		var pd *Pending
		if pd, err = lead.Produce(txnBatch(1, 0, 0, 2, true, time.Now().UnixMilli())); err == nil {
			var res segment.AppendResult
			res, err = pd.Wait(context.Background())
			first1 = res.BaseOffset
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r.do(func() {
		_, err = lead.WriteTxnMarker(context.Background(), TxnMarker{ProducerID: 1, CoordinatorEpoch: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	r.do(func() {
		var pd *Pending
		if pd, err = lead.Produce(txnBatch(2, 0, 0, 1, true, time.Now().UnixMilli())); err == nil {
			var res segment.AppendResult
			res, err = pd.Wait(context.Background())
			first2 = res.BaseOffset
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c.produceN(g, 60, 5)
	c.settleOn(g, 1, 2, 3)
	for _, n := range c.up() {
		if _, err := n.parts[g].DeleteOldSegments(); err != nil {
			t.Fatal(err)
		}
	}
	if lead.log.FirstIndex() <= 1 || lead.LogStartOffset() > first1 {
		t.Fatalf("retention left the leader's log at index %d, offset %d; the test needs it past 1 and at most %d", lead.log.FirstIndex(), lead.LogStartOffset(), first1)
	}
	c.join(4, 1, 2, 3)
	c.addLearner(g, 4)
	c.settleOn(g, 1, 2, 3, 4)
	p4 := c.nodes[4].parts[g]
	if p4.LogStartOffset() != lead.LogStartOffset() {
		t.Fatalf("node 4 starts at %d, the leader at %d", p4.LogStartOffset(), lead.LogStartOffset())
	}
	for i, p := range []*Partition{lead, p4} {
		if lso := p.LastStableOffset(); lso != first2 {
			t.Fatalf("replica %d: last stable offset %d, want %d", i, lso, first2)
		}
		fr, err := p.FetchCommitted(first1, 1<<20)
		fr.Records.Release()
		if err != nil || !reflect.DeepEqual(fr.AbortedTransactions, []AbortedTxn{{ProducerID: 1, FirstOffset: first1}}) {
			t.Fatalf("replica %d: FetchCommitted(%d): aborted %v, %v", i, first1, fr.AbortedTransactions, err)
		}
	}
	if got, want := p4.Producers(), lead.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("node 4's producers:\n got %+v\nwant %+v", got, want)
	}
}

// The group coordinator's transactional offset commits on an internal
// partition: AppendRecordsAs stamps the producer (no sequence, so any
// number of them), holds the last stable offset until the marker, and
// ScanBatches hands the batches with their producer and the marker.
func TestAppendRecordsAs(t *testing.T) {
	p := openTest(t, testConfig(), Options{Internal: true})
	ctx := context.Background()
	tag := ProducerTag{ID: 9, Epoch: 3, Transactional: true}
	for i, want := range []int64{0, 1} {
		off, err := p.AppendRecordsAs(ctx, 1000, tag, AppendOptions{}, []Record{{Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}})
		if err != nil || off != want {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("last stable offset %d inside the transaction", lso)
	}
	if _, err := p.AppendRecordsAs(ctx, 1000, ProducerTag{ID: 9, Epoch: 2, Transactional: true}, AppendOptions{}, []Record{{Key: []byte("x")}}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("an older epoch: %v", err)
	}
	if off, err := p.WriteTxnMarker(ctx, TxnMarker{ProducerID: 9, ProducerEpoch: 3, Commit: true}); err != nil || off != 2 {
		t.Fatalf("marker: offset %d, %v", off, err)
	}
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("last stable offset %d after the commit", lso)
	}
	var got []string
	if _, _, err := p.ScanBatches(nil, 0, 100, func(b *ScannedBatch) error {
		got = append(got, fmt.Sprintf("%d %+v control=%v commit=%v n=%d", b.First, b.Producer, b.Control, b.Commit, len(b.Records)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0 {ID:9 Epoch:3 Transactional:true} control=false commit=false n=1",
		"1 {ID:9 Epoch:3 Transactional:true} control=false commit=false n=1",
		"2 {ID:9 Epoch:3 Transactional:true} control=true commit=true n=0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ScanBatches:\n got %q\nwant %q", got, want)
	}
	// A scan stopped by fn's error resumes at that batch, the marker too.
	_, next, err := p.ScanBatches(nil, 0, 100, func(b *ScannedBatch) error {
		if b.Control {
			return errors.New("stop")
		}
		return nil
	})
	if err == nil || next != 2 {
		t.Fatalf("stopped scan: next %d, %v", next, err)
	}
}

// Two markers for one producer proposed at once, the newer coordinator
// epoch's first: both pass the leader's check (neither is written yet),
// and raft's order decides. The one with the older coordinator epoch,
// written second, is refused (TRANSACTION_COORDINATOR_FENCED) and changes
// nothing, on every replica and in a replay of the log: the producer's
// coordinator epoch never goes back.
func TestTxnRaftMarkerCoordinatorEpochOrder(t *testing.T) {
	c := newPCluster(t, 3, 1, 12)
	var clock testClock
	clock.ms.Store(3000)
	c.now = clock.now
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	lead := c.nodes[1].parts[g]
	r := raftRunner(c)
	ctx := context.Background()
	runTxnSteps(t, r, []txnStep{
		{name: "p1 begins", data: txnBatch(1, 0, 0, 2, true, 1000), offset: 0, lso: 0, hw: 2},
	}, lead)

	// Hold the group's worker so that both markers are checked and posted
	// before either is proposed.
	pending, release := holdWorker(t, r, lead)
	type answer struct {
		off int64
		err error
	}
	write := func(coordEpoch int32, want int) chan answer {
		ch := make(chan answer, 1)
		go func() {
			off, err := lead.WriteTxnMarker(ctx, TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: coordEpoch})
			ch <- answer{off, err}
		}()
		waitFor(t, fmt.Sprintf("the marker of coordinator epoch %d to be posted", coordEpoch), func() bool { return pending() == want })
		return ch
	}
	newer := write(6, 1)
	older := write(5, 2)
	release()
	var a6, a5 answer
	r.do(func() { a6, a5 = <-newer, <-older })
	if a6.err != nil || a6.off != 2 {
		t.Fatalf("coordinator epoch 6's marker: offset %d, %v", a6.off, a6.err)
	}
	if !errors.Is(a5.err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("coordinator epoch 5's marker, proposed after 6's: %v, want %v", a5.err, ErrTransactionCoordinatorFenced)
	}
	// The leader refused it in proposal order (txn_guard.go): it never
	// reached the log, where it would sit as a stray marker.

	check := func(what string, p *Partition) {
		t.Helper()
		c.drive(what+": the high watermark", func() bool { return p.HighWatermark() == 3 })
		var got []ProducerInfo
		for _, pi := range p.Producers() {
			if pi.ProducerID == 1 {
				got = append(got, pi)
			}
		}
		if len(got) != 1 || got[0].CoordinatorEpoch != 6 || got[0].CurrentTxnStartOffset != -1 {
			t.Fatalf("%s: producer 1 %+v, want coordinator epoch 6 and no transaction", what, got)
		}
		if lso := p.LastStableOffset(); lso != 3 {
			t.Fatalf("%s: last stable offset %d, want 3", what, lso)
		}
		fr, err := p.FetchCommitted(0, 1<<20)
		fr.Records.Release()
		if want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0}}; err != nil || !reflect.DeepEqual(fr.AbortedTransactions, want) {
			t.Fatalf("%s: aborted %v, %v; want %v", what, fr.AbortedTransactions, err, want)
		}
	}
	for i, n := range []uint64{1, 2, 3} {
		check(fmt.Sprintf("replica %d", i), c.nodes[n].parts[g])
	}
	// A replica that restarts replays the same decision from its log.
	c.crash(3, 5)
	c.start(3)
	check("replica 3 restarted", c.nodes[3].parts[g])
}

// Every replica applies markers in log order with the same check
// (applyBatch): a marker written after one of a newer coordinator epoch
// (two leaders' proposals, each checked by its own leader) changes
// nothing and says why; the producer keeps the newer coordinator epoch.
func TestApplyBatchStaleMarker(t *testing.T) {
	ps := producerState{}
	tl := newTxnLog(ps)
	data := txnBatch(1, 0, 0, 2, true, 1000)
	h, err := batch.ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := applyBatch(ps, &tl, &h, data, -1); err != nil {
		t.Fatal(err)
	}
	var aborts []abortedTxn
	marker := func(off int64, coordEpoch int32) error {
		m := buildMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: coordEpoch}, 1000)
		mh, err := batch.ParseHeader(m)
		if err != nil {
			t.Fatal(err)
		}
		mh.BaseOffset = off
		a, ok, err := applyBatch(ps, &tl, &mh, m, -1)
		if ok {
			aborts = append(aborts, a)
		}
		return err
	}
	if err := marker(2, 6); err != nil {
		t.Fatalf("coordinator epoch 6's marker: %v", err)
	}
	if err := marker(3, 5); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("coordinator epoch 5's marker after 6's: %v, want %v", err, ErrTransactionCoordinatorFenced)
	}
	if e := ps[1]; e == nil || e.coordinatorEpoch != 6 || e.txnFirst != -1 {
		t.Fatalf("producer 1 after the stale marker: %+v", e)
	}
	if len(aborts) != 1 || aborts[0].last != 2 {
		t.Fatalf("aborted %+v, want the one ended at offset 2", aborts)
	}
}

// txnV2Scenario: producer 1's markers of transaction version 2 carry the
// epoch bumped at the end of the transaction (KIP-890) and are checked
// with KIP-1228's rule (markerEpochV2); a version 1 marker keeps the
// old one.
func txnV2Scenario() []txnStep {
	v2 := func(epoch int16, commit bool) *TxnMarker {
		return &TxnMarker{ProducerID: 1, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: 5, TransactionVersion: 2}
	}
	return []txnStep{
		{name: "p1 begins at epoch 0", data: txnBatch(1, 0, 0, 2, true, 1000), offset: 0, lso: 0, hw: 2},
		{name: "v2 marker at the transaction's own epoch", marker: v2(0, true), err: ErrInvalidProducerEpoch, lso: 0, hw: 2},
		{name: "v2 commit at the bumped epoch", marker: v2(1, true), offset: 2, lso: 3, hw: 3},
		{name: "the v2 commit sent again (no transaction ongoing)", marker: v2(1, true), offset: 3, lso: 4, hw: 4},
		{name: "p1's next transaction at epoch 1", data: txnBatch(1, 1, 0, 1, true, 2000), offset: 4, lso: 4, hw: 5},
		{name: "the previous transaction's v2 marker, late", marker: v2(1, true), err: ErrInvalidProducerEpoch, lso: 4, hw: 5},
		{name: "v2 marker below the epoch", marker: v2(0, false), err: ErrInvalidProducerEpoch, lso: 4, hw: 5},
		{name: "v2 abort at the bumped epoch", marker: v2(2, false), offset: 5, lso: 6, hw: 6},
		// The abort's bumped epoch left p1 no batch at epoch 2: its
		// sequences start at 0 (Kafka's checkSequence: the last
		// sequence of an entry with an epoch and no batch is none).
		{name: "p1's next transaction at epoch 2, not at sequence 0", data: txnBatch(1, 2, 3, 1, true, 3000), err: ErrOutOfOrderSequence, lso: 6, hw: 6},
		{name: "p1's next transaction at epoch 2", data: txnBatch(1, 2, 0, 1, true, 3000), offset: 6, lso: 6, hw: 7},
		{name: "v1 marker below the epoch", marker: &TxnMarker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 5}, err: ErrInvalidProducerEpoch, lso: 6, hw: 7},
		{name: "v1 marker at the epoch (the old rule)", marker: &TxnMarker{ProducerID: 1, ProducerEpoch: 2, Commit: true, CoordinatorEpoch: 5}, offset: 7, lso: 8, hw: 8},
		{name: "v2 marker of an unknown producer", marker: &TxnMarker{ProducerID: 3, ProducerEpoch: 4, CoordinatorEpoch: 1, TransactionVersion: 2}, offset: 8, lso: 9, hw: 9},
		{name: "p3, known from its marker only, not at sequence 0", data: txnBatch(3, 4, 7, 1, true, 4000), err: ErrOutOfOrderSequence, lso: 9, hw: 9},
		{name: "p3 at sequence 0", data: txnBatch(3, 4, 0, 1, true, 4000), offset: 9, lso: 9, hw: 10},
	}
}

// A marker of transaction version 2 is checked with KIP-1228's epoch
// rule on a one-voter group's leader and on a raft leader of three; the
// replicas agree.
func TestTxnV2MarkerEpoch(t *testing.T) {
	t.Run("one voter", func(t *testing.T) {
		cfg := testConfig()
		cfg.Log.FlushMessages = 1
		p := openAt(t, vfs.NewMem(), cfg, Options{})
		defer p.Close()
		runTxnSteps(t, direct(t), txnV2Scenario(), p)
	})
	t.Run("raft", func(t *testing.T) {
		c, g := txnRaftGroup(t, 13)
		views := []*Partition{c.nodes[1].parts[g], c.nodes[2].parts[g], c.nodes[3].parts[g]}
		runTxnSteps(t, raftRunner(c), txnV2Scenario(), views[0], views...)
	})
}

func TestMarkerEpochV2(t *testing.T) {
	for _, tc := range []struct {
		epoch, current int16
		ongoing, ok    bool
	}{
		{5, 4, true, true},
		{5, 4, false, true},
		{4, 4, false, true}, // sent again
		{4, 4, true, false}, // late: the next transaction is ongoing
		{3, 4, false, false},
		{3, 4, true, false},
	} {
		if got := markerEpochV2(tc.epoch, tc.current, tc.ongoing); got != tc.ok {
			t.Errorf("markerEpochV2(%d, %d, ongoing %t) = %t, want %t", tc.epoch, tc.current, tc.ongoing, got, tc.ok)
		}
	}
}

// txnRaftGroup starts a three-node raft cluster (seed: its randomness)
// with one group, g, that node 1 leads.
func txnRaftGroup(t *testing.T, seed uint64) (c *pcluster, g GroupID) {
	t.Helper()
	c = newPCluster(t, 3, 1, seed)
	c.startAll()
	g = c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	return c, g
}

// holdWorker holds the raft worker of lead's group (until release) so
// that appends are checked and posted but not proposed; pending is how
// many are posted. The in-sync replicas are read once first and kept
// (reading them again would wait for the held worker).
func holdWorker(t *testing.T, r txnRunner, lead *Partition) (pending func() int, release func()) {
	t.Helper()
	rs := lead.rs
	var isrErr error
	r.do(func() { _, isrErr = rs.inSync(lead, time.Now(), true) })
	if isrErr != nil {
		t.Fatal(isrErr)
	}
	lead.mu.Lock()
	rs.isrAt = time.Now().Add(time.Hour)
	lead.mu.Unlock()
	started, held := make(chan struct{}), make(chan struct{})
	if err := rs.host.post(rs.id, func(*raft.RawNode) error {
		close(started)
		<-held
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	return func() int {
		rs.pmu.Lock()
		defer rs.pmu.Unlock()
		return len(rs.pending)
	}, func() { close(held) }
}

// A broker's transactional batch without sequence (TxnOffsetCommit's
// offsets) begins the producer's next transaction at the epoch of its
// previous version 2 marker, and that marker, sent again, is posted
// before the batch is written: it passes the check against the written
// state (no transaction ongoing: a marker sent again), but is proposed
// after the batch, so the check in proposal order (admitMarkerLocked)
// refuses it (KIP-1228's rule against the newest proposal) instead of
// letting it end the new transaction.
func TestTxnRaftV2MarkerProposalOrder(t *testing.T) {
	c, g := txnRaftGroup(t, 14)
	lead := c.nodes[1].parts[g]
	r := raftRunner(c)
	ctx := context.Background()
	v2 := TxnMarker{ProducerID: 1, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 5, TransactionVersion: 2}
	runTxnSteps(t, r, []txnStep{
		{name: "p1 begins", data: txnBatch(1, 0, 0, 2, true, 1000), offset: 0, lso: 0, hw: 2},
		{name: "v2 commit", marker: &v2, offset: 2, lso: 3, hw: 3},
	}, lead)

	pending, release := holdWorker(t, r, lead)
	data, marker := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := lead.AppendRecordsAs(ctx, 2000, ProducerTag{ID: 1, Epoch: 1, Transactional: true}, AppendOptions{}, []Record{{Key: []byte("k")}})
		data <- err
	}()
	waitFor(t, "the batch to be posted", func() bool { return pending() == 1 })
	go func() {
		_, err := lead.WriteTxnMarker(ctx, v2)
		marker <- err
	}()
	waitFor(t, "the marker to be posted", func() bool { return pending() == 2 })
	release()
	var derr, merr error
	r.do(func() { derr, merr = <-data, <-marker })
	if derr != nil {
		t.Fatalf("the transactional batch: %v", derr)
	}
	if !errors.Is(merr, ErrInvalidProducerEpoch) {
		t.Fatalf("the v2 marker proposed after the batch: %v, want %v", merr, ErrInvalidProducerEpoch)
	}
	c.drive("the batch committed", func() bool { return lead.HighWatermark() == 4 })
	if lso := lead.LastStableOffset(); lso != 3 {
		t.Fatalf("last stable offset %d, want 3 (the new transaction still ongoing)", lso)
	}

	// A producer's sequenced batch in flight (checkProducer's inflight
	// list) refuses such a marker before it is posted.
	v2.ProducerID = 2
	runTxnSteps(t, r, []txnStep{
		{name: "p2 begins", data: txnBatch(2, 0, 0, 1, true, 1000), offset: 4, lso: 3, hw: 5},
		{name: "p2's v2 commit", marker: &v2, offset: 5, lso: 3, hw: 6},
	}, lead)
	pending, release = holdWorker(t, r, lead)
	pd, err := lead.Produce(txnBatch(2, 1, 0, 1, true, 2000))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := lead.WriteTxnMarker(ctx, v2)
		marker <- err
	}()
	waitFor(t, "the marker to be refused or posted", func() bool { return len(marker) == 1 || pending() == 2 })
	posted := pending() == 2
	release()
	if posted {
		t.Fatal("the v2 marker behind p2's batch in flight was posted, not refused at once")
	}
	r.do(func() { merr = <-marker })
	if !errors.Is(merr, ErrInvalidProducerEpoch) {
		t.Fatalf("the v2 marker behind p2's batch in flight: %v, want %v", merr, ErrInvalidProducerEpoch)
	}
	var res segment.AppendResult
	r.do(func() { res, derr = pd.Wait(ctx) })
	if derr != nil || res.BaseOffset != 6 {
		t.Fatalf("p2's batch: offset %d, %v", res.BaseOffset, derr)
	}
}
