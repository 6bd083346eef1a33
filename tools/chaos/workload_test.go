package chaos

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The workloads against one single-node broker (replication factor 1, no
// faults): what they record must agree with what the broker kept.

// startBroker starts one standalone broker (localcluster, the runs'
// -tags faults binary, built once per test binary: with SLUICE_FAULTS
// unset it is the plain broker) on a free loopback port; the test's
// cleanup kills it and prints its log's tail when the test failed.
func startBroker(t *testing.T) string {
	t.Helper()
	c, err := localcluster.Start(t.Context(), localcluster.Config{Binary: faultsBinary(t), Dir: t.TempDir(), Voters: 1, Standalone: true,
		Tag: "chaos", Sets: []string{
			// A classic group's first rebalance waits 3 s by default (and 3 s
			// more for each wave of joins, up to the rebalance timeout).
			"group.initial.rebalance.delay.ms=0",
			// A KIP-848 member heartbeats at the broker's interval (kgo's
			// HeartbeatInterval is ignored), 5 s by default: a member waiting
			// for partitions another member releases gets them only at its
			// next heartbeat, which a 5 s run with churn barely sees. The
			// queue's kgo interval, 500 ms, for both protocols.
			"group.consumer.heartbeat.interval.ms=500"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log tail:\n%s", c.Tail(1, localcluster.TailLines))
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c.Seeds()[0]
}

func createTopic(t *testing.T, ctx context.Context, addr, topic string, parts int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for ctx.Err() == nil { // until every partition has a leader
		md, err := adm.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == nil && len(md.Topics[topic].Partitions) == int(parts) {
			ok := true
			for _, p := range md.Topics[topic].Partitions {
				ok = ok && p.Err == nil && p.Leader >= 0
			}
			if ok {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("topic %s has no leaders", topic)
}

// runWorkload runs start for d, stops it and returns its ops and the
// topic's final read.
func runWorkload(t *testing.T, ctx context.Context, addr, topic string, parts int32, seed uint64, d time.Duration,
	start func(context.Context, WorkloadConfig) (Workload, error)) ([]Op, map[int32][]Record, Workload) {
	t.Helper()
	createTopic(t, ctx, addr, topic, parts)
	rec := NewRecorder(time.Now())
	cfg := WorkloadConfig{Seeds: []string{addr}, Rand: rand.New(rand.NewPCG(seed, seed)), Rec: rec,
		Topic: topic, Partitions: parts, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	w, err := start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	final, starts, err := FinalRead(fctx, cfg.Seeds, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		if starts[p] != 0 {
			t.Fatalf("partition %d: log start %d", p, starts[p])
		}
		for i, r := range final[p] {
			if r.Offset != int64(i) || r.Partition != p {
				t.Fatalf("final read of partition %d: record %d is %v", p, i, r)
			}
		}
	}
	ops := rec.Ops()
	counts := map[string]int{}
	for _, op := range ops {
		counts[string(op.Kind)+"/"+string(op.Outcome)]++
	}
	t.Logf("%d ops: %v", len(ops), counts)
	// Without faults, the checker finds nothing in the history.
	res := Check(&History{Ops: ops, Final: map[string]map[int32][]Record{topic: final},
		LogStart: map[string]map[int32]int64{topic: starts}})
	for _, a := range res.Anomalies {
		t.Errorf("%s: %s", a.Kind, a.Msg)
	}
	return ops, final, w
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func TestWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	t.Parallel() // see chaosParallel
	ctx, cancel := context.WithTimeout(context.Background(), 130*time.Second)
	defer cancel()
	addr := startBroker(t)
	t.Run("QueueClassic", func(t *testing.T) { testQueue(t, ctx, addr, ProtocolClassic) })
	t.Run("QueueConsumer", func(t *testing.T) { testQueue(t, ctx, addr, ProtocolConsumer) })
	t.Run("Log", func(t *testing.T) { testLog(t, ctx, addr) })
	t.Run("Offsets", func(t *testing.T) { testOffsets(t, ctx, addr) })
	t.Run("Txn", func(t *testing.T) { testTxn(t, ctx, addr) })
}

func testQueue(t *testing.T, ctx context.Context, addr, protocol string) {
	const consumers = 3
	ops, final, w := runWorkload(t, ctx, addr, "queue-"+protocol, 4, 1, 5*time.Second, func(ctx context.Context, cfg WorkloadConfig) (Workload, error) {
		return StartQueue(ctx, cfg, QueueOptions{Producers: 2, Consumers: consumers, Interval: 5 * time.Millisecond, Churn: time.Second, Protocol: protocol})
	})
	at := func(r Record) bool {
		l := final[r.Partition]
		return r.Offset >= 0 && r.Offset < int64(len(l)) && l[r.Offset].Value == r.Value
	}
	var sends, polled, assigns, commits, fetches int
	hwReads := map[string]int{}
	keyPart := map[string]int32{}
	for _, op := range ops {
		switch {
		case op.Kind == OpSend && op.Outcome == OK:
			sends++
			if !at(Record{op.Partition, op.Offset, op.Value}) {
				t.Errorf("acknowledged send %v@%d=%q not in the final read there", op.Partition, op.Offset, op.Value)
			}
			if op.Key != "" {
				if p, ok := keyPart[op.Key]; ok && p != op.Partition {
					t.Errorf("key %q in partitions %d and %d", op.Key, p, op.Partition)
				}
				keyPart[op.Key] = op.Partition
			}
		case op.Kind == OpSend && op.Outcome != Info:
			t.Errorf("send %+v", op)
		case op.Kind == OpPoll:
			polled += len(op.Records)
			for _, r := range op.Records {
				if !at(r) {
					t.Errorf("%s polled %v, not in the final read", op.Process, r)
				}
			}
		case op.Kind == OpAssign:
			assigns++
		case op.Kind == OpCommit && op.Outcome == OK:
			commits++
		case op.Kind == OpFetchOffsets && op.Outcome == OK && op.Process == "offsets-reader":
			fetches++
		case op.Kind == OpHighWater && op.Outcome == OK:
			hwReads[op.Via]++
			for p, hw := range op.Offsets {
				if hw < 0 || hw > int64(len(final[p])) {
					t.Errorf("%s read high watermark %d of partition %d via %s; the final read has %d records", op.Process, hw, p, op.Via, len(final[p]))
				}
			}
		case op.Kind == OpHighWater && strings.HasSuffix(op.Err, context.Canceled.Error()):
			// In flight when Stop cancelled the reader's context: no
			// answer, not a failed read.
		case op.Kind == OpHighWater:
			t.Errorf("high watermark read without faults: %+v", op)
		}
		if op.Outcome != Info && op.End < op.Start {
			t.Errorf("op ends before it starts: %+v", op)
		}
	}
	perProc := map[string]map[OpKind]int{}
	for _, op := range ops {
		if strings.HasPrefix(op.Process, "consumer-") {
			if perProc[op.Process] == nil {
				perProc[op.Process] = map[OpKind]int{}
			}
			perProc[op.Process][op.Kind]++
		}
	}
	t.Logf("consumer ops: %v", perProc)
	if os.Getenv("CHAOS_DUMP") != "" {
		for _, op := range ops {
			if op.Kind != OpSend && op.Kind != OpPoll {
				t.Logf("%v-%v %s %s %s %v %v %s", op.Start, op.End, op.Process, op.Kind, op.Outcome, op.Parts, op.Offsets, op.Err)
			}
		}
	}
	names := w.(*queueWorkload).ConsumerNames()
	t.Logf("%d sends acknowledged, %d records polled, %d assignments, %d commits, %d offset fetches, high watermark reads %v, consumers %v",
		sends, polled, assigns, commits, fetches, hwReads, names)
	if sends < 500 || polled == 0 || assigns == 0 || commits == 0 || fetches == 0 || hwReads[ViaFetch] == 0 || hwReads[ViaListOffsets] == 0 {
		t.Errorf("too little happened")
	}
	if len(names) <= consumers {
		t.Errorf("no churn: consumers %v", names)
	}
}

func testLog(t *testing.T, ctx context.Context, addr string) {
	ops, final, _ := runWorkload(t, ctx, addr, "log", 3, 2, 4*time.Second, func(ctx context.Context, cfg WorkloadConfig) (Workload, error) {
		return StartLog(ctx, cfg, LogOptions{Writers: 2, Readers: 1, Interval: 100 * time.Millisecond})
	})
	var appends, reads, longest int
	for _, op := range ops {
		l := final[op.Partition]
		switch {
		case op.Kind == OpAppend && op.Outcome == OK:
			appends++
			if op.Offset >= int64(len(l)) || l[op.Offset].Value != op.Value {
				t.Errorf("append %d@%d=%q not in the final read there", op.Partition, op.Offset, op.Value)
			}
		case op.Kind == OpAppend && op.Outcome != Info:
			t.Errorf("append %+v", op)
		case op.Kind == OpRead && op.Outcome == OK:
			reads++
			longest = max(longest, len(op.Values))
			if int64(len(op.Values)) != op.Offset || len(op.Values) > len(l) {
				t.Errorf("read of partition %d: %d values, hwm %d, final %d", op.Partition, len(op.Values), op.Offset, len(l))
				continue
			}
			for i, v := range op.Values {
				if l[i].Value != v {
					t.Errorf("read of partition %d: value %d is %q, finally %q", op.Partition, i, v, l[i].Value)
					break
				}
			}
		}
	}
	t.Logf("%d appends, %d reads OK, the longest %d values", appends, reads, longest)
	if appends < 30 || reads < 10 || longest == 0 {
		t.Errorf("too little happened")
	}
}

func testOffsets(t *testing.T, ctx context.Context, addr string) {
	ops, _, _ := runWorkload(t, ctx, addr, "registers", 8, 3, 3*time.Second, func(ctx context.Context, cfg WorkloadConfig) (Workload, error) {
		return StartOffsets(ctx, cfg, OffsetsOptions{Clients: 3, Interval: 30 * time.Millisecond})
	})
	var commits []Op
	var okCommits, okFetches, checked int
	for _, op := range ops {
		if op.Kind == OpCommit {
			commits = append(commits, op)
			if op.Outcome == OK {
				okCommits++
			}
		}
		if op.Kind == OpFetchOffsets && op.Outcome == OK {
			okFetches++
		}
		if op.Outcome == Fail {
			t.Errorf("failed op without faults: %+v", op)
		}
	}
	// Every OK fetch's value was written by a commit invoked before the
	// fetch completed; and a process's fetch after its own OK commit,
	// with no other commit of that partition overlapping the two,
	// returns it.
	last := map[string]Op{} // each process's last OK commit
	for _, op := range ops {
		switch {
		case op.Kind == OpCommit && op.Outcome == OK:
			last[op.Process] = op
		case op.Kind == OpFetchOffsets && op.Outcome == OK:
			for p, v := range op.Offsets {
				found := false
				for _, c := range commits {
					if _, ok := c.Offsets[p]; ok && c.Offsets[p] == v && c.Start < op.End {
						found = true
					}
				}
				if !found {
					t.Errorf("%s fetched %d=%d, which no commit wrote", op.Process, p, v)
				}
			}
			c, ok := last[op.Process]
			if !ok {
				continue
			}
			delete(last, op.Process)
			for p, v := range c.Offsets {
				alone := true
				for _, o := range commits {
					if _, same := o.Offsets[p]; same && o.Start != c.Start && o.Start < op.End && (o.End == 0 || o.End > c.Start) {
						alone = false
					}
				}
				if !alone {
					continue
				}
				checked++
				if got, ok := op.Offsets[p]; !ok || got != v {
					t.Errorf("%s committed %d=%d, then fetched %v", op.Process, p, v, op.Offsets)
				}
			}
		}
	}
	t.Logf("%d commits OK, %d fetches OK, %d read-your-write checks", okCommits, okFetches, checked)
	if okCommits < 20 || okFetches < 20 || checked == 0 {
		t.Errorf("too little happened")
	}
}

// testTxn runs the transactional workload without faults: every
// committed transaction is in the read_committed final read at the
// offsets its sends were acknowledged at, no aborted one is, and the
// checker finds nothing.
func testTxn(t *testing.T, ctx context.Context, addr string) {
	const topic, parts = "txn", 3
	createTopic(t, ctx, addr, topic, parts)
	rec := NewRecorder(time.Now())
	cfg := WorkloadConfig{Seeds: []string{addr}, Rand: rand.New(rand.NewPCG(4, 4)), Rec: rec,
		Topic: topic, Partitions: parts, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	w, err := StartTxn(ctx, cfg, TxnOptions{Producers: 2, Readers: 1, Transformers: 1, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Until enough transactions ended, within a bound.
	enough := func() bool {
		n, ctp := 0, 0
		for _, op := range rec.Ops() {
			if op.Kind == OpTxn && op.Outcome == OK {
				n++
				if len(op.Read) > 0 && op.Txn == TxnCommit {
					ctp++
				}
			}
		}
		return n >= 60 && ctp >= 5
	}
	for deadline := time.Now().Add(20 * time.Second); !enough() && time.Now().Before(deadline); {
		sleepCtx(ctx, 100*time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	final, starts, err := FinalReadCommitted(fctx, cfg.Seeds, topic)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]Record{}
	for _, recs := range final {
		for _, r := range recs {
			at[r.Value] = r
		}
	}
	ops := rec.Ops()
	var committed, aborted, polled, transformed int
	for _, op := range ops {
		switch {
		case op.Kind == OpTxn && op.Outcome == OK && op.Txn == TxnCommit:
			committed++
			if len(op.Read) > 0 {
				transformed++
			}
			for _, r := range op.Records {
				if got, ok := at[r.Value]; !ok || got != r {
					t.Errorf("%s: committed record %v, in the final read: %v", op.Value, r, got)
				}
			}
		case op.Kind == OpTxn && op.Outcome == OK && op.Txn == TxnAbort:
			aborted++
			for _, r := range op.Records {
				if got, ok := at[r.Value]; ok {
					t.Errorf("%s: aborted record %v in the final read", op.Value, got)
				}
			}
		case op.Kind == OpTxn:
			t.Errorf("transaction without faults: %+v", op)
		case op.Kind == OpPoll:
			polled += len(op.Records)
		}
	}
	res := Check(&History{Ops: ops, Final: map[string]map[int32][]Record{topic: final},
		LogStart: map[string]map[int32]int64{topic: starts}})
	for _, a := range res.Anomalies {
		t.Errorf("%s: %s", a.Kind, a.Msg)
	}
	t.Logf("%d transactions committed (%d consume-transform-produce), %d aborted, %d records polled, %d in the final read; %d write cycles (G0)",
		committed, transformed, aborted, polled, len(at), res.TxnWriteCycles)
	if committed < 20 || aborted == 0 || polled == 0 || transformed < 5 {
		t.Errorf("too little happened")
	}
}
