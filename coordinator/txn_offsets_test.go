package coordinator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memTxnLog is an in-memory TxnLog: every batch with its producer and
// control information. failNext makes the next append (plain or
// transactional) fail with failErr (a plain error when nil).
type memTxnLog struct {
	mu       sync.Mutex
	batches  []ReplayBatch
	failNext bool
	failErr  error
}

func (l *memTxnLog) add(b ReplayBatch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failNext {
		l.failNext = false
		if l.failErr != nil {
			return l.failErr
		}
		return errors.New("injected append failure")
	}
	b.Records = append([]Record(nil), b.Records...)
	l.batches = append(l.batches, b)
	return nil
}

func (l *memTxnLog) Append(ctx context.Context, recs []Record) error {
	return l.add(ReplayBatch{ProducerID: -1, Records: recs})
}

func (l *memTxnLog) AppendTxn(ctx context.Context, pid int64, epoch int16, recs []Record) error {
	return l.add(ReplayBatch{ProducerID: pid, Transactional: true, Records: recs})
}

// marker writes producer pid's transaction marker, as WriteTxnMarkers
// does on the broker.
func (l *memTxnLog) marker(pid int64, commit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, ReplayBatch{ProducerID: pid, Transactional: true, Control: true, Commit: commit})
}

// Replay is Log's view: the records of data batches (Load does not use it
// on a TxnLog).
func (l *memTxnLog) Replay(fn func(Record) error) error {
	return l.ReplayBatches(func(b ReplayBatch) error {
		for _, r := range b.Records {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}

func (l *memTxnLog) ReplayBatches(fn func(ReplayBatch) error) error {
	l.mu.Lock()
	bs := append([]ReplayBatch(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// txnCoordinator is testCoordinator over a memTxnLog.
func txnCoordinator(t *testing.T, log *memTxnLog) *Coordinator {
	t.Helper()
	c := New(testConfig(1, testTopics, newManualClock()))
	if err := c.Load(0, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// txnCommitReq is a TxnOffsetCommit v4 of producer pid for group with the
// given generation and member, of offsets "topic/partition" -> offset.
func txnCommitReq(group string, pid int64, gen int32, member string, offsets map[string]int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 4
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", group, pid, 1
	req.Generation, req.MemberID = gen, member
	byTopic := map[string][]kmsg.TxnOffsetCommitRequestTopicPartition{}
	for _, k := range sortedKeys(offsets) {
		var topic string
		var p int32
		fmt.Sscanf(k, "%1s/%d", &topic, &p)
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[k], 3
		md := "txn"
		rp.Metadata = &md
		byTopic[topic] = append(byTopic[topic], rp)
	}
	for _, topic := range sortedKeys(byTopic) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.Partitions = topic, byTopic[topic]
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// txnCommit commits offsets in producer pid's transaction and returns
// every partition's error code, "topic/partition" -> code.
func txnCommit(c *Coordinator, req *kmsg.TxnOffsetCommitRequest) map[string]int16 {
	resp := c.TxnOffsetCommit(context.Background(), req)
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

// mustTxnCommit commits and fails the test on any partition's error.
func mustTxnCommit(t *testing.T, c *Coordinator, group string, pid int64, offsets map[string]int64) {
	t.Helper()
	for k, code := range txnCommit(c, txnCommitReq(group, pid, -1, "", offsets)) {
		if code != 0 {
			t.Fatalf("TxnOffsetCommit %s: %v", k, kerr.ErrorForCode(code))
		}
	}
}

// allTP lists every partition of testTopics, for fetches naming them.
func allTP() []kmsg.OffsetFetchRequestGroupTopic {
	var out []kmsg.OffsetFetchRequestGroupTopic
	for _, ti := range testTopics {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic = ti.Name
		for p := range ti.Partitions {
			rt.Partitions = append(rt.Partitions, p)
		}
		out = append(out, rt)
	}
	return out
}

// fetchStable fetches every partition of testTopics for group with
// require_stable set or not: "topic/partition" -> "offset" or the error's
// name, partitions without an offset left out.
func fetchStable(c *Coordinator, group string, stable bool) map[string]string {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = 8, stable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.Topics = group, allTP()
	req.Groups = append(req.Groups, rg)
	resp := c.OffsetFetch(context.Background(), req)
	out := map[string]string{}
	if code := resp.Groups[0].ErrorCode; code != 0 {
		out["group"] = kerr.ErrorForCode(code).Error()
	}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			k := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			switch {
			case p.ErrorCode != 0:
				out[k] = errName(p.ErrorCode)
			case p.Offset >= 0:
				out[k] = fmt.Sprint(p.Offset)
			}
		}
	}
	return out
}

func wantFetch(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TxnOffsetCommit's offsets are pending until CompleteTxn commits them:
// OffsetFetch returns the committed ones meanwhile, require_stable answers
// UNSTABLE_OFFSET_COMMIT for the pending partitions; an abort leaves the
// previous offsets; a replay rebuilds the same state.
func TestTxnOffsetCommitComplete(t *testing.T) {
	log := &memTxnLog{}
	c := txnCoordinator(t, log)
	if code := commit(c, "g", -1, "", "t", 0, 5); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	mustTxnCommit(t, c, "g", 7, map[string]int64{"t/0": 10, "t/1": 11})
	wantFetch(t, "pending, unstable allowed", fetchStable(c, "g", false), map[string]string{"t/0": "5"})
	wantFetch(t, "pending, require_stable", fetchStable(c, "g", true), map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT", "t/1": "UNSTABLE_OFFSET_COMMIT"})
	// The records are one transactional batch of producer 7 in the
	// formats OffsetCommit writes.
	b := log.batches[len(log.batches)-1]
	if !b.Transactional || b.ProducerID != 7 || len(b.Records) != 2 {
		t.Fatalf("batch %+v", b)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b.Records[0].Value); err != nil || v.Offset != 10 || v.LeaderEpoch != 3 || v.Metadata != "txn" {
		t.Fatalf("value %+v %v", v, err)
	}

	log.marker(7, true)
	c.CompleteTxn(0, 7, true)
	wantFetch(t, "committed", fetchStable(c, "g", true), map[string]string{"t/0": "10", "t/1": "11"})
	c.CompleteTxn(0, 7, true) // a second completion is a no-op
	c.CompleteTxn(5, 7, true) // a partition not loaded is a no-op

	mustTxnCommit(t, c, "g", 8, map[string]int64{"t/0": 20, "u/0": 21})
	log.marker(8, false)
	c.CompleteTxn(0, 8, false)
	wantFetch(t, "aborted", fetchStable(c, "g", true), map[string]string{"t/0": "10", "t/1": "11"})

	// A group known only by pending offsets exists (an Empty classic
	// group, as Kafka creates a simple group).
	mustTxnCommit(t, c, "fresh", 9, map[string]int64{"u/0": 1})
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"fresh"}
	if r := c.DescribeGroups(context.Background(), d); r.Groups[0].ErrorCode != 0 || r.Groups[0].State != "Empty" {
		t.Fatalf("describe fresh: %+v", r.Groups[0])
	}
	wantFetch(t, "fresh pending", fetchStable(c, "fresh", true), map[string]string{"u/0": "UNSTABLE_OFFSET_COMMIT"})

	c2 := txnCoordinator(t, log)
	wantFetch(t, "g replayed", fetchStable(c2, "g", true), map[string]string{"t/0": "10", "t/1": "11"})
	wantFetch(t, "fresh replayed", fetchStable(c2, "fresh", true), map[string]string{"u/0": "UNSTABLE_OFFSET_COMMIT"})
	log.marker(9, true)
	c2.CompleteTxn(0, 9, true)
	wantFetch(t, "fresh committed", fetchStable(c2, "fresh", true), map[string]string{"u/0": "1"})
}

// snapshot is a shard's visible state for the replay test: every group's
// committed offsets and, with require_stable, which are pending.
func snapshot(c *Coordinator) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, g := range []string{"g", "h", "k"} {
		out[g+" unstable"] = fetchStable(c, g, false)
		out[g+" stable"] = fetchStable(c, g, true)
	}
	return out
}

// A replay of a log with transactional batches and markers (commits,
// aborts, interleaved plain commits, a tombstone, markers of producers
// without pending offsets) rebuilds the state the live coordinator had at
// every step. Kafka's ordering rule: a committed transaction's offset
// replaces the committed one only if its record is later in the log.
func TestTxnReplayMatchesLive(t *testing.T) {
	log := &memTxnLog{}
	c := txnCoordinator(t, log)
	end := func(pid int64, commit bool) {
		log.marker(pid, commit)
		c.CompleteTxn(0, pid, commit)
	}
	plain := func(group, topic string, p int32, off int64) {
		if code := commit(c, group, -1, "", topic, p, off); code != 0 {
			t.Fatalf("commit: %v", kerr.ErrorForCode(code))
		}
	}
	steps := []struct {
		name string
		do   func()
		want map[string]string // g's require_stable fetch after the step
	}{
		{"plain", func() { plain("g", "t", 0, 1) }, map[string]string{"t/0": "1"}},
		{"txn 1", func() { mustTxnCommit(t, c, "g", 1, map[string]int64{"t/0": 10, "t/1": 11}) },
			map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT", "t/1": "UNSTABLE_OFFSET_COMMIT"}},
		// A plain commit after the transactional record, before the
		// marker: it is newer, the transaction's t/0 loses.
		{"plain after txn 1", func() { plain("g", "t", 0, 15) }, map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT", "t/1": "UNSTABLE_OFFSET_COMMIT"}},
		{"commit 1", func() { end(1, true) }, map[string]string{"t/0": "15", "t/1": "11"}},
		{"txn 2", func() { mustTxnCommit(t, c, "g", 2, map[string]int64{"t/1": 20, "t/2": 22}) },
			map[string]string{"t/0": "15", "t/1": "UNSTABLE_OFFSET_COMMIT", "t/2": "UNSTABLE_OFFSET_COMMIT"}},
		{"abort 2", func() { end(2, false) }, map[string]string{"t/0": "15", "t/1": "11"}},
		{"marker of an unknown producer", func() { end(99, true) }, map[string]string{"t/0": "15", "t/1": "11"}},
		{"abort of an unknown producer", func() { end(98, false) }, map[string]string{"t/0": "15", "t/1": "11"}},
		// One producer, two groups of the shard; a plain commit before
		// the transactional record loses to it.
		{"plain before txn 3", func() { plain("h", "u", 0, 3) }, map[string]string{"t/0": "15", "t/1": "11"}},
		{"txn 3", func() {
			mustTxnCommit(t, c, "g", 3, map[string]int64{"t/2": 32})
			mustTxnCommit(t, c, "h", 3, map[string]int64{"u/0": 30})
		}, map[string]string{"t/0": "15", "t/1": "11", "t/2": "UNSTABLE_OFFSET_COMMIT"}},
		{"commit 3", func() { end(3, true) }, map[string]string{"t/0": "15", "t/1": "11", "t/2": "32"}},
		// Two open producers on one partition; a tombstone (OffsetDelete)
		// drops both's pending offsets of it.
		{"txn 4 and 5", func() {
			mustTxnCommit(t, c, "k", 4, map[string]int64{"t/0": 40})
			mustTxnCommit(t, c, "k", 5, map[string]int64{"t/0": 50, "t/1": 51})
		}, map[string]string{"t/0": "15", "t/1": "11", "t/2": "32"}},
		{"offset delete k t/0", func() {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = "k"
			req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
			if r := c.OffsetDelete(context.Background(), req); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("offset delete: %+v", r)
			}
		}, map[string]string{"t/0": "15", "t/1": "11", "t/2": "32"}},
		{"commit 4, 5", func() { end(4, true); end(5, true) }, map[string]string{"t/0": "15", "t/1": "11", "t/2": "32"}},
		// Left open: pending after the replay too.
		{"txn 6 open", func() { mustTxnCommit(t, c, "g", 6, map[string]int64{"t/0": 60}) },
			map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT", "t/1": "11", "t/2": "32"}},
	}
	for _, st := range steps {
		st.do()
		wantFetch(t, st.name, fetchStable(c, "g", true), st.want)
		live := snapshot(c)
		c2 := New(testConfig(1, testTopics, newManualClock()))
		if err := c2.Load(0, log); err != nil {
			t.Fatal(err)
		}
		replayed := snapshot(c2)
		c2.Close()
		if !reflect.DeepEqual(live, replayed) {
			t.Fatalf("after %s: live %v, replayed %v", st.name, live, replayed)
		}
	}
	wantFetch(t, "h", fetchStable(c, "h", true), map[string]string{"u/0": "30"})
	wantFetch(t, "k", fetchStable(c, "k", true), map[string]string{"t/1": "51"})
}

// A failed AppendTxn leaves nothing pending; a fencing error from the log
// is the answer.
func TestTxnOffsetCommitAppendFails(t *testing.T) {
	log := &memTxnLog{}
	c := txnCoordinator(t, log)
	log.failNext = true
	for k, code := range txnCommit(c, txnCommitReq("g", 7, -1, "", map[string]int64{"t/0": 10})) {
		if code != kerr.NotCoordinator.Code {
			t.Fatalf("%s: %v, want NOT_COORDINATOR", k, kerr.ErrorForCode(code))
		}
	}
	wantFetch(t, "after a failed append", fetchStable(c, "g", true), nil)
	c.CompleteTxn(0, 7, true)
	wantFetch(t, "after a failed append and a commit", fetchStable(c, "g", true), nil)

	log.failNext, log.failErr = true, fmt.Errorf("append: %w", kerr.ProducerFenced)
	for k, code := range txnCommit(c, txnCommitReq("g", 7, -1, "", map[string]int64{"t/0": 10})) {
		if code != kerr.ProducerFenced.Code {
			t.Fatalf("%s: %v, want PRODUCER_FENCED", k, kerr.ErrorForCode(code))
		}
	}
	wantFetch(t, "after a fenced append", fetchStable(c, "g", true), nil)
}

// The request's own checks: unknown topics, metadata too long, empty group
// id, a shard not served or loading, a Log that is not a TxnLog.
func TestTxnOffsetCommitRequestChecks(t *testing.T) {
	log := &memTxnLog{}
	c := txnCoordinator(t, log)
	req := txnCommitReq("g", 7, -1, "", map[string]int64{"t/0": 1, "t/3": 2})
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "nope"
	rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}
	long := string(make([]byte, 5000))
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Metadata = 1, &long
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	req.Topics = append(req.Topics, rt)
	got := txnCommit(c, req)
	want := map[string]int16{"t/0": 0, "t/3": kerr.UnknownTopicOrPartition.Code, "t/1": kerr.OffsetMetadataTooLarge.Code, "nope/0": kerr.UnknownTopicOrPartition.Code}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	wantFetch(t, "pending", fetchStable(c, "g", true), map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT"})

	// v6 names topics by ID.
	v6 := txnCommitReq("g", 7, -1, "", map[string]int64{"t/2": 1})
	v6.Version = 6
	v6.Topics[0].TopicID = testTopics[0].ID
	v6.Topics = append(v6.Topics, kmsg.TxnOffsetCommitRequestTopic{TopicID: [16]byte{9}, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}})
	r := c.TxnOffsetCommit(context.Background(), v6)
	if r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("v6: %+v", r.Topics)
	}

	if got := txnCommit(c, txnCommitReq("", 7, -1, "", map[string]int64{"t/0": 1})); got["t/0"] != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %v", got)
	}
	c.Unload(0)
	if got := txnCommit(c, txnCommitReq("g", 7, -1, "", map[string]int64{"t/0": 1})); got["t/0"] != kerr.NotCoordinator.Code {
		t.Fatalf("unloaded: %v", got)
	}
	// Unload dropped the pending offsets; the next Load replays them.
	if err := c.Load(0, log); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, "reloaded", fetchStable(c, "g", true), map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT", "t/2": "UNSTABLE_OFFSET_COMMIT"})

	plain := txnCoordinatorPlain(t)
	if got := txnCommit(plain, txnCommitReq("g", 7, -1, "", map[string]int64{"t/0": 1})); got["t/0"] != kerr.UnsupportedVersion.Code {
		t.Fatalf("a Log that is not a TxnLog: %v", got)
	}
}

func txnCoordinatorPlain(t *testing.T) *Coordinator {
	return testCoordinator(t, &memLog{}, newManualClock())
}

// KIP-447's member checks of TxnOffsetCommit v3+ against a classic group
// (Kafka's ClassicGroup.validateOffsetCommit with isTransactional): a
// member of the current generation commits; a wrong generation, an unknown
// member, a fenced static member are refused; a commit naming no member
// and generation -1 is accepted even while the group has members.
func TestTxnOffsetCommitClassicMember(t *testing.T) {
	ctx := context.Background()
	c := txnCoordinator(t, &memTxnLog{})
	join := classicJoinReq(5, "")
	instance := "i1"
	join.InstanceID = &instance
	jr := c.JoinGroup(ctx, join)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	if r := c.SyncGroup(ctx, classicSyncReq(jr)); r.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	off := map[string]int64{"t/0": 1}
	for _, tc := range []struct {
		name     string
		version  int16
		gen      int32
		member   string
		instance *string
		want     int16
	}{
		{"member", 3, jr.Generation, jr.MemberID, nil, 0},
		{"static member", 3, jr.Generation, jr.MemberID, &instance, 0},
		{"old generation", 3, jr.Generation - 1, jr.MemberID, nil, kerr.IllegalGeneration.Code},
		{"unknown member", 3, jr.Generation, "nobody", nil, kerr.UnknownMemberID.Code},
		{"fenced instance", 3, jr.Generation, "nobody", &instance, kerr.FencedInstanceID.Code},
		{"unknown instance", 3, jr.Generation, jr.MemberID, new(string), kerr.UnknownMemberID.Code},
		{"generation without member", 3, jr.Generation, "", nil, kerr.UnknownMemberID.Code},
		{"no member, generation -1", 3, -1, "", nil, 0},
		{"v2 carries no member", 2, jr.Generation + 5, "nobody", nil, 0},
	} {
		req := txnCommitReq("g", 7, tc.gen, tc.member, off)
		req.Version, req.InstanceID = tc.version, tc.instance
		if got := txnCommit(c, req)["t/0"]; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, errName(got), errName(tc.want))
		}
	}
	if got := txnCommit(c, txnCommitReq("missing", 7, 1, "m", off))["t/0"]; got != kerr.IllegalGeneration.Code {
		t.Errorf("a generation into an unknown group: %s, want ILLEGAL_GENERATION", errName(got))
	}
}

// The same checks against a KIP-848 consumer group (Kafka's
// ConsumerGroup.validateOffsetCommit with isTransactional; a stale member
// epoch is answered ILLEGAL_GENERATION).
func TestTxnOffsetCommitConsumerMember(t *testing.T) {
	ctx := context.Background()
	c := txnCoordinator(t, &memTxnLog{})
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.MemberEpoch = "g", "m1", 0
	hb.RebalanceTimeoutMillis = 30000
	hb.SubscribedTopicNames = []string{"t"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r := c.ConsumerGroupHeartbeat(ctx, hb)
	if r.ErrorCode != 0 {
		t.Fatalf("consumer heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	epoch := r.MemberEpoch
	off := map[string]int64{"t/0": 1}
	for _, tc := range []struct {
		name   string
		gen    int32
		member string
		want   int16
	}{
		{"member", epoch, "m1", 0},
		{"stale epoch", epoch - 1, "m1", kerr.IllegalGeneration.Code},
		{"newer epoch", epoch + 1, "m1", kerr.IllegalGeneration.Code},
		{"unknown member", epoch, "nobody", kerr.UnknownMemberID.Code},
		{"member without epoch", -1, "m1", kerr.IllegalGeneration.Code},
		{"no member, generation -1", -1, "", 0},
	} {
		if got := txnCommit(c, txnCommitReq("g", 7, tc.gen, tc.member, off))["t/0"]; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, errName(got), errName(tc.want))
		}
	}
}

// Pending offsets are not lost silently: expiry keeps them and their
// group; DeleteGroups writes tombstones for them (Kafka's
// deleteAllOffsets), so a replay agrees; TopicDeleted drops them too.
func TestTxnPendingDeletion(t *testing.T) {
	log := &memTxnLog{}
	clk := newManualClock()
	c := New(testConfig(1, testTopics, clk))
	if err := c.Load(0, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mustTxnCommit(t, c, "g", 7, map[string]int64{"t/0": 1})
	if code := commit(c, "g", -1, "", "t", 0, 2); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// Long past retention: t/0 is committed but has a pending offset, so
	// neither it nor the group expires.
	clk.Advance(8 * 24 * time.Hour)
	c.expireOffsets()
	wantFetch(t, "after expiry", fetchStable(c, "g", false), map[string]string{"t/0": "2"})
	wantFetch(t, "after expiry, stable", fetchStable(c, "g", true), map[string]string{"t/0": "UNSTABLE_OFFSET_COMMIT"})

	// A group with only pending offsets is deleted with tombstones for
	// them: the commit marker then finds nothing, live or replayed.
	mustTxnCommit(t, c, "h", 8, map[string]int64{"u/0": 5})
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"h"}
	if r := c.DeleteGroups(context.Background(), del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete h: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	log.marker(8, true)
	c.CompleteTxn(0, 8, true)
	wantFetch(t, "h after delete and commit", fetchStable(c, "h", true), nil)

	c.TopicDeleted(context.Background(), "t")
	wantFetch(t, "g after topic deleted", fetchStable(c, "g", true), nil)
	log.marker(7, true)
	c.CompleteTxn(0, 7, true)
	wantFetch(t, "g after topic deleted and commit", fetchStable(c, "g", true), nil)

	c2 := txnCoordinator(t, log)
	wantFetch(t, "h replayed", fetchStable(c2, "h", true), nil)
	wantFetch(t, "g replayed", fetchStable(c2, "g", true), nil)
}
