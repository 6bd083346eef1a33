package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The transactional workload: Producers processes "txn-<i>", each a
// franz-go transactional producer with its own transactional.id
// ("chaos-txn-<i>"), run one transaction after another (OpTxn): begin,
// a handful of records (MinRecords to MaxRecords) to random partitions,
// each value naming its transaction, its index and the transaction's
// record count (TxnValue), then EndTransaction, asked to abort about one
// transaction in AbortEvery and to commit the others (any record that
// failed turns a commit into an abort). The OpTxn records what was asked
// (Op.Txn) and what EndTransaction answered (Outcome): OK, the
// transaction is committed or aborted as asked; Info, it may have ended
// either way (Jepsen's indeterminate: the call failed or timed out);
// Fail, EndTransaction was never sent (a failed BeginTransaction, a flush
// that did not end, or kgo's OperationNotAttempted), so it did not
// commit. On any error the producer is closed and a new one made with
// the same transactional.id: its InitProducerId bumps the epoch, fencing
// the old instance and aborting whatever it left open, as Kafka's clients
// do after a fatal error.
//
// Transformers processes "ctp-<i>" consume, transform and produce, as
// Kafka's exactly-once stream processors do: each is a
// GroupTransactSession (franz-go's consume-transform-produce loop) in the
// consumer group TxnGroup on the same topic, read_committed, with the
// transactional.id "chaos-ctp-<i>". A poll that returned records (at
// most 50) is followed by a transaction (OpTxn with Group and Read: what
// the poll returned) that produces 1 to 3 records named as the
// producers' are (TxnValue of process "ctp-<i>") to random partitions of
// the topic and commits the group's offsets past what it read in the
// same transaction (TxnOffsetCommit); one in AbortEvery is aborted. The
// session aborts instead of committing when the group rebalanced
// meanwhile; End's answer is recorded like EndTransaction's (committed:
// OK commit; not committed without an error: OK abort; an error: Info
// when a commit was asked), and on an error the session is closed and a
// new one made with the same transactional.id. Because the
// transformers read what every transaction wrote, their own outputs
// included, the history has write-read dependencies between
// transactions: the cycle checks (check_txn_cycles.go) need them.
//
// Readers processes "txn-reader-<k>" consume every partition from the
// start with read_committed (no group) and record each poll that
// returned records (OpPoll). The runner's final read of the topic is
// read_committed too (FinalReadCommitted).

// TxnOptions configures StartTxn.
type TxnOptions struct {
	Producers  int           // 3 when 0
	Readers    int           // 2 when 0
	MinRecords int           // per transaction; 2 when 0
	MaxRecords int           // per transaction; 6 when 0
	AbortEvery int           // one transaction in AbortEvery (on average) is aborted; 4 when 0
	Interval   time.Duration // between a producer's transactions (jittered); 20ms when 0
	// Timeout is the producers' transaction.timeout.ms, after which the
	// coordinator aborts a transaction left open. 15 s when 0.
	Timeout time.Duration
	// EndTimeout bounds each EndTransaction call (kgo retries within it
	// while the coordinator is unavailable); a call cut short is an
	// unknown outcome and the producer is replaced. Shorter than a
	// fault's hold, so that faults leave transactions of unknown
	// outcome and fenced producers behind. 2 s when 0.
	EndTimeout time.Duration
	// Transformers is the number of consume-transform-produce
	// processes in the group TxnGroup (none when 0).
	Transformers int
}

// TxnGroup is the consumer group of the txn workload's transformers.
const TxnGroup = "chaos-txn-ctp"

// TxnIDs are the transactional.ids of a txn workload with o's producers
// and transformers: the nemesis's coordinator faults aim at their
// coordinators.
func TxnIDs(o TxnOptions) []string {
	if o.Producers <= 0 {
		o.Producers = 3
	}
	var ids []string
	for i := range o.Producers {
		ids = append(ids, fmt.Sprintf("chaos-txn-%d", i))
	}
	for i := range o.Transformers {
		ids = append(ids, fmt.Sprintf("chaos-ctp-%d", i))
	}
	return ids
}

// TxnValue is the value of record index (from 0) of count in transaction
// n of process: "txn-0/t12/r3/of5".
func TxnValue(process string, n, index, count int) string {
	return fmt.Sprintf("%s/t%d/r%d/of%d", process, n, index, count)
}

