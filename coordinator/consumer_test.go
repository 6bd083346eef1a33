package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mutTopics is a Topics tests can change (add topics, grow partitions).
type mutTopics struct {
	mu sync.Mutex
	ts memTopics
}

func (m *mutTopics) All() []TopicInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ts)
}

func (m *mutTopics) ByName(n string) (TopicInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ts.ByName(n)
}

func (m *mutTopics) ByID(id [16]byte) (TopicInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ts.ByID(id)
}

// set makes topic name have n partitions, creating it with an ID derived
// from its name if needed.
func (m *mutTopics) set(name string, n int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.ts {
		if m.ts[i].Name == name {
			m.ts[i].Partitions = n
			return
		}
	}
	var id [16]byte
	copy(id[:], name)
	id[15] = 0xff
	m.ts = append(m.ts, TopicInfo{Name: name, ID: id, Partitions: n})
}

// cgClient is what a test consumer knows: its epoch and the partitions it
// was last told it owns.
type cgClient struct {
	epoch int32
	owned partitionSet
}

// cgHarness drives a coordinator through KIP-848 scenarios.
type cgHarness struct {
	t       testing.TB
	log     *memLog
	clk     *manualClock
	topics  *mutTopics
	cfg     Config
	c       *Coordinator
	clients map[string]*cgClient
}

func newCGHarness(t testing.TB) *cgHarness {
	h := &cgHarness{t: t, log: &memLog{}, clk: newManualClock(), topics: &mutTopics{}, clients: map[string]*cgClient{}}
	h.topics.set("t", 3)
	h.topics.set("u", 1)
	h.cfg = testConfig(1, h.topics, h.clk)
	h.cfg.Logger = slog.New(slog.DiscardHandler)
	h.start()
	t.Cleanup(func() { h.c.Close() })
	return h
}

func (h *cgHarness) start() {
	h.c = New(h.cfg)
	if err := h.c.Load(0, h.log); err != nil {
		h.t.Fatal(err)
	}
}

func (h *cgHarness) client(member string) *cgClient {
	cl := h.clients[member]
	if cl == nil {
		cl = &cgClient{owned: partitionSet{}}
		h.clients[member] = cl
	}
	return cl
}

// args returns td's arguments as key -> comma-joined value.
func args(td *datadriven.TestData) map[string]string {
	out := map[string]string{}
	for _, a := range td.CmdArgs {
		out[a.Key] = strings.Join(a.Vals, ",")
	}
	return out
}

