package clustertest

// The workload's history as chaos.Check sees it (workload.history): the
// anomalies the scenarios must not show, on synthetic histories.

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/chaos"
)

// synthetic is a workload's recording, made by hand: two partitions,
// each acknowledged, consumed and committed at offsets 0..3.
type synthetic struct {
	sends, polls []chaos.Record
	fetches      []map[int32]int64 // at 0.5 s, 2 s, 3 s, ... after the start
	log          []chaos.Record
	starts       map[int32]int64
	healed       time.Duration // since the start; 1 s (0: no fault)
	extra        []chaos.Op    // more operations (assignments)
}

func cleanSynthetic() *synthetic {
	s := &synthetic{starts: map[int32]int64{0: 0, 1: 0}, healed: time.Second}
	for p := int32(0); p < 2; p++ {
		for o := int64(0); o < 4; o++ {
			r := chaos.Record{Partition: p, Offset: o, Value: "p0-" + string(rune('a'+p)) + string(rune('0'+o))}
			s.sends = append(s.sends, r)
			s.polls = append(s.polls, r)
			s.log = append(s.log, r)
		}
	}
	s.fetches = []map[int32]int64{{0: 1, 1: 1}, {0: 4, 1: 4}}
	return s
}

// history builds the workload's history: the sends in order, one poll
// per record, the fetches of committed offsets.
func (s *synthetic) history() *chaos.History {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &workload{c: &cluster{}, opts: workloadOpts{topic: "faults", group: "faults-group"}, start: t0, rec: chaos.NewRecorder(t0)}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for i, r := range s.sends {
		w.rec.Add(chaos.Op{Process: producerProc, Kind: chaos.OpSend, Outcome: chaos.OK, Topic: "faults",
			Partition: r.Partition, Offset: r.Offset, Value: r.Value, Start: ms(10 + i), End: ms(20 + i)})
	}
	for i, r := range s.polls {
		w.rec.Add(chaos.Op{Process: consumerProc, Kind: chaos.OpPoll, Outcome: chaos.OK, Topic: "faults", Group: "faults-group",
			Records: []chaos.Record{r}, Start: ms(100 + 2*i), End: ms(101 + 2*i)})
	}
	for i, offs := range s.fetches {
		at := ms(500)
		if i > 0 {
			at = time.Duration(i+1) * time.Second
		}
		w.rec.Add(chaos.Op{Process: offsetsProc, Kind: chaos.OpFetchOffsets, Outcome: chaos.OK, Topic: "faults", Group: "faults-group",
			Offsets: offs, Start: at, End: at + ms(5)})
	}
	for _, op := range s.extra {
		w.rec.Add(op)
	}
	var healed time.Time
	if s.healed > 0 {
		healed = t0.Add(s.healed)
	}
	return w.history(healed, 10*time.Second, s.starts, s.log)
}

// expect checks s's history and wants exactly the anomaly counts want.
func expect(t *testing.T, s *synthetic, want map[chaos.AnomalyKind]int) (*chaos.History, *chaos.Result) {
	t.Helper()
	h := s.history()
	r := chaos.Check(h)
	if want == nil {
		want = map[chaos.AnomalyKind]int{}
	}
	if !maps.Equal(r.Counts, want) {
		var b strings.Builder
		_ = chaos.WriteText(&b, h, r)
		t.Fatalf("anomalies %v, want %v\n%s", r.Counts, want, b.String())
	}
	return h, r
}

func TestCheckClean(t *testing.T) {
	_, r := expect(t, cleanSynthetic(), nil)
	if !r.Valid() || r.SendsOK != 8 || r.FinalRecords != 8 || r.RecordsSeen != 8 {
		t.Fatalf("%+v", r)
	}
}

func TestCheckLostWrite(t *testing.T) {
	s := cleanSynthetic()
	s.log = append(s.log[:2:2], s.log[3:]...) // p0@2 is gone
	s.polls = s.polls[:2]
	h, r := expect(t, s, map[chaos.AnomalyKind]int{chaos.KindLostWrite: 1, chaos.KindUnseen: 1})
	var b strings.Builder
	if err := chaos.WriteText(&b, h, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `p0@2="p0-a2"`) {
		t.Fatalf("the report does not name the record:\n%s", b.String())
	}
}

