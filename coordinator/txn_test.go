package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeMarkers is a MarkerWriter that records every call. answer, if set,
// decides each call's errors; block, if set, is received from before a
// call returns (the test releases calls one by one).
type fakeMarkers struct {
	mu     sync.Mutex
	calls  []markerCall
	answer func(n int, m Marker, parts []TxnPartition) map[TxnPartition]error
	block  chan struct{}
}

type markerCall struct {
	m     Marker
	parts []TxnPartition
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, m Marker, parts []TxnPartition) map[TxnPartition]error {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, markerCall{m, append([]TxnPartition(nil), parts...)})
	if f.answer != nil {
		return f.answer(len(f.calls), m, parts)
	}
	return nil
}

func (f *fakeMarkers) snapshot() []markerCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]markerCall(nil), f.calls...)
}

// txnEnv is a transaction coordinator over one loaded partition (every id
// maps to it), a manual clock, a memLog and fake markers.
type txnEnv struct {
	t       *testing.T
	c       *TxnCoordinator
	log     *memLog
	clk     *manualClock
	markers *fakeMarkers
	nextPID int64
}

func newTxnEnv(t *testing.T, log *memLog, mutate func(*TxnConfig)) *txnEnv {
	t.Helper()
	e := &txnEnv{t: t, log: log, clk: newManualClock(), markers: &fakeMarkers{}, nextPID: 1000}
	var mu sync.Mutex
	cfg := TxnConfig{
		Partitions: 1,
		Clock:      e.clk,
		Logger:     slog.New(slog.DiscardHandler),
		ProducerIDs: func() (int64, error) {
			mu.Lock()
			defer mu.Unlock()
			e.nextPID++
			return e.nextPID - 1, nil
		},
		Markers: e.markers,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	e.c = NewTxn(cfg)
	t.Cleanup(e.c.Close)
	if err := e.c.Load(0, 5, log); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *txnEnv) init(id string, version int16, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return e.c.InitProducerID(context.Background(), req)
}

// mustInit initializes id (v4, 60 s timeout) and returns its producer id
// and epoch.
func (e *txnEnv) mustInit(id string) (int64, int16) {
	e.t.Helper()
	r := e.init(id, 4, 60_000, -1, -1)
	if r.ErrorCode != 0 {
		e.t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(r.ErrorCode))
	}
	return r.ProducerID, r.ProducerEpoch
}

// add sends AddPartitionsToTxn (v0-v3) and returns the first partition's
// error code (every partition's must agree).
func (e *txnEnv) add(version int16, id string, pid int64, epoch int16, parts ...TxnPartition) int16 {
	e.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, p := range parts {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = p.Topic, []int32{p.Partition}
		req.Topics = append(req.Topics, rt)
	}
	resp := e.c.AddPartitionsToTxn(context.Background(), req)
	code := int16(-100)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if code != -100 && rp.ErrorCode != code {
				e.t.Fatalf("partitions disagree: %v", resp.Topics)
			}
			code = rp.ErrorCode
		}
	}
	return code
}

func (e *txnEnv) end(version int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return e.c.EndTxn(context.Background(), req)
}

func (e *txnEnv) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return e.c.DescribeTransactions(context.Background(), req).TransactionStates[0]
}

// waitState polls id's state until it is want (markers are written in the
// background).
func (e *txnEnv) waitState(id string, want string) kmsg.DescribeTransactionsResponseTransactionState {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := e.describe(id)
		if d.State == want {
			return d
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: state %s (error %v), want %s", id, d.State, kerr.ErrorForCode(d.ErrorCode), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// lastValue decodes the newest record of id in the log (nil: tombstone).
func (e *txnEnv) lastValue(id string) *txnMeta {
	e.t.Helper()
	var last *txnMeta
	found := false
	for _, r := range e.log.records() {
		rid, t, ok, err := decodeTxnRecord(r)
		if err != nil || !ok {
			e.t.Fatalf("undecodable record: %v", err)
		}
		if rid == id {
			last, found = t, true
		}
	}
	if !found {
		e.t.Fatalf("no record of %s", id)
	}
	return last
}

func code(c int16) string { return fmt.Sprint(kerr.ErrorForCode(c)) }

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, code(got), code(want))
	}
}

var (
	tpA = TxnPartition{"a", 0}
	tpB = TxnPartition{"a", 1}
	tpC = TxnPartition{"b", 3}
	tpG = TxnPartition{"__consumer_offsets", 7}
)

