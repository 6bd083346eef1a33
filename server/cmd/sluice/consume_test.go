package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceConsume produces with sluice produce and reads back with
// sluice consume, against Sluice and kfake: the output is the same golden
// file for both.
func TestProduceConsume(t *testing.T) {
	servers(t, func(t *testing.T, bs string) {
		b := []string{"--bootstrap-server", bs}
		mustSluice(t, append([]string{"topic", "create", "--topic", "events", "--partitions", "2"}, b...)...)

		code, _, errOut := sluiceIn(t, "k1:v1\nk2:v2:with:colons\n:empty key\n", append([]string{"produce", "--topic", "events", "--partition", "0",
			"--key-separator", ":", "--header", "src=test", "--header", "n=1", "--compression", "lz4"}, b...)...)
		if code != 0 {
			t.Fatalf("produce: exit %d", code)
		}
		wantContains(t, "produce stderr", errOut, "Produced 3 of 3 records to topic events.")
		before := time.Now().UnixMilli()
		code, _, _ = sluiceIn(t, "plain one\nplain two\r\n", append([]string{"produce", "--topic", "events", "--partition", "1", "--acks", "1", "--compression", "zstd"}, b...)...)
		if code != 0 {
			t.Fatalf("produce: exit %d", code)
		}
		after := time.Now().UnixMilli()

		format := `%t/%p@%o key=%k(%K) value=%v(%S) headers=[%h]\n`
		out := mustSluice(t, append([]string{"consume", "--topic", "events", "-e", "--format", format}, b...)...)
		// Partitions interleave in any order; each one's records are in order.
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var p0, p1 []string
		for _, l := range lines {
			if strings.HasPrefix(l, "events/0@") {
				p0 = append(p0, l)
			} else {
				p1 = append(p1, l)
			}
		}
		golden(t, "consume_format", strings.Join(append(p0, p1...), "\n")+"\n")

		// One partition, from an offset, a count.
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "0", "--offset", "1", "-n", "1", "--format", `%o %v\n`}, b...)...)
		if out != "1 v2:with:colons\n" {
			t.Errorf("--offset 1 -n 1: %q", out)
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "0", "--offset", "-1", "-e"}, b...)...)
		if out != "empty key\n" {
			t.Errorf("--offset -1 -e: %q", out)
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--offset", "latest", "-e"}, b...)...)
		if out != "" {
			t.Errorf("--offset latest -e: %q", out)
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "0", "--offset", "100", "-e"}, b...)...)
		if out != "" {
			t.Errorf("--offset 100 (beyond the end) -e: %q", out)
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "1", "--offset", "-5", "-e"}, b...)...)
		if out != "plain one\nplain two\n" {
			t.Errorf("--offset -5 (before the start) -e: %q", out)
		}

		// Timestamps: %T is the record's (CreateTime, set by the producer),
		// and --timestamp finds the first at or after a time.
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "1", "-e", "--format", `%T\n`}, b...)...)
		for _, f := range strings.Fields(out) {
			ms, err := strconv.ParseInt(f, 10, 64)
			if err != nil || ms < before-1000 || ms > after+1000 {
				t.Errorf("%%T %q is not between %d and %d", f, before, after)
			}
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "1", "-e", "--timestamp", strconv.FormatInt(after+60_000, 10)}, b...)...)
		if out != "" {
			t.Errorf("--timestamp after every record: %q", out)
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "1", "-e", "--timestamp", time.UnixMilli(before - 60_000).UTC().Format(time.RFC3339)}, b...)...)
		if out != "plain one\nplain two\n" {
			t.Errorf("--timestamp before every record: %q", out)
		}

		// JSON lines.
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--partition", "0", "-e", "--json"}, b...)...)
		var recs []jsonRecord
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var r jsonRecord
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("--json line %q: %v", l, err)
			}
			recs = append(recs, r)
		}
		if len(recs) != 3 || *recs[0].Key != "k1" || *recs[0].Value != "v1" || len(recs[0].Headers) != 2 || recs[0].Headers[0] != (jsonHeader{"src", "test"}) || *recs[2].Key != "" {
			t.Errorf("--json: %+v", recs)
		}

		// A group commits what it printed: a second run has nothing left.
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--group", "readers", "-e"}, b...)...)
		if n := strings.Count(out, "\n"); n != 5 {
			t.Errorf("group consume printed %d records, want 5:\n%s", n, out)
		}
		out = mustSluice(t, append([]string{"consume", "--topic", "events", "--group", "readers", "-e"}, b...)...)
		if out != "" {
			t.Errorf("second group consume: %q", out)
		}
		out = mustSluice(t, append([]string{"group", "describe", "--group", "readers", "--json"}, b...)...)
		var groups []groupInfo
		if err := json.Unmarshal([]byte(out), &groups); err != nil || len(groups) != 1 {
			t.Fatalf("group describe --json: %v %s", err, out)
		}
		for _, p := range groups[0].Partitions {
			if p.Lag != 0 || p.CurrentOffset != p.LogEndOffset {
				t.Errorf("after group consume: %+v", p)
			}
		}

		// Failures.
		wantExit(t, 1, append([]string{"consume", "--topic", "missing", "-e"}, b...), "topic missing: UNKNOWN_TOPIC_OR_PARTITION", "hint:")
		wantExit(t, 1, append([]string{"consume", "--topic", "events", "--partition", "9", "-e"}, b...), "events-9: UNKNOWN_TOPIC_OR_PARTITION")
	})
}

