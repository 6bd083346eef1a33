package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
)

const (
	partitionWriters      = 16  // goroutines appending to the one partition
	partitionRoundBatches = 512 // batches per round (about 8 MiB)
)

// BenchmarkPartitionAppend: partitionWriters goroutines append
// appendBatch (16 x 1 KiB records, each goroutine a fresh copy per
// append: raft keeps the proposed slice) to one replica.Partition, a
// one-voter raft group (a single node's partition: one host, a Transport
// that drops every message, the Pebble state store on disk): every
// Append returns after an fsync covered its batch, the fsyncs shared by
// the appends of one Ready (group commit). One op is one acknowledged
// batch; MB/s counts its bytes. fsyncs/append counts the partition's
// file and folder syncs (through a counting vfs.FS) over the appends,
// the state store's not included.
//
// The peer is the best group commit those writers allow, done by hand:
// the same batch written sequentially to a plain file (one pwrite per
// batch) with an fdatasync after every partitionWriters batches, since
// partitionWriters writers with one batch each in flight can share an
// fsync among partitionWriters batches at most (fsyncs/append 1/16 =
// 0.0625). The two alternate in rounds of partitionRoundBatches batches,
// the first of the two rotating, the peer outside the timer:
// plain-MB/s, ratio = MB/s / plain-MB/s. (BenchmarkProduceE2E's disk
// peer, an fdatasync per MiB, is a ceiling these writers cannot reach:
// their groups are 256 KiB at most.)
func BenchmarkPartitionAppend(b *testing.B) {
	dir := b.TempDir()
	c := newPartCluster(b, partClusterConfig{replicas: 1, groups: 1, dir: filepath.Join(dir, "sluice"), noopNet: true})
	defer c.close(b)
	c.elect(b, func(int) uint64 { return 1 })
	part := c.leaders()[0]
	peer, err := newPlainLog(filepath.Join(dir, "plain"), 1<<62) // never rolls
	if err != nil {
		b.Fatal(err)
	}
	defer peer.close()
	batches := make([][]byte, partitionWriters)
	for i := range batches {
		batches[i] = bytes.Clone(appendBatch())
	}
	size := int64(len(batches[0]))
	b.SetBytes(size)

	// appendRound appends n batches from partitionWriters goroutines.
	appendRound := func(n int) error {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, partitionWriters)
		for w := range partitionWriters {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if _, err := part.Append(context.Background(), bytes.Clone(batches[w]), replica.AppendOptions{}); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("partition append: %w", err)
			}
		}
		return nil
	}

	var plainTime time.Duration
	var timedSyncs int64
	alternate(b, partitionRoundBatches, func(n int) error {
		before := c.partSyncs.Load()
		err := appendRound(n)
		timedSyncs += c.partSyncs.Load() - before
		return err
	}, func(n int) error {
		d, err := timeIt(func() error {
			for i := 0; i < n; i += partitionWriters {
				if err := peer.write(batches[0], min(partitionWriters, n-i), true); err != nil {
					return err
				}
			}
			return nil
		})
		plainTime += d
		return err
	})

	total := size * int64(b.N)
	logMBps, plainMBps := mbps(total, b.Elapsed()), mbps(total, plainTime)
	b.ReportMetric(float64(timedSyncs)/float64(b.N), "fsyncs/append")
	b.ReportMetric(plainMBps, "plain-MB/s")
	if plainMBps > 0 {
		b.ReportMetric(logMBps/plainMBps, "ratio")
	}
}
