package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// faultBroker is crashBroker with a logger into buf (nil: discarded).
func faultBroker(t *testing.T, fs vfs.FS, mfs pebblevfs.FS, buf *logBuffer, keys ...string) *Broker {
	t.Helper()
	cfg, err := config.Load("", append([]string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=/data",
		"offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0", "log.segment.bytes=4096"}, keys...))
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if buf != nil {
		logger = slog.New(slog.NewTextHandler(buf, nil))
	} else {
		logger = slog.New(slog.DiscardHandler)
	}
	b, err := NewWithOptions(cfg, Options{Logger: logger, FS: fs, MetaFS: mfs})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	awaitServing(t, b)
	return b
}

// produceOneByOne produces n records of one batch each to topic's partition 0.
func produceOneByOne(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("value-%04d-%s", i, strings.Repeat("x", 80)))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// rawFetch fetches topic-0 from offset with one Fetch request and returns
// the partition's error code and the number of records.
func rawFetch(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, offset int64) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = 1 << 20
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	n := 0
	for data := sp.RecordBatches; len(data) >= batch.HeaderSize; {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			break
		}
		n += int(h.NumRecords)
		data = data[h.Size():]
	}
	return sp.ErrorCode, n
}

func produceCode(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) error {
	t.Helper()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("more")}).FirstErr()
}

// rawProduce sends one Produce request (acks=all) of one record to
// topic-0 and returns the partition's error code: the client's own
// produce retries a retriable code.
func rawProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch.Build(batch.NewBuildOptions(), []batch.Record{{Value: []byte("v")}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(1).Request(ctx, req) // no sharding by leader: there is none
	if err != nil {
		t.Fatal(err)
	}
	return kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// rawListEnd sends one ListOffsets request (latest) for topic-0 and
// returns the partition's error code.
func rawListEnd(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(1).Request(ctx, req) // no sharding by leader: there is none
	if err != nil {
		t.Fatal(err)
	}
	return kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
}

// A batch that fails its CRC in a closed segment: after a restart a
// franz-go consumer gets every record before it, the fetch at it answers
// KAFKA_STORAGE_ERROR (without the batch), the consumer does not refetch
// it in a hot loop, produce answers KAFKA_STORAGE_ERROR, the other topic
// serves, and DescribeLogDirs reports the log dir.
func TestBadCRCPartitionServesBelow(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	mfs := pebblevfs.NewMem()
	b := faultBroker(t, mem, mfs, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	for _, name := range []string{"good", "bad"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	produceOneByOne(t, ctx, newClient(t, b.Addr().String()), "bad", 100)
	b.Close()

	// Corrupt a record byte of the 10th batch of the first segment.
	path := filepath.Join("/data", "bad-0", segment.MakeFileName(0, segment.KindLog))
	f, err := mem.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(0)
	var hdr [batch.HeaderSize]byte
	for data := 0; ; {
		f.ReadAt(hdr[:], pos)
		h, _ := batch.ParseHeader(hdr[:])
		if h.Attributes&batch.InternalBit == 0 { // raft's own entries take no offset
			if data == 10 {
				break
			}
			data++
		}
		pos += int64(h.Size())
	}
	f.ReadAt(hdr[:], pos)
	if h, _ := batch.ParseHeader(hdr[:]); h.BaseOffset != 10 {
		t.Fatalf("batch at %d starts at %d", pos, h.BaseOffset)
	}
	f.WriteAt([]byte{0xff}, pos+batch.HeaderSize+5)
	f.Close()

	logs := &logBuffer{}
	b = faultBroker(t, mem, mfs, logs)
	defer b.Close()
	addr := b.Addr().String()
	var fetches atomic.Int64
	hook := fetchCounter{&fetches}
	cons := newClient(t, addr, kgo.ConsumeTopics("bad"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook))
	got := 0
	deadline := time.Now().Add(20 * time.Second)
	for got < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d records, want the 10 before the bad batch", got)
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) {
				t.Fatalf("record at offset %d, want %d", r.Offset, got)
			}
			got++
		})
	}
	// The consumer now sits at the bad batch: over 2s it must not refetch
	// it in a hot loop (it was thousands of fetches a second).
	start := fetches.Load()
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	fs := cons.PollFetches(pctx)
	pcancel()
	if n := fs.NumRecords(); n > 0 {
		t.Fatalf("consumed %d records past the bad batch", n)
	}
	if n := fetches.Load() - start; n > 40 {
		t.Fatalf("%d fetches in 2s at the bad batch", n)
	}
	cl := newClient(t, addr)
	if code, n := rawFetch(t, ctx, cl, "bad", 10); code != kerr.KafkaStorageError.Code || n != 0 {
		t.Fatalf("fetch at the bad batch: code %d, %d records", code, n)
	}
	if code, n := rawFetch(t, ctx, cl, "bad", 0); code != 0 || n != 10 {
		t.Fatalf("fetch below the bad batch: code %d, %d records", code, n)
	}
	if code := rawProduce(t, ctx, cl, "bad"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the damaged partition: code %d", code)
	}
	if err := produceCode(t, ctx, cl, "good"); err != nil {
		t.Fatalf("produce to the healthy partition: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "log damaged") || !strings.Contains(out, path) {
		t.Fatalf("no log line names the damage:\n%s", out)
	}
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if !errors.Is(d.Err, kerr.KafkaStorageError) {
			t.Fatalf("DescribeLogDirs %s: %v, want KAFKA_STORAGE_ERROR", d.Dir, d.Err)
		}
	})
	// Shutting down with a damaged partition is not a failed shutdown
	// (it exited with status 1, the damage reported again).
	cons.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("Close with a damaged partition: %v", err)
	}
}

