package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The queue workload: Producers processes "producer-<i>" send unique
// values "<process>-<n>" at a steady rate (OpSend), half keyed (a key of
// queueKeys, partitioned by Kafka's murmur2 of the key) and half unkeyed
// with a partition chosen at random; Consumers processes "consumer-<k>"
// in one group (Topic+"-group"; see ProtocolRandom for their protocol) poll (OpPoll, only polls that returned
// records), commit what they polled every ~300 ms (OpCommit) and record
// every assignment change (OpAssign: the whole new owned set of the
// topic); with Churn, a random consumer closes and a new one (the next
// k) starts every Churn on average; "offsets-reader" fetches the group's
// committed offsets every ~500 ms (OpFetchOffsets); "hw-reader" reads the
// partitions' high watermarks every ~200 ms (OpHighWater, workload_hw.go).
//
// A consumer runs BlockRebalanceOnPoll: between a poll's return and the
// next poll (while it records the poll and commits), no assignment
// changes, so a poll's records belong to the assignment at its End. An
// assignment change happens while a poll waits, so an OpAssign (an
// instant, Start = End) may fall inside an OpPoll of its process (which
// then returned records of the new assignment only).

// Consumer group protocols of QueueOptions.Protocol.
const (
	// ProtocolRandom (the default) picks ProtocolClassic or
	// ProtocolConsumer for the whole run with the run's Rand, so runs
	// of different seeds exercise both.
	ProtocolRandom = "random"
	// ProtocolClassic: every consumer uses the classic protocol
	// (JoinGroup/SyncGroup, kgo's cooperative-sticky balancer).
	ProtocolClassic = "classic"
	// ProtocolConsumer: every consumer uses KIP-848
	// (ConsumerGroupHeartbeat, the server-side sticky assignor).
	ProtocolConsumer = "consumer"
	// ProtocolMixed alternates by consumer number in the one group: even
	// k classic, odd k KIP-848. Sluice refuses a member of the other
	// protocol while the group has members (no KIP-848 online
	// migration: INCONSISTENT_GROUP_PROTOCOL to a JoinGroup,
	// GROUP_ID_NOT_FOUND to a ConsumerGroupHeartbeat), so in a mixed run
	// the consumers of the protocol the group is not in keep failing to
	// join until it empties: usually one or two consumers do all the
	// work. Useful once online migration exists.
	ProtocolMixed = "mixed"
)

// queueKeys are the keys of keyed sends.
var queueKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}

// QueueOptions configures StartQueue.
type QueueOptions struct {
	Producers int           // 2 when 0
	Consumers int           // 3 when 0
	Interval  time.Duration // between sends of a producer; 5ms when 0
	Churn     time.Duration // mean time between a consumer leaving and a new one joining; 0: none
	Protocol  string        // ProtocolRandom ("" too), ProtocolClassic, ProtocolConsumer or ProtocolMixed
	// Acks1 makes the producers use acks=1 without idempotence: a leader
	// acknowledges a write before any replica has it, so a leader cut off
	// or killed may lose acknowledged writes (as in Kafka). It exists to
	// show that the runner finds such losses.
	Acks1 bool
}

type queueWorkload struct {
	cfg   WorkloadConfig
	o     QueueOptions
	group string
	s     *stopper // the offsets reader
	ps    *stopper // producers and churn (Drain stops them first)

	prods  []*kgo.Client
	reader *groupClient
	hw     *hwReader

	mu        sync.Mutex
	consumers []*consumer // by slot; Consumers of them
	next      int         // the next consumer number
	names     []string    // every consumer process started
}

// keyPartitioner sends keyed records by Kafka's murmur2 hash of the key
// and unkeyed ones to the partition they name.
type keyPartitioner struct{ keyed kgo.Partitioner }

func (k keyPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return keyTopicPartitioner{k.keyed.ForTopic(t)}
}

type keyTopicPartitioner struct{ keyed kgo.TopicPartitioner }

