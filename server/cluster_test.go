package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// In-process clusters: three brokers (each a controller voter too) in one
// test process on loopback, talking over real TCP as separate processes
// would, driven by franz-go clients. The multi-process tests with faults
// are in tools/clustertest.

type testCluster struct {
	t       *testing.T
	n       int
	dirs    []string
	cports  []int // PLAINTEXT ports
	ctrl    []int // CONTROLLER ports
	extra   []string
	mu      sync.Mutex
	brokers []*Broker // nil: stopped
	logs    []*syncBuffer
	// dialOpts are every test client's first options (TLS for a cluster
	// with SSL listeners).
	dialOpts []kgo.Opt
	// before, when set, runs on each node between New and Start.
	before func(*Broker)
}

// syncBuffer is a goroutine-safe log sink whose tail a failing test prints.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	str := s.b.String()
	if len(str) > n {
		str = str[len(str)-n:]
	}
	return str
}

// freePorts returns n distinct free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
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
	return ports
}

// startCluster starts n combined broker+controller nodes with fast
// heartbeats; extra are --set entries for every node. A cluster shares
// nothing with another (its own ports and folders), so the cluster tests
// run in parallel: they spend most of their time waiting on elections,
// sessions and throttles, not on the CPU.
func startCluster(t *testing.T, n int, extra ...string) *testCluster {
	t.Helper()
	return startClusterBefore(t, n, nil, extra...)
}

// startClusterBefore is startCluster with before run on each node between
// New and Start (a test's hooks, such as an authorizer).
func startClusterBefore(t *testing.T, n int, before func(*Broker), extra ...string) *testCluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	tc := &testCluster{t: t, n: n, cports: ports[:n], ctrl: ports[n:], extra: extra,
		brokers: make([]*Broker, n), logs: make([]*syncBuffer, n), before: before}
	for i := range n {
		tc.dirs = append(tc.dirs, t.TempDir())
		tc.logs[i] = &syncBuffer{}
	}
	t.Cleanup(func() {
		if t.Failed() {
			tc.mu.Lock()
			for i, b := range tc.brokers {
				if b != nil {
					t.Logf("broker %d: metadata applied to %d, metadata log high watermark %d, log end %d, controller %d, brokers %+v",
						i+1, b.meta.ReplicatedOffset(), b.cl.metaPart.HighWatermark(), b.cl.metaPart.LogEndOffset(), b.cl.controllerID(), b.meta.Brokers())
				}
			}
			tc.mu.Unlock()
			if dir := os.Getenv("SLUICE_TEST_LOGDIR"); dir != "" {
				// Every goroutine's stack, for a broker that hung.
				var stacks bytes.Buffer
				pprof.Lookup("goroutine").WriteTo(&stacks, 2)
				os.MkdirAll(dir, 0o755)
				os.WriteFile(fmt.Sprintf("%s/%s-stacks.txt", dir, strings.ReplaceAll(t.Name(), "/", "_")), stacks.Bytes(), 0o644)
			}
			for i, l := range tc.logs {
				t.Logf("broker %d log tail:\n%s", i+1, l.tail(6000))
				if dir := os.Getenv("SLUICE_TEST_LOGDIR"); dir != "" {
					os.MkdirAll(dir, 0o755)
					os.WriteFile(fmt.Sprintf("%s/%s-broker%d.log", dir, t.Name(), i+1), []byte(l.tail(1<<30)), 0o644)
				}
			}
		}
		tc.mu.Lock()
		bs := slices.Clone(tc.brokers)
		tc.mu.Unlock()
		// The test is over: its brokers stop without a controlled
		// shutdown, which would move every leadership among brokers
		// that are all stopping (a second or so per cluster, asserting
		// nothing). tc.stop and the shutdown tests cover it.
		var wg sync.WaitGroup
		for _, b := range bs {
			if b != nil {
				wg.Add(1)
				go func() { defer wg.Done(); b.noControlledShutdown = true; b.Close() }()
			}
		}
		wg.Wait()
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); tc.start(i) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return tc
}