// TxnName is the name of transaction n of process, OpTxn's Value and the
// prefix of its records' values: "txn-0/t12".
func TxnName(process string, n int) string { return fmt.Sprintf("%s/t%d", process, n) }

// ParseTxnValue parses a TxnValue: the transaction's name (TxnName), the
// record's index and the transaction's record count.
func ParseTxnValue(v string) (txn string, index, count int, ok bool) {
	parts := strings.Split(v, "/")
	if len(parts) != 4 || !strings.HasPrefix(parts[1], "t") || !strings.HasPrefix(parts[2], "r") || !strings.HasPrefix(parts[3], "of") {
		return "", 0, 0, false
	}
	if _, err := strconv.Atoi(parts[1][1:]); err != nil {
		return "", 0, 0, false
	}
	i, err1 := strconv.Atoi(parts[2][1:])
	n, err2 := strconv.Atoi(parts[3][2:])
	if err1 != nil || err2 != nil || i < 0 || n <= 0 || i >= n {
		return "", 0, 0, false
	}
	return parts[0] + "/" + parts[1], i, n, true
}

type txnWorkload struct {
	cfg WorkloadConfig
	o   TxnOptions
	s   *stopper

	mu      sync.Mutex
	readers []*kgo.Client
}

// StartTxn starts the transactional workload on cfg.Topic (which must
// exist). ctx bounds only the start; the workload runs until Stop.
func StartTxn(ctx context.Context, cfg WorkloadConfig, o TxnOptions) (Workload, error) {
	if o.Producers <= 0 {
		o.Producers = 3
	}
	if o.Readers <= 0 {
		o.Readers = 2
	}
	if o.MinRecords <= 0 {
		o.MinRecords = 2
	}
	if o.MaxRecords < o.MinRecords {
		o.MaxRecords = max(6, o.MinRecords)
	}
	if o.AbortEvery <= 0 {
		o.AbortEvery = 4
	}
	if o.Interval <= 0 {
		o.Interval = 20 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.EndTimeout <= 0 {
		o.EndTimeout = 2 * time.Second
	}
	if cfg.Partitions <= 0 {
		return nil, errors.New("chaos: txn workload: no partitions")
	}
	w := &txnWorkload{cfg: cfg, o: o, s: newStopper()}
	parts := map[int32]kgo.Offset{}
	for p := range cfg.Partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	for k := range o.Readers {
		name := fmt.Sprintf("txn-reader-%d", k)
		cl, err := kgo.NewClient(append(clientOpts(cfg.Seeds, name),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.FetchMaxWait(200*time.Millisecond))...)
		if err != nil {
			w.Stop(ctx)
			return nil, err
		}
		w.readers = append(w.readers, cl)
		w.s.goFn(func() { w.read(name, cl) })
	}
	for i := range o.Producers {
		name := fmt.Sprintf("txn-%d", i)
		rnd := cfg.childRand()
		w.s.goFn(func() { w.produce(name, rnd) })
	}
	for i := range o.Transformers {
		name := fmt.Sprintf("ctp-%d", i)
		rnd := cfg.childRand()
		w.s.goFn(func() { w.transform(name, rnd) })
	}
	cfg.logger().Info("chaos: txn workload started", "topic", cfg.Topic, "producers", o.Producers, "readers", o.Readers,
		"transformers", o.Transformers)
	return w, nil
}

// read polls every partition with read_committed until Stop.
func (w *txnWorkload) read(name string, cl *kgo.Client) {
	rec, topic := w.cfg.Rec, w.cfg.Topic
	for w.s.ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(w.s.ctx, 300*time.Millisecond)
		start := rec.Since()
		fs := cl.PollFetches(pctx)
		cancel()
		var rs []Record
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic && !r.Attrs.IsControl() {
				rs = append(rs, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
		})
		if len(rs) > 0 {
			rec.Add(Op{Process: name, Kind: OpPoll, Start: start, End: rec.Since(), Outcome: OK, Topic: topic, Records: rs})
		}
	}
}

