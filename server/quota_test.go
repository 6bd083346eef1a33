package server

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// The sensor's rate and throttle are Kafka's: X = (O - T) / T × W.
func TestQuotaSensorThrottle(t *testing.T) {
	s := newRateSensor(2, 0)
	s.record(2000, 0, 1000)
	rate, span := s.rate(0, 1000)
	if span != 1000 || rate != 2000 {
		t.Fatalf("rate %v over %d ms, want 2000 over 1000", rate, span)
	}
	if got := throttleMs(rate, 1000, span); got != 1000 {
		t.Fatalf("throttle %d ms, want 1000", got)
	}
	if got := throttleMs(rate, 4000, span); got != 0 {
		t.Fatalf("throttle within the quota: %d", got)
	}
	// A tiny quota's throttle is bounded, not an overflow to a negative
	// (unthrottled) time.
	if got := throttleMs(rate, 1e-300, span); got != math.MaxInt32 {
		t.Fatalf("throttle under a tiny quota: %d, want MaxInt32", got)
	}
	// A second window: the rate is over both; past samples×window the
	// first is obsolete.
	s.record(1000, 1500, 1000)
	if rate, span = s.rate(1500, 1000); span != 1500 || rate != 2000 {
		t.Fatalf("rate %v over %d ms, want 2000 over 1500", rate, span)
	}
	// At 2.1 s: 1000 over 0.6 s, plus the one window the rate is
	// measured over at least (Kafka's Rate.windowSize): 1.6 s.
	if rate, span = s.rate(2100, 1000); span != 1600 || rate != 625 {
		t.Fatalf("rate %v over %d ms at 2.1 s, want 625 over 1600", rate, span)
	}
}

func TestIPEntityAddr(t *testing.T) {
	for name, want := range map[string]string{"": "", "10.0.0.1": "10.0.0.1", "::ffff:10.0.0.1": "10.0.0.1", "::1": "::1", "localhost": "127.0.0.1"} {
		got := ipEntityAddr(name)
		if got != want && !(name == "localhost" && got == "::1") {
			t.Errorf("ipEntityAddr(%q) = %q, want %q", name, got, want)
		}
	}
}

// Sensors not recorded for an hour are dropped (bounded memory).
func TestQuotaSensorExpiry(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "quota.window.num=2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	alterQuotas(ctx, t, adm, setQuota(qent("client-id", "<default>"), "request_percentage", 1000))
	q := b.quotas
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	q.mu.Lock()
	q.now = func() time.Time { return time.UnixMilli(now.Load()) }
	q.mu.Unlock()
	for _, c := range []string{"a", "b", "c"} {
		q.record(q.current(), quotaRequest, "ANONYMOUS", c, 1)
	}
	if n := q.sensorCount(); n < 3 {
		t.Fatalf("%d sensors, want at least 3", n)
	}
	now.Add(quotaSensorExpiry.Milliseconds() + time.Minute.Milliseconds())
	q.record(q.current(), quotaRequest, "ANONYMOUS", "d", 1)
	if n := q.sensorCount(); n != 1 {
		t.Fatalf("%d sensors after an hour idle, want 1", n)
	}
}