type fetchCounter struct{ n *atomic.Int64 }

func (h fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == 1 {
		h.n.Add(1)
	}
}

// A partition whose folder cannot be read does not stop the broker: the
// rest serves, and the partition answers KAFKA_STORAGE_ERROR to produce,
// fetch and list offsets, no leader in Metadata, and an error for its log
// dir in DescribeLogDirs.
func TestUnreadablePartitionOffline(t *testing.T) {
	mem := vfs.NewMem()
	mfs := pebblevfs.NewMem()
	b := faultBroker(t, mem, mfs, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	for _, name := range []string{"good", "bad"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	bad := filepath.Join("/data", "bad-0")
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpList && strings.HasPrefix(path, bad) {
			return syscall.EACCES
		}
		return nil
	}))
	b = faultBroker(t, fs, mfs, nil)
	defer b.Close()
	cl := newClient(t, b.Addr().String())
	if err := produceCode(t, ctx, cl, "good"); err != nil {
		t.Fatalf("the healthy partition: %v", err)
	}
	if code, _ := rawFetch(t, ctx, cl, "bad", 0); code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch: code %d, want KAFKA_STORAGE_ERROR", code)
	}
	if code := rawProduce(t, ctx, cl, "bad"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce: code %d", code)
	}
	if code := rawListEnd(t, ctx, cl, "bad"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("list offsets: code %d", code)
	}
	adm = kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, "bad")
	if err != nil {
		t.Fatal(err)
	}
	if p := md.Topics["bad"].Partitions[0]; p.Leader != -1 || len(p.OfflineReplicas) != 1 {
		t.Fatalf("metadata: %+v", p)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if !errors.Is(d.Err, kerr.KafkaStorageError) {
			t.Fatalf("DescribeLogDirs %s: %v", d.Dir, d.Err)
		}
	})
}

// diskFullFS fails writes, syncs and creates under /data with ENOSPC
// while full is set.
func diskFullFS(mem vfs.FS, full *atomic.Bool) vfs.FS {
	return vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if !full.Load() || !strings.HasPrefix(path, "/data/") {
			return nil
		}
		switch op {
		case vfs.OpWrite, vfs.OpSync, vfs.OpCreate, vfs.OpSyncDir, vfs.OpRename:
			return fmt.Errorf("%s %s: %w", op, path, syscall.ENOSPC)
		}
		return nil
	}))
}

// waitProduce polls raw produces to topic-0 until one succeeds.
func waitProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code := rawProduce(t, ctx, cl, topic)
		if code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce still fails %v after the disk was freed: code %d", within, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A full disk is a state the partition leaves by itself: while full,
// produce answers KAFKA_STORAGE_ERROR; once space returns the partition
// resumes without a restart; shutdown on a full disk finishes; a start-up
// on a full disk listens, logs at a bounded rate, and the partition
// opens once space returns. The disk that fills holds the data
// (log.dirs), not the metadata (metadata.log.dir on another): a one-voter
// metadata log must write to start (the leader's entry of its new term,
// this start's registration), and a metadata log that cannot be written
// stops the broker, as Kafka halts when its metadata log dir fails
// (KIP-858).
func TestFullDiskResumes(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	mfs := pebblevfs.NewMem()
	var full atomic.Bool
	fs := diskFullFS(mem, &full)
	b := faultBroker(t, fs, mfs, nil, "metadata.log.dir=/metadata")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := newClient(t, b.Addr().String())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if code := rawProduce(t, ctx, cl, "t"); code != 0 {
		t.Fatalf("produce: code %d", code)
	}
	full.Store(true)
	if code := rawProduce(t, ctx, cl, "t"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a full disk: code %d", code)
	}
	if code := rawProduce(t, ctx, cl, "t"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("second produce on a full disk: code %d", code)
	}
	full.Store(false)
	waitProduce(t, ctx, cl, "t", 20*time.Second)
	if code, n := rawFetch(t, ctx, cl, "t", 0); code != 0 || n != 2 {
		t.Fatalf("after the resume: fetch code %d, %d records, want the 2 acknowledged", code, n)
	}

	// Shutdown on a full disk finishes.
	full.Store(true)
	rawProduce(t, ctx, cl, "t")
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close on a full disk did not finish in 30s")
	}

	// Start-up on a still-full disk: it listens, and logs little.
	logs := &logBuffer{}
	b = faultBroker(t, fs, mfs, logs, "metadata.log.dir=/metadata")
	defer b.Close()
	cl = newClient(t, b.Addr().String())
	if code := rawListEnd(t, ctx, cl, "t"); code != kerr.KafkaStorageError.Code && code != 0 {
		t.Fatalf("list offsets on a full disk: code %d", code)
	}
	lines := func() int { return strings.Count(logs.String(), "\n") }
	before := lines()
	time.Sleep(3 * time.Second) // a rate over a window: the window is the point
	if n := lines() - before; n > 10 {
		t.Fatalf("%d log lines in 3s on a full disk:\n%s", n, logs.String())
	}
	full.Store(false)
	waitProduce(t, ctx, cl, "t", 30*time.Second)
}
