package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func adminCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// admin is a kadm client whose helpers below drop the client's cached
// metadata (kadm answers metadata from a cache up to 5s old) before they
// look, so a deletion or creation just made is seen.
type admin struct {
	*kadm.Client
	cl *kgo.Client
}

func newAdmin(t *testing.T, addr string) *admin {
	cl := newClient(t, addr)
	return &admin{kadm.NewClient(cl), cl}
}

func (a *admin) fresh(topics ...string) { a.cl.PurgeTopicsFromClient(topics...) }

// mustCreate creates a topic and returns its ID.
func mustCreate(t *testing.T, ctx context.Context, adm *admin, name string, partitions int32) kadm.TopicID {
	t.Helper()
	res, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err != nil || res.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, res.Err)
	}
	return res.ID
}

// produceN writes n one-record batches to a partition, with timestamps
// 1000, 1001, ...
func produceN(t *testing.T, ctx context.Context, addr, topic string, p int32, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Partition: p, Value: []byte("x"), Timestamp: time.UnixMilli(int64(1000 + i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}
}

// endOffset and startOffset list one partition's offsets (ListOffsets
// latest / earliest).
func endOffset(t *testing.T, ctx context.Context, adm *admin, topic string, p int32) int64 {
	t.Helper()
	adm.fresh(topic)
	lo, err := adm.ListEndOffsets(ctx, topic)
	return lookupOffset(t, lo, err, topic, p)
}

func startOffset(t *testing.T, ctx context.Context, adm *admin, topic string, p int32) int64 {
	t.Helper()
	adm.fresh(topic)
	lo, err := adm.ListStartOffsets(ctx, topic)
	return lookupOffset(t, lo, err, topic, p)
}

func lookupOffset(t *testing.T, lo kadm.ListedOffsets, err error, topic string, p int32) int64 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	o, ok := lo.Lookup(topic, p)
	if !ok || o.Err != nil {
		t.Fatalf("list offsets %s-%d: found %v, err %v", topic, p, ok, o.Err)
	}
	return o.Offset
}

func assertNoDir(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: still there (stat: %v)", dir, err)
	}
}

func assertUnknownTopic(t *testing.T, ctx context.Context, adm *admin, topic string) {
	t.Helper()
	adm.fresh(topic)
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if all.Has(topic) {
		t.Fatalf("metadata still lists %s", topic)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := md.Topics[topic].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("metadata for deleted %s: %v", topic, err)
	}
}

