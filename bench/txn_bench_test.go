package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTxnProduce's shape.
const (
	txnTopic      = "txn"  // the transactional producer's topic
	idemTopic     = "idem" // the idempotent peer's topic
	txnPartitions = 4
	// txnRoundTxns is the alternation round: this many transactions,
	// then as many records from the peer (or the other way round).
	txnRoundTxns = 10
	txnID        = "bench-txn"
)

// BenchmarkTxnProduce measures Kafka transactions end to end on a single
// Sluice node started in the process (server.New, the default config: an
// acks=all reply waits for the fsync; real files in b.TempDir()), with
// franz-go clients over TCP.
//
//   - txn: a transactional producer (kgo.TransactionalID) produces
//     transactions of 100 records (null key, 1 KiB random value) to a
//     topic of 4 partitions (kgo.RoundRobinPartitioner: 25 records to each
//     partition per transaction), each one BeginTransaction, Produce,
//     Flush, EndTransaction(TryCommit). One op is one record; MB/s counts
//     value bytes.
//   - txn-1000: the same with transactions of 1,000 records (and the
//     peer's units of 1,000), where the writes a transaction adds weigh
//     less (measure with -benchtime 100000x).
//
// The peer is an idempotent producer (kgo's default producer, acks=all)
// producing the same records to a topic of its own on the same broker, in
// the same 100-record units, each waited for with Flush. Both clients use
// the same options otherwise (acks=all, linger 1 ms, no compression,
// round-robin partitioner) and live across all ops; before the timer each
// produces one unit (the transactional one a committed transaction), so
// FindCoordinator, InitProducerId, the creation of __transaction_state and
// the connections are outside it.
//
// The two alternate in rounds of 10 transactions (1,000 records) as
// alternate does, the peer outside the timer, the first of the two
// rotating. EndTransaction returns once the coordinator has written
// PrepareCommit; the markers and CompleteCommit follow in the background.
// So that the peer's round never runs over the transactional side's
// markers (which would hide their cost), a timed round ends once
// DescribeTransactions no longer shows the last transaction prepared:
// the next transaction in a steady stream would wait for the same thing
// (CONCURRENT_TRANSACTIONS, which kgo retries after 20 ms).
//
// Custom metrics: idempotent-MB/s (the peer), ratio = MB/s /
// idempotent-MB/s (goal: >= 0.7), txns/s (committed transactions per
// second of the timed region), produce-ms/txn (BeginTransaction to the
// last ack: the AddPartitionsToTxn and the produce) and commit-ms/txn
// (EndTransaction).
//
// With -benchtime 1x (CI) the run is one transaction of one record.
// Measure with a fixed count (-benchtime 20000x: 200 transactions, 20 MiB).
func BenchmarkTxnProduce(b *testing.B) {
	b.Run("txn", func(b *testing.B) { benchmarkTxnProduce(b, 100) })
	b.Run("txn-1000", func(b *testing.B) { benchmarkTxnProduce(b, 1000) })
}

