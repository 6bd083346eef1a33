package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// writeSingleNodeDir writes a data dir as a single node did before it ran
// as a one-voter cluster: the metadata in meta's local mode (a topic
// without replica assignments, a config override) and plain partition
// logs (segment logs without raft state, as replica's retired
// single-replica path wrote them), n records in each of the topic's 2
// partitions.
func writeSingleNodeDir(t *testing.T, dir, topic string, n int) {
	t.Helper()
	st, err := meta.Open(filepath.Join(dir, metaDirName), meta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := st.CreateTopic(topic, 2, 1, map[string]string{"retention.ms": "86400000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		pdir := filepath.Join(dir, partitionDirName(topic, p))
		l, err := segment.Open(vfs.Default, pdir, replica.DefaultTopicConfig().Log, segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			b := batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(fmt.Sprintf("old-%d-%d", p, i))}})
			if _, err := l.AppendWith(b, segment.AppendOptions{SetLeaderEpoch: true}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := writePartitionMetadata(vfs.Default, pdir, tp.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// A single node's data dir written before it ran as a one-voter cluster
// is adopted: its topics and records are served, it takes new records at
// the next offsets, and a second restart (now with raft state) keeps all.
func TestAdoptSingleNodeDataDir(t *testing.T) {
	dir := t.TempDir()
	writeSingleNodeDir(t, dir, "old", 5)
	for round := 0; round < 2; round++ {
		b, addr := startBroker(t, dir)
		cl := newClient(t, addr, kgo.DefaultProduceTopic("old"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for p := int32(0); p < 2; p++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("new-%d-%d", p, round))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("round %d: produce: %v", round, err)
			}
			if want := int64(5 + round); r.Offset != want {
				t.Errorf("round %d: partition %d: new record at offset %d, want %d", round, p, r.Offset, want)
			}
		}
		cons := newClient(t, addr, kgo.FetchMaxWait(time.Second), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"old": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
		got := map[int32][]string{}
		for len(got[0])+len(got[1]) < 2*(6+round) && ctx.Err() == nil {
			cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)) })
		}
		cancel()
		for p := int32(0); p < 2; p++ {
			if len(got[p]) != 6+round || got[p][0] != fmt.Sprintf("old-%d-0", p) || got[p][4] != fmt.Sprintf("old-%d-4", p) || got[p][5] != fmt.Sprintf("new-%d-0", p) {
				t.Errorf("round %d: partition %d: %q", round, p, got[p])
			}
		}
		if tp, ok := b.meta.Topic("old"); !ok || tp.Configs["retention.ms"] != "86400000" || len(tp.Assignments) != 2 {
			t.Errorf("round %d: topic %+v", round, tp)
		}
		cl.Close()
		cons.Close()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
