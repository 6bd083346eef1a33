package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInitProducerIDBlocks: 5,000 InitProducerId calls write a handful of
// metadata records (one per block of 1,000; it was one each), the ids are
// unique, and stay unique across a restart.
func TestInitProducerIDBlocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, addr := startBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, addr)
	seen := map[int64]bool{}
	init := func(n int) {
		for range n {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.ProducerID, req.ProducerEpoch = -1, -1
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
			}
			if seen[resp.ProducerID] {
				t.Fatalf("producer id %d handed out twice", resp.ProducerID)
			}
			seen[resp.ProducerID] = true
		}
	}
	before := b.meta.Offset()
	init(5000)
	if recs := b.meta.Offset() - before; recs > 6 {
		t.Fatalf("5000 InitProducerId calls wrote %d metadata records, want at most 6", recs)
	}
	cl.Close()
	b.Close()
	_, addr = startBroker(t, dir)
	cl = newClient(t, addr)
	init(10)
}

// TestMetadataAutoCreateMany: one Metadata request naming 20,000 unknown
// topics with auto-creation on creates a bounded number (the rest get
// THROTTLING_QUOTA_EXCEEDED, retriable), in few metadata commits; the
// broker keeps answering and restarts. Not parallel: opening 500
// partitions in one request is CPU work, and beside the wait-bound
// cluster tests that run in parallel its answer can outlast the client's
// read timeout.
func TestMetadataAutoCreateMany(t *testing.T) {
	dir := t.TempDir()
	b, addr := startBroker(t, dir, "sluice.auto.create.topics.max.per.request=500")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// One request, never retried: a retry after a slow answer (kgo's
	// default read deadline, under -race on a loaded machine) would be a
	// second request, allowed its own 500.
	cl := newClient(t, addr, kgo.RequestRetries(0), kgo.RequestTimeoutOverhead(110*time.Second))
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for i := range 20000 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("auto-%05d", i))
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	created, throttled := 0, 0
	for _, mt := range resp.Topics {
		switch mt.ErrorCode {
		case 0:
			created++
		case kerr.ThrottlingQuotaExceeded.Code:
			throttled++
		default:
			t.Fatalf("topic %s: %v", *mt.Topic, kerr.ErrorForCode(mt.ErrorCode))
		}
	}
	if created != 500 || throttled != 19500 || len(b.meta.Topics()) != 500 {
		t.Fatalf("created %d, throttled %d, %d topics in metadata; want 500, 19500, 500", created, throttled, len(b.meta.Topics()))
	}
	if c := b.meta.Commits(); c > 10 {
		t.Fatalf("%d metadata commits for 500 topics, want a few", c)
	}
	// Still serving: a small request is answered.
	small := kmsg.NewPtrMetadataRequest()
	if _, err := small.RequestWith(ctx, cl); err != nil {
		t.Fatalf("broker stopped answering: %v", err)
	}
	cl.Close()
	b.Close()
	b, _ = startBroker(t, dir)
	if n := len(b.meta.Topics()); n != 500 {
		t.Fatalf("%d topics after a restart, want 500", n)
	}
}

// fdLimitFS counts the files open through it and fails opening more than
// limit with EMFILE, as an exhausted RLIMIT_NOFILE does.
type fdLimitFS struct {
	vfs.FS
	open  atomic.Int64
	limit atomic.Int64
}

type countedFile struct {
	vfs.File
	fs   *fdLimitFS
	once sync.Once
}

func (f *countedFile) Close() error {
	f.once.Do(func() { f.fs.open.Add(-1) })
	return f.File.Close()
}

func (fs *fdLimitFS) wrap(name string, open func(string) (vfs.File, error)) (vfs.File, error) {
	if fs.open.Add(1) > fs.limit.Load() {
		fs.open.Add(-1)
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
	}
	f, err := open(name)
	if err != nil {
		fs.open.Add(-1)
		return nil, err
	}
	return &countedFile{File: f, fs: fs}, nil
}

