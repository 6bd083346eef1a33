package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// txnSets are the broker settings of the transaction tests: a small
// __transaction_state and __consumer_offsets (fewer partitions to create
// and load), no initial rebalance delay.
var txnSets = []string{"transaction.state.log.num.partitions=4", "offsets.topic.num.partitions=4", "group.initial.rebalance.delay.ms=0"}

// consumeAll reads topic from the start with the isolation level until
// it has read want records or ctx ends, and returns the values read.
func consumeIsolated(t *testing.T, ctx context.Context, seeds []string, topic string, committed bool, want int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// produceTxn produces values in one transaction and commits or aborts it.
func produceTxn(ctx context.Context, cl *kgo.Client, topic string, commit bool, values ...string) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			return err
		}
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// A transactional producer's committed records are read by read_committed
// and read_uncommitted consumers; its aborted ones only by
// read_uncommitted; the last stable offset waits for an open transaction
// while the high watermark does not.
func TestTxnCommitAbort(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.createTopic("txn-ca", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("txn-ca-producer"), kgo.DefaultProduceTopic("txn-ca"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := produceTxn(ctx, cl, "txn-ca", true, "c1", "c2", "c3"); err != nil {
		t.Fatal("committed transaction:", err)
	}
	if err := produceTxn(ctx, cl, "txn-ca", false, "a1", "a2"); err != nil {
		t.Fatal("aborted transaction:", err)
	}
	if err := produceTxn(ctx, cl, "txn-ca", true, "c4"); err != nil {
		t.Fatal("second committed transaction:", err)
	}
	part, _ := b.partition("txn-ca", 0)
	// 3 + marker, 2 + marker, 1 + marker.
	waitFor(t, 10*time.Second, "the log end offset 9 (6 records and 3 markers)", func() bool { return part.HighWatermark() == 9 })
	if got := consumeIsolated(t, ctx, []string{addr}, "txn-ca", true, 4); !slices.Equal(got, []string{"c1", "c2", "c3", "c4"}) {
		t.Fatalf("read_committed read %q, want c1 c2 c3 c4", got)
	}
	if got := consumeIsolated(t, ctx, []string{addr}, "txn-ca", false, 6); !slices.Equal(got, []string{"c1", "c2", "c3", "a1", "a2", "c4"}) {
		t.Fatalf("read_uncommitted read %q, want every record", got)
	}

	// An open transaction holds the last stable offset at its first
	// record; the high watermark moves on.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, addr))
	committed, err := adm.ListCommittedOffsets(ctx, "txn-ca")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "txn-ca")
	if err != nil {
		t.Fatal(err)
	}
	if lso, hw := committed["txn-ca"][0].Offset, ends["txn-ca"][0].Offset; lso != 9 || hw != 10 {
		t.Fatalf("with a transaction open at offset 9: last stable offset %d, high watermark %d; want 9 and 10", lso, hw)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the last stable offset past the committed transaction", func() bool { return part.LastStableOffset() == 11 })
}

// A second producer with the same transactional id fences the first: the
// first one's next transactional request fails, and its open transaction
// is aborted, never committed.
func TestTxnFencing(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.createTopic("txn-fence", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	newProducer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("txn-fence-id"), kgo.DefaultProduceTopic("txn-fence"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	first := newProducer()
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := newProducer()
	if err := produceTxn(ctx, second, "txn-fence", true, "live"); err != nil {
		t.Fatal("the new producer:", err)
	}
	err := first.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	if got := consumeIsolated(t, ctx, []string{addr}, "txn-fence", true, 1); !slices.Equal(got, []string{"live"}) {
		t.Fatalf("read_committed read %q, want only the new producer's record", got)
	}
}

// Consume-transform-produce with franz-go's GroupTransactSession: every
// input record is copied to the output exactly once and the group's
// offsets are committed with the transactions; an aborted transaction
// leaves the group's offsets where they were.
func TestTxnConsumeTransformProduce(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, topic := range []string{"eos-in", "eos-out"} {
		if _, err := b.createTopic(topic, 2, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	const n = 100
	plain := newClient(t, addr)
	for i := range n {
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "eos-in", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("eos-etl"),
		kgo.ConsumerGroup("eos-group"), kgo.ConsumeTopics("eos-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied, rounds := 0, 0
	for copied < n && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		for _, r := range recs {
			sess.Produce(ctx, &kgo.Record{Topic: "eos-out", Value: r.Value}, nil)
		}
		// The first round with records is aborted: its output must never
		// be read and its input is read again.
		commit := !(rounds == 0 && len(recs) > 0)
		if len(recs) > 0 {
			rounds++
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			copied += len(recs)
		}
	}
	got := consumeIsolated(t, ctx, []string{addr}, "eos-out", true, n)
	slices.Sort(got)
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed read %d records from the output, want each of the %d inputs once: %q", len(got), n, got)
	}
	adm := kadm.NewClient(plain)
	offs, err := adm.FetchOffsets(ctx, "eos-group")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Fatalf("the group's committed offsets sum to %d, want %d", sum, n)
	}
}

// startTxnCluster starts three brokers with txnSets and creates topic
// with the given number of partitions, three replicas each, and returns
// once every partition has a leader and all three in sync.
func startTxnCluster(t *testing.T, ctx context.Context, topic string, partitions int32) (*testCluster, []partitionState) {
	t.Helper()
	tc := startCluster(t, 3, txnSets...)
	tc.waitBrokers(3)
	if _, err := kadm.NewClient(tc.client()).CreateTopic(ctx, partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	return tc, tc.waitLeaders(topic, 3)
}

// The same transactions on a three-broker cluster: the coordinator and
// the partitions' leaders are on different brokers, so markers go out
// with WriteTxnMarkers.
func TestClusterTxn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tc, _ := startTxnCluster(t, ctx, "ctxn", 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.addrs()...), kgo.TransactionalID("ctxn-producer"), kgo.DefaultProduceTopic("ctxn"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := produceTxn(ctx, cl, "ctxn", true, "c1", "c2", "c3", "c4", "c5", "c6"); err != nil {
		t.Fatal(err)
	}
	if err := produceTxn(ctx, cl, "ctxn", false, "a1", "a2", "a3"); err != nil {
		t.Fatal(err)
	}
	got := consumeIsolated(t, ctx, tc.addrs(), "ctxn", true, 6)
	slices.Sort(got)
	if !slices.Equal(got, []string{"c1", "c2", "c3", "c4", "c5", "c6"}) {
		t.Fatalf("read_committed read %q, want c1..c6", got)
	}
}

// confluentTxnScript: a confluent-kafka-python (librdkafka) transactional
// producer commits one transaction and aborts another; a read_committed
// consumer reads the committed records only, a read_uncommitted one all.
const confluentTxnScript = `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition
addr = sys.argv[1]
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'ck-txn'})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce('ck-txn', value=b'c%d' % i)
p.commit_transaction(30)
p.begin_transaction()
for i in range(2):
    p.produce('ck-txn', value=b'a%d' % i)
assert p.flush(30) == 0  # abort_transaction purges what is not sent yet
p.abort_transaction(30)
def read(isolation, want):
    c = Consumer({'bootstrap.servers': addr, 'group.id': 'ck-txn-' + isolation, 'isolation.level': isolation,
                  'enable.auto.commit': False})
    c.assign([TopicPartition('ck-txn', 0, 0)])
    got = []
    while len(got) < want:
        m = c.poll(10)
        assert m is not None, 'timed out with %r' % got
        if m.error() is not None:
            continue
        got.append(m.value().decode())
    c.close()
    return got
got = read('read_committed', 3)
assert got == ['c0', 'c1', 'c2'], got
got = read('read_uncommitted', 5)
assert got == ['c0', 'c1', 'c2', 'a0', 'a1'], got
print('ok')
`

func TestConfluentKafkaPythonTxn(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "confluent_kafka")
	b, addr := startBroker(t, "", txnSets...)
	if _, err := b.createTopic("ck-txn", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	runTool(t, "", py, "-c", confluentTxnScript, addr)
}

// ListOffsets by timestamp and for the max timestamp (-3) with
// read_committed finds no offset at or past the last stable offset (an
// open transaction's records): timestamp and offset -1, as Kafka's
// ReplicaManager.fetchOffset answers; read_uncommitted finds them.
func TestTxnListOffsetsReadCommitted(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.createTopic("txn-lo", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("txn-lo-producer"), kgo.DefaultProduceTopic("txn-lo"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Record times after the markers' (the broker's clock).
	now := time.Now().UnixMilli()
	t1, t2 := time.UnixMilli(now+3_600_000), time.UnixMilli(now+7_200_000)
	produce := func(v string, ts time.Time) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Timestamp: ts}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Offset 0 committed (marker at 1), offset 2 in an open transaction.
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("committed", t1)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce("open", t2)
	part, _ := b.partition("txn-lo", 0)
	waitFor(t, 10*time.Second, "the open transaction's record committed", func() bool { return part.HighWatermark() == 3 })

	adm := newClient(t, addr)
	list := func(isolation int8, ts int64) (int64, int64) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		req.ReplicaID = -1
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "txn-lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, adm)
		if err != nil {
			t.Fatal(err)
		}
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			t.Fatalf("ListOffsets isolation %d timestamp %d: %v", isolation, ts, kerr.ErrorForCode(sp.ErrorCode))
		}
		return sp.Offset, sp.Timestamp
	}
	for _, c := range []struct {
		name            string
		isolation       int8
		ts              int64
		wantOff, wantTs int64
	}{
		{"read_committed, the committed record's time", 1, t1.UnixMilli(), 0, t1.UnixMilli()},
		{"read_committed, the open record's time", 1, t2.UnixMilli(), -1, -1},
		{"read_committed, max timestamp", 1, -3, -1, -1},
		{"read_committed, latest", 1, -1, 2, -1},
		{"read_uncommitted, the open record's time", 0, t2.UnixMilli(), 2, t2.UnixMilli()},
		{"read_uncommitted, max timestamp", 0, -3, 2, t2.UnixMilli()},
	} {
		if off, ts := list(c.isolation, c.ts); off != c.wantOff || ts != c.wantTs {
			t.Errorf("%s: offset %d timestamp %d, want %d and %d", c.name, off, ts, c.wantOff, c.wantTs)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the last stable offset past the commit", func() bool { return part.LastStableOffset() == 4 })
	if off, ts := list(1, -3); off != 2 || ts != t2.UnixMilli() {
		t.Errorf("read_committed, max timestamp after the commit: offset %d timestamp %d, want 2 and %d", off, ts, t2.UnixMilli())
	}
}

// WriteTxnMarkers v1 and v2 sent by hand, as a transaction coordinator
// sends them (the broker has no authorizer), to the leader of a partition
// where a franz-go producer of transaction.version 2 (EndTxn v5: every
// end bumps the epoch) has a transaction ongoing at the epoch its
// previous commit's marker carried. A v2 marker (TransactionVersion 2) is
// checked with KIP-1228's rule: at that epoch it is the previous
// transaction's marker arriving late and INVALID_PRODUCER_EPOCH, above it
// it is written, and the same marker sent again is accepted; a v1 marker
// keeps the old rule, an epoch not below the producer's. The producer's
// own ends, whose markers the coordinator writes at v2 in process, still
// complete.
func TestTxnWriteTxnMarkersV2(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", txnSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.createTopic("wtm", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.TransactionalID("wtm-producer"), kgo.DefaultProduceTopic("wtm"))
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(kmsg.WriteTxnMarkers.Int16(), 1)
	raw2, raw1 := newClient(t, addr), newClient(t, addr, kgo.MaxVersions(v1))

	producer := func() kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		t.Helper()
		return onlyProducer(t, ctx, raw2, "wtm")
	}
	ongoing := func(epoch int16) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("o", epoch))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ap := producer()
		if ap.CurrentTxnStartOffset < 0 || epoch >= 0 && ap.ProducerEpoch != int32(epoch) {
			t.Fatalf("the producer's ongoing transaction: %+v, want one at epoch %d", ap, epoch)
		}
		return ap
	}
	type marker struct {
		name    string
		cl      *kgo.Client
		version int16
		epoch   int32 // producer epoch, relative to the ongoing transaction's
		commit  bool
		want    int16
	}
	send := func(ap kmsg.DescribeProducersResponseTopicPartitionActiveProducer, ms ...marker) {
		t.Helper()
		for _, m := range ms {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			rm := kmsg.NewWriteTxnMarkersRequestMarker()
			rm.ProducerID, rm.ProducerEpoch = ap.ProducerID, int16(ap.ProducerEpoch+m.epoch)
			rm.Committed, rm.CoordinatorEpoch = m.commit, ap.CoordinatorEpoch
			rm.TransactionVersion = 2 // not sent at v1
			rm.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "wtm", Partitions: []int32{0}}}
			req.Markers = append(req.Markers, rm)
			resp := request[*kmsg.WriteTxnMarkersResponse](t, ctx, m.cl, req)
			if resp.Version != m.version {
				t.Fatalf("%s: sent at v%d, want v%d", m.name, resp.Version, m.version)
			}
			if got := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; got != m.want {
				t.Fatalf("%s: %s, want %s", m.name, codeName(got), codeName(m.want))
			}
		}
	}

	if err := produceTxn(ctx, cl, "wtm", true, "c1"); err != nil {
		t.Fatal(err)
	}
	ap := ongoing(-1)
	stale := kerr.InvalidProducerEpoch.Code
	send(ap,
		marker{"v2 marker at the ongoing transaction's epoch (the previous one's, late)", raw2, 2, 0, true, stale},
		marker{"v2 marker below the epoch", raw2, 2, -1, true, stale},
		marker{"v1 marker below the epoch", raw1, 1, -1, true, stale},
		marker{"v2 abort at the bumped epoch", raw2, 2, 1, false, 0},
		marker{"the v2 abort sent again", raw2, 2, 1, false, 0},
		marker{"v1 marker at the epoch the abort went below", raw1, 1, 0, false, stale},
	)
	// The coordinator's own abort, at the same bumped epoch, is taken as
	// the marker sent again.
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal("the producer's abort:", err)
	}
	if got := producer(); got.ProducerEpoch != ap.ProducerEpoch+1 || got.CurrentTxnStartOffset != -1 {
		t.Fatalf("after the abort: %+v, want epoch %d and no transaction", got, ap.ProducerEpoch+1)
	}

	ap = ongoing(int16(ap.ProducerEpoch + 1))
	send(ap, marker{"v1 commit at the ongoing transaction's epoch (the old rule)", raw1, 1, 0, true, 0})
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal("the producer's commit:", err)
	}
	if err := produceTxn(ctx, cl, "wtm", true, "c2"); err != nil {
		t.Fatal(err)
	}
	got := consumeIsolated(t, ctx, []string{addr}, "wtm", true, 3)
	if want := []string{"c1", fmt.Sprint("o", ap.ProducerEpoch), "c2"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed read %q, want %q", got, want)
	}
}

