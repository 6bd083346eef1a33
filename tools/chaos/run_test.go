package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
)

// TestMain removes the broker binaries the tests built and fails the run
// when a broker process outlived its test.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := localcluster.AfterTests(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		code = 1
	}
	os.Exit(code)
}

// chaosParallel: the tests that start brokers (the three runs and
// TestWorkloads) run in parallel, two at a time with go test's default
// -parallel (GOMAXPROCS) on CI's two cores: the short schedule, the
// longest (about two minutes), next to the other three in turn. One at a
// time they took about 230 s; two at a time about 140 s, the package's
// processes using about 1.2 cores on average (a run mostly waits: on
// held faults, elections, timeouts). Each run has its own cluster, ports
// and folder; the faults binary is built once (faultsBinary).

// faultsBinary builds the broker with -tags faults, once per test binary.
func faultsBinary(t *testing.T) string {
	t.Helper()
	bin, err := localcluster.TestBinary("faults")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runFolder is the folder of a test's Run: $SLUICE_CHAOS_OUT/<name> when
// that is set (replacing an earlier run's; always kept), else a new
// folder in the system's temporary folder, not t.TempDir (which the
// testing package deletes whatever happened). That one is removed when
// the test ends, unless it failed or keep was called: a run with an
// anomaly keeps its nodes' logs, report.txt, report.html and
// history.json, and the test prints where.
type runFolder struct {
	dir  string
	keep bool
}

func newRunFolder(t *testing.T, name string) *runFolder {
	t.Helper()
	f := &runFolder{}
	if out := os.Getenv("SLUICE_CHAOS_OUT"); out != "" {
		f.dir, f.keep = filepath.Join(out, name), true
		os.RemoveAll(f.dir)
		return f
	}
	dir, err := os.MkdirTemp("", "sluice-chaos-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	f.dir = dir
	t.Cleanup(func() {
		if f.keep || t.Failed() {
			t.Logf("run folder kept: %s", f.dir)
			return
		}
		os.RemoveAll(f.dir)
	})
	return f
}

// shortSchedule is the order of the kinds in CI's short schedule: every
// kind once.
var shortSchedule = []string{FaultKillLeader, FaultPause, FaultIsolate, FaultKillController, FaultRollingRestart,
	FaultPartition, FaultMove, FaultDiskFail, FaultClock, FaultBridge, FaultKillFollower, FaultDiskSlow,
	FaultMoveIsolated}

// ciTimings are the nemesis's timings in CI's runs: each fault held 3 to
// 4.5 s (the soak's shortest holds: past raft's election timeout, 1 to
// 2 s, and broker.session.timeout.ms, 3 s, so every kill, cut and pause
// still forces an election and a fencing under load), 1 to 2 s between
// faults, a pause 1 to 2 s past the session timeout. The soak keeps
// DefaultTimings.
var ciTimings = Timings{
	Hold:      [2]time.Duration{3 * time.Second, 4500 * time.Millisecond},
	Gap:       [2]time.Duration{time.Second, 2 * time.Second},
	PauseOver: [2]time.Duration{time.Second, 2 * time.Second},
}

// The short schedule CI runs (test.sh runs every module's tests): seed 1
// on three nodes, every kind of fault once in a fixed order (one pass:
// the fault phase's Duration is shorter than any pass), with ciTimings,
// the three workloads. It fails on any anomaly, printing the text report and the
// nodes' lines about the partitions involved; the run's folder (node
// logs, report.html, history.json) is kept when the run has an anomaly
// or the test fails (see runFolder).
func TestChaosShortSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster for about two minutes")
	}
	t.Parallel() // see chaosParallel
	folder := newRunFolder(t, "short-schedule")
	dir := folder.dir
	bin := faultsBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, res, err := Run(ctx, RunOptions{Binary: bin, Dir: dir, Nodes: 3, Seed: 1, Sequential: true,
		Faults: shortSchedule, Duration: time.Second, Timings: ciTimings, Recovery: 5 * time.Second, Logger: log})
	if err != nil {
		t.Fatalf("run: %v\nrunner log:\n%s", err, logs.String())
	}
	var text bytes.Buffer
	WriteText(&text, h, res)
	t.Log(res.Verdict())
	fmt.Println("CHAOS", res.Verdict())
	if !res.Valid() {
		folder.keep = true
		t.Fatalf("anomalies (run folder %s):\n%s\n%s\nrunner log:\n%s", dir, text.String(), partitionLines(dir, res), logs.String())
	}
	kinds := map[string]int{}
	for _, f := range h.Faults {
		kinds[f.Kind]++
	}
	for _, k := range shortSchedule {
		if kinds[k] == 0 {
			t.Errorf("no %s fault was injected (faults: %v)\nrunner log:\n%s", k, kinds, logs.String())
		}
	}
}

// txnSchedule are the faults of TestChaosTxnShort, in order: the
// transaction coordinator of one of the workload's transactional.ids
// killed, paused and cut off (the coordinator faults), the leader of a
// partition the transactions write killed (the nemesis's topic is the
// txn topic), the active controller killed, a minority/majority
// partition and a bridge. Seven faults, as many as before the
// coordinator faults, so that the test's time stays about a minute.
var txnSchedule = []string{FaultKillCoordinator, FaultKillLeader, FaultPauseCoordinator, FaultKillController,
	FaultIsolateCoordinator, FaultPartition, FaultBridge}

