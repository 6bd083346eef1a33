package console

import (
	"bytes"
	"context"
	"html/template"
	"io/fs"
	"net/http"
	"time"
)

// The page's first paint: index.html is an html/template the server fills
// with the overview (brokers and whether they are up, the controller,
// partition counts, alerts) and the topic list (partitions, replication,
// under-replicated and offline partitions), so that `curl /ui/` and a
// browser without JavaScript show the cluster's main facts. console.js
// then replaces the main element with the page the URL's hash names.
// html/template escapes every name and value for its context.

// firstPaintWait bounds the Kafka requests of the first paint: a cluster
// slow to answer gets a page that says so, soon.
const firstPaintWait = 3 * time.Second

type indexData struct {
	Overview *overviewJSON
	Topics   []topicSummaryJSON
	Alerts   []Alert
	Up       int  // brokers up
	Down     bool // some broker is down
	Err      string
	At       string // when it was rendered, RFC 3339
}

func parseIndex(static fs.FS) *template.Template {
	return template.Must(template.ParseFS(static, "index.html"))
}

func (c *Console) serveIndex(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), min(c.cfg.RequestTimeout, firstPaintWait))
	defer cancel()
	d := indexData{At: time.Now().UTC().Format(time.RFC3339)}
	if r.Method == http.MethodGet { // HEAD: no need to ask the cluster
		c.samp.touch(userFrom(r.Context())) // the charts will want samples
		d.fill(c, ctx)
	}
	var buf bytes.Buffer
	if err := c.index.Execute(&buf, d); err != nil {
		c.cfg.Logger.Error("console: rendering the page", "err", err)
		http.Error(w, "console: rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

func (d *indexData) fill(c *Console, ctx context.Context) {
	ov, err := c.overview(ctx)
	if err != nil {
		d.Err = err.Error()
		d.Alerts = c.mergeAlerts(nil)
		return
	}
	o := ov.(overviewJSON)
	d.Overview, d.Alerts = &o, o.Alerts
	for _, b := range o.Brokers {
		if b.Down {
			d.Down = true
		} else {
			d.Up++
		}
	}
	if ts, err := c.topics(ctx); err == nil {
		d.Topics = ts.([]topicSummaryJSON)
	}
}