func TestDeleteTopicsByNameAndID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, addr := startBroker(t, dir)
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	cl := adm.cl

	goneID := mustCreate(t, ctx, adm, "gone", 2)
	byID := mustCreate(t, ctx, adm, "byid", 1)
	staysID := mustCreate(t, ctx, adm, "stays", 1)
	produceN(t, ctx, addr, "gone", 1, 5)
	produceN(t, ctx, addr, "byid", 0, 3)
	produceN(t, ctx, addr, "stays", 0, 2)

	// By name (kadm sends v6 with names; the v0-5 path is the same code).
	res, err := adm.DeleteTopic(ctx, "gone")
	if err != nil {
		t.Fatalf("delete by name: %v", err)
	}
	if res.ID != goneID {
		t.Fatalf("delete answered id %v, created %v", res.ID, goneID)
	}

	// By ID (v6, KIP-516): kadm has no helper, so use the request itself.
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = byID
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "byid" {
		t.Fatalf("delete by id: %+v", resp.Topics)
	}

	for _, name := range []string{"gone", "byid"} {
		assertUnknownTopic(t, ctx, adm, name)
	}
	assertNoDir(t, filepath.Join(dir, "gone-0"))
	assertNoDir(t, filepath.Join(dir, "gone-1"))
	assertNoDir(t, filepath.Join(dir, "byid-0"))
	if end := endOffset(t, ctx, adm, "stays", 0); end != 2 {
		t.Fatalf("untouched topic's end offset %d", end)
	}

	// A topic named by ID and, in another entry, by name: one answer,
	// INVALID_REQUEST with both, and the topic stays (Kafka's
	// ControllerApis.deleteTopics).
	pair := kmsg.NewPtrDeleteTopicsRequest()
	byIDEntry, byNameEntry := kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic()
	byIDEntry.TopicID, byNameEntry.Topic = staysID, kmsg.StringPtr("stays")
	pair.Topics = append(pair.Topics, byIDEntry, byNameEntry)
	twice := kmsg.NewPtrDeleteTopicsRequest() // the ID twice and the name: the same
	twice.Topics = append(twice.Topics, byIDEntry, byIDEntry, byNameEntry)
	twiceResp, err := twice.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range twiceResp.Topics {
		if st.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("delete by ID twice and by name: %+v", twiceResp.Topics)
		}
	}
	neither := kmsg.NewPtrDeleteTopicsRequest()
	neither.Topics = append(neither.Topics, kmsg.NewDeleteTopicsRequestTopic())
	neitherResp, err := neither.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(neitherResp.Topics) != 1 || neitherResp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("delete naming neither a name nor an ID: %+v", neitherResp.Topics)
	}
	pairResp, err := pair.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairResp.Topics) != 1 || pairResp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || pairResp.Topics[0].Topic == nil ||
		*pairResp.Topics[0].Topic != "stays" || pairResp.Topics[0].TopicID != staysID {
		t.Fatalf("delete by ID and by name: %+v", pairResp.Topics)
	}
	if end := endOffset(t, ctx, adm, "stays", 0); end != 2 {
		t.Fatalf("the topic named twice: end offset %d", end)
	}

	// Deleting again: unknown by name and by ID.
	again, err := adm.DeleteTopics(ctx, "gone")
	if err != nil || !errors.Is(again["gone"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second delete by name: %v %v", err, again["gone"].Err)
	}
	resp, err = req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("second delete by id: %+v", resp.Topics)
	}

	// Old-version request by name (v3).
	v3 := kversion.Stable()
	v3.SetMaxKeyVersion(20, 3)
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.TopicNames = []string{"stays", "never"}
	oresp, err := old.RequestWith(ctx, newClient(t, addr, kgo.MaxVersions(v3)))
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, t := range oresp.Topics {
		codes[*t.Topic] = t.ErrorCode
	}
	if codes["stays"] != 0 || codes["never"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("v3 delete: %v", codes)
	}
	assertNoDir(t, filepath.Join(dir, "stays-0"))

	// The name can be used again: a new ID and no old data.
	newID := mustCreate(t, ctx, adm, "gone", 2)
	if newID == goneID {
		t.Fatal("recreated topic kept its old id")
	}
	for p := int32(0); p < 2; p++ {
		if end := endOffset(t, ctx, adm, "gone", p); end != 0 {
			t.Fatalf("recreated gone-%d: end offset %d", p, end)
		}
	}
	produceN(t, ctx, addr, "gone", 1, 1)
	if end := endOffset(t, ctx, adm, "gone", 1); end != 1 {
		t.Fatalf("first record of the recreated topic: end offset %d", end)
	}
}

func partitionCount(t *testing.T, ctx context.Context, adm *admin, topic string) int {
	t.Helper()
	adm.fresh(topic)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("metadata %s: %v %v", topic, err, td[topic].Err)
	}
	return len(td[topic].Partitions)
}

func TestCreatePartitionsGrowOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, addr := startBroker(t, dir)
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	cl := adm.cl
	mustCreate(t, ctx, adm, "grow", 1)

	rs, err := adm.CreatePartitions(ctx, 2, "grow")
	if err != nil || rs.Error() != nil {
		t.Fatalf("add 2: %v %v", err, rs.Error())
	}
	if n := partitionCount(t, ctx, adm, "grow"); n != 3 {
		t.Fatalf("%d partitions after adding 2 to 1", n)
	}
	for p := 1; p < 3; p++ {
		if _, err := os.Stat(filepath.Join(dir, "grow-"+string(rune('0'+p)))); err != nil {
			t.Fatalf("new partition's folder: %v", err)
		}
	}
	produceN(t, ctx, addr, "grow", 2, 3)
	if end := endOffset(t, ctx, adm, "grow", 2); end != 3 {
		t.Fatalf("new partition end offset %d", end)
	}

	// Never shrink, and the same count is no growth.
	for _, set := range []int{2, 3} {
		rs, err := adm.UpdatePartitions(ctx, set, "grow")
		if err != nil || !errors.Is(rs["grow"].Err, kerr.InvalidPartitions) {
			t.Fatalf("set %d: %v %v", set, err, rs["grow"].Err)
		}
	}
	// Validate-only changes nothing.
	rs, err = adm.ValidateUpdatePartitions(ctx, 5, "grow")
	if err != nil || rs.Error() != nil {
		t.Fatalf("validate set 5: %v %v", err, rs.Error())
	}
	if n := partitionCount(t, ctx, adm, "grow"); n != 3 {
		t.Fatalf("%d partitions after a validate-only request", n)
	}
	assertNoDir(t, filepath.Join(dir, "grow-3"))
	rs, err = adm.UpdatePartitions(ctx, 4, "nope")
	if err != nil || !errors.Is(rs["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v %v", err, rs["nope"].Err)
	}

	// A manual assignment naming a broker that does not exist is
	// INVALID_REPLICA_ASSIGNMENT (Kafka's rule); one naming this node is
	// taken; a duplicate topic is refused.
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 4
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("manual assignment to broker 0: %+v", resp.Topics)
	}
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}, {Replicas: []int32{1}}}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	if resp, err = req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("manual assignment of 2 partitions where 1 is added: %+v", resp.Topics)
	}
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	if resp, err = req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("manual assignment to this node: %+v", resp.Topics)
	}
	rt.Count = 5
	rt.Assignment = nil
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt, rt}
	resp, err = req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.Topics {
		if st.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate topic: %+v", resp.Topics)
		}
	}
	if n := partitionCount(t, ctx, adm, "grow"); n != 4 {
		t.Fatalf("%d partitions after the manual assignment and refused requests, want 4", n)
	}
}

