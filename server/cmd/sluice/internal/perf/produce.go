package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// payloadSlack is how many different values a payload yields: record i's
// value is the window at offset i mod payloadSlack of one random buffer.
const payloadSlack = 251

// payload is a run's record values, generated once: random letters A-Z,
// as ProducerPerformance's (so compression ratios compare), varied
// without copying by sliding a window over a slightly longer buffer.
type payload struct {
	buf  []byte
	size int
}

func newPayload(size int) payload {
	buf := make([]byte, size+payloadSlack)
	for i := range buf {
		buf[i] = byte('A' + rand.IntN(26))
	}
	return payload{buf, size}
}

// value is record i's value, size bytes that the client must not modify
// (kgo does not).
func (p payload) value(i int64) []byte {
	off := int(i % payloadSlack)
	return p.buf[off : off+p.size : off+p.size]
}

// producerFlags are produce's and e2e's producer settings.
type producerFlags struct {
	acks            string
	compression     string
	linger          time.Duration
	batchMaxBytes   int32
	idempotent      bool
	idempotentSet   bool
	maxBuffered     int
	deliveryTimeout time.Duration
}

func addProducerFlags(c *cobra.Command, linger time.Duration) *producerFlags {
	p := &producerFlags{}
	fs := c.Flags()
	fs.StringVar(&p.acks, "acks", "all", "the acknowledgements a record waits for (Kafka's acks): `all|1|0`")
	fs.StringVar(&p.compression, "compression", "none", "record batch compression: `none|gzip|snappy|lz4|zstd` (Kafka's compression.type)")
	fs.DurationVar(&p.linger, "linger", linger, "how long a partition's batch waits for more records (Kafka's linger.ms)")
	fs.Int32Var(&p.batchMaxBytes, "batch-max-bytes", 1000012, "the largest record batch, in `bytes` (Kafka's batch.size is the closest)")
	fs.BoolVar(&p.idempotent, "idempotent", true, "idempotent writes (Kafka's enable.idempotence; only with --acks all)")
	fs.IntVar(&p.maxBuffered, "max-buffered-records", 50000, "records a client buffers before Produce blocks (Kafka's buffer.memory, counted in records)")
	fs.DurationVar(&p.deliveryTimeout, "delivery-timeout", 2*time.Minute, "fail a record not acknowledged this long after Produce (Kafka's delivery.timeout.ms)")
	return p
}

// opts checks the flags and returns the clients' producer options.
func (p *producerFlags) opts(c *cobra.Command) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	p.idempotentSet = c.Flags().Changed("idempotent")
	switch p.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1", "0":
		if p.idempotentSet && p.idempotent {
			return nil, usagef("--idempotent needs --acks all (Kafka's enable.idempotence requires acks=all)")
		}
		p.idempotent = false
		if p.acks == "1" {
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
		} else {
			opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
		}
	default:
		return nil, usagef("--acks must be all, 1 or 0, not %q", p.acks)
	}
	if !p.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	codec, ok := codecs[strings.ToLower(p.compression)]
	if !ok {
		return nil, usagef("--compression must be none, gzip, snappy, lz4 or zstd, not %q", p.compression)
	}
	switch {
	case p.linger < 0 || p.linger > time.Minute:
		return nil, usagef("--linger must be between 0 and 1m, not %v", p.linger)
	case p.batchMaxBytes <= 0:
		return nil, usagef("--batch-max-bytes must be positive, not %d", p.batchMaxBytes)
	case p.maxBuffered <= 0:
		return nil, usagef("--max-buffered-records must be positive, not %d", p.maxBuffered)
	case p.deliveryTimeout <= 0:
		return nil, usagef("--delivery-timeout must be positive, not %v", p.deliveryTimeout)
	}
	return append(opts,
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(p.linger),
		kgo.ProducerBatchMaxBytes(p.batchMaxBytes),
		kgo.MaxBufferedRecords(p.maxBuffered),
		kgo.RecordDeliveryTimeout(p.deliveryTimeout),
	), nil
}

// produceOptions are a produce run's settings, checked.
type produceOptions struct {
	seeds      []string
	dial       []kgo.Opt // TLS, if asked
	topic      string
	n          int64
	duration   time.Duration
	recordSize int
	rate       float64 // records/s; 0 is max rate
	producers  int
	keys       int
	create     createFlags
	clientOpts []kgo.Opt
	// flushTimeout bounds the wait for the last acknowledgements.
	flushTimeout time.Duration
}

func newProduceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "produce --topic T (--num-records N | --duration D) [--record-size BYTES] [--throughput R]",
		Short: "Send records and measure their acknowledgement (as kafka-producer-perf-test.sh)",
		Long: `Sends --num-records records (or for --duration) of --record-size random
bytes to --topic, as kafka-producer-perf-test.sh does, from --producers
clients, and prints records/s, MB/s and the acknowledgement latency.

--throughput R sends R records/s in all (open loop: record i is due at
start + i/R, and its latency counts from then, so a stall shows in every
record it delayed); -1 or 0 (the default) sends as fast as the clients
accept records, and latency counts from each Produce call.

Without --create the topic must exist. Exits 1 if any record failed.`,
		Args: noArgs,
	}
	cf := addCommon(c.Flags())
	pf := addProducerFlags(c, 10*time.Millisecond)
	fs := c.Flags()
	size := fs.Int("record-size", 1024, "each record's value, in `bytes`")
	rate := fs.Float64("throughput", -1, "target `records/s` in all; -1 or 0: as fast as possible")
	producers := fs.Int("producers", 1, "the number of producer clients, each with its share of the rate")
	keys := fs.Int("keys", 0, "key the records with this many distinct keys, round robin (0: no keys; the sticky partitioner spreads them)")
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
		case *producers < 1:
			return usagef("--producers must be at least 1, not %d", *producers)
		case *keys < 0:
			return usagef("--keys must not be negative, not %d", *keys)
		}
		o := produceOptions{
			seeds: seeds, dial: cf.dial, topic: cf.topic, n: cf.n, duration: cf.duration,
			recordSize: *size, rate: max(*rate, 0), producers: *producers, keys: *keys,
			create: *crf, clientOpts: popts, flushTimeout: pf.deliveryTimeout + 10*time.Second,
		}
		st := newStats()
		r, err := runProduce(cmd.Context(), o, realClock{}, st, progressWriter(cmd))
		return finish(cmd, cf, r, st, err)
	}
	return c
}

// runProduce runs a produce load, recording into st, and returns its
// result. The error is a failure to run at all (no topic, no cluster);
// the records' failures are in the result.
func runProduce(ctx context.Context, o produceOptions, clk clock, st *stats, progress io.Writer) (Result, error) {
	r := Result{Command: "produce", Mode: "max-rate", Topic: o.topic}
	if o.rate > 0 {
		r.Mode, r.TargetRate = "fixed-rate", o.rate
	}
	clients := make([]*kgo.Client, o.producers)
	closeAll := func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}
	defer closeAll()
	for p := range clients {
		cl, err := kgo.NewClient(append(baseOpts(o.seeds, o.dial), o.clientOpts...)...)
		if err != nil {
			return r, err
		}
		clients[p] = cl
	}
	if err := ensureTopic(ctx, clients[0], o.topic, o.create); err != nil {
		return r, err
	}
	pl := newPayload(o.recordSize)
	keys := make([][]byte, o.keys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}

	stop := startProgress(progress, st, "sent")
	start := clk.Now()
	var d time.Time
	if o.duration > 0 {
		d = start.Add(o.duration)
	}
	sch := schedule{start: start, rate: o.rate, n: o.n, end: d}
	var wg sync.WaitGroup
	for p, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace(ctx, clk, sch, int64(p), int64(len(clients)), func(i int64, from time.Time) {
				rec := &kgo.Record{Topic: o.topic, Value: pl.value(i)}
				if len(keys) > 0 {
					rec.Key = keys[i%int64(len(keys))]
				}
				n := len(rec.Key) + len(rec.Value)
				cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
					now := clk.Now()
					switch {
					case err == nil:
						st.record(now, now.Sub(from), n)
					case interrupted(ctx, err):
						st.abort()
					default:
						st.fail(err)
					}
				})
			})
		}()
	}
	wg.Wait()

	// Wait for the last acknowledgements: after an interruption only
	// briefly (what is left is aborted by Close).
	ft := o.flushTimeout
	if ctx.Err() != nil {
		ft = 5 * time.Second
	}
	fctx, cancel := context.WithTimeout(context.Background(), ft)
	defer cancel()
	var flushErr error
	for _, cl := range clients {
		if err := cl.Flush(fctx); err != nil && flushErr == nil {
			flushErr = err
		}
	}
	closeAll()
	clients = nil
	stop()
	r = st.result(r, start)
	if flushErr != nil && ctx.Err() == nil && !errors.Is(flushErr, context.Canceled) {
		return r, fmt.Errorf("records not acknowledged within %v: %w", ft, flushErr)
	}
	return r, nil
}
