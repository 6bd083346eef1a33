package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterWipedBrokerRestarts: a broker whose data dir was wiped
// (an operator's rm -rf, a replaced disk) and started again under the
// same node id does not crash: its groups' leaders send it heartbeats
// whose commit index is past its empty logs, on which etcd raft panics
// (replica's clampHeartbeatCommit). The cluster keeps serving every
// record acknowledged before, and the wiped broker registers again.
func TestClusterWipedBrokerRestarts(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	defer adm.Close()
	eventually(t, 30*time.Second, "create wiped", func() error {
		resp, err := adm.CreateTopic(ctx, 3, 3, nil, "wiped")
		if err == nil {
			err = resp.Err
		}
		return err
	})
	cl := tc.client(kgo.DefaultProduceTopic("wiped"))
	defer cl.Close()
	for i := range 30 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("v%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctrl, _, err := tc.controller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := int(ctrl) % 3 // not the controller (0-based)
	tc.stop(victim)
	ents, err := os.ReadDir(tc.dirs[victim])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(tc.dirs[victim], e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	tc.start(victim)
	tc.waitBrokers(3)
	for i := range 10 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("w%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The wiped broker's replicas catch up: each holds its leader's
	// high watermark (a leader that was not told could count an empty
	// replica in its ISR).
	eventually(t, time.Minute, "the wiped broker's replicas to catch up", func() error {
		for p := range int32(3) {
			var hw [3]int64
			for i := range 3 {
				b := tc.broker(i)
				part, ok := b.partition("wiped", p)
				if !ok {
					return fmt.Errorf("broker %d holds no partition %d", i+1, p)
				}
				hw[i] = part.HighWatermark()
			}
			if hw[victim] != max(hw[0], hw[1], hw[2]) {
				return fmt.Errorf("partition %d: high watermarks %v (broker %d wiped)", p, hw, victim+1)
			}
		}
		return nil
	})
	cons := tc.client(kgo.ConsumeTopics("wiped"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < 40 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 40 records: %v", len(seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}
