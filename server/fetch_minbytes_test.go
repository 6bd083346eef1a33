package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Fetch MinBytes as Kafka's ReplicaManager and DelayedFetch apply it, for
// every version served and the request shapes clients send: the answer
// comes at once only when the bytes read reach MinBytes, a partition the
// broker knows fails to read, or MaxWaitMs is 0; otherwise it comes after
// MaxWaitMs (or as soon as new data brings the bytes to MinBytes).

// minBytesWait is the MaxWaitMs of requests that must wait it out;
// minBytesSlack is how much earlier than that an answer may come (timer
// granularity). minBytesLong is the MaxWaitMs of requests that must not
// wait it out, and minBytesPrompt, half of it, how late their answer may
// come: not a speed target, an answer that late is taken for one that
// waited for MaxWaitMs.
const (
	minBytesWait   = 500 * time.Millisecond
	minBytesSlack  = 50 * time.Millisecond
	minBytesLong   = 10 * time.Second
	minBytesPrompt = minBytesLong / 2
)

// produceEachPartition produces n small records to each partition of topic,
// one request each (one batch per record, as a client without linger
// sends them).
func produceEachPartition(t *testing.T, addr, topic string, partitions int32, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("r%d", i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// countBatches counts the record batches in a Fetch partition's records.
func countBatches(t *testing.T, recs []byte) int {
	t.Helper()
	n := 0
	for len(recs) > 0 {
		if len(recs) < 12 {
			t.Fatalf("%d bytes left after %d batches: a partial batch", len(recs), n)
		}
		size := 12 + int(binary.BigEndian.Uint32(recs[8:12]))
		if size > len(recs) {
			t.Fatalf("batch %d of %d bytes, %d left", n, size, len(recs))
		}
		recs, n = recs[size:], n+1
	}
	return n
}

// minBytesFetch is a Fetch of partitions (from offset 0 unless offsets
// says otherwise) of one topic.
type minBytesFetch struct {
	topic      string
	id         [16]byte
	partitions []int32
	offsets    map[int32]int64
	epochs     map[int32]int32 // current leader epochs (v9+), -1 unless set
	maxWait    time.Duration
	minBytes   int32
	sessionID  int32
	epoch      int32
	omitTopics bool // an incremental fetch naming no partition
}

func (f minBytesFetch) request() *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, int32(f.maxWait/time.Millisecond), f.minBytes, 50<<20
	req.SessionID, req.SessionEpoch = f.sessionID, f.epoch
	if f.omitTopics {
		return req
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = f.topic, f.id
	for _, p := range f.partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset = p, f.offsets[p]
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 10<<20, -1, -1, -1
		if e, ok := f.epochs[p]; ok {
			rp.CurrentLeaderEpoch = e
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// timedFetch sends f at version and returns how long the answer took and
// the answer.
func timedFetch(rc *rawConn, version int16, f minBytesFetch) (time.Duration, *kmsg.FetchResponse) {
	rc.t.Helper()
	start := time.Now()
	resp := rc.recv(rc.sendAt(f.request(), version)).(*kmsg.FetchResponse)
	return time.Since(start), resp
}

// batchesByPartition returns each answered partition's batch count,
// failing the test on a partition error or a top-level error.
func batchesByPartition(t *testing.T, resp *kmsg.FetchResponse) map[int32]int {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	got := map[int32]int{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			got[rp.Partition] = countBatches(t, rp.RecordBatches)
		}
	}
	return got
}

// Every version from v4, one partition of ten one-record batches and three
// of them, without a session (-1, or no session field before v7), opening
// a session (0) and incrementally (naming no partition): MinBytes 10 MiB
// waits MaxWaitMs and returns every batch; MinBytes 1 answers at once.
func TestFetchMinBytesEveryVersionAndShape(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	topic, err := b.createTopic("mbv", 3, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	produceEachPartition(t, addr, "mbv", 3, 10)
	h := handlers[kmsg.Fetch.Int16()]
	if h.minVersion > 4 {
		t.Fatalf("Fetch served from v%d", h.minVersion)
	}
	for v := int16(4); v <= h.maxVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			t.Parallel()
			rc := dialRaw(t, addr)
			base := minBytesFetch{topic: "mbv", id: topic.ID, maxWait: minBytesWait, minBytes: 10 << 20, epoch: -1}
			check := func(what string, f minBytesFetch, want map[int32]int) *kmsg.FetchResponse {
				t.Helper()
				d, resp := timedFetch(rc, v, f)
				if d < minBytesWait-minBytesSlack {
					t.Errorf("%s: answered after %v, want MaxWaitMs %v (MinBytes %d not reached)", what, d, minBytesWait, f.minBytes)
				}
				got := batchesByPartition(t, resp)
				for p, n := range want {
					if got[p] != n {
						t.Errorf("%s: partition %d returned %d batches, want %d (all: %v)", what, p, got[p], n, got)
					}
				}
				return resp
			}
			one := base
			one.partitions = []int32{0}
			check("one partition", one, map[int32]int{0: 10})
			three := base
			three.partitions = []int32{0, 1, 2}
			check("three partitions", three, map[int32]int{0: 10, 1: 10, 2: 10})
			mid := base
			mid.partitions, mid.offsets = []int32{1}, map[int32]int64{1: 4}
			check("from the middle", mid, map[int32]int{1: 6})

			prompt := three
			prompt.minBytes, prompt.maxWait = 1, minBytesLong
			if d, resp := timedFetch(rc, v, prompt); d > minBytesPrompt {
				t.Errorf("MinBytes 1 over 30 batches: answered after %v", d)
			} else if got := batchesByPartition(t, resp); got[0]+got[1]+got[2] == 0 {
				t.Errorf("MinBytes 1: no batches (%v)", got)
			}

			if v < 7 {
				return
			}
			open := three
			open.epoch = 0
			resp := check("session opened (epoch 0)", open, map[int32]int{0: 10, 1: 10, 2: 10})
			if resp.SessionID <= 0 {
				t.Fatalf("epoch 0 opened no session (id %d)", resp.SessionID)
			}
			inc := base
			inc.sessionID, inc.epoch, inc.omitTopics = resp.SessionID, 1, true
			check("incremental (epoch 1)", inc, map[int32]int{0: 10, 1: 10, 2: 10})
			inc.epoch = 2
			inc.minBytes, inc.maxWait = 1, minBytesLong
			if d, resp := timedFetch(rc, v, inc); d > minBytesPrompt {
				t.Errorf("incremental MinBytes 1: answered after %v", d)
			} else if got := batchesByPartition(t, resp); got[0]+got[1]+got[2] == 0 {
				t.Errorf("incremental MinBytes 1: no batches (%v)", got)
			}
		})
	}
}

// The request of the report: Fetch v11 by topic name, sessionless,
// PartitionMaxBytes 10 MB, MaxWaitMs 500, MinBytes 10 MB over ten records
// produced one at a time, sent through franz-go pinned to Fetch v11 (an
// unpinned client sends its newest version whatever the request's Version
// field says, and a v13+ request naming the topic only by name is
// UNKNOWN_TOPIC_ID at once, as in Kafka).
func TestFetchMinBytesThroughPinnedClient(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	if _, err := b.createTopic("mbc", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	produceEachPartition(t, addr, "mbc", 1, 10)
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.Fetch.Int16(), 11)
	cl := newClient(t, addr, kgo.MaxVersions(versions))
	req := minBytesFetch{topic: "mbc", partitions: []int32{0}, maxWait: minBytesWait, minBytes: 10 << 20, epoch: -1}.request()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	d, resp := time.Since(start), kresp.(*kmsg.FetchResponse)
	if resp.Version != 11 {
		t.Fatalf("sent as v%d", resp.Version)
	}
	if d < minBytesWait-minBytesSlack {
		t.Errorf("answered after %v, want MaxWaitMs %v", d, minBytesWait)
	}
	if got := batchesByPartition(t, resp); got[0] != 10 {
		t.Errorf("returned %d batches, want 10", got[0])
	}
}

// Data arriving during the wait: the fetch keeps waiting while the bytes
// stay below MinBytes, answers as soon as they reach it, and answers at
// MaxWaitMs with what arrived when they never do.
func TestFetchMinBytesNewDataDuringWait(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	topic, err := b.createTopic("mbw", 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	produceEachPartition(t, addr, "mbw", 1, 2) // offsets 0 and 1
	rc := dialRaw(t, addr)
	one := firstBatchSize(t, rc, topic.ID) // the size of one batch
	producer := newClient(t, addr, kgo.DefaultProduceTopic("mbw"))
	produceAfter := func(d time.Duration, value string) <-chan error {
		done := make(chan error, 1)
		go func() {
			time.Sleep(d) // not a wait for a condition: the fetch must wait for this late batch
			done <- producer.ProduceSync(context.Background(), &kgo.Record{Value: []byte(value)}).FirstErr()
		}()
		return done
	}
	next := int64(2) // the log end offset: the fetches start there, with nothing to return yet
	for _, v := range []int16{4, 11, handlers[kmsg.Fetch.Int16()].maxVersion} {
		f := minBytesFetch{topic: "mbw", id: topic.ID, partitions: []int32{0}, offsets: map[int32]int64{0: next}, epoch: -1}

		// Two new batches are needed: the first arrives after 200 ms
		// and must not end the wait, the second after 700 ms must.
		f.minBytes, f.maxWait = int32(one+1), minBytesLong // more than one batch, less than two
		first, second := produceAfter(200*time.Millisecond, "a"), produceAfter(700*time.Millisecond, "b")
		d, resp := timedFetch(rc, v, f)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		if d < 700*time.Millisecond-minBytesSlack || d > 700*time.Millisecond+minBytesPrompt {
			t.Errorf("v%d: MinBytes of two batches answered after %v, want soon after the second batch (700 ms)", v, d)
		}
		if got := batchesByPartition(t, resp); got[0] != 2 {
			t.Errorf("v%d: returned %d batches, want the 2 that arrived", v, got[0])
		}

		// MinBytes never reached: the new batch does not end the wait,
		// and the answer at MaxWaitMs carries it.
		next += 2
		f.offsets[0] = next
		f.minBytes, f.maxWait = 10<<20, 900*time.Millisecond
		arrives := produceAfter(200*time.Millisecond, "c")
		d, resp = timedFetch(rc, v, f)
		if err := <-arrives; err != nil {
			t.Fatal(err)
		}
		if d < f.maxWait-minBytesSlack {
			t.Errorf("v%d: MinBytes 10 MiB answered after %v, want MaxWaitMs %v", v, d, f.maxWait)
		}
		if got := batchesByPartition(t, resp); got[0] != 1 {
			t.Errorf("v%d: returned %d batches, want the 1 that arrived", v, got[0])
		}
		next++
	}
}

// firstBatchSize returns the size of the first batch of mbw-0.
func firstBatchSize(t *testing.T, rc *rawConn, id [16]byte) int {
	t.Helper()
	f := minBytesFetch{topic: "mbw", id: id, partitions: []int32{0}, minBytes: 1, epoch: -1}
	_, resp := timedFetch(rc, handlers[kmsg.Fetch.Int16()].maxVersion, f)
	recs := resp.Topics[0].Partitions[0].RecordBatches
	if len(recs) < 12 {
		t.Fatalf("no batch to measure (%d bytes)", len(recs))
	}
	return 12 + int(binary.BigEndian.Uint32(recs[8:12]))
}

// A partition that fails to read (here a current leader epoch from the
// future: UNKNOWN_LEADER_EPOCH) answers the whole fetch at once, as
// Kafka's errorReadingData; a partition number the topic does not have is
// left out of the read in Kafka (KafkaApis) and does not, and neither
// does a topic ID the broker does not know next to one it does.
func TestFetchMinBytesErrors(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	topic, err := b.createTopic("mbe", 2, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	produceEachPartition(t, addr, "mbe", 2, 3)
	rc := dialRaw(t, addr)
	for _, v := range []int16{9, 11, handlers[kmsg.Fetch.Int16()].maxVersion} {
		f := minBytesFetch{topic: "mbe", id: topic.ID, partitions: []int32{0, 1}, epochs: map[int32]int32{1: 99},
			minBytes: 10 << 20, maxWait: minBytesLong, epoch: -1}
		d, resp := timedFetch(rc, v, f)
		if d > minBytesPrompt {
			t.Errorf("v%d: a partition with a leader epoch from the future: answered after %v, want at once", v, d)
		}
		codes := map[int32]int16{}
		for _, rp := range resp.Topics[0].Partitions {
			codes[rp.Partition] = rp.ErrorCode
		}
		if codes[0] != 0 || codes[1] != kerr.UnknownLeaderEpoch.Code {
			t.Errorf("v%d: codes %v, want partition 1 UNKNOWN_LEADER_EPOCH only", v, codes)
		}

		f = minBytesFetch{topic: "mbe", id: topic.ID, partitions: []int32{0, 7}, minBytes: 10 << 20, maxWait: minBytesWait, epoch: -1}
		if d, _ := timedFetch(rc, v, f); d < minBytesWait-minBytesSlack {
			t.Errorf("v%d: a partition the topic does not have: answered after %v, want MaxWaitMs", v, d)
		}
	}
	// v13+: a second topic whose ID is unknown.
	v := handlers[kmsg.Fetch.Int16()].maxVersion
	req := minBytesFetch{topic: "mbe", id: topic.ID, partitions: []int32{0}, minBytes: 10 << 20, maxWait: minBytesWait, epoch: -1}.request()
	unknown := kmsg.NewFetchRequestTopic()
	unknown.TopicID = [16]byte{1, 2, 3}
	up := kmsg.NewFetchRequestTopicPartition()
	up.PartitionMaxBytes, up.CurrentLeaderEpoch, up.LastFetchedEpoch, up.LogStartOffset = 1<<20, -1, -1, -1
	unknown.Partitions = append(unknown.Partitions, up)
	req.Topics = append(req.Topics, unknown)
	start := time.Now()
	resp := rc.recv(rc.sendAt(req, v)).(*kmsg.FetchResponse)
	if d := time.Since(start); d < minBytesWait-minBytesSlack {
		t.Errorf("v%d: an unknown topic ID next to a known one: answered after %v, want MaxWaitMs", v, d)
	}
	if len(resp.Topics) != 2 || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("v%d: the unknown topic ID is not answered UNKNOWN_TOPIC_ID: %+v", v, resp.Topics)
	}
}

// A replicated partition (three in-process nodes, replication factor 3):
// the leader waits MaxWaitMs below MinBytes at v11 (by name) and the
// newest version (by ID), answers at once at MinBytes 1, answers as soon
// as a replicated batch reaches MinBytes during the wait, and a follower
// answers NOT_LEADER_OR_FOLLOWER at once.
func TestFetchMinBytesReplicated(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "mbr"); err != nil {
		t.Fatal(err)
	}
	leader := tc.waitLeaders("mbr", 3)[0].leader
	md, err := tc.metadata(ctx, "mbr")
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics[0].TopicID
	prod := tc.client(kgo.DefaultProduceTopic("mbr"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < 10; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rc := dialRaw(t, fmt.Sprintf("127.0.0.1:%d", tc.cports[leader-1]))
	next := int64(10)
	for _, v := range []int16{11, handlers[kmsg.Fetch.Int16()].maxVersion} {
		f := minBytesFetch{topic: "mbr", id: id, partitions: []int32{0}, minBytes: 10 << 20, maxWait: minBytesWait, epoch: -1}
		d, resp := timedFetch(rc, v, f)
		if d < minBytesWait-minBytesSlack {
			t.Errorf("v%d: MinBytes 10 MiB answered after %v, want MaxWaitMs", v, d)
		}
		if got := batchesByPartition(t, resp); got[0] != int(next) {
			t.Errorf("v%d: returned %d batches, want %d", v, got[0], next)
		}
		f.minBytes, f.maxWait = 1, minBytesLong
		if d, _ := timedFetch(rc, v, f); d > minBytesPrompt {
			t.Errorf("v%d: MinBytes 1 answered after %v", v, d)
		}
		// From the log end: a batch replicated 300 ms later ends the wait.
		f.offsets = map[int32]int64{0: next}
		done := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond) // not a wait for a condition: the batch comes late on purpose
			done <- prod.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr()
		}()
		d, resp = timedFetch(rc, v, f)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d < 300*time.Millisecond-minBytesSlack || d > 300*time.Millisecond+minBytesPrompt {
			t.Errorf("v%d: MinBytes 1 at the log end answered after %v, want soon after the batch (300 ms)", v, d)
		}
		if got := batchesByPartition(t, resp); got[0] != 1 {
			t.Errorf("v%d: returned %d batches, want the late one", v, got[0])
		}
		next++
	}
	follower := leader%3 + 1
	frc := dialRaw(t, fmt.Sprintf("127.0.0.1:%d", tc.cports[follower-1]))
	f := minBytesFetch{topic: "mbr", id: id, partitions: []int32{0}, minBytes: 10 << 20, maxWait: minBytesLong, epoch: -1}
	d, resp := timedFetch(frc, handlers[kmsg.Fetch.Int16()].maxVersion, f)
	if d > minBytesPrompt {
		t.Errorf("a follower answered after %v, want at once", d)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("a follower answered %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
}

// A long poll waiting when Close begins is answered at once, with what
// the partition has (as at MaxWaitMs), and Close does not wait out its
// MaxWaitMs: without that, Close held until its 10 s cut-off (logged),
// and every test whose consumer was polling paid it at clean-up.
func TestCloseAnswersWaitingFetch(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := newTestBroker(t, logs, slog.LevelInfo, nil)
	topic, err := b.createTopic("mbclose", 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, b.Addr().String())
	f := minBytesFetch{topic: "mbclose", id: topic.ID, partitions: []int32{0}, minBytes: 10 << 20, maxWait: maxFetchWait, epoch: -1}
	corr := rc.sendAt(f.request(), handlers[kmsg.Fetch.Int16()].maxVersion)
	waitFor(t, 30*time.Second, "the Fetch waiting for data", func() bool { return b.polling.Load() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	resp := rc.recv(corr).(*kmsg.FetchResponse)
	if got := batchesByPartition(t, resp); got[0] != 0 {
		t.Errorf("the answer at Close carried %d batches of an empty partition", got[0])
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if l := logs.lines("cut short"); len(l) != 0 {
		t.Fatalf("Close cut requests short instead of answering the long poll: %q", l)
	}
}
