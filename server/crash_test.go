package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The whole-broker crash test: a broker on crashable in-memory file
// systems (partitions on vfs.MemFS, metadata on Pebble's), a random
// workload of topic creation and deletion, acks=all produce, offset
// commits and config changes, a power loss at a random instant, and a
// restart on what the disks would hold. Every acknowledged record, commit,
// topic creation or deletion and config change must be there, and the
// partitions the broker opened must be exactly the metadata's, in folders
// whose partition.metadata names the right topic.

// crashHistory is what clients were told, in order of acknowledgement.
type crashHistory struct {
	mu      sync.Mutex
	records map[string]map[int64]string // "topic/partition" -> offset -> value
	commits map[string]int64            // "topic/partition" -> the last committed offset acknowledged
	created map[string]bool             // extra topics: true once created, false once deleted
	configs map[string]string           // topic -> the last segment.ms acknowledged
	pending string                      // the extra topic being created or deleted: either may have landed
	frozen  bool                        // cut taken: no new topic operation starts until the next round
}

func newCrashHistory() *crashHistory {
	return &crashHistory{records: map[string]map[int64]string{}, commits: map[string]int64{}, created: map[string]bool{}, configs: map[string]string{}}
}

// cut returns a copy of the history: everything acknowledged before it.
// No topic operation starts after it (one that lands between the cut and
// the crash would not be in the copy), but the one in flight, pending, goes
// on: the crash may still catch it.
func (h *crashHistory) cut() *crashHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen = true
	c := newCrashHistory()
	for k, m := range h.records {
		c.records[k] = map[int64]string{}
		for o, v := range m {
			c.records[k][o] = v
		}
	}
	for k, v := range h.commits {
		c.commits[k] = v
	}
	for k, v := range h.created {
		c.created[k] = v
	}
	for k, v := range h.configs {
		c.configs[k] = v
	}
	c.pending = h.pending
	return c
}

func (h *crashHistory) do(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// crashBroker starts a broker on the given file systems.
func crashBroker(t *testing.T, fs vfs.FS, mfs pebblevfs.FS) *Broker {
	t.Helper()
	// Index files are preallocated to log.index.size.max.bytes, on the
	// in-memory file systems as real bytes: at the 10 MiB default every
	// 4 KiB segment rolled allocated 20 MiB and every crash clone copied
	// it, most of this test's time. 4 KiB holds 512 offset entries, far
	// more than a 4 KiB segment gets (one per index.interval.bytes), and
	// recovery still meets a preallocated zero tail.
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=/data",
		"offsets.topic.num.partitions=3", "group.initial.rebalance.delay.ms=0", "log.segment.bytes=4096",
		"log.index.size.max.bytes=4096"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FS: fs, MetaFS: mfs})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	awaitServing(t, b)
	awaitCaughtUp(t, b)
	return b
}

func TestBrokerCrash(t *testing.T) {
	t.Parallel()
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { brokerCrashRun(t, seed) })
	}
}

func brokerCrashRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	fs := vfs.NewMem()
	var mfs pebblevfs.FS = pebblevfs.NewCrashableMem()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hist := newCrashHistory()
	data := []string{"data-a", "data-b"}
	for round := range 2 {
		// This round's history. The workers write to it alone: kgo may
		// run a produce promise after its client's Close returns, and
		// such a late ack belongs to this round, not to the next one's
		// history (hist is replaced by the cut below).
		cur := hist
		b := crashBroker(t, fs, mfs)
		addr := b.Addr().String()
		adm := kadm.NewClient(newClient(t, addr))
		if round == 0 {
			for i, name := range data {
				if _, err := adm.CreateTopic(ctx, int32(i+2), 1, nil, name); err != nil {
					t.Fatal(err)
				}
			}
		}
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		work := func(f func(r *rand.Rand)) {
			r := rand.New(rand.NewPCG(rng.Uint64(), 2))
			wg.Add(1)
			go func() { defer wg.Done(); f(r) }()
		}
		// Producers: idempotent, acks=all, keyed records.
		for range 2 {
			work(func(r *rand.Rand) {
				cl := newClient(t, addr, kgo.RecordRetries(3), kgo.ProducerLinger(time.Millisecond))
				defer cl.Close()
				for i := 0; wctx.Err() == nil; i++ {
					v := fmt.Sprintf("r%d-%d-%d", round, r.Uint32(), i)
					rec := &kgo.Record{Topic: data[r.IntN(len(data))], Key: []byte(strconv.Itoa(r.IntN(50))), Value: []byte(v)}
					cl.Produce(wctx, rec, func(rec *kgo.Record, err error) {
						if err != nil {
							return
						}
						cur.do(func() {
							k := fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)
							if cur.records[k] == nil {
								cur.records[k] = map[int64]string{}
							}
							cur.records[k][rec.Offset] = string(rec.Value)
						})
					})
					if i%50 == 49 {
						cl.Flush(wctx)
					}
				}
			})
		}
		// Offset commits, increasing per partition.
		work(func(r *rand.Rand) {
			cl := kadm.NewClient(newClient(t, addr))
			for next := int64(1); wctx.Err() == nil; next++ {
				topic := data[r.IntN(len(data))]
				p := int32(r.IntN(2))
				var offs kadm.Offsets
				offs.Add(kadm.Offset{Topic: topic, Partition: p, At: next*10 + int64(round)*100000, LeaderEpoch: -1})
				resp, err := cl.CommitOffsets(wctx, "crash-group", offs)
				if err == nil && resp.Error() == nil {
					cur.do(func() { cur.commits[fmt.Sprintf("%s/%d", topic, p)] = next*10 + int64(round)*100000 })
				}
			}
		})
		// Topic creation, deletion and config changes.
		work(func(r *rand.Rand) {
			cl := kadm.NewClient(newClient(t, addr))
			for i := 0; wctx.Err() == nil; i++ {
				name := fmt.Sprintf("extra-%d-%d", round, r.IntN(4))
				cur.mu.Lock()
				if cur.frozen {
					cur.mu.Unlock()
					return
				}
				exists := cur.created[name]
				cur.pending = name
				cur.mu.Unlock()
				switch {
				case r.IntN(3) == 0:
					ms := strconv.Itoa(1000000 + round*100000 + i) // increasing: a change in flight at the crash may land
					topic := data[r.IntN(len(data))]
					rs, err := cl.AlterTopicConfigs(wctx, []kadm.AlterConfig{{Name: "segment.ms", Value: &ms}}, topic)
					if err == nil && rs[0].Err == nil {
						cur.do(func() { cur.configs[topic] = ms })
					}
				case !exists:
					res, err := cl.CreateTopic(wctx, int32(1+r.IntN(3)), 1, nil, name)
					if err == nil && res.Err == nil {
						cur.do(func() { cur.created[name] = true })
					}
				default:
					rs, err := cl.DeleteTopics(wctx, name)
					if err == nil && rs[name].Err == nil {
						cur.do(func() { cur.created[name] = false })
					}
				}
			}
		})
		time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond) // the workload runs until the power goes
		acked := cur.cut()
		// The power goes: metadata first, then the partitions, so a
		// topic whose creation was acknowledged is in both.
		mfs = mfs.(*pebblevfs.MemFS).CrashClone(pebblevfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, uint64(round)))})
		fs = fs.CrashClone(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(round)+10))})
		stop()
		wg.Wait()
		b.Close()
		// What was acknowledged after the cut may be lost with the
		// power: the next rounds hold the restarted broker to the cut.
		hist = acked

		b = crashBroker(t, fs, mfs)
		checkCrashHistory(t, ctx, b, acked, data)
		if acked.pending != "" {
			// The operation in flight is settled now: its outcome is
			// what the next rounds must keep.
			_, ok := b.meta.Topic(acked.pending)
			hist.do(func() { hist.created[acked.pending], hist.pending = ok, "" })
		}
		hist.do(func() { hist.frozen = false })
		b.Close()
		t.Logf("round %d: %d partitions with acknowledged records, %d commits, %d extra topics", round, len(acked.records), len(acked.commits), len(acked.created))
	}
}

