package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/console"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The JSON API against one in-process broker, through real HTTP.

func startBroker(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir(), "group.initial.rebalance.delay.ms=0"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Addr().String()
}

type env struct {
	t    *testing.T
	srv  *httptest.Server
	addr string
	cl   *kgo.Client
	adm  *kadm.Client
}

func newEnv(t *testing.T, cfg console.Config) *env {
	addr := startBroker(t)
	cfg.Bootstrap = []string{addr}
	c := console.New(cfg)
	t.Cleanup(func() { c.Close() })
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &env{t: t, srv: srv, addr: addr, cl: cl, adm: kadm.NewClient(cl)}
}

// get fetches path, checks the status and decodes the JSON body into v.
func (e *env) get(path string, status int, v any) {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		e.t.Fatalf("GET %s: status %d, want %d: %s", path, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			e.t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
}

func (e *env) produce(ctx context.Context, rs ...*kgo.Record) {
	e.t.Helper()
	if err := e.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

func TestConsoleAPITopicsAndMessages(t *testing.T) {
	e := newEnv(t, console.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	retention := "3600000"
	if _, err := e.adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": &retention}, "orders"); err != nil {
		t.Fatal(err)
	}
	e.produce(ctx,
		&kgo.Record{Topic: "orders", Partition: 0, Key: []byte("k-json"), Value: []byte(`{"id":7,"items":["a","b"]}`),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}},
		&kgo.Record{Topic: "orders", Partition: 0, Value: []byte("plain <b>text</b>")},
		&kgo.Record{Topic: "orders", Partition: 0, Key: []byte{0xff, 0x00}, Value: []byte{0xde, 0xad, 0xbe, 0xef}},
	)

	var ov struct {
		Controller int32
		Brokers    []struct{ ID int32 }
		Topics     int
		Partitions int
		Healthy    bool
		Alerts     []console.Alert
	}
	e.get("/ui/api/overview", 200, &ov)
	if len(ov.Brokers) != 1 || ov.Topics < 1 || ov.Partitions < 3 || !ov.Healthy || len(ov.Alerts) != 0 {
		t.Fatalf("overview %+v", ov)
	}

	var ts []struct {
		Name       string
		Partitions int
		Records    int64
		Bytes      int64
	}
	e.get("/ui/api/topics", 200, &ts)
	found := false
	for _, tp := range ts {
		if tp.Name == "orders" {
			found = true
			if tp.Partitions != 3 || tp.Records != 3 || tp.Bytes <= 0 {
				t.Fatalf("orders %+v", tp)
			}
		}
	}
	if !found {
		t.Fatalf("orders not in %+v", ts)
	}

	var td struct {
		ID         string
		Partitions []struct {
			Partition              int32
			Leader                 int32
			Replicas, ISR          []int32
			StartOffset, EndOffset int64
		}
		Configs []struct{ Name, Value, Source string }
	}
	e.get("/ui/api/topics/orders", 200, &td)
	md, err := e.adm.Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if id := md.Topics["orders"].ID; td.ID != base64.RawURLEncoding.EncodeToString(id[:]) || strings.ContainsAny(td.ID, "+/=") {
		t.Fatalf("topic id %q, want Kafka's form of %x (URL-safe base64, no padding)", td.ID, id)
	}
	if len(td.Partitions) != 3 || td.Partitions[0].Leader < 0 || td.Partitions[0].EndOffset != 3 || td.Partitions[1].EndOffset != 0 {
		t.Fatalf("topic %+v", td)
	}
	var sawRetention bool
	for _, c := range td.Configs {
		if c.Source == "DEFAULT_CONFIG" {
			t.Fatalf("default config listed: %+v", c)
		}
		sawRetention = sawRetention || c.Name == "retention.ms" && c.Value == retention
	}
	if !sawRetention {
		t.Fatalf("retention.ms=%s not among %+v", retention, td.Configs)
	}

	type field struct {
		Null      bool
		Size      int
		Text      *string
		JSON      *string
		Hex       string
		Truncated bool
	}
	var msgs struct {
		StartOffset, EndOffset, From int64
		More                         bool
		Note                         string
		Records                      []struct {
			Offset     int64
			Timestamp  int64
			Key, Value field
			Headers    []struct {
				Key   string
				Value field
			}
		}
	}
	e.get("/ui/api/topics/orders/messages?partition=0&offset=0", 200, &msgs)
	if len(msgs.Records) != 3 || msgs.From != 0 || msgs.EndOffset != 3 || msgs.More {
		t.Fatalf("messages %+v", msgs)
	}
	r0, r1, r2 := msgs.Records[0], msgs.Records[1], msgs.Records[2]
	if r0.Value.JSON == nil || !strings.Contains(*r0.Value.JSON, "\n  \"id\": 7") || len(r0.Headers) != 1 || r0.Headers[0].Key != "trace" || *r0.Headers[0].Value.Text != "abc" {
		t.Fatalf("json record %+v", r0)
	}
	if !r1.Key.Null || r1.Value.Text == nil || *r1.Value.Text != "plain <b>text</b>" || r1.Value.JSON != nil {
		t.Fatalf("text record %+v", r1)
	}
	if r2.Value.Text != nil || !strings.Contains(r2.Value.Hex, "de ad be ef") || r2.Key.Text != nil {
		t.Fatalf("binary record %+v", r2)
	}

	// limit and the next page.
	e.get("/ui/api/topics/orders/messages?partition=0&offset=1&limit=1", 200, &msgs)
	if len(msgs.Records) != 1 || msgs.Records[0].Offset != 1 || !msgs.More {
		t.Fatalf("limit 1 from 1: %+v", msgs)
	}
	// From a timestamp: the record at or after it.
	e.get(fmt.Sprintf("/ui/api/topics/orders/messages?partition=0&timestamp=%d", r2.Timestamp), 200, &msgs)
	if len(msgs.Records) == 0 || msgs.Records[len(msgs.Records)-1].Offset != 2 || msgs.From > 2 {
		t.Fatalf("from timestamp %d: %+v", r2.Timestamp, msgs)
	}
	e.get(fmt.Sprintf("/ui/api/topics/orders/messages?partition=0&timestamp=%d", time.Now().Add(time.Hour).UnixMilli()), 200, &msgs)
	if len(msgs.Records) != 0 || msgs.From != 3 || msgs.Note != "no record at or after that time" {
		t.Fatalf("from the future: %+v", msgs)
	}
	e.get("/ui/api/topics/orders/messages?partition=0&timestamp=-2", 400, nil) // not ListOffsets' "earliest"
	// No offset: the last records; an empty partition: none.
	e.get("/ui/api/topics/orders/messages?partition=0&limit=2", 200, &msgs)
	if len(msgs.Records) != 2 || msgs.Records[0].Offset != 1 {
		t.Fatalf("last 2: %+v", msgs)
	}
	e.get("/ui/api/topics/orders/messages?partition=1", 200, &msgs)
	if len(msgs.Records) != 0 {
		t.Fatalf("empty partition: %+v", msgs)
	}

	// Errors.
	e.get("/ui/api/topics/nosuch", 404, nil)
	e.get("/ui/api/topics/bad%20name", 400, nil)
	e.get("/ui/api/topics/orders/messages?partition=9", 404, nil)
	e.get("/ui/api/topics/orders/messages?partition=x", 400, nil)
	e.get("/ui/api/topics/orders/messages?partition=0&limit=1000", 400, nil)
	e.get("/ui/api/nosuch", 404, nil)
	e.get("/ui/api/groups/nosuch", 404, nil)
}

func TestConsoleAPIGroupLag(t *testing.T) {
	e := newEnv(t, console.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.adm.CreateTopic(ctx, 2, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e.produce(ctx, &kgo.Record{Topic: "events", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))})
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "events", Partition: 0, At: 2, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "events", Partition: 1, At: 5, LeaderEpoch: -1})
	if err := e.adm.CommitAllOffsets(ctx, "billing", os); err != nil {
		t.Fatal(err)
	}
	var gs []struct {
		Group string
		State string
		Lag   int64
	}
	e.get("/ui/api/groups", 200, &gs)
	if len(gs) != 1 || gs[0].Group != "billing" || gs[0].Lag != 3 {
		t.Fatalf("groups %+v", gs)
	}
	var g struct {
		Group   string
		Lag     int64
		Offsets []struct {
			Topic               string
			Partition           int32
			Committed, End, Lag int64
		}
	}
	e.get("/ui/api/groups/billing", 200, &g)
	if g.Lag != 3 || len(g.Offsets) != 2 || g.Offsets[0].Committed != 2 || g.Offsets[0].End != 5 || g.Offsets[0].Lag != 3 || g.Offsets[1].Lag != 0 {
		t.Fatalf("group %+v", g)
	}
}

