package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Behaviours where Kafka's answer is exact (issue "Kafka conformance").

// ListOffsets' special timestamps are version-gated
// (ReplicaManager.isListOffsetsTimestampUnsupported).
func TestListOffsetsSpecialTimestampVersions(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	if _, err := b.createTopic("lo", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	for _, tc := range []struct {
		ts      int64
		version int16
		want    int16
	}{
		{-3, 6, kerr.UnsupportedVersion.Code},
		{-3, 7, 0},
		{-4, 7, kerr.UnsupportedVersion.Code},
		{-4, 8, 0},
		{-5, 8, kerr.UnsupportedVersion.Code},
		{-1, 1, 0},
		{-2, 1, 0},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tc.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.recv(rc.sendAt(req, tc.version)).(*kmsg.ListOffsetsResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("timestamp %d at v%d: code %d, want %d", tc.ts, tc.version, got, tc.want)
		}
	}
}

// InitProducerId without a transactional id gives a new producer id with
// epoch 0; a half-set id/epoch pair is INVALID_REQUEST
// (KafkaApis.handleInitProducerIdRequest).
func TestInitProducerIDPairs(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	rc := dialRaw(t, addr)
	init := func(id int64, epoch int16) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.ProducerID, req.ProducerEpoch = id, epoch
		req.TransactionTimeoutMillis = 60000
		return rc.recv(rc.sendAt(req, 4)).(*kmsg.InitProducerIDResponse)
	}
	first := init(-1, -1)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("new producer: %+v", first)
	}
	if r := init(first.ProducerID, 0); r.ErrorCode != 0 || r.ProducerID == first.ProducerID || r.ProducerEpoch != 0 {
		t.Errorf("with the current id and epoch: id %d epoch %d code %d; want a new id, epoch 0", r.ProducerID, r.ProducerEpoch, r.ErrorCode)
	}
	for _, pair := range [][2]int64{{first.ProducerID, -1}, {-1, 3}} {
		if r := init(pair[0], int16(pair[1])); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("id %d epoch %d: code %d, want INVALID_REQUEST", pair[0], pair[1], r.ErrorCode)
		}
	}
}

// A client batch must start at offset 0 and its count must fit its
// offsets; otherwise INVALID_RECORD (non-retriable), and nothing is
// stored.
func TestProduceBaseOffsetNotZero(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	topic, err := b.createTopic("bo", 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	data := batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Value: []byte("v")}})
	binary.BigEndian.PutUint64(data[batch.OffBaseOffset:], 5)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "bo", topic.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = data
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.recv(rc.send(req)).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRecord.Code {
		t.Fatalf("code %d, want INVALID_RECORD", code)
	}
	if part, _ := b.partition("bo", 0); part.LogEndOffset() != 0 {
		t.Fatalf("stored: log end offset %d", part.LogEndOffset())
	}
}

// DeleteRecords on a compact-only topic is POLICY_VIOLATION
// (Partition.deleteRecordsOnLeader).
func TestDeleteRecordsCompactOnlyPolicyViolation(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "cmp"); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "cmp", Partition: 0, At: 0})
	rs, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Lookup("cmp", 0); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("got %v, want POLICY_VIOLATION", r.Err)
	}
}

