package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startGateNode starts node 1 of a quorum of voters (ports: PLAINTEXT,
// then each voter's CONTROLLER) without waiting for anything; gateMax,
// when set, bounds its start-up gate.
func startGateNode(t *testing.T, logs *logBuffer, ports []int, voters int, gateMax time.Duration, sets ...string) *Broker {
	t.Helper()
	var vs []string
	for i := range voters {
		vs = append(vs, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[1+i]))
	}
	cfg, err := config.Load("", append([]string{"metrics.listen=", "node.id=1", "log.dirs=" + t.TempDir(),
		"process.roles=broker,controller",
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[0], ports[1]),
		"controller.quorum.voters=" + strings.Join(vs, ",")}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b.gateMax = gateMax
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	return b
}

// A one-voter KRaft-style node (Kafka's stock server.properties) serves
// its client listener only once registered and unfenced, so the first
// Metadata request sent the moment Start returns auto-creates its topic.
// Before the gate that creation failed (no registered broker to place
// the replica on): the broker logged that the topic was not auto-created
// and answered UNKNOWN_TOPIC_OR_PARTITION, which a producer retries until
// it succeeds, so only the first answer and the log tell the two apart.
func TestStartGateOneVoterProduceAtOnce(t *testing.T) {
	logs := &logBuffer{}
	b := startGateNode(t, logs, freePorts(t, 2), 1, 0, "default.replication.factor=1", "offsets.topic.replication.factor=1")
	defer b.Close()
	const topic = "first-second"
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := deadlineContext(t)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("metadata at start-up: %v\n%s", err, logs.String())
	}
	if ts := kresp.(*kmsg.MetadataResponse).Topics; len(ts) != 1 || ts[0].ErrorCode != 0 || len(ts[0].Partitions) != 1 || ts[0].Partitions[0].Leader != 1 {
		t.Errorf("the first Metadata answer does not show the topic auto-created and led by node 1: %+v\n%s", ts, logs.String())
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce at start-up: %v\n%s", err, logs.String())
	}
	if lines := logs.lines("not auto-created"); len(lines) != 0 {
		t.Errorf("an auto-creation failed at start-up: %q", lines)
	}
	if len(logs.lines("the client listeners wait until this broker is registered")) == 0 || len(logs.lines("registered and unfenced; the client listeners serve")) != 1 {
		t.Errorf("the gate's log lines are missing:\n%s", logs.String())
	}
}

// A node whose quorum is not there (1 of 3 voters): its client listener
// accepts but reads no request, its controller listener answers, the
// gate opens after its bound with a warning, and Close does not wait for
// it.
func TestStartGateWaitsAndIsBounded(t *testing.T) {
	logs := &logBuffer{}
	ports := freePorts(t, 4)
	b := startGateNode(t, logs, ports, 3, 0)
	apiVersions := func(port int, wait time.Duration) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", port)), kgo.RequestRetries(0))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
		return err
	}
	if err := apiVersions(ports[0], 700*time.Millisecond); err == nil {
		t.Error("the client listener answered before the broker was registered")
	}
	if err := apiVersions(ports[1], 5*time.Second); err != nil {
		t.Errorf("the controller listener: %v", err)
	}
	if len(logs.lines("waiting_for=\"not registered with the controller yet\"")) == 0 {
		t.Errorf("no line says what the gate waits for:\n%s", logs.String())
	}
	// Close ends the gate's wait rather than waiting it out: it returns
	// with the gate still shut (a Close that waited would find the gate
	// opened by its bound, startGateMax, with the bound's warning). Its
	// return is awaited up to the test's deadline: no speed target.
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	dctx, dcancel := deadlineContext(t)
	defer dcancel()
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-dctx.Done():
		t.Fatalf("Close with a connection at the gate did not return before the test's deadline:\n%s", logs.String())
	}
	select {
	case <-b.gate:
		t.Errorf("Close returned after the gate opened: it waited for the gate's bound:\n%s", logs.String())
	default:
	}
	if len(logs.lines("not unfenced in time")) != 0 {
		t.Errorf("the gate's bound passed before Close returned:\n%s", logs.String())
	}

	// Bounded: past gateMax the client listener serves anyway.
	logs = &logBuffer{}
	ports = freePorts(t, 4)
	b = startGateNode(t, logs, ports, 3, 300*time.Millisecond)
	defer b.Close()
	if err := apiVersions(ports[0], 5*time.Second); err != nil {
		t.Errorf("the client listener past the gate's bound: %v", err)
	}
	if len(logs.lines("not unfenced in time; the client listeners serve anyway")) != 1 {
		t.Errorf("no warning when the bound passed:\n%s", logs.String())
	}
}
