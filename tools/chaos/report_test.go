package chaos

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// reportHistory is a small run with two faults, sends of every outcome, a
// lost write and a poll skip, a log partition and an offsets register.
func reportHistory() *History {
	h := &History{
		Seed: 4242, Nodes: 3, Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Healed: 4 * time.Second, Finished: 5 * time.Second,
		Faults: []Fault{
			{Kind: "kill", Nodes: []int{2}, What: "SIGKILL node 2 (leader of q/0)", Start: time.Second, End: 2 * time.Second},
			{Kind: "partition", Nodes: []int{1, 3}, What: "isolate node 1 from node 3", Start: 1500 * time.Millisecond},
		},
		Final:    final(),
		LogStart: map[string]map[int32]int64{"q": {0: 0}},
		Liveness: map[string]map[int32]time.Duration{"q": {0: 300 * time.Millisecond}},
	}
	for i := range 40 {
		start := i * 100
		h.Ops = append(h.Ops, send("producer-0", 0, fmt.Sprint("v", i), int64(i), start, start+5+i%7))
		h.Final["q"][0] = append(h.Final["q"][0], rec(0, int64(i), fmt.Sprint("v", i)))
	}
	h.Final["q"][0] = append(h.Final["q"][0][:10], h.Final["q"][0][11:]...) // v10 lost
	h.Ops = append(h.Ops,
		Op{Process: "producer-0", Kind: OpSend, Outcome: Fail, Topic: "q", Value: "f", Start: ms(1200), End: ms(1300), Err: "NOT_LEADER"},
		Op{Process: "producer-0", Kind: OpSend, Outcome: Info, Topic: "q", Value: "i", Start: ms(1400)},
		poll("consumer-0", 4100, 4200, rec(0, 0, "v0"), rec(0, 2, "v2")), // skips v1
		appendOp("log-0", "a", OK, 0, 100, 200), readOp("log-1", 300, 400, "a"),
		commit("offsets-0", "r", OK, 100, 200, map[int32]int64{0: 3}),
		fetchOffsets("offsets-1", "r", 300, 400, map[int32]int64{0: 3}),
	)
	return h
}

func TestWriteHTML(t *testing.T) {
	h := reportHistory()
	r := Check(h)
	for _, k := range []AnomalyKind{KindLostWrite, KindUnseen, KindIntPollSkip} {
		if r.Counts[k] == 0 {
			t.Fatalf("no %s in %s", k, r.Verdict())
		}
	}
	dir := t.TempDir()
	if err := WriteHTML(dir, h, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{"4242", "<svg", "time since start (s)", "p99", "SIGKILL node 2", `href="log-log-0.html"`, `href="offsets-r-0.html"`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if n := strings.Count(page, `<g class="fault">`); n != len(h.Faults) {
		t.Errorf("%d fault bands, want %d", n, len(h.Faults))
	}
	if !strings.Contains(page, `class="send-failed"`) || !strings.Contains(page, `class="send-unknown"`) {
		t.Error("failed and unknown sends are not marked")
	}
	for _, a := range r.Anomalies {
		if !strings.Contains(page, string(a.Kind)) {
			t.Errorf("report.html lacks anomaly %s", a.Kind)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") && !strings.Contains(page, "http://www.w3.org/2000/svg") {
		t.Error("report.html is not self-contained")
	}
	// Every SVG is well-formed XML.
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatal("an unclosed <svg>")
		}
		svg := rest[i : i+j+len("</svg>")]
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err != nil {
				if err.Error() != "EOF" {
					t.Errorf("SVG not well-formed: %v", err)
				}
				break
			}
		}
		rest = rest[i+j:]
	}
	for _, name := range []string{"log-log-0.html", "offsets-r-0.html"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("visualisation %s: %v", name, err)
		}
	}
}

func TestWriteText(t *testing.T) {
	h := reportHistory()
	r := Check(h)
	var b bytes.Buffer
	if err := WriteText(&b, h, r); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if first, _, _ := strings.Cut(text, "\n"); first != r.Verdict() || !strings.HasPrefix(first, "INVALID seed=4242: lost-write 1, unseen 1, int-poll-skip 1") {
		t.Errorf("first line %q", first)
	}
	for _, want := range []string{
		"[1.000s, 2.000s] kill      nodes [2]: SIGKILL node 2",
		"[1.500s, end of faults] partition nodes [1 3]",
		`#10 producer-0 send ok [1.000s, 1.008s] topic q p0 value "v10" at offset 10`,
		"records: p0@10=\"v10\"",
		"linearizability log-log-0: ok (2 operations)",
		"sends 40 ok, 1 fail, 1 info",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	h := reportHistory()
	path := filepath.Join(t.TempDir(), "history.json")
	if err := WriteJSON(path, h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("read back a different history")
	}
	if a, b := Check(h).Verdict(), Check(got).Verdict(); a != b {
		t.Errorf("verdicts %q and %q", a, b)
	}
	if _, err := ReadJSON(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("read a missing file")
	}
}

func TestVerdictValid(t *testing.T) {
	h := &History{Seed: 42, Nodes: 3, Ops: abc(), Faults: make([]Fault, 9), Final: final(rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c"))}
	if got := Check(h).Verdict(); got != "VALID seed=42 nodes=3 ops=3 faults=9" {
		t.Errorf("verdict %q", got)
	}
}
