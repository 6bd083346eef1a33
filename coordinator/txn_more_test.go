package coordinator

import (
	"context"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTxnRecordsRoundTrip(t *testing.T) {
	in := &txnMeta{id: "tx", producerID: 9, prevProducerID: 8, nextProducerID: 10, epoch: 3, lastEpoch: -1,
		timeoutMs: 1234, state: txnPrepareCommit, startMs: 100, updateMs: 200, tv: 2,
		parts: map[TxnPartition]struct{}{tpC: {}, tpA: {}, tpB: {}}}
	r := txnRecord(in)
	id, out, ok, err := decodeTxnRecord(r)
	if err != nil || !ok || id != "tx" {
		t.Fatal(id, ok, err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n%+v\n%+v", out, in)
	}
	// The value is version 1 (flexible) with the tagged fields; topics in
	// order.
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil || v.Version != 1 || v.PreviousProducerID != 8 || v.NextProducerID != 10 || v.ClientTransactionVersion != 2 {
		t.Fatalf("value: %+v %v", v, err)
	}
	if len(v.Topics) != 2 || v.Topics[0].Topic != "a" || !reflect.DeepEqual(v.Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("topics: %+v", v.Topics)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil || k.Version != 0 || k.TransactionalID != "tx" {
		t.Fatalf("key: %+v %v", k, err)
	}
	// Empty writes null topics, as Kafka.
	in.state, in.parts = txnEmpty, map[TxnPartition]struct{}{}
	nullTopics := kmsg.NewTxnMetadataValue()
	nullTopics.Version, nullTopics.ProducerID, nullTopics.ProducerEpoch, nullTopics.TimeoutMillis = 1, 9, 3, 1234
	nullTopics.StartTimestamp, nullTopics.LastUpdateTimestamp = 100, 200
	nullTopics.PreviousProducerID, nullTopics.NextProducerID, nullTopics.ClientTransactionVersion = 8, 10, 2
	if got, want := txnRecord(in).Value, nullTopics.AppendTo(nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("empty:\n%x\nwant\n%x", got, want)
	}
	// A version 0 value (Kafka 3.x) reads with no tagged fields.
	v0 := kmsg.NewTxnMetadataValue()
	v0.Version, v0.ProducerID, v0.ProducerEpoch, v0.State, v0.StartTimestamp = 0, 5, 1, txnOngoing, 7
	v0.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "a", Partitions: []int32{0}}}
	_, out, ok, err = decodeTxnRecord(Record{Key: r.Key, Value: v0.AppendTo(nil)})
	if err != nil || !ok || out.state != txnOngoing || out.prevProducerID != -1 || out.nextProducerID != -1 || len(out.parts) != 1 {
		t.Fatalf("v0: %+v %v", out, err)
	}
	// A tombstone; an unknown value version is an error; another key
	// version is skipped.
	if id, out, ok, err := decodeTxnRecord(txnTombstone("tx")); id != "tx" || out != nil || !ok || err != nil {
		t.Fatal("tombstone", id, out, ok, err)
	}
	bad := kmsg.NewTxnMetadataValue()
	bad.Version = 9
	if _, _, _, err := decodeTxnRecord(Record{Key: r.Key, Value: bad.AppendTo(nil)}); err == nil {
		t.Fatal("value version 9 read")
	}
	k.Version = 1
	if _, _, ok, err := decodeTxnRecord(Record{Key: k.AppendTo(nil), Value: r.Value}); ok || err != nil {
		t.Fatal("key version 1 not skipped", ok, err)
	}
}

func TestTxnLoadReplay(t *testing.T) {
	log := &memLog{}
	e := newTxnEnv(t, log, nil)
	pEmpty, _ := e.mustInit("empty")
	pOn, eOn := e.mustInit("ongoing")
	wantCode(t, "add", e.add(3, "ongoing", pOn, eOn, tpA, tpC), 0)
	pC, eC := e.mustInit("committed")
	wantCode(t, "add", e.add(3, "committed", pC, eC, tpA), 0)
	wantCode(t, "commit", e.end(3, "committed", pC, eC, true).ErrorCode, 0)
	e.waitState("committed", "CompleteCommit")
	pA, eA := e.mustInit("aborted")
	wantCode(t, "add", e.add(3, "aborted", pA, eA, tpB), 0)
	wantCode(t, "abort", e.end(3, "aborted", pA, eA, false).ErrorCode, 0)
	e.waitState("aborted", "CompleteAbort")
	before := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
	for _, id := range []string{"empty", "ongoing", "committed", "aborted"} {
		before[id] = e.describe(id)
	}
	e.c.Close()

	e2 := newTxnEnv(t, log, nil)
	for id, want := range before {
		if got := e2.describe(id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s after Load:\n%+v\nwant\n%+v", id, got, want)
		}
	}
	if len(e2.markers.snapshot()) != 0 {
		t.Fatal("markers sent for completed transactions")
	}
	// The loaded transactions go on.
	wantCode(t, "commit loaded", e2.end(3, "ongoing", pOn, eOn, true).ErrorCode, 0)
	e2.waitState("ongoing", "CompleteCommit")
	r := e2.init("empty", 4, 60_000, -1, -1)
	if r.ErrorCode != 0 || r.ProducerID != pEmpty || r.ProducerEpoch != 1 {
		t.Fatalf("init loaded: %+v", r)
	}
}

func TestTxnLoadCompletesPrepared(t *testing.T) {
	log := &memLog{}
	for _, tm := range []*txnMeta{
		{id: "pc", producerID: 7, prevProducerID: -1, nextProducerID: -1, epoch: 2, lastEpoch: -1, timeoutMs: 60_000,
			state: txnPrepareCommit, parts: map[TxnPartition]struct{}{tpA: {}, tpG: {}}, startMs: 1, updateMs: 2},
		{id: "pa", producerID: 8, prevProducerID: -1, nextProducerID: -1, epoch: 4, lastEpoch: -1, timeoutMs: 60_000,
			state: txnPrepareAbort, parts: map[TxnPartition]struct{}{tpB: {}}, startMs: 1, updateMs: 2},
	} {
		_ = log.Append(context.Background(), []Record{txnRecord(tm)})
	}
	e := newTxnEnv(t, log, nil)
	e.waitState("pc", "CompleteCommit")
	e.waitState("pa", "CompleteAbort")
	got := map[int64]markerCall{}
	for _, c := range e.markers.snapshot() {
		got[c.m.ProducerID] = c
	}
	if c := got[7]; !c.m.Commit || c.m.ProducerEpoch != 2 || c.m.CoordinatorEpoch != 5 || !reflect.DeepEqual(c.parts, []TxnPartition{tpG, tpA}) {
		t.Fatalf("pc markers: %+v", c)
	}
	if c := got[8]; c.m.Commit || c.m.ProducerEpoch != 4 || !reflect.DeepEqual(c.parts, []TxnPartition{tpB}) {
		t.Fatalf("pa markers: %+v", c)
	}
}

func TestTxnTimeoutAbort(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	r := e.init("tx", 4, 30_000, -1, -1)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	e.clk.Advance(20 * time.Second) // two checks, not yet timed out
	if d := e.describe("tx"); d.State != "Ongoing" {
		t.Fatalf("aborted early: %s", d.State)
	}
	e.clk.Advance(20 * time.Second)
	d := e.waitState("tx", "CompleteAbort")
	if d.ProducerEpoch != 1 {
		t.Fatalf("epoch after the timeout: %d", d.ProducerEpoch)
	}
	if calls := e.markers.snapshot(); len(calls) != 1 || calls[0].m.Commit || calls[0].m.ProducerEpoch != 1 {
		t.Fatalf("markers: %+v", calls)
	}
	// The late producer is fenced.
	wantCode(t, "late commit", e.end(3, "tx", pid, epoch, true).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "late commit v0", e.end(0, "tx", pid, epoch, true).ErrorCode, kerr.InvalidProducerEpoch.Code)
	wantCode(t, "late add", e.add(3, "tx", pid, epoch, tpA), kerr.ProducerFenced.Code)
}

func TestTxnExpiry(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, func(c *TxnConfig) {
		c.IDExpiration = 2 * time.Hour
		c.RemoveExpiredInterval = time.Hour
		c.AbortTimedOutInterval = 1000 * time.Hour // no timeouts here
	})
	e.mustInit("idle")
	pid, epoch := e.mustInit("busy")
	e.clk.Advance(90 * time.Minute)
	wantCode(t, "add", e.add(3, "busy", pid, epoch, tpA), 0)
	e.clk.Advance(60 * time.Minute) // idle: 2.5 h since its update
	if d := e.describe("idle"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("idle not expired: %+v", d)
	}
	if last := e.lastValue("idle"); last != nil {
		t.Fatalf("no tombstone: %+v", last)
	}
	// An ongoing transaction does not expire.
	e.clk.Advance(10 * time.Hour)
	if d := e.describe("busy"); d.ErrorCode != 0 {
		t.Fatalf("busy expired: %+v", d)
	}
	// The tombstone survives a reload.
	e.c.Close()
	e2 := newTxnEnv(t, e.log, nil)
	if d := e2.describe("idle"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("idle after reload: %+v", d)
	}
}

