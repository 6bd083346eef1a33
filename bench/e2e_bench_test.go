package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The end-to-end benchmark's shape.
const (
	e2eTopic      = "e2e"
	e2ePartitions = 16
	e2eLinger     = time.Millisecond
	e2eChunkBytes = 16 << 10 // the disk peer's write size
	// e2eRoundRecords is the produce round: 8 MiB of values to each of
	// Sluice, kfake and the disk peer in turn.
	e2eRoundRecords = 8 << 10
	e2eReadPasses   = 2 // read-back passes of each broker, alternating
	e2eTimeout      = 10 * time.Minute
)

// BenchmarkProduceE2E produces b.N records (null key, 1 KiB random
// incompressible value; one op is one record, MB/s counts the value bytes)
// with a franz-go producer over TCP to a topic of 16 partitions, then reads
// them all back with franz-go consumers, against two brokers started in the
// same process, each with its data in b.TempDir():
//
//   - Sluice (server.New with the default config: an acks=all reply waits
//     for the fsync, with group commit). Its produce is the timed region:
//     MB/s and ns/op are Sluice's produce.
//   - kfake (github.com/twmb/franz-go/pkg/kfake, one broker) with
//     kfake.DataDir (persistence) and kfake.SyncWrites (an fsync of the
//     segment and index file after every batch before the reply).
//
// The producer is the same for both: kgo.RequiredAcks(kgo.AllISRAcks()),
// kgo.ProducerLinger(1ms), kgo.ProducerBatchCompression(kgo.NoCompression()),
// kgo's defaults otherwise (idempotent, uniform-bytes partitioner; up to
// five produce requests in flight per broker, raised from one after the
// first response when the broker speaks Produce v4+: the idempotent
// producer's limit, which MaxProduceRequestsInflightPerBroker cannot
// change). A consumer reads every partition from the start until it has
// all b.N records and checks each record's value against what was
// produced at its partition and offset.
//
// Next to them, outside the timer, the disk peer writes the same number of
// bytes to a plain file in 16 KiB writes with an fdatasync every MiB and at
// the end of each round (BenchmarkAppend/fsync-1MiB's plain peer): the
// machine's sequential write-and-fsync bandwidth in the same run.
//
// So that all three see the same machine (the benchmark host is shared and
// its load changes by the second), the produce runs in rounds of 8 MiB
// (e2eRoundRecords): each round produces to Sluice, to kfake and to the
// disk peer in turn (the first of the three rotating), each finishing with
// every ack (Flush) or its fdatasync before the next starts. The producer
// clients live across rounds; their start-up (connection, metadata,
// InitProducerId) is inside the first round. The read-back alternates whole
// passes (e2eReadPasses of each, Sluice first in even passes, kfake first
// in odd ones), each pass a new consumer from the start; the data is in the
// page cache (Sluice) or in memory (kfake) by then.
//
// Custom metrics: kfake-MB/s, and produce-ratio = MB/s / kfake-MB/s;
// disk-MB/s, and disk-ratio = MB/s / disk-MB/s; read-MB/s (Sluice's
// read-back), kfake-read-MB/s, and read-ratio = read-MB/s / kfake-read-MB/s.
//
// With -benchtime 1x (CI) the run is one record: a smoke test of the whole
// path. Measure with a fixed count: -benchtime 65536x is 64 MiB per broker.
func BenchmarkProduceE2E(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	n := b.N
	total := int64(n) * recordValueBytes

	sluiceAddr := startSluice(b, filepath.Join(b.TempDir(), "sluice"))
	kfakeAddr := startKfake(b, filepath.Join(b.TempDir(), "kfake"), true)
	for _, addr := range []string{sluiceAddr, kfakeAddr} {
		if err := createE2ETopic(ctx, addr); err != nil {
			b.Fatal(err)
		}
	}
	sluiceRecs, kfakeRecs := e2eRecords(n), e2eRecords(n)
	disk, err := newPlainLog(filepath.Join(b.TempDir(), "plain"), 1<<62) // never rolls
	if err != nil {
		b.Fatal(err)
	}
	defer disk.close()
	sluiceProducer, kfakeProducer := newE2EProducer(b, sluiceAddr), newE2EProducer(b, kfakeAddr)
	b.SetBytes(recordValueBytes)

	var kfakeProduce, diskTime time.Duration
	peers := []func(lo, hi int) error{
		func(lo, hi int) error { // Sluice: the timed region
			b.StartTimer()
			err := e2eProduce(ctx, sluiceProducer, sluiceRecs[lo:hi])
			b.StopTimer()
			if err != nil {
				return fmt.Errorf("sluice produce: %w", err)
			}
			return nil
		},
		func(lo, hi int) error {
			d, err := timeIt(func() error { return e2eProduce(ctx, kfakeProducer, kfakeRecs[lo:hi]) })
			kfakeProduce += d
			if err != nil {
				return fmt.Errorf("kfake produce: %w", err)
			}
			return nil
		},
		func(lo, hi int) error {
			d, err := timeIt(func() error { return diskPeerWrite(disk, int64(hi-lo)*recordValueBytes) })
			diskTime += d
			if err != nil {
				return fmt.Errorf("disk peer: %w", err)
			}
			return nil
		},
	}
	b.ResetTimer()
	b.StopTimer()
	for round, lo := 0, 0; lo < n; round, lo = round+1, lo+e2eRoundRecords {
		hi := min(lo+e2eRoundRecords, n)
		for i := range peers {
			if err := peers[(round+i)%len(peers)](lo, hi); err != nil {
				b.Fatal(err)
			}
		}
	}
	sluiceProduce := b.Elapsed()

	var sluiceRead, kfakeRead time.Duration
	for pass := range e2eReadPasses {
		reads := []func() error{
			func() error {
				d, err := timeIt(func() error { return e2eRead(ctx, sluiceAddr, sluiceRecs) })
				sluiceRead += d
				if err != nil {
					return fmt.Errorf("sluice read: %w", err)
				}
				return nil
			},
			func() error {
				d, err := timeIt(func() error { return e2eRead(ctx, kfakeAddr, kfakeRecs) })
				kfakeRead += d
				if err != nil {
					return fmt.Errorf("kfake read: %w", err)
				}
				return nil
			},
		}
		for i := range reads {
			if err := reads[(pass+i)%len(reads)](); err != nil {
				b.Fatal(err)
			}
		}
	}

	produce := mbps(total, sluiceProduce)
	kfakeMBps, diskMBps := mbps(total, kfakeProduce), mbps(total, diskTime)
	readMBps := mbps(e2eReadPasses*total, sluiceRead)
	kfakeReadMBps := mbps(e2eReadPasses*total, kfakeRead)
	b.ReportMetric(kfakeMBps, "kfake-MB/s")
	b.ReportMetric(diskMBps, "disk-MB/s")
	b.ReportMetric(readMBps, "read-MB/s")
	b.ReportMetric(kfakeReadMBps, "kfake-read-MB/s")
	if kfakeMBps > 0 {
		b.ReportMetric(produce/kfakeMBps, "produce-ratio")
	}
	if diskMBps > 0 {
		b.ReportMetric(produce/diskMBps, "disk-ratio")
	}
	if kfakeReadMBps > 0 {
		b.ReportMetric(readMBps/kfakeReadMBps, "read-ratio")
	}
}

