package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kcat -G (librdkafka's balanced consumer) consumes a topic as a group,
// commits on exit, and a second run resumes where the first stopped; the
// group's records in __consumer_offsets are readable with kcat too.
func TestKcatGroup(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	_, addr := startBroker(t, "", groupSets...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "kg"); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		var in strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&in, "v%d\n", i)
		}
		runTool(t, in.String(), kcat, "-b", addr, "-t", "kg", "-P", "-X", "topic.request.required.acks=-1")
	}
	consume := func() []string {
		out := runTool(t, "", kcat, "-b", addr, "-G", "kcat-group", "-e", "-q", "-f", "%s\n",
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "kg")
		return strings.Fields(out)
	}
	produce(0, 30)
	if got := consume(); len(got) != 30 {
		t.Fatalf("first kcat -G run consumed %d records, want 30: %v", len(got), got)
	}
	produce(30, 5)
	got := consume()
	if len(got) != 5 {
		t.Fatalf("second kcat -G run consumed %v, want the 5 new records", got)
	}
	for _, v := range got {
		if v < "v30" {
			t.Fatalf("second run re-read %s", v)
		}
	}
	offs, err := adm.FetchOffsets(ctx, "kcat-group")
	if err != nil {
		t.Fatal(err)
	}
	if tot := sumOffsets(offs, "kg"); tot != 35 {
		t.Fatalf("committed offsets sum to %d, want 35", tot)
	}
	out := runTool(t, "", kcat, "-b", addr, "-C", "-t", offsetsTopic, "-e", "-q", "-f", "%k\n")
	if !strings.Contains(out, "kcat-group") {
		t.Fatalf("kcat -t %s shows no record of the group:\n%q", offsetsTopic, out)
	}
}

func sumOffsets(offs kadm.OffsetResponses, topic string) int64 {
	var tot int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At > 0 {
			tot += o.At
		}
	})
	return tot
}

// kafka-python's group consumer: consume, commit, and a new consumer of
// the group resumes after the commit.
func TestKafkaPythonGroup(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "kafka")
	_, addr := startBroker(t, "", groupSets...)
	runTool(t, "", py, "-c", kafkaPythonGroupScript, addr)
}

const kafkaPythonGroupScript = `
import sys
from kafka import KafkaProducer, KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
addr = sys.argv[1]
KafkaAdminClient(bootstrap_servers=addr).create_topics([NewTopic('pyg', 2, 1)])
p = KafkaProducer(bootstrap_servers=addr, acks='all')
def produce(a, b):
    for i in range(a, b):
        p.send('pyg', value=b'%d' % i).get(timeout=30)
produce(0, 20)
def consume(n):
    c = KafkaConsumer('pyg', bootstrap_servers=addr, group_id='py-group', auto_offset_reset='earliest',
                      enable_auto_commit=False, consumer_timeout_ms=20000, session_timeout_ms=6000, heartbeat_interval_ms=500)
    got = []
    for m in c:
        got.append(int(m.value))
        if len(got) == n:
            break
    c.commit()
    c.close()
    return sorted(got)
got = consume(20)
assert got == list(range(20)), got
produce(20, 25)
got = consume(5)
assert got == list(range(20, 25)), got
print('ok')
`

// confluent-kafka-python's group consumer, with the eager and the
// cooperative-sticky assignors: consume, commit, resume.
func TestConfluentKafkaPythonGroup(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "confluent_kafka")
	for _, strategy := range []string{"range", "cooperative-sticky"} {
		t.Run(strategy, func(t *testing.T) {
			_, addr := startBroker(t, "", groupSets...)
			runTool(t, "", py, "-c", confluentGroupScript, addr, strategy)
		})
	}
}

const confluentGroupScript = `
import sys
from confluent_kafka import Producer, Consumer
from confluent_kafka.admin import AdminClient, NewTopic
addr, strategy = sys.argv[1], sys.argv[2]
admin = AdminClient({'bootstrap.servers': addr})
for f in admin.create_topics([NewTopic('ckg', 3, 1)]).values():
    f.result()
p = Producer({'bootstrap.servers': addr, 'acks': 'all'})
def produce(a, b):
    for i in range(a, b):
        p.produce('ckg', value=b'%d' % i)
    assert p.flush(30) == 0
produce(0, 30)
def consume(n):
    c = Consumer({'bootstrap.servers': addr, 'group.id': 'ck-group', 'auto.offset.reset': 'earliest',
                  'enable.auto.commit': False, 'session.timeout.ms': 6000,
                  'partition.assignment.strategy': strategy})
    c.subscribe(['ckg'])
    got = []
    while len(got) < n:
        m = c.poll(20)
        assert m is not None, 'timed out after %d records' % len(got)
        assert m.error() is None, m.error()
        got.append(int(m.value()))
    c.commit(asynchronous=False)
    c.close()
    return sorted(got)
got = consume(30)
assert got == list(range(30)), got
produce(30, 36)
got = consume(6)
assert got == list(range(30, 36)), got
print('ok')
`
