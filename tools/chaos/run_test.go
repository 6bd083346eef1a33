package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The short schedule CI runs (test.sh runs every module's tests): seed 1
// on three nodes, every kind of fault once in a fixed order, the three
// workloads. It fails on any anomaly, printing the text report; the run's
// folder (node logs, report.html, history.json) is kept under
// SLUICE_CHAOS_OUT when set.
func TestChaosShortSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster for about three minutes")
	}
	dir := t.TempDir()
	if out := os.Getenv("SLUICE_CHAOS_OUT"); out != "" {
		dir = filepath.Join(out, "short-schedule")
		os.RemoveAll(dir)
	}
	bin := filepath.Join(t.TempDir(), "sluice-faults")
	build := exec.Command("go", "build", "-tags", "faults", "-o", bin, "./cmd/sluice")
	build.Dir = filepath.Join("..", "..", "server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags faults: %v\n%s", err, out)
	}
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
		t.Fatalf("anomalies (run folder %s):\n%s\nrunner log:\n%s", dir, text.String(), logs.String())
	}
	kinds := map[string]int{}
	for _, f := range h.Faults {
		kinds[f.Kind]++
	}
	for _, k := range []string{"kill", "pause", "partition", "restart", "move", "disk", "clock"} {
		if kinds[k] == 0 {
			t.Errorf("no %s fault was injected (faults: %v)\nrunner log:\n%s", k, kinds, logs.String())
		}
	}
}