func TestConsoleAPIRates(t *testing.T) {
	e := newEnv(t, console.Config{SampleInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.adm.CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	type rates struct {
		Times  []int64
		Topics []struct {
			Topic            string
			Produce, Consume []*float64
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.produce(ctx, &kgo.Record{Topic: "clicks", Value: []byte("x")})
		var r rates
		e.get("/ui/api/rates", 200, &r)
		for _, s := range r.Topics {
			if s.Topic != "clicks" || len(s.Produce) != len(r.Times) {
				continue
			}
			for _, v := range s.Produce {
				if v != nil && *v > 0 {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no produce rate of clicks: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConsoleReadOnlyAndStatic(t *testing.T) {
	e := newEnv(t, console.Config{Alerts: func() []console.Alert {
		return []console.Alert{{Severity: "warning", Title: "disk almost full", Detail: "log dir 91% used"}}
	}})
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		req, _ := http.NewRequest(m, e.srv.URL+"/ui/api/topics", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("%s: status %d, Allow %q", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	for path, ct := range map[string]string{
		"/ui/":            "text/html; charset=utf-8",
		"/ui/console.js":  "text/javascript; charset=utf-8",
		"/ui/console.css": "text/css; charset=utf-8",
	} {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct || len(body) == 0 ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, resp.Header)
		}
	}
	resp, err := http.Get(e.srv.URL + "/ui/nosuch.html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown file: %d", resp.StatusCode)
	}
	resp, err = http.Get(e.srv.URL + "/ui/api/topics?x=" + strings.Repeat("a", 4096))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestURITooLong {
		t.Fatalf("long URL: %d", resp.StatusCode)
	}
	var al struct{ Alerts []console.Alert }
	e.get("/ui/api/alerts", 200, &al)
	if len(al.Alerts) != 1 || al.Alerts[0].Title != "disk almost full" {
		t.Fatalf("alerts %+v", al)
	}
}

// A live member of a classic group and of a KIP-848 group shows with its
// assignment.
func TestConsoleAPIGroupMembers(t *testing.T) {
	e := newEnv(t, console.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.adm.CreateTopic(ctx, 2, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	e.produce(ctx, &kgo.Record{Topic: "jobs", Partition: 0, Value: []byte("j0")}, &kgo.Record{Topic: "jobs", Partition: 1, Value: []byte("j1")})
	for _, tc := range []struct {
		group, typ string
		opts       []kgo.Opt
	}{
		{"workers-classic", "classic", nil},
		{"workers-848", "consumer", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}},
	} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.addr), kgo.ConsumerGroup(tc.group), kgo.ConsumeTopics("jobs"),
			kgo.ClientID("worker-1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for got := 0; got < 2; {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatal(err)
			}
			got += fs.NumRecords()
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			var g struct {
				Type, State string
				Members     []struct {
					ClientID   string
					Assignment []struct {
						Topic      string
						Partitions []int32
					}
				}
			}
			e.get("/ui/api/groups/"+tc.group, 200, &g)
			if g.Type == tc.typ && g.State == "Stable" && len(g.Members) == 1 && g.Members[0].ClientID == "worker-1" &&
				len(g.Members[0].Assignment) == 1 && g.Members[0].Assignment[0].Topic == "jobs" && len(g.Members[0].Assignment[0].Partitions) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", tc.group, g)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