// checkCrashHistory checks a restarted broker against what was
// acknowledged before the crash.
func checkCrashHistory(t *testing.T, ctx context.Context, b *Broker, acked *crashHistory, data []string) {
	t.Helper()
	addr := b.Addr().String()
	adm := kadm.NewClient(newClient(t, addr))
	// Every acknowledged record at its offset.
	for k, want := range acked.records {
		topic, p := splitTP(k)
		part, ok := b.partition(topic, p)
		if !ok {
			t.Fatalf("%s: partition not open after the crash", k)
		}
		got := map[int64]string{}
		var buf []byte
		for off := part.LogStartOffset(); off < part.HighWatermark(); {
			var res segment.ReadResult
			var err error
			buf, res, err = part.ReadBytes(buf[:0], off, 1<<20)
			if err != nil {
				t.Fatalf("%s: read at %d: %v", k, off, err)
			}
			for rest := buf; len(rest) > 0; {
				h, err := batch.ParseHeader(rest)
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				if _, err := batch.Iterate(rest[:h.Size()], func(r *batch.Record) error {
					got[r.Offset] = string(r.Value)
					return nil
				}); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				rest = rest[h.Size():]
			}
			off = res.NextOffset
		}
		for o, v := range want {
			if got[o] != v {
				t.Errorf("%s: acknowledged %q at offset %d, found %q", k, v, o, got[o])
			}
		}
	}
	// Every acknowledged commit (or a later one that was in flight).
	fetched, err := adm.FetchOffsets(ctx, "crash-group")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range acked.commits {
		o, ok := fetched.Lookup(splitTP(k))
		if !ok || o.Err != nil || o.At < want {
			t.Errorf("%s: committed %d acknowledged, fetched %+v (%v)", k, want, o.At, o.Err)
		}
	}
	// Acknowledged creations and deletions, and configs.
	for name, exists := range acked.created {
		if name == acked.pending {
			continue
		}
		if _, ok := b.meta.Topic(name); ok != exists {
			t.Errorf("topic %s: exists %v after the crash, acknowledged %v", name, ok, exists)
		}
	}
	for topic, ms := range acked.configs {
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range c.Configs {
			if kv.Key == "segment.ms" {
				// The acknowledged value, or a later one in flight.
				if v, _ := strconv.Atoi(kv.MaybeValue()); v < mustAtoi(ms) {
					t.Errorf("topic %s: segment.ms %s after the crash, %s acknowledged", topic, kv.MaybeValue(), ms)
				}
			}
		}
	}
	// The open partitions are exactly the metadata's, each in a folder
	// naming its topic.
	want := map[topicPartition][16]byte{}
	for _, tm := range b.meta.Topics() {
		for p := int32(0); p < tm.Partitions; p++ {
			want[topicPartition{tm.Name, p}] = tm.ID
		}
	}
	b.mu.RLock()
	open := make([]topicPartition, 0, len(b.parts))
	for tp := range b.parts {
		open = append(open, tp)
	}
	b.mu.RUnlock()
	if len(open) != len(want) {
		t.Errorf("%d partitions open, the metadata names %d", len(open), len(want))
	}
	for _, tp := range open {
		id, ok := want[tp]
		if !ok {
			t.Errorf("%s-%d open but not in the metadata", tp.topic, tp.partition)
			continue
		}
		part, ok := b.partition(tp.topic, tp.partition)
		if !ok {
			t.Errorf("%s-%d closed while checking", tp.topic, tp.partition)
			continue
		}
		got, found, err := readPartitionMetadata(b.fs, part.Dir())
		if err != nil || !found || got != id {
			t.Errorf("%s-%d: partition.metadata %v %v %v, topic ID %v", tp.topic, tp.partition, got, found, err, id)
		}
	}
	// The broker still takes writes.
	cl := newClient(t, addr, kgo.DefaultProduceTopic(data[0]))
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("after"), Value: []byte("crash")}).FirstErr(); err != nil {
		t.Fatalf("produce after the crash: %v", err)
	}
}

// splitTP splits "topic/partition".
func splitTP(k string) (string, int32) {
	i := strings.LastIndexByte(k, '/')
	return k[:i], int32(mustAtoi(k[i+1:]))
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
