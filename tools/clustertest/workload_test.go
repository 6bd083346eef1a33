package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// ack is an acknowledged produce and when the client saw it.
type ack struct {
	Record
	at time.Time
}

// workload is one idempotent acks=all producer writing unique values
// "p0-<seq>" (padded with '.') round-robin over the partitions, and one
// consumer group member reading them, with its committed offsets polled.
type workload struct {
	t    *testing.T
	c    *cluster
	opts workloadOpts

	prod, cons *kgo.Client
	adm        *kadm.Client // for the committed offsets

	stopProd, stopCons context.CancelFunc
	prodDone, consDone sync.WaitGroup

	mu       sync.Mutex
	acked    []ack
	failed   map[string]error // values whose produce failed: they may or may not be in the log
	consumed []Record
	commits  []CommitSample
	produced int
}

func startWorkload(t *testing.T, c *cluster, opts workloadOpts) *workload {
	t.Helper()
	if opts.interval == 0 {
		opts.interval = 2 * time.Millisecond
	}
	if opts.group == "" {
		opts.group = opts.topic + "-group"
	}
	w := &workload{t: t, c: c, opts: opts, failed: map[string]error{}}
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
	)
	if err != nil {
		t.Fatal(err)
	}
	w.cons, err = kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(opts.topic),
		kgo.ConsumerGroup(opts.group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(500*time.Millisecond), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RequestTimeoutOverhead(3*time.Second)) // as the producer's
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
		w.mu.Lock()
		w.produced++
		w.mu.Unlock()
		// TryProduce never blocks: with the buffer full (a long outage)
		// the record fails at once with ErrMaxBuffered, never sent. Its
		// context is not ctx: records buffered when the producer stops
		// still finish (Flush waits for them, RecordDeliveryTimeout bounds
		// them).
		w.prod.TryProduce(context.Background(), r, func(r *kgo.Record, err error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if err != nil {
				w.failed[string(r.Value)] = err
				return
			}
			w.acked = append(w.acked, ack{Record{r.Partition, r.Offset, string(r.Value)}, time.Now()})
		})
	}
}

func (w *workload) consume(ctx context.Context) {
	defer w.consDone.Done()
	for ctx.Err() == nil {
		fs := w.cons.PollFetches(ctx)
		var rs []Record
		fs.EachRecord(func(r *kgo.Record) { rs = append(rs, Record{r.Partition, r.Offset, string(r.Value)}) })
		w.mu.Lock()
		w.consumed = append(w.consumed, rs...)
		w.mu.Unlock()
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

func (w *workload) sampleCommits(ctx context.Context) map[int32]int64 {
	resp, err := w.adm.FetchOffsets(ctx, w.opts.group)
	if err != nil || resp.Error() != nil {
		return nil
	}
	now := time.Now()
	out := map[int32]int64{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range resp.Sorted() {
		if o.Topic != w.opts.topic {
			continue
		}
		out[o.Partition] = o.At
		w.commits = append(w.commits, CommitSample{now, o.Partition, o.At})
	}
	return out
}

// Acks is how many produces were acknowledged so far.
func (w *workload) Acks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

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

// AckedBetween returns the acknowledgements seen in [from, to).
func (w *workload) AckedBetween(from, to time.Time) []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	var rs []Record
	for _, a := range w.acked {
		if !a.at.Before(from) && a.at.Before(to) {
			rs = append(rs, a.Record)
		}
	}
	return rs
}

// FirstAckAfter returns when partition p's first acknowledgement at or
// after t arrived (zero when none).
func (w *workload) FirstAckAfter(p int32, t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.acked {
		if a.Partition == p && !a.at.Before(t) {
			return a.at
		}
	}
	return time.Time{}
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
	w.cons.Close()
	w.stopCons = nil
}

// Finish stops the producer, waits until the group has committed up to
// the end of every partition, stops the consumer, reads the whole topic
// with a fresh consumer, and checks the history; healed is when the
// fault ended (the group's commits must move after it). With kcat
// installed it also checks that kcat reads every acknowledged record.
func (w *workload) Finish(healed time.Time) Result {
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
	log := w.readAll(starts, w.c.EndOffsets(w.opts.topic))
	w.mu.Lock()
	h := History{Log: log, LogStart: starts, Consumed: w.consumed, Commits: w.commits, Healed: healed,
		Covered: func(v string) bool { return strings.HasPrefix(v, "p0-") }}
	for _, a := range w.acked {
		h.Acked = append(h.Acked, a.Record)
	}
	produced, failed := w.produced, len(w.failed)
	var someFailure error
	for _, err := range w.failed {
		someFailure = err
		break
	}
	w.mu.Unlock()
	res := Check(h)
	w.t.Logf("workload: %d produced, %d acknowledged, %d failed (e.g. %v); %s", produced, len(h.Acked), failed, someFailure, res.Report(10))
	if !res.OK() {
		w.t.Errorf("the history has anomalies:\n%s", res.Report(20))
	}
	w.checkKcat(h)
	return res
}

// readAll reads every partition from starts to ends with a fresh direct
// consumer.
func (w *workload) readAll(starts, ends map[int32]int64) []Record {
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
	var log []Record
	w.c.poll("read every partition to its end", 60*time.Second, func(ctx context.Context) error {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			log = append(log, Record{r.Partition, r.Offset, string(r.Value)})
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
func (w *workload) checkKcat(h History) {
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
	var missing []Record
	for _, a := range h.Acked {
		if a.Offset >= h.LogStart[a.Partition] && got[position{a.Partition, a.Offset}] != a.Value {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		w.t.Errorf("kcat read %d records; %d acknowledged records missing or different, first: %v", len(got), len(missing), missing[:min(len(missing), 10)])
		return
	}
	w.t.Logf("kcat read %d records, every acknowledged one among them", len(got))
}

func tailString(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
