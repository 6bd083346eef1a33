package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The log workload treats each partition as a linearizable append-only
// log. Per partition, Writers processes "writer-<p>-<i>" append unique
// values "<process>-<n>" (OpAppend: one synchronous idempotent acks=all
// produce; OK with its offset) and Readers processes "reader-<p>-<i>"
// read the whole partition (OpRead: ListOffsets latest, the high
// watermark, then a fetch of [0, hwm) with a fresh direct consumer;
// Values is every value read in offset order, OK only if all of
// [0, hwm) was read).

// LogOptions configures StartLog.
type LogOptions struct {
	Writers  int           // per partition; 2 when 0
	Readers  int           // per partition; 1 when 0
	Interval time.Duration // between a process's operations (jittered); 500ms when 0
}

type logWorkload struct {
	s     *stopper
	seeds []string
	prod  *kgo.Client
	adm   *kadm.Client
	admCl *kgo.Client
	once  sync.Once
}

// producerOpts are the options of every producer: idempotent (kgo's
// default) acks=all, retried until the delivery timeout, with short
// request timeouts (a SIGSTOPped broker never answers).
func producerOpts(seeds []string, id string) []kgo.Opt {
	return append(clientOpts(seeds, id),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.RecordRetries(1<<30),
		kgo.ProducerLinger(0),
	)
}

// ProduceOutcome classifies a produce error: Fail only when the record
// certainly was not written (kgo never buffered it, or the broker
// refused it with an error it would have given every attempt, before
// appending), Info otherwise (a timeout, a lost connection, the client
// closed with the record in flight). INVALID_TIMESTAMP is Info: it
// depends on the broker's clock, which the clock fault moves, so a retry
// may be refused after an earlier attempt was written (Kafka validates
// timestamps before it looks for an idempotent duplicate).
func ProduceOutcome(err error) Outcome {
	if err == nil {
		return OK
	}
	if errors.Is(err, kgo.ErrMaxBuffered) {
		return Fail
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke.Code {
		case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidRecord.Code,
			kerr.InvalidTopicException.Code, kerr.TopicAuthorizationFailed.Code,
			kerr.ClusterAuthorizationFailed.Code, kerr.InvalidRequiredAcks.Code,
			kerr.UnsupportedForMessageFormat.Code:
			return Fail
		}
	}
	return Info
}

// StartLog starts the log workload on cfg.Topic (which must exist). ctx
// bounds only the start; the workload runs until Stop.
func StartLog(ctx context.Context, cfg WorkloadConfig, o LogOptions) (Workload, error) {
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.Readers <= 0 {
		o.Readers = 1
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if cfg.Partitions <= 0 {
		return nil, errors.New("chaos: log workload: no partitions")
	}
	prod, err := kgo.NewClient(append(producerOpts(cfg.Seeds, "log-writers"),
		kgo.DefaultProduceTopic(cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	admCl, err := kgo.NewClient(clientOpts(cfg.Seeds, "log-readers")...)
	if err != nil {
		prod.Close()
		return nil, err
	}
	w := &logWorkload{s: newStopper(), seeds: cfg.Seeds, prod: prod, admCl: admCl, adm: kadm.NewClient(admCl)}
	for p := range cfg.Partitions {
		for i := range o.Writers {
			name, rnd := fmt.Sprintf("writer-%d-%d", p, i), cfg.childRand()
			w.s.goFn(func() { w.write(cfg, o, name, p, rnd) })
		}
		for i := range o.Readers {
			name, rnd := fmt.Sprintf("reader-%d-%d", p, i), cfg.childRand()
			w.s.goFn(func() { w.read(cfg, o, name, p, rnd) })
		}
	}
	cfg.logger().Info("chaos: log workload started", "topic", cfg.Topic, "partitions", cfg.Partitions,
		"writers", o.Writers, "readers", o.Readers)
	return w, nil
}

func (w *logWorkload) write(cfg WorkloadConfig, o LogOptions, name string, p int32, rnd *rand.Rand) {
	for n := 0; sleepCtx(w.s.ctx, jitter(rnd, o.Interval)); n++ {
		v := fmt.Sprintf("%s-%d", name, n)
		id := cfg.Rec.Invoke(Op{Process: name, Kind: OpAppend, Topic: cfg.Topic, Partition: p, Value: v})
		// Not w.s.ctx: an append in flight at Stop finishes (Stop waits
		// for it, bounded by its ctx, and then closes the client).
		r, err := w.prod.ProduceSync(context.Background(), &kgo.Record{Partition: p, Value: []byte(v)}).First()
		cfg.Rec.Complete(id, func(op *Op) {
			op.Outcome = ProduceOutcome(err)
			if err != nil {
				op.Err = err.Error()
				return
			}
			op.Offset = r.Offset
		})
	}
}

func (w *logWorkload) read(cfg WorkloadConfig, o LogOptions, name string, p int32, rnd *rand.Rand) {
	for sleepCtx(w.s.ctx, jitter(rnd, o.Interval)) {
		id := cfg.Rec.Invoke(Op{Process: name, Kind: OpRead, Topic: cfg.Topic, Partition: p})
		ctx, cancel := context.WithTimeout(w.s.ctx, 10*time.Second)
		values, hwm, out, err := w.readOnce(ctx, cfg.Topic, p)
		cancel()
		cfg.Rec.Complete(id, func(op *Op) {
			op.Outcome, op.Values, op.Offset = out, values, hwm
			if err != nil {
				op.Err = err.Error()
			}
		})
	}
}

// readOnce lists partition p's high watermark and reads [0, hwm). A read
// that did not get there is Fail (a read changes nothing, so it "did not
// happen"); one that got there but not as [0, hwm) without gaps (a log
// start above 0, skipped offsets) is Info, with what it read.
func (w *logWorkload) readOnce(ctx context.Context, topic string, p int32) (values []string, hwm int64, out Outcome, err error) {
	ls, err := w.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, 0, Fail, fmt.Errorf("list offsets: %w", err)
	}
	l, ok := ls.Lookup(topic, p)
	switch {
	case !ok:
		return nil, 0, Fail, fmt.Errorf("list offsets: partition %d missing", p)
	case l.Err != nil:
		return nil, 0, Fail, fmt.Errorf("list offsets: %w", l.Err)
	}
	hwm = l.Offset
	var gap error
	err = readRange(ctx, w.seeds, topic, false, map[int32]int64{p: 0}, map[int32]int64{p: hwm}, func(r Record) {
		if gap == nil && r.Offset != int64(len(values)) {
			gap = fmt.Errorf("offset %d read after %d values", r.Offset, len(values))
		}
		values = append(values, r.Value)
	})
	switch {
	case err != nil:
		return values, hwm, Fail, err
	case gap != nil:
		return values, hwm, Info, gap
	}
	return values, hwm, OK, nil
}

// Stop stops the processes, waits (bounded by ctx) for appends in flight
// and closes the clients.
func (w *logWorkload) Stop(ctx context.Context) error {
	w.s.cancel()
	err := waitGroupCtx(ctx, &w.s.wg)
	w.once.Do(func() {
		w.prod.Close() // fails what is still in flight: recorded Info
		w.admCl.Close()
	})
	if err != nil {
		// Let the writers record their closed-client errors.
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		waitGroupCtx(c, &w.s.wg)
		cancel()
	}
	return err
}
