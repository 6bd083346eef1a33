package main

// Helpers of the everyday tools' tests: a live Sluice broker in process,
// a franz-go kfake cluster (a second Kafka-compatible server, to show the
// commands only need --bootstrap-server), stdin for sluice produce, and
// golden files (go test -run X ./cmd/sluice/ -update rewrites them).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// startSluice starts a single-node Sluice broker and returns its
// --bootstrap-server. Groups rebalance at once, and __consumer_offsets
// has one partition (closing fifty fsyncs each).
func startSluice(t *testing.T, sets ...string) string {
	t.Helper()
	return startSluiceBroker(t, sets...).Addr().String()
}

// startSluiceBroker is startSluice's broker (for its other listeners).
func startSluiceBroker(t *testing.T, sets ...string) *server.Broker {
	t.Helper()
	sets = append([]string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir(), "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1"}, sets...)
	cfg, err := config.Load("", sets)
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
	return b
}

// startSluiceCluster starts an n-node Sluice cluster (every node a
// controller voter and a broker, ids 1..n) and returns its
// --bootstrap-server (every node's address). Its ports are picked free
// and closed before the brokers bind them, so another process may take
// one meanwhile: a start that finds a port in use is tried again on new
// ports (a few times).
func startSluiceCluster(t *testing.T, n int) string {
	t.Helper()
	for try := 1; ; try++ {
		addrs, err := tryStartSluiceCluster(t, n)
		if err == nil {
			return addrs
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 3 {
			t.Fatal(err)
		}
		t.Logf("a picked port was taken meanwhile (%v): trying again on new ports", err)
	}
}

// tryStartSluiceCluster is one attempt of startSluiceCluster; the brokers
// of an attempt that failed are closed.
func tryStartSluiceCluster(t *testing.T, n int) (string, error) {
	t.Helper()
	// Every listener stays open until all are picked: the ports differ.
	var lns []net.Listener
	var ports []int
	for range 2 * n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	var voters, addrs []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[n+i]))
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir() // removed after the brokers close
	}
	brokers := make([]*server.Broker, n)
	closeAll := func() {
		var wg sync.WaitGroup
		for _, b := range brokers {
			if b != nil {
				wg.Go(func() { b.Close() })
			}
		}
		wg.Wait()
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			cfg, err := config.Load("", []string{"metrics.listen=",
				fmt.Sprintf("node.id=%d", i+1),
				"log.dirs=" + dirs[i],
				fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[i], ports[n+i]),
				"controller.quorum.voters=" + strings.Join(voters, ","),
				"broker.heartbeat.interval.ms=200",
				"broker.session.timeout.ms=1500",
				"offsets.topic.num.partitions=1",
				"group.initial.rebalance.delay.ms=0",
			})
			if err != nil {
				errs[i] = err
				return
			}
			b, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				if err = b.Start(); err != nil {
					b.Close()
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i+1, err)
				return
			}
			brokers[i] = b
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return "", err
	}
	t.Cleanup(closeAll)
	return strings.Join(addrs, ","), nil
}