// producerOpts are the produce options of process name's transactional
// clients, the producers' and the transformers' alike.
func (w *txnWorkload) producerOpts(name string) []kgo.Opt {
	return []kgo.Opt{
		kgo.DefaultProduceTopic(w.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(5 * time.Second),
		kgo.RecordDeliveryTimeout(8 * time.Second),
		kgo.ProducerLinger(0),
		kgo.WithLogger(kgoLogger{w.cfg.logger().With("process", name), kgo.LogLevelError}),
	}
}

// newProducer makes the transactional producer of process name.
func (w *txnWorkload) newProducer(name string) (*kgo.Client, error) {
	return kgo.NewClient(append(append(clientOpts(w.cfg.Seeds, name),
		kgo.TransactionalID("chaos-"+name),
		kgo.TransactionTimeout(w.o.Timeout),
	), w.producerOpts(name)...)...)
}

// produce runs process name's transactions until Stop; a stop ends the
// loop between transactions, never inside one.
func (w *txnWorkload) produce(name string, rnd *rand.Rand) {
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	drop := func() {
		if cl != nil {
			cl.Close()
			cl = nil
		}
	}
	for n := 0; sleepCtx(w.s.ctx, jitter(rnd, w.o.Interval)); n++ {
		count := w.o.MinRecords + rnd.IntN(w.o.MaxRecords-w.o.MinRecords+1)
		parts := make([]int32, count)
		for i := range parts {
			parts[i] = rnd.Int32N(w.cfg.Partitions)
		}
		abort := rnd.IntN(w.o.AbortEvery) == 0
		if cl == nil {
			var err error
			if cl, err = w.newProducer(name); err != nil {
				w.cfg.logger().Warn("chaos: txn: new producer", "process", name, "err", err)
				continue
			}
		}
		if !w.txn(name, cl, n, parts, abort) {
			drop() // a new producer (InitProducerId) fences this one
		}
	}
}

// txn runs transaction n of process name on cl and records it; it
// reports whether cl is fit for the next one.
func (w *txnWorkload) txn(name string, cl *kgo.Client, n int, parts []int32, abort bool) bool {
	rec := w.cfg.Rec
	id := rec.Invoke(Op{Process: name, Kind: OpTxn, Topic: w.cfg.Topic, Value: TxnName(name, n)})
	recs := make([]Record, len(parts))
	for i, p := range parts {
		recs[i] = Record{Partition: p, Offset: -1, Value: TxnValue(name, n, i, len(parts))}
	}
	fail := func(end string, err error) bool {
		rec.Complete(id, func(op *Op) {
			op.Outcome, op.Txn, op.Records, op.Err = Fail, end, recs, err.Error()
		})
		return false
	}
	if err := cl.BeginTransaction(); err != nil {
		return fail("", fmt.Errorf("begin: %w", err))
	}
	var mu sync.Mutex
	var produceErr error
	for i, p := range parts {
		cl.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte(recs[i].Value)}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				produceErr = errors.Join(produceErr, err)
				return
			}
			recs[i].Partition, recs[i].Offset = r.Partition, r.Offset
		})
	}
	fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := cl.Flush(fctx)
	cancel()
	if err != nil {
		// Records still in flight: EndTransaction must not be called
		// before they are done. Abandoned: the next producer's
		// InitProducerId aborts the transaction.
		return fail("", fmt.Errorf("flush: %w", err))
	}
	mu.Lock()
	perr := produceErr
	mu.Unlock()
	end, try := TxnCommit, kgo.TryCommit
	if abort || perr != nil {
		end, try = TxnAbort, kgo.TryAbort
	}
	ectx, cancel := context.WithTimeout(context.Background(), w.o.EndTimeout)
	err = cl.EndTransaction(ectx, try)
	cancel()
	rec.Complete(id, func(op *Op) {
		op.Txn, op.Records = end, recs
		switch {
		case err == nil:
			op.Outcome = OK
		case errors.Is(err, kerr.OperationNotAttempted):
			op.Outcome = Fail // kgo did not send the EndTxn
		default:
			op.Outcome = Info
		}
		if err := errors.Join(perr, err); err != nil {
			op.Err = err.Error()
		}
	})
	return err == nil
}