// benchmarkTxnProduce runs BenchmarkTxnProduce with txnRecords records per
// transaction (and per peer flush).
func benchmarkTxnProduce(b *testing.B, txnRecords int) {
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	addr := startSluice(b, filepath.Join(b.TempDir(), "sluice"))
	for _, t := range []string{txnTopic, idemTopic} {
		if err := createTopic(ctx, addr, t, txnPartitions); err != nil {
			b.Fatal(err)
		}
	}
	txnCl := newTxnBenchClient(b, addr, kgo.TransactionalID(txnID))
	idemCl := newTxnBenchClient(b, addr)
	adm := kadm.NewClient(newTxnBenchClient(b, addr))

	// Warm up: one committed transaction, one idempotent unit.
	var produceTime, commitTime time.Duration
	if err := produceTxn(ctx, txnCl, topicRecords(txnTopic, txnRecords), &produceTime, &commitTime); err != nil {
		b.Fatal("warm-up transaction: ", err)
	}
	if err := waitTxnDone(ctx, adm); err != nil {
		b.Fatal(err)
	}
	if err := e2eProduce(ctx, idemCl, topicRecords(idemTopic, txnRecords)); err != nil {
		b.Fatal("warm-up idempotent produce: ", err)
	}
	produceTime, commitTime = 0, 0

	n := b.N
	txnRecs, idemRecs := topicRecords(txnTopic, n), topicRecords(idemTopic, n)
	var txnDone, idemDone, txns int
	var idemTime time.Duration
	b.SetBytes(recordValueBytes)
	alternate(b, txnRoundTxns*txnRecords, func(k int) error {
		for end := txnDone + k; txnDone < end; {
			hi := min(txnDone+txnRecords, end)
			if err := produceTxn(ctx, txnCl, txnRecs[txnDone:hi], &produceTime, &commitTime); err != nil {
				return fmt.Errorf("transaction %d: %w", txns, err)
			}
			txnDone = hi
			txns++
		}
		return waitTxnDone(ctx, adm)
	}, func(k int) error {
		d, err := timeIt(func() error {
			for end := idemDone + k; idemDone < end; {
				hi := min(idemDone+txnRecords, end)
				if err := e2eProduce(ctx, idemCl, idemRecs[idemDone:hi]); err != nil {
					return fmt.Errorf("idempotent produce: %w", err)
				}
				idemDone = hi
			}
			return nil
		})
		idemTime += d
		return err
	})
	total := int64(n) * recordValueBytes
	idem := mbps(total, idemTime)
	b.ReportMetric(idem, "idempotent-MB/s")
	if idem > 0 {
		b.ReportMetric(mbps(total, b.Elapsed())/idem, "ratio")
	}
	b.ReportMetric(float64(txns)/b.Elapsed().Seconds(), "txns/s")
	b.ReportMetric(float64(produceTime.Microseconds())/1e3/float64(txns), "produce-ms/txn")
	b.ReportMetric(float64(commitTime.Microseconds())/1e3/float64(txns), "commit-ms/txn")
}

// createTopic creates topic with the given number of partitions (one
// replica) on the broker at addr.
func createTopic(ctx context.Context, addr, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s on %s: %w", topic, addr, err)
	}
	return nil
}

// newTxnBenchClient returns a producer for the broker at addr with the
// options both sides of BenchmarkTxnProduce share, and extra; it is closed
// when the benchmark ends.
func newTxnBenchClient(b *testing.B, addr string, extra ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(e2eLinger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	}, extra...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// topicRecords returns n records to topic with e2eRecords' values.
func topicRecords(topic string, n int) []kgo.Record {
	recs := e2eRecords(n)
	for i := range recs {
		recs[i].Topic = topic
	}
	return recs
}

// produceTxn produces recs in one transaction and commits it, adding the
// time from BeginTransaction to the last ack to *produce and
// EndTransaction's to *commit.
func produceTxn(ctx context.Context, cl *kgo.Client, recs []kgo.Record, produce, commit *time.Duration) error {
	start := time.Now()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
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
	err := cl.Flush(ctx)
	mu.Lock()
	err = errors.Join(err, firstErr)
	mu.Unlock()
	if err != nil {
		if aerr := cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, fmt.Errorf("abort: %w", aerr))
		}
		return err
	}
	ended := time.Now()
	*produce += ended.Sub(start)
	err = cl.EndTransaction(ctx, kgo.TryCommit)
	*commit += time.Since(ended)
	return err
}

// waitTxnDone waits until the coordinator has completed txnID's last
// transaction (its markers written: the state is no longer PrepareCommit
// or PrepareAbort), polling DescribeTransactions.
func waitTxnDone(ctx context.Context, adm *kadm.Client) error {
	for {
		ds, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return fmt.Errorf("describe transaction: %w", err)
		}
		d, ok := ds[txnID]
		switch {
		case !ok:
			return fmt.Errorf("describe transaction: %s not answered", txnID)
		case d.Err != nil:
			return fmt.Errorf("describe transaction: %w", d.Err)
		case d.State != "PrepareCommit" && d.State != "PrepareAbort":
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