// At most quotaMaxSensors entities have a sensor of their own: a client
// changing its client id with each request under a default client-id
// quota shares one overflow sensor per kind past the cap (and is
// throttled there), the entities with a sensor keep theirs, and the
// sweep frees the idle ones, overflow included.
func TestQuotaSensorCap(t *testing.T) {
	q := newQuotaManager(nil, 2, 1, math.MaxInt32)
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	q.now = func() time.Time { return time.UnixMilli(now.Load()) }
	l := &quotaLimits{by: map[quotaKind]map[quotaEnt]float64{
		quotaProduce: {{hasClient: true}: 1000},
		quotaConnIP:  {{ip: true}: 1},
	}}
	q.limits.Store(l)
	for i := range quotaMaxSensors + 500 {
		if ms := q.record(l, quotaProduce, "u", fmt.Sprint("c", i), 1); ms != 0 {
			t.Fatalf("client c%d throttled %d ms within its quota", i, ms)
		}
	}
	if n := q.sensorCount(); n != quotaMaxSensors {
		t.Fatalf("%d sensors after %d client ids, want %d", n, quotaMaxSensors+500, quotaMaxSensors)
	}
	if ms := q.record(l, quotaProduce, "u", "rotating-1", 100000); ms <= 0 {
		t.Fatalf("a client past the cap over its quota: throttle %d ms", ms)
	}
	if ms := q.record(l, quotaProduce, "u", "rotating-2", 1); ms <= 0 {
		t.Fatalf("the next client id past the cap: throttle %d ms, want the shared sensor's", ms)
	}
	q.unrecord(l, quotaProduce, "u", "rotating-3", 100000)
	if ms := q.record(l, quotaProduce, "u", "c1", 1); ms != 0 {
		t.Fatalf("c1, which has its own sensor: throttle %d ms", ms)
	}
	// An address's connection_creation_rate past the cap: the overflow
	// sensor counts it, and the refused connection is taken back.
	addr := netip.MustParseAddr("10.0.0.1")
	if ipMs, _ := q.connectionThrottle(addr); ipMs != 0 {
		t.Fatalf("first connection past the cap throttled %d ms", ipMs)
	}
	if ipMs, _ := q.connectionThrottle(addr); ipMs <= 0 {
		t.Fatalf("second connection within a second past the cap: throttle %d ms", ipMs)
	}
	now.Add(quotaSensorExpiry.Milliseconds() + time.Minute.Milliseconds())
	if ms := q.record(l, quotaProduce, "u", "fresh", 1); ms != 0 {
		t.Fatalf("a new client after the sweep: throttle %d ms", ms)
	}
	if n := q.sensorCount(); n != 1 {
		t.Fatalf("%d sensors after an hour idle, want 1", n)
	}
	for k, s := range q.overflow {
		if s != nil {
			t.Errorf("overflow sensor of kind %d kept after an hour idle", k)
		}
	}
}

// Kafka's precedence: user and client id, the user's default client, the
// user, the default user's client id, the default user's default client,
// the default user, the client id, the default client.
func TestQuotaPrecedence(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	alter := func(es ...kadm.AlterClientQuotaEntry) { t.Helper(); alterQuotas(ctx, t, adm, es...) }
	const k = "producer_byte_rate"
	alter(setQuota(qent("user", "alice", "client-id", "app"), k, 1),
		setQuota(qent("user", "alice", "client-id", "<default>"), k, 2),
		setQuota(qent("user", "alice"), k, 3),
		setQuota(qent("user", "<default>", "client-id", "app"), k, 4),
		setQuota(qent("user", "<default>", "client-id", "<default>"), k, 5),
		setQuota(qent("user", "<default>"), k, 6),
		setQuota(qent("client-id", "app"), k, 7),
		setQuota(qent("client-id", "<default>"), k, 8))
	check := func(user, client string, want float64, wantKey sensorKey) {
		t.Helper()
		got, key, ok := b.quotas.current().quotaFor(quotaProduce, user, client)
		wantKey.kind = quotaProduce
		if !ok && want != 0 || got != want || ok && key != wantKey {
			t.Fatalf("quota of %s/%s = %v %+v %v, want %v %+v", user, client, got, key, ok, want, wantKey)
		}
	}
	remove := func(e kadm.ClientQuotaEntity) {
		t.Helper()
		alter(kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: k, Remove: true}}})
	}
	check("alice", "app", 1, sensorKey{user: "alice", client: "app"})
	remove(qent("user", "alice", "client-id", "app"))
	check("alice", "app", 2, sensorKey{user: "alice", client: "app"})
	remove(qent("user", "alice", "client-id", "<default>"))
	check("alice", "app", 3, sensorKey{user: "alice"}) // shared by alice's clients
	check("alice", "", 3, sensorKey{user: "alice"})
	remove(qent("user", "alice"))
	check("alice", "app", 4, sensorKey{user: "alice", client: "app"})
	check("bob", "other", 5, sensorKey{user: "bob", client: "other"})
	remove(qent("user", "<default>", "client-id", "app"))
	remove(qent("user", "<default>", "client-id", "<default>"))
	check("alice", "app", 6, sensorKey{user: "alice"})
	check("ANONYMOUS", "", 6, sensorKey{user: "ANONYMOUS"})
	remove(qent("user", "<default>"))
	check("alice", "app", 7, sensorKey{client: "app"})
	check("bob", "other", 8, sensorKey{client: "other"})
	check("bob", "", 0, sensorKey{}) // an empty client id matches no client-id quota
}

