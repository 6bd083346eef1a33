package main

// sluice produce: records from lines of stdin (or a file), as
// kafka-console-producer.sh and kcat -P do, with franz-go's producer.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { register(newProduceCmd) }

// produceOptions are sluice produce's checked flags.
type produceOptions struct {
	topic       string
	keySep      string // "": lines are values
	headers     []kgo.RecordHeader
	partition   int32 // -1: the default partitioner (by key hash, else sticky)
	compression kgo.CompressionCodec
	acks        kgo.Acks
	idempotent  bool
	file        string // "" or "-": stdin
}

func newProduceCmd() *cobra.Command {
	c := command("produce --topic T [--key-separator SEP] [--header k=v]... [--partition P] [--compression C] [--acks all|1|0] [--file FILE]", `Produces one record per line of stdin (or of --file) to a topic. As
kafka-console-producer.sh does it. With --key-separator each line is
KEY SEP VALUE, split at the first SEP (a line without it is a failure);
without, the line is the value and the key is null. Every record gets
the --header headers. --partition sends every record to one partition
(default: by the key's hash, as Kafka's default partitioner; records
without a key stick to a partition per batch). --compression is none,
gzip, snappy, lz4 or zstd (default none); --acks all (the default, with
idempotence), 1 (the leader) or 0 (no answer). A topic that does not
exist is not created (UNKNOWN_TOPIC_OR_PARTITION: sluice topic create
makes it). It prints how many records were produced to stderr, and fails
(exit 1) if any was not.`)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic` to produce to")
	keySep := fs.String("key-separator", "", "split each line into key and value at the first `SEP`")
	headers := fs.StringArray("header", nil, "a record header `key=value` (repeatable)")
	partition := fs.Int32("partition", -1, "produce to this `partition` only")
	compression := fs.String("compression", "none", "batch compression: `none|gzip|snappy|lz4|zstd`")
	acks := fs.String("acks", "all", "acknowledgements: `all|1|0`")
	file := fs.String("file", "", "read lines from `FILE` (default, or -: stdin)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		o := produceOptions{topic: *topic, keySep: *keySep, partition: *partition, file: *file, idempotent: true}
		if err := topicFlag(*topic); err != nil {
			return err
		}
		if fs.Changed("partition") && *partition < 0 {
			return usageErrorf("--partition must be 0 or more, not %d", *partition)
		}
		if fs.Changed("key-separator") && *keySep == "" {
			return usageErrorf("--key-separator must not be empty")
		}
		for _, h := range *headers {
			k, v, ok := strings.Cut(h, "=")
			if !ok || k == "" {
				return usageErrorf("--header: want key=value, got %q", h)
			}
			o.headers = append(o.headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		switch *compression {
		case "none":
			o.compression = kgo.NoCompression()
		case "gzip":
			o.compression = kgo.GzipCompression()
		case "snappy":
			o.compression = kgo.SnappyCompression()
		case "lz4":
			o.compression = kgo.Lz4Compression()
		case "zstd":
			o.compression = kgo.ZstdCompression()
		default:
			return usageErrorf("--compression must be none, gzip, snappy, lz4 or zstd, not %q", *compression)
		}
		switch *acks {
		case "all", "-1":
			o.acks = kgo.AllISRAcks()
		case "1":
			o.acks, o.idempotent = kgo.LeaderAck(), false
		case "0":
			o.acks, o.idempotent = kgo.NoAck(), false
		default:
			return usageErrorf("--acks must be all, 1 or 0, not %q", *acks)
		}
		in := cmd.InOrStdin()
		if o.file != "" && o.file != "-" {
			f, err := os.Open(o.file)
			if err != nil {
				return usageErrorf("--file: %v", err)
			}
			defer f.Close()
			in = f
		}
		return produce(cmd.Context(), cf, o, in, cmd.ErrOrStderr())
	}
	return c
}

// produce sends every line of in as a record, then waits for every
// answer.
func produce(ctx context.Context, cf *clusterFlags, o produceOptions, in io.Reader, stderr io.Writer) error {
	seeds, err := cf.seeds()
	if err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("sluice-produce"),
		kgo.DialTimeout(min(cf.timeout, 10*time.Second)),
		kgo.ProduceRequestTimeout(cf.timeout),
		kgo.RecordDeliveryTimeout(cf.timeout),
		kgo.RequiredAcks(o.acks),
		kgo.ProducerBatchCompression(o.compression),
		kgo.DefaultProduceTopic(o.topic),
		kgo.ProducerLinger(0),
	}
	dial, err := cf.dialOpts()
	if err != nil {
		return err
	}
	opts = append(opts, dial...)
	if !o.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		sent, acked atomic.Int64
		mu          sync.Mutex
		firstErr    error
		failed      int64
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			failed++
			mu.Unlock()
			return
		}
		acked.Add(1)
	}
	m := newMeter(stderr)
	br := bufio.NewReaderSize(in, 1<<20)
	var readErr error
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("reading input: %w", err)
			}
			break
		}
		b = bytes.TrimSuffix(b, []byte("\n"))
		b = bytes.TrimSuffix(b, []byte("\r"))
		r := &kgo.Record{Topic: o.topic, Partition: o.partition, Headers: o.headers}
		if o.keySep != "" {
			k, v, ok := bytes.Cut(b, []byte(o.keySep))
			if !ok {
				readErr = fmt.Errorf("line %d has no key separator %q", line, o.keySep)
				break
			}
			r.Key, r.Value = k, v
		} else {
			r.Value = b
		}
		cl.Produce(ctx, r, promise)
		n := sent.Add(1)
		m.show("produced %d records (%d acknowledged)", n, acked.Load())
		if ctx.Err() != nil {
			break
		}
	}
	if err := cl.Flush(ctx); err != nil && readErr == nil && ctx.Err() == nil {
		readErr = err
	}
	m.done()
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(stderr, "Produced %d of %d records to topic %s.\n", acked.Load(), sent.Load(), o.topic)
	switch {
	case firstErr != nil:
		return fmt.Errorf("%d records failed, the first with: %w", failed, firstErr)
	case readErr != nil:
		return readErr
	case ctx.Err() != nil && acked.Load() < sent.Load():
		return fmt.Errorf("interrupted with %d records unacknowledged", sent.Load()-acked.Load())
	}
	return nil
}
