package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memLog is an in-memory Log. failNext makes the next Append fail.
type memLog struct {
	mu       sync.Mutex
	batches  [][]Record
	failNext bool
	failed   [][]Record // the appends failNext refused
}

func (l *memLog) Append(ctx context.Context, recs []Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failNext {
		l.failNext = false
		l.failed = append(l.failed, append([]Record(nil), recs...))
		return errors.New("injected append failure")
	}
	l.batches = append(l.batches, append([]Record(nil), recs...))
	return nil
}

func (l *memLog) Replay(fn func(Record) error) error {
	l.mu.Lock()
	bs := append([][]Record(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range bs {
		for _, r := range b {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// records returns every record appended so far.
func (l *memLog) records() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for _, b := range l.batches {
		out = append(out, b...)
	}
	return out
}

// memTopics is a fixed Topics.
type memTopics []TopicInfo

func (t memTopics) All() []TopicInfo { return t }
func (t memTopics) ByName(n string) (TopicInfo, bool) {
	for _, i := range t {
		if i.Name == n {
			return i, true
		}
	}
	return TopicInfo{}, false
}
func (t memTopics) ByID(id [16]byte) (TopicInfo, bool) {
	for _, i := range t {
		if i.ID == id {
			return i, true
		}
	}
	return TopicInfo{}, false
}

var testTopics = memTopics{{Name: "t", ID: [16]byte{1}, Partitions: 3}, {Name: "u", ID: [16]byte{2}, Partitions: 1}}

// testCoordinator returns a coordinator with one partition (every group
// maps to it), a manual clock, and its log.
func testCoordinator(t *testing.T, log *memLog, clk *manualClock) *Coordinator {
	t.Helper()
	c := New(testConfig(1, testTopics, clk))
	if err := c.Load(0, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func commit(c *Coordinator, group string, gen int32, member string, topic string, part int32, off int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation, req.MemberID = group, gen, member
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = part, off, 7
	md := "md"
	rp.Metadata = &md
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.OffsetCommit(context.Background(), req)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func fetch(c *Coordinator, group string) map[string]int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	resp := c.OffsetFetch(context.Background(), req)
	out := map[string]int64{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			out[t.Topic+"/"+string(rune('0'+p.Partition))] = p.Offset
		}
	}
	return out
}

func TestPartitionHash(t *testing.T) {
	// Values from Java's "group".hashCode() etc.: abs(hash) % 50.
	for _, tc := range []struct {
		id   string
		want int32
	}{
		{"", 0},
		{"a", 97 % 50},
		{"group", 98629247 % 50},       // "group".hashCode() = 98629247
		{"console-consumer-1", 24},     // 35782224
		{"payments-consumer-group", 0}, // -487719800: abs
		{"😀", 49},                      // a surrogate pair: 1772899
	} {
		if got := Partition(tc.id, 50); got != tc.want {
			t.Errorf("Partition(%q) = %d, want %d", tc.id, got, tc.want)
		}
	}
}

func TestSimpleCommitFetchReplay(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := testCoordinator(t, log, clk)
	if code := commit(c, "g", -1, "", "t", 1, 42); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit(c, "g", -1, "", "nope", 0, 1); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit to unknown topic: %v", kerr.ErrorForCode(code))
	}
	if code := commit(c, "g", -1, "", "t", 3, 1); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit to partition 3 of 3: %v", kerr.ErrorForCode(code))
	}
	if code := commit(c, "other", 5, "m", "t", 0, 1); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("commit with a generation to an unknown group: %v", kerr.ErrorForCode(code))
	}
	if got := fetch(c, "g"); got["t/1"] != 42 || len(got) != 1 {
		t.Fatalf("fetch: %v", got)
	}
	log.failNext = true
	if code := commit(c, "g", -1, "", "t", 1, 50); code == 0 {
		t.Fatal("a failed write was acknowledged")
	}
	if got := fetch(c, "g"); got["t/1"] != 42 {
		t.Fatalf("a failed write was applied: %v", got)
	}

	// A new coordinator over the same log has the same offsets.
	c2 := testCoordinator(t, log, clk)
	if got := fetch(c2, "g"); got["t/1"] != 42 || len(got) != 1 {
		t.Fatalf("after replay: %v", got)
	}
	// Records decode with kmsg as Kafka's tools would.
	recs := log.records()
	var k kmsg.OffsetCommitKey
	var v kmsg.OffsetCommitValue
	if err := k.ReadFrom(recs[0].Key); err != nil || k.Group != "g" || k.Topic != "t" || k.Partition != 1 {
		t.Fatalf("key %+v %v", k, err)
	}
	if err := v.ReadFrom(recs[0].Value); err != nil || v.Offset != 42 || v.LeaderEpoch != 7 || v.Metadata != "md" {
		t.Fatalf("value %+v %v", v, err)
	}
}

// OffsetFetch v0-v7 with a null topic list returns every committed
// offset, with an empty one none (Kafka's isAllPartitions is topics ==
// null), and v8's groups form alike.
func TestOffsetFetchEmptyTopicList(t *testing.T) {
	c := testCoordinator(t, &memLog{}, newManualClock())
	if code := commit(c, "g", -1, "", "t", 1, 42); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	for _, tc := range []struct {
		version int16
		topics  []kmsg.OffsetFetchRequestTopic
		want    int
	}{{7, nil, 1}, {7, []kmsg.OffsetFetchRequestTopic{}, 0}, {2, []kmsg.OffsetFetchRequestTopic{}, 0}, {8, nil, 1}, {8, []kmsg.OffsetFetchRequestTopic{}, 0}} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.Topics = tc.version, "g", tc.topics
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		if tc.topics != nil {
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		req.Groups = append(req.Groups, rg)
		resp := c.OffsetFetch(context.Background(), req)
		got := len(resp.Topics)
		if tc.version >= 8 {
			got = len(resp.Groups[0].Topics)
		}
		if got != tc.want {
			t.Errorf("v%d, topics nil %v: %d topics, want %d", tc.version, tc.topics == nil, got, tc.want)
		}
	}
}

func TestDeleteGroupAndExpiry(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := testCoordinator(t, log, clk)
	commit(c, "g", -1, "", "t", 0, 1)
	commit(c, "h", -1, "", "u", 0, 2)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g", "missing"}
	resp := c.DeleteGroups(context.Background(), del)
	if resp.Groups[0].ErrorCode != 0 || resp.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %+v", resp.Groups)
	}
	if got := fetch(c, "g"); len(got) != 0 {
		t.Fatalf("offsets after delete: %v", got)
	}
	// h expires offsets.retention after its commit.
	clk.Advance(7*24*time.Hour - time.Minute)
	if got := fetch(c, "h"); got["u/0"] != 2 {
		t.Fatalf("expired too early: %v", got)
	}
	clk.Advance(11 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for len(fetch(c, "h")) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("offsets of h did not expire")
		}
		time.Sleep(time.Millisecond)
	}
	lg := c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 0 {
		t.Fatalf("groups left: %+v", lg.Groups)
	}
	c2 := testCoordinator(t, log, clk)
	if lg := c2.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest()); len(lg.Groups) != 0 {
		t.Fatalf("groups after replay: %+v", lg.Groups)
	}
}

