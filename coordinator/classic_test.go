package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClassic runs the classic group scenarios of testdata/classic (rewrite
// the expected output with -rewrite). Every file starts with a fresh
// coordinator over an empty log and a manual clock; group "g" is used
// throughout. Members are named by the test; the member ids the coordinator
// hands out are printed as aliases: a member's first id is its name, later
// ones name.2, name.3, ...
//
// Commands (JoinGroup and SyncGroup run in the background: each command
// prints every request that completed because of it, in request order):
//
//	config [delay=3s] [max=N] [minsession=6s]   new coordinator
//	join NAME [id=ALIAS|none] [fresh] [v=9] [proto=range,rr] [topics=t,u]
//	          [meta=RAW] [type=consumer] [session=10s] [rebalance=30s]
//	          [instance=I]
//	sync NAME [gen=N] [id=ALIAS] [instance=I] [v=5] [ptype=P] [pname=P]
//	          [assign=(NAME:t0 t1, NAME:t2)]
//	heartbeat NAME [gen=N] [id=ALIAS] [instance=I] [v=4]
//	leave [v=5] members=(NAME, NAME/INSTANCE, /INSTANCE)
//	commit [NAME] [gen=N] [id=ALIAS] [instance=I] [v=9]
//	describe | list | records | advance DURATION | restart | fail-next-write
func TestClassic(t *testing.T) {
	datadriven.Walk(t, "testdata/classic", func(t *testing.T, path string) {
		h := newClassicHarness(t, testConfig(1, testTopics, nil))
		defer func() { h.close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type classicHarness struct {
	t     *testing.T
	cfg   Config
	clk   *manualClock
	log   *memLog
	c     *Coordinator
	names map[string][]string // member name -> ids handed out
	alias map[string]string   // member id -> alias
	gens  map[string]int32    // member name -> generation of its last join
	reqs  []*classicReq       // requests not yet printed
	seq   int
	seen  int // records already printed by "records"
}

type classicReq struct {
	seq  int
	name string
	done chan struct{}
	// learn records the member id the response hands out, and out prints
	// the response; valid once done.
	learn func()
	out   func() string
}

func newClassicHarness(t *testing.T, cfg Config) *classicHarness {
	h := &classicHarness{t: t, cfg: cfg, clk: newManualClock(), log: &memLog{}}
	h.names, h.alias, h.gens = map[string][]string{}, map[string]string{}, map[string]int32{}
	h.start()
	return h
}

func (h *classicHarness) start() {
	cfg := h.cfg
	cfg.Partitions, cfg.Topics, cfg.Clock = 1, testTopics, h.clk
	h.c = New(cfg)
	if err := h.c.Load(0, h.log); err != nil {
		h.t.Fatal(err)
	}
}

func (h *classicHarness) close() {
	h.c.Close()
	for _, r := range h.reqs {
		<-r.done
	}
}

// id resolves an alias ("none" is the empty id); anything else is taken as
// a raw member id.
func (h *classicHarness) id(a string) string {
	for id, al := range h.alias {
		if al == a {
			return id
		}
	}
	if a == "none" {
		return ""
	}
	return a
}

// latest is member name's latest id, or name itself as a raw id.
func (h *classicHarness) latest(name string) string {
	if ids := h.names[name]; len(ids) > 0 {
		return ids[len(ids)-1]
	}
	return name
}

// name prints a member id as its alias.
func (h *classicHarness) name(id string) string {
	if id == "" {
		return `""`
	}
	if a, ok := h.alias[id]; ok {
		return a
	}
	return "?" + id
}

// learn records a member id handed out to member name.
func (h *classicHarness) learn(name, id string) {
	if id == "" || h.alias[id] != "" {
		return
	}
	ids := append(h.names[name], id)
	h.names[name] = ids
	h.alias[id] = name
	if len(ids) > 1 {
		h.alias[id] = name + "." + strconv.Itoa(len(ids))
	}
}

// roundTrip checks that resp encodes and decodes at its version.
func roundTrip(t *testing.T, resp kmsg.Response) {
	back := resp.RequestKind().ResponseKind()
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Errorf("%T v%d does not decode: %v", resp, resp.GetVersion(), err)
	}
}

func errName(code int16) string {
	if code == 0 {
		return "ok"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

func (h *classicHarness) run(t *testing.T, d *datadriven.TestData) string {
	var out []string
	switch d.Cmd {
	case "config":
		h.close()
		cfg := testConfig(1, testTopics, nil)
		if a, ok := d.Arg("delay"); ok {
			cfg.InitialRebalanceDelay = h.duration(a.SingleVal(t))
		}
		if a, ok := d.Arg("max"); ok {
			n, _ := strconv.Atoi(a.SingleVal(t))
			cfg.GroupMaxSize = int32(n)
		}
		*h = *newClassicHarness(t, cfg)
	case "join":
		h.join(t, d)
	case "sync":
		h.sync(t, d)
	case "heartbeat":
		name := d.CmdArgs[0].Key
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group = h.intArg(d, "v", 4), "g"
		req.Generation, req.MemberID, req.InstanceID = h.member(d, name)
		resp := h.c.Heartbeat(context.Background(), req)
		roundTrip(t, resp)
		out = append(out, fmt.Sprintf("%s: heartbeat %s", name, errName(resp.ErrorCode)))
	case "leave":
		out = append(out, h.leave(t, d))
	case "commit":
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group = h.intArg(d, "v", 9), "g"
		name := ""
		if len(d.CmdArgs) > 0 && d.CmdArgs[0].Vals == nil {
			name = d.CmdArgs[0].Key
		}
		req.Generation, req.MemberID, req.InstanceID = h.member(d, name)
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 10
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := h.c.OffsetCommit(context.Background(), req)
		out = append(out, "commit "+errName(resp.Topics[0].Partitions[0].ErrorCode))
	case "describe":
		out = append(out, h.describe())
	case "list":
		resp := h.c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
		for _, g := range resp.Groups {
			out = append(out, fmt.Sprintf("%s %s type=%q", g.Group, g.GroupState, g.ProtocolType))
		}
	case "records":
		recs := h.log.records()
		for _, r := range recs[h.seen:] {
			if keyVersion(r.Key) == keyGroupMetadata {
				out = append(out, h.record(r))
			}
		}
		h.seen = len(recs)
	case "advance":
		h.clk.Advance(h.duration(d.CmdArgs[0].Key))
	case "restart":
		h.c.Close()
		h.start()
	case "fail-next-write":
		h.log.mu.Lock()
		h.log.failNext = true
		h.log.mu.Unlock()
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	out = append(h.settle(t), out...)
	if len(out) == 0 {
		return "ok"
	}
	return strings.Join(out, "\n")
}

func (h *classicHarness) duration(s string) time.Duration {
	dur, err := time.ParseDuration(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return dur
}

func (h *classicHarness) intArg(d *datadriven.TestData, key string, def int) int16 {
	if a, ok := d.Arg(key); ok {
		n, err := strconv.Atoi(a.SingleVal(h.t))
		if err != nil {
			h.t.Fatal(err)
		}
		return int16(n)
	}
	return int16(def)
}

func (h *classicHarness) str(d *datadriven.TestData, key, def string) string {
	if a, ok := d.Arg(key); ok {
		return a.SingleVal(h.t)
	}
	return def
}

// member returns the generation, member id and instance id a request of
// member name carries: its latest id and generation unless overridden.
func (h *classicHarness) member(d *datadriven.TestData, name string) (int32, string, *string) {
	gen, id := int32(-1), ""
	if name != "" {
		gen, id = h.gens[name], h.latest(name)
	}
	if a, ok := d.Arg("gen"); ok {
		n, _ := strconv.Atoi(a.SingleVal(h.t))
		gen = int32(n)
	}
	if a, ok := d.Arg("id"); ok {
		id = h.id(a.SingleVal(h.t))
	}
	var inst *string
	if a, ok := d.Arg("instance"); ok {
		s := a.SingleVal(h.t)
		inst = &s
	}
	return gen, id, inst
}

// async runs f in the background as a request of member name.
func (h *classicHarness) async(name string, f func() (learn func(), out func() string)) {
	h.seq++
	r := &classicReq{seq: h.seq, name: name, done: make(chan struct{})}
	h.reqs = append(h.reqs, r)
	go func() {
		defer close(r.done)
		r.learn, r.out = f()
	}()
}

// settle waits until every background request has either completed or is
// registered as waiting in the coordinator, and returns the output of the
// completed ones.
func (h *classicHarness) settle(t *testing.T) []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		running := 0
		for _, r := range h.reqs {
			select {
			case <-r.done:
			default:
				running++
			}
		}
		if running == h.c.classicWaiting() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests neither completed nor waiting", running)
		}
		time.Sleep(50 * time.Microsecond)
	}
	h.c.mu.Lock()
	var groups []*classicGroup
	for _, s := range h.c.shards {
		for _, g := range s.groups {
			if g.classic != nil {
				groups = append(groups, g.classic)
			}
		}
	}
	h.c.mu.Unlock()
	for _, g := range groups {
		g.writes.Wait()
	}
	var out []string
	var done []*classicReq
	left := h.reqs[:0]
	for _, r := range h.reqs {
		select {
		case <-r.done:
			done = append(done, r)
			r.learn()
		default:
			left = append(left, r)
		}
	}
	for _, r := range done {
		out = append(out, r.out())
	}
	h.reqs = left
	return out
}

// classicWaiting counts the JoinGroup and SyncGroup requests registered as
// waiting.
func (c *Coordinator) classicWaiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.shards {
		for _, g := range s.groups {
			if g.classic == nil {
				continue
			}
			for _, m := range g.classic.members {
				if m.join != nil {
					n++
				}
				if m.sync != nil {
					n++
				}
			}
		}
	}
	return n
}

func (h *classicHarness) join(t *testing.T, d *datadriven.TestData) {
	name := d.CmdArgs[0].Key
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group = h.intArg(d, "v", 9), "g"
	req.SessionTimeoutMillis = int32(h.duration(h.str(d, "session", "10s")).Milliseconds())
	req.RebalanceTimeoutMillis = int32(h.duration(h.str(d, "rebalance", "30s")).Milliseconds())
	req.ProtocolType = h.str(d, "type", "consumer")
	req.MemberID = h.latest(name)
	if _, ok := h.names[name]; !ok || d.HasArg("fresh") {
		req.MemberID = ""
	}
	if a, ok := d.Arg("id"); ok {
		req.MemberID = h.id(a.SingleVal(t))
	}
	if a, ok := d.Arg("instance"); ok {
		s := a.SingleVal(t)
		req.InstanceID = &s
	}
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = strings.Split(h.str(d, "topics", "t"), ",")
	meta := md.AppendTo(nil)
	if a, ok := d.Arg("meta"); ok {
		meta = []byte(a.SingleVal(t))
	}
	for _, p := range strings.Split(h.str(d, "proto", "range"), ",") {
		rp := kmsg.NewJoinGroupRequestProtocol()
		rp.Name, rp.Metadata = p, meta
		req.Protocols = append(req.Protocols, rp)
	}
	ctx := WithClient(context.Background(), name, "/127.0.0.1")
	h.async(name, func() (func(), func() string) {
		resp := h.c.JoinGroup(ctx, req)
		roundTrip(t, resp)
		return func() {
				if resp.ErrorCode == 0 || resp.ErrorCode == kerr.MemberIDRequired.Code {
					h.learn(name, resp.MemberID)
				}
				if resp.ErrorCode == 0 {
					h.gens[name] = resp.Generation
				}
			}, func() string {
				if resp.ErrorCode != 0 {
					s := fmt.Sprintf("%s: join %s", name, errName(resp.ErrorCode))
					if resp.MemberID != "" {
						s += " id=" + h.name(resp.MemberID)
					}
					return s
				}
				s := fmt.Sprintf("%s: join gen=%d id=%s leader=%s", name, resp.Generation, h.name(resp.MemberID), h.name(resp.LeaderID))
				if resp.Protocol != nil {
					s += " proto=" + *resp.Protocol
				}
				if resp.ProtocolType != nil && req.Version >= 7 {
					s += " type=" + *resp.ProtocolType
				}
				if len(resp.Members) > 0 {
					var ms []string
					for _, m := range resp.Members {
						ms = append(ms, h.name(m.MemberID)+h.metaString(m.ProtocolMetadata))
					}
					s += " members=(" + strings.Join(ms, ", ") + ")"
				}
				return s
			}
	})
}

// metaString prints consumer protocol metadata as its topics.
func (h *classicHarness) metaString(b []byte) string {
	var md kmsg.ConsumerMemberMetadata
	if len(b) == 0 {
		return ""
	}
	if md.ReadFrom(b) != nil {
		return ":" + string(b)
	}
	return ":" + strings.Join(md.Topics, ",")
}

// assignment encodes "t0 t1" (topic t, partitions 0 and 1).
func assignment(s string) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	byTopic := map[string][]int32{}
	for _, tp := range strings.Fields(s) {
		p, _ := strconv.Atoi(tp[1:])
		byTopic[tp[:1]] = append(byTopic[tp[:1]], int32(p))
	}
	for _, topic := range sortedKeys(byTopic) {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic, byTopic[topic]
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// assignmentString decodes what assignment encodes; "-" when empty.
func assignmentString(b []byte) string {
	var a kmsg.ConsumerMemberAssignment
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return "-"
	}
	var tps []string
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, fmt.Sprintf("%s%d", t.Topic, p))
		}
	}
	if len(tps) == 0 {
		return "-"
	}
	return strings.Join(tps, " ")
}

func (h *classicHarness) sync(t *testing.T, d *datadriven.TestData) {
	name := d.CmdArgs[0].Key
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group = h.intArg(d, "v", 5), "g"
	req.Generation, req.MemberID, req.InstanceID = h.member(d, name)
	if a, ok := d.Arg("ptype"); ok {
		s := a.SingleVal(t)
		req.ProtocolType = &s
	}
	if a, ok := d.Arg("pname"); ok {
		s := a.SingleVal(t)
		req.Protocol = &s
	}
	if a, ok := d.Arg("assign"); ok {
		for _, v := range a.Vals {
			who, tps, _ := strings.Cut(v, ":")
			ra := kmsg.NewSyncGroupRequestGroupAssignment()
			ra.MemberID, ra.MemberAssignment = h.id(who), assignment(tps)
			req.GroupAssignment = append(req.GroupAssignment, ra)
		}
	}
	h.async(name, func() (func(), func() string) {
		resp := h.c.SyncGroup(context.Background(), req)
		roundTrip(t, resp)
		return func() {}, func() string {
			if resp.ErrorCode != 0 {
				return fmt.Sprintf("%s: sync %s", name, errName(resp.ErrorCode))
			}
			return fmt.Sprintf("%s: sync %s", name, assignmentString(resp.MemberAssignment))
		}
	})
}

func (h *classicHarness) leave(t *testing.T, d *datadriven.TestData) string {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = h.intArg(d, "v", 5), "g"
	a, _ := d.Arg("members")
	for _, v := range a.Vals {
		name, inst, hasInst := strings.Cut(v, "/")
		lm := kmsg.NewLeaveGroupRequestMember()
		if name != "" {
			lm.MemberID = h.latest(name)
		}
		if hasInst {
			lm.InstanceID = &inst
		}
		req.Members = append(req.Members, lm)
	}
	if req.Version < 3 {
		req.MemberID = req.Members[0].MemberID
		req.Members = nil
	}
	resp := h.c.LeaveGroup(context.Background(), req)
	roundTrip(t, resp)
	s := "leave " + errName(resp.ErrorCode)
	for _, m := range resp.Members {
		who := h.name(m.MemberID)
		if m.InstanceID != nil {
			who += "/" + *m.InstanceID
		}
		s += fmt.Sprintf("\n  %s: %s", who, errName(m.ErrorCode))
	}
	return s
}

func (h *classicHarness) describe() string {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = 5, []string{"g"}
	g := h.c.DescribeGroups(context.Background(), req).Groups[0]
	s := fmt.Sprintf("%s state=%s type=%q proto=%q %s", g.Group, g.State, g.ProtocolType, g.Protocol, errName(g.ErrorCode))
	for _, m := range g.Members {
		inst := ""
		if m.InstanceID != nil {
			inst = " instance=" + *m.InstanceID
		}
		s += fmt.Sprintf("\n  %s client=%s host=%s%s meta=%q assigned=%s", h.name(m.MemberID), m.ClientID, m.ClientHost, inst,
			strings.TrimPrefix(h.metaString(m.ProtocolMetadata), ":"), assignmentString(m.MemberAssignment))
	}
	return s
}

// record prints a GroupMetadataValue record.
func (h *classicHarness) record(r Record) string {
	if r.Value == nil {
		return "group tombstone"
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		h.t.Fatal(err)
	}
	deref := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	leader := "null"
	if v.Leader != nil {
		leader = h.name(*v.Leader)
	}
	s := fmt.Sprintf("group v%d gen=%d type=%q proto=%s leader=%s", v.Version, v.Generation, v.ProtocolType, deref(v.Protocol), leader)
	var ms []string
	for _, m := range v.Members {
		ms = append(ms, fmt.Sprintf("%s%s:%s", h.name(m.MemberID), h.metaString(m.Subscription), assignmentString(m.Assignment)))
	}
	slices.Sort(ms)
	return s + " members=(" + strings.Join(ms, ", ") + ")"
}

// TestClassicConcurrent runs members that join, sync, heartbeat, leave and
// come back concurrently with a round-robin assignor, and checks that no
// generation ever gives a partition to two members.
func TestClassicConcurrent(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := New(testConfig(1, testTopics, clk))
	if err := c.Load(0, log); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const members, rounds, partitions = 5, 30, 12

	var mu sync.Mutex
	owners := map[int32]map[int32]string{} // generation -> partition -> member
	record := func(gen int32, member string, a []byte) {
		var ca kmsg.ConsumerMemberAssignment
		if err := ca.ReadFrom(a); err != nil && len(a) > 0 {
			t.Errorf("bad assignment: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if owners[gen] == nil {
			owners[gen] = map[int32]string{}
		}
		for _, at := range ca.Topics {
			for _, p := range at.Partitions {
				if o, ok := owners[gen][p]; ok && o != member {
					t.Errorf("generation %d: partition %d assigned to %s and %s", gen, p, o, member)
				}
				owners[gen][p] = member
			}
		}
	}

	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := WithClient(ctx, fmt.Sprintf("m%d", i), "/127.0.0.1")
			md := kmsg.NewConsumerMemberMetadata()
			md.Topics = []string{"t"}
			id := ""
			for round := range rounds {
				// Join (twice for KIP-394), then sync and heartbeat until a
				// rebalance or a few beats.
				var jr *kmsg.JoinGroupResponse
				for {
					req := kmsg.NewPtrJoinGroupRequest()
					req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", id, "consumer"
					req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 60000
					req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "rr", Metadata: md.AppendTo(nil)}}
					jr = c.JoinGroup(ctx, req)
					switch jr.ErrorCode {
					case kerr.MemberIDRequired.Code:
						id = jr.MemberID
						continue
					case kerr.UnknownMemberID.Code:
						id = ""
						continue
					case kerr.RebalanceInProgress.Code:
						continue
					}
					break
				}
				if jr.ErrorCode != 0 {
					t.Errorf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
					return
				}
				id = jr.MemberID
				sreq := kmsg.NewPtrSyncGroupRequest()
				sreq.Version, sreq.Group, sreq.MemberID, sreq.Generation = 5, "g", id, jr.Generation
				if jr.LeaderID == id {
					as := map[string]*kmsg.ConsumerMemberAssignment{}
					for p := int32(0); p < partitions; p++ {
						m := jr.Members[int(p)%len(jr.Members)].MemberID
						if as[m] == nil {
							a := kmsg.NewConsumerMemberAssignment()
							a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t"}}
							as[m] = &a
						}
						as[m].Topics[0].Partitions = append(as[m].Topics[0].Partitions, p)
					}
					for m, a := range as {
						sreq.GroupAssignment = append(sreq.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a.AppendTo(nil)})
					}
				}
				sr := c.SyncGroup(ctx, sreq)
				if sr.ErrorCode == 0 {
					record(jr.Generation, id, sr.MemberAssignment)
					for range 3 {
						hb := kmsg.NewPtrHeartbeatRequest()
						hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", id, jr.Generation
						if c.Heartbeat(ctx, hb).ErrorCode != 0 {
							break
						}
					}
				}
				if round%7 == i%7 || round == rounds-1 {
					lr := kmsg.NewPtrLeaveGroupRequest()
					lr.Version, lr.Group = 5, "g"
					lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id}}
					c.LeaveGroup(ctx, lr)
					id = ""
				}
			}
		}()
	}
	wg.Wait()
	if len(owners) < 5 {
		t.Fatalf("only %d generations synced", len(owners))
	}
	desc := c.DescribeGroups(ctx, &kmsg.DescribeGroupsRequest{Groups: []string{"g"}})
	if st := desc.Groups[0].State; st != "Empty" {
		t.Fatalf("group state after everyone left: %s", st)
	}
}

// TestClassicJoinContext checks that a JoinGroup whose context ends stops
// waiting: a new member is removed, and the rebalance goes on without it.
func TestClassicJoinContext(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := testCoordinator(t, log, clk)
	join := func(ctx context.Context, id string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType = 3, "g", id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		return c.JoinGroup(ctx, req)
	}
	a := join(context.Background(), "")
	if a.ErrorCode != 0 || a.Generation != 1 {
		t.Fatalf("first join: %+v", a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *kmsg.JoinGroupResponse)
	go func() { done <- join(ctx, "") }()
	deadline := time.Now().Add(5 * time.Second)
	for c.classicWaiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second join did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if b := <-done; b.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("cancelled join: %v", kerr.ErrorForCode(b.ErrorCode))
	}
	a = join(context.Background(), a.MemberID)
	if a.ErrorCode != 0 || a.Generation != 2 || len(a.Members) != 1 {
		t.Fatalf("rejoin: %+v", a)
	}
}
