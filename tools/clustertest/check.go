// This file is the checker, kept free of any client library so that a
// Jepsen-style runner (issue 14) can feed it its own histories.

package clustertest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Record is one record of the workload topic: where it is (or was
// acknowledged or consumed at) and its value.
type Record struct {
	Partition int32
	Offset    int64
	Value     string
}

func (r Record) String() string { return fmt.Sprintf("p%d@%d=%q", r.Partition, r.Offset, r.Value) }

type position struct {
	partition int32
	offset    int64
}

// CommitSample is a consumer group's committed offset of one partition,
// read at one time.
type CommitSample struct {
	At        time.Time
	Partition int32
	Offset    int64
}

// History is what a run saw.
type History struct {
	// Acked are the produces the broker acknowledged, each with the
	// partition and offset of the acknowledgement.
	Acked []Record
	// Log is a final read of every partition, from its log start offset
	// to its end, by a fresh consumer.
	Log []Record
	// LogStart is each partition's log start offset at that read:
	// retention may have removed what is below it.
	LogStart map[int32]int64
	// Consumed are the records the consumer group handed to the
	// application (redeliveries included).
	Consumed []Record
	// Commits are the group's committed offsets, polled over the run, in
	// the order read.
	Commits []CommitSample
	// Healed is when the fault ended; when set, every partition's
	// committed offset must have moved forward after it (when the log has
	// records past it).
	Healed time.Time
	// Covered selects the values whose uniqueness is checked (probe
	// records of the harness are not); nil covers every value.
	Covered func(value string) bool
}

// Kind names a class of anomaly.
type Kind string

const (
	Lost             Kind = "lost"                // an acknowledged value is not in the log
	Moved            Kind = "offset-mismatch"     // an acknowledged value is in the log at another position
	Duplicate        Kind = "duplicate"           // a value is in the log more than once
	ConsumedNotInLog Kind = "consumed-not-in-log" // a consumed position is not in the log
	ConsumedMismatch Kind = "consumed-mismatch"   // a consumed position holds another value in the log
	CommitBackwards  Kind = "commit-backwards"    // a committed offset went down
	CommitStalled    Kind = "commit-stalled"      // a committed offset did not move after the fault
)

// Anomaly is one violation, with the records involved.
type Anomaly struct {
	Kind    Kind
	Msg     string
	Records []Record
}

func (a Anomaly) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", a.Kind, a.Msg)
	for _, r := range a.Records {
		fmt.Fprintf(&b, "\n\t%v", r)
	}
	return b.String()
}

// Result is Check's verdict.
type Result struct {
	Anomalies []Anomaly
	Acked     int // acknowledged records checked
	Expired   int // acknowledged records below the log start (removed by retention)
	Logged    int // records in the final read
	Consumed  int
}

// OK reports whether no anomaly was found.
func (r Result) OK() bool { return len(r.Anomalies) == 0 }

// Report lists the anomalies, at most perKind of each kind (0: all).
func (r Result) Report(perKind int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d acknowledged (%d below the log start), %d in the log, %d consumed: %d anomalies",
		r.Acked, r.Expired, r.Logged, r.Consumed, len(r.Anomalies))
	seen := map[Kind]int{}
	for _, a := range r.Anomalies {
		seen[a.Kind]++
		if perKind > 0 && seen[a.Kind] > perKind {
			continue
		}
		b.WriteString("\n")
		b.WriteString(a.String())
	}
	for k, n := range seen {
		if perKind > 0 && n > perKind {
			fmt.Fprintf(&b, "\n(%d more %s)", n-perKind, k)
		}
	}
	return b.String()
}