func (tc *testCluster) sets(i int) []string {
	var voters []string
	for j := range tc.n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", j+1, tc.ctrl[j]))
	}
	return append([]string{
		"metrics.listen=", // several nodes in one process: one default port
		fmt.Sprintf("node.id=%d", i+1),
		"log.dirs=" + tc.dirs[i],
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", tc.cports[i], tc.ctrl[i]),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"broker.heartbeat.interval.ms=200",
		"broker.session.timeout.ms=1500",
		"default.replication.factor=3",
		"min.insync.replicas=2",
		"offsets.topic.num.partitions=3",
		"group.initial.rebalance.delay.ms=0",
	}, tc.extra...)
}

// start starts node i (0-based) and waits for its listeners.
func (tc *testCluster) start(i int) {
	t := tc.t
	cfg, err := config.Load("", tc.sets(i))
	if err != nil {
		t.Error(err)
		return
	}
	logger := slog.New(slog.NewTextHandler(tc.logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))
	var b *Broker
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err = New(cfg, logger)
		if err == nil && tc.before != nil {
			tc.before(b)
		}
		if err == nil {
			err = b.Start()
			if err != nil {
				b.Close()
			}
		}
		// A port freePorts returned may be taken meanwhile, or still held
		// by the node's previous run: retry a little.
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("broker %d: %v", i+1, err)
		return
	}
	tc.mu.Lock()
	tc.brokers[i] = b
	tc.mu.Unlock()
}

// stop closes node i: a controlled shutdown (its leaderships move first).
func (tc *testCluster) stop(i int) {
	tc.mu.Lock()
	b := tc.brokers[i]
	tc.brokers[i] = nil
	tc.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil {
			tc.t.Logf("broker %d close: %v", i+1, err)
		}
	}
}

// crash stops node i without a controlled shutdown: its listeners and raft
// traffic stop at once, as for a process killed (the files are closed
// cleanly; the multi-process tests SIGKILL).
func (tc *testCluster) crash(i int) {
	tc.mu.Lock()
	b := tc.brokers[i]
	tc.brokers[i] = nil
	tc.mu.Unlock()
	if b == nil {
		return
	}
	b.noControlledShutdown = true
	b.cl.transport.Close() // peers hear nothing from now on
	b.Close()
}

func (tc *testCluster) broker(i int) *Broker {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.brokers[i]
}

// addrs are the client listeners of the running nodes.
func (tc *testCluster) addrs() []string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var out []string
	for i, b := range tc.brokers {
		if b != nil {
			out = append(out, fmt.Sprintf("127.0.0.1:%d", tc.cports[i]))
		}
	}
	return out
}

func (tc *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	tc.t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(tc.addrs()...), kgo.MetadataMinAge(100 * time.Millisecond)}, tc.dialOpts...), opts...)...)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(cl.Close)
	return cl
}

// direct is a client of node i (0-based) alone, closed at the test's end:
// its requests (cl.Broker(i+1).Request) go to that broker, never routed.
func (tc *testCluster) direct(i int) *kgo.Client {
	tc.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", tc.cports[i]))}, tc.dialOpts...)...)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(cl.Close)
	return cl
}

// eventually polls cond every 50 ms until it returns nil or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metadata asks a running broker for Metadata directly (kadm answers from
// the client's cache, which may be older than a failover).
func (tc *testCluster) metadata(ctx context.Context, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.addrs()...)}, tc.dialOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) == 0 {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	seeds := cl.SeedBrokers()
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// controller is the active controller Metadata names.
func (tc *testCluster) controller(ctx context.Context) (int32, []int32, error) {
	m, err := tc.metadata(ctx)
	if err != nil {
		return -1, nil, err
	}
	var ids []int32
	for _, b := range m.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return m.ControllerID, ids, nil
}

// waitBrokers waits until Metadata lists want brokers (registered and
// unfenced) and a controller.
func (tc *testCluster) waitBrokers(want int) {
	tc.t.Helper()
	eventually(tc.t, 20*time.Second, "brokers registered", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ctrl, ids, err := tc.controller(ctx)
		if err != nil {
			return err
		}
		if len(ids) != want || ctrl < 1 {
			return fmt.Errorf("brokers %v, controller %d", ids, ctrl)
		}
		return nil
	})
}