// quotaBroker starts a broker (with metrics) whose quotas are measured
// over 2 windows of 1 s (a rate over at least 1 s), creates topic and
// sets quotas.
func quotaBroker(t *testing.T, topic string, es ...kadm.AlterClientQuotaEntry) (*Broker, string) {
	t.Helper()
	b, addr := startBroker(t, "", "quota.window.num=2", "quota.window.size.seconds=1", "metrics.listen=127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	alterQuotas(ctx, t, adm, es...)
	return b, addr
}

// alterQuotas applies es and fails the test on any error.
func alterQuotas(ctx context.Context, t *testing.T, adm *kadm.Client, es ...kadm.AlterClientQuotaEntry) {
	t.Helper()
	res, err := adm.AlterClientQuotas(ctx, es)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %s: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
}

// incompressible returns n random bytes: compression leaves them as
// large on the wire.
func incompressible(n int) []byte {
	b := make([]byte, n)
	crand.Read(b)
	return b
}

// throttleSeen records the largest throttle a kgo client was told of.
type throttleSeen struct{ max atomic.Int64 }

func (h *throttleSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if ms := d.Milliseconds(); ms > h.max.Load() {
		h.max.Store(ms)
	}
}

// quotaBound is what a byte quota lets through in d: the rate over the
// measured window (at least samples-1 windows, here 1 s, added), plus
// what requests already in flight carry.
func quotaBound(rate float64, d time.Duration, inFlight int) float64 {
	return rate*(d.Seconds()+2) + float64(inFlight)
}

func TestQuotaProducerThrottled(t *testing.T) {
	t.Parallel()
	const rate = 100 << 10
	_, addr := quotaBroker(t, "qp", setQuota(qent("client-id", "qp"), "producer_byte_rate", rate))
	seen := &throttleSeen{}
	cl := newClient(t, addr, kgo.ClientID("qp"), kgo.DefaultProduceTopic("qp"), kgo.WithHooks(seen),
		kgo.ProducerBatchMaxBytes(32<<10), kgo.MaxBufferedRecords(64), kgo.ProducerLinger(0))
	const run = 4 * time.Second
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var acked atomic.Int64
	for ctx.Err() == nil {
		// Each its own random bytes: a quota counts bytes on the wire.
		cl.Produce(ctx, &kgo.Record{Value: incompressible(8 << 10)}, func(r *kgo.Record, err error) {
			if err == nil && time.Since(start) <= run {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	if seen.max.Load() <= 0 {
		t.Fatal("no throttle_time_ms seen by a producer over its quota")
	}
	if bound := quotaBound(rate, run, 5*(32<<10)); float64(acked.Load()) > bound {
		t.Fatalf("%d bytes acknowledged in %v under a %d B/s quota, bound %.0f", acked.Load(), run, rate, bound)
	}
}

func TestQuotaConsumerThrottled(t *testing.T) {
	t.Parallel()
	const rate = 100 << 10
	_, addr := quotaBroker(t, "qc", setQuota(qent("client-id", "qc"), "consumer_byte_rate", rate))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loader := newClient(t, addr, kgo.DefaultProduceTopic("qc"), kgo.ClientID("loader"), kgo.ProducerBatchMaxBytes(16<<10))
	for i := 0; i < 256; i++ { // 2 MiB
		loader.Produce(ctx, &kgo.Record{Value: incompressible(8 << 10)}, nil)
	}
	if err := loader.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := &throttleSeen{}
	cl := newClient(t, addr, kgo.ClientID("qc"), kgo.ConsumeTopics("qc"), kgo.WithHooks(seen),
		kgo.FetchMaxBytes(32<<10), kgo.FetchMaxPartitionBytes(32<<10))
	const run = 4 * time.Second
	start := time.Now()
	var got int64
	for time.Since(start) < run {
		pctx, pcancel := context.WithDeadline(ctx, start.Add(run))
		fs := cl.PollFetches(pctx)
		pcancel()
		if time.Since(start) > run {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got += int64(len(r.Value)) })
	}
	if seen.max.Load() <= 0 {
		t.Fatal("no throttle_time_ms seen by a consumer over its quota")
	}
	// kgo buffers one fetch ahead of what it returns.
	if bound := quotaBound(rate, run, 2*(40<<10)); float64(got) > bound {
		t.Fatalf("%d bytes consumed in %v under a %d B/s quota, bound %.0f", got, run, rate, bound)
	}
}

// A client that ignores throttle_time_ms and sends back to back is held
// by the muted connection: the broker reads its next request only once
// the throttle has passed. The raw connection is unauthenticated with a
// null client id: the quota of user ANONYMOUS applies.
func TestQuotaRawClientMuted(t *testing.T) {
	t.Parallel()
	const rate = 40 << 10
	b, addr := quotaBroker(t, "qr", setQuota(qent("user", "ANONYMOUS"), "producer_byte_rate", rate))
	rc := dialRaw(t, addr)
	tp, _ := b.meta.Topic("qr")
	recs := []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: make([]byte, 8<<10)}}
	body := batch.Build(batch.NewBuildOptions(), recs)
	produce := func() int32 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "qr", tp.ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = body
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.send(req)
	}
	const run = 4 * time.Second
	start := time.Now()
	var pending []int32
	for range maxInFlight {
		pending = append(pending, produce())
	}
	var acked int64
	var maxThrottle int32
	for time.Since(start) < run {
		rc.c.SetReadDeadline(start.Add(run))
		var size [4]byte
		if _, err := rc.r.Peek(len(size)); err != nil {
			break // the run is over while the connection is muted
		}
		rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp := rc.recv(pending[0]).(*kmsg.ProduceResponse)
		pending = append(pending[1:], produce()) // at once, whatever the throttle
		if time.Since(start) > run {
			break
		}
		if resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce: error %d", resp.Topics[0].Partitions[0].ErrorCode)
		}
		acked += int64(len(body))
		maxThrottle = max(maxThrottle, resp.ThrottleMillis)
	}
	if maxThrottle <= 0 {
		t.Fatal("no throttle_time_ms in the responses")
	}
	fams := scrape(t, b)
	if n := mustValue(t, fams, "sluice_quota_throttles_total"); n < 1 {
		t.Errorf("sluice_quota_throttles_total = %v", n)
	}
	if s := mustValue(t, fams, "sluice_quota_throttle_seconds_total"); s < float64(maxThrottle)/1000 {
		t.Errorf("sluice_quota_throttle_seconds_total = %v, below one throttle of %d ms", s, maxThrottle)
	}
	if bound := quotaBound(rate, run, maxInFlight*len(body)); float64(acked) > bound {
		t.Fatalf("%d bytes acknowledged in %v under a %d B/s quota, bound %.0f", acked, run, rate, bound)
	}
}

