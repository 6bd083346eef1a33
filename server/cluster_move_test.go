package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Moving partitions (KIP-455 reassignments, preferred leader elections,
// decommissions) on in-process clusters: three voters and broker-only
// nodes. The multi-process scenarios under faults are in tools/clustertest.

func TestNextMoveStep(t *testing.T) {
	all := func(uint64) bool { return true }
	none := func(uint64) bool { return false }
	for _, tc := range []struct {
		name                     string
		self                     uint64
		target, voters, learners []uint64
		caughtUp                 func(uint64) bool
		want                     moveStep
	}{
		{"at target", 1, []uint64{1, 2, 3}, []uint64{1, 2, 3}, nil, all, moveStep{}},
		{"add a learner first", 1, []uint64{2, 3, 4}, []uint64{1, 2, 3}, nil, all, moveStep{moveAddLearner, 4}},
		{"wait for the learner", 1, []uint64{2, 3, 4}, []uint64{1, 2, 3}, []uint64{4}, none, moveStep{}},
		{"promote a caught-up learner", 1, []uint64{2, 3, 4}, []uint64{1, 2, 3}, []uint64{4}, all, moveStep{movePromote, 4}},
		{"the leader leaves last, by transfer", 1, []uint64{2, 3, 4}, []uint64{1, 2, 3, 4}, nil, all, moveStep{moveTransfer, 2}},
		{"a follower leaves", 2, []uint64{2, 3, 4}, []uint64{1, 2, 3, 4}, nil, all, moveStep{moveRemove, 1}},
		{"no removal before every target is a voter", 2, []uint64{2, 3, 4, 5}, []uint64{1, 2, 3, 4}, []uint64{5}, none, moveStep{}},
		{"a cancelled learner leaves at once", 1, []uint64{1, 2, 3}, []uint64{1, 2, 3}, []uint64{4}, none, moveStep{moveRemove, 4}},
		{"a cancelled promoted replica leaves", 1, []uint64{1, 2, 3}, []uint64{1, 2, 3, 4}, nil, all, moveStep{moveRemove, 4}},
		{"shrink 3 to 1", 1, []uint64{1}, []uint64{1, 2, 3}, nil, all, moveStep{moveRemove, 2}},
		{"grow 1 to 3", 1, []uint64{1, 2, 3}, []uint64{1}, nil, all, moveStep{moveAddLearner, 2}},
		{"leader alone must go: nobody in sync", 1, []uint64{2}, []uint64{1, 2}, nil, all, moveStep{moveTransfer, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inSync := func(id uint64) bool { return slices.Contains(tc.voters, id) }
			got := nextMoveStep(tc.self, tc.target, tc.voters, tc.learners, tc.caughtUp, inSync)
			if got != tc.want {
				t.Errorf("got %v %d, want %v %d", got.kind, got.id, tc.want.kind, tc.want.id)
			}
		})
	}
}

// startBrokerOnly starts node id (>= 4) as a broker-only node of tc's
// quorum; stopped at the test's end.
func (tc *testCluster) startBrokerOnly(id int, extra ...string) (*Broker, string) {
	tc.t.Helper()
	ports := freePorts(tc.t, 1)
	dir := tc.t.TempDir()
	return tc.startBrokerOnlyAt(id, dir, ports[0], extra...), dir
}

// startBrokerOnlyAt starts node id as a broker-only node with its data in
// dir and its client listener on port (a restart passes the same).
func (tc *testCluster) startBrokerOnlyAt(id int, dir string, port int, extra ...string) *Broker {
	t := tc.t
	t.Helper()
	ports := []int{port}
	var voters []string
	for j := range tc.n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", j+1, tc.ctrl[j]))
	}
	sets := append([]string{"metrics.listen=", fmt.Sprintf("node.id=%d", id), "process.roles=broker", "log.dirs=" + dir,
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", ports[0]),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"broker.heartbeat.interval.ms=200", "broker.session.timeout.ms=1500"}, extra...)
	cfg, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	var b *Broker
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A restart may find the port still held by the run before: retry
		// a little, as testCluster.start does.
		b, err = New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err == nil {
			if err = b.Start(); err != nil {
				b.Close()
			}
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		if t.Failed() {
			t.Logf("broker %d log tail:\n%s", id, logs.tail(8000))
		}
	})
	return b
}

// producedSome waits until topic's partitions hold n records in all: its
// steadyProducer runs.
func producedSome(t *testing.T, ctx context.Context, tc *testCluster, topic string, n int64) {
	t.Helper()
	adm := kadm.NewClient(tc.client())
	eventually(t, 20*time.Second, topic+": records produced", func() error {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		if sum < n {
			return fmt.Errorf("%d records, want %d", sum, n)
		}
		return nil
	})
}

// steadyProducer produces unique values to topic with an idempotent
// acks=all client until stop, which returns the acknowledged values.
func steadyProducer(t *testing.T, tc *testCluster, topic string) (stop func() []string) {
	t.Helper()
	cl := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var acked []string
	var failed error
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("v%06d", i)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					acked = append(acked, v)
				case !errors.Is(err, context.Canceled) && failed == nil:
					failed = err
				}
			})
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond) // paces the producer; not a wait for a condition
			}
		}
	}()
	return func() []string {
		cancel()
		<-done
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if failed != nil {
			t.Errorf("a produce failed under the move: %v", failed)
		}
		return slices.Clone(acked)
	}
}

