package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is one TCP connection speaking kmsg by hand, so a test can send
// requests back to back without waiting for their responses.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
	sent map[int32]kmsg.Request // by correlation id, until answered
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c), sent: map[int32]kmsg.Request{}}
}

// send writes req at the newest version the broker serves and returns its
// correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	return rc.sendAt(req, handlers[req.Key()].maxVersion)
}

// sendAt writes req at version and returns its correlation id.
func (rc *rawConn) sendAt(req kmsg.Request, version int16) int32 {
	rc.t.Helper()
	req.SetVersion(version)
	rc.corr++
	buf := make([]byte, 4, 256)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(rc.corr))
	buf = binary.BigEndian.AppendUint16(buf, 0xffff) // null client id
	if req.IsFlexible() {
		buf = append(buf, 0) // no tagged fields
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := rc.c.Write(buf); err != nil {
		rc.t.Fatal(err)
	}
	rc.sent[rc.corr] = req
	return rc.corr
}

// recv reads the next response, checks it answers the request with
// correlation id want, and decodes it.
func (rc *rawConn) recv(want int32) kmsg.Response {
	rc.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		rc.t.Fatalf("reading the response to request %d: %v", want, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.r, body); err != nil {
		rc.t.Fatal(err)
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != want {
		rc.t.Fatalf("got the response to request %d, want request %d's (out of order)", corr, want)
	}
	req := rc.sent[want]
	delete(rc.sent, want)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() { // its header never has tags
		kmsg.SkipTags(&rd)
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		rc.t.Fatalf("decoding the response to request %d: %v", want, err)
	}
	return resp
}

// pipeProduce is a produce request of idempotent producer 1 (epoch 0):
// for each partition, n records from sequence seq.
type pipeBatch struct {
	partition int32
	seq       int32
	n         int
}

func pipeProduce(b *Broker, topic string, acks int16, batches ...pipeBatch) *kmsg.ProduceRequest {
	tp, _ := b.meta.Topic(topic)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, tp.ID
	for _, pb := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = pb.partition
		rp.Records = idemBatch(1, 0, pb.seq, pb.n)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func listLatest(b *Broker, topic string, partitions ...int32) *kmsg.ListOffsetsRequest {
	tp, _ := b.meta.Topic(topic)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Name
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// checkProduced checks a produce response's base offsets, partition by
// partition ("partition:offset").
func checkProduced(t *testing.T, resp kmsg.Response, want ...string) {
	t.Helper()
	var got []offsetAt
	for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range rt.Partitions {
			got = append(got, offsetAt{rp.Partition, rp.ErrorCode, rp.BaseOffset})
		}
	}
	checkOffsets(t, "produced at", got, want)
}

// checkLatest checks a ListOffsets response the same way.
func checkLatest(t *testing.T, resp kmsg.Response, want ...string) {
	t.Helper()
	var got []offsetAt
	for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			got = append(got, offsetAt{rp.Partition, rp.ErrorCode, rp.Offset})
		}
	}
	checkOffsets(t, "latest offsets", got, want)
}

// offsetAt is one partition's answer: its error code and offset.
type offsetAt struct {
	partition int32
	code      int16
	offset    int64
}

func checkOffsets(t *testing.T, what string, got []offsetAt, want []string) {
	t.Helper()
	var strs []string
	for _, g := range got {
		if g.code != 0 {
			t.Fatalf("partition %d: %v", g.partition, kerr.ErrorForCode(g.code))
		}
		strs = append(strs, fmt.Sprintf("%d:%d", g.partition, g.offset))
	}
	if strings.Join(strs, " ") != strings.Join(want, " ") {
		t.Fatalf("%s %v, want %v", what, strs, want)
	}
}