func timeIt(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// startSluice runs a Sluice broker on a free port with the default config
// (overridden by the key=value settings in extra) and its data in dir,
// closed when the benchmark ends.
func startSluice(b *testing.B, dir string, extra ...string) string {
	b.Helper()
	cfg, err := config.Load("", append([]string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + dir}, extra...))
	if err != nil {
		b.Fatal(err)
	}
	br, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := br.Close(); err != nil {
			b.Errorf("sluice close: %v", err)
		}
	})
	return br.Addr().String()
}

// startKfake runs a one-broker kfake cluster persisting to dir, with an
// fsync per write (kfake.SyncWrites: per batch, per committed partition)
// when sync is set, closed when the benchmark ends.
func startKfake(b *testing.B, dir string, sync bool) string {
	b.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(dir)}
	if sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func createE2ETopic(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateTopic(ctx, e2ePartitions, 1, nil, e2eTopic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("create topic on %s: %w", addr, err)
	}
	return nil
}

// e2eValuePool holds random bytes; record i's value is the 1 KiB window
// starting at a different place for each i, so values differ and do not
// compress.
var e2eValuePool = sync.OnceValue(func() []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	v := make([]byte, 1<<20+recordValueBytes)
	for i := 0; i < len(v); i += 8 {
		binary.LittleEndian.PutUint64(v[i:], rng.Uint64())
	}
	return v
})

