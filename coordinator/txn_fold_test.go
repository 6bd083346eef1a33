package coordinator

import (
	"context"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// queuedLen is the number of adds queued on id's transaction.
func (e *txnEnv) queuedLen(id string) int {
	e.c.mu.Lock()
	s := e.c.shards[0]
	e.c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.txns[id]; t != nil {
		return len(t.queued)
	}
	return 0
}

// waitQueued polls until n adds are queued on id's transaction.
func (e *txnEnv) waitQueued(id string, n int) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.queuedLen(id) != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d adds queued on %s, want %d", e.queuedLen(id), id, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// states decodes id's records in the log, oldest first.
func (e *txnEnv) states(id string) []*txnMeta {
	e.t.Helper()
	var out []*txnMeta
	for _, r := range e.log.records() {
		rid, t, ok, err := decodeTxnRecord(r)
		if err != nil || !ok {
			e.t.Fatalf("undecodable record: %v", err)
		}
		if rid == id {
			out = append(out, t)
		}
	}
	return out
}

func sortedParts(t *txnMeta) []TxnPartition {
	var ps []TxnPartition
	for p := range t.parts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
	return ps
}

// committingV5 returns a coordinator over log whose transaction "tx"
// (producer pid) committed tpA with EndTxn v5 at epoch, its markers held
// (e.markers.block) at the epoch the EndTxn answered, next. BrokerAddWait
// is a minute.
func committingV5(t *testing.T, log *memLog) (e *txnEnv, pid int64, epoch, next int16) {
	t.Helper()
	e = newTxnEnv(t, log, func(c *TxnConfig) { c.BrokerAddWait = time.Minute })
	e.markers.block = make(chan struct{})
	pid, epoch = e.mustInit("tx")
	wantCode(t, "add", e.addV5("tx", pid, epoch, tpA), 0)
	r := e.end(5, "tx", pid, epoch, true)
	if r.ErrorCode != 0 {
		t.Fatalf("v5 commit: %+v", r)
	}
	return e, pid, epoch, r.ProducerEpoch
}

// The next transaction's add, waiting for the previous one's markers, is
// folded into the completion: one record, Ongoing with the new partitions
// at the epoch the EndTxn answered, where Kafka writes CompleteCommit and
// then the add. An add of a stale epoch is fenced at once, not queued. A
// coordinator
// loading the log finds the next transaction ongoing, and it commits.
func TestTxnCompletionFoldsQueuedAdd(t *testing.T) {
	log := &memLog{}
	e, pid, epoch, next := committingV5(t, log)
	before := len(e.states("tx"))

	added := make(chan int16, 1)
	go func() { added <- e.addV5("tx", pid, next, tpB, tpC) }()
	e.waitQueued("tx", 1)
	wantCode(t, "an add of the previous epoch", e.addV5("tx", pid, epoch, tpB), kerr.ProducerFenced.Code)
	if n := e.queuedLen("tx"); n != 1 {
		t.Fatalf("%d adds queued after a stale one, want 1", n)
	}
	close(e.markers.block)
	wantCode(t, "the next transaction's add", <-added, 0)
	if n := e.queuedLen("tx"); n != 0 {
		t.Fatalf("%d adds left queued", n)
	}

	written := e.states("tx")[before:]
	if len(written) != 1 {
		var states []string
		for _, w := range written {
			states = append(states, w.state.String())
		}
		t.Fatalf("records written after the markers: %v, want one (Ongoing)", states)
	}
	w := written[0]
	if w.state != txnOngoing || w.producerID != pid || w.epoch != next || w.tv != 2 {
		t.Fatalf("folded record: state %s, producer %d/%d, tv %d; want Ongoing, %d/%d, tv 2", w.state, w.producerID, w.epoch, w.tv, pid, next)
	}
	if got := sortedParts(w); len(got) != 2 || got[0] != tpC && got[1] != tpC || got[0] != tpB && got[1] != tpB {
		t.Fatalf("folded record's partitions %v, want %v and %v", got, tpB, tpC)
	}
	if len(e.markers.snapshot()) != 1 {
		t.Fatalf("marker calls: %v", e.markers.snapshot())
	}

	// A coordinator loading the log serves the next transaction.
	l := newTxnEnv(t, log, nil)
	if d := l.describe("tx"); d.State != "Ongoing" || d.ProducerEpoch != next || len(d.Topics) != 2 {
		t.Fatalf("after a load: state %s epoch %d topics %v", d.State, d.ProducerEpoch, d.Topics)
	}
	e.c.Close()
	if r := l.end(5, "tx", pid, next, true); r.ErrorCode != 0 {
		t.Fatalf("commit after a load: %+v", r)
	}
	l.waitState("tx", "CompleteCommit")
	calls := l.markers.snapshot()
	if len(calls) != 1 || len(calls[0].parts) != 2 || !calls[0].m.Commit {
		t.Fatalf("markers after a load: %+v", calls)
	}
}

// A folded write that fails takes the adds with it: the completion is
// retried alone (CompleteCommit), and the waiting add then writes itself,
// as it would have without the fold.
func TestTxnCompletionFoldFails(t *testing.T) {
	log := &memLog{}
	e, pid, _, next := committingV5(t, log)
	before := len(e.states("tx"))
	added := make(chan int16, 1)
	go func() { added <- e.addV5("tx", pid, next, tpB) }()
	e.waitQueued("tx", 1)
	log.mu.Lock()
	log.failNext = true
	log.mu.Unlock()
	close(e.markers.block)
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case c := <-added:
			wantCode(t, "the add after the failed fold", c, 0)
			var states []string
			for _, w := range e.states("tx")[before:] {
				states = append(states, w.state.String())
			}
			if len(states) != 2 || states[0] != "CompleteCommit" || states[1] != "Ongoing" {
				t.Fatalf("records after the failed fold: %v, want CompleteCommit, Ongoing", states)
			}
			log.mu.Lock()
			failed := log.failed
			log.mu.Unlock()
			if len(failed) != 1 || len(failed[0]) != 1 {
				t.Fatalf("failed appends: %v, want the folded record", failed)
			}
			if _, f, _, err := decodeTxnRecord(failed[0][0]); err != nil || f.state != txnOngoing || len(f.parts) != 1 {
				t.Fatalf("the failed append: %+v (%v), want the fold (Ongoing, one partition)", f, err)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the add did not answer after the failed fold")
		}
		e.clk.Advance(txnRetryBackoff) // the completion's retry
		time.Sleep(time.Millisecond)
	}
}

