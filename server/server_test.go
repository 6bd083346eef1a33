package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startBroker runs a broker on a free port with its data in dir (a new
// temp dir when empty).
func startBroker(t *testing.T, dir string, sets ...string) (*Broker, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	sets = append([]string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + dir}, sets...)
	cfg, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	var logw io.Writer = io.Discard
	var level slog.Level // Info: a discarded log formats little
	if f := os.Getenv("SLUICE_TEST_BROKERLOG"); f != "" {
		lf, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lf.Close() })
		logw, level = lf, slog.LevelDebug
	}
	b, err := New(cfg, slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	awaitServing(t, b)
	t.Cleanup(func() { b.Close() })
	return b, b.Addr().String()
}

// awaitServing waits until b's client listeners serve requests (the
// start-up gate: a single node, a one-voter cluster, registers with itself
// and is unfenced first), so a test's own calls into b find what a client
// would.
func awaitServing(t testing.TB, b *Broker) {
	t.Helper()
	select {
	case <-b.gate:
	case <-time.After(30 * time.Second):
		t.Fatal("the broker's client listeners did not open in 30s")
	}
}

// awaitCaughtUp waits until b applied its metadata log up to its high
// watermark and a reconciler pass covered it (after a restart the applier
// applies the entries committed before the crash, and the reconciler
// opens what they name, after Start), so a test sees the partitions the
// metadata names open.
func awaitCaughtUp(t *testing.T, b *Broker) {
	t.Helper()
	waitFor(t, 30*time.Second, "the metadata log applied to its high watermark", func() bool {
		return b.meta.ReplicatedOffset() >= b.cl.metaPart.HighWatermark()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.recon.changed(ctx)
}

// deadlineContext is a context that ends a little before the test's
// deadline (go test -timeout; ten minutes from now without one), for a
// wait that has no speed target: it fails the test only when what it waits
// for never comes, never because -race on a loaded machine is slow, and
// it ends early enough for the test to report why.
func deadlineContext(t *testing.T) (context.Context, context.CancelFunc) {
	d, ok := t.Deadline()
	if !ok {
		d = time.Now().Add(10 * time.Minute)
	}
	d = d.Add(-min(30*time.Second, time.Until(d)/10))
	return context.WithDeadline(context.Background(), d)
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestProduceConsumeFranzGo(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer := newClient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.AllowAutoTopicCreation())
	want := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Key: nil, Value: []byte("no key")},
		{Key: []byte("tombstone"), Value: nil},
		{Key: []byte("empty"), Value: []byte{}},
	}
	for _, r := range want {
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	consumer := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		w := want[i]
		if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) ||
			(r.Key == nil) != (w.Key == nil) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got key %q value %q offset %d headers %v", i, r.Key, r.Value, r.Offset, r.Headers)
		}
	}
}

func TestCreateTopicsAndListOffsets(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	res, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "events")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	if res, _ := adm.CreateTopic(ctx, 1, 1, nil, "events"); res.Err == nil {
		t.Fatal("duplicate topic accepted")
	}
	if res, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, "bad"); res.Err == nil {
		t.Fatal("bad config accepted")
	}
	if res, _ := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); res.Err == nil {
		t.Fatal("replication factor above the live brokers accepted")
	}
	if res, _ := adm.CreateTopic(ctx, 1, 1, nil, "bad/name"); res.Err == nil {
		t.Fatal("illegal name accepted")
	}
	producer := newClient(t, addr, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Partition: 1, Value: []byte("x"), Timestamp: time.UnixMilli(int64(1000 + i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("events", 1); o.Offset != 10 {
		t.Fatalf("end offset %d", o.Offset)
	}
	byTs, err := adm.ListOffsetsAfterMilli(ctx, 1005, "events")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := byTs.Lookup("events", 1); o.Offset != 5 {
		t.Fatalf("offset for timestamp 1005: %d", o.Offset)
	}
}
