package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newFake is an in-process Kafka (franz-go's kfake) and its address.
func newFake(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// perf runs `perf args...` and returns its stdout and error.
func perf(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	c := NewCommand()
	c.SetArgs(args)
	c.SetOut(&out)
	c.SetErr(&errOut)
	c.SilenceUsage = true
	err := c.ExecuteContext(ctx)
	t.Logf("perf %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	return out.String(), err
}

// perfJSON runs perf with --json and decodes its result.
func perfJSON(t *testing.T, args ...string) (Result, error) {
	t.Helper()
	out, err := perf(t, append(args, "--json")...)
	var r Result
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("--json printed %q: %v", out, jerr)
	}
	return r, err
}

// readAll reads every record of topic from the start to its end.
func readAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, o := range ends {
		want += o
	}
	var got []*kgo.Record
	for int64(len(got)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(got), want, ctx.Err())
		}
		got = append(got, fs.Records()...)
	}
	return got
}

func TestProduceMaxRate(t *testing.T) {
	_, addr := newFake(t)
	r, err := perfJSON(t, "produce", "--bootstrap-server", addr, "--topic", "t", "--create", "--partitions", "3",
		"--num-records", "500", "--record-size", "100", "--producers", "2", "--keys", "10")
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != "produce" || r.Mode != "max-rate" || r.TargetRate != 0 || r.Topic != "t" {
		t.Errorf("result %+v", r)
	}
	if r.Records != 500 || r.Bytes != int64(500*(100+len("key-0"))) || r.Errors != 0 {
		t.Errorf("records %d bytes %d errors %d, want 500, %d, 0", r.Records, r.Bytes, r.Errors, 500*105)
	}
	if r.Seconds <= 0 || r.RecordsPerSec <= 0 || r.MBPerSec <= 0 || r.Latency.Max <= 0 || r.Latency.P50 > r.Latency.Max {
		t.Errorf("figures %+v", r)
	}
	recs := readAll(t, addr, "t")
	if len(recs) != 500 {
		t.Fatalf("the topic holds %d records, want 500", len(recs))
	}
	keys := map[string]int{}
	parts := map[int32]bool{}
	for _, rec := range recs {
		if len(rec.Value) != 100 || strings.Trim(string(rec.Value), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			t.Fatalf("value %q, want 100 letters A-Z", rec.Value)
		}
		keys[string(rec.Key)]++
		parts[rec.Partition] = true
	}
	if len(keys) != 10 || keys["key-3"] != 50 {
		t.Errorf("keys %v, want key-0..key-9 50 times each", keys)
	}
	if len(parts) < 2 {
		t.Errorf("10 keys all went to partitions %v of 3", parts)
	}
}

func TestProduceFixedRate(t *testing.T) {
	_, addr := newFake(t, kfake.SeedTopics(1, "t"))
	// The schedule, not the clock, decides the count: the records due
	// within --duration, 200 x 1 s.
	r, err := perfJSON(t, "produce", "--bootstrap-server", addr, "--topic", "t", "--throughput", "200", "--duration", "1s", "--record-size", "10")
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != "fixed-rate" || r.TargetRate != 200 || r.Records != 200 || r.Errors != 0 {
		t.Errorf("mode %s target %v records %d errors %d, want fixed-rate 200 200 0", r.Mode, r.TargetRate, r.Records, r.Errors)
	}
	// The last record is due at 995 ms: the run cannot end before.
	if r.Seconds < 0.995 {
		t.Errorf("seconds %v, want at least 0.995", r.Seconds)
	}
	if n := len(readAll(t, addr, "t")); n != 200 {
		t.Errorf("the topic holds %d records, want 200", n)
	}
	// The summary line, without --json.
	out, err := perf(t, "produce", "--bootstrap-server", addr, "--topic", "t", "--throughput", "1000", "--num-records", "20")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "20 records sent, ") || !strings.Contains(out, " ms 99.9th.") {
		t.Errorf("summary %q", out)
	}
}

func TestProduceMissingTopic(t *testing.T) {
	_, addr := newFake(t)
	_, err := perf(t, "produce", "--bootstrap-server", addr, "--topic", "nope", "--num-records", "10")
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), "--create") {
		t.Errorf("err %v, want UNKNOWN_TOPIC_OR_PARTITION and a --create hint", err)
	}
}