func TestTxnAppendFailure(t *testing.T) {
	log := &memLog{}
	e := newTxnEnv(t, log, nil)
	log.failNext = true
	wantCode(t, "init", e.init("tx", 4, 60_000, -1, -1).ErrorCode, kerr.NotCoordinator.Code)
	if d := e.describe("tx"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("failed init left %+v", d)
	}
	pid, epoch := e.mustInit("tx")
	log.failNext = true
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), kerr.NotCoordinator.Code)
	if d := e.describe("tx"); d.State != "Empty" || len(d.Topics) != 0 {
		t.Fatalf("failed add left %+v", d)
	}
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	log.failNext = true
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, kerr.NotCoordinator.Code)
	if d := e.describe("tx"); d.State != "Ongoing" {
		t.Fatalf("failed commit left %+v", d)
	}
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	e.waitState("tx", "CompleteCommit")
	// Errors as Kafka's appendTransactionToLog maps them.
	for _, c := range []struct {
		err  error
		want int16
	}{
		{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
		{kerr.NotLeaderForPartition, kerr.NotCoordinator.Code},
		{kerr.MessageTooLarge, kerr.UnknownServerError.Code},
		{context.DeadlineExceeded, kerr.CoordinatorNotAvailable.Code},
	} {
		if got := e.c.writeFailed(&txnShard{}, c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, code(got), code(c.want))
		}
	}
}