// partitionState is one partition as Metadata shows it.
type partitionState struct {
	leader   int32
	replicas []int32
	isr      []int32
}

// waitLeaders waits until every partition of topic has a leader with an
// ISR of at least isr replicas in Metadata.
func (tc *testCluster) waitLeaders(topic string, isr int) []partitionState {
	tc.t.Helper()
	var out []partitionState
	eventually(tc.t, 20*time.Second, "leaders of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m, err := tc.metadata(ctx, topic)
		if err != nil {
			return err
		}
		if len(m.Topics) != 1 {
			return fmt.Errorf("%d topics", len(m.Topics))
		}
		mt := m.Topics[0]
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return err
		}
		out = make([]partitionState, len(mt.Partitions))
		for _, p := range mt.Partitions {
			if p.Leader < 0 || p.ErrorCode != 0 || len(p.ISR) < isr {
				return fmt.Errorf("partition %d: leader %d isr %v err %v", p.Partition, p.Leader, p.ISR, kerr.ErrorForCode(p.ErrorCode))
			}
			out[p.Partition] = partitionState{p.Leader, p.Replicas, p.ISR}
		}
		return nil
	})
	return out
}

func TestClusterTopicsProduceConsume(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// CreateTopics sent to each broker in turn: two forward it to the
	// active controller.
	for i := range 3 {
		cl := tc.direct(i)
		topic := fmt.Sprintf("t%d", i)
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 4, 3
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		// Straight to broker i, not routed to the controller by kgo.
		resp, err := cl.Broker(i+1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("create %s through broker %d: %v", topic, i+1, kerr.ErrorForCode(code))
		}
		ps := tc.waitLeaders(topic, 3)
		leaders := map[int32]int{}
		for i, p := range ps {
			if len(p.replicas) != 3 {
				t.Fatalf("partition %d replicas %v", i, p.replicas)
			}
			leaders[p.leader]++
		}
		t.Logf("%s leaders per broker: %v", topic, leaders)
	}
	// Idempotent acks=all produce through any broker, consume everything.
	const n = 2000
	prod := tc.client(kgo.DefaultProduceTopic("t0"), kgo.RequiredAcks(kgo.AllISRAcks()))
	var wg sync.WaitGroup
	var perr error
	var pmu sync.Mutex
	for i := range n {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprintf("v%05d", i))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				pmu.Lock()
				perr = err
				pmu.Unlock()
			}
		})
	}
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}
	cons := tc.client(kgo.ConsumeTopics("t0"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("duplicate %s", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
}

func TestClusterPlacementErrors(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	resp, err := adm.CreateTopic(ctx, 1, 4, nil, "rf4")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 4 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	for _, tcase := range []struct {
		name string
		a    map[int32][]int32
	}{
		{"unknown broker", map[int32][]int32{0: {1, 2, 9}}},
		{"duplicate replica", map[int32][]int32{0: {1, 1, 2}}},
		{"uneven", map[int32][]int32{0: {1, 2, 3}, 1: {1, 2}}},
		{"gap", map[int32][]int32{0: {1, 2}, 2: {2, 3}}},
	} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "manual", -1, -1
		for p, rs := range tcase.a {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = p, rs
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		req.Topics = append(req.Topics, rt)
		r, err := req.RequestWith(ctx, tc.client())
		if err != nil {
			t.Fatal(err)
		}
		if code := r.Topics[0].ErrorCode; code != kerr.InvalidReplicaAssignment.Code {
			t.Errorf("%s: %v, want INVALID_REPLICA_ASSIGNMENT", tcase.name, kerr.ErrorForCode(code))
		}
	}
	// A valid manual assignment is kept as given.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "manual", -1, -1
	for p, rs := range [][]int32{{3, 1}, {2, 3}} {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	r, err := req.RequestWith(ctx, tc.client())
	if err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("valid manual assignment: %v %v", err, kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	ps := tc.waitLeaders("manual", 2)
	if got := ps[0].replicas; !slices.Equal(got, []int32{3, 1}) {
		t.Errorf("partition 0 replicas %v, want [3 1]", got)
	}
	if got := ps[1].replicas; !slices.Equal(got, []int32{2, 3}) {
		t.Errorf("partition 1 replicas %v, want [2 3]", got)
	}
}

// clusterProduce produces n records with values prefix-i, acks=all, idempotent,
// and fails the test on an error.
func clusterProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("produce %s: %v", prefix, first)
	}
}

// readAll reads every record of topic from the start until it has want
// values, and returns how often each value was seen.
func readAll(t *testing.T, ctx context.Context, tc *testCluster, topic string, want int) map[string]int {
	t.Helper()
	cl := tc.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	seen := map[string]int{}
	total := 0
	for total < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s: %v", total, want, topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			total++
		})
	}
	return seen
}