func e2eRecords(n int) []kgo.Record {
	pool := e2eValuePool()
	span := len(pool) - recordValueBytes
	recs := make([]kgo.Record, n)
	for i := range recs {
		off := (i * 4099) % span
		recs[i] = kgo.Record{Topic: e2eTopic, Value: pool[off : off+recordValueBytes : off+recordValueBytes]}
	}
	return recs
}

// newE2EProducer returns the benchmark's producer for the broker at addr,
// closed when the benchmark ends.
func newE2EProducer(b *testing.B, addr string) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(e2eLinger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// e2eProduce produces recs and waits for every ack; kgo fills in each
// record's partition and offset.
func e2eProduce(ctx context.Context, cl *kgo.Client, recs []kgo.Record) error {
	var (
		mu       sync.Mutex
		firstErr error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	for i := range recs {
		cl.Produce(ctx, &recs[i], done)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// e2eRead consumes the topic from the start until it has read as many
// records as recs holds, checking that each partition's records arrive in
// offset order with the values produced at those offsets.
func e2eRead(ctx context.Context, addr string, recs []kgo.Record) error {
	// want[p][o] is the value produced at partition p, offset o.
	want := make([][][]byte, e2ePartitions)
	for i := range recs {
		r := &recs[i]
		if r.Partition < 0 || r.Partition >= e2ePartitions {
			return fmt.Errorf("record %d produced to partition %d", i, r.Partition)
		}
		p := want[r.Partition]
		for int64(len(p)) <= r.Offset {
			p = append(p, nil)
		}
		p[r.Offset] = r.Value
		want[r.Partition] = p
	}
	for p, vs := range want {
		for o, v := range vs {
			if v == nil {
				return fmt.Errorf("partition %d: no record acked at offset %d", p, o)
			}
		}
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumeTopics(e2eTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := make([]int64, e2ePartitions)
	for got := 0; got < len(recs); {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return ferr
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			p := r.Partition
			if p < 0 || p >= e2ePartitions {
				return fmt.Errorf("read a record from partition %d", p)
			}
			if r.Offset != next[p] || r.Offset >= int64(len(want[p])) {
				return fmt.Errorf("partition %d: read offset %d, want %d (%d produced)", p, r.Offset, next[p], len(want[p]))
			}
			if !bytes.Equal(r.Value, want[p][r.Offset]) {
				return fmt.Errorf("partition %d offset %d: value differs from the one produced", p, r.Offset)
			}
			next[p]++
			got++
		}
	}
	return nil
}

// diskPeerWrite appends n bytes of random data to p, 16 KiB per write,
// with an fdatasync after every MiB and after the last write.
func diskPeerWrite(p *plainLog, n int64) error {
	chunk := e2eValuePool()[:e2eChunkBytes]
	var written, unsynced int64
	for written < n {
		c := chunk[:min(int64(len(chunk)), n-written)]
		if err := p.write(c, 1, false); err != nil {
			return err
		}
		written += int64(len(c))
		if unsynced += int64(len(c)); unsynced >= groupBytes || written == n {
			if err := p.sync(); err != nil {
				return err
			}
			unsynced = 0
		}
	}
	return nil
}
