package clustertest

// The harness's side of the partition-moving scenarios (moves_test.go):
// explicit assignments, reassignments and their listing, replica lists,
// preferred leaders and the partition folders on a node's disk.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsTopic is Kafka's group offsets topic; the moves scenarios move
// and check its partitions too.
const offsetsTopic = "__consumer_offsets"

// tp names one partition.
type tp struct {
	topic string
	p     int32
}

func (x tp) String() string { return fmt.Sprintf("%s-%d", x.topic, x.p) }

func cmpTP(a, b tp) int { return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.p, b.p)) }

// CreateTopicAssigned creates topic with an explicit replica assignment
// (assignment[p] is partition p's replicas, the preferred leader first)
// and configs, and waits until it is writable.
func (c *cluster) CreateTopicAssigned(topic string, assignment [][]int32, configs map[string]string) {
	c.t.Helper()
	c.poll("create topic "+topic+" with an explicit assignment", 30*time.Second, func(ctx context.Context) error {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, rs := range assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), rs
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		for k, v := range configs {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("%d topics answered", len(resp.Topics))
		}
		err = errorCode(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
		if errors.Is(kerr.ErrorForCode(resp.Topics[0].ErrorCode), kerr.TopicAlreadyExists) {
			return nil // an earlier try got through
		}
		return err // INVALID_REPLICA_ASSIGNMENT while a broker-only node registers is retried
	})
	c.WaitWritable(topic, 60*time.Second)
}

// Reassign sends one AlterPartitionReassignments: moves[k] is partition
// k's target replicas, nil cancels k's reassignment. Every partition must
// be accepted.
func (c *cluster) Reassign(moves map[tp][]int32) {
	c.t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for k, to := range moves {
		if to == nil {
			req.CancelAssign(k.topic, k.p)
		} else {
			req.Assign(k.topic, k.p, to)
		}
	}
	ctx, cancel := c.bounded(15 * time.Second)
	defer cancel()
	rs, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		c.t.Fatalf("AlterPartitionReassignments %v: %v", moves, err)
	}
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			c.t.Fatalf("AlterPartitionReassignments of %s-%d to %v: %v %s", r.Topic, r.Partition, moves[tp{r.Topic, r.Partition}], r.Err, r.ErrMessage)
		}
	}
	if len(rs.Sorted()) != len(moves) {
		c.t.Fatalf("AlterPartitionReassignments answered %d partitions of %d", len(rs.Sorted()), len(moves))
	}
}

// listing is one partition's entry in ListPartitionReassignments.
type listing struct {
	replicas, adding, removing []int32
}

func (l listing) String() string {
	return fmt.Sprintf("replicas %v adding %v removing %v", l.replicas, l.adding, l.removing)
}

func (l listing) equal(o listing) bool {
	return slices.Equal(l.replicas, o.replicas) && slices.Equal(l.adding, o.adding) && slices.Equal(l.removing, o.removing)
}

// moveListing is the listing Kafka's KIP-455 gives a move from replicas
// to target: the union, target first, then the removing replicas.
func moveListing(replicas, target []int32) listing {
	var l listing
	l.replicas = slices.Clone(target)
	for _, id := range target {
		if !slices.Contains(replicas, id) {
			l.adding = append(l.adding, id)
		}
	}
	for _, id := range replicas {
		if !slices.Contains(target, id) {
			l.replicas = append(l.replicas, id)
			l.removing = append(l.removing, id)
		}
	}
	return l
}

// revert is the replica list a cancel of the move listed as l leaves
// (Kafka's PartitionReassignmentRevert): the listed replicas without the
// adding ones, in the listed order.
func revert(l listing) []int32 {
	return slices.DeleteFunc(slices.Clone(l.replicas), func(id int32) bool { return slices.Contains(l.adding, id) })
}

// Reassignments is one ListPartitionReassignments of every partition
// (null topics), sent to the active controller (kgo routes it there).
func (c *cluster) Reassignments(ctx context.Context) (map[tp]listing, error) {
	return reassignmentsFrom(ctx, c.cl)
}

// reassignmentsFrom is Reassignments asked of r: a client (routed to the
// controller) or one kgo.Broker.
func reassignmentsFrom(ctx context.Context, r kmsg.Requestor) (map[tp]listing, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := errorCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	out := map[tp]listing{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[tp{t.Topic, p.Partition}] = listing{p.Replicas, p.AddingReplicas, p.RemovingReplicas}
		}
	}
	return out, nil
}

