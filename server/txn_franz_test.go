package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// franz-go's own transaction integration test, pkg/kgo's TestTxnEtl, run
// against Sluice: a transactional producer writes KGO_TEST_RECORDS records
// in transactions of 10,000 (committing with EndAndBeginTransaction),
// consumer groups read them read_committed and copy them onward with
// GroupTransactSession while members join and leave, and a checker asserts
// every record arrives exactly once, in order per key (20,000 records:
// two transactions and the last one ended at close). The test binary is
// built from the module cache (franz-go is a dependency of this module)
// and pointed at the broker with KGO_SEEDS; KGO_TEST_RF is the topics'
// replication factor.
func TestFranzGoTxnEtl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs franz-go's integration test")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	bin, err := buildKgoTest()
	if err != nil {
		t.Fatalf("building franz-go's kgo tests: %v", err)
	}
	run := func(t *testing.T, seeds []string, rf string) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-test.run", "^TestTxnEtl$", "-test.count=1", "-test.timeout=4m")
		level := "warn"
		if l := os.Getenv("SLUICE_KGO_LOG_LEVEL"); l != "" {
			level = l // info shows every EndTxn with the epochs before and after
		}
		cmd.Env = append(os.Environ(), "KGO_SEEDS="+strings.Join(seeds, ","), "KGO_TEST_RF="+rf, "KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL="+level)
		out, err := cmd.CombinedOutput()
		if dir := os.Getenv("SLUICE_TEST_LOGDIR"); dir != "" {
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-kgo.log"), out, 0o644)
		}
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("franz-go's TestTxnEtl against Sluice: %v\n%s", err, tail(string(out), 60))
		}
	}
	// The two runs at once, each on its own brokers: the test is serial,
	// and one after the other they took 123 s, together 83 s (about
	// 115 s of CPU either way).
	t.Run("one-node", func(t *testing.T) {
		t.Parallel()
		_, addr := startBroker(t, "", txnSets...)
		run(t, []string{addr}, "1")
	})
	t.Run("three-brokers", func(t *testing.T) {
		t.Parallel()
		tc := startCluster(t, 3, txnSets...)
		tc.waitBrokers(3)
		run(t, tc.addrs(), "3")
	})
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