func TestTxnPartitionExists(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, func(c *TxnConfig) {
		c.PartitionExists = func(p TxnPartition) bool { return p.Topic != "b" }
	})
	pid, epoch := e.mustInit("tx")
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0, 1}}, {Topic: "b", Partitions: []int32{3}}}
	resp := e.c.AddPartitionsToTxn(context.Background(), req)
	got := map[TxnPartition]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got[TxnPartition{rt.Topic, rp.Partition}] = rp.ErrorCode
		}
	}
	want := map[TxnPartition]int16{tpA: kerr.OperationNotAttempted.Code, tpB: kerr.OperationNotAttempted.Code, tpC: kerr.UnknownTopicOrPartition.Code}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if d := e.describe("tx"); d.State != "Empty" {
		t.Fatalf("partitions added: %+v", d)
	}
}

func TestTxnVerifyOnly(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, epoch := e.mustInit("tx")
	verify := func(version int16, id string, pid int64, epoch int16, verifyOnly bool, parts ...TxnPartition) map[TxnPartition]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = version
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, verifyOnly
		for _, p := range parts {
			tx.Topics = append(tx.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: p.Topic, Partitions: []int32{p.Partition}})
		}
		req.Transactions = append(req.Transactions, tx)
		resp := e.c.AddPartitionsToTxn(context.Background(), req)
		if len(resp.Transactions) != 1 || resp.Transactions[0].TransactionalID != id || resp.ErrorCode != 0 {
			t.Fatalf("response: %+v", resp)
		}
		out := map[TxnPartition]int16{}
		for _, rt := range resp.Transactions[0].Topics {
			for _, rp := range rt.Partitions {
				out[TxnPartition{rt.Topic, rp.Partition}] = rp.ErrorCode
			}
		}
		return out
	}
	if got := verify(4, "tx", pid, epoch, false, tpA); got[tpA] != 0 {
		t.Fatalf("v4 add: %v", got)
	}
	got := verify(4, "tx", pid, epoch, true, tpA, tpB)
	if want := (map[TxnPartition]int16{tpA: 0, tpB: kerr.TransactionAbortable.Code}); !reflect.DeepEqual(got, want) {
		t.Fatalf("verify: %v, want %v", got, want)
	}
	if got := verify(4, "tx", pid, epoch+1, true, tpA); got[tpA] != kerr.ProducerFenced.Code {
		t.Fatalf("verify other epoch: %v", got)
	}
	if got := verify(4, "nope", pid, epoch, true, tpA); got[tpA] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("verify unknown id: %v", got)
	}
	if got := verify(4, "", pid, epoch, true, tpA); got[tpA] != kerr.InvalidRequest.Code {
		t.Fatalf("verify empty id: %v", got)
	}
	e.markers.block = make(chan struct{})
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	if got := verify(4, "tx", pid, epoch, true, tpA); got[tpA] != kerr.ConcurrentTransactions.Code {
		t.Fatalf("verify while prepared: %v", got)
	}
	close(e.markers.block)
	e.waitState("tx", "CompleteCommit")
	// Completed: the partitions left the transaction.
	if got := verify(4, "tx", pid, epoch, true, tpA); got[tpA] != kerr.TransactionAbortable.Code {
		t.Fatalf("verify after commit: %v", got)
	}
}