// Requests sent back to back on one connection, produces (idempotent, with
// consecutive sequences to the same partitions, one with acks=0) mixed with
// Metadata and ListOffsets, are answered in request order; every produce
// lands at the next offsets (no OUT_OF_ORDER_SEQUENCE), and a ListOffsets
// sees the records of the produces before it.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	if _, err := b.createTopic("pipe", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	p1 := rc.send(pipeProduce(b, "pipe", -1, pipeBatch{0, 0, 3}))
	p2 := rc.send(pipeProduce(b, "pipe", -1, pipeBatch{0, 3, 2}, pipeBatch{1, 0, 4}))
	md := rc.send(kmsg.NewPtrMetadataRequest())
	p3 := rc.send(pipeProduce(b, "pipe", -1, pipeBatch{0, 5, 1}))
	lo1 := rc.send(listLatest(b, "pipe", 0, 1))
	rc.send(pipeProduce(b, "pipe", 0, pipeBatch{1, 4, 1})) // acks=0: no answer
	p4 := rc.send(pipeProduce(b, "pipe", -1, pipeBatch{1, 5, 2}))
	p5 := rc.send(pipeProduce(b, "pipe", -1, pipeBatch{0, 6, 1}, pipeBatch{1, 7, 1}))
	lo2 := rc.send(listLatest(b, "pipe", 0, 1))

	checkProduced(t, rc.recv(p1), "0:0")
	checkProduced(t, rc.recv(p2), "0:3", "1:0")
	if m := rc.recv(md).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
		t.Fatalf("metadata: %d brokers", len(m.Brokers))
	}
	checkProduced(t, rc.recv(p3), "0:5")
	checkLatest(t, rc.recv(lo1), "0:6", "1:4")
	checkProduced(t, rc.recv(p4), "1:5")
	checkProduced(t, rc.recv(p5), "0:6", "1:7")
	checkLatest(t, rc.recv(lo2), "0:7", "1:8")
}

// gatedSyncs holds every fsync of the files whose path contains match
// until released, once armed.
type gatedSyncs struct {
	match   string
	armed   atomic.Bool
	release chan struct{}
	once    sync.Once
	inSync  atomic.Int32 // fsyncs waiting at the gate
}

func (g *gatedSyncs) MaybeError(op vfs.Op, path string) error {
	if op != vfs.OpSync || !g.armed.Load() || !strings.Contains(path, g.match) {
		return nil
	}
	g.inSync.Add(1)
	<-g.release
	g.inSync.Add(-1)
	return nil
}

func (g *gatedSyncs) open() { g.once.Do(func() { close(g.release) }) }