func TestProduceErrors(t *testing.T) {
	c, addr := newFake(t, kfake.SeedTopics(1, "t"))
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	r, err := perfJSON(t, "produce", "--bootstrap-server", addr, "--topic", "t", "--num-records", "20")
	if !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "20 records failed") {
		t.Errorf("err %v, want 20 records failed with INVALID_RECORD", err)
	}
	if r.Records != 0 || r.Errors != 20 || !strings.HasPrefix(r.FirstError, "INVALID_RECORD") {
		t.Errorf("records %d errors %d first %q", r.Records, r.Errors, r.FirstError)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"produce", "--topic", "t"},
		{"produce", "--num-records", "1"},
		{"produce", "--topic", "t", "--num-records", "1", "--acks", "1", "--idempotent"},
		{"produce", "--topic", "t", "--num-records", "1", "--acks", "2"},
		{"produce", "--topic", "t", "--num-records", "1", "--throughput", "-5"},
		{"produce", "--topic", "t", "--num-records", "1", "--compression", "brotli"},
		{"produce", "--topic", "t", "--num-records", "1", "--bootstrap-server", "nohost"},
		{"consume", "--topic", "t", "--num-records", "1", "--from", "middle"},
		{"e2e", "--topic", "t", "--num-records", "1", "--timeout", "0s"},
		{"produce", "--topic", "t", "--num-records", "1", "extra"},
		{},
	} {
		_, err := perf(t, args...)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("perf %v: err %v, want a UsageError", args, err)
		}
	}
}

func TestConsume(t *testing.T) {
	_, addr := newFake(t, kfake.SeedTopics(2, "t"))
	if _, err := perf(t, "produce", "--bootstrap-server", addr, "--topic", "t", "--num-records", "300", "--record-size", "50"); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"", "perf-group"} {
		args := []string{"consume", "--bootstrap-server", addr, "--topic", "t", "--num-records", "300"}
		if group != "" {
			args = append(args, "--group", group)
		}
		r, err := perfJSON(t, args...)
		if err != nil {
			t.Fatalf("group %q: %v", group, err)
		}
		if r.Command != "consume" || r.Records != 300 || r.Bytes != 300*50 || r.TimeToFirstRecordMs == nil || *r.TimeToFirstRecordMs <= 0 {
			t.Errorf("group %q: %+v", group, r)
		}
	}
	// Fewer records than asked for: the idle timeout ends it, as a failure.
	r, err := perfJSON(t, "consume", "--bootstrap-server", addr, "--topic", "t", "--num-records", "400", "--timeout", "500ms")
	if !errors.Is(err, errIdle) || r.Records != 300 {
		t.Errorf("records %d, err %v; want 300 and %v", r.Records, err, errIdle)
	}
	// --from latest with --duration: nothing new arrives, and that is fine.
	r, err = perfJSON(t, "consume", "--bootstrap-server", addr, "--topic", "t", "--duration", "300ms", "--from", "latest")
	if err != nil || r.Records != 0 || r.TimeToFirstRecordMs != nil {
		t.Errorf("records %d, err %v; want 0, no error", r.Records, err)
	}
}

func TestE2E(t *testing.T) {
	_, addr := newFake(t)
	// Records already in the topic are not this run's.
	if _, err := perf(t, "produce", "--bootstrap-server", addr, "--topic", "t", "--create", "--partitions", "2", "--num-records", "100"); err != nil {
		t.Fatal(err)
	}
	r, err := perfJSON(t, "e2e", "--bootstrap-server", addr, "--topic", "t", "--num-records", "20", "--record-size", "10")
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != "one-at-a-time" || r.Records != 20 || r.Bytes != 200 || r.Latency.Max <= 0 {
		t.Errorf("one at a time: %+v", r)
	}
	r, err = perfJSON(t, "e2e", "--bootstrap-server", addr, "--topic", "t", "--num-records", "50", "--throughput", "200")
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != "fixed-rate" || r.TargetRate != 200 || r.Records != 50 || r.Errors != 0 {
		t.Errorf("fixed rate: %+v", r)
	}
	if n := len(readAll(t, addr, "t")); n != 170 {
		t.Errorf("the topic holds %d records, want 100+20+50", n)
	}
}

func TestProduceInterrupted(t *testing.T) {
	_, addr := newFake(t, kfake.SeedTopics(1, "t"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := newStats()
	o := produceOptions{seeds: []string{addr}, topic: "t", duration: time.Hour, recordSize: 100, producers: 1, flushTimeout: time.Minute}
	type ret struct {
		r   Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		r, err := runProduce(ctx, o, realClock{}, st, nil)
		done <- ret{r, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if recs, _, _ := st.snapshot(); recs >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no 100 records acknowledged in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // SIGINT
	select {
	case got := <-done:
		if got.err != nil || got.r.Errors != 0 || got.r.Records < 100 {
			t.Errorf("interrupted run: err %v, %+v", got.err, got.r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an interrupted run did not stop within 30 s")
	}
}