func TestTxnDescribeList(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	p1, e1 := e.mustInit("alpha")
	wantCode(t, "add", e.add(3, "alpha", p1, e1, tpA), 0)
	e.clk.Advance(5 * time.Second)
	p2, e2 := e.mustInit("beta")
	wantCode(t, "add", e.add(3, "beta", p2, e2, tpB), 0)
	p3, _ := e.mustInit("gamma")

	d := e.describe("alpha")
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != p1 || d.ProducerEpoch != e1 || d.TimeoutMillis != 60_000 ||
		len(d.Topics) != 1 || d.Topics[0].Topic != "a" || !reflect.DeepEqual(d.Topics[0].Partitions, []int32{0}) {
		t.Fatalf("describe: %+v", d)
	}
	if d := e.describe("gamma"); d.State != "Empty" || d.StartTimestamp != -1 {
		t.Fatalf("describe empty: %+v", d)
	}
	wantCode(t, "describe unknown", e.describe("nope").ErrorCode, kerr.TransactionalIDNotFound.Code)
	wantCode(t, "describe empty id", e.describe("").ErrorCode, kerr.InvalidRequest.Code)

	list := func(mod func(*kmsg.ListTransactionsRequest)) ([]string, *kmsg.ListTransactionsResponse) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = 2
		mod(req)
		resp := e.c.ListTransactions(context.Background(), req)
		var ids []string
		for _, s := range resp.TransactionStates {
			ids = append(ids, s.TransactionalID+":"+s.TransactionState)
		}
		return ids, resp
	}
	for _, c := range []struct {
		name string
		mod  func(*kmsg.ListTransactionsRequest)
		want []string
	}{
		{"all", func(*kmsg.ListTransactionsRequest) {}, []string{"alpha:Ongoing", "beta:Ongoing", "gamma:Empty"}},
		{"states", func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Empty", "CompleteAbort"} }, []string{"gamma:Empty"}},
		{"producer ids", func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{p2, p3} }, []string{"beta:Ongoing", "gamma:Empty"}},
		{"duration", func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 3000 }, []string{"alpha:Ongoing", "gamma:Empty"}},
		{"duration v0 ignored", func(r *kmsg.ListTransactionsRequest) { r.Version, r.DurationFilterMillis = 0, 3000 }, []string{"alpha:Ongoing", "beta:Ongoing", "gamma:Empty"}},
		{"pattern", func(r *kmsg.ListTransactionsRequest) { p := "(alpha|gam)"; r.TransactionalIDPattern = &p }, []string{"alpha:Ongoing"}},
		{"pattern and state", func(r *kmsg.ListTransactionsRequest) {
			p := ".*a"
			r.TransactionalIDPattern, r.StateFilters = &p, []string{"Ongoing"}
		}, []string{"alpha:Ongoing", "beta:Ongoing"}},
	} {
		got, resp := list(c.mod)
		if resp.ErrorCode != 0 || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v (%v), want %v", c.name, got, code(resp.ErrorCode), c.want)
		}
	}
	got, resp := list(func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Bogus", "Empty"} })
	if !reflect.DeepEqual(resp.UnknownStateFilters, []string{"Bogus"}) || !reflect.DeepEqual(got, []string{"gamma:Empty"}) {
		t.Fatalf("unknown state filter: %v %v", resp.UnknownStateFilters, got)
	}
	_, resp = list(func(r *kmsg.ListTransactionsRequest) { p := "(("; r.TransactionalIDPattern = &p })
	wantCode(t, "bad pattern", resp.ErrorCode, kerr.InvalidRegularExpression.Code)
}

