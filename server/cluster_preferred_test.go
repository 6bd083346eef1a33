package server

import (
	"context"
	"fmt"
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
// stands after raft's election timeout. Without the early campaign raft's
// timeout elects whichever replica stands first, so some of the twelve
// partitions would be led by another replica (all twelve first by chance:
// (1/3)^12). It logs how long after CreateTopics' answer every broker
// showed a leader for every partition (the leaderless window).
func TestClusterNewPartitionsLedByFirstReplica(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
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
	// led reports whether every broker shows every partition led by its
	// first replica; an error when one shows another leader.
	led := func(topic string, parts int) (bool, error) {
		vs, err := views(topic)
		if err != nil {
			return false, nil
		}
		for i, ps := range vs {
			if len(ps) != parts {
				return false, nil
			}
			for _, p := range ps {
				if p.ErrorCode != 0 && p.ErrorCode != kerr.LeaderNotAvailable.Code {
					return false, fmt.Errorf("broker %d: %s-%d: %v", i+1, topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				if p.Leader < 0 {
					return false, nil
				}
				if len(p.Replicas) != 3 || p.Leader != p.Replicas[0] {
					return false, fmt.Errorf("broker %d: %s-%d is led by %d, not its first replica (replicas %v)", i+1, topic, p.Partition, p.Leader, p.Replicas)
				}
			}
		}
		return true, nil
	}
	const topics, parts = 10, 12
	var windows []time.Duration
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
		deadline := answered.Add(30 * time.Second)
		for {
			ok, err := led(topic, parts)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not every partition led by its first replica on every broker within 30s", topic)
			}
			time.Sleep(2 * time.Millisecond)
		}
		windows = append(windows, time.Since(answered))
	}
	slices.Sort(windows)
	t.Logf("leaderless window after CreateTopics, %d topics of %d partitions: median %v, min %v, max %v",
		topics, parts, windows[len(windows)/2], windows[0], windows[len(windows)-1])
	// And the first replicas keep leading, in the term they won: well past
	// raft's election timeout (1 to 2 s), no other replica stood. The first
	// topic has been led longest; check it and the last one.
	epochs := map[string][]int32{}
	for _, topic := range []string{"pref0", fmt.Sprintf("pref%d", topics-1)} {
		vs, err := views(topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range vs[0] {
			epochs[topic] = append(epochs[topic], p.LeaderEpoch)
		}
	}
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); {
		for topic, want := range epochs {
			if ok, err := led(topic, parts); err != nil || !ok {
				t.Fatalf("%s: %v (all led by the first replica: %v)", topic, err, ok)
			}
			vs, err := views(topic)
			if err != nil {
				t.Fatal(err)
			}
			for i, ps := range vs {
				for _, p := range ps {
					if p.LeaderEpoch != want[p.Partition] {
						t.Fatalf("broker %d: %s-%d leader epoch %d, was %d: the leadership changed", i+1, topic, p.Partition, p.LeaderEpoch, want[p.Partition])
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
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