// onlyProducer is the one producer DescribeProducers lists on partition 0
// of topic, asked of cl's seed broker: its epoch, the start of its
// ongoing transaction (-1: none), its last marker's coordinator epoch.
func onlyProducer(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.DescribeProducersResponse](t, ctx, cl, req)
	ps := resp.Topics[0].Partitions[0].ActiveProducers
	if len(ps) != 1 {
		t.Fatalf("DescribeProducers: %+v", resp.Topics[0].Partitions[0])
	}
	return ps[0]
}

// The coordinator's markers to a partition another broker leads go as
// WriteTxnMarkers v2 with the transaction's version (KIP-1228), so the
// leader checks them with version 2's epoch rule: from a broker that is
// not the leader (and from the leader, in process), a marker of
// transaction version 2 at the epoch of the producer's ongoing
// transaction is INVALID_PRODUCER_EPOCH, one above it is written, and the
// producer's commit (its marker at that epoch) still completes.
func TestClusterWriteTxnMarkersV2(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tc, led := startTxnCluster(t, ctx, "cwtm", 1)
	leader := led[0].leader
	cl := tc.client(kgo.TransactionalID("cwtm-producer"), kgo.DefaultProduceTopic("cwtm"))
	if err := produceTxn(ctx, cl, "cwtm", true, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ap := onlyProducer(t, ctx, tc.direct(int(leader-1)), "cwtm")
	if ap.CurrentTxnStartOffset < 0 {
		t.Fatalf("no transaction ongoing: %+v", ap)
	}
	other := tc.broker(int(leader) % 3) // node leader%3+1, not the leader
	parts := []coordinator.TxnPartition{{Topic: "cwtm", Partition: 0}}
	m := coordinator.Marker{ProducerID: ap.ProducerID, ProducerEpoch: int16(ap.ProducerEpoch), Commit: true,
		CoordinatorEpoch: ap.CoordinatorEpoch, TransactionVersion: 2}
	// The answer once it is not a retriable error (a leader the sender
	// does not know yet, replicas falling behind on a loaded machine),
	// which the coordinator would retry too.
	write := func(from *Broker) (err error) {
		eventually(t, 30*time.Second, "a marker answer that is not retriable", func() error {
			err = (markerWriter{from}).WriteMarkers(ctx, m, parts)[parts[0]]
			if kerr.IsRetriable(err) {
				return err
			}
			return nil
		})
		return err
	}
	for _, from := range []*Broker{tc.broker(int(leader - 1)), other} {
		if err := write(from); !errors.Is(err, kerr.InvalidProducerEpoch) {
			t.Fatalf("a version 2 marker at the ongoing transaction's epoch from node %d: %v, want %v", from.cfg.NodeID, err, kerr.InvalidProducerEpoch)
		}
	}
	m.ProducerEpoch++
	if err := write(other); err != nil {
		t.Fatalf("a version 2 marker above the epoch: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal("the producer's commit:", err)
	}
	got := consumeIsolated(t, ctx, tc.addrs(), "cwtm", true, 2)
	if !slices.Equal(got, []string{"c1", "o1"}) {
		t.Fatalf("read_committed read %q, want c1, o1", got)
	}
}