func (fs *fdLimitFS) Create(name string) (vfs.File, error) { return fs.wrap(name, fs.FS.Create) }
func (fs *fdLimitFS) Open(name string) (vfs.File, error)   { return fs.wrap(name, fs.FS.Open) }
func (fs *fdLimitFS) OpenReadWrite(name string) (vfs.File, error) {
	return fs.wrap(name, fs.FS.OpenReadWrite)
}

// TestCreateRolledBackWhenOpenFails: a topic whose partitions run out of
// file descriptors while opening is not left behind (it stayed in the
// metadata, and every restart failed the same way): CreateTopics answers
// KAFKA_STORAGE_ERROR, the topic is gone with its folders, the broker
// restarts clean, and a topic that fits is created afterwards.
func TestCreateRolledBackWhenOpenFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := &fdLimitFS{FS: vfs.Default}
	fs.limit.Store(math.MaxInt64)
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(cfg, Options{FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	awaitServing(t, b)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	fs.limit.Store(fs.open.Load() + 30) // room for 10 partitions, not 20
	res, _ := adm.CreateTopic(ctx, 20, 1, nil, "big")
	if !errors.Is(res.Err, kerr.KafkaStorageError) {
		t.Fatalf("create with too few descriptors: %v, want KAFKA_STORAGE_ERROR", res.Err)
	}
	if _, ok := b.meta.Topic("big"); ok {
		t.Fatal("the topic whose partitions failed to open stays in the metadata")
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.HasPrefix(n.Name(), "big-") {
			t.Fatalf("folder %s left behind", n.Name())
		}
	}
	if res, err := adm.CreateTopic(ctx, 5, 1, nil, "small"); err != nil || res.Err != nil {
		t.Fatalf("create that fits: %v %v", err, res.Err)
	}
	b.Close()
	b2, _ := startBroker(t, dir)
	if _, ok := b2.meta.Topic("big"); ok {
		t.Fatal("the rolled-back topic is back after a restart")
	}
	if _, ok := b2.partition("small", 4); !ok {
		t.Fatal("small-4 not open after a restart")
	}
}

// TestMaxPartitionsPolicy: creates and partition additions past
// sluice.max.partitions are refused up front with POLICY_VIOLATION.
func TestMaxPartitionsPolicy(t *testing.T) {
	_, addr := startBroker(t, "", "sluice.max.partitions=10")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if res, err := adm.CreateTopic(ctx, 6, 1, nil, "a"); err != nil || res.Err != nil {
		t.Fatalf("create within the limit: %v %v", err, res.Err)
	}
	res, _ := adm.CreateTopic(ctx, 5, 1, nil, "b")
	if !errors.Is(res.Err, kerr.PolicyViolation) || !strings.Contains(res.ErrMessage, "sluice.max.partitions") {
		t.Fatalf("create past the limit: %v %q", res.Err, res.ErrMessage)
	}
	cp, err := adm.UpdatePartitions(ctx, 11, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r := cp["a"]; !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("add partitions past the limit: %v", r.Err)
	}
	if res, err := adm.CreateTopic(ctx, 4, 1, nil, "c"); err != nil || res.Err != nil {
		t.Fatalf("create up to the limit: %v %v", err, res.Err)
	}
	// At the limit, consumer groups still work: __consumer_offsets is
	// not held to it (it was refused, and FindCoordinator answered
	// COORDINATOR_NOT_AVAILABLE for good).
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{"g"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := req.RequestWith(ctx, newClient(t, addr))
		if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindCoordinator at the partition limit: %v %+v", err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPartitionsForFileLimit(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		want  int64
	}{{20000, 4166}, {1 << 20, 218453}, {1024, 1}, {4096, 853}} {
		if got := partitionsForFileLimit(c.limit, 0); got != c.want {
			t.Errorf("limit %d: %d partitions, want %d", c.limit, got, c.want)
		}
	}
}
