package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOptions are a consume run's settings, checked.
type consumeOptions struct {
	seeds    []string
	dial     []kgo.Opt // TLS, if asked
	topic    string
	n        int64
	duration time.Duration
	group    string
	latest   bool
	// idle ends a --num-records run that sees no record for this long.
	idle time.Duration
}

func newConsumeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "consume --topic T (--num-records N | --duration D) [--group G] [--from earliest|latest]",
		Short: "Read records and measure throughput (as kafka-consumer-perf-test.sh)",
		Long: `Reads --num-records records (or for --duration) from --topic, as
kafka-consumer-perf-test.sh does, and prints records/s, MB/s (keys and
values), the time to the first record, and each record's latency from its
timestamp to its receipt: a figure that means something only when the
producers' clocks are this machine's and the topic keeps CreateTime
(as records from sluice perf produce on this machine).

Without --group it reads every partition directly (no group); with it,
as a member of that consumer group (the time to the first record then
includes joining). --from says where to start when there is no committed
offset: earliest (the default) or latest.

With --num-records it fails (exit 1) if no record arrives for --timeout
before the count is reached, as Kafka's tool stops then.`,
		Args: noArgs,
	}
	cf := addCommon(c.Flags())
	fs := c.Flags()
	group := fs.String("group", "", "consume as a member of this consumer `group` (default: no group, every partition directly)")
	from := fs.String("from", "earliest", "where to start without a committed offset: earliest or latest")
	idle := fs.Duration("timeout", 10*time.Second, "with --num-records, give up when no record arrives for this long (Kafka's --timeout)")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		seeds, err := cf.check()
		if err != nil {
			return err
		}
		o := consumeOptions{seeds: seeds, dial: cf.dial, topic: cf.topic, n: cf.n, duration: cf.duration, group: *group, idle: *idle}
		switch *from {
		case "earliest":
		case "latest":
			o.latest = true
		default:
			return usagef("--from must be earliest or latest, not %q", *from)
		}
		if *idle <= 0 {
			return usagef("--timeout must be positive, not %v", *idle)
		}
		st := newStats()
		r, err := runConsume(cmd.Context(), o, realClock{}, st, progressWriter(cmd))
		return finish(cmd, cf, r, st, err)
	}
	return c
}

// errIdle is a --num-records consume that saw no record for --timeout.
var errIdle = errors.New("no record arrived within --timeout")

// runConsume runs a consume load, recording into st.
func runConsume(ctx context.Context, o consumeOptions, clk clock, st *stats, progress io.Writer) (Result, error) {
	r := Result{Command: "consume", Mode: "max-rate", Topic: o.topic}
	reset := kgo.NewOffset().AtStart()
	if o.latest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := append(baseOpts(o.seeds, o.dial), kgo.ConsumeTopics(o.topic), kgo.ConsumeResetOffset(reset))
	if o.group != "" {
		opts = append(opts, kgo.ConsumerGroup(o.group))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	if err := ensureTopic(ctx, cl, o.topic, createFlags{}); err != nil {
		return r, err
	}

	stop := startProgress(progress, st, "received")
	start := clk.Now()
	var end time.Time
	if o.duration > 0 {
		end = start.Add(o.duration)
	}
	var got int64
	lastRecord := start
	var runErr error
	for (o.n == 0 || got < o.n) && ctx.Err() == nil {
		// One poll waits at most until the end, or the idle timeout.
		now := clk.Now()
		if !end.IsZero() && !now.Before(end) {
			break
		}
		deadline := end
		if o.n > 0 {
			idleAt := lastRecord.Add(o.idle)
			if !now.Before(idleAt) {
				runErr = fmt.Errorf("%w (%v) after %d of %d records", errIdle, o.idle, got, o.n)
				break
			}
			if deadline.IsZero() || idleAt.Before(deadline) {
				deadline = idleAt
			}
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fetches := cl.PollRecords(pctx, 10000)
		cancel()
		now = clk.Now()
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				ferr = fmt.Errorf("fetch %s-%d: %w", topic, p, err)
			}
		})
		for it := fetches.RecordIter(); !it.Done(); {
			rec := it.Next()
			if o.n > 0 && got >= o.n {
				break
			}
			got++
			st.record(now, now.Sub(rec.Timestamp), len(rec.Key)+len(rec.Value))
			lastRecord = now
		}
		if ferr != nil {
			runErr = ferr
			break
		}
	}
	stop()
	r = st.result(r, start)
	st.mu.Lock()
	if !st.first.IsZero() {
		ms := float64(st.first.Sub(start)) / float64(time.Millisecond)
		r.TimeToFirstRecordMs = &ms
	}
	st.mu.Unlock()
	return r, runErr
}