// reassignWatch polls ListPartitionReassignments (every 25 ms) while
// moves run and records whatever disagrees with what may be listed.
type reassignWatch struct {
	c     *cluster
	allow func(tp, listing) error // nil: this entry may be listed
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	polls   int
	errs    int
	lastErr error
	seen    map[tp]int      // polls that listed the partition
	ended   map[tp]bool     // listed once, then not
	bad     map[string]bool // each distinct disagreement
	badList []string
}

// watchReassignments starts a watch that allows exactly the listings in
// want (each partition's and nothing else).
func (c *cluster) watchReassignments(want map[tp]listing) *reassignWatch {
	return c.watchReassignmentsFunc(func(k tp, l listing) error {
		w, ok := want[k]
		switch {
		case !ok:
			return fmt.Errorf("%v listed (%v): no reassignment of it was started", k, l)
		case !l.equal(w):
			return fmt.Errorf("%v listed as %v, want %v", k, l, w)
		}
		return nil
	})
}

// watchReassignmentsFunc starts a watch whose allow decides each entry.
func (c *cluster) watchReassignmentsFunc(allow func(tp, listing) error) *reassignWatch {
	w := &reassignWatch{c: c, allow: allow, stop: make(chan struct{}), done: make(chan struct{}),
		seen: map[tp]int{}, ended: map[tp]bool{}, bad: map[string]bool{}}
	go w.run()
	return w
}

