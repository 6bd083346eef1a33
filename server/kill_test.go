package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProcess runs `sluice serve` and waits until it accepts connections.
func startProcess(t *testing.T, bin, dir string, port int, sets ...string) *exec.Cmd {
	t.Helper()
	args := []string{"serve",
		"--set", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port),
		"--set", "log.dirs=" + dir,
		"--set", "num.partitions=3",
		"--set", "metrics.listen="} // several brokers on one machine
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(bin, args...)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("sluice did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill -9 under an acks=all producer: after a restart every acknowledged
// record is there, at the offset it was acknowledged with.
func TestKill9KeepsAcknowledgedRecords(t *testing.T) {
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := startProcess(t, bin, dir, port)

	type acked struct {
		partition int32
		offset    int64
		value     string
	}
	var (
		mu   sync.Mutex
		acks []acked
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("durable"), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0), kgo.ProduceRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				v := fmt.Sprintf("w%d-%d", w, i)
				cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acks = append(acks, acked{r.Partition, r.Offset, string(r.Value)})
						mu.Unlock()
					}
				})
				time.Sleep(200 * time.Microsecond) // paces the producer; not a wait for a condition
			}
		}(w)
	}
	// Let some acks arrive, then kill -9 mid-stream.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d acks before the deadline", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	cancel()
	wg.Wait()
	cl.Close()
	mu.Lock()
	want := append([]acked(nil), acks...)
	mu.Unlock()

	cmd = startProcess(t, bin, dir, port)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("durable"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	type key struct {
		partition int32
		offset    int64
	}
	got := map[key]string{}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	for missing := len(want); missing > 0; {
		fs := consumer.PollFetches(cctx)
		if cctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got[key{r.Partition, r.Offset}] = string(r.Value) })
		missing = 0
		for _, a := range want {
			if _, ok := got[key{a.partition, a.offset}]; !ok {
				missing++
			}
		}
	}
	for _, a := range want {
		if v, ok := got[key{a.partition, a.offset}]; !ok || v != a.value {
			t.Fatalf("acknowledged record %q at partition %d offset %d: after restart %q (present %v); %d acks, %d records read",
				a.value, a.partition, a.offset, v, ok, len(want), len(got))
		}
	}
	t.Logf("%d acknowledged records all present after kill -9 (%d read)", len(want), len(got))
}