func TestTxnPartitionFor(t *testing.T) {
	// Java's String.hashCode, computed by hand over UTF-16 code units.
	for _, c := range []struct {
		id   string
		want int32
	}{
		{"", 0},
		{"a", 47},                   // 97
		{"hello", 22},               // 99162322
		{"polygenelubricants", 0},   // Integer.MIN_VALUE: Utils.abs gives 0
		{"my-transactional-id", 46}, // -959806496
		{"txn-😀", 6},                // -858070106, a surrogate pair
		{"producer-1", 30},          // 1752578230
		{"zzzzzzzzzz", 36},          // -1580979136
	} {
		if got := TxnPartitionFor(c.id, 50); got != c.want {
			t.Errorf("TxnPartitionFor(%q) = %d, want %d", c.id, got, c.want)
		}
	}
}

func TestTxnCommitFlow(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, epoch := e.mustInit("tx")
	if pid != 1000 || epoch != 0 {
		t.Fatalf("first InitProducerId: %d/%d, want 1000/0", pid, epoch)
	}
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA, tpC), 0)
	wantCode(t, "add again", e.add(3, "tx", pid, epoch, tpA), 0)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version = 3
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx", pid, epoch, "g"
	wantCode(t, "add offsets", e.c.AddOffsetsToTxn(context.Background(), ao, tpG).ErrorCode, 0)
	d := e.describe("tx")
	if d.State != "Ongoing" || len(d.Topics) != 3 || d.StartTimestamp != e.clk.Now().UnixMilli() || d.TimeoutMillis != 60_000 {
		t.Fatalf("ongoing: %+v", d)
	}

	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	e.waitState("tx", "CompleteCommit")
	calls := e.markers.snapshot()
	if len(calls) != 1 {
		t.Fatalf("marker calls: %+v", calls)
	}
	wantM := Marker{ProducerID: pid, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 5}
	wantParts := []TxnPartition{tpG, tpA, tpC}
	if calls[0].m != wantM || !reflect.DeepEqual(calls[0].parts, wantParts) {
		t.Fatalf("markers: %+v, want %+v %v", calls[0], wantM, wantParts)
	}
	last := e.lastValue("tx")
	if last.state != txnCompleteCommit || len(last.parts) != 0 || last.epoch != 0 {
		t.Fatalf("last record: %+v", last)
	}
	// The states written, in order: Empty, Ongoing (twice: the second add
	// is a no-op), PrepareCommit, CompleteCommit.
	var states []string
	for _, r := range e.log.records() {
		_, tm, _, _ := decodeTxnRecord(r)
		states = append(states, tm.state.String())
	}
	if want := []string{"Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"}; !reflect.DeepEqual(states, want) {
		t.Fatalf("records: %v, want %v", states, want)
	}

	wantCode(t, "commit retried", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	wantCode(t, "abort after commit", e.end(3, "tx", pid, epoch, false).ErrorCode, kerr.InvalidTxnState.Code)
	// The next transaction starts from CompleteCommit.
	wantCode(t, "add next", e.add(3, "tx", pid, epoch, tpB), 0)
	if d := e.describe("tx"); d.State != "Ongoing" || len(d.Topics) != 1 {
		t.Fatalf("next transaction: %+v", d)
	}
}

func TestTxnAbortFlow(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, epoch := e.mustInit("tx")
	wantCode(t, "end on Empty", e.end(3, "tx", pid, epoch, false).ErrorCode, kerr.InvalidTxnState.Code)
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	wantCode(t, "abort", e.end(3, "tx", pid, epoch, false).ErrorCode, 0)
	e.waitState("tx", "CompleteAbort")
	calls := e.markers.snapshot()
	if len(calls) != 1 || calls[0].m.Commit || calls[0].m.ProducerEpoch != 0 {
		t.Fatalf("markers: %+v", calls)
	}
	wantCode(t, "abort retried", e.end(3, "tx", pid, epoch, false).ErrorCode, 0)
	wantCode(t, "commit after abort", e.end(3, "tx", pid, epoch, true).ErrorCode, kerr.InvalidTxnState.Code)
	wantCode(t, "unknown id", e.end(3, "nope", pid, epoch, true).ErrorCode, kerr.InvalidProducerIDMapping.Code)
	wantCode(t, "other producer id", e.end(3, "tx", pid+1, epoch, true).ErrorCode, kerr.InvalidProducerIDMapping.Code)
	wantCode(t, "empty id", e.end(3, "", pid, epoch, true).ErrorCode, kerr.InvalidRequest.Code)
}