func TestTxnV2EndTxn(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	r := e.end(5, "tx", pid, epoch, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != 1 {
		t.Fatalf("v5 commit: %+v", r)
	}
	e.waitState("tx", "CompleteCommit")
	if calls := e.markers.snapshot(); len(calls) != 1 || calls[0].m.ProducerEpoch != 1 || calls[0].m.TransactionVersion != 2 {
		t.Fatalf("markers: %+v", calls)
	}
	// A retry with the epoch before the bump: NONE, the current epoch.
	r = e.end(5, "tx", pid, epoch, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != 1 {
		t.Fatalf("v5 retry: %+v", r)
	}
	wantCode(t, "retry as abort", e.end(5, "tx", pid, epoch, false).ErrorCode, kerr.InvalidTxnState.Code)
	wantCode(t, "commit again", e.end(5, "tx", pid, 1, true).ErrorCode, kerr.InvalidTxnState.Code)
	wantCode(t, "old epoch", e.end(5, "tx", pid, 7, true).ErrorCode, kerr.ProducerFenced.Code)
	// Aborting with no partitions bumps the epoch too.
	r = e.end(5, "tx", pid, 1, false)
	if r.ErrorCode != 0 || r.ProducerEpoch != 2 {
		t.Fatalf("v5 empty abort: %+v", r)
	}
	e.waitState("tx", "CompleteAbort")
	if n := len(e.markers.snapshot()); n != 1 {
		t.Fatalf("markers for an empty abort: %d calls", n)
	}

	// The epoch overflows into a new producer id.
	log := &memLog{}
	seed := &txnMeta{id: "ov", producerID: 500, prevProducerID: -1, nextProducerID: -1, epoch: math.MaxInt16 - 1, lastEpoch: -1,
		timeoutMs: 60_000, state: txnOngoing, parts: map[TxnPartition]struct{}{tpA: {}}, startMs: 1, updateMs: 2, tv: 2}
	_ = log.Append(context.Background(), []Record{txnRecord(seed)})
	e2 := newTxnEnv(t, log, nil)
	e2.clk.Advance(0)
	r = e2.end(5, "ov", 500, math.MaxInt16-1, true)
	if r.ErrorCode != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("overflow: %+v", r)
	}
	d := e2.waitState("ov", "CompleteCommit")
	if d.ProducerID != 1000 || d.ProducerEpoch != 0 {
		t.Fatalf("after overflow: %+v", d)
	}
	if calls := e2.markers.snapshot(); len(calls) != 1 || calls[0].m.ProducerID != 500 || calls[0].m.ProducerEpoch != math.MaxInt16 {
		t.Fatalf("overflow markers: %+v", calls)
	}
	r = e2.end(5, "ov", 500, math.MaxInt16-1, true)
	if r.ErrorCode != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("retry after overflow: %+v", r)
	}
}

// addV5 sends AddPartitionsToTxn v5 (a broker adding partitions for a
// client of transaction version 2, as a Produce v12 does) and returns the
// first partition's error code.
func (e *txnEnv) addV5(id string, pid int64, epoch int16, parts ...TxnPartition) int16 {
	e.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = id, pid, epoch
	for _, p := range parts {
		tx.Topics = append(tx.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: p.Topic, Partitions: []int32{p.Partition}})
	}
	req.Transactions = append(req.Transactions, tx)
	resp := e.c.AddPartitionsToTxn(context.Background(), req)
	return resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
}

