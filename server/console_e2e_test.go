package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The web console in a real browser: headless Chromium, driven by
// chromedp, reads a running 3-broker cluster through the console and the
// test checks what a user sees. Each page checked is saved as a
// screenshot in a folder the test prints ($SLUICE_SCREENSHOTS, or a fresh
// folder under the system's temporary directory).

// consoleBrowser is one Chromium tab on a console.
type consoleBrowser struct {
	t    *testing.T
	ctx  context.Context
	base string // the console's URL, ending in /ui/
	dir  string // screenshots
}

// screenshotDir is $SLUICE_SCREENSHOTS, created if needed, or a fresh
// folder; it is kept after the test, for a person to look at.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SLUICE_SCREENSHOTS")
	var err error
	if dir != "" {
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "sluice-console-screenshots-")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots in %s", dir)
	fmt.Println("console screenshots in", dir)
	return dir
}

func newConsoleBrowser(t *testing.T, base string) *consoleBrowser {
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		chromium = needTool(t, "chromium") // fails when test.sh should have installed it
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // CI may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1`)); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	return &consoleBrowser{t: t, ctx: ctx, base: base, dir: screenshotDir(t)}
}

func (b *consoleBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// poll waits until the JavaScript expression is truthy.
func (b *consoleBrowser) poll(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		b.t.Fatalf("browser: wait for %s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *consoleBrowser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

// waitPage waits until the console has rendered page (main's data-page)
// and fails on the error page.
func (b *consoleBrowser) waitPage(page string) {
	b.t.Helper()
	b.poll("page "+page, fmt.Sprintf(`document.getElementById("main").dataset.ready === "1" && document.getElementById("main").dataset.page === %q`, page))
	if msg := eval[string](b, `(document.getElementById("error") || {}).textContent || ""`); msg != "" {
		b.screenshot(page + "-error")
		b.t.Fatalf("page %s shows an error: %s", page, msg)
	}
	if stray := eval[string](b, `[...document.querySelector("#main > div").childNodes].filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join("|")`); stray != "" {
		b.screenshot(page + "-stray-text")
		b.t.Fatalf("page %s shows stray text %q", page, stray)
	}
}

// open loads the console at hash (a full page load) and waits for page.
func (b *consoleBrowser) open(hash, page string) {
	b.t.Helper()
	b.do("open "+hash, chromedp.Navigate(b.base+hash))
	b.waitPage(page)
}

// visit moves to hash within the loaded page, as a click on a link does.
func (b *consoleBrowser) visit(hash, page string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`document.getElementById("main").dataset.ready = ""; location.hash = %q; true`, hash))
	b.waitPage(page)
}

func (b *consoleBrowser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// text is the trimmed textContent of the first element css selects, or
// "<none>".
func (b *consoleBrowser) text(css string) string {
	b.t.Helper()
	return strings.TrimSpace(eval[string](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : "<none>"; })()`, css)))
}

// click clicks the first element css selects.
func (b *consoleBrowser) click(css string) {
	b.t.Helper()
	if !eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, css)) {
		b.t.Fatalf("browser: nothing to click at %s", css)
	}
}

func (b *consoleBrowser) count(css string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, css))
}

func TestConsoleBrowserE2E(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the browser end-to-end test is long (-short)")
	}
	// The console as users get it: served by broker 1 on its
	// metrics.listen, reading the cluster through its own listener.
	tc := startCluster(t, 3, "metrics.listen=127.0.0.1:0")
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consoleURL := "http://" + tc.broker(0).MetricsAddr().String() + "/ui/"

	// Two topics, a JSON and a text message, a group that committed
	// behind the high watermark.
	adm := kadm.NewClient(tc.client())
	for name, n := range map[string]int32{"e2e-three": 3, "e2e-five": 5} {
		if _, err := adm.CreateTopic(ctx, n, 3, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		tc.waitLeaders(name, 3)
	}
	prod := tc.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	rs := []*kgo.Record{
		{Topic: "e2e-three", Partition: 1, Key: []byte("order-42"), Value: []byte(`{"order":42,"items":["tea","milk"]}`),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("e2e")}}},
		{Topic: "e2e-three", Partition: 1, Key: []byte("note"), Value: []byte("hello from the e2e test <script>alert(1)</script>")},
	}
	for i := range 8 {
		rs = append(rs, &kgo.Record{Topic: "e2e-five", Partition: 2, Value: []byte(fmt.Sprintf("event %d", i))})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "e2e-five", Partition: 2, At: 3, LeaderEpoch: -1}) // lag 8 - 3 = 5
	if err := adm.CommitAllOffsets(ctx, "e2e-group", commit); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("__consumer_offsets", 3) // created by the commit: healthy once its ISR is full

	// The first paint needs no JavaScript: the HTML names the brokers
	// and the topics.
	resp, err := http.Get(consoleURL)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`data-broker="3"`, `data-topic="e2e-three"`, `data-topic="e2e-five"`} {
		if !bytes.Contains(html, []byte(want)) {
			t.Fatalf("GET /ui/ lacks %s:\n%s", want, html)
		}
	}

	b := newConsoleBrowser(t, consoleURL)

	b.open("#/overview", "overview")
	if n := b.count("#brokers tbody tr"); n != 3 {
		t.Fatalf("overview shows %d brokers, want 3", n)
	}
	if got := b.text("#health"); got != "healthy" {
		t.Fatalf("overview health %q", got)
	}
	b.screenshot("1-overview")

	b.visit("#/topics", "topics")
	for name, want := range map[string]string{"e2e-three": "3", "e2e-five": "5"} {
		if got := b.text(fmt.Sprintf(`#topics tr[data-topic=%q] td.partitions`, name)); got != want {
			t.Fatalf("topics page: %s has %q partitions, want %s", name, got, want)
		}
	}
	b.screenshot("2-topics")

	b.visit("#/topics/e2e-five", "topic")
	if n := b.count("#partitions tbody tr"); n != 5 {
		t.Fatalf("topic page of e2e-five shows %d partitions", n)
	}
	if got := b.text(`#partitions tr[data-partition="2"] td:nth-child(8)`); got != "8" {
		t.Fatalf("e2e-five partition 2 high watermark %q, want 8", got)
	}
	b.screenshot("3-topic")

	b.visit("#/topics/e2e-three/messages?partition=1&offset=0", "messages")
	if n := b.count("#messages .record"); n != 2 {
		t.Fatalf("message browser shows %d records, want 2", n)
	}
	jsonValue := b.text(`#messages .record[data-offset="0"] .value pre`)
	if !strings.Contains(jsonValue, "\"order\": 42,\n  \"items\": [") {
		t.Fatalf("JSON value shown as %q, want it pretty-printed", jsonValue)
	}
	if got := b.text(`#messages .record[data-offset="0"] .headers`); !strings.Contains(got, "source") || !strings.Contains(got, "e2e") {
		t.Fatalf("headers shown as %q", got)
	}
	textValue := b.text(`#messages .record[data-offset="1"] .value pre`)
	if textValue != "hello from the e2e test <script>alert(1)</script>" {
		t.Fatalf("text value shown as %q", textValue)
	}
	if got := b.text(`#messages .record[data-offset="0"] td.v-preview`); got != `{"order":42,"items":["tea","milk"]}` {
		t.Fatalf("the table's value preview %q", got)
	}
	if n := b.count("#messages .record tr.detail:not([hidden])"); n != 0 {
		t.Fatalf("%d records open before a click", n)
	}
	b.click(`#messages .record[data-offset="0"] tr.line`)
	if n := b.count("#messages .record tr.detail:not([hidden])"); n != 1 {
		t.Fatalf("%d records open after a click on one, want 1", n)
	}
	if n := b.count("#messages script"); n != 0 { // shown as text, never markup
		t.Fatalf("a record's value became %d script elements", n)
	}
	b.screenshot("4-messages")
	// The same records as hex.
	b.visit("#/topics/e2e-three/messages?partition=1&offset=0&view=hex", "messages")
	if got := b.text(`#messages .record[data-offset="1"] .value pre`); !strings.Contains(got, "68 65 6c 6c 6f") {
		t.Fatalf("hex view %q", got)
	}
	b.screenshot("5-messages-hex")

	b.visit("#/groups", "groups")
	if got := b.text(`#groups tr[data-group="e2e-group"] td.lag`); got != "5" {
		t.Fatalf("groups page: e2e-group lag %q, want 5", got)
	}
	b.screenshot("6-groups")
	b.visit("#/groups/e2e-group", "group")
	if got := b.text("#group-lag"); got != "5" {
		t.Fatalf("group page: lag %q, want 5", got)
	}
	if got := b.text(`#offsets tr[data-tp="e2e-five-2"] td.lag`); got != "5" {
		t.Fatalf("group page: e2e-five-2 lag %q, want 5", got)
	}
	b.screenshot("7-group")
	if n := b.count("#banner .alert"); n != 0 {
		t.Fatalf("banner shows %d alerts on a healthy cluster: %s", n, b.text("#banner"))
	}

	// The throughput charts: records produced now show as a produce rate
	// of e2e-five (the sampler reads the log end offsets every 2 s).
	b.visit("#/topics", "topics")
	more := make([]*kgo.Record, 40)
	for i := range more {
		more[i] = &kgo.Record{Topic: "e2e-five", Partition: int32(i % 5), Value: []byte("burst")}
	}
	if err := prod.ProduceSync(ctx, more...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.poll("a produce rate of e2e-five", `(() => { const s = document.querySelector('#charts tr[data-topic="e2e-five"] svg.produce'); return s !== null && Number(s.dataset.max) > 0; })()`)
	// On a scale: the top of the y axis, in records/s, at or above the peak.
	if top := b.text(`#charts tr[data-topic="e2e-five"] svg.produce text.y-top`); !strings.HasSuffix(top, "/s") {
		t.Fatalf("the produce chart's scale %q", top)
	}
	// Consuming shows as a consume rate: records sent by broker 1's
	// Fetch responses, so broker 1 must lead one of e2e-five's
	// partitions. The first elections may have put every leader
	// elsewhere; a preferred-leader election gives it those whose
	// first replica it is (placement spreads the first replicas).
	eventually(t, 30*time.Second, "broker 1 leading a partition of e2e-five", func() error {
		for _, p := range tc.waitLeaders("e2e-five", 3) {
			if p.leader == 1 {
				return nil
			}
		}
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"e2e-five": {0: {}, 1: {}, 2: {}, 3: {}, 4: {}}}); err != nil {
			return err
		}
		return fmt.Errorf("broker 1 leads none of e2e-five's partitions")
	})
	cons := tc.client(kgo.ConsumeTopics("e2e-five"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 48; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	b.poll("a consume rate of e2e-five", `(() => { const s = document.querySelector('#charts tr[data-topic="e2e-five"] svg.consume'); return s !== null && Number(s.dataset.max) > 0; })()`)
	b.screenshot("8-throughput")

	// A stopped broker raises the banner, on every page.
	tc.stop(2)
	want := "broker 3 is down"
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.open("#/topics", "topics")
		b.poll("the banner", `document.getElementById("banner").dataset.loaded === "1"`)
		if banner := b.text("#banner"); strings.Contains(banner, want) {
			if !strings.Contains(banner, "under-replicated") {
				t.Fatalf("banner %q names no under-replicated partitions", banner)
			}
			break
		}
		if time.Now().After(deadline) {
			b.screenshot("9-banner-missing")
			t.Fatalf("no %q banner within 30 s: %q", want, b.text("#banner"))
		}
		time.Sleep(time.Second)
	}
	b.screenshot("9-banner")
	b.visit("#/overview", "overview")
	if got := b.text("#banner"); !strings.Contains(got, want) {
		t.Fatalf("overview banner %q", got)
	}
	if got := b.text("#health"); got != "attention" {
		t.Fatalf("overview health %q with a broker down", got)
	}
	// The down broker keeps its row, marked down, and the count says so.
	if got := b.text(`#brokers tbody tr[data-broker="3"]`); !strings.Contains(got, "down") {
		t.Fatalf("overview row of the stopped broker 3: %q", got)
	}
	if got := b.text("#broker-count"); got != "2 of 3 up" {
		t.Fatalf("overview broker count %q with broker 3 down", got)
	}
	b.screenshot("10-overview-broker-down")
}
