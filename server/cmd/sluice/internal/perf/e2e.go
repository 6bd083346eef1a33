package perf

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The headers e2e marks its records with: the run (8 random bytes, so
// another run's or producer's records in the topic are skipped) and the
// record's index (8 bytes, big-endian).
const (
	runHeader = "sluice-perf-run"
	seqHeader = "sluice-perf-seq"
)

// e2eOptions are an e2e run's settings, checked.
type e2eOptions struct {
	seeds      []string
	dial       []kgo.Opt // TLS, if asked
	topic      string
	n          int64
	duration   time.Duration
	recordSize int
	// rate is the target in records/s; 0 is max rate; oneAtATime sends
	// each record after the previous one arrived (EndToEndLatency's way).
	rate       float64
	oneAtATime bool
	create     createFlags
	clientOpts []kgo.Opt
	// wait bounds the wait for a record (one at a time) or for the last
	// records after the last send.
	wait time.Duration
}

func newE2ECmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "e2e --topic T (--num-records N | --duration D) [--throughput R]",
		Short: "Send and receive records in one process and measure the time between (as EndToEndLatency)",
		Long: `Sends records to --topic and reads them back in the same process, as Kafka's
EndToEndLatency does, and prints each record's latency from send to receipt.
The consumer reads every partition directly from its log end offset at the
start; records are marked with headers (sluice-perf-run, sluice-perf-seq),
so other records in the topic are skipped.

By default one record is in flight at a time: the next is sent when the
previous one arrives (EndToEndLatency's way; --linger defaults to 0 here).
--throughput R sends R records/s regardless (open loop, latency from each
record's due time); -1 or 0 as fast as possible.

Exits 1 if a record failed or did not arrive within --timeout.`,
		Args: noArgs,
	}
	cf := addCommon(c.Flags())
	pf := addProducerFlags(c, 0)
	fs := c.Flags()
	size := fs.Int("record-size", 1024, "each record's value, in `bytes`")
	rate := fs.Float64("throughput", 0, "target `records/s`; -1 or 0: as fast as possible (default: one record at a time)")
	wait := fs.Duration("timeout", 30*time.Second, "how long to wait for a record to arrive")
	crf := addCreateFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		seeds, err := cf.check()
		if err != nil {
			return err
		}
		popts, err := pf.opts(cmd)
		if err != nil {
			return err
		}
		if err := crf.check(); err != nil {
			return err
		}
		switch {
		case *size < 0:
			return usagef("--record-size must not be negative, not %d", *size)
		case *rate < -1 || (*rate > -1 && *rate < 0):
			return usagef("--throughput must be positive, or -1 or 0 for the maximum rate, not %v", *rate)
		case *wait <= 0:
			return usagef("--timeout must be positive, not %v", *wait)
		}
		o := e2eOptions{
			seeds: seeds, dial: cf.dial, topic: cf.topic, n: cf.n, duration: cf.duration, recordSize: *size,
			rate: max(*rate, 0), oneAtATime: !fs.Changed("throughput"), create: *crf, clientOpts: popts, wait: *wait,
		}
		st := newStats()
		r, err := runE2E(cmd.Context(), o, realClock{}, st, progressWriter(cmd))
		return finish(cmd, cf, r, st, err)
	}
	return c
}

// inflight are the records sent and not yet received: index to the time
// latency counts from.
type inflight struct {
	mu      sync.Mutex
	pending map[int64]time.Time
	arrived chan int64 // each received index, for one-at-a-time
}

func (f *inflight) add(i int64, from time.Time) {
	f.mu.Lock()
	f.pending[i] = from
	f.mu.Unlock()
}

// take removes i, reporting when it was sent.
func (f *inflight) take(i int64) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.pending[i]
	delete(f.pending, i)
	return t, ok
}

