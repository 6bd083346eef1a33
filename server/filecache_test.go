package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// openCountFS counts the files open through it and the most at once.
type openCountFS struct {
	vfs.FS
	open, peak atomic.Int64
}

type openCountFile struct {
	vfs.File
	fs     *openCountFS
	closed atomic.Bool
}

func (c *openCountFS) track(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	n := c.open.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return &openCountFile{File: f, fs: c}, nil
}

func (c *openCountFS) Create(name string) (vfs.File, error) { return c.track(c.FS.Create(name)) }
func (c *openCountFS) Open(name string) (vfs.File, error)   { return c.track(c.FS.Open(name)) }
func (c *openCountFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.track(c.FS.OpenReadWrite(name))
}

func (f *openCountFile) Close() error {
	if !f.closed.Swap(true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// produceSegments writes records of about 100 bytes to every partition of
// topic until each has at least segs segments; it returns the records
// written per partition.
func produceSegments(t *testing.T, ctx context.Context, b *Broker, addr, topic string, partitions int32, segs int) map[int32]int {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	counts := map[int32]int{}
	for {
		done := true
		for p := int32(0); p < partitions; p++ {
			part, ok := b.partition(topic, p)
			if !ok {
				t.Fatalf("partition %d not open", p)
			}
			if part.NumSegments() < segs {
				done = false
			}
		}
		if done {
			return counts
		}
		var rs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < 5; i++ {
				rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%06d-%080d", p, counts[p], 0)})
				counts[p]++
			}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// consumeAll reads every partition of topic from the start and checks
// each record's value names its partition and offset.
func consumeAll(t *testing.T, ctx context.Context, addr, topic string, counts map[int32]int) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	total := 0
	for p, n := range counts {
		offsets[p] = kgo.NewOffset().AtStart()
		total += n
	}
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxPartitionBytes(4096))
	got := 0
	for got < total {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, r := range fs.Records() {
			if want := fmt.Sprintf("p%d-%06d-%080d", r.Partition, r.Offset, 0); string(r.Value) != want {
				t.Fatalf("partition %d offset %d: %q, want %q", r.Partition, r.Offset, r.Value, want)
			}
			got++
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A broker with a small sluice.log.segment.open.files.max and many partitions of
// several segments each serves every record to franz-go while its open
// descriptors stay near 3 per partition plus the cache, not 3 per
// segment.
func TestSegmentFileCacheBoundsBroker(t *testing.T) {
	t.Parallel()
	const partitions, segs, cacheMax = 24, 6, 8
	fs := &openCountFS{FS: vfs.NewMem()}
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=/data",
		"log.segment.bytes=2048", fmt.Sprintf("sluice.log.segment.open.files.max=%d", cacheMax)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FS: fs, MetaFS: pebblevfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	awaitServing(t, b)
	t.Cleanup(func() { b.Close() })
	addr := b.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if res, err := adm.CreateTopic(ctx, partitions, 1, nil, "many"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitFor(t, 10*time.Second, "partitions to open", func() bool {
		_, ok := b.partition("many", partitions-1)
		return ok
	})
	counts := produceSegments(t, ctx, b, addr, "many", partitions, segs)
	totalSegs := 0
	for p := int32(0); p < partitions; p++ {
		part, _ := b.partition("many", p)
		totalSegs += part.NumSegments()
	}
	// Steady state: 3 per partition (the active segment), 3 for the
	// metadata log's (__cluster_metadata-0) and the cache; sealed
	// segments' index files close once the flusher synced them.
	bound := int64(3*partitions + 3 + cacheMax + 2)
	waitFor(t, 10*time.Second, fmt.Sprintf("at most %d open files (have %d)", bound, fs.open.Load()), func() bool { return fs.open.Load() <= bound })
	fs.peak.Store(fs.open.Load())
	consumeAll(t, ctx, addr, "many", counts)
	// While fetches are being written their files stay referenced (evicted
	// or not): at most a range or two per partition of a response.
	if p, limit := fs.peak.Load(), bound+2*partitions; p > limit {
		t.Errorf("%d files open at once while consuming, want at most %d", p, limit)
	}
	waitFor(t, 10*time.Second, "references to drop", func() bool { return b.files.Stats().Refs == 0 })
	waitFor(t, 10*time.Second, fmt.Sprintf("at most %d open files after consuming (have %d)", bound, fs.open.Load()), func() bool { return fs.open.Load() <= bound })
	st := b.files.Stats()
	if st.Open > cacheMax || st.Evictions == 0 {
		t.Errorf("cache stats %+v, want at most %d open and evictions", st, cacheMax)
	}
	t.Logf("%d partitions, %d segments: %d files open (3 per segment would be %d), peak %d while consuming; cache %+v",
		partitions, totalSegs, fs.open.Load(), 3*totalSegs, fs.peak.Load(), st)
}

// The zero-copy path (sendfile from OS files) releases every reference a
// fetch took once its response is written.
func TestZeroCopyReleasesFiles(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "log.segment.bytes=2048", "sluice.log.segment.open.files.max=2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if res, err := adm.CreateTopic(ctx, 3, 1, nil, "zc"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitFor(t, 10*time.Second, "partitions to open", func() bool {
		_, ok := b.partition("zc", 2)
		return ok
	})
	counts := produceSegments(t, ctx, b, addr, "zc", 3, 4)
	before := b.files.Stats()
	consumeAll(t, ctx, addr, "zc", counts)
	waitFor(t, 10*time.Second, "references to drop to 0", func() bool { return b.files.Stats().Refs == 0 })
	if st := b.files.Stats(); st.Opens == before.Opens || st.Open > 2 {
		t.Fatalf("cache stats %+v (before consuming %+v): want closed segments opened on demand, at most 2 open", st, before)
	}
}
