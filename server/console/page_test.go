package console_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/console"
)

// GET /ui/ carries the main facts in its HTML, without JavaScript: the
// brokers, the controller, the topics with their partitions and
// replication, the alerts; names are escaped.
func TestConsoleFirstPaint(t *testing.T) {
	e := newEnv(t, console.Config{Alerts: func() []console.Alert {
		return []console.Alert{{Severity: "warning", Title: "disk <almost> full"}}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"payments", "audit-log"} {
		if _, err := e.adm.CreateTopic(ctx, 4, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(e.srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	html := string(body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /ui/: %d %v", resp.StatusCode, resp.Header)
	}
	for _, want := range []string{
		`<tr data-broker="1"><td>1</td><td>` + e.addr + `</td>`, // broker 1, up, at its address
		`<td>controller</td>`,
		`<div class="v ">broker 1</div><div class="k">controller</div>`,
		`<tr data-topic="payments"><td><a href="#/topics/payments">payments</a></td><td class="num">4</td><td class="num">1</td>`,
		`<tr data-topic="audit-log">`,
		`<b>disk &lt;almost&gt; full</b>`,
		`<script src="console.js"></script>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("GET /ui/ lacks %s:\n%s", want, html)
		}
	}
	if strings.Contains(html, "<almost>") {
		t.Error("an alert's title is not escaped")
	}
}