func splitList(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// fmtAssignment prints a by topic name: "t:0,1 u:0", or "-" when empty.
func (h *cgHarness) fmtAssignment(a partitionSet) string {
	var parts []string
	for _, info := range h.c.assignmentTopics(a) {
		ps := make([]string, 0, len(a[info.ID]))
		for _, p := range a[info.ID] {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		parts = append(parts, info.Name+":"+strings.Join(ps, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// heartbeat sends a ConsumerGroupHeartbeat for member as the test client
// would, updating the client's epoch and owned partitions from the answer.
func (h *cgHarness) heartbeat(a map[string]string) string {
	member := a["member"]
	cl := h.client(member)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	if v, ok := a["version"]; ok {
		n, _ := strconv.Atoi(v)
		req.Version = int16(n)
	}
	req.Group, req.MemberID, req.MemberEpoch = "g", member, cl.epoch
	if g, ok := a["group"]; ok {
		req.Group = g
	}
	if e, ok := a["epoch"]; ok {
		n, _ := strconv.Atoi(e)
		req.MemberEpoch = int32(n)
	}
	req.RebalanceTimeoutMillis = -1
	if req.MemberEpoch == 0 {
		req.RebalanceTimeoutMillis = 30000
	}
	if v, ok := a["rebalance"]; ok {
		n, _ := strconv.Atoi(v)
		req.RebalanceTimeoutMillis = int32(n)
	}
	if v, ok := a["topics"]; ok {
		req.SubscribedTopicNames = splitList(v)
	}
	if v, ok := a["regex"]; ok {
		req.SubscribedTopicRegex = &v
	}
	if v, ok := a["assignor"]; ok {
		req.ServerAssignor = &v
	}
	if v, ok := a["instance"]; ok {
		req.InstanceID = &v
	}
	switch {
	case req.MemberEpoch == 0:
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case a["owned"] == "none":
	default:
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range sortedTopicIDs(cl.owned) {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = t, cl.owned[t]
			req.Topics = append(req.Topics, rt)
		}
	}
	if _, ok := a["malformed"]; ok {
		req.Topics, req.RebalanceTimeoutMillis = nil, -1
	}
	resp := h.c.ConsumerGroupHeartbeat(WithClient(context.Background(), "client-"+member, "/127.0.0.1"), req)
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return fmt.Sprintf("%s: %s%s", member, errName(resp.ErrorCode), msg)
	}
	cl.epoch = resp.MemberEpoch
	out := fmt.Sprintf("%s: epoch=%d", member, resp.MemberEpoch)
	if resp.MemberID == nil || *resp.MemberID != member {
		out = fmt.Sprintf("%s: generated member id of %d characters, epoch=%d", member, len(*resp.MemberID), resp.MemberEpoch)
	}
	if resp.Assignment != nil {
		cl.owned = partitionSet{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				cl.owned.add(t.TopicID, p)
			}
		}
		out += " assigned=" + h.fmtAssignment(cl.owned)
	}
	if req.MemberEpoch < 0 {
		cl.epoch, cl.owned = 0, partitionSet{}
	}
	return out
}

func (h *cgHarness) describe(group string) string {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 1
	req.Groups = []string{group}
	resp := h.c.ConsumerGroupDescribe(context.Background(), req)
	var b strings.Builder
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			fmt.Fprintf(&b, "%s: %s: %s\n", g.Group, errName(g.ErrorCode), *g.ErrorMessage)
			continue
		}
		fmt.Fprintf(&b, "%s: state=%s epoch=%d assignment-epoch=%d assignor=%s\n", g.Group, g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName)
		for _, m := range g.Members {
			sub := strings.Join(m.SubscribedTopics, ",")
			if m.SubscribedTopicRegex != nil {
				sub += " regex=" + *m.SubscribedTopicRegex
			}
			fmt.Fprintf(&b, "  %s epoch=%d client=%s@%s topics=%s assigned=%s target=%s\n", m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost, sub,
				describedAssignment(m.Assignment), describedAssignment(m.TargetAssignment))
		}
	}
	return b.String()
}

func describedAssignment(a kmsg.Assignment) string {
	var parts []string
	for _, t := range a.TopicPartitions {
		ps := make([]string, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		parts = append(parts, t.Topic+":"+strings.Join(ps, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func (h *cgHarness) list() string {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	resp := h.c.ListGroups(context.Background(), req)
	var b strings.Builder
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "%s type=%s state=%s protocol-type=%s\n", g.Group, g.GroupType, g.GroupState, g.ProtocolType)
	}
	if b.Len() == 0 {
		return "no groups\n"
	}
	return b.String()
}

func (h *cgHarness) run(t *testing.T, td *datadriven.TestData) string {
	a := args(td)
	switch td.Cmd {
	case "heartbeat":
		var out []string
		members := splitList(a["member"])
		if len(members) == 0 {
			members = []string{""}
		}
		for _, m := range members {
			a["member"] = m
			out = append(out, h.heartbeat(a))
		}
		return strings.Join(out, "\n") + "\n"
	case "leave":
		if _, ok := a["epoch"]; !ok {
			a["epoch"] = "-1"
		}
		return h.heartbeat(a) + "\n"
	case "advance":
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(d)
		return "ok\n"
	case "describe":
		g := "g"
		if v, ok := a["group"]; ok {
			g = v
		}
		return h.describe(g)
	case "describe-classic":
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = 6
		req.Groups = []string{"g"}
		dg := h.c.DescribeGroups(context.Background(), req).Groups[0]
		return fmt.Sprintf("state=%s error=%s\n", dg.State, errName(dg.ErrorCode))
	case "list":
		return h.list()
	case "commit":
		epoch, _ := strconv.Atoi(a["epoch"])
		version := 9
		if v, ok := a["version"]; ok {
			version, _ = strconv.Atoi(v)
		}
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = int16(version)
		req.Group, req.Generation, req.MemberID = "g", int32(epoch), a["member"]
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 10
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := h.c.OffsetCommit(context.Background(), req)
		return errName(resp.Topics[0].Partitions[0].ErrorCode) + "\n"
	case "fetch":
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		if m, ok := a["member"]; ok {
			rg.MemberID = &m
			epoch, _ := strconv.Atoi(a["epoch"])
			rg.MemberEpoch = int32(epoch)
		}
		req.Groups = append(req.Groups, rg)
		resp := h.c.OffsetFetch(context.Background(), req).Groups[0]
		if resp.ErrorCode != 0 {
			return errName(resp.ErrorCode) + "\n"
		}
		var parts []string
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d=%d", t.Topic, p.Partition, p.Offset))
			}
		}
		return "offsets " + strings.Join(parts, " ") + "\n"
	case "delete":
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"g"}
		return errName(h.c.DeleteGroups(context.Background(), req).Groups[0].ErrorCode) + "\n"
	case "offset-delete":
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g"
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = a["topic"]
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := h.c.OffsetDelete(context.Background(), req)
		if resp.ErrorCode != 0 {
			return errName(resp.ErrorCode) + "\n"
		}
		return errName(resp.Topics[0].Partitions[0].ErrorCode) + "\n"
	case "topic":
		n, _ := strconv.Atoi(a["partitions"])
		h.topics.set(a["name"], int32(n))
		return "ok\n"
	case "restart":
		h.c.Close()
		h.start()
		return "ok\n"
	case "classic-empty":
		// An empty classic group, as a classic group is once its members
		// left (committed offsets keep it).
		h.c.mu.Lock()
		g, _ := h.c.groupLocked("g", true)
		g.classic = &classicGroup{}
		h.c.mu.Unlock()
		return "ok\n"
	case "records":
		var b strings.Builder
		for _, r := range h.log.records() {
			b.WriteString(h.fmtRecord(t, r) + "\n")
		}
		return b.String()
	}
	t.Fatalf("unknown command %q", td.Cmd)
	return ""
}

func TestConsumerGroupScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/consumer", func(t *testing.T, path string) {
		h := newCGHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out := h.run(t, td)
			h.checkReplay(t, td.Pos)
			return out
		})
		for _, r := range h.log.records() {
			h.fmtRecord(t, r) // every record decodes and re-encodes to its bytes
		}
	})
}
