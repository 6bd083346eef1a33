package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The topics of the workloads, created by Run.
const (
	QueueTopic     = "chaos-queue"
	LogTopic       = "chaos-log"
	RegistersTopic = "chaos-offsets"
	TxnTopic       = "chaos-txn"
)

// Workload names.
const (
	WorkloadQueue   = "queue"
	WorkloadLog     = "log"
	WorkloadOffsets = "offsets"
	WorkloadTxn     = "txn"
)

// RunOptions configures one run.
type RunOptions struct {
	Binary     string        // the sluice binary (built with -tags faults for disk and clock faults)
	Dir        string        // the run's folder: node data and logs, history.json, report.txt, report.html
	Nodes      int           // 3 or 5
	Seed       int64         // every choice of the run follows from it
	Workloads  []string      // of queue, log, offsets, txn; queue, log and offsets when empty
	Faults     []string      // fault kinds (AllFaults when empty; the coordinator faults only with the txn workload)
	Sequential bool          // the kinds in order, not drawn at random
	Duration   time.Duration // of the fault phase (60 s when 0)
	Warmup     time.Duration // workload alone before the first fault (5 s when 0)
	Recovery   time.Duration // workload after healing, before the final reads (10 s when 0)
	// LivenessBound is how long after healing every partition must have
	// accepted a write (60 s when 0).
	LivenessBound time.Duration
	// DrainBound is how long the queue's consumers get to poll every
	// acknowledged send once the producers stopped (60 s when 0).
	DrainBound time.Duration
	// Timings are the nemesis's ranges of fault holds and gaps
	// (DefaultTimings' where zero).
	Timings Timings
	// Acks1 runs the queue's producers with acks=1 and no idempotence
	// (QueueOptions.Acks1): a run that should find lost writes.
	Acks1  bool
	Logger *slog.Logger
}

