package server

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A new topic's partitions start led by their first replica (Kafka's
// controller makes the first live replica of the assignment the leader at
// creation; here that replica campaigns at once, firstLeader), seen
// through every broker's Metadata, and keep that leader: nobody else
// stands after raft's election timeout. The feature cannot promise every
// partition on a loaded machine (a first replica that opens more than an
// election timeout after the others loses to raft's timeout), so at least
// minFirstLed of the 120 partitions must be led by their first replica;
// without the early campaign raft's timeout elects whichever replica
// stands first, about a third of them. It logs how long after
// CreateTopics' answer every broker showed a leader for every partition
// (the leaderless window).
func TestClusterNewPartitionsLedByFirstReplica(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := deadlineContext(t)
	defer cancel()
	clients := []interface {
		Request(context.Context, kmsg.Request) (kmsg.Response, error)
	}{}
	for i := range 3 {
		clients = append(clients, tc.direct(i).Broker(i+1))
	}
	// views returns each broker's view of topic's partitions.
	views := func(topic string) ([][]kmsg.MetadataResponseTopicPartition, error) {
		var out [][]kmsg.MetadataResponseTopicPartition
		for i, cl := range clients {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := cl.Request(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("broker %d: %w", i+1, err)
			}
			mt := resp.(*kmsg.MetadataResponse).Topics
			if len(mt) != 1 || mt[0].ErrorCode != 0 {
				return nil, fmt.Errorf("broker %d: topic %s not known yet", i+1, topic)
			}
			out = append(out, mt[0].Partitions)
		}
		return out, nil
	}
	// leaders returns each partition's leader and leader epoch once every
	// broker shows the same leader for every partition (nil until then),
	// and how many of them are their first replica.
	type leader struct{ id, epoch int32 }
	leaders := func(topic string, parts int) ([]leader, int, error) {
		vs, err := views(topic)
		if err != nil {
			return nil, 0, nil
		}
		out := make([]leader, parts)
		first := 0
		for i, ps := range vs {
			if len(ps) != parts {
				return nil, 0, nil
			}
			for _, p := range ps {
				if p.ErrorCode != 0 && p.ErrorCode != kerr.LeaderNotAvailable.Code {
					return nil, 0, fmt.Errorf("broker %d: %s-%d: %v", i+1, topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				if len(p.Replicas) != 3 {
					return nil, 0, fmt.Errorf("broker %d: %s-%d has replicas %v, want 3", i+1, topic, p.Partition, p.Replicas)
				}
				l := leader{p.Leader, p.LeaderEpoch}
				if l.id < 0 || (i > 0 && out[p.Partition] != l) {
					return nil, 0, nil
				}
				out[p.Partition] = l
				if i == 0 && l.id == p.Replicas[0] {
					first++
				}
			}
		}
		return out, first, nil
	}
	const topics, parts = 10, 12
	const minFirstLed = topics * parts * 9 / 10
	var windows []time.Duration
	firstLed := 0
	epochs := map[string][]leader{}
	for n := range topics {
		topic := fmt.Sprintf("pref%d", n)
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, 3
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 30000
		resp, err := clients[n%3].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
		}
		answered := time.Now()
		for {
			ls, first, err := leaders(topic, parts)
			if err != nil {
				t.Fatal(err)
			}
			if ls != nil {
				firstLed += first
				epochs[topic] = ls
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: not every partition led, the same leader on every broker, before the test's deadline", topic)
			}
			time.Sleep(2 * time.Millisecond)
		}
		windows = append(windows, time.Since(answered))
	}
	slices.Sort(windows)
	t.Logf("leaderless window after CreateTopics, %d topics of %d partitions: median %v, min %v, max %v; %d led by their first replica",
		topics, parts, windows[len(windows)/2], windows[0], windows[len(windows)-1], firstLed)
	if firstLed < minFirstLed {
		t.Errorf("%d of %d new partitions led by their first replica, want at least %d", firstLed, topics*parts, minFirstLed)
	}
	// And the leaders keep leading, in the term they won: well past raft's
	// election timeout (1 to 2 s), almost no other replica stood. The first
	// topic has been led longest; check it and the last one. A change is a
	// partition whose leader epoch moved on some broker's view.
	const maxChanges = 2
	changed := map[string]bool{}
	watched := []string{"pref0", fmt.Sprintf("pref%d", topics-1)}
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until) && ctx.Err() == nil; {
		for _, topic := range watched {
			vs, err := views(topic)
			if err != nil {
				t.Fatal(err)
			}
			for i, ps := range vs {
				for _, p := range ps {
					if p.ErrorCode != 0 && p.ErrorCode != kerr.LeaderNotAvailable.Code {
						t.Fatalf("broker %d: %s-%d: %v", i+1, topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
					if p.LeaderEpoch != epochs[topic][p.Partition].epoch {
						changed[fmt.Sprintf("%s-%d", topic, p.Partition)] = true
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(changed) > maxChanges {
		t.Errorf("the leadership of %d of %d partitions changed after their first election, want at most %d: %v",
			len(changed), len(watched)*parts, maxChanges, slices.Sorted(maps.Keys(changed)))
	}
}

// firstLeader is the first replica of the assignment whose broker is
// registered and unfenced, and no one once the partition had a leader.
// (CreateTopics places replicas on unfenced brokers only, so in a cluster
// the fenced case is a broker fenced between the creation and the opens.)
func TestFirstLeader(t *testing.T) {
	s, err := meta.Open(filepath.Join(t.TempDir(), "meta"), meta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		e, err := s.RegisterBroker(meta.BrokerRegistered{NodeID: id, IncarnationID: [16]byte{byte(id)},
			Listeners: []meta.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: 9091 + id}}})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = e
		if err := s.FenceBroker(id, e, false); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{b: &Broker{meta: s}, self: 2}
	noLeader := meta.PartitionLeader{Leader: -1, LeaderEpoch: -1}
	topic := meta.Topic{Partitions: 4, Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {4, 3, 2}},
		Leaders: []meta.PartitionLeader{noLeader, noLeader, {Leader: 3, LeaderEpoch: 0}, noLeader}}
	check := func(when string, want ...int32) {
		t.Helper()
		for p, w := range want {
			if got := c.firstLeader(topic, int32(p)); got != w {
				t.Errorf("%s: partition %d (replicas %v, leader epoch %d): %d, want %d", when, p, topic.Assignments[p], topic.Leaders[p].LeaderEpoch, got, w)
			}
		}
	}
	// Partition 2 had a leader; broker 4 is not registered.
	check("all unfenced", 1, 2, -1, 3)
	if err := s.FenceBroker(1, epochs[1], true); err != nil {
		t.Fatal(err)
	}
	check("broker 1 fenced", 2, 2, -1, 3)
	for _, id := range []int32{2, 3} {
		if err := s.FenceBroker(id, epochs[id], true); err != nil {
			t.Fatal(err)
		}
	}
	check("all fenced", -1, -1, -1, -1)
}