// startGatedBroker starts a broker whose partition files go through an FS
// that holds fsyncs at g.
func startGatedBroker(t *testing.T, g *gatedSyncs) *Broker {
	t.Helper()
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(cfg, Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		FS:     vfs.NewErrorFS(vfs.Default, g),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	awaitServing(t, b)
	t.Cleanup(func() { b.Close() })
	t.Cleanup(g.open) // first: Close syncs
	return b
}

// pollUntil polls cond every millisecond until it holds or the deadline
// passes.
func pollUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// While a produce waits for its fsync, the connection's next produce
// requests are read and proposed (each waiting for its own commit), up to
// maxInFlight of them; past that the broker stops reading the connection.
// Then all are answered in order. With one request served at a time, the
// second would not be proposed before the first's fsync completed. (The
// raft worker writes the batches proposed during an fsync once it
// returns, in one write and one fsync: the log end offset is not what
// shows the overlap.)
func TestPipelinedProducesOverlapTheirFsyncs(t *testing.T) {
	g := &gatedSyncs{match: "pipe-0", release: make(chan struct{})}
	b := startGatedBroker(t, g)
	if _, err := b.createTopic("pipe", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	part, _ := b.partition("pipe", 0)
	g.armed.Store(true)
	rc := dialRaw(t, b.Addr().String())
	const n = maxInFlight + 2
	var corrs []int32
	for i := range n {
		corrs = append(corrs, rc.send(pipeProduce(b, "pipe", -1, pipeBatch{0, int32(2 * i), 2})))
	}
	// Every request up to the bound is proposed while the first fsync
	// is held: maxInFlight requests wait for their commits at once.
	if !pollUntil(10*time.Second, func() bool { return part.Proposals() == maxInFlight }) {
		t.Fatalf("%d produce requests proposed while the first fsync is held, want %d", part.Proposals(), maxInFlight)
	}
	if g.inSync.Load() == 0 {
		t.Fatal("no fsync is waiting at the gate")
	}
	if part.HighWatermark() != 0 {
		t.Fatalf("high watermark %d before any fsync completed", part.HighWatermark())
	}
	// The bound: request maxInFlight+1 is not read while maxInFlight
	// are unanswered. (A short look: a broken bound shows up at once.)
	if pollUntil(100*time.Millisecond, func() bool { return part.Proposals() > maxInFlight }) {
		t.Fatalf("%d produce requests proposed: more than %d in flight", part.Proposals(), maxInFlight)
	}
	g.open()
	for i, corr := range corrs {
		checkProduced(t, rc.recv(corr), fmt.Sprintf("0:%d", 2*i))
	}
	if part.HighWatermark() != 2*n {
		t.Fatalf("high watermark %d, want %d", part.HighWatermark(), 2*n)
	}
}

// A connection closed while produces wait for their fsyncs leaves nothing
// behind: the broker goes on serving, the records are committed, and
// Close returns (it waits for every connection's goroutines).
func TestConnectionClosedMidPipeline(t *testing.T) {
	g := &gatedSyncs{match: "pipe-0", release: make(chan struct{})}
	b := startGatedBroker(t, g)
	if _, err := b.createTopic("pipe", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	part, _ := b.partition("pipe", 0)
	g.armed.Store(true)
	rc := dialRaw(t, b.Addr().String())
	for i := range 3 {
		rc.send(pipeProduce(b, "pipe", -1, pipeBatch{0, int32(i), 1}))
	}
	// Mid-pipeline: the first batch written and its fsync held, so no
	// request can be answered. (The raft worker writes the next batches
	// once that fsync returns, unless they came before it took the first:
	// the log end offset is 1 to 3 here.) The three requests are in the
	// broker's socket before the close; it reads them all.
	if !pollUntil(10*time.Second, func() bool { return part.LogEndOffset() >= 1 && g.inSync.Load() > 0 }) {
		t.Fatalf("log end offset %d, %d fsyncs held; want the first batch written and its fsync held", part.LogEndOffset(), g.inSync.Load())
	}
	rc.c.Close()
	g.open()
	if !pollUntil(10*time.Second, func() bool { return part.HighWatermark() == 3 }) {
		t.Fatalf("high watermark %d, want 3", part.HighWatermark())
	}
	rc2 := dialRaw(t, b.Addr().String())
	checkLatest(t, rc2.recv(rc2.send(listLatest(b, "pipe", 0))), "0:3")
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs: a connection's goroutine is still running")
	}
	if n := handlerPanics.Load(); n > 0 {
		t.Fatalf("%d handler panics", n)
	}
}

// A franz-go idempotent producer with its defaults (up to five produce
// requests in flight) into 16 partitions: every record is acked once,
// without error, and reads back in produce order per partition.
func TestIdempotentProducerPipelined(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	const parts, n = 16, 20000
	if _, err := b.createTopic("pipe", parts, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("pipe"))
	acks := make([]atomic.Int32, n)
	offsets := make([][]int64, parts) // per partition: record i's offset at index of produce order
	order := make([][]int, parts)     // per partition: record numbers in ack order
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		r := &kgo.Record{Value: []byte(fmt.Sprintf("%08d", i))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			acks[i].Add(1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
			order[r.Partition] = append(order[r.Partition], i)
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	for i := range acks {
		if c := acks[i].Load(); c != 1 {
			t.Fatalf("record %d acked %d times", i, c)
		}
	}
	// Acks come in offset order per partition (franz-go's guarantee),
	// and produce order is offset order.
	for p := range parts {
		for j := 1; j < len(order[p]); j++ {
			if order[p][j] < order[p][j-1] || offsets[p][j] != offsets[p][j-1]+1 {
				t.Fatalf("partition %d: record %d at offset %d follows record %d at offset %d", p, order[p][j], offsets[p][j], order[p][j-1], offsets[p][j-1])
			}
		}
	}
	rd := newClient(t, addr, kgo.ConsumeTopics("pipe"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < n {
		fs := rd.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v (%d of %d records read)", err, len(got), n)
		}
		got = append(got, fs.Records()...)
	}
	next := make([]int, parts)
	for _, r := range got {
		p := r.Partition
		if next[p] >= len(order[p]) {
			t.Fatalf("partition %d: more records than acked", p)
		}
		if want := fmt.Sprintf("%08d", order[p][next[p]]); string(r.Value) != want || r.Offset != offsets[p][next[p]] {
			t.Fatalf("partition %d: read %q at offset %d, want %q at %d", p, r.Value, r.Offset, want, offsets[p][next[p]])
		}
		next[p]++
	}
}