func TestProduceFailures(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "t", "--partitions", "1"}, b...)...)
	code, _, errOut := sluiceIn(t, "k:v\nno separator\n", append([]string{"produce", "--topic", "t", "--key-separator", ":"}, b...)...)
	if code != 1 {
		t.Errorf("a line without the separator: exit %d", code)
	}
	wantContains(t, "stderr", errOut, "line 2 has no key separator", "Produced 1 of 1 records")
	code, _, errOut = sluiceIn(t, "v\n", append([]string{"produce", "--topic", "t", "--partition", "5"}, b...)...)
	if code != 1 {
		t.Errorf("a partition the topic lacks: exit %d", code)
	}
	wantContains(t, "stderr", errOut, "Produced 0 of 1 records", "1 records failed")
	// A topic that does not exist is not created (kcat and Kafka's
	// console producer would, where the broker allows it).
	code, _, errOut = sluiceIn(t, "v\n", append([]string{"produce", "--topic", "missing"}, b...)...)
	if code != 1 {
		t.Errorf("a topic that does not exist: exit %d", code)
	}
	wantContains(t, "stderr", errOut, "Produced 0 of 1 records", "UNKNOWN_TOPIC_OR_PARTITION", "hint: check the topic and partition exist")
	for _, args := range [][]string{
		{"produce"},
		{"produce", "--topic", "t", "--acks", "2"},
		{"produce", "--topic", "t", "--compression", "brotli"},
		{"produce", "--topic", "t", "--header", "novalue"},
		{"consume"},
		{"consume", "--topic", "t", "--offset", "soon"},
		{"consume", "--topic", "t", "--format", "%q"},
		{"consume", "--topic", "t", "--group", "g", "--partition", "0"},
		{"consume", "--topic", "t", "--offset", "1", "--timestamp", "5"},
	} {
		code, _, errOut := sluiceIn(t, "", append(args, b...)...)
		if code != 2 || !strings.Contains(errOut, "-h for help") {
			t.Errorf("sluice %s: exit %d, %q; want 2 and a usage line", strings.Join(args, " "), code, errOut)
		}
	}
}

func TestProduceFromFile(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "t", "--partitions", "1"}, b...)...)
	file := writeFile(t, "one\ntwo\nthree") // no final newline
	mustSluice(t, append([]string{"produce", "--topic", "t", "--file", file}, b...)...)
	if out := mustSluice(t, append([]string{"consume", "--topic", "t", "-e", "--format", `%o:%v,`}, b...)...); out != "0:one,1:two,2:three," {
		t.Errorf("consume: %q", out)
	}
}

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConsumeFollows: without -e or -n, consume prints records as they
// arrive until it is interrupted, which is not a failure.
func TestConsumeFollows(t *testing.T) {
	bs := startSluice(t)
	mustSluice(t, "topic", "create", "--topic", "live", "--partitions", "1", "--bootstrap-server", bs)
	var stdout, stderr syncBuffer
	root := newRoot(&stdout, &stderr)
	root.SetArgs([]string{"consume", "--topic", "live", "--offset", "latest", "--bootstrap-server", bs})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int)
	go func() {
		cmd, err := root.ExecuteContextC(ctx)
		done <- finish(cmd.CommandPath(), err, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; !strings.Contains(stdout.String(), "hello\n"); n++ {
		// The consumer may start after the first records: send until one
		// arrives.
		produceRecords(t, bs, "live", 0, "hello")
		if time.Now().After(deadline) {
			t.Fatalf("consume printed %q", stdout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("interrupted consume: exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("consume did not stop when interrupted")
	}
}

// TestConsumeExitsAfterTransactionMarker: a transaction's commit marker
// takes the last offset of the partition; -e still exits at the end, and
// the marker is not printed. (Sluice has no transactions yet: kfake.)
func TestConsumeExitsAfterTransactionMarker(t *testing.T) {
	bs := startKfake(t)
	b := []string{"--bootstrap-server", bs}
	mustSluice(t, append([]string{"topic", "create", "--topic", "txn", "--partitions", "1"}, b...)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"one", "two"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	end, err := adminClient(t, bs).ListEndOffsets(ctx, "txn")
	if err != nil || end["txn"][0].Offset != 3 {
		t.Fatalf("log end offset %+v, %v; want 3 (two records and the marker)", end["txn"][0], err)
	}
	for _, args := range [][]string{{}, {"--read-committed"}, {"--group", "g"}} {
		out := mustSluice(t, append(append([]string{"consume", "--topic", "txn", "-e", "--format", `%o:%v\n`}, args...), b...)...)
		if out != "0:one\n1:two\n" {
			t.Errorf("consume %v: %q", args, out)
		}
	}
	// The group committed past the marker: nothing is left.
	wantCommitted(t, adminClient(t, bs), "g", "txn", map[int32]int64{0: 3})
}