// A request at a version outside the ones served closes the connection
// without an answer, whatever the API, as Kafka's SocketServer does
// (parseRequestHeader: UnsupportedVersionException, then the channel is
// closed); Produce v0-v2 included, although ApiVersions lists Produce from
// v0 as Kafka 4 does (librdkafka needs it to compress, KAFKA-18659).
// ApiVersions alone answers a version it does not know, in v0 (KIP-511).
func TestVersionsOutsideServedCloseConnection(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	if _, err := b.createTopic("old", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	produce := func() kmsg.Request {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "old"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = []byte{}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	fetch := func() kmsg.Request {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "old"
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		return req
	}
	cases := []struct {
		req     kmsg.Request
		version int16
	}{
		{produce(), 0}, {produce(), 2}, // listed, not served
		{fetch(), 3}, // below the oldest listed
		{kmsg.NewPtrListOffsetsRequest(), 0},
	}
	// Above the newest served, where kmsg can still encode the request.
	for _, req := range []kmsg.Request{fetch(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrOffsetCommitRequest(), kmsg.NewPtrFindCoordinatorRequest()} {
		if h := handlers[req.Key()]; req.MaxVersion() > h.maxVersion {
			cases = append(cases, struct {
				req     kmsg.Request
				version int16
			}{req, h.maxVersion + 1})
		}
	}
	if len(cases) < 6 {
		t.Fatalf("only %d cases: kmsg knows no version above the served ones", len(cases))
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s v%d", kmsg.NameForKey(tc.req.Key()), tc.version)
		rc := dialRaw(t, addr)
		rc.sendAt(tc.req, tc.version)
		rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var buf [4]byte
		n, err := io.ReadFull(rc.c, buf[:])
		var ne net.Error
		switch {
		case err == nil:
			t.Errorf("%s: answered (a %d-byte frame), want the connection closed", name, binary.BigEndian.Uint32(buf[:]))
		case errors.As(err, &ne) && ne.Timeout():
			t.Errorf("%s: connection still open after 10 s without an answer", name)
		case n != 0:
			t.Errorf("%s: %d bytes, then %v", name, n, err)
		}
	}
	// The broker serves on, and lists Produce from v0.
	rc := dialRaw(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	resp := rc.recv(rc.sendAt(av, 4)).(*kmsg.ApiVersionsResponse)
	listed := false
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 {
			listed = k.MinVersion == 0 && k.MaxVersion == handlers[0].maxVersion
		}
	}
	if !listed {
		t.Errorf("Produce not listed from v0 to v%d: %+v", handlers[0].maxVersion, resp.ApiKeys)
	}
	// ApiVersions above the newest: UNSUPPORTED_VERSION with the list, in v0
	// (read by hand: the answer is v0 whatever the request's version).
	raw := dialRaw(t, addr)
	hdr := binary.BigEndian.AppendUint32(nil, 10)
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(kmsg.ApiVersions.Int16()))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(handlers[kmsg.ApiVersions.Int16()].maxVersion+1))
	hdr = binary.BigEndian.AppendUint32(hdr, 7)
	hdr = binary.BigEndian.AppendUint16(hdr, 0xffff)
	if _, err := raw.c.Write(hdr); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(raw.r, size[:]); err != nil {
		t.Fatalf("ApiVersions above the newest: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(raw.r, body); err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.SetVersion(0)
	if err := v0.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if v0.ErrorCode != kerr.UnsupportedVersion.Code || len(v0.ApiKeys) == 0 {
		t.Errorf("ApiVersions above the newest: code %d, %d keys; want UNSUPPORTED_VERSION with the list", v0.ErrorCode, len(v0.ApiKeys))
	}
}

// A Fetch whose MinBytes the data does not reach waits MaxWaitMs even when
// every partition returned records (Kafka's DelayedFetch); with MinBytes
// reached it answers at once.
func TestFetchHonoursMinBytes(t *testing.T) {
	b, addr := startBroker(t, "")
	topic, err := b.createTopic("mb", 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := b.partition("mb", 0)
	if _, err := part.Append(context.Background(), batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Value: make([]byte, 700)}}), replica.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	fetch := func(minBytes, maxWaitMillis int32) (time.Duration, int) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWaitMillis, minBytes, 50<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "mb", topic.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 1<<20, -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp := rc.recv(rc.send(req)).(*kmsg.FetchResponse)
		return time.Since(start), len(resp.Topics[0].Partitions[0].RecordBatches)
	}
	if d, n := fetch(10<<20, 500); d < 400*time.Millisecond || n == 0 {
		t.Errorf("MinBytes 10 MiB over %d bytes: answered after %v", n, d)
	}
	// "At once" is "without waiting out MaxWaitMs": it is ten minutes,
	// and the connection's deadline (dialRaw: 30 s) fails the fetch long
	// before (a deadline, not a speed target).
	if d, n := fetch(1, 600000); n == 0 {
		t.Errorf("MinBytes 1: answered after %v with %d bytes", d, n)
	}
}

// A second broker on the same log dir is refused with a message that says
// another broker holds it (Kafka's .lock), and the first keeps serving.
func TestLogDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startBroker(t, dir)
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := New(cfg, nil)
	if err == nil {
		b2.Close()
		t.Fatal("a second broker opened a log dir in use")
	}
	if !strings.Contains(err.Error(), "log.dirs: "+dir+" is in use by another broker") || !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("error %q does not say another broker holds the folder", err)
	}
}

// Fetch (v9+) and ListOffsets (v4+) check the client's current leader
// epoch (KIP-320): one newer than the partition's is UNKNOWN_LEADER_EPOCH.
func TestCurrentLeaderEpochChecked(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	topic, err := b.createTopic("ep", 1, 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := b.partition("ep", 0)
	ep := part.LeaderEpoch() // the raft term of the partition's leader
	rc := dialRaw(t, addr)
	for _, tc := range []struct {
		epoch int32
		want  int16
	}{{-1, 0}, {ep, 0}, {ep + 5, kerr.UnknownLeaderEpoch.Code}} {
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "ep"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp, lp.CurrentLeaderEpoch = -1, tc.epoch
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
		if got := rc.recv(rc.send(lo)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("ListOffsets with current leader epoch %d: code %d, want %d", tc.epoch, got, tc.want)
		}
		f := kmsg.NewPtrFetchRequest()
		f.ReplicaID, f.MaxWaitMillis, f.MaxBytes, f.SessionEpoch = -1, 0, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "ep", topic.ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = 1<<20, tc.epoch, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		if got := rc.recv(rc.send(f)).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Errorf("Fetch with current leader epoch %d: code %d, want %d", tc.epoch, got, tc.want)
		}
	}
}