func TestClusterLeaderCrash(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	leaderCrashScenario(t, tc)
}

// leaderCrashScenario crashes the leader of a new topic's partition
// (three replicas) while producing with acks=all, restarts it, and reads
// back every acknowledged record exactly once, within 90 s.
func leaderCrashScenario(t *testing.T, tc *testCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "fail"); err != nil {
		t.Fatal(err)
	}
	ps := tc.waitLeaders("fail", 3)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	clusterProduce(t, ctx, prod, "fail", "before", 200)
	lead := ps[0].leader
	start := time.Now()
	tc.crash(int(lead) - 1)
	// The producer knew the old leader: its next records go to the new
	// one once the client learns it.
	clusterProduce(t, ctx, prod, "fail", "after", 200)
	t.Logf("leader %d crashed; 200 records acknowledged by the new leader %v later", lead, time.Since(start).Round(time.Millisecond))
	ps = tc.waitLeaders("fail", 2)
	if ps[0].leader == lead {
		t.Fatalf("leader still %d", lead)
	}
	tc.start(int(lead) - 1)
	tc.waitLeaders("fail", 3)
	seen := readAll(t, ctx, tc, "fail", 400)
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", v, n)
		}
	}
	if len(seen) != 400 {
		t.Errorf("read %d distinct records, want 400", len(seen))
	}
}

