// This file is the HTML report: one self-contained page (inline CSS and
// SVG, no script) with the verdict, the fault timeline, send throughput
// and latency on the same time axis, the anomalies, and links to
// porcupine's visualisation of each linearizability check.

package chaos

import (
	"bufio"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The page's geometry: every chart shares the x axis.
const (
	svgWidth    = 1100
	svgLeft     = 80 // room for the y axis labels
	svgRight    = 20
	plotWidth   = svgWidth - svgLeft - svgRight
	chartHeight = 160
	bandHeight  = 18
	bucket      = time.Second
)

// faultColors are the bands' colours per fault kind.
var faultColors = map[string]string{
	FaultKillLeader: "#d62728", FaultKillFollower: "#ff9896", FaultKillController: "#a50f15",
	FaultPause: "#ff7f0e", FaultIsolate: "#9467bd", FaultPartition: "#c5b0d5", FaultBridge: "#6a3d9a",
	FaultDiskSlow: "#c49c94", FaultDiskFail: "#8c564b", FaultClock: "#17becf",
	FaultRollingRestart: "#e377c2", FaultMove: "#1f77b4", FaultMoveIsolated: "#393b79",
	FaultKillCoordinator: "#7b4173", FaultPauseCoordinator: "#bcbd22", FaultIsolateCoordinator: "#637939",
}

func faultColor(kind string) string {
	if c, ok := faultColors[kind]; ok {
		return c
	}
	return "#7f7f7f"
}

// WriteHTML writes dir/report.html, and for each linearizability check of
// r (as Check returned it) porcupine's visualisation dir/<name>.html.
func WriteHTML(dir string, h *History, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var links []string
	for _, c := range r.Checks {
		if c.vis == nil {
			links = append(links, "")
			continue
		}
		name := c.Name + ".html"
		if err := porcupine.VisualizePath(c.vis.model, c.vis.info, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("chaos: visualising %s: %w", c.Name, err)
		}
		links = append(links, name)
	}

	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	e := html.EscapeString

	p("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", e(r.Verdict()))
	p("<style>body{font-family:sans-serif;margin:1.5em;max-width:%dpx}h1{font-size:1.3em}.valid{color:#2ca02c}.invalid{color:#d62728}"+
		"table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"+
		"pre{background:#f6f6f6;padding:6px;overflow-x:auto;font-size:12px}.anomaly{margin-bottom:1em}"+
		"svg{display:block;margin:4px 0}svg text{font-size:11px}</style></head><body>\n", svgWidth+40)
	class := "valid"
	if !r.Valid() {
		class = "invalid"
	}
	p("<h1 class=%q>%s</h1>\n", class, e(r.Verdict()))
	p("<p>seed %d, %d nodes, started %s; %d operations, %d faults; faults healed at %s, final reads at %s.</p>\n",
		h.Seed, h.Nodes, e(h.Started.Format("2006-01-02 15:04:05 MST")), len(h.Ops), len(h.Faults), secs(h.Healed), secs(h.Finished))

	end := runEnd(h)
	p("<h2>Timeline</h2>\n")
	writeFaults(w, h, end)
	writeSends(w, h, end)

	p("<h2>Counts</h2>\n<table><tr><th>sends ok</th><th>sends fail</th><th>sends info</th><th>polls</th><th>records polled</th><th>final records</th><th>expired sends</th></tr>\n")
	p("<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr></table>\n",
		r.SendsOK, r.SendsFail, r.SendsInfo, r.Polls, r.RecordsSeen, r.FinalRecords, r.Expired)
	if len(r.Checks) > 0 {
		p("<h2>Linearizability</h2>\n<table><tr><th>check</th><th>operations</th><th>result</th></tr>\n")
		for i, c := range r.Checks {
			name := e(c.Name)
			if links[i] != "" {
				name = fmt.Sprintf("<a href=%q>%s</a>", e(links[i]), name)
			}
			p("<tr><td>%s</td><td>%d</td><td>%s</td></tr>\n", name, c.Ops, e(c.Result))
		}
		p("</table>\n")
	}
	for _, n := range r.Notes {
		p("<p>note: %s</p>\n", e(n))
	}

	p("<h2>Faults</h2>\n<table><tr><th>#</th><th>kind</th><th>start</th><th>end</th><th>nodes</th><th>what</th></tr>\n")
	for i, f := range h.Faults {
		p("<tr><td>%d</td><td style=\"color:%s\">%s</td><td>%s</td><td>%s</td><td>%v</td><td>%s</td></tr>\n",
			i+1, faultColor(f.Kind), e(f.Kind), secs(f.Start), e(faultEnd(h, f)), f.Nodes, e(f.What))
	}
	p("</table>\n")

	p("<h2>Anomalies (%d)</h2>\n", len(r.Anomalies))
	if len(r.Anomalies) == 0 {
		p("<p>None.</p>\n")
	}
	for i, a := range r.Anomalies {
		p("<div class=\"anomaly\"><b>%d. %s</b>: %s\n", i+1, e(string(a.Kind)), e(a.Msg))
		p("<details><summary>%d operations, %d records</summary><pre>", len(a.Ops), len(a.Records))
		for _, j := range a.Ops {
			if j >= 0 && j < len(h.Ops) {
				p("op %s\n", e(opDetail(h, j)))
			}
		}
		for _, rec := range a.Records {
			p("%s\n", e(rec.String()))
		}
		p("</pre></details></div>\n")
	}
	p("</body></html>\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runEnd is the end of the time axis: the last thing that happened,
// rounded up to a second.
func runEnd(h *History) time.Duration {
	end := max(h.Finished, h.Healed)
	for _, op := range h.Ops {
		end = max(end, op.Start, op.End)
	}
	for _, f := range h.Faults {
		end = max(end, f.Start, f.End)
	}
	return max(bucket, (end+bucket-1)/bucket*bucket)
}

// xOf is the x coordinate of t on an axis that ends at end.
func xOf(t, end time.Duration) float64 {
	return svgLeft + float64(t)/float64(end)*plotWidth
}

// timeAxis draws the x axis at y: ticks in seconds, a label, and the
// heal and final-read lines over the chart from top.
func timeAxis(w *bufio.Writer, h *History, end time.Duration, top, y float64, labels bool) {
	secsEnd := end.Seconds()
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600} {
		step = s
		if secsEnd/s <= 12 {
			break
		}
	}
	fmt.Fprintf(w, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>\n", svgLeft, y, svgLeft+plotWidth, y)
	for s := 0.0; s <= secsEnd+1e-9; s += step {
		x := xOf(time.Duration(s*float64(time.Second)), end)
		fmt.Fprintf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
			x, y, x, y+4, x, y+15, s)
	}
	fmt.Fprintf(w, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">time since start (s)</text>\n", svgLeft+plotWidth/2, y+28)
	for _, m := range []struct {
		at    time.Duration
		label string
	}{{h.Healed, "healed"}, {h.Finished, "final reads"}} {
		if m.at <= 0 {
			continue
		}
		x := xOf(m.at, end)
		fmt.Fprintf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"4 3\"><title>%s at %s</title></line>\n",
			x, top, x, y, m.label, secs(m.at))
		if labels {
			fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>\n", x-2, top-4, m.label)
		}
	}
}

// writeFaults draws one band per fault, in a row of its own.
func writeFaults(w *bufio.Writer, h *History, end time.Duration) {
	rows := max(1, len(h.Faults))
	top := 30.0
	height := top + float64(rows*(bandHeight+4)) + 54
	fmt.Fprintf(w, "<svg width=\"%d\" height=\"%.0f\" xmlns=\"http://www.w3.org/2000/svg\">\n", svgWidth, height)
	fmt.Fprintf(w, "<text x=\"4\" y=\"12\" font-weight=\"bold\">faults (one band each; colour: kind)</text>\n")
	var kinds []string
	for i, f := range h.Faults {
		fe := f.End
		if fe <= 0 {
			fe = cmpOr(h.Healed, end)
		}
		x0, x1 := xOf(f.Start, end), xOf(max(fe, f.Start), end)
		y := top + float64(i*(bandHeight+4))
		label := fmt.Sprintf("%s %s", f.Kind, nodeList(f.Nodes))
		fmt.Fprintf(w, "<g class=\"fault\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\" fill-opacity=\"0.75\"><title>%s</title></rect>",
			x0, y, max(x1-x0, 2), bandHeight, faultColor(f.Kind),
			html.EscapeString(fmt.Sprintf("%s [%s, %s]: %s", label, secs(f.Start), faultEnd(h, f), f.What)))
		fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%.1f\">%s</text></g>\n", x0+3, y+13, html.EscapeString(label))
		if !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	y := top + float64(rows*(bandHeight+4)) + 2
	timeAxis(w, h, end, top, y, true)
	var items [][2]string
	for _, k := range kinds {
		items = append(items, [2]string{faultColor(k), k})
	}
	legend(w, y+44, items)
	fmt.Fprintf(w, "</svg>\n")
}

func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

func nodeList(nodes []int) string {
	var s []string
	for _, n := range nodes {
		s = append(s, fmt.Sprint(n))
	}
	return "n" + strings.Join(s, ",n")
}

// sendBuckets is, per second of the run, the OK acknowledgements (by
// End), their latencies, and the failed and unknown sends.
type sendBuckets struct {
	ok         []int
	lat        [][]time.Duration
	fail, info []int
}

func bucketSends(h *History, end time.Duration) sendBuckets {
	n := int(end / bucket)
	b := sendBuckets{ok: make([]int, n), lat: make([][]time.Duration, n), fail: make([]int, n), info: make([]int, n)}
	at := func(t time.Duration) int { return min(n-1, max(0, int(t/bucket))) }
	for _, op := range h.Ops {
		if op.Kind != OpSend {
			continue
		}
		switch op.Outcome {
		case OK:
			i := at(op.End)
			b.ok[i]++
			b.lat[i] = append(b.lat[i], op.End-op.Start)
		case Fail:
			b.fail[at(cmpOr(op.End, op.Start))]++
		default:
			b.info[at(cmpOr(op.End, op.Start))]++
		}
	}
	return b
}

// quantile returns the q quantile of sorted ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	return ds[min(len(ds)-1, max(0, int(math.Ceil(q*float64(len(ds))))-1))]
}