// Several log.dirs (JBOD, as Kafka): new partitions go to the dir holding
// the fewest, a restart finds them wherever they are, and DescribeLogDirs
// answers each dir with its partitions.
func TestSeveralLogDirs(t *testing.T) {
	t.Parallel()
	d1, d2 := t.TempDir(), t.TempDir()
	dirs := "log.dirs=" + d1 + "," + d2
	b, addr := startBroker(t, d1, dirs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "jbod"); err != nil {
		t.Fatal(err)
	}
	perDir := func(b *Broker) map[string]int {
		n := map[string]int{}
		for p := int32(0); p < 4; p++ {
			part, ok := b.partition("jbod", p)
			if !ok {
				t.Fatalf("jbod-%d not open", p)
			}
			n[filepath.Dir(part.Dir())]++
		}
		return n
	}
	if n := perDir(b); n[filepath.Clean(d1)] != 2 || n[filepath.Clean(d2)] != 2 {
		t.Fatalf("partitions per dir: %v", n)
	}
	if err := newClient(t, addr, kgo.DefaultProduceTopic("jbod")).ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	perReported := map[string]int{}
	for _, d := range all[1] {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "jbod" {
				perReported[d.Dir]++
			}
		})
	}
	if len(all[1]) != 2 || perReported[filepath.Clean(d1)] != 2 || perReported[filepath.Clean(d2)] != 2 {
		t.Fatalf("DescribeLogDirs: %d dirs, jbod partitions per dir %v", len(all[1]), perReported)
	}
	b.Close()
	b2, _ := startBroker(t, d1, dirs)
	if n := perDir(b2); n[filepath.Clean(d1)] != 2 || n[filepath.Clean(d2)] != 2 {
		t.Fatalf("after a restart, partitions per dir: %v", n)
	}
	if _, err := os.Stat(filepath.Join(d2, lockName)); err != nil {
		t.Fatalf("the second log dir is not locked: %v", err)
	}
}

// Clients retry an auto-creation that fails without end, so a
// default.replication.factor no broker set can satisfy logs one warning
// per interval with the count of failed requests, not one per request.
func TestAutoCreateFailuresLogSummarized(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := newTestBroker(t, logs, slog.LevelInfo, func(b *Broker) { b.logEvery = time.Hour }, "default.replication.factor=3")
	ctx, cancel := deadlineContext(t)
	defer cancel()
	cl := newClient(t, b.Addr().String())
	const requests = 20
	for range requests {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("needs-three")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("answer %+v, want UNKNOWN_TOPIC_OR_PARTITION", resp.Topics)
		}
	}
	if lines := logs.lines("level=WARN", "not auto-created"); len(lines) != 1 || !strings.Contains(lines[0], "INVALID_REPLICATION_FACTOR") {
		t.Fatalf("%d warnings for %d failed auto-creations in one interval, want the first at once: %q", len(lines), requests, lines)
	}
	b.autoCreateFails.flush()
	if lines := logs.lines("level=WARN", "not auto-created"); len(lines) != 2 || !strings.Contains(lines[1], fmt.Sprintf("count=%d", requests-1)) {
		t.Errorf("the interval's summary does not count the other %d failures: %q", requests-1, lines)
	}
}

// An auto-creation that cannot be satisfied (default.replication.factor
// above the brokers that can take a replica) answers Metadata
// UNKNOWN_TOPIC_OR_PARTITION, which clients retry, not the creation's own
// error: Kafka's AutoTopicCreationManager sends the creation to the
// controller without waiting and answers every topic it sent so; only a
// name that can never be valid answers INVALID_TOPIC_EXCEPTION
// (filterCreatableTopics).
func TestAutoCreateUnsatisfiableIsRetriable(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "default.replication.factor=3")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, name := range []string{"needs-three", "not a name!"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"needs-three": kerr.UnknownTopicOrPartition.Code, "not a name!": kerr.InvalidTopicException.Code}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(want))
	}
	for _, mt := range resp.Topics {
		if w, ok := want[*mt.Topic]; !ok || mt.ErrorCode != w {
			t.Errorf("topic %q: %v, want %v", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode), kerr.ErrorForCode(w))
		}
	}
	if _, ok := b.meta.Topic("needs-three"); ok {
		t.Error("a topic needing three replicas was created on one broker")
	}
}