func (keyTopicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (k keyTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Key != nil {
		return k.keyed.Partition(r, n)
	}
	return int(r.Partition)
}

// StartQueue starts the queue workload on cfg.Topic (which must exist).
// ctx bounds only the start; the workload runs until Stop.
func StartQueue(ctx context.Context, cfg WorkloadConfig, o QueueOptions) (Workload, error) {
	if o.Producers <= 0 {
		o.Producers = 2
	}
	if o.Consumers <= 0 {
		o.Consumers = 3
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Millisecond
	}
	switch o.Protocol {
	case "", ProtocolRandom:
		o.Protocol = ProtocolClassic
		if cfg.Rand.IntN(2) == 1 {
			o.Protocol = ProtocolConsumer
		}
	case ProtocolMixed, ProtocolClassic, ProtocolConsumer:
	default:
		return nil, fmt.Errorf("chaos: queue workload: unknown protocol %q", o.Protocol)
	}
	if cfg.Partitions <= 0 {
		return nil, errors.New("chaos: queue workload: no partitions")
	}
	w := &queueWorkload{cfg: cfg, o: o, group: cfg.Topic + "-group", s: newStopper(), ps: newStopper()}
	fail := func(err error) (Workload, error) {
		w.Stop(ctx)
		return nil, err
	}
	keyed := keyTopicPartitioner{kgo.StickyKeyPartitioner(nil).ForTopic(cfg.Topic)}
	for i := range o.Producers {
		name := fmt.Sprintf("producer-%d", i)
		opts := append(producerOpts(cfg.Seeds, name), kgo.DefaultProduceTopic(cfg.Topic),
			kgo.RecordPartitioner(keyPartitioner{kgo.StickyKeyPartitioner(nil)}),
			kgo.MaxBufferedRecords(20_000))
		if o.Acks1 {
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return fail(err)
		}
		w.prods = append(w.prods, cl)
		rnd := cfg.childRand()
		w.ps.goFn(func() { w.produce(name, cl, keyed, rnd) })
	}
	reader, err := newGroupClient(cfg.Seeds, "offsets-reader", w.group, cfg.Topic, cfg.Partitions)
	if err != nil {
		return fail(err)
	}
	w.reader = reader
	w.s.goFn(w.readOffsets)
	hw, err := newHWReader(cfg.Seeds, "hw-reader", cfg.Topic, cfg.Partitions)
	if err != nil {
		return fail(err)
	}
	w.hw = hw
	hwRand := cfg.childRand()
	w.s.goFn(func() { hw.run(w.s.ctx, cfg.Rec, "hw-reader", hwRand, 200*time.Millisecond) })
	w.consumers = make([]*consumer, o.Consumers)
	for slot := range w.consumers {
		c, err := w.startConsumer()
		if err != nil {
			return fail(err)
		}
		w.consumers[slot] = c
	}
	if o.Churn > 0 {
		rnd := cfg.childRand()
		w.ps.goFn(func() { w.churn(rnd) })
	}
	cfg.logger().Info("chaos: queue workload started", "topic", cfg.Topic, "group", w.group,
		"producers", o.Producers, "consumers", o.Consumers, "protocol", o.Protocol, "churn", o.Churn)
	return w, nil
}

func (w *queueWorkload) produce(name string, cl *kgo.Client, keyed keyTopicPartitioner, rnd *rand.Rand) {
	tick := time.NewTicker(w.o.Interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-w.ps.ctx.Done():
			return
		case <-tick.C:
		}
		r := &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", name, n)}
		if rnd.IntN(2) == 0 {
			r.Key = []byte(queueKeys[rnd.IntN(len(queueKeys))])
			r.Partition = int32(keyed.Partition(r, int(w.cfg.Partitions)))
		} else {
			r.Partition = rnd.Int32N(w.cfg.Partitions)
		}
		id := w.cfg.Rec.Invoke(Op{Process: name, Kind: OpSend, Topic: w.cfg.Topic,
			Partition: r.Partition, Key: string(r.Key), Value: string(r.Value)})
		// TryProduce never blocks: with the buffer full the record fails
		// at once with ErrMaxBuffered (Fail: never sent). Not w.s.ctx: a
		// record buffered at Stop still finishes (Stop flushes).
		cl.TryProduce(context.Background(), r, func(r *kgo.Record, err error) {
			w.cfg.Rec.Complete(id, func(op *Op) {
				op.Outcome = ProduceOutcome(err)
				if err != nil {
					op.Err = err.Error()
					return
				}
				op.Partition, op.Offset = r.Partition, r.Offset
			})
		})
	}
}

