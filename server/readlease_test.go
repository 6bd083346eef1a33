package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// A replicated leader whose read lease ran out by the clock (a pause:
// its monotonic clock jumped) and that cannot renew it (its raft
// messages do not leave) answers Fetch NOT_LEADER_OR_FOLLOWER and, as the
// coordinator, OffsetFetch NOT_COORDINATOR; once its messages flow again
// it renews and serves both. (The chaos runner saw a resumed former
// coordinator answer an OffsetFetch with a superseded offset.)
func TestLeaseExpiredBrokerServesNoReads(t *testing.T) {
	tc := startCluster(t, 3, "default.replication.factor=3", "offsets.topic.replication.factor=3", "offsets.topic.num.partitions=1", "min.insync.replicas=2")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	eventually(t, 20*time.Second, "topic t", func() error {
		_, err := adm.CreateTopic(ctx, 1, 3, nil, "t")
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	tc.waitLeaders("t", 3)
	prod := tc.client(kgo.DefaultProduceTopic("t"))
	eventually(t, 20*time.Second, "a produce", func() error {
		return prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	})
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 1, LeaderEpoch: -1})
	eventually(t, 30*time.Second, "a commit", func() error {
		r, err := adm.CommitOffsets(ctx, "g", offs)
		if err != nil {
			return err
		}
		return r.Error()
	})
	tc.waitLeaders(offsetsTopic, 3)

	// The brokers leading t-0 and __consumer_offsets-0.
	leaderOf := func(topic string) int {
		for i := range 3 {
			if p, ok := tc.broker(i).partition(topic, 0); ok && p.IsLeader() {
				return i
			}
		}
		t.Fatalf("no leader of %s-0", topic)
		return -1
	}
	fi, ci := leaderOf("t"), leaderOf(offsetsTopic)

	client := func(i int) *kgo.Client {
		// OffsetFetch v7 (one group, topics by name) and Fetch v12.
		cl, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", tc.cports[i])), kgo.MaxVersions(kversion.V2_8_0()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	fbr, cbr := client(fi).Broker(fi+1), client(ci).Broker(ci+1)
	fetchOffset := func() (int16, int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cbr)
		if err != nil {
			return 0, 0, err
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode, -1, nil
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, 0, fmt.Errorf("answer %+v", resp)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.Offset, nil
	}
	fetch := func() (int16, int64, error) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, fbr)
		if err != nil {
			return 0, 0, err
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.HighWatermark, nil
	}
	if code, off, err := fetchOffset(); err != nil || code != 0 || off != 1 {
		t.Fatalf("before: OffsetFetch code %d offset %d, %v", code, off, err)
	}
	if code, hw, err := fetch(); err != nil || code != 0 || hw != 1 {
		t.Fatalf("before: Fetch code %d high watermark %d, %v", code, hw, err)
	}

	// The pause: the leaders' clocks jump 3 s, and their raft messages
	// go nowhere (shorter than the peers' liveness timeout, so nobody
	// else is elected meanwhile).
	paused := map[int]bool{fi: true, ci: true}
	restore := map[int]map[int32]string{}
	for i := range paused {
		b := tc.broker(i)
		b.leaseWait = 100 * time.Millisecond
		b.cl.peersMu.Lock()
		restore[i] = map[int32]string{}
		for id, addr := range b.cl.peers {
			restore[i][id] = addr
		}
		b.cl.peersMu.Unlock()
		for id := range restore[i] {
			b.cl.transport.SetPeer(uint64(id), "127.0.0.1:1")
		}
		b.raftSkew.Store(int64(3 * time.Second))
	}
	codeF, _, errF := fetch()
	codeC, _, errC := fetchOffset()
	for i := range paused {
		for id, addr := range restore[i] {
			tc.broker(i).cl.transport.SetPeer(uint64(id), addr)
		}
	}
	if errF != nil || codeF != kerr.NotLeaderForPartition.Code {
		t.Errorf("paused: Fetch code %d (%v), want NOT_LEADER_OR_FOLLOWER", codeF, errF)
	}
	if errC != nil || codeC != kerr.NotCoordinator.Code {
		t.Errorf("paused: OffsetFetch code %d (%v), want NOT_COORDINATOR", codeC, errC)
	}

	eventually(t, 10*time.Second, "OffsetFetch served again", func() error {
		if code, off, err := fetchOffset(); err != nil || code != 0 || off != 1 {
			return fmt.Errorf("code %d offset %d, %v", code, off, err)
		}
		return nil
	})
	eventually(t, 10*time.Second, "Fetch served again", func() error {
		if code, hw, err := fetch(); err != nil || code != 0 || hw != 1 {
			return fmt.Errorf("code %d high watermark %d, %v", code, hw, err)
		}
		return nil
	})
}
