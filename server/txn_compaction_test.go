package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A compacted topic written by a transactional producer, cleaned until
// the cleaner removed an abort marker (its records gone, then
// delete.retention.ms past): a franz-go read_committed consumer reading
// from the start, in one fetch across the removed marker, sees the
// producer's later committed transaction and every latest committed
// value, and no aborted record.
func TestTxnCompactedReadCommitted(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", append(txnSets, "log.cleaner.backoff.ms=20")...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "txn-compacted"
	compact, segBytes, ratio, retention := "compact", "1024", "0.01", "100"
	adm := kadm.NewClient(newClient(t, addr))
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": &compact, "segment.bytes": &segBytes, "min.cleanable.dirty.ratio": &ratio, "delete.retention.ms": &retention,
	}, topic); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("txn-compacted-producer"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	plain := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	produce := func(cl *kgo.Client, kvs ...string) {
		t.Helper()
		for i := 0; i < len(kvs); i += 2 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	inTxn := func(commit bool, kvs ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(txn, kvs...)
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	inTxn(true, "a", "a1", "b", "b1")
	inTxn(false, "a", "aborted-a", "x", "aborted-x")
	inTxn(true, "e", "e1")
	produce(plain, "a", "a2", "b", "b2")
	want := map[string]string{"a": "a2", "b": "b2", "e": "e1"}

	part, ok := b.partition(topic, 0)
	if !ok {
		t.Fatal("no partition")
	}
	abortAt := int64(-1)
	markers := func() map[int64]bool {
		out := map[int64]bool{}
		if _, _, err := part.ScanBatches(nil, 0, part.HighWatermark(), func(sb *replica.ScannedBatch) error {
			if sb.Control {
				out[sb.First] = sb.Commit
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitFor(t, 10*time.Second, "the abort marker", func() bool {
		for off, commit := range markers() {
			if !commit {
				abortAt = off
			}
		}
		return abortAt >= 0
	})
	// Unique keys roll segments and keep the cleaner going until the
	// abort marker is gone.
	var last string
	for i := 0; ; i++ {
		if _, there := markers()[abortAt]; !there {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the abort marker at %d is still there", abortAt)
		}
		last = fmt.Sprint("filler-", i)
		produce(plain, last, strings.Repeat("x", 60))
		want[last] = strings.Repeat("x", 60)
		time.Sleep(5 * time.Millisecond)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	for got[last] == "" {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read %v before the deadline", got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), "aborted") {
				t.Fatalf("read_committed read %s=%s at %d", r.Key, r.Value, r.Offset)
			}
			got[string(r.Key)] = string(r.Value)
		})
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("read_committed: %s=%q, want %q (read %d keys)", k, got[k], v, len(got))
		}
	}
}
