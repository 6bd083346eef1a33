package server

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func consumeN(t *testing.T, ctx context.Context, addr, topic string, from kgo.Offset, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: from}})}, opts...)...)
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

// Every codec round trips, and consuming from an offset in the middle of
// a compressed batch starts at that offset.
func TestCompressionCodecs(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		topic := "codec-" + name
		cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(50*time.Millisecond))
		var rs []*kgo.Record
		for i := 0; i < 10; i++ {
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte(name), 50)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := consumeN(t, ctx, addr, topic, kgo.NewOffset().At(5), 5)
		if got[0].Offset != 5 || string(got[0].Key) != "5" || !bytes.Equal(got[0].Value, rs[5].Value) {
			t.Fatalf("%s: first record from offset 5: offset %d key %q", name, got[0].Offset, got[0].Key)
		}
	}
}

// A record larger than the consumer's fetch limits still arrives (KIP-74).
func TestLargeRecordExceedsFetchLimits(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation())
	big := bytes.Repeat([]byte("b"), 300_000)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, ctx, addr, "big", kgo.NewOffset().AtStart(), 1, kgo.FetchMaxBytes(1000), kgo.FetchMaxPartitionBytes(1000))
	if !bytes.Equal(got[0].Value, big) {
		t.Fatalf("large record: %d bytes", len(got[0].Value))
	}
}

// A timestamp lookup lands inside one batch; LogAppendTime topics stamp
// the broker's time.
func TestTimestampsInsideBatchAndLogAppendTime(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ts"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")}, "lat"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic("ts"), kgo.ProducerLinger(100*time.Millisecond))
	var rs []*kgo.Record
	for i := 0; i < 10; i++ {
		rs = append(rs, &kgo.Record{Value: []byte("x"), Timestamp: time.UnixMilli(int64(5000 + 10*i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs, err := adm.ListOffsetsAfterMilli(ctx, 5031, "ts")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("ts", 0); o.Offset != 4 || o.Timestamp != 5040 {
		t.Fatalf("lookup 5031: offset %d timestamp %d, want 4 at 5040", o.Offset, o.Timestamp)
	}
	before := time.Now()
	lat := newClient(t, addr, kgo.DefaultProduceTopic("lat"))
	r := &kgo.Record{Value: []byte("x"), Timestamp: time.UnixMilli(1)}
	if err := lat.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, ctx, addr, "lat", kgo.NewOffset().AtStart(), 1)
	if got[0].Timestamp.Before(before.Add(-time.Second)) || got[0].Attrs.TimestampType() != 1 {
		t.Fatalf("LogAppendTime: timestamp %v type %d", got[0].Timestamp, got[0].Attrs.TimestampType())
	}
}

// Retention by bytes with 16 KiB segments and a 1 s check interval.
func TestRetentionBytes(t *testing.T) {
	b, addr := startBroker(t, "", "log.retention.check.interval.ms=1000")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	cfgs := map[string]*string{"segment.bytes": kadm.StringPtr("16384"), "retention.bytes": kadm.StringPtr("32768"), "file.delete.delay.ms": kadm.StringPtr("0")}
	if _, err := adm.CreateTopic(ctx, 1, 1, cfgs, "ret"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic("ret"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("r"), 1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	part, _ := b.partition("ret", 0)
	deadline := time.Now().Add(15 * time.Second)
	for part.LogStartOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("retention did not run: size %d, LSO %d, LEO %d, segments %d, cfg %+v", part.Size(), part.LogStartOffset(), part.LogEndOffset(), part.NumSegments(), part.Config().Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if size := part.Size(); size < 32768 || size > 32768+2*16384 {
		t.Fatalf("size after retention %d", size)
	}
	offs, _ := adm.ListStartOffsets(ctx, "ret")
	if o, _ := offs.Lookup("ret", 0); o.Offset != part.LogStartOffset() {
		t.Fatalf("earliest offset %d, log start %d", o.Offset, part.LogStartOffset())
	}
}

// A topic with compression.type=zstd stores zstd batches whatever the
// producer sent; consumers read the same records.
func TestCompressionTypeRecompresses(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")}, "rz"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, addr, kgo.DefaultProduceTopic("rz"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: bytes.Repeat([]byte("z"), 500)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	part, _ := b.partition("rz", 0)
	data, _, err := part.ReadBytes(nil, 0, 1<<20)
	if err != nil || len(data) < 61 || data[22]&7 != 4 {
		t.Fatalf("stored batch codec bits %d (%v)", data[22]&7, err)
	}
	got := consumeN(t, ctx, addr, "rz", kgo.NewOffset().AtStart(), 1)
	if string(got[0].Key) != "k" || len(got[0].Value) != 500 {
		t.Fatalf("record after recompression: %q %d", got[0].Key, len(got[0].Value))
	}
}
