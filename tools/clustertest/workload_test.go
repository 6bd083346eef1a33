package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/chaos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// workloadOpts configures startWorkload.
type workloadOpts struct {
	topic      string
	partitions int32
	interval   time.Duration // between produces; 2ms when 0
	valueBytes int           // values padded to this size (0: unpadded)
	group      string        // the consumer group; topic+"-group" when ""
}

// The processes of the workload's history, as tools/chaos names its
// queue workload's.
const (
	producerProc = "producer-0"
	consumerProc = "consumer-0"
	offsetsProc  = "offsets-reader"
)

// uniquePrefix starts every value the producer writes, and only those:
// the scenarios' probe records may be written twice.
const uniquePrefix = "p0-"

// workload is one idempotent acks=all producer writing unique values
// "p0-<seq>" (padded with '.') round-robin over the partitions, and one
// consumer group member reading them, with its committed offsets polled.
// It records what they do as a tools/chaos history (OpSend, OpPoll,
// OpAssign, OpFetchOffsets), which Finish checks with chaos.Check.
type workload struct {
	t     *testing.T
	c     *cluster
	opts  workloadOpts
	start time.Time // the history's time 0
	rec   *chaos.Recorder

	prod, cons *kgo.Client
	adm        *kadm.Client // for the committed offsets

	stopProd, stopCons context.CancelFunc
	prodDone, consDone sync.WaitGroup
}

