package server

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// needTool returns the path of an external client, skipping the test when
// it is missing unless SLUICE_REQUIRE_CLIENTS is set (test.sh sets it
// after installing them), where a missing client fails.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_CLIENTS") != "" {
			t.Fatalf("%s not installed (test.sh installs it)", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

func runTool(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kcat (librdkafka) produces keyed records and reads them back.
func TestKcat(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	_, addr := startBroker(t, "")
	runTool(t, "k1:v1\nk2:v2\nk3:v3\n", kcat, "-b", addr, "-t", "kcat-topic", "-P", "-K:", "-X", "topic.request.required.acks=-1")
	out := runTool(t, "", kcat, "-b", addr, "-t", "kcat-topic", "-C", "-e", "-o", "beginning", "-f", "%o %k=%s\n")
	want := "0 k1=v1\n1 k2=v2\n2 k3=v3\n"
	if !strings.Contains(out, want) {
		t.Fatalf("kcat consumed:\n%s\nwant:\n%s", out, want)
	}
	// Metadata listing shows the broker and the topic.
	if out := runTool(t, "", kcat, "-b", addr, "-L"); !strings.Contains(out, `topic "kcat-topic" with 1 partitions`) {
		t.Fatalf("kcat -L:\n%s", out)
	}
}

const kafkaPythonScript = `
import sys
from kafka import KafkaProducer, KafkaConsumer
addr = sys.argv[1]
p = KafkaProducer(bootstrap_servers=addr, acks='all')
for i in range(5):
    p.send('py-topic', key=b'k%d' % i, value=b'v%d' % i).get(timeout=30)
p.flush()
c = KafkaConsumer('py-topic', bootstrap_servers=addr, auto_offset_reset='earliest', consumer_timeout_ms=3000, enable_auto_commit=False, group_id=None)
got = [(m.offset, m.key.decode(), m.value.decode()) for m in c]
print(got)
assert got == [(i, 'k%d' % i, 'v%d' % i) for i in range(5)], got
`

const confluentScript = `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition
addr = sys.argv[1]
p = Producer({'bootstrap.servers': addr, 'acks': 'all'})
for i in range(5):
    p.produce('ck-topic', key=b'k%d' % i, value=b'v%d' % i)
assert p.flush(30) == 0
c = Consumer({'bootstrap.servers': addr, 'group.id': 'unused', 'enable.auto.commit': False})
c.assign([TopicPartition('ck-topic', 0, 0)])
got = []
while len(got) < 5:
    m = c.poll(10)
    assert m is not None, 'timed out'
    assert m.error() is None, m.error()
    got.append((m.offset(), m.key().decode(), m.value().decode()))
print(got)
assert got == [(i, 'k%d' % i, 'v%d' % i) for i in range(5)], got
c.close()
`

// pythonWith returns Debian's python3 when it can import module (Debian's
// python3-kafka packages install for /usr/bin/python3, which may not be
// the first python3 on PATH).
func pythonWith(t *testing.T, module string) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import "+module).Run() == nil {
			return py
		}
	}
	if os.Getenv("SLUICE_REQUIRE_CLIENTS") != "" {
		t.Fatalf("python module %s not installed (test.sh installs it)", module)
	}
	t.Skipf("python module %s not installed", module)
	return ""
}

func TestKafkaPython(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "kafka")
	_, addr := startBroker(t, "")
	runTool(t, "", py, "-c", kafkaPythonScript, addr)
}

func TestConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "confluent_kafka")
	_, addr := startBroker(t, "")
	runTool(t, "", py, "-c", confluentScript, addr)
}

// kcat (librdkafka 2.x) compresses only against a broker whose ApiVersions
// lists Produce v0 (librdkafka#4956, KAFKA-18659): its gzip, snappy and lz4
// batches must arrive, and be stored, compressed.
func TestKcatCompressionStored(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	b, addr := startBroker(t, "")
	for _, codec := range []struct {
		name string
		bits byte
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}} {
		topic := "kz-" + codec.name
		runTool(t, strings.Repeat("k:"+strings.Repeat("compressible ", 20)+"\n", 20), kcat, "-b", addr, "-t", topic, "-P", "-K:", "-z", codec.name, "-X", "acks=all")
		part, ok := b.partition(topic, 0)
		if !ok {
			t.Fatalf("%s: no partition", topic)
		}
		data, _, err := part.ReadBytes(nil, 0, 1<<20)
		if err != nil || len(data) < 61 {
			t.Fatalf("%s: read %d bytes: %v", topic, len(data), err)
		}
		if got := data[22] & 7; got != codec.bits {
			t.Errorf("kcat -z %s: stored batch codec %d, want %d", codec.name, got, codec.bits)
		}
	}
}