func TestTxnFencing(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)

	// A second instance: the ongoing transaction is aborted with a bumped
	// epoch and the answer asks it to retry.
	r := e.init("tx", 4, 60_000, -1, -1)
	wantCode(t, "init while ongoing", r.ErrorCode, kerr.ConcurrentTransactions.Code)
	if r.ProducerID != -1 || r.ProducerEpoch != -1 {
		t.Fatalf("error answer carries %d/%d", r.ProducerID, r.ProducerEpoch)
	}
	e.waitState("tx", "CompleteAbort")
	if calls := e.markers.snapshot(); len(calls) != 1 || calls[0].m.Commit || calls[0].m.ProducerEpoch != 1 {
		t.Fatalf("fence markers: %+v", calls)
	}
	pid2, epoch2 := e.mustInit("tx")
	if pid2 != pid || epoch2 != 2 {
		t.Fatalf("after the fence: %d/%d, want %d/2", pid2, epoch2, pid)
	}

	// The old producer is fenced, with the code of its version.
	wantCode(t, "add v3", e.add(3, "tx", pid, epoch, tpB), kerr.ProducerFenced.Code)
	wantCode(t, "add v1", e.add(1, "tx", pid, epoch, tpB), kerr.InvalidProducerEpoch.Code)
	wantCode(t, "end v3", e.end(3, "tx", pid, epoch, true).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "end v1", e.end(1, "tx", pid, epoch, true).ErrorCode, kerr.InvalidProducerEpoch.Code)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version = 1
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "tx", pid, epoch, "g"
	wantCode(t, "add offsets v1", e.c.AddOffsetsToTxn(context.Background(), ao, tpG).ErrorCode, kerr.InvalidProducerEpoch.Code)
	ao.Version = 2
	wantCode(t, "add offsets v2", e.c.AddOffsetsToTxn(context.Background(), ao, tpG).ErrorCode, kerr.ProducerFenced.Code)
	// KIP-360 with the fenced epoch.
	wantCode(t, "init v4 fenced", e.init("tx", 4, 60_000, pid, epoch).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "init v3 fenced", e.init("tx", 3, 60_000, pid, epoch).ErrorCode, kerr.InvalidProducerEpoch.Code)
	// The new producer works.
	wantCode(t, "new producer adds", e.add(3, "tx", pid2, epoch2, tpB), 0)
	wantCode(t, "wrong producer id", e.add(3, "tx", pid2+7, epoch2, tpB), kerr.InvalidProducerIDMapping.Code)
	wantCode(t, "unknown id", e.add(3, "nope", pid2, epoch2, tpB), kerr.InvalidProducerIDMapping.Code)
}

func TestTxnKIP360(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	pid, _ := e.mustInit("tx")
	r := e.init("tx", 4, 60_000, pid, 0)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != 1 {
		t.Fatalf("bump with the current epoch: %+v", r)
	}
	// A retry of that bump (its answer was lost) gets the same epoch.
	r = e.init("tx", 4, 60_000, pid, 0)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != 1 {
		t.Fatalf("retry of the bump: %+v", r)
	}
	wantCode(t, "other epoch", e.init("tx", 4, 60_000, pid, 7).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "other producer id", e.init("tx", 4, 60_000, pid+9, 1).ErrorCode, kerr.ProducerFenced.Code)
	wantCode(t, "half set", e.init("tx", 4, 60_000, -1, 3).ErrorCode, kerr.InvalidRequest.Code)
	// A new transactional id accepts any producer id (UNKNOWN_PRODUCER_ID
	// recovery).
	r = e.init("fresh", 4, 60_000, 77, 3)
	if r.ErrorCode != 0 || r.ProducerEpoch != 0 {
		t.Fatalf("new id with a producer id: %+v", r)
	}
	// Below v3 the fields are not read.
	r = e.init("tx", 2, 60_000, 12345, 6)
	if r.ErrorCode != 0 || r.ProducerEpoch != 2 {
		t.Fatalf("v2: %+v", r)
	}
}