func (w *queueWorkload) readOffsets() {
	base := Op{Process: "offsets-reader", Topic: w.cfg.Topic, Group: w.group}
	for sleepCtx(w.s.ctx, 500*time.Millisecond) {
		ctx, cancel := context.WithTimeout(w.s.ctx, 5*time.Second)
		id := invokeFetch(w.cfg.Rec, base)
		offs, definite, err := w.reader.fetch(ctx)
		completeFetch(w.cfg.Rec, id, offs, definite, err)
		cancel()
	}
}

// churn closes a random consumer and starts a new one in its slot, every
// w.o.Churn on average (exponentially distributed).
func (w *queueWorkload) churn(rnd *rand.Rand) {
	for {
		d := max(time.Duration(rnd.ExpFloat64()*float64(w.o.Churn)), 100*time.Millisecond)
		slot := rnd.IntN(len(w.consumers))
		if !sleepCtx(w.ps.ctx, d) {
			return
		}
		w.mu.Lock()
		old := w.consumers[slot]
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(w.ps.ctx, 15*time.Second)
		if err := old.stop(ctx); err != nil {
			w.cfg.logger().Warn("chaos: queue: closing a consumer", "process", old.name, "err", err)
		}
		cancel()
		if w.ps.ctx.Err() != nil {
			return
		}
		c, err := w.startConsumer()
		if err != nil { // only a bad option does that
			w.cfg.logger().Error("chaos: queue: starting a consumer", "err", err)
			return
		}
		w.mu.Lock()
		w.consumers[slot] = c
		w.mu.Unlock()
	}
}

// ConsumerNames returns every consumer process the workload started so
// far, in order.
func (w *queueWorkload) ConsumerNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.names)
}

// Drain stops the producers (flushing what they buffered) and the
// churn, then waits until the consumers polled every send acknowledged
// in the topic (Jepsen's final polls), or ctx ends. The consumers and
// the offsets reader keep running until Stop.
func (w *queueWorkload) Drain(ctx context.Context) error {
	w.ps.cancel()
	errs := []error{waitGroupCtx(ctx, &w.ps.wg)}
	for _, cl := range w.prods {
		if err := cl.Flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("producer flush: %w", err))
		}
	}
	for {
		left := unpolled(w.cfg.Rec.Ops(), w.cfg.Topic)
		if left == 0 {
			return errors.Join(errs...)
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return errors.Join(append(errs, fmt.Errorf("%d acknowledged sends never polled: %w", left, ctx.Err()))...)
		}
	}
}

// unpolled counts the OK sends to topic whose value no poll returned.
func unpolled(ops []Op, topic string) int {
	polled := map[string]bool{}
	for i := range ops {
		if ops[i].Kind == OpPoll {
			for _, r := range ops[i].Records {
				polled[r.Value] = true
			}
		}
	}
	n := 0
	for i := range ops {
		if op := &ops[i]; op.Kind == OpSend && op.Outcome == OK && op.Topic == topic && !polled[op.Value] {
			n++
		}
	}
	return n
}