// A TV2 producer's next transaction may end (an abort of a transaction
// that added nothing, as franz-go sends when its TxnOffsetCommit met the
// previous transaction still completing) while the previous one's markers
// are still being written: the prepared state carries the epoch the
// previous EndTxn answered, so the request is not fenced but told to
// retry, and once the markers are written it ends with a bump. A retry of
// the previous EndTxn still answers as before.
func TestTxnV2EndDuringPreviousMarkers(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	e.markers.block = make(chan struct{})
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.addV5("tx", pid, epoch, tpA), 0)
	r := e.end(5, "tx", pid, epoch, true)
	if r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("v5 commit: %+v", r)
	}
	next := r.ProducerEpoch
	if d := e.describe("tx"); d.State != "PrepareCommit" || d.ProducerEpoch != next {
		t.Fatalf("state %s epoch %d", d.State, d.ProducerEpoch)
	}
	wantCode(t, "next transaction's abort", e.end(5, "tx", pid, next, false).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "next transaction's commit", e.end(5, "tx", pid, next, true).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "next transaction's add", e.addV5("tx", pid, next, tpB), kerr.ConcurrentTransactions.Code)
	wantCode(t, "retry of the commit", e.end(5, "tx", pid, epoch, true).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "retry as an abort", e.end(5, "tx", pid, epoch, false).ErrorCode, kerr.InvalidTxnState.Code)
	wantCode(t, "an older epoch", e.end(5, "tx", pid, epoch-1, false).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "a newer epoch", e.end(5, "tx", pid, next+1, false).ErrorCode, kerr.ProducerFenced.Code)
	close(e.markers.block)
	e.waitState("tx", "CompleteCommit")
	r = e.end(5, "tx", pid, next, false)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != next+1 {
		t.Fatalf("the next transaction's abort once completed: %+v", r)
	}
	e.waitState("tx", "CompleteAbort")

	// With ConcurrentWait, the end waits for the markers instead.
	w := newTxnEnv(t, &memLog{}, func(c *TxnConfig) { c.ConcurrentWait = time.Minute })
	w.markers.block = make(chan struct{})
	pid, epoch = w.mustInit("tx")
	wantCode(t, "add", w.addV5("tx", pid, epoch, tpA), 0)
	if r := w.end(5, "tx", pid, epoch, true); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("v5 commit: %+v", r)
	}
	ended := make(chan *kmsg.EndTxnResponse, 1)
	go func() { ended <- w.end(5, "tx", pid, epoch+1, false) }()
	select {
	case r := <-ended:
		t.Fatalf("the next end answered %+v while the markers were blocked", r)
	case <-time.After(50 * time.Millisecond):
	}
	close(w.markers.block)
	select {
	case r := <-ended:
		if r.ErrorCode != 0 || r.ProducerEpoch != epoch+2 {
			t.Fatalf("the next end once the commit completed: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next end did not answer once the commit completed")
	}
	w.waitState("tx", "CompleteAbort")
}

// BrokerAddWait: a v5 add (a broker's, for a Produce v12) waits for the
// previous transaction's markers longer than ConcurrentWait, which a
// client's AddPartitionsToTxn still gets.
func TestTxnBrokerAddWait(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, func(c *TxnConfig) { c.BrokerAddWait = time.Minute })
	e.markers.block = make(chan struct{})
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.addV5("tx", pid, epoch, tpA), 0)
	r := e.end(5, "tx", pid, epoch, true)
	if r.ErrorCode != 0 {
		t.Fatalf("v5 commit: %+v", r)
	}
	wantCode(t, "a client's add (ConcurrentWait 0)", e.add(3, "tx", pid, r.ProducerEpoch, tpB), kerr.ConcurrentTransactions.Code)
	added := make(chan int16, 1)
	go func() { added <- e.addV5("tx", pid, r.ProducerEpoch, tpB) }()
	select {
	case c := <-added:
		t.Fatalf("the v5 add answered %s while the markers were blocked", code(c))
	case <-time.After(50 * time.Millisecond):
	}
	close(e.markers.block)
	select {
	case c := <-added:
		wantCode(t, "the v5 add once the commit completed", c, 0)
	case <-time.After(10 * time.Second):
		t.Fatal("the v5 add did not answer once the commit completed")
	}
}

// After a TV2 epoch overflow, the producer id the completion moves to is
// the one the EndTxn answered: its next transaction's requests before the
// markers are written are told to retry, not that the id is unknown.
func TestTxnV2OverflowNextTransaction(t *testing.T) {
	log := &memLog{}
	seed := &txnMeta{id: "ov", producerID: 500, prevProducerID: -1, nextProducerID: -1, epoch: math.MaxInt16 - 1, lastEpoch: -1,
		timeoutMs: 60_000, state: txnOngoing, parts: map[TxnPartition]struct{}{tpA: {}}, startMs: 1, updateMs: 2, tv: 2}
	_ = log.Append(context.Background(), []Record{txnRecord(seed)})
	e := newTxnEnv(t, log, nil)
	e.markers.block = make(chan struct{})
	r := e.end(5, "ov", 500, math.MaxInt16-1, true)
	if r.ErrorCode != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("overflow: %+v", r)
	}
	wantCode(t, "add of the new id", e.addV5("ov", 1000, 0, tpB), kerr.ConcurrentTransactions.Code)
	wantCode(t, "abort of the new id", e.end(5, "ov", 1000, 0, false).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "an unknown id", e.end(5, "ov", 1001, 0, false).ErrorCode, kerr.InvalidProducerIDMapping.Code)
	close(e.markers.block)
	e.waitState("ov", "CompleteCommit")
	wantCode(t, "add of the new id once completed", e.addV5("ov", 1000, 0, tpB), 0)
}

