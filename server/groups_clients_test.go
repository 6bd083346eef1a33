package server

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupSets are the broker settings group tests use: no initial rebalance
// delay, few __consumer_offsets partitions, short session timeouts allowed.
var groupSets = []string{
	"group.initial.rebalance.delay.ms=0",
	"offsets.topic.num.partitions=5",
	"group.min.session.timeout.ms=1000",
	"group.consumer.heartbeat.interval.ms=200",
}

// produceKeyed writes n records to topic, round robin over its partitions,
// and returns each record's "partition/offset" key.
func produceKeyed(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := from; i < from+n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// ownership checks the group invariant from the members' side: a
// partition is never assigned to a member while another member still owns
// it (eager balancers revoke everything before a rebalance, cooperative
// ones revoke what moves first, KIP-848 members get a partition only once
// its owner released it).
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
	commitErrs []string
	assigns    int
	assigned   map[string]bool // members that were given partitions
}

func newOwnership() *ownership {
	return &ownership{owner: map[int32]string{}, assigned: map[string]bool{}}
}

// waitAssigned waits until member has been given partitions, so the churn
// a test drives really moves partitions between members.
func (o *ownership) waitAssigned(t *testing.T, ctx context.Context, member string) {
	t.Helper()
	for {
		o.mu.Lock()
		ok := o.assigned[member]
		o.mu.Unlock()
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("member %s was never assigned partitions", member)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (o *ownership) opts(member string) []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.assigns++
			for _, ps := range m {
				if len(ps) > 0 {
					o.assigned[member] = true
				}
				for _, p := range ps {
					if cur, ok := o.owner[p]; ok && cur != member {
						o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, member, cur))
					}
					o.owner[p] = member
				}
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			// What a user's revoke callback does (kgo's default, replaced
			// by this one): commit what was processed, then let go.
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				o.mu.Lock()
				o.commitErrs = append(o.commitErrs, err.Error())
				o.mu.Unlock()
			}
			o.release(member, m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.release(member, m) }),
	}
}

func (o *ownership) release(member string, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ps := range m {
		for _, p := range ps {
			if o.owner[p] == member {
				delete(o.owner, p)
			}
		}
	}
}

// seen records which records (by value) group members processed.
type seen struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// runMember polls as one group member until ctx ends, recording values.
func runMember(ctx context.Context, cl *kgo.Client, s *seen) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			s.mu.Lock()
			s.m[string(r.Value)] = true
			s.mu.Unlock()
		})
	}
}

// TestGroupBalancers: three members of one group with each balancer
// franz-go offers (classic: range, round-robin, cooperative-sticky; KIP-848:
// the broker's range and uniform assignors) share a 6-partition topic
// while members join and leave under a producer: every record is
// processed, no partition is ever owned by two members at once, and the
// group's committed offsets reach the end of every partition.
func TestGroupBalancers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"roundrobin", []kgo.Opt{kgo.Balancers(kgo.RoundRobinBalancer())}},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848-range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}},
		{"kip848-uniform", []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a broker each
			testGroupChurn(t, tc.opts)
		})
	}
}