// The transactional workload (workload_txn.go) under coordinator and
// leader kills, a coordinator pause and cut, and network partitions
// (txnSchedule, once each in order, ciTimings), seed 3 on three nodes:
// transactional producers committing and aborting, consume-transform-
// produce transformers, read_committed readers, then the
// read_committed final read. It fails on any anomaly (the transaction
// checks, check_txn.go, and every other check of the history), printing
// the report as TestChaosShortSchedule does; and when too few
// transactions were committed and aborted, or a kind was not injected.
func TestChaosTxnShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster for about a minute")
	}
	t.Parallel() // see chaosParallel
	folder := newRunFolder(t, "txn-short")
	dir := folder.dir
	bin := faultsBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, res, err := Run(ctx, RunOptions{Binary: bin, Dir: dir, Nodes: 3, Seed: 3, Sequential: true,
		Workloads: []string{WorkloadTxn}, Faults: txnSchedule, Duration: time.Second, Timings: ciTimings,
		Warmup: 2 * time.Second, Recovery: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatalf("run: %v\nrunner log:\n%s", err, logs.String())
	}
	var text bytes.Buffer
	WriteText(&text, h, res)
	t.Log(res.Verdict())
	ctp := 0
	for _, op := range h.Ops {
		if op.Kind == OpTxn && len(op.Read) > 0 && op.Txn == TxnCommit && op.Outcome == OK {
			ctp++
		}
	}
	t.Logf("transactions: %d committed (%d of them consume-transform-produce), %d aborted, %d unknown, %d not committed otherwise; %d write cycles (G0, allowed); %d polls; final read %d records",
		res.TxnCommitted, ctp, res.TxnAborted, res.TxnUnknown, res.TxnNotCommitted, res.TxnWriteCycles, res.Polls, res.FinalRecords)
	for _, f := range h.Faults {
		t.Logf("fault %s at %s-%s: %s", f.Kind, secs(f.Start), secs(f.End), f.What)
	}
	fmt.Println("CHAOS txn", res.Verdict())
	if !res.Valid() {
		folder.keep = true
		t.Fatalf("anomalies (run folder %s):\n%s\n%s\nrunner log:\n%s", dir, text.String(), partitionLines(dir, res), logs.String())
	}
	if res.TxnCommitted < 50 || res.TxnAborted < 10 || res.Polls == 0 || ctp < 10 {
		t.Errorf("too little happened: %d transactions committed (%d consume-transform-produce), %d aborted, %d polls\n%s",
			res.TxnCommitted, ctp, res.TxnAborted, res.Polls, text.String())
	}
	kinds := map[string]int{}
	for _, f := range h.Faults {
		kinds[f.Kind]++
	}
	for _, k := range txnSchedule {
		if kinds[k] == 0 {
			t.Errorf("no %s fault was injected (faults: %v)\nrunner log:\n%s", k, kinds, logs.String())
		}
	}
}

// The runner finds lost writes where there are some: the queue's
// producers with acks=1 and no idempotence, whose writes a leader
// acknowledges before any follower has them, under leader isolations and
// kills. A leader cut off from the others keeps acknowledging until it
// steps down; the majority elects another, and the old leader's tail is
// truncated when it rejoins. If this run finds no loss, the checks (or
// the faults) have gone blind.
func TestChaosFindsAcks1Losses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster for about a minute")
	}
	t.Parallel() // see chaosParallel
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	folder := newRunFolder(t, "acks1")
	// About five faults in 25 s with ciTimings (as in 40 s with the
	// soak's). The drain cannot end early (the lost writes are never
	// polled), so its bound is the time the consumers get to catch up.
	h, res, err := Run(ctx, RunOptions{Binary: faultsBinary(t), Dir: folder.dir, Nodes: 3, Seed: 2, Sequential: true,
		Workloads: []string{WorkloadQueue}, Faults: []string{FaultIsolate, FaultKillLeader},
		Duration: 25 * time.Second, Timings: ciTimings, Recovery: 5 * time.Second, DrainBound: 5 * time.Second, Acks1: true, Logger: log})
	if err != nil {
		t.Fatalf("run: %v\nrunner log:\n%s", err, logs.String())
	}
	t.Log(res.Verdict())
	if res.Counts[KindLostWrite]+res.Counts[KindUnseen] == 0 {
		var text bytes.Buffer
		WriteText(&text, h, res)
		t.Fatalf("acks=1 under leader isolations and kills: no lost or unseen write found\n%s", text.String())
	}
}

// partitionLines are, for each node's log in dir, the last lines that
// name a partition of res's anomalies (its folder name topic-partition,
// or topic/partition), then the log's last lines: where the cause of an
// anomaly can be read without the run's folder (CI keeps only the
// test's output).
func partitionLines(dir string, res *Result) string {
	var names []string // topic-partition, then topic/partition, of each partition
	for _, a := range res.Anomalies {
		if a.Topic == "" {
			continue
		}
		name := fmt.Sprintf("%s-%d", a.Topic, a.Partition)
		if !slices.Contains(names, name) {
			names = append(names, name, fmt.Sprintf("%s/%d", a.Topic, a.Partition))
		}
	}
	var out strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "node*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		all := strings.Split(string(b), "\n")
		for i := 0; i < len(names); i += 2 {
			var lines []string
			for _, line := range all {
				if strings.Contains(line, names[i]) || strings.Contains(line, names[i+1]) {
					lines = append(lines, line)
				}
			}
			n := len(lines)
			lines = lines[max(0, n-80):]
			fmt.Fprintf(&out, "== %s: %d lines naming %s (the last %d)\n%s\n", filepath.Base(l), n, names[i], len(lines), strings.Join(lines, "\n"))
		}
		fmt.Fprintf(&out, "== %s: its last 30 lines\n%s\n", filepath.Base(l), strings.Join(all[max(0, len(all)-30):], "\n"))
	}
	return out.String()
}
