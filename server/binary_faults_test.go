package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/faultinject"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// writeControl replaces the faults control file atomically, as a fault
// runner should.
func writeControl(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// startServe runs `sluice serve` on port with SLUICE_FAULTS=control,
// its stderr into stderr, and waits until it accepts connections.
func startServe(t *testing.T, bin, dir string, port int, control string, stderr *logBuffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "serve",
		"--set", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port),
		"--set", "log.dirs="+dir, "--set", "metrics.listen=")
	cmd.Env = append(os.Environ(), faultinject.EnvVar+"="+control)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice did not start: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The faults build follows SLUICE_FAULTS: produce works, fail_writes
// makes produce fail with KAFKA_STORAGE_ERROR, {} makes it work again;
// the normal build ignores the variable.
func TestBinaryFaultsBuild(t *testing.T) {
	bin, err := buildSluiceFaults()
	if err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(t.TempDir(), "faults.json")
	writeControl(t, control, `{}`)
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	stderr := &logBuffer{}
	cmd := startServe(t, bin, t.TempDir(), port, control, stderr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// No retries, so a retriable error reaches the caller; no
	// idempotence, so a failed batch does not stall the sequence.
	cl := newClient(t, addr, kgo.DefaultProduceTopic("f"), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.ProduceRequestTimeout(5*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(i int) error {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr()
	}
	// Auto-creation may answer a retriable error before the topic is
	// open: the first produce may take a few tries.
	deadline := time.Now().Add(20 * time.Second)
	for produce(0) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no produce succeeded:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	writeControl(t, control, `{"fail_writes": true}`)
	deadline = time.Now().Add(10 * time.Second)
	for i := 1; ; i++ {
		if err = produce(i); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce still succeeds 10s after fail_writes:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a failing disk: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if !strings.Contains(stderr.String(), "sluice: faults: applied") || !strings.Contains(stderr.String(), "fail_writes=true") {
		t.Fatalf("no INFO line for the applied faults:\n%s", stderr.String())
	}

	writeControl(t, control, `{}`)
	deadline = time.Now().Add(30 * time.Second)
	for i := 1000; ; i++ {
		if err = produce(i); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce still fails 30s after the faults were cleared: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}

	// The normal build has no fault injection: the same variable and a
	// failing control file change nothing.
	plain, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	writeControl(t, control, `{"fail_writes": true}`)
	port = freePort(t)
	stderr = &logBuffer{}
	startServe(t, plain, t.TempDir(), port, control, stderr)
	cl = newClient(t, fmt.Sprintf("127.0.0.1:%d", port), kgo.DefaultProduceTopic("f"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatalf("normal build with %s set: %v\n%s", faultinject.EnvVar, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "sluice: faults") {
		t.Fatalf("the normal build logs about faults:\n%s", stderr.String())
	}
}