func (w *reassignWatch) run() {
	defer close(w.done)
	for {
		ctx, cancel := context.WithTimeout(w.c.ctx, 3*time.Second)
		got, err := w.c.Reassignments(ctx)
		cancel()
		w.observe(got, err)
		select {
		case <-w.stop:
			return
		case <-w.c.ctx.Done():
			return
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (w *reassignWatch) observe(got map[tp]listing, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	if err != nil {
		w.errs++
		w.lastErr = err
		return
	}
	add := func(s string) {
		if !w.bad[s] {
			w.bad[s] = true
			w.badList = append(w.badList, fmt.Sprintf("%s: %s", time.Now().Format("15:04:05.000"), s))
		}
	}
	for k, l := range got {
		if err := w.allow(k, l); err != nil {
			add(err.Error())
		}
		if w.ended[k] {
			add(fmt.Sprintf("%v listed again (%v) after it had ended", k, l))
		}
		w.seen[k]++
	}
	for k := range w.seen {
		if _, ok := got[k]; !ok {
			w.ended[k] = true
		}
	}
}

// Stop ends the watch, fails the test on any disagreement seen and when
// a partition of mustSee was never listed, and returns how many polls
// listed each partition.
func (w *reassignWatch) Stop(mustSee ...tp) map[tp]int {
	w.c.t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.c.t.Logf("ListPartitionReassignments polled %d times (%d failed, last: %v); listed: %v", w.polls, w.errs, w.lastErr, w.seen)
	if len(w.badList) > 0 {
		w.c.t.Errorf("ListPartitionReassignments was not accurate:\n\t%s", strings.Join(w.badList, "\n\t"))
	}
	for _, k := range mustSee {
		if w.seen[k] == 0 {
			w.c.t.Errorf("ListPartitionReassignments never listed %v while it moved", k)
		}
	}
	return maps.Clone(w.seen)
}

// metadataAll is one Metadata of every topic (internal ones included),
// answered by node id (any node when 0).
func (c *cluster) metadataAll(ctx context.Context, id int) (kadm.Metadata, error) {
	var r kmsg.Requestor = c.cl
	if id != 0 {
		r = c.cl.Broker(id)
	}
	return localcluster.FreshMetadata(ctx, r)
}

// waitOffsetsTopic waits until __consumer_offsets exists (the workload's
// group made the controller create it) and every partition of it has a
// leader, so that what the scenarios list of every topic includes it.
func (c *cluster) waitOffsetsTopic(d time.Duration) {
	c.t.Helper()
	start := time.Now()
	c.poll(offsetsTopic+" in an all-topics Metadata, every partition led", d, func(ctx context.Context) error {
		md, err := c.metadataAll(ctx, 0)
		if err != nil {
			return err
		}
		td, ok := md.Topics[offsetsTopic]
		if !ok {
			return errors.New("not listed (Kafka lists internal topics in an all-topics Metadata)")
		}
		if len(td.Partitions) == 0 {
			return errors.New("no partitions")
		}
		for _, pd := range td.Partitions.Sorted() {
			if pd.Leader < 0 {
				return fmt.Errorf("partition %d: no leader", pd.Partition)
			}
		}
		return nil
	})
	c.t.Logf("%s listed, every partition led, after %v", offsetsTopic, time.Since(start).Round(time.Millisecond))
}

// answering are the nodes whose Metadata a wait checks: every node
// running and not paused.
func (c *cluster) answering() []int {
	var ids []int
	for _, n := range c.nodes {
		if c.Running(n.ID) && !c.Paused(n.ID) {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// Assignments is every partition's replica list, from one Metadata.
func (c *cluster) Assignments() map[tp][]int32 {
	c.t.Helper()
	out := map[tp][]int32{}
	c.poll("metadata of every topic", 30*time.Second, func(ctx context.Context) error {
		md, err := c.metadataAll(ctx, 0)
		if err != nil {
			return err
		}
		clear(out)
		for name, td := range md.Topics {
			if td.Err != nil {
				return fmt.Errorf("topic %s: %w", name, td.Err)
			}
			for _, pd := range td.Partitions {
				out[tp{name, pd.Partition}] = slices.Clone(pd.Replicas)
			}
		}
		return nil
	})
	return out
}

// waitReplicas waits until the Metadata of every answering node shows
// each partition of want with exactly those replicas in that order, all
// in its ISR, and a leader, and ListPartitionReassignments lists none of
// them.
func (c *cluster) waitReplicas(want map[tp][]int32, d time.Duration) {
	c.t.Helper()
	c.poll(fmt.Sprintf("replica lists %v, whole ISRs, nothing listed", want), d, func(ctx context.Context) error {
		var errs []error
		for _, id := range c.answering() {
			md, err := c.metadataAll(ctx, id)
			if err != nil {
				return fmt.Errorf("node %d: %w", id, err)
			}
			for k, rs := range want {
				pd, ok := md.Topics[k.topic].Partitions[k.p]
				if !ok {
					errs = append(errs, fmt.Errorf("node %d: %v not in Metadata", id, k))
					continue
				}
				isr := slices.Sorted(slices.Values(pd.ISR))
				if !slices.Equal(pd.Replicas, rs) || !slices.Equal(isr, slices.Sorted(slices.Values(rs))) || pd.Leader < 0 {
					errs = append(errs, fmt.Errorf("node %d: %v: replicas %v, ISR %v, leader %d", id, k, pd.Replicas, pd.ISR, pd.Leader))
				}
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		listed, err := c.Reassignments(ctx)
		if err != nil {
			return err
		}
		for k := range want {
			if l, ok := listed[k]; ok {
				return fmt.Errorf("%v still listed: %v", k, l)
			}
		}
		return nil
	})
}

// waitInISR waits until the Metadata of every answering node names a
// leader of each partition of ps and node id in its ISR.
func (c *cluster) waitInISR(id int32, ps []tp, d time.Duration) {
	c.t.Helper()
	c.poll(fmt.Sprintf("node %d in the ISR of %v", id, ps), d, func(ctx context.Context) error {
		for _, asking := range c.answering() {
			md, err := c.metadataAll(ctx, asking)
			if err != nil {
				return fmt.Errorf("node %d: %w", asking, err)
			}
			for _, k := range ps {
				pd := md.Topics[k.topic].Partitions[k.p]
				if !slices.Contains(pd.ISR, id) || pd.Leader < 0 {
					return fmt.Errorf("node %d: %v: leader %d, ISR %v", asking, k, pd.Leader, pd.ISR)
				}
			}
		}
		return nil
	})
}

// led is a partition's leader and preferred replica.
type led struct{ leader, preferred int32 }

// leaders is the leader and preferred replica of every partition of
// topics as every answering node's Metadata gives them; an error when a
// node names no leader, or two nodes disagree.
func (c *cluster) leaders(ctx context.Context, topics ...string) (map[tp]led, error) {
	out := map[tp]led{}
	for _, asking := range c.answering() {
		md, err := c.metadataAll(ctx, asking)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", asking, err)
		}
		for _, name := range topics {
			td, ok := md.Topics[name]
			if !ok || td.Err != nil || len(td.Partitions) == 0 {
				return nil, fmt.Errorf("node %d: topic %s not in Metadata (%v)", asking, name, td.Err)
			}
			for _, pd := range td.Partitions.Sorted() {
				k := tp{name, pd.Partition}
				if pd.Leader < 0 || len(pd.Replicas) == 0 {
					return nil, fmt.Errorf("node %d: %v: leader %d, replicas %v", asking, k, pd.Leader, pd.Replicas)
				}
				l := led{pd.Leader, pd.Replicas[0]}
				if prev, ok := out[k]; ok && prev != l {
					return nil, fmt.Errorf("%v: node %d says leader %d, preferred %d; another node %d, %d", k, asking, l.leader, l.preferred, prev.leader, prev.preferred)
				}
				out[k] = l
			}
		}
	}
	return out, nil
}

// notPreferred lists the partitions of topics whose leader is not their
// preferred replica (the first of the list), as every answering node
// agrees.
func (c *cluster) notPreferred(ctx context.Context, topics ...string) ([]tp, map[tp]led, error) {
	ls, err := c.leaders(ctx, topics...)
	if err != nil {
		return nil, nil, err
	}
	var off []tp
	for k, l := range ls {
		if l.leader != l.preferred {
			off = append(off, k)
		}
	}
	slices.SortFunc(off, cmpTP)
	return off, ls, nil
}

// waitPreferred waits until every answering node's Metadata shows every
// partition of topics led by its preferred replica.
func (c *cluster) waitPreferred(d time.Duration, topics ...string) {
	c.t.Helper()
	c.poll(fmt.Sprintf("every partition of %v led by its preferred replica", topics), d, func(ctx context.Context) error {
		off, ls, err := c.notPreferred(ctx, topics...)
		if err != nil {
			return err
		}
		var errs []string
		for _, k := range off {
			errs = append(errs, fmt.Sprintf("%v led by %d, preferred %d", k, ls[k].leader, ls[k].preferred))
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	})
}

// preferredOf lists the partitions of topics whose preferred replica is
// node id.
func (c *cluster) preferredOf(id int32, topics ...string) []tp {
	c.t.Helper()
	var out []tp
	for k, rs := range c.Assignments() {
		if slices.Contains(topics, k.topic) && len(rs) > 0 && rs[0] == id {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, cmpTP)
	return out
}

// partitionDirs lists node id's folders of topic's partition p in its
// log dir: Kafka's "<topic>-<p>", and any "<topic>-<p>.<suffix>" (a
// folder being deleted).
func (c *cluster) partitionDirs(id int, topic string, p int32) []string {
	c.t.Helper()
	name := fmt.Sprintf("%s-%d", topic, p)
	ents, err := os.ReadDir(c.node(id).Dir)
	if err != nil {
		c.t.Fatalf("node %d's log dir: %v", id, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && (e.Name() == name || strings.HasPrefix(e.Name(), name+".")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitNoPartitionDirs waits until node id has no folder of any of ps.
func (c *cluster) waitNoPartitionDirs(id int, ps []tp, d time.Duration) {
	c.t.Helper()
	c.poll(fmt.Sprintf("node %d has no folder of %v", id, ps), d, func(context.Context) error {
		var left []string
		for _, k := range ps {
			left = append(left, c.partitionDirs(id, k.topic, k.p)...)
		}
		if len(left) > 0 {
			return fmt.Errorf("folders left: %v", left)
		}
		return nil
	})
}

// logBytes is the size of the log segments (".log" files; the indexes
// are preallocated) in node id's folder of topic's partition p.
func (c *cluster) logBytes(id int, topic string, p int32) int64 {
	var n int64
	filepath.WalkDir(filepath.Join(c.node(id).Dir, fmt.Sprintf("%s-%d", topic, p)), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".log") {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// registered lists the brokers DescribeCluster names.
func (c *cluster) registered(ctx context.Context) ([]int32, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, err
	}
	if err := errorCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// produceValues produces values to topic's partitions round-robin with
// acks=all, each acknowledged before it returns.
func (c *cluster) produceValues(topic string, partitions int32, values []string) {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := c.bounded(30 * time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i, v := range values {
		rs = append(rs, &kgo.Record{Partition: int32(i) % partitions, Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		c.t.Fatalf("produce to %s: %v", topic, err)
	}
}

// readValues reads topic from its start to its end offsets with a fresh
// consumer and counts each value.
func (c *cluster) readValues(topic string) map[string]int {
	c.t.Helper()
	starts, ends := c.StartOffsets(topic), c.EndOffsets(topic)
	offsets := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p, s := range starts {
		offsets[p], next[p] = kgo.NewOffset().At(s), s
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	c.poll("read "+topic+" to its end", 30*time.Second, func(ctx context.Context) error {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			next[r.Partition] = r.Offset + 1
		})
		for p, end := range ends {
			if next[p] < end {
				return fmt.Errorf("partition %d: read to %d of %d (fetch errors: %v)", p, next[p], end, fs.Errors())
			}
		}
		return nil
	})
	return seen
}