func TestTxnEpochOverflow(t *testing.T) {
	log := &memLog{}
	seed := &txnMeta{id: "tx", producerID: 500, prevProducerID: -1, nextProducerID: -1, epoch: 32766, lastEpoch: -1,
		timeoutMs: 60_000, state: txnCompleteCommit, parts: map[TxnPartition]struct{}{}, startMs: 1, updateMs: 2}
	_ = log.Append(context.Background(), []Record{txnRecord(seed)})
	e := newTxnEnv(t, log, nil)
	// KIP-360: the producer sends its id and exhausted epoch.
	r := e.init("tx", 4, 60_000, 500, 32766)
	if r.ErrorCode != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("exhausted epoch: %+v, want a new producer id at epoch 0", r)
	}
	if last := e.lastValue("tx"); last.prevProducerID != 500 || last.producerID != 1000 {
		t.Fatalf("rotation record: %+v", last)
	}
	// KIP-360: a retry of the rotation with the old id and its exhausted
	// epoch is not fenced.
	r = e.init("tx", 4, 60_000, 500, 32766)
	if r.ErrorCode != 0 || r.ProducerID != 1000 || r.ProducerEpoch != 0 {
		t.Fatalf("retry of the rotation: %+v", r)
	}
	// Without a producer id and epoch, an exhausted epoch rotates too.
	seed.id, seed.producerID = "tx2", 600
	_ = log.Append(context.Background(), []Record{txnRecord(seed)})
	e.c.Unload(0)
	if err := e.c.Load(0, 6, log); err != nil {
		t.Fatal(err)
	}
	r = e.init("tx2", 4, 60_000, -1, -1)
	if r.ErrorCode != 0 || r.ProducerID != 1001 || r.ProducerEpoch != 0 {
		t.Fatalf("exhausted epoch, no KIP-360 fields: %+v", r)
	}
}

func TestTxnInvalidTimeout(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, func(c *TxnConfig) { c.MaxTimeout = time.Minute })
	for _, ms := range []int32{0, -5, 60_001} {
		wantCode(t, fmt.Sprint("timeout ", ms), e.init("tx", 4, ms, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout.Code)
	}
	wantCode(t, "the maximum", e.init("tx", 4, 60_000, -1, -1).ErrorCode, 0)
	wantCode(t, "empty id", e.init("", 4, 60_000, -1, -1).ErrorCode, kerr.InvalidRequest.Code)
}

func TestTxnNotCoordinator(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, func(c *TxnConfig) { c.Partitions = 50 })
	// "hello" is on partition 22, "a" on 47; only 0 is loaded.
	if e.c.Owns("hello") || e.c.Partition("hello") != 22 {
		t.Fatal("hello owned")
	}
	if !e.c.Owns("polygenelubricants") {
		t.Fatal("partition 0 not owned")
	}
	wantCode(t, "init", e.init("hello", 4, 1000, -1, -1).ErrorCode, kerr.NotCoordinator.Code)
	wantCode(t, "add", e.add(3, "hello", 1, 0, tpA), kerr.NotCoordinator.Code)
	wantCode(t, "end", e.end(3, "hello", 1, 0, true).ErrorCode, kerr.NotCoordinator.Code)
	wantCode(t, "describe", e.describe("hello").ErrorCode, kerr.NotCoordinator.Code)

	bl := &blockingLog{memLog: &memLog{}, started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error)
	go func() { done <- e.c.Load(22, 1, bl) }()
	<-bl.started
	wantCode(t, "init while loading", e.init("hello", 4, 1000, -1, -1).ErrorCode, kerr.CoordinatorLoadInProgress.Code)
	lt := e.c.ListTransactions(context.Background(), kmsg.NewPtrListTransactionsRequest())
	wantCode(t, "list while loading", lt.ErrorCode, kerr.CoordinatorLoadInProgress.Code)
	close(bl.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantCode(t, "init loaded", e.init("hello", 4, 1000, -1, -1).ErrorCode, 0)
	e.c.Unload(22)
	wantCode(t, "init unloaded", e.init("hello", 4, 1000, -1, -1).ErrorCode, kerr.NotCoordinator.Code)
	e.c.Close()
	wantCode(t, "init closed", e.init("polygenelubricants", 4, 1000, -1, -1).ErrorCode, kerr.CoordinatorNotAvailable.Code)
	wantCode(t, "describe closed", e.describe("polygenelubricants").ErrorCode, kerr.CoordinatorNotAvailable.Code)
	if err := e.c.Load(1, 1, &memLog{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Load after Close: %v", err)
	}
}

func TestTxnConcurrentDuringPrepare(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	e.markers.block = make(chan struct{})
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	if d := e.describe("tx"); d.State != "PrepareCommit" {
		t.Fatalf("state %s", d.State)
	}
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpB), kerr.ConcurrentTransactions.Code)
	wantCode(t, "init", e.init("tx", 4, 60_000, -1, -1).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "commit again", e.end(3, "tx", pid, epoch, true).ErrorCode, kerr.ConcurrentTransactions.Code)
	wantCode(t, "abort", e.end(3, "tx", pid, epoch, false).ErrorCode, kerr.InvalidTxnState.Code)
	close(e.markers.block)
	e.waitState("tx", "CompleteCommit")
}