func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// runE2E runs an end-to-end load, recording into st.
func runE2E(ctx context.Context, o e2eOptions, clk clock, st *stats, progress io.Writer) (Result, error) {
	r := Result{Command: "e2e", Topic: o.topic}
	switch {
	case o.oneAtATime:
		r.Mode = "one-at-a-time"
	case o.rate > 0:
		r.Mode, r.TargetRate = "fixed-rate", o.rate
	default:
		r.Mode = "max-rate"
	}
	prod, err := kgo.NewClient(append(baseOpts(o.seeds, o.dial), o.clientOpts...)...)
	if err != nil {
		return r, err
	}
	defer prod.Close()
	if err := ensureTopic(ctx, prod, o.topic, o.create); err != nil {
		return r, err
	}
	ends, err := endOffsets(ctx, prod, o.topic)
	if err != nil {
		return r, err
	}
	at := map[int32]kgo.Offset{}
	for p, off := range ends {
		at[p] = kgo.NewOffset().At(off)
	}
	cons, err := kgo.NewClient(append(baseOpts(o.seeds, o.dial),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: at}),
		kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return r, err
	}
	defer cons.Close()

	run := make([]byte, 8)
	_, _ = rand.Read(run)
	fl := &inflight{pending: map[int64]time.Time{}, arrived: make(chan int64, 1)}
	cctx, stopConsumer := context.WithCancel(context.Background())
	var consumerErr error
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		consumerErr = receive(cctx, cons, clk, run, fl, st)
	}()

	pl := newPayload(o.recordSize)
	stop := startProgress(progress, st, "sent and received")
	start := clk.Now()
	var end time.Time
	if o.duration > 0 {
		end = start.Add(o.duration)
	}
	var sendErr error
	send := func(i int64, from time.Time) {
		seq := binary.BigEndian.AppendUint64(nil, uint64(i))
		rec := &kgo.Record{Topic: o.topic, Value: pl.value(i), Headers: []kgo.RecordHeader{{Key: runHeader, Value: run}, {Key: seqHeader, Value: seq}}}
		fl.add(i, from)
		prod.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err == nil {
				return
			}
			if _, ok := fl.take(i); !ok {
				return // arrived anyway
			}
			if interrupted(ctx, err) {
				st.abort()
			} else {
				st.fail(err)
			}
			select {
			case fl.arrived <- i:
			default:
			}
		})
	}
	if o.oneAtATime {
		sendErr = oneAtATime(ctx, o, clk, start, end, fl, send)
	} else {
		pace(ctx, clk, schedule{start: start, rate: o.rate, n: o.n, end: end}, 0, 1, send)
	}

	// Wait for the records still on their way, up to --timeout.
	fctx, cancel := context.WithTimeout(context.Background(), o.wait)
	if ctx.Err() != nil {
		cancel()
		fctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	}
	defer cancel()
	_ = prod.Flush(fctx)
	for fl.len() > 0 && fctx.Err() == nil && ctx.Err() == nil {
		select {
		case <-fctx.Done():
		case <-ctx.Done():
		case <-fl.arrived:
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopConsumer()
	<-consumed
	stop()
	r = st.result(r, start)
	if sendErr == nil && consumerErr != nil {
		sendErr = consumerErr
	}
	if n := fl.len(); sendErr == nil && n > 0 && ctx.Err() == nil {
		sendErr = fmt.Errorf("%d records sent but not received within --timeout (%v)", n, o.wait)
	}
	return r, sendErr
}

// oneAtATime sends record i+1 once record i arrived (or failed).
func oneAtATime(ctx context.Context, o e2eOptions, clk clock, start, end time.Time, fl *inflight, send func(int64, time.Time)) error {
	for i := int64(0); o.n == 0 || i < o.n; i++ {
		now := clk.Now()
		if ctx.Err() != nil || (!end.IsZero() && !now.Before(end)) {
			return nil
		}
		send(i, now)
		tm := time.NewTimer(o.wait)
		select {
		case <-fl.arrived:
			tm.Stop()
		case <-ctx.Done():
			tm.Stop()
			return nil
		case <-tm.C:
			return fmt.Errorf("record %d not received within --timeout (%v)", i, o.wait)
		}
	}
	return nil
}

// receive reads the run's records until ctx is done, recording each one's
// latency from its send.
func receive(ctx context.Context, cl *kgo.Client, clk clock, run []byte, fl *inflight, st *stats) error {
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		now := clk.Now()
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				ferr = fmt.Errorf("fetch %s-%d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			i, ok := seqOf(rec, run)
			if !ok {
				return
			}
			from, ok := fl.take(i)
			if !ok {
				return // a duplicate, or failed by its promise
			}
			st.record(now, now.Sub(from), len(rec.Key)+len(rec.Value))
			select {
			case fl.arrived <- i:
			default:
			}
		})
	}
	return nil
}

// seqOf is the index of a record of this run.
func seqOf(rec *kgo.Record, run []byte) (int64, bool) {
	var mine bool
	var seq []byte
	for _, h := range rec.Headers {
		switch h.Key {
		case runHeader:
			mine = bytes.Equal(h.Value, run)
		case seqHeader:
			seq = h.Value
		}
	}
	if !mine || len(seq) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(seq)), true
}