func TestTxnUnloadStopsMarkers(t *testing.T) {
	log := &memLog{}
	e := newTxnEnv(t, log, nil)
	e.markers.block = make(chan struct{})
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	e.c.Unload(0)
	wantCode(t, "after unload", e.end(3, "tx", pid, epoch, true).ErrorCode, kerr.NotCoordinator.Code)
	// The goroutine gave up (its WriteMarkers saw the shard's context
	// end): nothing completed the transaction.
	if last := e.lastValue("tx"); last.state != txnPrepareCommit {
		t.Fatalf("state after unload: %v", last.state)
	}
	// Loaded again (a new leader epoch): the markers are sent again, with
	// the new coordinator epoch.
	if err := e.c.Load(0, 9, log); err != nil {
		t.Fatal(err)
	}
	close(e.markers.block)
	e.waitState("tx", "CompleteCommit")
	calls := e.markers.snapshot()
	if len(calls) == 0 || calls[len(calls)-1].m.CoordinatorEpoch != 9 {
		t.Fatalf("markers after reload: %+v", calls)
	}
	// A Dead record (never written by Kafka) reads as removed.
	dead := &txnMeta{id: "dead", producerID: 1, prevProducerID: -1, nextProducerID: -1, epoch: 0, lastEpoch: -1,
		timeoutMs: 1000, state: txnDead, parts: map[TxnPartition]struct{}{}, startMs: -1, updateMs: 1}
	_ = log.Append(context.Background(), []Record{txnRecord(dead)})
	if err := e.c.Load(0, 10, log); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "dead", e.describe("dead").ErrorCode, kerr.TransactionalIDNotFound.Code)
}

func TestTxnFenceTV2(t *testing.T) {
	log := &memLog{}
	seed := &txnMeta{id: "tx", producerID: 500, prevProducerID: -1, nextProducerID: -1, epoch: 3, lastEpoch: -1,
		timeoutMs: 60_000, state: txnOngoing, parts: map[TxnPartition]struct{}{tpA: {}}, startMs: 1, updateMs: 2, tv: 2}
	_ = log.Append(context.Background(), []Record{txnRecord(seed)})
	e := newTxnEnv(t, log, nil)
	// Started long ago (ms 1): the first check aborts it, bumping twice
	// (the fence, then TV2's bump at the end).
	e.clk.Advance(10 * time.Second)
	d := e.waitState("tx", "CompleteAbort")
	if d.ProducerEpoch != 5 {
		t.Fatalf("epoch after a TV2 timeout: %d, want 5", d.ProducerEpoch)
	}
	if calls := e.markers.snapshot(); len(calls) != 1 || calls[0].m.ProducerEpoch != 5 || calls[0].m.TransactionVersion != 2 {
		t.Fatalf("markers: %+v", calls)
	}
	// TV2's late producer, still at epoch 3, is fenced.
	wantCode(t, "late v5 commit", e.end(5, "tx", 500, 3, true).ErrorCode, kerr.ProducerFenced.Code)
	r := e.init("tx", 5, 60_000, -1, -1)
	if r.ErrorCode != 0 || r.ProducerEpoch != 6 {
		t.Fatalf("init after the abort: %+v", r)
	}
}

// gateLog is a memLog whose appends matching hold block until release is
// closed or the append's context is done (then it fails with the
// context's error). held receives each held append's first record.
type gateLog struct {
	*memLog
	hold    func(Record) bool
	held    chan Record
	release chan struct{}
}