func TestTxnMarkerRetry(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	e.markers.answer = func(n int, m Marker, parts []TxnPartition) map[TxnPartition]error {
		switch n {
		case 1:
			return map[TxnPartition]error{tpA: kerr.NotLeaderForPartition, tpC: kerr.UnknownTopicOrPartition}
		case 2:
			return map[TxnPartition]error{tpA: kerr.NotEnoughReplicas}
		}
		return nil
	}
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA, tpB, tpC), 0)
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	deadline := time.Now().Add(5 * time.Second)
	for e.describe("tx").State != "CompleteCommit" {
		if time.Now().After(deadline) {
			t.Fatalf("not completed; calls %+v", e.markers.snapshot())
		}
		e.clk.Advance(txnRetryBackoff)
		time.Sleep(time.Millisecond)
	}
	calls := e.markers.snapshot()
	if len(calls) != 3 {
		t.Fatalf("calls: %+v", calls)
	}
	if !reflect.DeepEqual(calls[0].parts, []TxnPartition{tpA, tpB, tpC}) ||
		!reflect.DeepEqual(calls[1].parts, []TxnPartition{tpA}) || !reflect.DeepEqual(calls[2].parts, []TxnPartition{tpA}) {
		t.Fatalf("retried partitions: %+v", calls)
	}
}

func TestTxnMarkerFencedStops(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, nil)
	e.markers.answer = func(int, Marker, []TxnPartition) map[TxnPartition]error {
		return map[TxnPartition]error{tpA: kerr.TransactionCoordinatorFenced}
	}
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	deadline := time.Now().Add(5 * time.Second)
	for len(e.markers.snapshot()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no marker call")
		}
		time.Sleep(time.Millisecond)
	}
	e.clk.Advance(time.Second)
	e.c.Close() // waits for the goroutine, which gave up
	if n := len(e.markers.snapshot()); n != 1 {
		t.Fatalf("%d marker calls after a fence", n)
	}
	if last := e.lastValue("tx"); last.state != txnPrepareCommit {
		t.Fatalf("completed after a fence: %v", last.state)
	}
}

// With ConcurrentWait, an AddPartitionsToTxn that meets the previous
// transaction's markers waits for them and succeeds, instead of answering
// CONCURRENT_TRANSACTIONS; markers still blocked past the wait get
// CONCURRENT_TRANSACTIONS.
func TestTxnConcurrentWait(t *testing.T) {
	e := newTxnEnv(t, &memLog{}, func(c *TxnConfig) { c.ConcurrentWait = time.Minute })
	e.markers.block = make(chan struct{})
	pid, epoch := e.mustInit("tx")
	wantCode(t, "add", e.add(3, "tx", pid, epoch, tpA), 0)
	wantCode(t, "commit", e.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	added := make(chan int16, 1)
	go func() { added <- e.add(3, "tx", pid, epoch, tpB) }()
	select {
	case c := <-added:
		t.Fatalf("the add answered %s while the markers were blocked", code(c))
	case <-time.After(50 * time.Millisecond):
	}
	close(e.markers.block)
	select {
	case c := <-added:
		wantCode(t, "the add once the commit completed", c, 0)
	case <-time.After(10 * time.Second):
		t.Fatal("the add did not answer once the commit completed")
	}
	if d := e.describe("tx"); d.State != "Ongoing" || len(d.Topics) != 1 {
		t.Fatalf("after the add: state %s, topics %v; want Ongoing with one partition", d.State, d.Topics)
	}

	short := newTxnEnv(t, &memLog{}, func(c *TxnConfig) { c.ConcurrentWait = 20 * time.Millisecond })
	short.markers.block = make(chan struct{})
	defer close(short.markers.block)
	pid, epoch = short.mustInit("tx")
	wantCode(t, "add", short.add(3, "tx", pid, epoch, tpA), 0)
	wantCode(t, "commit", short.end(3, "tx", pid, epoch, true).ErrorCode, 0)
	wantCode(t, "the add past the wait", short.add(3, "tx", pid, epoch, tpB), kerr.ConcurrentTransactions.Code)
}