func TestClusterControllerFailover(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctrl, _, err := tc.controller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tc.crash(int(ctrl) - 1)
	adm := kadm.NewClient(tc.client())
	eventually(t, 20*time.Second, "a new controller", func() error {
		c, _, err := tc.controller(ctx)
		if err != nil {
			return err
		}
		if c < 1 || c == ctrl {
			return fmt.Errorf("controller %d", c)
		}
		return nil
	})
	// The crashed controller is fenced once its session expired, and
	// metadata changes still work, through either survivor (after the
	// fence: a two-replica raft group placed on the crashed broker could
	// not elect).
	eventually(t, 20*time.Second, "the crashed controller fenced", func() error {
		_, ids, err := tc.controller(ctx)
		if err != nil {
			return err
		}
		if slices.Contains(ids, ctrl) {
			return fmt.Errorf("brokers %v still list %d", ids, ctrl)
		}
		return nil
	})
	eventually(t, 20*time.Second, "create after controller failover", func() error {
		resp, err := adm.CreateTopic(ctx, 2, 2, nil, "after")
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	tc.waitLeaders("after", 2)
	tc.start(int(ctrl) - 1)
	tc.waitBrokers(3)
}

func TestClusterGroupSurvivesCoordinatorCrash(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "g"); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("g", 3)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "g", "r", 100)
	cons := tc.client(kgo.ConsumeTopics("g"), kgo.ConsumerGroup("grp"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 100 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d", got)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	// Crash the group's coordinator; the committed offsets survive on the
	// new leader of its __consumer_offsets partition.
	var coord int32 = -1
	eventually(t, 10*time.Second, "find coordinator", func() error {
		r := adm.FindGroupCoordinators(ctx, "grp")
		if e := r["grp"].Err; e != nil {
			return e
		}
		coord = r["grp"].NodeID
		return nil
	})
	tc.crash(int(coord) - 1)
	eventually(t, 30*time.Second, "offsets after failover", func() error {
		// A fresh client each time: one that asked during the failover
		// keeps the old coordinator while it only fails to dial it.
		cl, err := kgo.NewClient(kgo.SeedBrokers(tc.addrs()...))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		os, err := adm.FetchOffsets(ctx, "grp")
		if err != nil {
			return err
		}
		if err := os.Error(); err != nil {
			return err
		}
		total := int64(0)
		os.Each(func(o kadm.OffsetResponse) { total += o.At })
		if total != 100 {
			return fmt.Errorf("committed offsets sum to %d, want 100", total)
		}
		return nil
	})
}

func TestClusterProducerIDsUnique(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[int64]int{}
	for i := range 3 {
		cl := tc.direct(i)
		for range 3 {
			var resp *kmsg.InitProducerIDResponse
			eventually(t, 10*time.Second, "init producer id", func() error {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.ProducerID, req.ProducerEpoch = -1, -1
				r, err := cl.Broker(i+1).Request(ctx, req)
				if err != nil {
					return err
				}
				resp = r.(*kmsg.InitProducerIDResponse)
				return kerr.ErrorForCode(resp.ErrorCode)
			})
			if prev, dup := seen[resp.ProducerID]; dup {
				t.Fatalf("producer id %d from broker %d and %d", resp.ProducerID, prev, i+1)
			}
			seen[resp.ProducerID] = i + 1
		}
	}
}

// Two of three brokers down: acks=all cannot commit (a raft group needs a
// majority), so the produce fails retriably; once they return, every
// partition (the 50 of __consumer_offsets too) elects again, nothing
// acknowledged before is lost, and the group's committed offsets are
// served again.
func TestClusterTwoOfThreeDown(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "offsets.topic.num.partitions=50")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "two"); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("two", 3)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "two", "before", 300)
	if err := adm.CommitAllOffsets(ctx, "grp", kadm.OffsetsFromRecords(kgo.Record{Topic: "two", Partition: 0, Offset: 9})); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders(offsetsTopic, 3)
	tc.crash(0)
	tc.crash(1)
	// Not idempotent: kgo never fails an idempotent batch whose request
	// timed out, nor gives up initializing a producer id it cannot get
	// (a probe hung there for minutes), and the delivery timeout bounds
	// a plain one. The select bounds it anyway: a hang fails the test.
	probe := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(3*time.Second), kgo.DisableIdempotentWrite())
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- probe.ProduceSync(pctx, &kgo.Record{Topic: "two", Value: []byte("minority")}).FirstErr()
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		probe.Close()
		t.Fatal("an acks=all produce with two of three brokers down neither failed nor succeeded in 60 s")
	}
	pcancel()
	if err == nil {
		t.Fatal("an acks=all produce succeeded with two of three brokers down")
	}
	t.Logf("produce with two of three down: %v", err)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); tc.start(i) }()
	}
	wg.Wait()
	tc.waitLeaders("two", 3)
	tc.waitLeaders(offsetsTopic, 2)
	t.Logf("every partition led again %v after the restarts began", time.Since(start).Round(time.Millisecond))
	eventually(t, 30*time.Second, "committed offsets served again", func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(tc.addrs()...))
		if err != nil {
			return err
		}
		defer cl.Close()
		os, err := kadm.NewClient(cl).FetchOffsets(ctx, "grp")
		if err != nil {
			return err
		}
		if err := os.Error(); err != nil {
			return err
		}
		if o, _ := os.Lookup("two", 0); o.At != 10 {
			return fmt.Errorf("committed %d, want 10", o.At)
		}
		return nil
	})
	t.Logf("group offsets served %v after the restarts began", time.Since(start).Round(time.Millisecond))
	seen := readAll(t, ctx, tc, "two", 300)
	for i := range 300 {
		if n := seen[fmt.Sprintf("before-%d", i)]; n != 1 {
			t.Errorf("before-%d read %d times", i, n)
		}
	}
}