func testGroupChurn(t *testing.T, balancer []kgo.Opt) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, addr := startBroker(t, "", groupSets...)
	topic, group := "churn", "churn-group"
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	own := newOwnership()
	s := &seen{m: map[string]bool{}}
	member := func(name string) (*kgo.Client, context.CancelFunc, chan struct{}) {
		opts := append([]kgo.Opt{
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
			kgo.ClientID(name),
		}, balancer...)
		opts = append(opts, own.opts(name)...)
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr))...)
		if err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); runMember(mctx, cl, s) }()
		return cl, mcancel, done
	}
	stop := func(cl *kgo.Client, cancel context.CancelFunc, done chan struct{}) {
		cancel()
		<-done
		cl.Close() // commits what it consumed and leaves the group
	}

	total := 0
	step := func(n int) {
		produceKeyed(t, ctx, prod, topic, total, n)
		total += n
	}
	a, ca, da := member("a")
	step(200)
	own.waitAssigned(t, ctx, "a")
	b, cb, db := member("b")
	step(200)
	own.waitAssigned(t, ctx, "b")
	c, cc, dc := member("c")
	step(200)
	own.waitAssigned(t, ctx, "c")
	stop(b, cb, db) // a member leaves mid-stream
	step(200)
	d, cd, dd := member("d")
	step(200)
	own.waitAssigned(t, ctx, "d")
	for s.count() < total {
		if ctx.Err() != nil {
			t.Fatalf("processed %d of %d records", s.count(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The members leave one by one, each once the group settled after
	// the last one left: every partition owned by a running member that
	// consumed it to its end. Leaving earlier fails the closing commit
	// when the member's new epoch has not reached it yet
	// (STALE_MEMBER_EPOCH: Kafka's ConsumerGroup.validateOffsetCommit
	// wants the current epoch), or leaves the group's offsets behind when
	// the next owner had not consumed what it inherited.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]*kgo.Client{"a": a, "c": c, "d": d}
	settled := func() {
		t.Helper()
		for {
			lagging := ""
			own.mu.Lock()
			owners := maps.Clone(own.owner)
			own.mu.Unlock()
			ends.Each(func(e kadm.ListedOffset) {
				cl := running[owners[e.Partition]]
				if cl == nil {
					lagging += fmt.Sprintf(" p%d has no running owner;", e.Partition)
					return
				}
				pos := int64(0)
				if o, ok := cl.CommittedOffsets()[topic][e.Partition]; ok {
					pos = o.Offset
				}
				if o, ok := cl.UncommittedOffsets()[topic][e.Partition]; ok {
					pos = max(pos, o.Offset)
				}
				if pos != e.Offset {
					lagging += fmt.Sprintf(" p%d at %d of %d;", e.Partition, pos, e.Offset)
				}
			})
			if lagging == "" {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the group never settled:%s", lagging)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, m := range []struct {
		name   string
		cl     *kgo.Client
		cancel context.CancelFunc
		done   chan struct{}
	}{{"a", a, ca, da}, {"c", c, cc, dc}, {"d", d, cd, dd}} {
		settled()
		stop(m.cl, m.cancel, m.done)
		delete(running, m.name)
	}
	own.mu.Lock()
	if len(own.violations) > 0 {
		t.Errorf("ownership violations: %v", own.violations)
	}
	if len(own.commitErrs) > 0 {
		t.Logf("commits on revoke that failed (retried by later owners): %v", own.commitErrs)
	}
	if own.assigns < 3 {
		t.Errorf("only %d assignments seen", own.assigns)
	}
	own.mu.Unlock()

	// Every member committed on leaving: the group's offsets are the end of
	// each partition (ends: nothing was produced since), and the group is
	// empty.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		behind := ""
		ends.Each(func(e kadm.ListedOffset) {
			if o, _ := got.Lookup(e.Topic, e.Partition); o.At != e.Offset {
				behind += fmt.Sprintf(" p%d committed %d end %d;", e.Partition, o.At, e.Offset)
			}
		})
		if behind == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets behind the end:%s", behind)
		}
		time.Sleep(50 * time.Millisecond)
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := lg[group]; !ok || g.State != "Empty" {
		t.Fatalf("group after every member left: %+v (present %v)", g, ok)
	}
}

// TestGroupResumeAfterKill: a member commits, the broker is killed with
// SIGKILL and restarted, and the committed offsets and the group are back;
// a new member resumes at the commit.
func TestGroupResumeAfterKill(t *testing.T) {
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir, port := t.TempDir(), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := startProcess(t, bin, dir, port, groupSets...)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	topic, group := "resume", "resume-group"
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceKeyed(t, ctx, prod, topic, 0, 100)

	cl := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < 60 {
		fs := cl.PollRecords(ctx, 60-len(got))
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		got = append(got, fs.Records()...)
	}
	if err := cl.CommitRecords(ctx, got[len(got)-1]); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill() // no LeaveGroup, no clean shutdown
	cmd.Wait()
	cl.Close()

	cmd = startProcess(t, bin, dir, port, groupSets...)
	adm2 := kadm.NewClient(newClient(t, addr))
	deadline := time.Now().Add(20 * time.Second)
	for {
		offs, err := adm2.FetchOffsets(ctx, group)
		if err == nil && offs.Error() == nil {
			if o, ok := offs.Lookup(topic, 0); !ok || o.At != 60 {
				t.Fatalf("committed offset after kill -9: %+v (found %v), want 60", o, ok)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch offsets after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dg, err := adm2.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if g := dg[group]; g.Err != nil || g.ProtocolType != "consumer" {
		t.Fatalf("group after restart: %+v", g)
	}
	cl2 := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cl2.PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if rs := fs.Records(); len(rs) == 0 || rs[0].Offset != 60 {
		t.Fatalf("new member started at %v, want offset 60", rs)
	}
}

// TestGroupProtocolSwitch: a group moves between the KIP-848 protocol and
// the classic one once its members are gone (as Kafka's default migration
// policy allows), and each new member resumes at the last commit.
func TestGroupProtocolSwitch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, addr := startBroker(t, "", groupSets...)
	topic, group := "switch", "switch-group"
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceKeyed(t, ctx, newClient(t, addr, kgo.DefaultProduceTopic(topic)), topic, 0, 90)
	next := int64(0)
	for i, proto := range [][]kgo.Opt{
		{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())},
		{kgo.Balancers(kgo.CooperativeStickyBalancer())},
		{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())},
	} {
		cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, proto...)...)
		var got []*kgo.Record
		for len(got) < 30 {
			fs := cl.PollRecords(ctx, 30-len(got))
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("member %d: %v", i, errs)
			}
			got = append(got, fs.Records()...)
		}
		if got[0].Offset != next {
			t.Fatalf("member %d started at offset %d, want %d", i, got[0].Offset, next)
		}
		if err := cl.CommitRecords(ctx, got[len(got)-1]); err != nil {
			t.Fatalf("member %d commit: %v", i, err)
		}
		next = got[len(got)-1].Offset + 1
		cl.Close()
	}
}

// TestGroupStaticMembership (KIP-345): a static member (group.instance.id)
// that restarts within its session timeout takes its place back without a
// rebalance: the other member's generation does not move and the restarted
// member owns the same partitions.
func TestGroupStaticMembership(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, addr := startBroker(t, "", groupSets...)
	topic, group := "static", "static-group"
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	type member struct {
		cl    *kgo.Client
		mu    sync.Mutex
		parts []int32
	}
	start := func(id string) *member {
		m := &member{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.InstanceID(id), kgo.SessionTimeout(20*time.Second), kgo.Balancers(kgo.RangeBalancer()),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				m.parts = append([]int32(nil), a[topic]...)
				m.mu.Unlock()
			}))
		if err != nil {
			t.Fatal(err)
		}
		m.cl = cl
		go func() {
			for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
			}
		}()
		return m
	}
	assigned := func(m *member) []int32 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.parts
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a := start("instance-a")
	b := start("instance-b")
	defer b.cl.Close()
	waitFor("both members assigned", func() bool { return len(assigned(a))+len(assigned(b)) == 4 && len(assigned(a)) == 2 })
	_, genBefore := b.cl.GroupMetadata()
	partsA := assigned(a)

	a.cl.Close() // a static member does not send LeaveGroup on close
	a2 := start("instance-a")
	defer a2.cl.Close()
	waitFor("the restarted member's assignment", func() bool { return len(assigned(a2)) == 2 })
	if got := assigned(a2); fmt.Sprint(got) != fmt.Sprint(partsA) {
		t.Errorf("restarted static member owns %v, before %v", got, partsA)
	}
	// A rebalance would have put the restarted member in a new generation.
	if _, gen := a2.cl.GroupMetadata(); gen != genBefore {
		t.Errorf("the restarted member is in generation %d, the group was in %d: its rejoin caused a rebalance", gen, genBefore)
	}
	if _, gen := b.cl.GroupMetadata(); gen != genBefore {
		t.Errorf("generation moved from %d to %d: the static rejoin caused a rebalance", genBefore, gen)
	}
}
