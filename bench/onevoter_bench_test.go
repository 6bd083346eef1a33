package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
)

// BenchmarkOneVoterProduce is the gate of a single node run as one-voter
// raft groups (issue 25): single-node produce through a one-voter group
// (replica.Options.Raft, one host with a Transport that drops every
// message, the Pebble state store on disk) must reach at least 0.9x
// today's single-replica path (Options.Raft nil, flush.messages=1, the
// default: an fsync before the ack).
//
// The workload is BenchmarkRaftProduce's: raftPartitions partitions,
// raftProducers producers per partition each with one batch in flight,
// appendBatch (16 x 1 KiB records, 16,589 bytes) per produce, acks=all, a
// fresh copy per produce, on real files in b.TempDir(). One op is one
// acknowledged batch; MB/s counts its bytes.
//
//   - single: the single-replica path alone (the baseline's figure).
//   - onevoter: the one-voter groups, alternating rounds of
//     raftRoundBatches batches with a single-replica peer built beside
//     them (the peer outside the timer, the first of the two rotating):
//     single-MB/s is the peer's, ratio = MB/s / single-MB/s (gate: >=
//     0.9). log-fsyncs/op and state-fsyncs/op count the one-voter
//     partitions' file and folder syncs and the state store's.
func BenchmarkOneVoterProduce(b *testing.B) {
	size := int64(len(appendBatch()))
	ctx := context.Background()
	open := func(b *testing.B, cfg partClusterConfig, name string) (*partCluster, []*replica.Partition) {
		cfg.groups, cfg.dir = raftPartitions, filepath.Join(b.TempDir(), name)
		c := newPartCluster(b, cfg)
		c.elect(b, func(int) uint64 { return 1 })
		return c, c.leaders()
	}
	single := partClusterConfig{replicas: 1, noRaft: true}
	oneVoter := partClusterConfig{replicas: 1, noopNet: true}
	b.Run("single", func(b *testing.B) {
		c, leaders := open(b, single, "single")
		defer c.close(b)
		b.SetBytes(size)
		b.ResetTimer()
		for done := 0; done < b.N; done += raftRoundBatches {
			if err := produceRound(ctx, leaders, min(raftRoundBatches, b.N-done)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(c.partSyncs.Load())/float64(b.N), "log-fsyncs/op")
	})
	b.Run("onevoter", func(b *testing.B) {
		c, leaders := open(b, oneVoter, "onevoter")
		defer c.close(b)
		pc, peerLeaders := open(b, single, "single")
		defer pc.close(b)
		b.SetBytes(size)
		var partSyncs, storeSyncs int64
		var peerTime time.Duration
		alternate(b, raftRoundBatches, func(n int) error {
			return c.produceCounted(ctx, leaders, n, &partSyncs, &storeSyncs)
		}, func(n int) error {
			d, err := timeIt(func() error { return produceRound(ctx, peerLeaders, n) })
			peerTime += d
			return err
		})
		total := size * int64(b.N)
		b.ReportMetric(float64(partSyncs)/float64(b.N), "log-fsyncs/op")
		b.ReportMetric(float64(storeSyncs)/float64(b.N), "state-fsyncs/op")
		peer := mbps(total, peerTime)
		b.ReportMetric(peer, "single-MB/s")
		if peer > 0 {
			b.ReportMetric(mbps(total, b.Elapsed())/peer, "ratio")
		}
	})
}

// alternate runs b.N ops in rounds of at most round ops: timed(n) under
// the benchmark's timer, peer(n) outside it, the first of the two
// rotating from round to round (so neither always runs on a cache or disk
// the other warmed). It stops the timer first and leaves it stopped.
func alternate(b *testing.B, round int, timed, peer func(n int) error) {
	b.ResetTimer()
	b.StopTimer()
	for r, done := 0, 0; done < b.N; r++ {
		n := min(round, b.N-done)
		t := func() error {
			b.StartTimer()
			defer b.StopTimer()
			return timed(n)
		}
		first, second := t, func() error { return peer(n) }
		if r%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			b.Fatal(err)
		}
		if err := second(); err != nil {
			b.Fatal(err)
		}
		done += n
	}
}