// A lost write whose position another value took (a truncated and
// rewritten tail).
func TestCheckOverwritten(t *testing.T) {
	s := cleanSynthetic()
	s.log[3].Value = "p1-other"
	s.polls = s.polls[:3]
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindInconsistentOffsets: 1, chaos.KindUnseen: 1})
}

func TestCheckDuplicate(t *testing.T) {
	s := cleanSynthetic()
	s.log = append(s.log, chaos.Record{Partition: 0, Offset: 4, Value: "p0-a1"}) // p0-a1 at offsets 1 and 4
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindDuplicate: 1})
	// The scenarios' probe records (values outside the workload's) may
	// repeat.
	s = cleanSynthetic()
	s.log = append(s.log, chaos.Record{Partition: 0, Offset: 4, Value: "probe-warm"}, chaos.Record{Partition: 0, Offset: 5, Value: "probe-warm"})
	expect(t, s, nil)
}

// An acknowledgement at another offset than the log's.
func TestCheckOffsetMismatch(t *testing.T) {
	s := cleanSynthetic()
	s.sends[1].Offset = 7 // acknowledged at 7, in the log at 1; and then p0-a2 at 2
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindDuplicate: 1, chaos.KindNonmonotonicSend: 1})
}

// Records consumed after the consumer lost and regained its partitions
// (a redelivery): one the log has another value at, one past its end.
func TestCheckConsumed(t *testing.T) {
	s := cleanSynthetic()
	s.extra = []chaos.Op{
		{Process: consumerProc, Kind: chaos.OpAssign, Outcome: chaos.OK, Topic: "faults", Start: 200 * time.Millisecond, End: 200 * time.Millisecond},
		{Process: consumerProc, Kind: chaos.OpAssign, Outcome: chaos.OK, Topic: "faults", Parts: []int32{0, 1}, Start: 201 * time.Millisecond, End: 201 * time.Millisecond},
		{Process: consumerProc, Kind: chaos.OpPoll, Outcome: chaos.OK, Topic: "faults", Start: 300 * time.Millisecond, End: 301 * time.Millisecond,
			Records: []chaos.Record{s.polls[0], {Partition: 1, Offset: 2, Value: "not-this"}, s.polls[7], {Partition: 1, Offset: 4, Value: "ghost"}}},
	}
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindInconsistentOffsets: 1, chaos.KindPolledNotInFinal: 1})
	// Without the rebalance, the redelivery is an anomaly too.
	s.extra = s.extra[2:]
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindInconsistentOffsets: 1, chaos.KindPolledNotInFinal: 1, chaos.KindNonmonotonicPoll: 2})
}

func TestCheckCommitBackwards(t *testing.T) {
	s := cleanSynthetic()
	s.fetches = append(s.fetches, map[int32]int64{0: 4, 1: 2}, map[int32]int64{0: 4, 1: 4})
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindCommitBackwards: 1})
}

func TestCheckCommitStalled(t *testing.T) {
	s := cleanSynthetic()
	s.fetches = []map[int32]int64{{0: 1}} // partition 0 stays at 1; partition 1 never commits
	expect(t, s, map[chaos.AnomalyKind]int{chaos.KindCommitStalled: 2})
	// A group that had consumed everything before the fault has nothing
	// to move on to.
	s = cleanSynthetic()
	s.fetches[0] = map[int32]int64{0: 4, 1: 4}
	expect(t, s, nil)
	// No fault, no heal to move on from.
	s = cleanSynthetic()
	s.fetches = []map[int32]int64{{0: 1}}
	s.healed = 0
	h, _ := expect(t, s, nil)
	if h.Healed != 0 {
		t.Fatalf("healed %v", h.Healed)
	}
}

// Retention removed acknowledged records below the log start: they are
// not lost, and the consumer may skip them.
func TestCheckRetention(t *testing.T) {
	s := cleanSynthetic()
	s.log = s.log[2:]
	s.starts[0] = 2
	s.polls = s.polls[2:]
	_, r := expect(t, s, nil)
	if r.Expired != 2 {
		t.Fatalf("expired %d, want 2", r.Expired)
	}
	// The consumer read p0@0, then resumed at the new log start.
	clean := cleanSynthetic().polls
	s.polls = append([]chaos.Record{clean[0]}, clean[2:]...)
	expect(t, s, nil)
}
