package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The guard's clock: a beat late by more than pauseGap makes the broker
// suspect for pauseHold; so does a request that finds the last beat that
// old (it may run before the beating goroutine after a resume).
func TestPauseGuard(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newPauseGuard(slog.New(slog.DiscardHandler))
	g.now = func() time.Time { return now }
	g.setLast(now)
	step := func(d time.Duration) { now = now.Add(d); g.beat() }
	for range 30 {
		step(pauseBeat)
		if g.suspect() {
			t.Fatal("suspect while beating on time")
		}
	}
	now = now.Add(pauseGap + time.Second) // a pause: no beat yet
	if !g.suspect() {
		t.Fatal("not suspect with the last beat 3 s old")
	}
	g.beat() // the resumed goroutine's first beat
	if !g.suspect() {
		t.Fatal("not suspect right after a late beat")
	}
	for d := time.Duration(0); d < pauseHold-pauseBeat; d += pauseBeat {
		step(pauseBeat)
		if !g.suspect() {
			t.Fatalf("not suspect %v after the late beat (hold %v)", d+pauseBeat, pauseHold)
		}
	}
	step(2 * pauseBeat)
	if g.suspect() {
		t.Fatal("still suspect after the hold")
	}
	var none *pauseGuard
	if none.suspect() {
		t.Fatal("a single node's nil guard is suspect")
	}
}

// A clustered broker that was paused answers no reads as coordinator or
// leader until the hold ends: OffsetFetch gets NOT_COORDINATOR (the chaos
// runner saw a resumed former coordinator answer one with a superseded
// offset), Fetch NOT_LEADER_OR_FOLLOWER (no leader known: Kafka's code
// for a replica that does not lead); then both are served again.
func TestPausedBrokerServesNoReads(t *testing.T) {
	tc := startCluster(t, 1, "default.replication.factor=1", "offsets.topic.replication.factor=1", "min.insync.replicas=1")
	cl := tc.direct(0)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	eventually(t, 20*time.Second, "topic t", func() error {
		_, err := adm.CreateTopic(ctx, 1, 1, nil, "t")
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	eventually(t, 20*time.Second, "a produce", func() error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
	})
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 1, LeaderEpoch: -1})
	eventually(t, 20*time.Second, "a commit", func() error {
		r, err := adm.CommitOffsets(ctx, "g", offs)
		if err != nil {
			return err
		}
		return r.Error()
	})

	b := tc.broker(0)
	// OffsetFetch v7 (one group, topics by name) and Fetch v12.
	old, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", tc.cports[0])), kgo.MaxVersions(kversion.V2_8_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	br := old.Broker(1)
	fetchOffset := func() (int16, int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
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
	fetchCode := func() (int16, error) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			return 0, err
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	}
	if code, off, err := fetchOffset(); err != nil || code != 0 || off != 1 {
		t.Fatalf("before the pause: OffsetFetch code %d offset %d, %v", code, off, err)
	}

	// The pause: the guard's last beat 3 s ago, as after a SIGSTOP.
	b.pause.setLast(time.Now().Add(-pauseGap - time.Second))
	if code, _, err := fetchOffset(); err != nil || code != kerr.NotCoordinator.Code {
		t.Fatalf("just after a pause: OffsetFetch code %d (%v), want NOT_COORDINATOR", code, err)
	}
	if code, err := fetchCode(); err != nil || code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("just after a pause: Fetch code %d (%v), want NOT_LEADER_OR_FOLLOWER", code, err)
	}
	resumed := time.Now()
	eventually(t, 10*time.Second, "OffsetFetch served again", func() error {
		code, off, err := fetchOffset()
		if err != nil || code != 0 || off != 1 {
			return fmt.Errorf("code %d offset %d, %v", code, off, err)
		}
		return nil
	})
	if d := time.Since(resumed); d < pauseHold-time.Second {
		t.Fatalf("served again %v after the pause; the hold is %v", d, pauseHold)
	}
	if code, err := fetchCode(); err != nil || code != 0 {
		t.Fatalf("after the hold: Fetch code %d (%v)", code, err)
	}
}