// A broker that is not a controller voter (process.roles=broker) follows
// the metadata log as a raft learner, registers, and takes replicas.
func TestClusterBrokerOnlyNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ports := freePorts(t, 1)
	dir := t.TempDir()
	var voters []string
	for j := range 3 {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", j+1, tc.ctrl[j]))
	}
	cfg, err := config.Load("", []string{"metrics.listen=", "node.id=4", "process.roles=broker", "log.dirs=" + dir,
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", ports[0]),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"broker.heartbeat.interval.ms=200", "broker.session.timeout.ms=1500"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	b4, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if err := b4.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		b4.Close()
		if t.Failed() {
			t.Logf("broker 4 log tail:\n%s", logs.tail(8000))
		}
	}()
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A topic on all four: broker 4 holds a replica of each partition.
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 4, 4, nil, "four"); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("four", 4)
	eventually(t, 20*time.Second, "broker 4 applied the topic", func() error {
		if _, ok := b4.meta.Topic("four"); !ok {
			return errors.New("no topic four in broker 4's metadata")
		}
		if _, ok := b4.partition("four", 0); !ok {
			return errors.New("partition four-0 not open on broker 4")
		}
		return nil
	})
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "four", "r", 100)
}

// DeleteRecords goes to the leader, which replicates it through raft:
// every replica's log start offset moves; a broker that holds no replica
// answers NOT_LEADER_OR_FOLLOWER.
func TestClusterDeleteRecords(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "del"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "one"); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("del", 3)
	ps := tc.waitLeaders("one", 1)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "del", "r", 50)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "del", Partition: 0, At: 20})
	resp, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	if lw, _ := resp.Lookup("del", 0); lw.LowWatermark != 20 {
		t.Fatalf("low watermark %d, want 20", lw.LowWatermark)
	}
	eventually(t, 10*time.Second, "every replica's log start offset at 20", func() error {
		for i := range 3 {
			part, ok := tc.broker(i).partition("del", 0)
			if !ok {
				return fmt.Errorf("broker %d holds no del-0", i+1)
			}
			if ls := part.LogStartOffset(); ls != 20 {
				return fmt.Errorf("broker %d: log start offset %d", i+1, ls)
			}
		}
		return nil
	})
	// A broker without a replica of one-0.
	other := (int(ps[0].leader) % 3) // 0-based index of a broker that is not the leader
	cl := tc.direct(other)
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "one"
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	r, err := cl.Broker(other+1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("DeleteRecords on broker %d, which holds no replica: %v, want NOT_LEADER_OR_FOLLOWER", other+1, kerr.ErrorForCode(code))
	}
}

// Regressions from review: a topic may not take the metadata log's name;
// an admin request forwarded by a broker keeps the client's version
// (DeleteTopics v5 names topics in another field than v6); a refused
// forwarded creation answers at once; a broker stopped by a controlled
// shutdown stays fenced.
func TestClusterForwardingAndShutdownRegressions(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctrl, _, err := tc.controller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := int(ctrl%3) + 1 // a broker that is not the controller
	cl := tc.direct(other - 1)
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(other).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"__cluster_metadata", "gone"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 3
		create.Topics = append(create.Topics, rt)
	}
	cr := send(create).(*kmsg.CreateTopicsResponse)
	if cr.Topics[0].ErrorCode != kerr.InvalidTopicException.Code || cr.Topics[1].ErrorCode != 0 {
		t.Fatalf("create __cluster_metadata and gone: %v, %v", kerr.ErrorForCode(cr.Topics[0].ErrorCode), kerr.ErrorForCode(cr.Topics[1].ErrorCode))
	}
	// "At once" is "without waiting out the request's timeout": it is
	// ten minutes, and the test's context (60 s) fails the request long
	// before (a deadline, not a speed target).
	bad := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "rf5", 1, 5
	bad.Topics = append(bad.Topics, rt)
	bad.TimeoutMillis = 600000
	if code := send(bad).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("rf 5: %v", kerr.ErrorForCode(code))
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 5
	del.TopicNames = []string{"gone"}
	del.TimeoutMillis = 10000
	dr, err := cl.Broker(other).Request(ctx, pinnedRequest{del, 5})
	if err != nil {
		t.Fatal(err)
	}
	if ts := dr.(*kmsg.DeleteTopicsResponse).Topics; len(ts) != 1 || ts[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics v5 through broker %d: %+v", other, ts)
	}
	eventually(t, 10*time.Second, "gone deleted everywhere", func() error {
		for i := range 3 {
			if _, ok := tc.broker(i).meta.Topic("gone"); ok {
				return fmt.Errorf("broker %d still has topic gone", i+1)
			}
		}
		return nil
	})
	// A controlled shutdown of a broker that is not the controller.
	tc.stop(other - 1)
	// Not a wait for a condition: proves something does not happen within
	// a window (heartbeats that could unfence it again would arrive within
	// this second; the brokers' heartbeats run on the wall clock).
	time.Sleep(time.Second)
	br, ok := tc.broker(int(ctrl) - 1).meta.Broker(int32(other))
	if !ok || !br.Fenced {
		t.Fatalf("broker %d after its controlled shutdown: %+v, want fenced", other, br)
	}
}