// checkAllOnce reads topic and checks that every acknowledged value is
// there exactly once.
func checkAllOnce(t *testing.T, ctx context.Context, tc *testCluster, topic string, acked []string) {
	t.Helper()
	seen := readAll(t, ctx, tc, topic, len(acked))
	for _, v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged %s read %d times", v, seen[v])
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", v, n)
		}
	}
}

// waitReplicas waits until Metadata shows partition p of topic with these
// replicas (in this order), all of them in its ISR, and no reassignment
// is listed for it.
func (tc *testCluster) waitReplicas(adm *kadm.Client, topic string, p int32, want []int32, d time.Duration) {
	tc.t.Helper()
	eventually(tc.t, d, fmt.Sprintf("%s-%d on %v", topic, p, want), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m, err := tc.metadata(ctx, topic)
		if err != nil {
			return err
		}
		if len(m.Topics) != 1 || int(p) >= len(m.Topics[0].Partitions) {
			return fmt.Errorf("no partition %d", p)
		}
		mp := m.Topics[0].Partitions[p]
		isr := slices.Clone(mp.ISR)
		slices.Sort(isr)
		sorted := slices.Clone(want)
		slices.Sort(sorted)
		if !slices.Equal(mp.Replicas, want) || !slices.Equal(isr, sorted) || mp.Leader < 0 {
			return fmt.Errorf("replicas %v, isr %v, leader %d", mp.Replicas, mp.ISR, mp.Leader)
		}
		rs, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {p: {}}})
		if err != nil {
			return err
		}
		if len(rs) != 0 {
			return fmt.Errorf("still reassigning: %+v", rs)
		}
		return nil
	})
}

// noPartitionDir waits until broker b holds no replica of topic-p and its
// folder is gone from dir.
func noPartitionDir(t *testing.T, b *Broker, dir, topic string, p int32) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("%s-%d removed from broker %d", topic, p, b.cfg.NodeID), func() error {
		if _, ok := b.partition(topic, p); ok {
			return errors.New("still open")
		}
		matches, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s-%d*", topic, p)))
		if len(matches) > 0 {
			return fmt.Errorf("folders left: %v", matches)
		}
		return nil
	})
}

func reassign(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, p int32, to []int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, to)
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			t.Fatalf("reassign %s-%d to %v: %v %s", topic, p, to, r.Err, r.ErrMessage)
		}
	}
}

