package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicemq/sluice/meta"
)

// metaView describes a broker's metadata (topics and brokers) at its
// replicated offset; ok is false when the offset moved while reading.
func metaView(b *Broker) (string, int64, bool) {
	at := b.meta.ReplicatedOffset()
	var lines []string
	for _, t := range b.meta.Topics() {
		lines = append(lines, fmt.Sprintf("topic %s %s partitions=%d rf=%d assignments=%v configs=%v",
			t.Name, meta.FormatTopicID(t.ID), t.Partitions, t.ReplicationFactor, t.Assignments, t.Configs))
	}
	for _, br := range b.meta.Brokers() {
		lines = append(lines, fmt.Sprintf("broker %d epoch=%d fenced=%v", br.NodeID, br.Epoch, br.Fenced))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), at, b.meta.ReplicatedOffset() == at
}

// TestClusterMetadataSnapshotCatchUp: a broker stopped while many metadata
// changes happen, and the metadata log's retention on the others passes
// what it had applied, catches up by a raft snapshot carrying the
// metadata state, and ends with the same topics and brokers as the others.
func TestClusterMetadataSnapshotCatchUp(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "metadata.log.segment.bytes=1024", "metadata.max.retention.bytes=4096",
		"log.retention.check.interval.ms=50", "metrics.listen=127.0.0.1:0")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ctrl, _, err := tc.controller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := int(ctrl) % 3 // a node that is not the controller (0-based)
	vb := tc.broker(victim)
	had := vb.meta.ReplicatedOffset()
	tc.stop(victim)
	adm := kadm.NewClient(tc.client())
	defer adm.Close()
	retry := func(what string, op func() error) {
		t.Helper()
		eventually(t, 20*time.Second, what, op)
	}
	for i := range 50 {
		name := fmt.Sprintf("churn-%d", i)
		retry("create "+name, func() error {
			resp, err := adm.CreateTopic(ctx, 1, 1, nil, name)
			if err == nil {
				err = resp.Err
			}
			if errors.Is(err, kerr.TopicAlreadyExists) {
				return nil
			}
			return err
		})
		if i%5 == 4 {
			continue // some survive
		}
		retry("delete "+name, func() error {
			resps, err := adm.DeleteTopics(ctx, name)
			if err == nil {
				err = resps[name].Err
			}
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return nil
			}
			return err
		})
	}
	// The survivors' metadata logs start past what the victim had.
	eventually(t, 30*time.Second, "the metadata log's retention", func() error {
		for i := range 3 {
			if b := tc.broker(i); b != nil {
				if ls := b.cl.metaPart.LogStartOffset(); ls <= had {
					return fmt.Errorf("broker %d's metadata log starts at %d, the stopped one had applied up to %d", i+1, ls, had)
				}
			}
		}
		return nil
	})
	tc.start(victim)
	tc.waitBrokers(3)
	eventually(t, 30*time.Second, "the same metadata everywhere", func() error {
		var first string
		var firstAt int64
		for i := range 3 {
			b := tc.broker(i)
			if b == nil {
				return fmt.Errorf("broker %d down", i+1)
			}
			v, at, ok := metaView(b)
			if !ok {
				return fmt.Errorf("broker %d's metadata moved while read", i+1)
			}
			if i == 0 {
				first, firstAt = v, at
				continue
			}
			if at != firstAt || v != first {
				return fmt.Errorf("broker %d at offset %d:\n%s\nbroker 1 at %d:\n%s", i+1, at, v, firstAt, first)
			}
		}
		if n := strings.Count(first, "topic churn-"); n != 10 {
			return fmt.Errorf("%d churn topics, want 10", n)
		}
		return nil
	})
	vb = tc.broker(victim)
	if ls := vb.cl.metaPart.LogStartOffset(); ls <= had {
		t.Fatalf("the restarted broker's metadata log starts at %d: it did not catch up by a snapshot", ls)
	}
	if vb.meta.Offset() == 0 {
		t.Fatal("no local metadata offset")
	}
	if strings.Contains(tc.logs[victim].tail(1<<30), "after the next one to apply") {
		t.Fatal("the restarted broker's applier found the metadata log starting past its state")
	}
	// The snapshot transfer shows in the metrics of both ends.
	if v := mustValue(t, scrape(t, vb), "sluice_raft_snapshots_received_total"); v < 1 {
		t.Errorf("the restarted broker counts %v snapshots received", v)
	}
	sent := 0.0
	for i := range 3 {
		if i != victim {
			sent += mustValue(t, scrape(t, tc.broker(i)), "sluice_raft_snapshots_sent_total")
		}
	}
	if sent < 1 {
		t.Errorf("the other brokers count %v snapshots sent", sent)
	}
}