// On a single node, and on a cluster's client listeners, ApiVersions
// lists none of the controller's APIs (Kafka serves them on controller
// listeners only).
func TestControllerAPIsOnlyOnControllerListeners(t *testing.T) {
	t.Parallel()
	check := func(addr string, want bool) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resp, err := cl.SeedBrokers()[0].Request(context.Background(), kmsg.NewPtrApiVersionsRequest())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
			if k.ApiKey == 62 || k.ApiKey == 63 || k.ApiKey == 56 || k.ApiKey == 67 {
				if !want {
					t.Errorf("%s lists controller API %d", addr, k.ApiKey)
				}
				return
			}
		}
		if want {
			t.Errorf("%s lists no controller API", addr)
		}
	}
	_, addr := startBroker(t, "")
	check(addr, false)
	tc := startCluster(t, 3)
	check(fmt.Sprintf("127.0.0.1:%d", tc.cports[0]), false)
	check(fmt.Sprintf("127.0.0.1:%d", tc.ctrl[0]), true)
}

// A broker fenced while it runs (its heartbeats stop reaching the
// controller) hands its leaderships to other replicas: Metadata, which
// leaves it out, shows leaders clients can reach.
func TestClusterFencedBrokerMovesLeadership(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "fence"); err != nil {
		t.Fatal(err)
	}
	ps := tc.waitLeaders("fence", 3)
	lead := ps[0].leader
	tc.broker(int(lead) - 1).cl.heartbeatsOff.Store(true)
	eventually(t, 15*time.Second, "no partition led by the fenced broker", func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := tc.metadata(ctx, "fence")
		if err != nil {
			return err
		}
		for _, p := range m.Topics[0].Partitions {
			if p.Leader < 0 || p.Leader == lead {
				return fmt.Errorf("partition %d: leader %d", p.Partition, p.Leader)
			}
		}
		return nil
	})
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "fence", "r", 30)
}

// A Metadata request that auto-creates a topic, sent to each broker in
// turn (kcat's produce to a new topic): the ones that are not the
// controller have it create the topic.
func TestClusterAutoCreateThroughAnyBroker(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 3 {
		cl := tc.direct(i)
		topic := fmt.Sprintf("auto%d", i)
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = true
		if _, err := cl.Broker(i+1).Request(ctx, req); err != nil {
			t.Fatal(err)
		}
		ps := tc.waitLeaders(topic, 3)
		if len(ps[0].replicas) != 3 {
			t.Errorf("%s auto-created through broker %d: replicas %v, want default.replication.factor 3", topic, i+1, ps[0].replicas)
		}
	}
}

