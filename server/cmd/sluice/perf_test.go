package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
)

// startPerfBroker is an in-process single-node Sluice broker and its
// address.
func startPerfBroker(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Addr().String()
}

func TestPerfProduceConsume(t *testing.T) {
	bs := startPerfBroker(t)
	code, out, _ := sluice(t, "perf", "produce", "--bootstrap-server", bs, "--topic", "load", "--create", "--partitions", "2",
		"--num-records", "2000", "--record-size", "512", "--throughput", "-1")
	if code != 0 {
		t.Fatalf("perf produce: exit %d", code)
	}
	wantContains(t, "perf produce", out, "2000 records sent, ", " ms 99.9th.")

	code, out, _ = sluice(t, "perf", "consume", "--bootstrap-server", bs, "--topic", "load", "--num-records", "2000", "--json")
	if code != 0 {
		t.Fatalf("perf consume: exit %d", code)
	}
	var r struct {
		Command string `json:"command"`
		Records int64  `json:"records"`
		Bytes   int64  `json:"bytes"`
		Errors  int64  `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("perf consume --json: %v: %q", err, out)
	}
	if r.Command != "consume" || r.Records != 2000 || r.Bytes != 2000*512 || r.Errors != 0 {
		t.Errorf("perf consume: %+v, want 2000 records of 512 bytes", r)
	}

	code, out, _ = sluice(t, "perf", "e2e", "--bootstrap-server", bs, "--topic", "load", "--num-records", "50")
	if code != 0 {
		t.Fatalf("perf e2e: exit %d", code)
	}
	wantContains(t, "perf e2e", out, "50 records sent and received, ")
}

func TestPerfExitCodes(t *testing.T) {
	bs := startPerfBroker(t)
	code, _, errOut := sluice(t, "perf", "produce", "--bootstrap-server", bs, "--topic", "missing", "--num-records", "1")
	if code != 1 {
		t.Errorf("a missing topic: exit %d, want 1", code)
	}
	wantContains(t, "stderr", errOut, "sluice perf produce: topic missing: UNKNOWN_TOPIC_OR_PARTITION", "--create", "hint: ")
	if strings.Contains(errOut, "records sent") {
		t.Errorf("a run that never started printed a result: %s", errOut)
	}
	for _, args := range [][]string{
		{"perf", "produce", "--topic", "t"},
		{"perf", "produce", "--topic", "t", "--num-records", "1", "--acks", "2"},
		{"perf", "produce", "--no-such-flag"},
		{"perf", "nope"},
		{"perf"},
	} {
		if code, _, _ := sluice(t, args...); code != 2 {
			t.Errorf("sluice %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
}