// A connection over its address's connection_creation_rate is closed
// without being served.
func TestQuotaConnectionCreationRate(t *testing.T) {
	t.Parallel()
	const rate = 2
	_, addr := quotaBroker(t, "qn", setQuota(qent("ip", "127.0.0.1"), "connection_creation_rate", rate))
	var mu sync.Mutex
	served, lastServed := 0, time.Duration(0)
	var wg sync.WaitGroup
	start := time.Now()
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !answered(addr) {
				return // closed: throttled
			}
			mu.Lock()
			served++
			lastServed = max(lastServed, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	// The rate is measured over at least one 1 s window: by the time the
	// last served connection was answered, at most rate × (that time +
	// 1 s) connections, and the one that went over, can have been let in.
	if bound := rate*(lastServed.Seconds()+1) + 1; float64(served) > bound {
		t.Fatalf("%d of 10 connections served within %v under a connection_creation_rate of %d (bound %.1f)", served, lastServed, rate, bound)
	}
}

// answered dials addr and reports whether an ApiVersions is answered
// (false: the connection was closed).
func answered(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	if _, err := c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("qn")).AppendRequest(nil, req, 1)); err != nil {
		return false
	}
	_, err = bufio.NewReader(c).Peek(4)
	return err == nil
}

// max.connection.creation.rate: the acceptor waits, so connections are
// served no faster than the rate allows (all of them, later).
func TestQuotaBrokerConnectionRate(t *testing.T) {
	t.Parallel()
	const rate = 2
	_, addr := startBroker(t, "", "quota.window.num=2", "max.connection.creation.rate=2")
	var mu sync.Mutex
	var at []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if answered(addr) {
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(at) != 6 {
		t.Fatalf("%d of 6 connections served: the broker-wide rate delays, never refuses", len(at))
	}
	slices.Sort(at)
	// By the time the k-th was answered, at most rate × (time + 1 s, the
	// window the rate is measured over at least) + 1 connections, the
	// ones from start-up included, can have been accepted.
	for k, d := range at {
		if bound := rate*(d.Seconds()+1) + 1; float64(k+1) > bound {
			t.Fatalf("connection %d answered at %v: above max.connection.creation.rate=%d (bound %.1f)", k+1, d, rate, bound)
		}
	}
}

// request_percentage counts the time requests take; its throttle is at
// most one window (Kafka's ClientRequestQuotaManager).
func TestQuotaRequestPercentage(t *testing.T) {
	t.Parallel()
	_, addr := quotaBroker(t, "qrp", setQuota(qent("client-id", "rp"), "request_percentage", 0.001))
	cl := newClient(t, addr, kgo.ClientID("rp"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var most int32
	for range 3 {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ThrottleMillis > 1000 {
			t.Fatalf("throttle %d ms, above one 1 s window", resp.ThrottleMillis)
		}
		most = max(most, resp.ThrottleMillis)
	}
	if most <= 0 {
		t.Fatal("no throttle under a request_percentage of 0.001")
	}
}

// A SASL user's quota applies to its connections by the principal's
// name; an unauthenticated client on the same broker is not held by it,
// and a user and client-id quota takes precedence over the user's.
func TestQuotaSaslUser(t *testing.T) {
	t.Parallel()
	_, plainAddr, saslAddr := startSaslBroker(t, "", "quota.window.num=2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, plainAddr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "qs"); err != nil {
		t.Fatal(err)
	}
	alterQuotas(ctx, t, adm, setQuota(qent("user", "alice"), "producer_byte_rate", 4096))
	// One 8 KiB record: twice alice's quota over the 1 s it is measured
	// over at least, a throttle of about 1 s.
	produce := func(addr string, opts ...kgo.Opt) int64 {
		seen := &throttleSeen{}
		cl := newClient(t, addr, append(opts, kgo.DefaultProduceTopic("qs"), kgo.WithHooks(seen))...)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: incompressible(8 << 10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return seen.max.Load()
	}
	if got := produce(plainAddr); got != 0 {
		t.Fatalf("ANONYMOUS throttled %d ms by alice's quota", got)
	}
	alice := kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
	if got := produce(saslAddr, alice); got <= 0 {
		t.Fatal("alice not throttled by her producer_byte_rate")
	}
	// Alice's client app has a quota of its own, which takes precedence.
	alterQuotas(ctx, t, adm, setQuota(qent("user", "alice", "client-id", "app"), "producer_byte_rate", 1<<30))
	if got := produce(saslAddr, alice, kgo.ClientID("app")); got != 0 {
		t.Fatalf("alice's client app throttled %d ms: the user quota won over user and client id", got)
	}
}

// A Fetch under a consumer_byte_rate carries at most the quota over the
// quota window (samples-1 windows, here 1 s), whatever its MaxBytes, as
// Kafka bounds it; KIP-74 lets one batch pass the bound.
func TestQuotaFetchBoundedByWindow(t *testing.T) {
	t.Parallel()
	const rate = 16 << 10
	_, addr := quotaBroker(t, "qb", setQuota(qent("client-id", "qb"), "consumer_byte_rate", rate))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loader := newClient(t, addr, kgo.DefaultProduceTopic("qb"), kgo.ClientID("loader"), kgo.ProducerBatchMaxBytes(10<<10))
	for range 10 {
		if err := loader.ProduceSync(ctx, &kgo.Record{Value: incompressible(8 << 10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(t, addr, kgo.ClientID("qb"), kgo.ConsumeTopics("qb"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(10<<20), kgo.FetchMaxPartitionBytes(10<<20))
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	var got int
	fs.EachRecord(func(r *kgo.Record) { got += len(r.Value) })
	if got == 0 || got > rate+(8<<10) {
		t.Fatalf("first fetch carried %d bytes of records under a %d B/s quota measured over 1 s", got, rate)
	}
}

// A throttled Fetch is answered at once with no records and the
// throttle (Kafka's getThrottledResponse), its bytes not counted; once
// the throttle has passed the client reads on.
func TestQuotaThrottledFetchEmpty(t *testing.T) {
	t.Parallel()
	_, addr := quotaBroker(t, "qf", setQuota(qent("user", "ANONYMOUS"), "consumer_byte_rate", 4096))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loader := newClient(t, addr, kgo.DefaultProduceTopic("qf"), kgo.ClientID("loader"), kgo.ProducerBatchMaxBytes(4<<10))
	for range 20 {
		if err := loader.ProduceSync(ctx, &kgo.Record{Value: incompressible(3 << 10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rc := dialRaw(t, addr) // null client id, unauthenticated: user ANONYMOUS
	var offset int64
	fetch := func() (throttle int32, records int) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "qf"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.recv(rc.sendAt(req, 12)).(*kmsg.FetchResponse)
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				for b := p.RecordBatches; len(b) >= 61; {
					n := int(binary.BigEndian.Uint32(b[8:12]))
					offset = int64(binary.BigEndian.Uint64(b[0:8])) + int64(binary.BigEndian.Uint32(b[23:27])) + 1
					records++
					b = b[min(len(b), 12+n):]
				}
			}
		}
		return resp.ThrottleMillis, records
	}
	throttled := false
	for i := 0; i < 50 && !throttled; i++ {
		th, n := fetch()
		if th > 0 {
			throttled = true
			if n != 0 {
				t.Fatalf("a throttled Fetch (%d ms) carried %d batches", th, n)
			}
		}
	}
	if !throttled {
		t.Fatal("50 back-to-back fetches of 3 KiB batches never throttled under a 4096 B/s quota")
	}
	before := offset
	for offset == before {
		if th, n := fetch(); th > 0 && n != 0 {
			t.Fatalf("a throttled Fetch (%d ms) carried %d batches", th, n)
		}
		if ctx.Err() != nil {
			t.Fatal("the consumer never read on after its throttle")
		}
	}
}