func TestDeleteRecords(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "", "log.segment.bytes=200")
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	mustCreate(t, ctx, adm, "trim", 2)
	produceN(t, ctx, addr, "trim", 0, 10)

	del := func(p int32, at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "trim", Partition: p, At: at})
		rs, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := rs["trim"][p]
		if !ok {
			t.Fatalf("no answer for trim-%d", p)
		}
		return r
	}
	if r := del(0, 4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete before 4: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if lso := startOffset(t, ctx, adm, "trim", 0); lso != 4 {
		t.Fatalf("earliest offset %d after deleting before 4", lso)
	}
	// By an old timestamp (record 0 has timestamp 1000): the first record
	// left, at the low watermark.
	byTs, err := adm.ListOffsetsAfterMilli(ctx, 1000, "trim")
	if o := lookupOffset(t, byTs, err, "trim", 0); o != 4 {
		t.Fatalf("offset for an old timestamp: %d, want the low watermark 4", o)
	}

	// Consuming from a deleted offset: OFFSET_OUT_OF_RANGE.
	consumer := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"trim": {0: kgo.NewOffset().At(2)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	for {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no OFFSET_OUT_OF_RANGE for a deleted offset")
		}
		if len(fs.Records()) > 0 {
			t.Fatalf("read deleted records from offset %d", fs.Records()[0].Offset)
		}
		if err := fs.Err(); errors.Is(err, kerr.OffsetOutOfRange) {
			break
		} else if err != nil {
			t.Fatalf("fetch: %v", err)
		}
	}
	// From the start: the first record is at the low watermark.
	consumer = newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"trim": {0: kgo.NewOffset().AtStart()}}))
	fs := consumer.PollFetches(ctx)
	if err := fs.Err(); err != nil || len(fs.Records()) == 0 || fs.Records()[0].Offset != 4 {
		t.Fatalf("consume from the start: %v %d records", err, len(fs.Records()))
	}

	// Past the high watermark: out of range; below the log start offset:
	// nothing changes; -1: up to the high watermark.
	if r := del(0, 11); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("offset past the high watermark: %v", r.Err)
	}
	if r := del(0, -2); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("offset -2: %v", r.Err)
	}
	if r := del(0, 2); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("offset below the log start: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if r := del(0, -1); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete to the high watermark: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if lso, end := startOffset(t, ctx, adm, "trim", 0), endOffset(t, ctx, adm, "trim", 0); lso != 10 || end != 10 {
		t.Fatalf("after deleting everything: start %d end %d", lso, end)
	}
	if r := del(1, -1); r.Err != nil || r.LowWatermark != 0 {
		t.Fatalf("empty partition: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	// Unknown partitions and topics.
	req := kmsg.NewPtrDeleteRecordsRequest()
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"trim", 7}, {"nope", 0}} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = tp.p, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	// kgo would route by partition leader and fail unknown partitions
	// itself: send the request to the broker directly.
	kresp, err := adm.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DeleteRecordsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics answered", len(resp.Topics))
	}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code || sp.LowWatermark != -1 {
				t.Fatalf("%s-%d: error code %d, low watermark %d", st.Topic, sp.Partition, sp.ErrorCode, sp.LowWatermark)
			}
		}
	}
	// Appends continue after the new log start.
	produceN(t, ctx, addr, "trim", 0, 1)
	if end := endOffset(t, ctx, adm, "trim", 0); end != 11 {
		t.Fatalf("end offset %d after one more record", end)
	}
}