// With one of three brokers down, a topic auto-created with
// default.replication.factor 3 through a broker that is not the
// controller cannot be placed: the controller refuses the forwarded
// creation (INVALID_REPLICATION_FACTOR), and Metadata answers
// UNKNOWN_TOPIC_OR_PARTITION, which clients retry, as Kafka's
// AutoTopicCreationManager answers every topic it sent to the controller;
// once the broker is back, the same request creates it.
func TestClusterAutoCreateUnplaceableIsRetriable(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := deadlineContext(t)
	defer cancel()
	ctrl, _, err := tc.controller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var others []int // 0-based nodes that are not the controller
	for i := range 3 {
		if int32(i+1) != ctrl {
			others = append(others, i)
		}
	}
	down, via := others[0], others[1]
	tc.crash(down)
	// Until the controller takes the crashed broker out of placement, a
	// creation with three replicas is placed on it: wait for a
	// validate-only one to be refused.
	check := kmsg.NewPtrCreateTopicsRequest()
	check.ValidateOnly = true
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "probe", 1, 3
	check.Topics = append(check.Topics, ct)
	cl := tc.direct(via)
	for {
		resp, err := cl.Broker(via+1).Request(ctx, check)
		if err == nil && resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode == kerr.InvalidReplicationFactor.Code {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("three replicas still placeable with broker %d down: %v", down+1, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("needs-three")
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp, err := cl.Broker(via+1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("auto-creation with broker %d down, through broker %d: %v, want UNKNOWN_TOPIC_OR_PARTITION", down+1, via+1, kerr.ErrorForCode(code))
	}
	if _, ok := tc.broker(via).meta.Topic("needs-three"); ok {
		t.Fatal("the topic was created with a broker down")
	}
	tc.start(down)
	tc.waitBrokers(3)
	for {
		resp, err := cl.Broker(via+1).Request(ctx, req)
		if err == nil && resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("auto-creation with every broker back: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	tc.waitLeaders("needs-three", 3)
}

// A produce sent to a follower answers NOT_LEADER_OR_FOLLOWER with
// KIP-951's hint: the current leader and epoch, and its endpoint in the
// response's NodeEndpoints, so a client need not refresh its metadata.
func TestClusterNotLeaderHints(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "hint"); err != nil {
		t.Fatal(err)
	}
	ps := tc.waitLeaders("hint", 3)
	lead := ps[0].leader
	follower := int(lead) % 3 // 0-based index of another broker
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "hint"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch.Build(batch.NewBuildOptions(), []batch.Record{{Value: []byte("v")}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := tc.direct(follower).Broker(follower+1).Request(ctx, pinnedRequest{req, 11})
	if err != nil {
		t.Fatal(err)
	}
	pr := resp.(*kmsg.ProduceResponse)
	sp := pr.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != lead {
		t.Fatalf("produce to follower %d: %v, current leader %d, want NOT_LEADER_OR_FOLLOWER naming %d", follower+1, kerr.ErrorForCode(sp.ErrorCode), sp.CurrentLeader.LeaderID, lead)
	}
	if len(pr.Brokers) != 1 || pr.Brokers[0].NodeID != lead || pr.Brokers[0].Port != int32(tc.cports[lead-1]) {
		t.Fatalf("NodeEndpoints %+v, want broker %d at port %d", pr.Brokers, lead, tc.cports[lead-1])
	}
}

// A group lookup at a broker that is not the active controller has the
// controller create __consumer_offsets at once. The broker forwards a
// FindCoordinator of its own; sent at v4+ (what a Sluice controller
// negotiates) with only the v0-3 key, it named no key, the controller
// looked nothing up and created nothing, and the broker answered
// COORDINATOR_NOT_AVAILABLE after localMetadataWait, until some client's
// lookup reached the controller itself.
func TestClusterOffsetsTopicCreatedThroughBroker(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctrl, _, err := tc.controller(ctx)
	if err != nil || ctrl < 1 {
		t.Fatalf("controller %d: %v", ctrl, err)
	}
	other := int(ctrl) % 3 // the 0-based index of the node after the controller
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g"}
	start := time.Now()
	if _, err := req.RequestWith(ctx, tc.direct(other).Broker(other+1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := tc.broker(other).meta.Topic(offsetsTopic); !ok {
		t.Fatalf("FindCoordinator at broker %d (the controller is %d) answered after %v; %s does not exist",
			other+1, ctrl, time.Since(start).Round(time.Millisecond), offsetsTopic)
	}
}