// writeSends draws the throughput chart (OK acks per second, with the
// seconds that had failed or unknown sends marked) and the latency chart
// (p50, p99 and max per second, log scale).
func writeSends(w *bufio.Writer, h *History, end time.Duration) {
	b := bucketSends(h, end)
	bw := plotWidth / float64(len(b.ok))
	top, base := 36.0, 36.0+chartHeight

	// Throughput.
	peak := max(1, slices.Max(b.ok))
	fmt.Fprintf(w, "<svg width=\"%d\" height=\"%.0f\" xmlns=\"http://www.w3.org/2000/svg\">\n", svgWidth, base+60)
	fmt.Fprintf(w, "<text x=\"4\" y=\"12\" font-weight=\"bold\">send throughput (OK acknowledgements per second)</text>\n")
	yAxis(w, top, base, []float64{0, float64(peak) / 2, float64(peak)}, func(v float64) float64 { return base - v/float64(peak)*chartHeight }, "acks/s")
	for i, n := range b.ok {
		if n == 0 {
			continue
		}
		hgt := float64(n) / float64(peak) * chartHeight
		fmt.Fprintf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#1f77b4\"><title>%ds: %d acks</title></rect>\n",
			xOf(time.Duration(i)*bucket, end), base-hgt, max(bw-1, 1), hgt, i, n)
	}
	for i := range b.ok {
		for j, m := range []struct {
			n     int
			color string
			what  string
		}{{b.fail[i], "#d62728", "failed"}, {b.info[i], "#ff7f0e", "unknown (info)"}} {
			if m.n == 0 {
				continue
			}
			fmt.Fprintf(w, "<rect class=\"send-%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"5\" fill=\"%s\"><title>%ds: %d %s sends</title></rect>\n",
				strings.Fields(m.what)[0], xOf(time.Duration(i)*bucket, end), top-13+float64(j)*6, max(bw-1, 1), m.color, i, m.n, m.what)
		}
	}
	timeAxis(w, h, end, top, base, false)
	legend(w, base+44, [][2]string{{"#1f77b4", "OK acks"}, {"#d62728", "a second with failed sends"}, {"#ff7f0e", "a second with sends of unknown outcome"}})
	fmt.Fprintf(w, "</svg>\n")

	// Latency, in milliseconds on a log scale.
	type q3 struct{ p50, p99, max float64 }
	qs := make([]*q3, len(b.lat))
	hi := 1.0
	for i, ds := range b.lat {
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		ms := func(d time.Duration) float64 { return math.Max(float64(d)/float64(time.Millisecond), 0.1) }
		qs[i] = &q3{ms(quantile(ds, 0.5)), ms(quantile(ds, 0.99)), ms(ds[len(ds)-1])}
		hi = math.Max(hi, qs[i].max)
	}
	decades := math.Max(1, math.Ceil(math.Log10(hi))+1) // from 0.1 ms
	yv := func(v float64) float64 { return base - (math.Log10(v)+1)/decades*chartHeight }
	var ticks []float64
	for d := 0.0; d <= decades; d++ {
		ticks = append(ticks, math.Pow(10, d-1))
	}
	fmt.Fprintf(w, "<svg width=\"%d\" height=\"%.0f\" xmlns=\"http://www.w3.org/2000/svg\">\n", svgWidth, base+60)
	fmt.Fprintf(w, "<text x=\"4\" y=\"12\" font-weight=\"bold\">send latency per second of acknowledgement (End - Start of OK sends; log scale)</text>\n")
	yAxis(w, top, base, ticks, yv, "ms")
	for _, s := range []struct {
		color string
		pick  func(q *q3) float64
	}{{"#2ca02c", func(q *q3) float64 { return q.p50 }}, {"#ff7f0e", func(q *q3) float64 { return q.p99 }}, {"#d62728", func(q *q3) float64 { return q.max }}} {
		var pts []string
		for i, q := range qs {
			if q == nil {
				if len(pts) > 0 {
					fmt.Fprintf(w, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n", s.color, strings.Join(pts, " "))
				}
				pts = pts[:0]
				continue
			}
			x := xOf(time.Duration(i)*bucket, end) + bw/2
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, yv(s.pick(q))))
			fmt.Fprintf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.5\" fill=\"%s\"><title>%ds: p50 %.1f ms, p99 %.1f ms, max %.1f ms</title></circle>\n",
				x, yv(s.pick(q)), s.color, i, q.p50, q.p99, q.max)
		}
		if len(pts) > 0 {
			fmt.Fprintf(w, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n", s.color, strings.Join(pts, " "))
		}
	}
	for i := range b.ok {
		if b.fail[i]+b.info[i] > 0 {
			fmt.Fprintf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"4\" fill=\"%s\"><title>%ds: %d failed, %d unknown sends</title></rect>\n",
				xOf(time.Duration(i)*bucket, end), top-10, max(bw-1, 1), map[bool]string{true: "#d62728", false: "#ff7f0e"}[b.fail[i] > 0], i, b.fail[i], b.info[i])
		}
	}
	timeAxis(w, h, end, top, base, false)
	legend(w, base+44, [][2]string{{"#2ca02c", "p50"}, {"#ff7f0e", "p99"}, {"#d62728", "max"}})
	fmt.Fprintf(w, "</svg>\n")
}

// yAxis draws a y axis with ticks at vals (placed by y) and a unit.
func yAxis(w *bufio.Writer, top, base float64, vals []float64, y func(float64) float64, unit string) {
	fmt.Fprintf(w, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>\n", svgLeft, top, svgLeft, base)
	for _, v := range vals {
		fmt.Fprintf(w, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
			svgLeft, y(v), svgLeft+plotWidth, y(v), svgLeft-4, y(v)+4, v)
	}
	fmt.Fprintf(w, "<text x=\"12\" y=\"%.1f\" transform=\"rotate(-90 12 %.1f)\" text-anchor=\"middle\">%s</text>\n", (top+base)/2, (top+base)/2, unit)
}

// legend draws coloured keys in a row at y.
func legend(w *bufio.Writer, y float64, items [][2]string) {
	x := float64(svgLeft)
	for _, it := range items {
		fmt.Fprintf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
			x, y-9, it[0], x+14, y, html.EscapeString(it[1]))
		x += 14 + float64(len(it[1]))*6.5 + 20
	}
}