func (l *gateLog) Append(ctx context.Context, recs []Record) error {
	if len(recs) > 0 && l.hold(recs[0]) {
		l.held <- recs[0]
		select {
		case <-l.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.memLog.Append(ctx, recs)
}

// holdPrepareAbort holds the first PrepareAbort appended.
func holdPrepareAbort() func(Record) bool {
	var once sync.Once
	return func(r Record) bool {
		_, t, ok, _ := decodeTxnRecord(r)
		first := false
		if ok && t != nil && t.state == txnPrepareAbort {
			once.Do(func() { first = true })
		}
		return first
	}
}

// TestTxnTimeoutAbortRecheck: the timeout check found two transactions
// past their timeout; while it aborts the first, the second's producer
// commits and begins a new transaction. That new transaction is not
// aborted nor its producer fenced (Kafka rechecks under the lock).
func TestTxnTimeoutAbortRecheck(t *testing.T) {
	gl := &gateLog{memLog: &memLog{}, hold: holdPrepareAbort(), held: make(chan Record, 1), release: make(chan struct{})}
	e := newTxnEnv(t, gl.memLog, nil)
	e.c.Unload(0)
	if err := e.c.Load(0, 5, gl); err != nil {
		t.Fatal(err)
	}
	type prod struct {
		pid   int64
		epoch int16
	}
	ps := map[string]prod{}
	for _, id := range []string{"x", "y"} {
		r := e.init(id, 4, 30_000, -1, -1)
		wantCode(t, "init "+id, r.ErrorCode, 0)
		ps[id] = prod{r.ProducerID, r.ProducerEpoch}
		wantCode(t, "add "+id, e.add(3, id, r.ProducerID, r.ProducerEpoch, tpA), 0)
	}
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		e.clk.Advance(40 * time.Second) // both past their 30 s
	}()
	first, _, _, _ := decodeTxnRecord(<-gl.held)
	other := "x"
	if first == "x" {
		other = "y"
	}
	p := ps[other]
	wantCode(t, "commit "+other, e.end(3, other, p.pid, p.epoch, true).ErrorCode, 0)
	e.waitState(other, "CompleteCommit")
	wantCode(t, "add next "+other, e.add(3, other, p.pid, p.epoch, tpB), 0)
	close(gl.release)
	select {
	case <-advanced:
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout check did not return")
	}
	e.waitState(first, "CompleteAbort")
	if d := e.describe(other); d.State != "Ongoing" || d.ProducerEpoch != p.epoch {
		t.Fatalf("%s's new transaction: %s at epoch %d, want Ongoing at %d", other, d.State, d.ProducerEpoch, p.epoch)
	}
	wantCode(t, "commit next "+other, e.end(3, other, p.pid, p.epoch, true).ErrorCode, 0)
	e.waitState(other, "CompleteCommit")
}

// TestTxnTimeoutAbortUnload: a timed-out abort whose write is under way
// when the shard is unloaded is cancelled with it (the shard's context,
// not a background one).
func TestTxnTimeoutAbortUnload(t *testing.T) {
	gl := &gateLog{memLog: &memLog{}, hold: holdPrepareAbort(), held: make(chan Record, 1), release: make(chan struct{})}
	e := newTxnEnv(t, gl.memLog, nil)
	e.c.Unload(0)
	if err := e.c.Load(0, 5, gl); err != nil {
		t.Fatal(err)
	}
	r := e.init("tx", 4, 30_000, -1, -1)
	wantCode(t, "add", e.add(3, "tx", r.ProducerID, r.ProducerEpoch, tpA), 0)
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		e.clk.Advance(40 * time.Second)
	}()
	<-gl.held
	e.c.Unload(0)
	select {
	case <-advanced:
	case <-time.After(5 * time.Second):
		t.Fatal("the abort's write outlived the shard")
	}
	close(gl.release)
}

// DescribeTransactions' TransactionStartTimeMs is the transaction's start
// in Ongoing and kept through PrepareCommit/CompleteCommit and
// PrepareAbort/CompleteAbort (Kafka's completeTransitionTo requires a
// start time for the Complete states, and handleDescribeTransactions
// answers txnStartTimestamp whatever the state); it is -1 only in Empty
// (InitProducerId clears it). kafka-transactions.sh describe then shows a
// duration for a completed transaction too, and so does sluice txn
// describe.
func TestTxnDescribeStartAfterCompletion(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, epoch := e.mustInit("tx")
	start := e.clk.Now().UnixMilli()
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	e.clk.Advance(time.Second)
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	if d := e.waitState("tx", "CompleteCommit"); d.StartTimestamp != start {
		t.Fatalf("CompleteCommit: start %d, want the transaction's, %d", d.StartTimestamp, start)
	}
	e.clk.Advance(time.Second)
	start = e.clk.Now().UnixMilli()
	wantCode(t, "add again", e.add(3, "tx", pid, epoch, tpB), 0)
	wantCode(t, "abort", e.end(3, "tx", pid, epoch, false).ErrorCode, 0)
	if d := e.waitState("tx", "CompleteAbort"); d.StartTimestamp != start {
		t.Fatalf("CompleteAbort: start %d, want the transaction's, %d", d.StartTimestamp, start)
	}
	e.mustInit("tx")
	if d := e.describe("tx"); d.State != "Empty" || d.StartTimestamp != -1 {
		t.Fatalf("after InitProducerId: %s, start %d; want Empty, -1", d.State, d.StartTimestamp)
	}
}
