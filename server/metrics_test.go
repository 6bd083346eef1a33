package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/console"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scrape GETs /metrics of b and parses it with Prometheus's text parser.
func scrape(t *testing.T, b *Broker) map[string]*dto.MetricFamily {
	t.Helper()
	addr := b.MetricsAddr()
	if addr == nil {
		t.Fatal("no metrics listener")
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// metricValue is the value of the sample of name whose labels include
// labels (pairs: name, value), for counters, gauges and untyped samples;
// a histogram's is its sample count. ok is false when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// mustValue is metricValue that fails the test when there is none.
func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := metricValue(fams, name, labels...)
	if !ok {
		t.Fatalf("no sample %s%v", name, labels)
	}
	return v
}

// httpGet returns the status and body of a GET to the broker's metrics
// listener, without following redirects.
func httpGet(t *testing.T, b *Broker, path string) (int, string, http.Header) {
	t.Helper()
	return httpGetAs(t, b, path, "", "")
}

// httpGetAs GETs path on b's metrics listener with HTTP Basic credentials
// (none when user is ""), not following redirects.
func httpGetAs(t *testing.T, b *Broker, path, user, pass string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+b.MetricsAddr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func TestMetricsProduceFetch(t *testing.T) {
	b, addr := startBroker(t, "", "metrics.listen=127.0.0.1:0")
	before := scrape(t, b)
	if v, _ := metricValue(before, "sluice_requests_total", "api", "Produce"); v != 0 {
		t.Fatalf("Produce requests before producing: %v", v)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds", "sluice_controller_active", "sluice_connections"} {
		if _, ok := before[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("m"), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	const n = 10
	valueBytes := 0
	for range n {
		v := make([]byte, 100) // random: compression cannot shrink it below its size
		rand.Read(v)
		valueBytes += len(v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, b)
	if v := mustValue(t, fams, "sluice_requests_total", "api", "Produce"); v < n {
		t.Errorf("sluice_requests_total{api=Produce} = %v, want >= %d", v, n)
	}
	if v := mustValue(t, fams, "sluice_request_duration_seconds", "api", "Produce"); v < n {
		t.Errorf("Produce latency samples %v, want >= %d", v, n)
	}
	if v := mustValue(t, fams, "sluice_topic_bytes_in_total", "topic", "m"); v < float64(valueBytes) {
		t.Errorf("bytes in %v, want >= %d (the values alone)", v, valueBytes)
	}
	if v := mustValue(t, fams, "sluice_partition_log_end_offset", "topic", "m", "partition", "0"); v != n {
		t.Errorf("log end offset %v, want %d", v, n)
	}
	if v := mustValue(t, fams, "sluice_partition_high_watermark", "topic", "m", "partition", "0"); v != n {
		t.Errorf("high watermark %v, want %d", v, n)
	}
	if v := mustValue(t, fams, "sluice_partition_log_start_offset", "topic", "m", "partition", "0"); v != 0 {
		t.Errorf("log start offset %v, want 0", v)
	}
	if v := mustValue(t, fams, "sluice_partition_size_bytes", "topic", "m", "partition", "0"); v < float64(valueBytes) {
		t.Errorf("size %v, want >= %d", v, valueBytes)
	}
	if v := mustValue(t, fams, "sluice_fsync_duration_seconds"); v < 1 {
		t.Errorf("no fsync observed (log.flush.interval.messages=1 syncs every produce)")
	}
	for name, want := range map[string]float64{"sluice_controller_active": 1, "sluice_brokers_registered": 1, "sluice_brokers_fenced": 0,
		"sluice_under_replicated_partitions": 0, "sluice_offline_partitions": 0} {
		if v := mustValue(t, fams, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := mustValue(t, fams, "sluice_broker_up", "broker", "1"); v != 1 {
		t.Errorf("broker_up{1} = %v", v)
	}
	if v := mustValue(t, fams, "sluice_leader_partitions"); v < 1 || v != mustValue(t, fams, "sluice_partitions") {
		t.Errorf("leaders %v of %v partitions: a single node leads all", v, mustValue(t, fams, "sluice_partitions"))
	}
	if v := mustValue(t, fams, "sluice_connections"); v < 1 {
		t.Errorf("connections %v", v)
	}
	if v := mustValue(t, fams, "sluice_connections_accepted_total"); v < 1 {
		t.Errorf("accepted %v", v)
	}

	// A request answered with an error is counted under its Kafka name.
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "no-such-topic"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := cl.Broker(1).Request(ctx, req); err != nil { // to the broker itself, not routed
		t.Fatal(err)
	}
	fams = scrape(t, b)
	if v, _ := metricValue(fams, "sluice_request_errors_total", "api", "ListOffsets", "error", "UNKNOWN_TOPIC_OR_PARTITION"); v != 1 {
		t.Errorf("ListOffsets UNKNOWN_TOPIC_OR_PARTITION errors = %v, want 1", v)
	}
	if _, ok := metricValue(fams, "sluice_request_errors_total", "api", "Produce"); ok {
		t.Errorf("Produce errors counted for successful produces")
	}

	// Consuming counts bytes out.
	cons := newClient(t, addr, kgo.ConsumeTopics("m"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	fams = scrape(t, b)
	if v := mustValue(t, fams, "sluice_topic_bytes_out_total", "topic", "m"); v < float64(valueBytes) {
		t.Errorf("bytes out %v, want >= %d", v, valueBytes)
	}
	if v := mustValue(t, fams, "sluice_requests_total", "api", "Fetch"); v < 1 {
		t.Errorf("Fetch requests %v", v)
	}
	// ... and the records a consumer got: the console's consume rate.
	if v := mustValue(t, fams, "sluice_topic_records_out_total", "topic", "m"); v != n {
		t.Errorf("records out %v, want %d", v, n)
	}
	if got := b.metrics.fetchedOffsets()["m"]; got != n {
		t.Errorf("fetchedOffsets[m] = %d, want %d", got, n)
	}
	if status, body, _ := httpGet(t, b, "/ui/api/rates"); status != 200 || !strings.Contains(body, `"consumeFrom":"fetch"`) {
		t.Errorf("the console's rates: %d %s", status, body)
	}
}

func TestMetricsConsumerLag(t *testing.T) {
	b, addr := startBroker(t, "", "metrics.listen=127.0.0.1:0", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := newClient(t, addr, kgo.DefaultProduceTopic("lag"), kgo.AllowAutoTopicCreation())
	produce := func(k int) {
		for i := range k {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(10)
	// A consumer of group g reads the 10 records, commits and leaves.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("lag"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 10 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	fams := scrape(t, b)
	if v := mustValue(t, fams, "sluice_consumer_group_lag", "group", "g", "topic", "lag", "partition", "0"); v != 0 {
		t.Errorf("lag after committing everything = %v", v)
	}
	if v := mustValue(t, fams, "sluice_consumer_groups"); v != 1 {
		t.Errorf("groups = %v, want 1", v)
	}
	// The consumer falls behind: 7 more records.
	produce(7)
	fams = scrape(t, b)
	if v := mustValue(t, fams, "sluice_consumer_group_lag", "group", "g", "topic", "lag", "partition", "0"); v != 7 {
		t.Errorf("lag = %v, want 7", v)
	}
	// A commit through the admin API moves it.
	adm := kadm.NewClient(prod)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "lag", Partition: 0, At: 15, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, b)
	if v := mustValue(t, fams, "sluice_consumer_group_lag", "group", "g", "topic", "lag", "partition", "0"); v != 2 {
		t.Errorf("lag after committing 15 of 17 = %v, want 2", v)
	}
}

func TestHealthReadySingleNode(t *testing.T) {
	b, _ := startBroker(t, "", "metrics.listen=127.0.0.1:0")
	if code, body, _ := httpGet(t, b, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body, _ := httpGet(t, b, "/readyz"); code != 200 || strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, _, h := httpGet(t, b, "/"); code != http.StatusFound || h.Get("Location") != "/ui/" {
		t.Errorf("/: %d to %q, want a redirect to /ui/", code, h.Get("Location"))
	}
	if code, _, _ := httpGet(t, b, "/ui/"); code == http.StatusNotFound {
		t.Errorf("/ui/ is not mounted")
	}
	if code, _, _ := httpGet(t, b, "/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing: %d", code)
	}
}

// With metrics.listen empty (or none) there is no HTTP listener and no
// metrics work.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	for _, off := range []string{"metrics.listen=", "metrics.listen=none"} {
		b, _ := startBroker(t, "", off)
		if b.metrics != nil || b.MetricsAddr() != nil {
			t.Fatalf("metrics on with %s", off)
		}
	}
}

// The default metrics.listen, when another process holds its port, is a
// warning: the broker runs without it. (An explicit address fails Start:
// TestMetricsListenBadAddress.)
func TestMetricsDefaultPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", config.DefaultMetricsListen)
	if err != nil {
		t.Skipf("the default port is in use here: %v", err) // by a broker: the case itself
	}
	defer taken.Close()
	cfg, err := config.Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	b, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(); err != nil {
		t.Fatalf("Start with the default metrics port taken: %v", err)
	}
	if b.MetricsAddr() != nil {
		t.Fatal("a metrics listener although its port is taken")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "the default metrics.listen cannot be bound") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
}

// A metrics.listen address that cannot be bound fails Start, naming the
// key, and leaves no listener bound.
func TestMetricsListenBadAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg, err := config.Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir(), "metrics.listen=" + taken.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Start()
	if err == nil || !strings.Contains(err.Error(), "metrics.listen "+taken.Addr().String()) {
		t.Fatalf("Start: %v, want an error naming metrics.listen and the address", err)
	}
	if b.lns != nil || b.MetricsAddr() != nil {
		t.Fatal("listeners left bound after a failed Start")
	}
}

// A clustered broker is not ready before it registers: here the other
// voters of its quorum never start, so there is no controller.
func TestReadyzBeforeRegistration(t *testing.T) {
	ports := freePorts(t, 4)
	cfg, err := config.Load("", []string{"node.id=1", "log.dirs=" + t.TempDir(),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", ports[0], ports[1]),
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d,2@127.0.0.1:%d,3@127.0.0.1:%d", ports[1], ports[2], ports[3]),
		"metrics.listen=127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	code, body, _ := httpGet(t, b, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not registered") {
		t.Fatalf("/readyz: %d %q, want 503 not registered", code, body)
	}
	if code, _, _ := httpGet(t, b, "/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
}

// A clustered broker is ready once registered and unfenced, and not while
// fenced.
func TestReadyzFencedAndUnfenced(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 1, "metrics.listen=127.0.0.1:0")
	b := tc.broker(0)
	ready := func(want int, reason string) {
		t.Helper()
		eventually(t, 20*time.Second, "/readyz "+fmt.Sprint(want), func() error {
			code, body, _ := httpGet(t, b, "/readyz")
			if code != want || !strings.Contains(body, reason) {
				return fmt.Errorf("/readyz: %d %q", code, body)
			}
			return nil
		})
	}
	ready(200, "ready")
	b.cl.heartbeatsOff.Store(true) // the controller hears nothing: it fences the broker
	ready(503, "fenced")
	b.cl.heartbeatsOff.Store(false)
	ready(200, "ready")
}

// A broker that stops stays visible: the others' metrics show it down and
// their leaders' partitions under-replicated, every node logs a warning
// naming it, its address, for how long and its partitions by topic, and
// the console gets an alert saying the same; once it is back, every node
// that warned logs that it is.
func TestDownBrokerMetricsAndWarnings(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "metrics.listen=127.0.0.1:0", "sluice.broker.down.warning.interval.ms=500")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "down"); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("down", 3)
	// Each applies the registrations and unfencings in its own time.
	eventually(t, 20*time.Second, "every broker up everywhere", func() error {
		for i := range 3 {
			fams := scrape(t, tc.broker(i))
			for id := 1; id <= 3; id++ {
				if v, _ := metricValue(fams, "sluice_broker_up", "broker", fmt.Sprint(id)); v != 1 {
					return fmt.Errorf("broker %d sees broker %d up=%v", i+1, id, v)
				}
			}
			if v, _ := metricValue(fams, "sluice_brokers_registered"); v != 3 {
				return fmt.Errorf("broker %d: registered %v", i+1, v)
			}
		}
		return nil
	})
	for i := range 3 {
		if a := tc.broker(i).Alerts(); len(a) != 0 {
			t.Fatalf("broker %d: alerts %+v while every broker runs", i+1, a)
		}
	}

	// The console has seen broker 3 (its overview lists it).
	if code, body, _ := httpGet(t, tc.broker(0), "/ui/api/overview"); code != 200 || !strings.Contains(body, fmt.Sprintf(`"port":%d`, tc.cports[2])) {
		t.Fatalf("overview before the crash: %d %s", code, body)
	}
	tc.crash(2) // broker 3
	addr3 := fmt.Sprintf("127.0.0.1:%d", tc.cports[2])
	name3 := "broker 3 (" + addr3 + ")"
	live := []*Broker{tc.broker(0), tc.broker(1)}
	eventually(t, 30*time.Second, "broker 3 down, partitions under-replicated", func() error {
		under, active := 0.0, 0.0
		for i, b := range live {
			fams := scrape(t, b)
			if v, _ := metricValue(fams, "sluice_broker_up", "broker", "3"); v != 0 {
				return fmt.Errorf("broker %d sees broker 3 up=%v", i+1, v)
			}
			if v, _ := metricValue(fams, "sluice_broker_down_seconds", "broker", "3"); v <= 0 {
				return fmt.Errorf("broker %d: broker 3 down for %v s", i+1, v)
			}
			if v, _ := metricValue(fams, "sluice_broker_info", "broker", "3", "address", addr3); v != 1 {
				return fmt.Errorf("broker %d: broker 3's info at %s = %v", i+1, addr3, v)
			}
			if v, _ := metricValue(fams, "sluice_broker_down_under_replicated_partitions", "broker", "3", "topic", "down"); v != 3 {
				return fmt.Errorf("broker %d: broker 3 leaves %v partitions of down under-replicated, want 3", i+1, v)
			}
			if v, _ := metricValue(fams, "sluice_brokers_fenced"); v != 1 {
				return fmt.Errorf("broker %d: fenced %v", i+1, v)
			}
			if v, _ := metricValue(fams, "sluice_broker_up", "broker", "1"); v != 1 {
				return fmt.Errorf("broker %d sees broker 1 up=%v", i+1, v)
			}
			v, _ := metricValue(fams, "sluice_under_replicated_partitions")
			under += v
			a, _ := metricValue(fams, "sluice_controller_active")
			active += a
			if off, _ := metricValue(fams, "sluice_offline_partitions"); off != 0 {
				return fmt.Errorf("broker %d: %v offline partitions with 2 of 3 replicas up", i+1, off)
			}
		}
		// Every partition of "down" has a replica on broker 3; its
		// leader (1 or 2) counts it.
		if under < 3 {
			return fmt.Errorf("%v under-replicated partitions on the leaders, want >= 3", under)
		}
		if active != 1 {
			return fmt.Errorf("%v active controllers among the live brokers", active)
		}
		return nil
	})
	for i := range live {
		eventually(t, 10*time.Second, "the warning in broker "+fmt.Sprint(i+1)+"'s log", func() error {
			for _, line := range strings.Split(tc.logs[i].tail(1<<20), "\n") {
				if strings.Contains(line, "broker down: "+name3+" is fenced") && strings.Contains(line, "broker=3 ") && strings.Contains(line, `under_replicated="down 0-2"`) &&
					strings.Contains(line, "address="+addr3) && strings.Contains(line, "down_for=") {
					t.Logf("broker %d: %s", i+1, line)
					return nil
				}
			}
			return fmt.Errorf("no warning naming broker 3 and its partitions")
		})
	}
	for i, b := range live {
		alerts := b.Alerts()
		if len(alerts) != 1 || alerts[0].Title != "broker 3 is down" || alerts[0].Severity != "critical" ||
			!strings.HasPrefix(alerts[0].Detail, addr3+", down for ") || !strings.HasSuffix(alerts[0].Detail, "(fenced); 3 partitions under-replicated: down 0-2") {
			t.Fatalf("broker %d: alerts %+v", i+1, alerts)
		}
	}

	// The console's banner has the broker's own alert (its address, how
	// long), and its overview row keeps the address it was last seen at.
	type brokerRow struct {
		ID   int32
		Host string
		Port int32
		Down bool
	}
	var ov struct {
		Brokers []brokerRow
		Alerts  []console.Alert
	}
	if code, body, _ := httpGet(t, tc.broker(0), "/ui/api/overview"); code != 200 || json.Unmarshal([]byte(body), &ov) != nil {
		t.Fatalf("overview: %d %s", code, body)
	}
	if i := slices.IndexFunc(ov.Brokers, func(b brokerRow) bool { return b.ID == 3 }); i < 0 || !ov.Brokers[i].Down || ov.Brokers[i].Port != int32(tc.cports[2]) || ov.Brokers[i].Host != "127.0.0.1" {
		t.Errorf("overview brokers %+v: broker 3 down at %s", ov.Brokers, addr3)
	}
	if len(ov.Alerts) != 1 || ov.Alerts[0].Title != "broker 3 is down" || !strings.HasPrefix(ov.Alerts[0].Detail, addr3+", down for ") {
		t.Errorf("console alerts %+v", ov.Alerts)
	}

	// It comes back: up again, no more alerts.
	tc.start(2)
	eventually(t, 30*time.Second, "broker 3 up again", func() error {
		for i, b := range live {
			if v, _ := metricValue(scrape(t, b), "sluice_broker_up", "broker", "3"); v != 1 {
				return fmt.Errorf("broker %d sees broker 3 up=%v", i+1, v)
			}
			if a := b.Alerts(); len(a) != 0 {
				return fmt.Errorf("broker %d alerts %+v", i+1, a)
			}
		}
		return nil
	})
	// And each live broker, having warned of it, says so.
	for i := range live {
		eventually(t, 10*time.Second, "broker "+fmt.Sprint(i+1)+" logs broker 3 back", func() error {
			if tail := tc.logs[i].tail(1 << 20); !strings.Contains(tail, "broker back: "+name3+" is back after ") {
				return fmt.Errorf("no line says broker 3 is back")
			}
			return nil
		})
	}
}

// Raft metrics move in a cluster: leaders were elected and acks=all
// batches committed.
func TestMetricsRaftCluster(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "metrics.listen=127.0.0.1:0")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "raft"); err != nil {
		t.Fatal(err)
	}
	ps := tc.waitLeaders("raft", 3)
	prod := tc.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	clusterProduce(t, ctx, prod, "raft", "r", 20)
	lead := tc.broker(int(ps[0].leader) - 1)
	eventually(t, 10*time.Second, "raft metrics on the leader", func() error {
		fams := scrape(t, lead)
		if v, _ := metricValue(fams, "sluice_raft_commit_duration_seconds"); v < 1 {
			return fmt.Errorf("commit latency samples %v", v)
		}
		if v, _ := metricValue(fams, "sluice_raft_leader_changes_total"); v < 1 {
			return fmt.Errorf("leader changes %v", v)
		}
		if v, _ := metricValue(fams, "sluice_leader_partitions"); v < 1 {
			return fmt.Errorf("leader partitions %v", v)
		}
		if v, _ := metricValue(fams, "sluice_partition_high_watermark", "topic", "raft", "partition", "0"); v != 20 {
			return fmt.Errorf("high watermark %v", v)
		}
		return nil
	})
	for i := range 3 {
		if v := mustValue(t, scrape(t, tc.broker(i)), "sluice_partition_log_end_offset", "topic", "raft", "partition", "0"); v > 20 {
			t.Errorf("broker %d: log end offset %v", i+1, v)
		}
	}
}