// Check checks h:
//
//   - every acknowledged value is in the log exactly once, at the
//     position it was acknowledged with (unless retention removed that
//     position: below LogStart);
//   - no covered value is in the log twice;
//   - every consumed record is the log's record at its position;
//   - no partition's committed offset goes down, and each moves forward
//     after Healed when the log has records past it.
func Check(h History) Result {
	covered := h.Covered
	if covered == nil {
		covered = func(string) bool { return true }
	}
	res := Result{Logged: len(h.Log), Consumed: len(h.Consumed)}
	add := func(k Kind, msg string, rs ...Record) {
		res.Anomalies = append(res.Anomalies, Anomaly{Kind: k, Msg: msg, Records: rs})
	}
	at := make(map[position]Record, len(h.Log))
	where := make(map[string][]Record, len(h.Log))
	ends := map[int32]int64{} // one past the last logged offset
	for _, r := range h.Log {
		pos := position{r.Partition, r.Offset}
		if prev, ok := at[pos]; ok {
			if prev.Value != r.Value {
				add(Duplicate, fmt.Sprintf("the final read returned position p%d@%d twice with different values", r.Partition, r.Offset), prev, r)
			}
			continue
		}
		at[pos] = r
		where[r.Value] = append(where[r.Value], r)
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	// Duplicates, in a stable order.
	values := make([]string, 0, len(where))
	for v, rs := range where {
		if len(rs) > 1 && covered(v) {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	for _, v := range values {
		add(Duplicate, fmt.Sprintf("value %q is in the log %d times", v, len(where[v])), where[v]...)
	}

	acked := slices.Clone(h.Acked)
	slices.SortFunc(acked, compareRecords)
	ackedAt := map[string]Record{}
	for _, a := range acked {
		res.Acked++
		if prev, ok := ackedAt[a.Value]; ok && prev != a {
			add(Duplicate, fmt.Sprintf("value %q was acknowledged twice, at different positions", a.Value), prev, a)
		}
		ackedAt[a.Value] = a
		if a.Offset < h.LogStart[a.Partition] {
			res.Expired++
			continue
		}
		got, ok := at[position{a.Partition, a.Offset}]
		switch {
		case ok && got.Value == a.Value:
		case len(where[a.Value]) > 0:
			add(Moved, fmt.Sprintf("acknowledged %v; the log has it elsewhere (and %s at its position)", a, describe(got, ok)),
				append([]Record{a}, where[a.Value]...)...)
		default:
			add(Lost, fmt.Sprintf("acknowledged %v is not in the log (%s at its position)", a, describe(got, ok)), a)
		}
	}

	consumed := slices.Clone(h.Consumed)
	slices.SortFunc(consumed, compareRecords)
	for i, c := range consumed {
		if i > 0 && consumed[i-1] == c {
			continue // a redelivery
		}
		if c.Offset < h.LogStart[c.Partition] {
			continue
		}
		got, ok := at[position{c.Partition, c.Offset}]
		switch {
		case !ok:
			add(ConsumedNotInLog, fmt.Sprintf("consumed %v; the log has nothing there", c), c)
		case got.Value != c.Value:
			add(ConsumedMismatch, fmt.Sprintf("consumed %v; the log has %q there", c, got.Value), c, got)
		}
	}

	// Committed offsets, per partition in the order sampled.
	byPart := map[int32][]CommitSample{}
	for _, s := range h.Commits {
		if s.Offset >= 0 {
			byPart[s.Partition] = append(byPart[s.Partition], s)
		}
	}
	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		ss := byPart[p]
		high, atHeal := ss[0], int64(-1)
		for _, s := range ss {
			if s.Offset < high.Offset {
				add(CommitBackwards, fmt.Sprintf("partition %d: committed offset %d at %s after %d at %s",
					p, s.Offset, s.At.Format("15:04:05.000"), high.Offset, high.At.Format("15:04:05.000")))
			} else {
				high = s
			}
			if !h.Healed.IsZero() && !s.At.After(h.Healed) {
				atHeal = max(atHeal, s.Offset)
			}
		}
		last := ss[len(ss)-1].Offset
		if !h.Healed.IsZero() && ends[p] > max(atHeal, 0) && last <= atHeal {
			add(CommitStalled, fmt.Sprintf("partition %d: committed offset %d when the fault healed, %d at the end, while the log ends at %d",
				p, atHeal, last, ends[p]))
		}
	}
	if !h.Healed.IsZero() {
		var never []int32
		for p := range ends {
			if _, ok := byPart[p]; !ok {
				never = append(never, p)
			}
		}
		slices.Sort(never)
		for _, p := range never {
			add(CommitStalled, fmt.Sprintf("partition %d: the log ends at %d and the group never committed an offset", p, ends[p]))
		}
	}
	return res
}

func describe(r Record, ok bool) string {
	if !ok {
		return "nothing"
	}
	return fmt.Sprintf("%q", r.Value)
}

func compareRecords(a, b Record) int {
	return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Value, b.Value))
}