func startWorkload(t *testing.T, c *cluster, opts workloadOpts) *workload {
	t.Helper()
	if opts.interval == 0 {
		opts.interval = 2 * time.Millisecond
	}
	if opts.group == "" {
		opts.group = opts.topic + "-group"
	}
	w := &workload{t: t, c: c, opts: opts, start: time.Now()}
	w.rec = chaos.NewRecorder(w.start)
	var err error
	w.prod, err = kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(opts.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default
		kgo.RecordRetries(1<<30),
		kgo.ProduceRequestTimeout(5*time.Second),
		// A paused (SIGSTOPped) broker keeps its connections open and
		// never answers: kgo gives up on a request to it after the
		// request's timeout plus this overhead (10 s by default, so a
		// produce 15 s and then a metadata request to the same broker
		// 10 s more). 3 s bounds that outage to about 8 s + 3 s.
		kgo.RequestTimeoutOverhead(3*time.Second),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.MaxBufferedRecords(20_000),
		// kgo refreshes metadata at most every MetadataMinAge (5 s by
		// default), so after a failover the client, not the cluster,
		// would hold the workload up; Kafka's Java client refreshes
		// after retry.backoff.ms (100 ms).
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	// BlockRebalanceOnPoll: a poll's records belong to the assignment
	// at its End (the history's OpAssign operations), as chaos's
	// consumers' do.
	assignment := chaos.NewAssignment(w.rec, consumerProc, opts.topic, opts.group)
	w.cons, err = kgo.NewClient(append(assignment.Opts(),
		kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(opts.topic),
		kgo.ConsumerGroup(opts.group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(500*time.Millisecond), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.BlockRebalanceOnPoll(),
		kgo.RequestTimeoutOverhead(3*time.Second), kgo.MetadataMinAge(250*time.Millisecond), // as the producer's
	)...)
	if err != nil {
		w.prod.Close()
		t.Fatal(err)
	}
	w.adm = kadm.NewClient(w.cons)
	t.Cleanup(func() {
		w.stopProducing()
		w.stopConsuming()
	})

	pctx, pcancel := context.WithCancel(c.ctx)
	w.stopProd = pcancel
	w.prodDone.Add(1)
	go w.produce(pctx)

	cctx, ccancel := context.WithCancel(c.ctx)
	w.stopCons = ccancel
	w.consDone.Add(2)
	go w.consume(cctx)
	go w.pollCommits(cctx)
	return w
}

func (w *workload) produce(ctx context.Context) {
	defer w.prodDone.Done()
	tick := time.NewTicker(w.opts.interval)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		v := fmt.Sprintf("p0-%d", seq)
		if len(v) < w.opts.valueBytes {
			v += strings.Repeat(".", w.opts.valueBytes-len(v))
		}
		r := &kgo.Record{Partition: int32(seq) % w.opts.partitions, Value: []byte(v)}
		id := w.rec.Invoke(chaos.Op{Process: producerProc, Kind: chaos.OpSend, Topic: w.opts.topic, Partition: r.Partition, Value: v})
		// TryProduce never blocks: with the buffer full (a long outage)
		// the record fails at once with ErrMaxBuffered, never sent. Its
		// context is not ctx: records buffered when the producer stops
		// still finish (Flush waits for them, RecordDeliveryTimeout bounds
		// them). A failed record may or may not be in the log (Info).
		w.prod.TryProduce(context.Background(), r, func(r *kgo.Record, err error) {
			w.rec.Complete(id, func(op *chaos.Op) {
				op.Outcome = chaos.ProduceOutcome(err)
				if err != nil {
					op.Err = err.Error()
					return
				}
				op.Partition, op.Offset = r.Partition, r.Offset
			})
		})
	}
}

func (w *workload) consume(ctx context.Context) {
	defer w.consDone.Done()
	for ctx.Err() == nil {
		// Bounded, as chaos's consumers poll: a poll waiting for records
		// blocks rebalances too (BlockRebalanceOnPoll), so an unbounded one
		// with nothing to fetch would hold off the rebalance that gets it
		// some.
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := w.rec.Since()
		fs := w.cons.PollFetches(pctx)
		cancel()
		var rs []chaos.Record
		fs.EachRecord(func(r *kgo.Record) {
			rs = append(rs, chaos.Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
		if len(rs) > 0 {
			w.rec.Add(chaos.Op{Process: consumerProc, Kind: chaos.OpPoll, Outcome: chaos.OK, Start: start, End: w.rec.Since(),
				Topic: w.opts.topic, Group: w.opts.group, Records: rs})
		}
		w.cons.AllowRebalance()
	}
}

func (w *workload) pollCommits(ctx context.Context) {
	defer w.consDone.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		w.sampleCommits(actx)
		cancel()
	}
}

// sampleCommits reads the group's committed offsets of the topic (an
// OpFetchOffsets of the history); nil when the read failed.
func (w *workload) sampleCommits(ctx context.Context) map[int32]int64 {
	id := w.rec.Invoke(chaos.Op{Process: offsetsProc, Kind: chaos.OpFetchOffsets, Topic: w.opts.topic, Group: w.opts.group})
	resp, err := w.adm.FetchOffsets(ctx, w.opts.group)
	if err == nil {
		err = resp.Error()
	}
	var out map[int32]int64
	if err == nil {
		out = map[int32]int64{}
		for _, o := range resp.Sorted() {
			if o.Topic == w.opts.topic && o.At >= 0 {
				out[o.Partition] = o.At
			}
		}
	}
	w.rec.Complete(id, func(op *chaos.Op) {
		if err != nil {
			op.Err = err.Error() // Info: a read that failed changes nothing
			return
		}
		op.Outcome, op.Offsets = chaos.OK, out
	})
	return out
}

// acked returns the acknowledged sends so far, in the order invoked.
func (w *workload) acked() []chaos.Op {
	var acks []chaos.Op
	for _, op := range w.rec.Ops() {
		if op.Kind == chaos.OpSend && op.Outcome == chaos.OK {
			acks = append(acks, op)
		}
	}
	return acks
}

// ackedAt is when the client saw the acknowledgement of send op.
func (w *workload) ackedAt(op chaos.Op) time.Time { return w.start.Add(op.End) }

// Acks is how many produces were acknowledged so far.
func (w *workload) Acks() int { return len(w.acked()) }

// WaitAcks waits until n more produces than now were acknowledged.
func (w *workload) WaitAcks(n int, d time.Duration) {
	w.t.Helper()
	want := w.Acks() + n
	w.c.poll(fmt.Sprintf("%d acknowledged produces", want), d, func(context.Context) error {
		if got := w.Acks(); got < want {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// WaitPolled waits until the consumer has polled a record: its group
// has joined and consumes, so a fault after it hits a consuming group.
func (w *workload) WaitPolled(d time.Duration) {
	w.t.Helper()
	start := time.Now()
	w.c.poll("the consumer polled a record", d, func(context.Context) error {
		for _, op := range w.rec.Ops() {
			if op.Kind == chaos.OpPoll && len(op.Records) > 0 {
				return nil
			}
		}
		return errors.New("no poll returned records")
	})
	w.t.Logf("the consumer polled its first records after %v", time.Since(start).Round(time.Millisecond))
}

// AckedBelow is how many acknowledged records are below starts (each
// partition's log start offset): removed by retention. (The history's
// Result.Expired counts only those no consumer read first.)
func (w *workload) AckedBelow(starts map[int32]int64) int {
	n := 0
	for _, a := range w.acked() {
		if a.Offset < starts[a.Partition] {
			n++
		}
	}
	return n
}

// AckedBetween returns the acknowledgements seen in [from, to).
func (w *workload) AckedBetween(from, to time.Time) []chaos.Record {
	var rs []chaos.Record
	for _, a := range w.acked() {
		if at := w.ackedAt(a); !at.Before(from) && at.Before(to) {
			rs = append(rs, chaos.Record{Partition: a.Partition, Offset: a.Offset, Value: a.Value})
		}
	}
	return rs
}

// FirstAckAfter returns when partition p's first acknowledgement at or
// after t arrived (zero when none).
func (w *workload) FirstAckAfter(p int32, t time.Time) time.Time {
	var first time.Time
	for _, a := range w.acked() {
		if at := w.ackedAt(a); a.Partition == p && !at.Before(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// stopProducing stops the producer and waits, bounded, until every
// buffered record is acknowledged or failed.
func (w *workload) stopProducing() {
	if w.stopProd == nil {
		return
	}
	w.stopProd()
	w.prodDone.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	if err := w.prod.Flush(ctx); err != nil {
		w.t.Errorf("producer flush: %v", err)
	}
	w.prod.Close()
	w.stopProd = nil
}

func (w *workload) stopConsuming() {
	if w.stopCons == nil {
		return
	}
	w.stopCons()
	w.consDone.Wait()
	w.cons.CloseAllowingRebalance()
	w.stopCons = nil
}

// Finish stops the producer, waits until the group has committed up to
// the end of every partition, stops the consumer, reads the whole topic
// with a fresh consumer, and checks the history with chaos.Check; healed
// is when the fault ended (the group's commits must move after it:
// History.CommitGroup). With kcat installed it also checks that kcat
// reads every acknowledged record.
func (w *workload) Finish(healed time.Time) *chaos.Result {
	w.t.Helper()
	w.stopProducing()
	ends := w.c.EndOffsets(w.opts.topic)
	w.c.poll("the consumer group committed the end of every partition", 60*time.Second, func(ctx context.Context) error {
		got := w.sampleCommits(ctx)
		for p, end := range ends {
			if got[p] < end {
				return fmt.Errorf("partition %d: committed %d of %d (all: %v)", p, got[p], end, got)
			}
		}
		return nil
	})
	w.stopConsuming()

	starts := w.c.StartOffsets(w.opts.topic)
	finished := w.rec.Since()
	h := w.history(healed, finished, starts, w.readAll(starts, w.c.EndOffsets(w.opts.topic)))
	res := chaos.Check(h)
	var failed []string
	for _, op := range h.Ops {
		if op.Kind == chaos.OpSend && op.Outcome != chaos.OK {
			failed = append(failed, op.Err)
		}
	}
	w.t.Logf("workload: %d produced, %d acknowledged, %d failed (e.g. %q), %d expired; %d polls returned %d records; %s",
		res.SendsOK+res.SendsFail+res.SendsInfo, res.SendsOK, len(failed), failed[:min(len(failed), 1)], res.Expired,
		res.Polls, res.RecordsSeen, res.Verdict())
	if !res.Valid() {
		var b strings.Builder
		if err := chaos.WriteText(&b, h, res); err != nil {
			w.t.Error(err)
		}
		w.t.Errorf("the history has anomalies:\n%s", headString(b.String(), 200))
	}
	w.checkKcat(h)
	return res
}

// history is the workload's history as tools/chaos checks it: the
// recorded operations, healed (zero: no fault), when the final read
// began, and that read (log, every partition of starts, from its start).
func (w *workload) history(healed time.Time, finished time.Duration, starts map[int32]int64, log []chaos.Record) *chaos.History {
	h := &chaos.History{
		Nodes:       len(w.c.nodes),
		Started:     w.start,
		Finished:    finished,
		Ops:         w.rec.Ops(),
		Final:       map[string]map[int32][]chaos.Record{w.opts.topic: {}},
		LogStart:    map[string]map[int32]int64{w.opts.topic: starts},
		Unique:      []string{uniquePrefix},
		CommitGroup: w.opts.group,
	}
	if !healed.IsZero() {
		h.Healed = max(healed.Sub(w.start), 1)
	}
	final := h.Final[w.opts.topic]
	for p := range starts {
		final[p] = []chaos.Record{}
	}
	for _, r := range log {
		final[r.Partition] = append(final[r.Partition], r)
	}
	return h
}

// readAll reads every partition from starts to ends with a fresh direct
// consumer.
func (w *workload) readAll(starts, ends map[int32]int64) []chaos.Record {
	w.t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p, s := range starts {
		offsets[p] = kgo.NewOffset().At(s)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.c.seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.opts.topic: offsets}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		w.t.Fatal(err)
	}
	defer cl.Close()
	next := map[int32]int64{}
	for p, s := range starts {
		next[p] = s
	}
	var log []chaos.Record
	w.c.poll("read every partition to its end", 60*time.Second, func(ctx context.Context) error {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			log = append(log, chaos.Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
		for p, end := range ends {
			if next[p] < end {
				return fmt.Errorf("partition %d: read to %d of %d (fetch errors: %v)", p, next[p], end, fs.Errors())
			}
		}
		return nil
	})
	return log
}

// kcatPath is kcat's path, "" when it is missing (which fails the test
// when SLUICE_REQUIRE_CLIENTS is set, as test.sh sets it).
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_CLIENTS") != "" {
			t.Fatal("kcat not installed (test.sh installs it)")
		}
		t.Log("kcat not installed: its check is skipped")
		return ""
	}
	return p
}

// checkKcat reads the topic with kcat (librdkafka) and checks that every
// acknowledged record still above the log start is there.
func (w *workload) checkKcat(h *chaos.History) {
	w.t.Helper()
	kcat := kcatPath(w.t)
	if kcat == "" {
		return
	}
	ctx, cancel := w.c.bounded(60 * time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(w.c.seeds(), ","), "-t", w.opts.topic,
		"-o", "beginning", "-e", "-q", "-f", "%p %o %s\n")
	out, err := cmd.Output()
	if err != nil {
		w.t.Errorf("kcat: %v\n%s", err, tailString(string(out), 20))
		return
	}
	got := map[position]string{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			continue
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 == nil && err2 == nil {
			got[position{int32(p), o}] = f[2]
		}
	}
	var missing []chaos.Record
	for _, a := range h.Ops {
		if a.Kind == chaos.OpSend && a.Outcome == chaos.OK && a.Offset >= h.LogStart[w.opts.topic][a.Partition] &&
			got[position{a.Partition, a.Offset}] != a.Value {
			missing = append(missing, chaos.Record{Partition: a.Partition, Offset: a.Offset, Value: a.Value})
		}
	}
	if len(missing) > 0 {
		w.t.Errorf("kcat read %d records; %d acknowledged records missing or different, first: %v", len(got), len(missing), missing[:min(len(missing), 10)])
		return
	}
	w.t.Logf("kcat read %d records, every acknowledged one among them", len(got))
}

// position is a record's place in the topic.
type position struct {
	partition int32
	offset    int64
}

// headString is the first lines of s, and how many it left out.
func headString(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) <= lines {
		return s
	}
	return strings.Join(ls[:lines], "\n") + fmt.Sprintf("\n... (%d more lines)", len(ls)-lines)
}

func tailString(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