func createAssigned(t *testing.T, ctx context.Context, tc *testCluster, topic string, assignment ...[]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, tc.client())
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// A partition moves from {1,2,3} to {2,3,4} under a steady idempotent
// acks=all producer, shrinks to one replica, then grows back onto brokers
// that left it (replaying the group's configuration changes from the
// start): no acknowledged record lost or duplicated, the removed
// replicas' data deleted.
func TestClusterReassignment(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	b4, _ := tc.startBrokerOnly(4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "mv", []int32{1, 2, 3})
	tc.waitLeaders("mv", 3)
	stop := steadyProducer(t, tc, "mv")
	producedSome(t, ctx, tc, "mv", 20) // some records before the move

	reassign(t, ctx, adm, "mv", 0, []int32{2, 3, 4})
	// Listed while in progress (or already done): never anything else.
	rs, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"mv": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := rs["mv"][0]; ok {
		if !slices.Equal(r.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(r.AddingReplicas, []int32{4}) || !slices.Equal(r.RemovingReplicas, []int32{1}) {
			t.Errorf("listed %+v, want replicas [2 3 4 1] adding [4] removing [1]", r)
		}
	}
	tc.waitReplicas(adm, "mv", 0, []int32{2, 3, 4}, 60*time.Second)
	noPartitionDir(t, tc.broker(0), tc.dirs[0], "mv", 0)
	if _, ok := b4.partition("mv", 0); !ok {
		t.Fatal("broker 4 does not hold mv-0")
	}

	// Down to one replica, then back to three with brokers 1 and 3,
	// which left the group (1 was one of its first voters).
	reassign(t, ctx, adm, "mv", 0, []int32{4})
	tc.waitReplicas(adm, "mv", 0, []int32{4}, 60*time.Second)
	noPartitionDir(t, tc.broker(1), tc.dirs[1], "mv", 0)
	reassign(t, ctx, adm, "mv", 0, []int32{1, 3, 4})
	tc.waitReplicas(adm, "mv", 0, []int32{1, 3, 4}, 60*time.Second)

	acked := stop()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	checkAllOnce(t, ctx, tc, "mv", acked)
}

// A reassignment whose new replica cannot catch up (its broker is down)
// is listed as in progress and can be cancelled: the partition goes back
// to its replicas.
func TestClusterReassignmentCancel(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	b4, _ := tc.startBrokerOnly(4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "cx", []int32{1, 2, 3})
	tc.waitLeaders("cx", 3)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "cx", "a", 100)
	b4.noControlledShutdown = true
	b4.cl.transport.Close()
	b4.Close()

	reassign(t, ctx, adm, "cx", 0, []int32{1, 2, 4})
	rs, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"cx": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := rs["cx"][0]
	if !ok || !slices.Equal(r.Replicas, []int32{1, 2, 4, 3}) || !slices.Equal(r.AddingReplicas, []int32{4}) || !slices.Equal(r.RemovingReplicas, []int32{3}) {
		t.Fatalf("listed %+v (ok %v), want replicas [1 2 4 3] adding [4] removing [3]", r, ok)
	}
	// Every reassignment listed when no topic is named.
	// Every reassignment listed when no topic is named (null topics; kadm
	// sends no request for an empty set).
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	lresp, err := lreq.RequestWith(ctx, tc.client())
	if err != nil || len(lresp.Topics) != 1 || lresp.Topics[0].Topic != "cx" || len(lresp.Topics[0].Partitions) != 1 {
		t.Fatalf("list all: %v %+v", err, lresp)
	}
	clusterProduce(t, ctx, prod, "cx", "b", 100) // the partition keeps working meanwhile

	var req kadm.AlterPartitionAssignmentsReq
	req.CancelAssign("cx", 0)
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || resps.Error() != nil {
		t.Fatalf("cancel: %v %v", err, resps.Error())
	}
	tc.waitReplicas(adm, "cx", 0, []int32{1, 2, 3}, 30*time.Second)
	// A second cancel: nothing is in progress.
	resps, err = adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resps.Error(); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Errorf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	// Bad targets.
	for _, bad := range []struct {
		to   []int32
		want error
	}{
		{[]int32{}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 1, 2}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2, 9}, kerr.InvalidReplicaAssignment},
	} {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("cx", 0, bad.to)
		resps, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := resps.Error(); !errors.Is(err, bad.want) {
			t.Errorf("reassign to %v: %v, want %v", bad.to, err, bad.want)
		}
	}
	var unknown kadm.AlterPartitionAssignmentsReq
	unknown.Assign("cx", 7, []int32{1, 2, 3})
	unknown.Assign("nope", 0, []int32{1, 2, 3})
	resps, err = adm.AlterPartitionAssignments(ctx, unknown)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resps.Sorted() {
		if !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("%s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Topic, r.Partition, r.Err)
		}
	}
	seen := readAll(t, ctx, tc, "cx", 200)
	if len(seen) != 200 {
		t.Errorf("read %d distinct records, want 200", len(seen))
	}
}

