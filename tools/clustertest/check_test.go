package clustertest

import (
	"strings"
	"testing"
	"time"
)

// A synthetic history with nothing wrong: two partitions, everything
// acknowledged, consumed and committed.
func cleanHistory() History {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := History{LogStart: map[int32]int64{}, Healed: t0.Add(time.Second)}
	for p := int32(0); p < 2; p++ {
		for o := int64(0); o < 4; o++ {
			r := Record{p, o, "p0-" + string(rune('a'+p)) + string(rune('0'+o))}
			h.Acked = append(h.Acked, r)
			h.Log = append(h.Log, r)
			h.Consumed = append(h.Consumed, r)
		}
		h.Commits = append(h.Commits,
			CommitSample{t0, p, 1},
			CommitSample{t0.Add(2 * time.Second), p, 4})
	}
	return h
}

func kinds(r Result) []Kind {
	var ks []Kind
	for _, a := range r.Anomalies {
		ks = append(ks, a.Kind)
	}
	return ks
}

func expect(t *testing.T, h History, want ...Kind) Result {
	t.Helper()
	r := Check(h)
	got := kinds(r)
	if len(got) != len(want) {
		t.Fatalf("anomalies %v, want %v\n%s", got, want, r.Report(0))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("anomalies %v, want %v\n%s", got, want, r.Report(0))
		}
	}
	return r
}

func TestCheckClean(t *testing.T) {
	r := expect(t, cleanHistory())
	if !r.OK() || r.Acked != 8 || r.Logged != 8 || r.Consumed != 8 {
		t.Fatalf("%+v", r)
	}
}

func TestCheckLostWrite(t *testing.T) {
	h := cleanHistory()
	h.Log = append(h.Log[:2:2], h.Log[3:]...) // p0@2 is gone
	h.Consumed = h.Consumed[:2]
	r := expect(t, h, Lost)
	if a := r.Anomalies[0]; len(a.Records) != 1 || a.Records[0] != (Record{0, 2, "p0-a2"}) {
		t.Fatalf("%v", a)
	}
	if !strings.Contains(r.Report(0), `p0@2="p0-a2"`) {
		t.Fatalf("the report does not name the record:\n%s", r.Report(0))
	}
}

// A lost write whose position another value took (a truncated and
// rewritten tail).
func TestCheckOverwritten(t *testing.T) {
	h := cleanHistory()
	h.Log[3].Value = "p1-other"
	h.Consumed = h.Consumed[:3]
	r := expect(t, h, Lost)
	if !strings.Contains(r.Anomalies[0].Msg, `"p1-other" at its position`) {
		t.Fatal(r.Anomalies[0].Msg)
	}
}

func TestCheckDuplicate(t *testing.T) {
	h := cleanHistory()
	dup := h.Log[1]
	dup.Offset = 4
	h.Log = append(h.Log, dup) // p0-a1 at offsets 1 and 4
	r := expect(t, h, Duplicate)
	if len(r.Anomalies[0].Records) != 2 {
		t.Fatalf("%v", r.Anomalies[0])
	}
	// Values outside Covered (the harness's probes) may repeat.
	h.Covered = func(v string) bool { return !strings.HasPrefix(v, "p0-a1") }
	expect(t, h)
}

func TestCheckOffsetMismatch(t *testing.T) {
	h := cleanHistory()
	h.Acked[1].Offset = 7 // acknowledged at 7, in the log at 1
	r := expect(t, h, Moved)
	if len(r.Anomalies[0].Records) != 2 || r.Anomalies[0].Records[1].Offset != 1 {
		t.Fatalf("%v", r.Anomalies[0])
	}
}

func TestCheckConsumed(t *testing.T) {
	h := cleanHistory()
	h.Consumed = append(h.Consumed, Record{1, 9, "ghost"}, Record{1, 2, "not-this"}, h.Consumed[0]) // a redelivery is fine
	expect(t, h, ConsumedMismatch, ConsumedNotInLog)                                                // in position order
}

func TestCheckCommitBackwards(t *testing.T) {
	h := cleanHistory()
	t0 := h.Commits[0].At
	h.Commits = append(h.Commits, CommitSample{t0.Add(3 * time.Second), 1, 2}, CommitSample{t0.Add(4 * time.Second), 1, 4})
	r := expect(t, h, CommitBackwards)
	if !strings.Contains(r.Anomalies[0].Msg, "partition 1: committed offset 2") {
		t.Fatal(r.Anomalies[0].Msg)
	}
}

func TestCheckCommitStalled(t *testing.T) {
	h := cleanHistory()
	h.Commits = h.Commits[:1:1] // partition 0 stays at 1; partition 1 never commits
	expect(t, h, CommitStalled, CommitStalled)
	// A group that had consumed everything before the fault has nothing
	// to move on to.
	h = cleanHistory()
	h.Commits[0].Offset, h.Commits[1].Offset = 4, 4
	expect(t, h)
}

// Retention removed the acknowledged records below the log start: they
// are not lost.
func TestCheckRetention(t *testing.T) {
	h := cleanHistory()
	h.Log = h.Log[2:]
	h.LogStart[0] = 2
	r := expect(t, h)
	if r.Expired != 2 {
		t.Fatalf("expired %d, want 2", r.Expired)
	}
}

func TestReportLimits(t *testing.T) {
	h := cleanHistory()
	h.Log = nil
	h.Consumed = nil
	h.Commits = nil
	h.Healed = time.Time{}
	r := Check(h)
	rep := r.Report(3)
	if len(r.Anomalies) != 8 || !strings.Contains(rep, "(5 more lost)") || strings.Count(rep, "lost:") != 3 {
		t.Fatalf("%d anomalies:\n%s", len(r.Anomalies), rep)
	}
}