func TestTopicNameCollision(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	mustCreate(t, ctx, adm, "a.b", 1)
	if res, _ := adm.CreateTopic(ctx, 1, 1, nil, "a_b"); !errors.Is(res.Err, kerr.InvalidTopicException) {
		t.Fatalf("a_b next to a.b: %v", res.Err)
	}
	// Once a.b is deleted, a_b is free.
	if _, err := adm.DeleteTopic(ctx, "a.b"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, ctx, adm, "a_b", 1)
	if res, _ := adm.CreateTopic(ctx, 1, 1, nil, "a.b"); !errors.Is(res.Err, kerr.InvalidTopicException) {
		t.Fatalf("a.b next to a_b: %v", res.Err)
	}
}

func TestTopicAdminSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1, addr := startBroker(t, dir)
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	keepID := mustCreate(t, ctx, adm, "keep", 2)
	dropID := mustCreate(t, ctx, adm, "drop", 1)
	mustCreate(t, ctx, adm, "trimmed", 1)
	produceN(t, ctx, addr, "keep", 1, 4)
	produceN(t, ctx, addr, "drop", 0, 2)
	produceN(t, ctx, addr, "trimmed", 0, 5)
	if _, err := adm.DeleteTopic(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	if rs, err := adm.UpdatePartitions(ctx, 3, "keep"); err != nil || rs.Error() != nil {
		t.Fatalf("grow keep: %v %v", err, rs.Error())
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: 3})
	if rs, err := adm.DeleteRecords(ctx, os); err != nil || rs["trimmed"][0].Err != nil {
		t.Fatalf("delete records: %v %v", err, rs["trimmed"][0].Err)
	}
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}

	_, addr = startBroker(t, dir)
	adm = newAdmin(t, addr)
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td.Has("drop") {
		t.Fatal("deleted topic back after a restart")
	}
	assertNoDir(t, filepath.Join(dir, "drop-0"))
	if td["keep"].ID != keepID || len(td["keep"].Partitions) != 3 {
		t.Fatalf("keep after restart: id %v (was %v), %d partitions", td["keep"].ID, keepID, len(td["keep"].Partitions))
	}
	if end := endOffset(t, ctx, adm, "keep", 1); end != 4 {
		t.Fatalf("keep-1 end offset %d after restart", end)
	}
	if lso := startOffset(t, ctx, adm, "trimmed", 0); lso != 3 {
		t.Fatalf("trimmed log start offset %d after restart", lso)
	}
	if id := mustCreate(t, ctx, adm, "drop", 1); id == dropID {
		t.Fatal("recreated topic kept its old id")
	}
	if end := endOffset(t, ctx, adm, "drop", 0); end != 0 {
		t.Fatalf("recreated topic end offset %d", end)
	}
}

// A crash between a deletion's metadata commit and its folder removal
// leaves a folder no topic owns; a new topic of that name must not
// inherit it.
func TestCreateTopicRemovesLeftoverFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	left := filepath.Join(dir, "ghost-0")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "stale"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, addr := startBroker(t, dir)
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	mustCreate(t, ctx, adm, "ghost", 1)
	assertNoDir(t, filepath.Join(left, "stale"))
	if end := endOffset(t, ctx, adm, "ghost", 0); end != 0 {
		t.Fatalf("end offset %d", end)
	}
}

// Deleting a topic while clients produce to and fetch from it: no race,
// no hang, and the broker keeps serving.
func TestDeleteTopicUnderLoad(t *testing.T) {
	_, addr := startBroker(t, "")
	ctx := adminCtx(t)
	adm := newAdmin(t, addr)
	mustCreate(t, ctx, adm, "busy", 2)
	produceN(t, ctx, addr, "busy", 0, 1)

	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var produced, polled atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		p := newClient(t, addr, kgo.DefaultProduceTopic("busy"),
			kgo.RecordDeliveryTimeout(time.Second), kgo.MetadataMinAge(50*time.Millisecond), kgo.UnknownTopicRetries(1))
		for loadCtx.Err() == nil {
			if p.ProduceSync(loadCtx, &kgo.Record{Value: []byte("y")}).FirstErr() == nil {
				produced.Add(1)
			}
		}
	}()
	go func() {
		defer wg.Done()
		c := newClient(t, addr, kgo.ConsumeTopics("busy"), kgo.FetchMaxWait(100*time.Millisecond))
		for loadCtx.Err() == nil {
			c.PollFetches(loadCtx)
			polled.Add(1)
		}
	}()
	waitFor(t, 10*time.Second, "the load to start", func() bool { return produced.Load() > 0 && polled.Load() > 0 })
	if _, err := adm.DeleteTopic(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	stop()
	wg.Wait()
	assertUnknownTopic(t, ctx, adm, "busy")
	mustCreate(t, ctx, adm, "busy", 1)
	if end := endOffset(t, ctx, adm, "busy", 0); end != 0 {
		t.Fatalf("recreated topic end offset %d", end)
	}
}