// startKfake starts a franz-go kfake cluster of one broker.
func startKfake(t *testing.T) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("kfake-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// servers runs fn against Sluice and against kfake, as subtests.
func servers(t *testing.T, fn func(t *testing.T, bs string)) {
	t.Run("sluice", func(t *testing.T) { fn(t, startSluice(t)) })
	t.Run("kfake", func(t *testing.T) { fn(t, startKfake(t)) })
}

// sluiceIn is sluice with stdin.
func sluiceIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRoot(&stdout, &stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(context.Background())
	name := "sluice"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	code := finish(name, err, &stderr)
	t.Logf("sluice %s < %q: exit %d\n%s%s", strings.Join(args, " "), stdin, code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// mustSluice runs the command line and fails the test unless it exits 0.
func mustSluice(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := sluice(t, args...)
	if code != 0 {
		t.Fatalf("sluice %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// wantExit runs the command line and checks its exit code and that its
// stderr says wants.
func wantExit(t *testing.T, want int, args []string, wants ...string) string {
	t.Helper()
	code, out, errOut := sluice(t, args...)
	if code != want {
		t.Errorf("sluice %s: exit %d, want %d", strings.Join(args, " "), code, want)
	}
	wantContains(t, "output of sluice "+strings.Join(args, " "), out+errOut, wants...)
	return out + errOut
}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (-update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// replaceColumn replaces the cells of column col (by its header) with
// repl in every row of the tables of out, and realigns them, so golden
// files need not hold ids and addresses that vary from run to run.
func replaceColumn(out, col, repl string) string {
	lines := strings.Split(out, "\n")
	var res []string
	for i := 0; i < len(lines); i++ {
		fields := strings.Fields(lines[i])
		idx := -1
		for j, f := range fields {
			if f == col {
				idx = j
			}
		}
		if idx < 0 || strings.Contains(lines[i], ":") {
			res = append(res, lines[i])
			continue
		}
		// A table: its header and the rows up to a blank line.
		rows := [][]string{fields}
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			rows = append(rows, strings.Fields(lines[i]))
		}
		var buf bytes.Buffer
		tw := newTable(&buf)
		for k, r := range rows {
			if k > 0 && idx < len(r) && r[idx] != "-" {
				r[idx] = repl
			}
			tw.Write([]byte(strings.Join(r, "\t") + "\n"))
		}
		tw.Flush()
		res = append(res, strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")...)
	}
	return strings.Join(res, "\n")
}

var topicIDRe = regexp.MustCompile(`TopicId: \S+`)

// adminClient is a franz-go admin client for checking what the commands
// did.
func adminClient(t *testing.T, bs string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// testCtx bounds a test's own requests.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceRecords writes values to topic's partition p, one request each
// and uncompressed, so batch sizes are the same on every run.
func produceRecords(t *testing.T, bs, topic string, p int32, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(v), Timestamp: time.UnixMilli(1764583200000)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	pieces, err := parseFormat(`%t/%p@%o %k=%v %K %S [%h] %%\t%s\n`)
	if err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("val"),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}}
	if got, want := string(formatRecord(nil, pieces, r)), "t/2@7 k=val 1 3 [a=1,b=2] %\tval\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r = &kgo.Record{Topic: "t"}
	if got, want := string(formatRecord(nil, pieces, r)), "t/0@0 = -1 -1 [] %\t\n"; got != want {
		t.Errorf("null key and value: got %q, want %q", got, want)
	}
	for _, bad := range []string{"%x", "abc%"} {
		if _, err := parseFormat(bad); err == nil {
			t.Errorf("parseFormat(%q) accepted", bad)
		}
	}
}

func TestParseReplicaAssignmentAndSpecs(t *testing.T) {
	as, err := parseReplicaAssignment("x", "1:2,2:3,3:1")
	if err != nil || len(as) != 3 || as[2][0] != 3 || as[2][1] != 1 {
		t.Errorf("got %v, %v", as, err)
	}
	for _, bad := range []string{"1:2,3", "1:1", "a", ""} {
		if _, err := parseReplicaAssignment("x", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	s, err := parseTopicSpec("x", "t:0,2,2")
	if err != nil || s.topic != "t" || len(s.partitions) != 2 {
		t.Errorf("got %+v, %v", s, err)
	}
	if s, err := parseTopicSpec("x", "t"); err != nil || s.partitions != nil {
		t.Errorf("got %+v, %v", s, err)
	}
	if _, err := parseTopicSpec("x", "t:a"); err == nil {
		t.Errorf("t:a accepted")
	}
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "PT1H30M": 90 * time.Minute, "P1DT2H": 26 * time.Hour, "PT0.5S": 500 * time.Millisecond} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"P", "PT", "1 hour"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) accepted", bad)
		}
	}
}
