package clustertest

// The workload and the checker against one standalone node. The
// harness's own process tests are tools/localcluster's.

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The workload and the checker end to end against one standalone node
// (replication factor 1) killed with SIGKILL and restarted: every
// acknowledged record is found, the group's commits move on, kcat reads
// them all.
func TestHarnessWorkloadSingleNode(t *testing.T) {
	t.Parallel() // as the scenarios (needCluster)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newCluster(t, ctx, clusterOpts{standalone: true, nodes: 1, sets: []string{"log.flush.interval.messages=1"}})
	const topic = "harness"
	c.CreateTopic(topic, 3, 1, nil)
	if l := c.Leader(topic, 0); l != 1 {
		t.Fatalf("leader %d", l)
	}
	w := startWorkload(t, c, workloadOpts{topic: topic, partitions: 3})
	w.WaitAcks(300, 30*time.Second)
	c.Kill(1)
	killed := time.Now()
	c.Start(1)
	c.WaitWritable(topic, 30*time.Second)
	healed := time.Now()
	w.WaitAcks(300, 30*time.Second)
	if first := w.FirstAckAfter(0, killed); first.IsZero() {
		t.Fatal("no ack of partition 0 after the restart")
	} else {
		fmt.Printf("FAILOVER harness-single-node-restart ms=%d\n", first.Sub(killed).Milliseconds())
	}
	res := w.Finish(healed)
	if res.SendsOK < 600 || res.RecordsSeen == 0 {
		t.Fatalf("%+v", res)
	}
}