func (o *RunOptions) defaults() {
	if len(o.Workloads) == 0 {
		o.Workloads = []string{WorkloadQueue, WorkloadLog, WorkloadOffsets}
	}
	if len(o.Faults) == 0 {
		o.Faults = slices.Clone(AllFaults)
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Recovery == 0 {
		o.Recovery = 10 * time.Second
	}
	if o.LivenessBound == 0 {
		o.LivenessBound = 60 * time.Second
	}
	if o.DrainBound == 0 {
		o.DrainBound = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// runTxnOptions are the txn workload's options in a run: three
// producers, two read_committed readers, two consume-transform-produce
// transformers.
var runTxnOptions = TxnOptions{Producers: 3, Readers: 2, Transformers: 2}

// partitionsOf are the workload topics' partition counts.
var partitionsOf = map[string]int32{QueueTopic: 6, LogTopic: 3, RegistersTopic: 3, TxnTopic: 3}

// topicMinInsync is the runner's topics' min.insync.replicas (with
// replication factor 3).
const topicMinInsync = 2

// Run starts a cluster, runs the workloads while the nemesis injects
// faults, heals, waits for recovery, reads everything back and checks the
// history; it writes history.json, report.txt and report.html into
// o.Dir. The error is for a run that could not be carried out (a cluster
// that did not start); anomalies are in the Result.
func Run(ctx context.Context, o RunOptions) (*History, *Result, error) {
	o.defaults()
	log := o.Logger
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, err
	}
	root := rand.New(rand.NewPCG(uint64(o.Seed), 0x5111ce))
	nemRng := rand.New(rand.NewPCG(root.Uint64(), root.Uint64()))

	c, err := StartCluster(ctx, ClusterConfig{Binary: o.Binary, Dir: o.Dir, Nodes: o.Nodes, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	if err := c.WaitReady(ctx, 60*time.Second); err != nil {
		return nil, nil, fmt.Errorf("chaos: cluster not ready: %w", err)
	}
	topics := map[string]bool{}
	for _, w := range o.Workloads {
		t := map[string]string{WorkloadQueue: QueueTopic, WorkloadLog: LogTopic, WorkloadOffsets: RegistersTopic, WorkloadTxn: TxnTopic}[w]
		if t == "" {
			return nil, nil, fmt.Errorf("chaos: unknown workload %q", w)
		}
		rf := int16(min(3, o.Nodes))
		if err := c.CreateTopic(ctx, t, partitionsOf[t], rf, map[string]string{"min.insync.replicas": strconv.Itoa(topicMinInsync)}); err != nil {
			return nil, nil, fmt.Errorf("chaos: create %s: %w", t, err)
		}
		topics[t] = true
	}
	rec := NewRecorder(time.Now())
	h := &History{Seed: o.Seed, Nodes: o.Nodes, Started: time.Now(), Acks1: o.Acks1, MinInsync: map[string]int{}}
	for t := range topics {
		h.MinInsync[t] = topicMinInsync
	}
	for t := range topics {
		if _, err := probeAll(ctx, c, rec, t, 60*time.Second); err != nil {
			return nil, nil, fmt.Errorf("chaos: %s not writable at the start: %w", t, err)
		}
	}
	var wls []Workload
	stopAll := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, w := range wls {
			wg.Go(func() {
				if err := w.Stop(sctx); err != nil {
					log.Warn("chaos: workload stop", "err", err)
				}
			})
		}
		wg.Wait()
		wls = nil
	}
	defer stopAll()
	for _, name := range o.Workloads {
		wc := WorkloadConfig{Seeds: c.Seeds(), Rand: rand.New(rand.NewPCG(root.Uint64(), root.Uint64())), Rec: rec, Logger: log}
		var w Workload
		switch name {
		case WorkloadQueue:
			wc.Topic, wc.Partitions = QueueTopic, partitionsOf[QueueTopic]
			w, err = StartQueue(ctx, wc, QueueOptions{Producers: 2, Consumers: 3, Churn: 8 * time.Second, Acks1: o.Acks1})
		case WorkloadLog:
			wc.Topic, wc.Partitions = LogTopic, partitionsOf[LogTopic]
			w, err = StartLog(ctx, wc, LogOptions{Writers: 2, Readers: 1, Interval: 100 * time.Millisecond})
		case WorkloadOffsets:
			wc.Topic, wc.Partitions = RegistersTopic, partitionsOf[RegistersTopic]
			w, err = StartOffsets(ctx, wc, OffsetsOptions{Clients: 3, Interval: 100 * time.Millisecond})
		case WorkloadTxn:
			wc.Topic, wc.Partitions = TxnTopic, partitionsOf[TxnTopic]
			w, err = StartTxn(ctx, wc, runTxnOptions)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("chaos: start %s workload: %w", name, err)
		}
		wls = append(wls, w)
	}

	log.Info("chaos: warm-up", "seed", o.Seed, "d", o.Warmup)
	sleepCtx(ctx, o.Warmup)
	nem := NewNemesis(c, nemRng, rec.Since, QueueTopic, partitionsOf[QueueTopic], log)
	nem.SetTimings(o.Timings)
	// The faults' leaders and followers are those of the queue's
	// partitions, else the log's, else the txn topic's.
	for _, w := range []string{WorkloadQueue, WorkloadLog, WorkloadTxn} {
		if slices.Contains(o.Workloads, w) {
			t := map[string]string{WorkloadQueue: QueueTopic, WorkloadLog: LogTopic, WorkloadTxn: TxnTopic}[w]
			nem.topic, nem.partitions = t, partitionsOf[t]
			break
		}
	}
	faults := runFaults(o.Workloads, o.Faults)
	if slices.Contains(o.Workloads, WorkloadTxn) {
		nem.SetTxnIDs(TxnIDs(runTxnOptions))
	}
	log.Info("chaos: faults", "kinds", faults, "sequential", o.Sequential, "d", o.Duration)
	nem.Run(ctx, faults, o.Sequential, o.Duration)
	if err := nem.Heal(ctx); err != nil {
		log.Warn("chaos: heal", "err", err)
	}
	h.Healed = rec.Since()
	h.Faults = nem.Faults()
	log.Info("chaos: healed; waiting for every partition to accept a write", "bound", o.LivenessBound)

	h.Liveness = map[string]map[int32]time.Duration{}
	for t := range topics {
		live, err := probeAll(ctx, c, rec, t, o.LivenessBound)
		if err != nil {
			log.Warn("chaos: liveness", "topic", t, "err", err)
		}
		h.Liveness[t] = live
	}
	log.Info("chaos: recovery", "d", o.Recovery)
	sleepCtx(ctx, o.Recovery)
	for _, w := range wls {
		if d, ok := w.(interface{ Drain(context.Context) error }); ok {
			h.Drained, h.DrainTopic = rec.Since(), QueueTopic
			log.Info("chaos: draining the queue: producers stopped, consumers poll what is left", "bound", o.DrainBound)
			dctx, cancel := context.WithTimeout(ctx, o.DrainBound)
			if err := d.Drain(dctx); err != nil {
				log.Warn("chaos: drain", "err", err)
			}
			cancel()
		}
	}
	stopAll()
	h.Finished = rec.Since()

	h.Final, h.LogStart = map[string]map[int32][]Record{}, map[string]map[int32]int64{}
	for t := range topics {
		if t == RegistersTopic {
			continue // the offsets workload writes no records
		}
		fctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		read := FinalRead
		if t == TxnTopic {
			read = FinalReadCommitted // read_committed, once every transaction is decided
		}
		recs, starts, err := read(fctx, c.Seeds(), t)
		cancel()
		if err != nil {
			log.Warn("chaos: final read", "topic", t, "err", err)
			if h.FinalErrors == nil {
				h.FinalErrors = map[string]string{}
			}
			h.FinalErrors[t] = err.Error()
			continue
		}
		h.Final[t], h.LogStart[t] = recs, starts
	}
	if err := ctx.Err(); err != nil {
		// Interrupted: the probes, the drain and the final reads were cut
		// short, and checking would report what they did not get to as
		// no-leader-after-heal and unpolled anomalies.
		return nil, nil, fmt.Errorf("chaos: run interrupted: %w", err)
	}
	h.Ops = rec.Ops()
	res := Check(h)
	if err := writeReports(o.Dir, h, res); err != nil {
		return h, res, err
	}
	return h, res, nil
}

// runFaults are the fault kinds a run with workloads injects: faults,
// less the coordinator faults when the txn workload is not among them
// (no transaction coordinator to aim at), unless nothing else is left.
func runFaults(workloads, faults []string) []string {
	if slices.Contains(workloads, WorkloadTxn) {
		return faults
	}
	if f := slices.DeleteFunc(slices.Clone(faults), func(k string) bool { return slices.Contains(CoordinatorFaults, k) }); len(f) > 0 {
		return f
	}
	return faults
}

func writeReports(dir string, h *History, res *Result) error {
	var errs []error
	errs = append(errs, WriteJSON(filepath.Join(dir, "history.json"), h))
	if f, err := os.Create(filepath.Join(dir, "report.txt")); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, WriteText(f, h, res), f.Close())
	}
	errs = append(errs, WriteHTML(dir, h, res))
	return errors.Join(errs...)
}

// probeAll writes one record to every partition of topic, retrying each
// until it is acknowledged or d passes, and returns per partition how
// long after the call its write was first acknowledged (-1: never). With
// rec, each attempt is in the history: an OpSend of process "liveness"
// (an OpAppend on the log topic), so the log workload's model and the
// queue's checks see these records like any other.
func probeAll(ctx context.Context, c *Cluster, rec *Recorder, topic string, d time.Duration) (map[int32]time.Duration, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second),
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	start := time.Now()
	n := partitionsOf[topic]
	out := make(map[int32]time.Duration, n)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	kind := OpSend
	if topic == LogTopic {
		kind = OpAppend
	}
	for p := range n {
		out[p] = -1
		wg.Go(func() {
			for try := 0; ; try++ {
				v := fmt.Sprintf("liveness-%d-%d-%d", p, start.UnixNano(), try)
				id := -1
				if rec != nil {
					id = rec.Invoke(Op{Process: fmt.Sprintf("liveness-%d", p), Kind: kind, Topic: topic, Partition: p, Value: v})
				}
				pctx, cancel := context.WithTimeout(ctx, 6*time.Second)
				r, err := cl.ProduceSync(pctx, &kgo.Record{Partition: p, Value: []byte(v)}).First()
				cancel()
				if id >= 0 {
					rec.Complete(id, func(op *Op) {
						if err == nil {
							op.Outcome, op.Offset = OK, r.Offset
						} else {
							op.Outcome, op.Err = Info, err.Error()
						}
					})
				}
				if err == nil {
					mu.Lock()
					out[p] = time.Since(start)
					mu.Unlock()
					return
				}
				if time.Since(start) > d || ctx.Err() != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s/%d: no write acknowledged within %v: %w", topic, p, d, err))
					mu.Unlock()
					return
				}
				sleepCtx(ctx, 200*time.Millisecond)
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