// After a TV2 epoch overflow, the folded record is the new producer id's
// transaction at epoch 0, its previous producer id the new one (as the
// add's own transition from CompleteCommit would write), so a KIP-360
// retry of InitProducerId with the old id and epoch is fenced.
func TestTxnCompletionFoldAfterOverflow(t *testing.T) {
	log := &memLog{}
	seed := &txnMeta{id: "ov", producerID: 500, prevProducerID: -1, nextProducerID: -1, epoch: math.MaxInt16 - 1, lastEpoch: -1,
		timeoutMs: 60_000, state: txnOngoing, parts: map[TxnPartition]struct{}{tpA: {}}, startMs: 1, updateMs: 2, tv: 2}
	_ = log.Append(context.Background(), []Record{txnRecord(seed)})
	e := newTxnEnv(t, log, func(c *TxnConfig) { c.BrokerAddWait = time.Minute })
	e.markers.block = make(chan struct{})
	r := e.end(5, "ov", 500, math.MaxInt16-1, true)
	if r.ErrorCode != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("overflow: %+v", r)
	}
	added := make(chan int16, 1)
	go func() { added <- e.addV5("ov", 1000, 0, tpB) }()
	e.waitQueued("ov", 1)
	close(e.markers.block)
	wantCode(t, "the new id's add", <-added, 0)
	states := e.states("ov")
	last := states[len(states)-1]
	if last.state != txnOngoing || last.producerID != 1000 || last.epoch != 0 || last.prevProducerID != 1000 {
		t.Fatalf("folded record: %s producer %d/%d prev %d; want Ongoing 1000/0 prev 1000", last.state, last.producerID, last.epoch, last.prevProducerID)
	}
	if r := e.init("ov", 4, 60_000, 500, math.MaxInt16-1); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("InitProducerId with the old id and epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(r.ErrorCode))
	}
}
