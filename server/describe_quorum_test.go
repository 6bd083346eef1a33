package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeQuorumAt sends DescribeQuorum at version v for partition p of
// topic straight to the broker cl was seeded with (never routed).
func describeQuorumAt(cl *kgo.Client, v int16, topic string, p int32) (*kmsg.DescribeQuorumResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = v
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = p
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.SeedBrokers()[0].Request(ctx, pinnedRequest{req, v})
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.DescribeQuorumResponse), nil
}

// quorumPartition checks a DescribeQuorum answer's shape and returns its
// one partition.
func quorumPartition(resp *kmsg.DescribeQuorumResponse) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != metaTopic || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.DescribeQuorumResponseTopicPartition{}, fmt.Errorf("topics %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return p, err
	}
	return p, nil
}

// DescribeQuorum, asked of any broker of a 3-node cluster (a broker that
// is not the active controller forwards it), describes the metadata log's
// quorum: the controller and its term, the high watermark, the three
// voters with their log end offsets and times, and (v2) their controller
// listeners. A crashed broker's LastFetchTimestamp, its last heartbeat,
// stops moving while the others' keep up.
func TestDescribeQuorum(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctrl, _, err := tc.controller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cl := tc.direct(i)
		for v := int16(0); v <= 2; v++ {
			var p kmsg.DescribeQuorumResponseTopicPartition
			var resp *kmsg.DescribeQuorumResponse
			eventually(t, 10*time.Second, fmt.Sprintf("DescribeQuorum v%d at broker %d", v, i+1), func() error {
				resp, err = describeQuorumAt(cl, v, metaTopic, 0)
				if err != nil {
					return err
				}
				p, err = quorumPartition(resp)
				if err != nil {
					return err
				}
				// Every voter caught up once and heartbeated lately.
				now := time.Now().UnixMilli()
				for _, r := range p.CurrentVoters {
					if r.LogEndOffset < 0 || r.LogEndOffset > p.HighWatermark+1000 {
						return fmt.Errorf("voter %d: log end offset %d, high watermark %d", r.ReplicaID, r.LogEndOffset, p.HighWatermark)
					}
					if v >= 1 && (now-r.LastFetchTimestamp > 3000 || r.LastFetchTimestamp > now+1000 || r.LastCaughtUpTimestamp <= 0) {
						return fmt.Errorf("voter %d: last fetch %d, last caught up %d, now %d", r.ReplicaID, r.LastFetchTimestamp, r.LastCaughtUpTimestamp, now)
					}
				}
				return nil
			})
			if p.LeaderID != ctrl || p.LeaderEpoch < 1 || p.HighWatermark < 1 {
				t.Errorf("v%d at broker %d: leader %d (controller %d), epoch %d, high watermark %d", v, i+1, p.LeaderID, ctrl, p.LeaderEpoch, p.HighWatermark)
			}
			var ids []int32
			for _, r := range p.CurrentVoters {
				ids = append(ids, r.ReplicaID)
			}
			if fmt.Sprint(ids) != "[1 2 3]" || len(p.Observers) != 0 {
				t.Errorf("v%d: voters %v, observers %+v", v, ids, p.Observers)
			}
			if v >= 2 {
				if len(resp.Nodes) != 3 {
					t.Fatalf("v2 nodes: %+v", resp.Nodes)
				}
				for j, n := range resp.Nodes {
					if n.NodeID != int32(j+1) || len(n.Listeners) != 1 || n.Listeners[0].Name != "CONTROLLER" || int(n.Listeners[0].Port) != tc.ctrl[j] {
						t.Errorf("v2 node %d: %+v", j+1, n)
					}
				}
			}
		}
	}

	// Only __cluster_metadata-0 is described.
	resp, err := describeQuorumAt(tc.direct(0), 2, "orders", 0)
	if err != nil || resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil {
		t.Errorf("another topic: %+v, %v; want INVALID_REQUEST with a message", resp, err)
	}

	// A crashed broker's last heartbeat ages; the others' do not.
	victim := int32(1)
	if ctrl == 1 {
		victim = 2
	}
	tc.crash(int(victim - 1))
	cl := tc.direct(int(ctrl - 1))
	eventually(t, 20*time.Second, "the crashed broker's heartbeat ages", func() error {
		resp, err := describeQuorumAt(cl, 2, metaTopic, 0)
		if err != nil {
			return err
		}
		p, err := quorumPartition(resp)
		if err != nil {
			return err
		}
		now := time.Now().UnixMilli()
		for _, r := range p.CurrentVoters {
			age := now - r.LastFetchTimestamp
			switch {
			case r.ReplicaID == victim && age < 2000:
				return fmt.Errorf("broker %d (crashed): heartbeat age %d ms", r.ReplicaID, age)
			case r.ReplicaID != victim && age > 1500:
				return fmt.Errorf("broker %d: heartbeat age %d ms", r.ReplicaID, age)
			}
		}
		return nil
	})
}

// A single node is a one-voter cluster: its quorum is itself, the leader
// and only voter, with no observer.
func TestDescribeQuorumSingleNode(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, t.TempDir())
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := describeQuorumAt(cl, 2, metaTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := quorumPartition(resp)
	if err != nil || p.LeaderID != 1 || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 || len(p.Observers) != 0 {
		t.Errorf("single node: %v, %+v", err, p)
	}
	if !slices.ContainsFunc(sortedHandlers(), func(h handler) bool { return h.key == 55 && h.maxVersion == 2 }) {
		t.Error("DescribeQuorum is not registered up to v2")
	}
}
