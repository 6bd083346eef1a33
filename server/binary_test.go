package server

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Unknown keys and bad values stop start-up with a message naming the key.
func TestBinaryRejectsBadConfig(t *testing.T) {
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ set, key string }{
		{"no.such.key=1", "no.such.key"},
		{"num.partitions=zero", "num.partitions"},
		{"listeners=SSL://127.0.0.1:9093", "listeners"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "serve", "--set", "log.dirs="+t.TempDir(), "--set", tc.set)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err == nil || !strings.Contains(stderr.String(), tc.key) {
			t.Fatalf("--set %s: err %v, stderr %q", tc.set, err, stderr.String())
		}
	}
}

// SIGTERM: the broker finishes, exits 0, and a restart finds everything.
func TestBinarySigterm(t *testing.T) {
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	dir, port := t.TempDir(), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := startProcess(t, bin, dir, port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("term"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	cmd = startProcess(t, bin, dir, port)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	// The topic has 3 partitions (num.partitions=3): read them all.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("term"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[string]bool{}
	for len(seen) < 10 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("after restart: %d of 10 records, %v", len(seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// sluice --version names the build; sluice serve -h lists every key with
// its default.
func TestBinaryVersionAndKeys(t *testing.T) {
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("sluice "+Version())) || bytes.Contains(out, []byte("(devel)")) {
		t.Fatalf("--version: %q %v", out, err)
	}
	help, err := exec.Command(bin, "serve", "-h").Output()
	if err != nil {
		t.Fatalf("serve -h: %v", err)
	}
	for _, want := range []string{"log.segment.bytes=1073741824", "node.id=1", "log.flush.interval.messages=1"} {
		if !bytes.Contains(help, []byte(want)) {
			t.Errorf("serve -h does not list %s:\n%s", want, help)
		}
	}
}