// Preferred leader election moves leadership back to the first replica;
// an unclean one is not needed while there is a leader.
func TestClusterElectLeaders(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "auto.leader.rebalance.enable=false")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "el", []int32{1, 2, 3}, []int32{2, 3, 1})
	tc.waitLeaders("el", 3)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "el", "a", 50)
	// Broker 1 restarts: its leaderships move away and stay away.
	tc.stop(0)
	tc.waitLeaders("el", 2)
	tc.start(0)
	tc.waitLeaders("el", 3)
	ps := tc.waitLeaders("el", 3)
	if ps[0].leader == 1 {
		t.Skip("el-0 is led by broker 1 again already")
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}, 1: {}, 5: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["el"][0]; r.Err != nil {
		t.Errorf("el-0: %v %s", r.Err, r.ErrMessage)
	}
	if r := res["el"][1]; !errors.Is(r.Err, kerr.ElectionNotNeeded) && r.Err != nil {
		t.Errorf("el-1: %v, want ELECTION_NOT_NEEDED or none", r.Err)
	}
	if r := res["el"][5]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("el-5: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	eventually(t, 10*time.Second, "broker 1 leads el-0", func() error {
		ps := tc.waitLeaders("el", 3)
		if ps[0].leader != 1 {
			return fmt.Errorf("leader %d", ps[0].leader)
		}
		return nil
	})
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["el"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Errorf("el-0 again: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	res, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"el": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["el"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Errorf("unclean el-0: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	clusterProduce(t, ctx, prod, "el", "b", 50)
}

// With auto.leader.rebalance.enable, leaderships go back to the preferred
// replicas within the check interval after a broker returns.
func TestClusterAutoLeaderRebalance(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "leader.imbalance.check.interval.seconds=1")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createAssigned(t, ctx, tc, "rb", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2}, []int32{1, 3, 2})
	tc.waitLeaders("rb", 3)
	tc.stop(0)
	tc.waitLeaders("rb", 2)
	tc.start(0)
	eventually(t, 30*time.Second, "preferred leaders back", func() error {
		ps := tc.waitLeaders("rb", 3)
		for p, s := range ps {
			if s.leader != s.replicas[0] {
				return fmt.Errorf("rb-%d led by %d, preferred %d", p, s.leader, s.replicas[0])
			}
		}
		return nil
	})
}

// UnregisterBroker of a broker holding replicas decommissions it: its
// replicas move to the other brokers, then it is unregistered; its data
// is deleted.
func TestClusterDecommission(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	b4, dir4 := tc.startBrokerOnly(4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	createAssigned(t, ctx, tc, "dc", []int32{4, 1, 2}, []int32{1, 4, 3}, []int32{2, 3, 1})
	tc.waitLeaders("dc", 3)
	stop := steadyProducer(t, tc, "dc")
	producedSome(t, ctx, tc, "dc", 20)
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = 4
	resp, err := req.RequestWith(ctx, tc.client())
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("unregister: %v", err)
	}
	eventually(t, 60*time.Second, "broker 4 drained and unregistered", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m, err := tc.metadata(ctx, "dc")
		if err != nil {
			return err
		}
		for _, p := range m.Topics[0].Partitions {
			if slices.Contains(p.Replicas, 4) || len(p.Replicas) != 3 {
				return fmt.Errorf("dc-%d on %v", p.Partition, p.Replicas)
			}
		}
		for _, br := range m.Brokers {
			if br.NodeID == 4 {
				return errors.New("broker 4 still in Metadata")
			}
		}
		return nil
	})
	acked := stop()
	noPartitionDir(t, b4, dir4, "dc", 0)
	noPartitionDir(t, b4, dir4, "dc", 1)
	checkAllOnce(t, ctx, tc, "dc", acked)
	// Still running, it stays registered but fenced; stopped, it is
	// unregistered once its session expires.
	if br, ok := tc.broker(0).meta.Broker(4); !ok || !br.Fenced || !br.Decommissioning {
		t.Fatalf("broker 4 while running after its decommission: %+v (registered %v), want fenced and decommissioning", br, ok)
	}
	b4.Close()
	eventually(t, 20*time.Second, "broker 4 unregistered once stopped", func() error {
		if br, ok := tc.broker(0).meta.Broker(4); ok {
			return fmt.Errorf("still registered: %+v", br)
		}
		return nil
	})
}