func TestTopicDeletedRemovesOffsets(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := testCoordinator(t, log, clk)
	commit(c, "g", -1, "", "t", 0, 1)
	commit(c, "g", -1, "", "u", 0, 2)
	c.TopicDeleted(context.Background(), "t")
	if got := fetch(c, "g"); len(got) != 1 || got["u/0"] != 2 {
		t.Fatalf("after deleting t: %v", got)
	}
	c2 := testCoordinator(t, log, clk)
	if got := fetch(c2, "g"); len(got) != 1 || got["u/0"] != 2 {
		t.Fatalf("after replay: %v", got)
	}
}

// A record that cannot be decoded, or that belongs to another partition's
// group, is skipped at load; the partition's other groups stay served.
func TestReplaySkipsBadRecords(t *testing.T) {
	log, clk := &memLog{}, newManualClock()
	c := testCoordinator(t, log, clk)
	commit(c, "g", -1, "", "t", 0, 5)
	log.batches = append(log.batches, []Record{{Key: []byte{0, 1, 0}, Value: []byte("x")}})
	c2 := New(withRebalanceDelay(testConfig(2, testTopics, clk), 3*time.Second))
	defer c2.Close()
	// With 2 partitions "g" hashes to partition 1: load the log as
	// partition 0 too, where g's records are foreign.
	if err := c2.Load(Partition("g", 2), log); err != nil {
		t.Fatal(err)
	}
	if got := fetch(c2, "g"); got["t/0"] != 5 {
		t.Fatalf("after a bad record: %v", got)
	}
	if err := c2.Load(1-Partition("g", 2), log); err != nil {
		t.Fatal(err)
	}
}
