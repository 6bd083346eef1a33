package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaStockFile: `sluice serve server.properties` on Kafka 4.0's
// shipped settings, the file byte for byte, with only the data dir and
// ports moved by --set (as kafka-server-start.sh's --override would):
// the node starts as a one-voter quorum, names the Kafka keys it does
// not act on in one line, and a record produced is consumed.
func TestKafkaStockFile(t *testing.T) {
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	stock, err := os.ReadFile("config/testdata/kafka-4.0-server.properties")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(file, stock, 0o644); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	broker, controller := ports[0], ports[1]
	cmd := exec.Command(bin, "serve", file,
		"--set", "log.dirs="+filepath.Join(dir, "data"),
		"--set", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", broker, controller),
		"--set", fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", broker, controller),
		"--set", fmt.Sprintf("controller.quorum.bootstrap.servers=127.0.0.1:%d", controller))
	var stderr logBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sluice's log:\n%s", stderr.String())
		}
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", broker)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice did not start: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("stock"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("stock"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// At once: the client listener serves once the broker registered
	// with its quorum of one and was unfenced (startgate.go), so
	// auto-creation has a broker to place the replica on.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("from Kafka's own config")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "from Kafka's own config" {
		t.Fatalf("consumed %v", recs)
	}
	const line = `msg="sluice: accepted Kafka config keys that Sluice does not act on" keys=num.io.threads,num.network.threads,num.recovery.threads.per.data.dir,share.coordinator.state.topic.min.isr,share.coordinator.state.topic.replication.factor,socket.receive.buffer.bytes,socket.send.buffer.bytes` + "\n"
	if got := stderr.lines("does not act on"); len(got) != 1 || !strings.HasSuffix(got[0]+"\n", line) {
		t.Errorf("lines %q, want one ending %q", got, line)
	}
}