// newSession makes the consume-transform-produce session of process
// name.
func (w *txnWorkload) newSession(name string) (*kgo.GroupTransactSession, error) {
	return kgo.NewGroupTransactSession(append(append(clientOpts(w.cfg.Seeds, name),
		kgo.TransactionalID("chaos-"+name),
		kgo.TransactionTimeout(w.o.Timeout),
		kgo.ConsumerGroup(TxnGroup), kgo.ConsumeTopics(w.cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
	), w.producerOpts(name)...)...)
}

// transform runs process name's consume-transform-produce transactions
// until Stop.
func (w *txnWorkload) transform(name string, rnd *rand.Rand) {
	var s *kgo.GroupTransactSession
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for n := 0; sleepCtx(w.s.ctx, jitter(rnd, w.o.Interval)); {
		count := 1 + rnd.IntN(3)
		parts := make([]int32, count)
		for i := range parts {
			parts[i] = rnd.Int32N(w.cfg.Partitions)
		}
		abort := rnd.IntN(w.o.AbortEvery) == 0
		if s == nil {
			var err error
			if s, err = w.newSession(name); err != nil {
				w.cfg.logger().Warn("chaos: txn: new session", "process", name, "err", err)
				continue
			}
		}
		ok, done := w.ctpTxn(name, s, n, parts, abort)
		if done {
			n++
		}
		if !ok {
			s.Close() // a new session (InitProducerId) fences this one
			s = nil
		}
	}
}

// ctpTxn polls s and, when the poll returned records, runs transaction
// n of process name on it and records it; it reports whether s is fit
// for the next one and whether a transaction was run.
func (w *txnWorkload) ctpTxn(name string, s *kgo.GroupTransactSession, n int, parts []int32, abort bool) (ok, done bool) {
	rec, topic := w.cfg.Rec, w.cfg.Topic
	pctx, cancel := context.WithTimeout(w.s.ctx, 500*time.Millisecond)
	fs := s.PollRecords(pctx, 50)
	cancel()
	var read []Record
	fs.EachRecord(func(r *kgo.Record) {
		if r.Topic == topic && !r.Attrs.IsControl() {
			read = append(read, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
	})
	if len(read) == 0 {
		return true, false
	}
	id := rec.Invoke(Op{Process: name, Kind: OpTxn, Topic: topic, Group: TxnGroup, Value: TxnName(name, n)})
	recs := make([]Record, len(parts))
	for i, p := range parts {
		recs[i] = Record{Partition: p, Offset: -1, Value: TxnValue(name, n, i, len(parts))}
	}
	complete := func(f func(op *Op)) {
		rec.Complete(id, func(op *Op) {
			op.Records, op.Read = recs, read
			f(op)
		})
	}
	if err := s.Begin(); err != nil {
		complete(func(op *Op) { op.Outcome, op.Err = Fail, fmt.Sprintf("begin: %v", err) })
		return false, true
	}
	var mu sync.Mutex
	var produceErr error
	for i, p := range parts {
		s.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte(recs[i].Value)}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				produceErr = errors.Join(produceErr, err)
				return
			}
			recs[i].Partition, recs[i].Offset = r.Partition, r.Offset
		})
	}
	fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := s.Client().Flush(fctx)
	cancel()
	if err != nil {
		complete(func(op *Op) { op.Outcome, op.Err = Fail, fmt.Sprintf("flush: %v", err) })
		return false, true
	}
	mu.Lock()
	perr := produceErr
	mu.Unlock()
	end, try := TxnCommit, kgo.TryCommit
	if abort || perr != nil {
		end, try = TxnAbort, kgo.TryAbort
	}
	ectx, cancel := context.WithTimeout(context.Background(), w.o.EndTimeout)
	committed, err := s.End(ectx, try)
	cancel()
	complete(func(op *Op) {
		op.Txn = end
		switch {
		case err == nil && end == TxnCommit && !committed:
			op.Txn, op.Outcome = TxnAbort, OK // the session aborted: the group rebalanced, or the offset commit failed
		case err == nil:
			op.Outcome = OK
		default:
			op.Outcome = Info
		}
		if err := errors.Join(perr, err); err != nil {
			op.Err = err.Error()
		}
	})
	return err == nil, true
}

// Stop ends the producers after their current transaction and the
// readers after their current poll, bounded by ctx.
func (w *txnWorkload) Stop(ctx context.Context) error {
	w.s.cancel()
	err := waitGroupCtx(ctx, &w.s.wg)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.readers {
		cl.Close()
	}
	w.readers = nil
	return err
}