// A reassignment survives restarts of the brokers it involves: the new
// replica's broker down when the move starts and started again later (its
// replica catches up from where it is), and the leader crashed in the
// middle (the next leader continues from the group's configuration).
func TestClusterReassignmentSurvivesRestarts(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	port4 := freePorts(t, 1)[0]
	dir4 := t.TempDir()
	b4 := tc.startBrokerOnlyAt(4, dir4, port4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "rs", []int32{1, 2, 3})
	tc.waitLeaders("rs", 3)
	stop := steadyProducer(t, tc, "rs")
	producedSome(t, ctx, tc, "rs", 20)

	// Broker 4 stops after it joined as a learner, before the move ends.
	reassign(t, ctx, adm, "rs", 0, []int32{2, 3, 4})
	eventually(t, 20*time.Second, "broker 4 holds rs-0", func() error {
		if _, ok := b4.partition("rs", 0); !ok {
			return errors.New("not open")
		}
		return nil
	})
	b4.noControlledShutdown = true
	b4.cl.transport.Close()
	b4.Close()
	// The leader crashes meanwhile; the move waits for broker 4.
	ps := tc.waitLeaders("rs", 2)
	lead := int(ps[0].leader)
	if lead >= 1 && lead <= 3 {
		tc.crash(lead - 1)
		tc.start(lead - 1)
	}
	if rs, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"rs": {0: {}}}); err != nil || len(rs["rs"]) != 1 {
		t.Fatalf("the move is not listed in progress while broker 4 is down: %v %+v", err, rs)
	}
	b4 = tc.startBrokerOnlyAt(4, dir4, port4)
	tc.waitReplicas(adm, "rs", 0, []int32{2, 3, 4}, 60*time.Second)
	noPartitionDir(t, tc.broker(0), tc.dirs[0], "rs", 0)
	acked := stop()
	checkAllOnce(t, ctx, tc, "rs", acked)
}

// ListPartitionReassignments is the active controller's answer wherever it
// is sent (Kafka's brokers forward it in KRaft mode), not the receiving
// broker's own copy of the metadata, which may lag: here broker 4's raft
// transport is closed, so its copy stops before the reassignment. (Seen
// in tools/clustertest: a broker resumed after a SIGSTOP, its metadata
// behind, named itself the controller in Metadata, and kgo sent it the
// ListPartitionReassignments, which it answered empty mid-move.)
func TestClusterListReassignmentsForwarded(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	b4, _ := tc.startBrokerOnly(4)
	tc.waitBrokers(4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	createAssigned(t, ctx, tc, "lr", []int32{1, 2, 3})
	tc.waitLeaders("lr", 3)
	b4.noControlledShutdown = true
	b4.cl.transport.Close()
	reassign(t, ctx, adm, "lr", 0, []int32{1, 2, 4}) // cannot finish: 4 hears nothing
	if _, _, moving := mustTopic(t, b4, "lr").Reassigning(0); moving {
		t.Fatal("broker 4's own metadata shows the reassignment: the test needs it behind")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b4.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.ListPartitionReassignmentsResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		!slices.Equal(resp.Topics[0].Partitions[0].Replicas, []int32{1, 2, 4, 3}) {
		t.Fatalf("broker 4 answered %+v, want the controller's lr-0 on [1 2 4 3]", resp)
	}
}

func mustTopic(t *testing.T, b *Broker, name string) meta.Topic {
	t.Helper()
	tp, ok := b.meta.Topic(name)
	if !ok {
		t.Fatalf("broker %d has no topic %s", b.cfg.NodeID, name)
	}
	return tp
}