// Stop stops producing and flushes (bounded by ctx), stops the churn
// and the offsets reader, and closes every consumer (each commits what
// it polled first).
func (w *queueWorkload) Stop(ctx context.Context) error {
	w.ps.cancel()
	w.s.cancel()
	errs := []error{waitGroupCtx(ctx, &w.ps.wg), waitGroupCtx(ctx, &w.s.wg)}
	var wg sync.WaitGroup
	for _, cl := range w.prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cl.Flush(ctx); err != nil {
				w.mu.Lock()
				errs = append(errs, fmt.Errorf("producer flush: %w", err))
				w.mu.Unlock()
			}
			cl.Close() // fails what is still buffered: recorded Info
		}()
	}
	w.mu.Lock()
	cons := slices.Clone(w.consumers)
	w.mu.Unlock()
	for _, c := range cons {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.stop(ctx); err != nil {
				w.mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
				w.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if w.reader != nil {
		w.reader.close()
	}
	if w.hw != nil {
		w.hw.close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(errs...)
}

// consumer is one group member, "consumer-<k>".
type consumer struct {
	w      *queueWorkload
	name   string
	cl     *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the poll loop has exited and closed the client
}

// kgoLevel is the level of the consumers' kgo logs: Info when
// CHAOS_KGO_LOG is set in the environment, Warn otherwise.
func (w *queueWorkload) kgoLevel() kgo.LogLevel {
	if os.Getenv("CHAOS_KGO_LOG") != "" {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelError // a fault's connection warnings are expected
}

// startConsumer starts consumer number w.next.
func (w *queueWorkload) startConsumer() (*consumer, error) {
	w.mu.Lock()
	k := w.next
	w.next++
	name := fmt.Sprintf("consumer-%d", k)
	w.names = append(w.names, name)
	w.mu.Unlock()
	c := &consumer{w: w, name: name, done: make(chan struct{})}
	opts := append(clientOpts(w.cfg.Seeds, name), kgo.WithLogger(kgoLogger{w.cfg.logger().With("process", name), w.kgoLevel()}),
		kgo.ConsumerGroup(w.group), kgo.ConsumeTopics(w.cfg.Topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
	)
	opts = append(opts, NewAssignment(w.cfg.Rec, name, w.cfg.Topic, w.group).Opts()...)
	if w.o.Protocol == ProtocolConsumer || (w.o.Protocol == ProtocolMixed && k%2 == 1) {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	c.cl = cl
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c, nil
}

func (c *consumer) run() {
	defer close(c.done)
	rec, topic := c.w.cfg.Rec, c.w.cfg.Topic
	lastCommit := time.Now()
	for c.ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(c.ctx, 300*time.Millisecond)
		start := rec.Since()
		fs := c.cl.PollFetches(pctx)
		cancel()
		var rs []Record
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic {
				rs = append(rs, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
		})
		if len(rs) > 0 {
			rec.Add(Op{Process: c.name, Kind: OpPoll, Start: start, End: rec.Since(), Outcome: OK,
				Topic: topic, Group: c.w.group, Records: rs})
		}
		if time.Since(lastCommit) >= 300*time.Millisecond {
			c.commit()
			lastCommit = time.Now()
		}
		c.cl.AllowRebalance()
	}
	c.commit() // what it polled since the last commit, before it leaves
	c.cl.CloseAllowingRebalance()
}

// commit commits the offsets after the records polled and not yet
// committed. kgo retries a commit on retriable errors by itself, so an
// error code may follow an attempt that was written: any error is Info.
func (c *consumer) commit() {
	topic := c.w.cfg.Topic
	unc := c.cl.UncommittedOffsets()[topic]
	if len(unc) == 0 {
		return
	}
	offs := map[int32]int64{}
	for p, eo := range unc {
		offs[p] = eo.Offset
	}
	id := invokeCommit(c.w.cfg.Rec, Op{Process: c.name, Topic: topic, Group: c.w.group}, offs)
	res := commitResult{ok: map[int32]int64{}, maybe: map[int32]int64{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: unc},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				res.maybe, res.err = offs, err
				return
			}
			seen := map[int32]bool{}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					o, asked := offs[p.Partition]
					if t.Topic != topic || !asked {
						continue
					}
					seen[p.Partition] = true
					if p.ErrorCode == 0 {
						res.ok[p.Partition] = o
						continue
					}
					res.maybe[p.Partition] = o
					if res.err == nil {
						res.err = fmt.Errorf("partition %d: %w", p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			}
			for p, o := range offs {
				if !seen[p] {
					res.maybe[p] = o
				}
			}
		})
	completeCommit(c.w.cfg.Rec, id, res)
}

// stop ends the poll loop (which commits and closes the client) and
// waits for it, bounded by ctx.
func (c *consumer) stop(ctx context.Context) error {
	c.cancel()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("not closed: %w", ctx.Err())
	}
}
