package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/faultinject"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// faultInjectBroker is faultBroker on faultinject's FS over a MemFS, its
// clock the faults' clock.
func faultInjectBroker(t *testing.T, f *faultinject.Faults) *Broker {
	t.Helper()
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=/data",
		"offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(cfg, Options{FS: f.FS(vfs.NewMem()), MetaFS: f.MetaFS(pebblevfs.NewMem()), Now: f.Now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	awaitServing(t, b)
	t.Cleanup(func() { b.Close() })
	return b
}

// readFromStart reads topic-0 from the start until it has n records.
func readFromStart(t *testing.T, ctx context.Context, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// fail_writes: a produce (acks=all) fails with KAFKA_STORAGE_ERROR; once
// cleared, produces succeed again without a restart and every
// acknowledged record reads back.
func TestFaultInjectFailWritesResumes(t *testing.T) {
	t.Parallel()
	f := faultinject.New()
	b := faultInjectBroker(t, f)
	addr := b.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := newClient(t, addr)
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	// No retries (a retriable error reaches the caller) and no
	// idempotence (a failed batch does not stall the producer's
	// sequence).
	cl := newClient(t, addr, kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.ProduceRequestTimeout(5*time.Second))
	acked := map[string]bool{}
	produce := func(v string) error {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		defer pcancel()
		err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
		if err == nil {
			acked[v] = true
		}
		return err
	}
	for i := range 5 {
		if err := produce(fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}

	f.Set(faultinject.State{FailWrites: true})
	if err := produce("failing-0"); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("franz-go produce on a failing disk: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if code := rawProduce(t, ctx, admin, "t"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("raw produce on a failing disk: code %d", code)
	}
	// Reads answer KAFKA_STORAGE_ERROR while the disk fails, as Kafka's
	// partitions on an offline log dir do (not NOT_LEADER_OR_FOLLOWER:
	// no other replica leads it; the cause is this broker's disk).
	if code, _ := rawFetch(t, ctx, admin, "t", 0); code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch on a failing disk: code %d, want KAFKA_STORAGE_ERROR", code)
	}

	f.Set(faultinject.State{})
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		err := produce(fmt.Sprint("after-", i))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce still fails 30s after the disk was cleared: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 5 {
		if err := produce(fmt.Sprint("resumed-", i)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for _, r := range readFromStart(t, ctx, addr, "t", len(acked)) {
		got[string(r.Value)] = true
	}
	for v := range acked {
		if !got[v] {
			t.Errorf("acknowledged record %q not read back", v)
		}
	}
}

// clock_offset_ms: a LogAppendTime topic stamps the faulted clock.
func TestFaultInjectClockOffsetLogAppendTime(t *testing.T) {
	t.Parallel()
	f := faultinject.New()
	b := faultInjectBroker(t, f)
	addr := b.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lat := "LogAppendTime"
	if _, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": &lat}, "lat"); err != nil {
		t.Fatal(err)
	}
	f.Set(faultinject.State{ClockOffsetMs: time.Hour.Milliseconds()})
	cl := newClient(t, addr, kgo.DefaultProduceTopic("lat"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Timestamp: time.Now()}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := readFromStart(t, ctx, addr, "lat", 1)[0]
	ahead := time.Until(r.Timestamp)
	if ahead < time.Hour-time.Minute || ahead > time.Hour+time.Minute {
		t.Fatalf("LogAppendTime %v is %v ahead of now, want about an hour", r.Timestamp, ahead)
	}
	if r.Attrs.TimestampType() != 1 {
		t.Fatalf("timestamp type %d, want 1 (LogAppendTime)", r.Attrs.TimestampType())
	}
}
