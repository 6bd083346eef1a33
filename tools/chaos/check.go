// This file is the checker: Check reads a History and reports what in it
// no correct Kafka-compatible broker could have produced. The queue checks
// are those of Jepsen's Kafka analysis (jepsen.tests.kafka, as used for
// Redpanda and Kafka), restricted to what a History holds (the
// transactions of the txn workload are checked for aborted reads, lost
// commits, atomicity, duplicates and order, check_txn.go, not by a G0/G1
// cycle search); the linearizability checks are porcupine models
// (check_log.go), as in replica/raft_random_test.go.
//
// Every check starts from an index per (topic, partition): offset -> the
// values observed there, from every observation: OK sends and OK appends
// (the acknowledged offset), poll records, the Final reads, and OK reads
// of the log workload (Values[i] at offset i).
//
//   - inconsistent-offsets (Jepsen: :inconsistent-offsets): one offset
//     observed with two different values.
//   - duplicate (Jepsen: :duplicate): one value observed at two or more
//     offsets of a partition (a run's send values are unique). An OK send
//     acknowledged at another offset than a read found its value at is
//     one too. With History.Unique set, only values with one of its
//     prefixes are checked (a harness's probe records may repeat).
//   - lost-write (Jepsen: :lost-write): an OK send (p, o, v) whose value no
//     read (poll, Final read, log read) ever returned, although a read
//     returned an offset above o in p. If o is below the partition's
//     LogStart the record may have been deleted by retention: it counts in
//     Result.Expired, not as an anomaly.
//   - unseen (Jepsen: :unseen): OK sends at or above LogStart that are not
//     in the Final read of their partition (only for partitions that have
//     one). One anomaly per partition, Count the number of sends. A
//     lost-write is also unseen, and both are reported, as Jepsen does.
//   - polled-not-in-final: a record a poll returned at an offset at or
//     above its partition's LogStart where the Final read (for partitions
//     that have one) holds no record at all: the log lost a record a
//     consumer had seen, acknowledged or not (another value there is
//     inconsistent-offsets). One anomaly per partition, Count the number
//     of offsets.
//   - poll-skip / int-poll-skip (Jepsen: :poll-skip, :int-poll-skip):
//     within one consumer process and partition, two consecutive offsets a
//     then b the consumer polled with b > a+1 while the index holds a value
//     at some offset in (a, b): the consumer skipped a record that exists.
//     int-poll-skip is the same inside a single poll; poll-skip is across
//     two polls. A gap the index knows no value for (a transaction marker,
//     a record nobody saw) is not a skip, nor is one whose known records
//     are all below the partition's LogStart (retention may have deleted
//     them before the consumer got there; it then resumes at the start).
//   - nonmonotonic-poll / int-nonmonotonic-poll (Jepsen: :nonmonotonic-poll,
//     :int-nonmonotonic-poll): same scope, b <= a (the consumer went back
//     or saw an offset twice), across two polls or inside one.
//     For both poll checks, a consumer's operations are taken in End
//     order (a poll's records are those of the assignment at its End, and
//     an OpAssign may fall inside a poll), and an OpAssign of a topic
//     restarts the tracking of the partitions it newly assigns (a
//     consumer's position in a partition it did not own before starts at
//     its group's committed offset; Jepsen likewise does not compare
//     across assign/subscribe). A partition the consumer owned before and
//     still owns keeps its tracking: kgo calls the assignment callbacks at
//     every rebalance, so restarting every partition there would hide the
//     skips of all but the shortest stretches. The first OpAssign of a
//     topic restarts all its partitions; a consumer with no OpAssign is
//     tracked from its first poll on.
//   - nonmonotonic-send (Jepsen: :nonmonotonic-send): within one producer
//     process and partition, OK sends ordered by Start whose acknowledged
//     offsets do not increase.
//   - commit-backwards: per (group, partition) of the queue workload's
//     groups, an OK OpFetchOffsets that started after another had ended
//     returned a lower offset (absent counts as -1). Groups with an
//     OpCommit from a process named "offsets-*" are the offsets workload's
//     registers and are checked by the next check instead. (Jepsen checks
//     committed-offset monotonicity through its :offsets and
//     :nonmonotonic-poll analyses; this is the History's form of it.)
//   - commit-stalled (consumer liveness): with History.CommitGroup and
//     Healed set, a partition of the group's topic whose Final read ends
//     past the offset the group had committed when the faults were healed
//     (the highest that its OK OpFetchOffsets ended by Healed returned;
//     absent: -1), although the last of its OK OpFetchOffsets to end
//     returned no more: the group stopped committing it after the heal,
//     or never committed it.
//   - offsets-not-linearizable: per (group, partition) of the offsets
//     workload, OpCommit (write of Offsets[p]) and OK OpFetchOffsets (read;
//     absent = -1) are not linearizable as a register. Info writes may
//     take effect at any time after their Start; Fail writes are dropped.
//   - log-not-linearizable: per (topic, partition) of the log workload, OK
//     and Info OpAppend (returns the number of values before it; unknown
//     for Info) and OK OpRead (returns exactly the log) are not
//     linearizable as an append-only log (Knossos-style, as in Jepsen's
//     linearizable checks). A porcupine timeout is reported as a Note and
//     LinCheck.Result "unknown", not as an anomaly.
//   - stale-read (check_stale.go): a read returned less than what an
//     operation that completed (OK) before the read was invoked had
//     established, as a leader or coordinator cut off from its quorum,
//     paused or deposed would if it answered reads from its own state.
//     High watermarks: an OK OpHighWater (a Fetch's HighWatermark or
//     ListOffsets latest, one request timed by the workload) of a
//     partition returned h although an OK acks=all send or append at
//     offset o >= h, or another OpHighWater that returned more than h,
//     had completed before it began (with History.Acks1 the queue's
//     producers' sends establish nothing). Committed offsets, in the
//     queue workload's groups: an OK OpFetchOffsets returned v (absent:
//     -1) for a partition although an OK OpCommit of a value above v had
//     completed before it began, and no commit of v (OK, or Info: it may
//     apply late) could have taken effect after that one. One anomaly
//     per partition (and group), Count the number of stale reads. Left to
//     the checks that already cover them: the offsets workload's
//     registers (offsets-not-linearizable), the log workload's reads,
//     whose high watermark bounds what they return (log-not-linearizable),
//     and the high watermarks of consumer polls, which kgo fetches ahead
//     of the poll (no invoke time to compare with).
//   - min-isr-ack (check_minisr.go): an OK acks=all send or append
//     whose whole [Start, End] fell under faults (History.Faults' Down
//     and Sides) that left fewer than the topic's min.insync.replicas
//     (History.MinInsync) of its partition's replicas up and reachable
//     from one another: no correct broker could have had enough copies.
//   - unpolled (consumer liveness; Jepsen's :unseen counts sends no poll
//     returned): when History.Drained is set, OK sends to DrainTopic that
//     no consumer poll returned although the producers had stopped and the
//     group was given a bound to catch up: a partition nobody consumed (no
//     member assigned it), or a consumer stuck. One anomaly per
//     partition, Count the number of sends.
//   - txn-aborted-read, txn-lost-commit, txn-partial, txn-duplicate,
//     txn-order (check_txn.go): the txn workload's transactions, from
//     their OpTxn operations, the read_committed polls and the topic's
//     read_committed Final read: a record of a transaction that cannot
//     have committed read; an acknowledged commit's record missing from
//     the Final read; a transaction partly in it; a record twice in it;
//     a producer's records out of order in a partition.
//   - txn-g1c, txn-double-consume (check_txn_cycles.go): a cycle of
//     write-read and write-write dependencies between committed
//     transactions that read_committed forbids (G1c); a record read by
//     two committed consume-transform-produce transactions of a group.
//     Write cycles (G0) are counted (Result.TxnWriteCycles), not
//     reported: Kafka's transactions permit them (check_txn.go).
//   - final-read-failed (liveness): a topic whose final read, after the
//     heal, did not complete within the runner's bound
//     (History.FinalErrors); the checks that need the final read skip it.
//   - no-leader-after-heal: a partition whose History.Liveness is
//     negative: after every fault was healed it never had a leader that
//     accepted a write within the runner's bound.

package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// AnomalyKind names a kind of anomaly, in Jepsen's words where Jepsen has
// one.
type AnomalyKind string

// The anomaly kinds, in the order the verdict and the reports list them.
const (
	KindInconsistentOffsets    AnomalyKind = "inconsistent-offsets"
	KindDuplicate              AnomalyKind = "duplicate"
	KindLostWrite              AnomalyKind = "lost-write"
	KindUnseen                 AnomalyKind = "unseen"
	KindPolledNotInFinal       AnomalyKind = "polled-not-in-final"
	KindPollSkip               AnomalyKind = "poll-skip"
	KindIntPollSkip            AnomalyKind = "int-poll-skip"
	KindNonmonotonicPoll       AnomalyKind = "nonmonotonic-poll"
	KindIntNonmonotonicPoll    AnomalyKind = "int-nonmonotonic-poll"
	KindNonmonotonicSend       AnomalyKind = "nonmonotonic-send"
	KindCommitBackwards        AnomalyKind = "commit-backwards"
	KindCommitStalled          AnomalyKind = "commit-stalled"
	KindOffsetsNotLinearizable AnomalyKind = "offsets-not-linearizable"
	KindLogNotLinearizable     AnomalyKind = "log-not-linearizable"
	KindStaleRead              AnomalyKind = "stale-read"
	KindNoLeaderAfterHeal      AnomalyKind = "no-leader-after-heal"
	KindUnpolled               AnomalyKind = "unpolled"
	KindFinalReadFailed        AnomalyKind = "final-read-failed"
)

// Kinds is every anomaly kind, in report order.
var Kinds = []AnomalyKind{
	KindInconsistentOffsets, KindDuplicate, KindLostWrite, KindUnseen, KindPolledNotInFinal,
	KindPollSkip, KindIntPollSkip, KindNonmonotonicPoll, KindIntNonmonotonicPoll,
	KindNonmonotonicSend, KindCommitBackwards, KindCommitStalled, KindOffsetsNotLinearizable,
	KindLogNotLinearizable, KindStaleRead, KindMinISRAck,
	KindTxnAbortedRead, KindTxnLostCommit, KindTxnPartial, KindTxnDuplicate, KindTxnOrder,
	KindTxnG1c, KindTxnDoubleConsume,
	KindNoLeaderAfterHeal, KindUnpolled, KindFinalReadFailed,
}

// Anomaly is one thing the history shows went wrong.
type Anomaly struct {
	Kind      AnomalyKind `json:"kind"`
	Topic     string      `json:"topic,omitempty"`
	Group     string      `json:"group,omitempty"`
	Partition int32       `json:"partition"`
	// Msg says what happened for people, with at most a few examples.
	Msg string `json:"msg"`
	// Count is how many instances this anomaly stands for: 1, or for
	// unseen the number of sends missing from the Final read.
	Count int `json:"count"`
	// Ops are the operations involved, as indexes into History.Ops; all
	// of them, not only those Msg names.
	Ops []int `json:"ops,omitempty"`
	// Records are the records involved, as they were observed (with
	// Partition, Offset and Value).
	Records []Record `json:"records,omitempty"`
}

// LinCheck is one porcupine check: a log partition or an offsets register.
type LinCheck struct {
	Kind      AnomalyKind `json:"kind"` // KindLogNotLinearizable or KindOffsetsNotLinearizable
	Name      string      `json:"name"` // "log-<topic>-<p>" or "offsets-<group>-<p>": the visualisation's file name, less ".html"
	Topic     string      `json:"topic,omitempty"`
	Group     string      `json:"group,omitempty"`
	Partition int32       `json:"partition"`
	Ops       int         `json:"ops"`    // operations checked
	Result    string      `json:"result"` // "ok", "illegal" or "unknown" (timed out)

	vis *visualization // for WriteHTML; nil in a Result read back from JSON
}

// Result is what Check found.
type Result struct {
	// Of the history, for the verdict.
	Seed   int64 `json:"seed"`
	Nodes  int   `json:"nodes"`
	Ops    int   `json:"ops"`
	Faults int   `json:"faults"`

	Anomalies []Anomaly `json:"anomalies"`
	// Counts is, per kind, the sum of the Count of its anomalies.
	Counts map[AnomalyKind]int `json:"counts"`

	SendsOK   int `json:"sends_ok"`
	SendsFail int `json:"sends_fail"`
	SendsInfo int `json:"sends_info"`
	Polls     int `json:"polls"`
	// RecordsSeen is the number of records the polls returned (with
	// repeats); FinalRecords the number in the Final reads.
	RecordsSeen  int `json:"records_seen"`
	FinalRecords int `json:"final_records"`
	// Expired is the number of OK sends below their partition's LogStart
	// that no read returned: perhaps deleted by retention, not counted as
	// lost or unseen.
	Expired int `json:"expired"`

	// The transactions of the txn workload (OpTxn) by outcome:
	// acknowledged committed, acknowledged aborted, asked to commit with
	// no answer (either), and the rest (asked to abort with no answer,
	// or never ended: not committed).
	TxnCommitted    int `json:"txn_committed,omitempty"`
	TxnAborted      int `json:"txn_aborted,omitempty"`
	TxnUnknown      int `json:"txn_unknown,omitempty"`
	TxnNotCommitted int `json:"txn_not_committed,omitempty"`
	// TxnWriteCycles is the number of write cycles (G0: strongly
	// connected components of the ww graph) between the committed
	// transactions of the Final reads: not anomalies in Kafka's model
	// (check_txn.go); the first is described in Notes.
	TxnWriteCycles int `json:"txn_write_cycles,omitempty"`

	// Checks are the linearizability checks that ran.
	Checks []LinCheck `json:"checks,omitempty"`
	// Notes are findings that do not make the history invalid (a
	// linearizability check that timed out).
	Notes []string `json:"notes,omitempty"`
}

// Valid reports whether the history shows no anomaly. A check that timed
// out (a Note) does not make it invalid.
func (r *Result) Valid() bool { return len(r.Anomalies) == 0 }

// Options tune CheckWith.
type Options struct {
	// LinTimeout bounds each porcupine check (one log partition or one
	// offsets register). Default 30 s.
	LinTimeout time.Duration
}

// DefaultLinTimeout is Options.LinTimeout's default.
const DefaultLinTimeout = 30 * time.Second

// Check runs every check on h with the default options.
func Check(h *History) *Result { return CheckWith(h, Options{}) }

// CheckWith runs every check on h.
func CheckWith(h *History, o Options) *Result {
	if o.LinTimeout <= 0 {
		o.LinTimeout = DefaultLinTimeout
	}
	c := &checker{h: h, opts: o, parts: map[tp]*partIndex{}, r: &Result{
		Seed: h.Seed, Nodes: h.Nodes, Ops: len(h.Ops), Faults: len(h.Faults),
		Counts: map[AnomalyKind]int{},
	}}
	c.count()
	c.index()
	c.offsetChecks()
	c.sendChecks()
	c.polledChecks()
	c.pollChecks()
	c.commitChecks()
	c.commitStalledChecks()
	c.logChecks()
	c.registerChecks()
	c.staleReadChecks()
	c.minISRChecks()
	c.txnChecks()
	c.livenessChecks()
	for _, a := range c.r.Anomalies {
		c.r.Counts[a.Kind] += a.Count
	}
	return c.r
}

// tp is a topic partition.
type tp struct {
	topic string
	p     int32
}

func (k tp) String() string { return fmt.Sprintf("%s/%d", k.topic, k.p) }

func cmpTP(a, b tp) int {
	return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.p, b.p))
}

// src is where an observation came from: op >= 0 an operation of the
// history, op < 0 the Final read.
type src struct{ op int }

// seen is one value observed at one offset, with its first observation.
type seen struct {
	value  string
	offset int64
	from   src
}

// partIndex is the index of one partition.
type partIndex struct {
	at      map[int64][]seen    // offset: the distinct values seen there
	where   map[string][]seen   // value: the distinct offsets it was seen at
	read    map[string]bool     // values some read returned
	final   map[string]struct{} // values in the Final read (nil: none)
	maxRead int64               // highest offset a read returned, or -1
	offsets []int64             // the offsets of at, sorted
}

type checker struct {
	h     *History
	opts  Options
	r     *Result
	parts map[tp]*partIndex
}

func (c *checker) add(a Anomaly) {
	if a.Count == 0 {
		a.Count = 1
	}
	c.r.Anomalies = append(c.r.Anomalies, a)
}

func (c *checker) count() {
	for _, op := range c.h.Ops {
		switch op.Kind {
		case OpSend:
			switch op.Outcome {
			case OK:
				c.r.SendsOK++
			case Fail:
				c.r.SendsFail++
			default:
				c.r.SendsInfo++
			}
		case OpPoll:
			c.r.Polls++
			c.r.RecordsSeen += len(op.Records)
		}
	}
	for _, byP := range c.h.Final {
		for _, recs := range byP {
			c.r.FinalRecords += len(recs)
		}
	}
}

func (c *checker) part(k tp) *partIndex {
	pi := c.parts[k]
	if pi == nil {
		pi = &partIndex{at: map[int64][]seen{}, where: map[string][]seen{}, read: map[string]bool{}, maxRead: -1}
		c.parts[k] = pi
	}
	return pi
}

// observe records that from saw value at offset of k; isRead: a read
// returned it (not an acknowledgement).
func (c *checker) observe(k tp, offset int64, value string, from src, isRead bool) {
	pi := c.part(k)
	s := seen{value: value, offset: offset, from: from}
	if !slices.ContainsFunc(pi.at[offset], func(x seen) bool { return x.value == value }) {
		pi.at[offset] = append(pi.at[offset], s)
	}
	if !slices.ContainsFunc(pi.where[value], func(x seen) bool { return x.offset == offset }) {
		pi.where[value] = append(pi.where[value], s)
	}
	if isRead {
		pi.read[value] = true
		pi.maxRead = max(pi.maxRead, offset)
	}
}

func (c *checker) index() {
	for i, op := range c.h.Ops {
		switch {
		case (op.Kind == OpSend || op.Kind == OpAppend) && op.Outcome == OK:
			c.observe(tp{op.Topic, op.Partition}, op.Offset, op.Value, src{i}, false)
		case op.Kind == OpPoll:
			for _, rec := range op.Records {
				c.observe(tp{op.Topic, rec.Partition}, rec.Offset, rec.Value, src{i}, true)
			}
		case op.Kind == OpRead && op.Outcome == OK:
			for o, v := range op.Values {
				c.observe(tp{op.Topic, op.Partition}, int64(o), v, src{i}, true)
			}
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(c.h.Final)) {
		for _, p := range slices.Sorted(maps.Keys(c.h.Final[topic])) {
			k := tp{topic, p}
			pi := c.part(k)
			pi.final = map[string]struct{}{}
			for _, rec := range c.h.Final[topic][p] {
				c.observe(k, rec.Offset, rec.Value, src{-1}, true)
				pi.final[rec.Value] = struct{}{}
			}
		}
	}
	for _, pi := range c.parts {
		pi.offsets = slices.Sorted(maps.Keys(pi.at))
	}
}

// sortedParts returns the indexed partitions in order.
func (c *checker) sortedParts() []tp {
	return slices.SortedFunc(maps.Keys(c.parts), cmpTP)
}

// logStart returns k's log start offset after the run, if known.
func (c *checker) logStart(k tp) (int64, bool) {
	o, ok := c.h.LogStart[k.topic][k.p]
	return o, ok
}

// opRef names operation i for people.
func (c *checker) opRef(i int) string { return opRef(c.h, i) }

func opRef(h *History, i int) string {
	op := h.Ops[i]
	end := "never"
	if op.End > 0 || op.Outcome != Info {
		end = secs(op.End)
	}
	return fmt.Sprintf("#%d %s %s %s [%s, %s]", i, op.Process, op.Kind, op.Outcome, secs(op.Start), end)
}

func (c *checker) srcRef(s src) string {
	if s.op < 0 {
		return "final read"
	}
	return c.opRef(s.op)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// examples joins the first few of items and says how many it left out.
func examples(items []string) string {
	const few = 3
	if len(items) <= few {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:few], "; ") + fmt.Sprintf("; and %d more", len(items)-few)
}

// srcOps returns the operation indexes of the observations, deduplicated.
func srcOps(ss []seen) []int {
	var ops []int
	for _, s := range ss {
		if s.from.op >= 0 && !slices.Contains(ops, s.from.op) {
			ops = append(ops, s.from.op)
		}
	}
	return ops
}

// offsetChecks reports inconsistent offsets and duplicates.
func (c *checker) offsetChecks() {
	for _, k := range c.sortedParts() {
		pi := c.parts[k]
		for _, o := range pi.offsets {
			ss := pi.at[o]
			if len(ss) < 2 {
				continue
			}
			var parts []string
			var recs []Record
			for _, s := range ss {
				parts = append(parts, fmt.Sprintf("%q (%s)", s.value, c.srcRef(s.from)))
				recs = append(recs, Record{k.p, o, s.value})
			}
			c.add(Anomaly{Kind: KindInconsistentOffsets, Topic: k.topic, Partition: k.p,
				Msg: fmt.Sprintf("%s offset %d holds %d values: %s", k, o, len(ss), examples(parts)),
				Ops: srcOps(ss), Records: recs})
		}
		for _, v := range slices.Sorted(maps.Keys(pi.where)) {
			ss := pi.where[v]
			if len(ss) < 2 || !c.unique(v) {
				continue
			}
			slices.SortFunc(ss, func(a, b seen) int { return cmp.Compare(a.offset, b.offset) })
			var parts []string
			var recs []Record
			for _, s := range ss {
				parts = append(parts, fmt.Sprintf("%d (%s)", s.offset, c.srcRef(s.from)))
				recs = append(recs, Record{k.p, s.offset, v})
			}
			c.add(Anomaly{Kind: KindDuplicate, Topic: k.topic, Partition: k.p,
				Msg: fmt.Sprintf("%s value %q is at %d offsets: %s", k, v, len(ss), examples(parts)),
				Ops: srcOps(ss), Records: recs})
		}
	}
}

// sendChecks reports lost writes, unseen sends and nonmonotonic sends.
func (c *checker) sendChecks() {
	unseen := map[tp][]int{}
	type pk struct {
		process string
		k       tp
	}
	var sends []int
	for i, op := range c.h.Ops {
		if op.Kind != OpSend || op.Outcome != OK {
			continue
		}
		sends = append(sends, i)
		k := tp{op.Topic, op.Partition}
		pi := c.part(k)
		if ls, ok := c.logStart(k); ok && op.Offset < ls {
			// Perhaps deleted by retention: neither lost nor unseen.
			if !pi.read[op.Value] {
				c.r.Expired++
			}
			continue
		}
		if !pi.read[op.Value] && pi.maxRead > op.Offset {
			c.add(Anomaly{Kind: KindLostWrite, Topic: k.topic, Partition: k.p,
				Msg: fmt.Sprintf("%s: %s acknowledged %q at offset %d; no read returned it, though reads returned offsets up to %d",
					k, c.opRef(i), op.Value, op.Offset, pi.maxRead),
				Ops: []int{i}, Records: []Record{{k.p, op.Offset, op.Value}}})
		}
		if pi.final != nil {
			if _, ok := pi.final[op.Value]; !ok {
				unseen[k] = append(unseen[k], i)
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(unseen), cmpTP) {
		ops := unseen[k]
		var ex []string
		var recs []Record
		for _, i := range ops {
			op := c.h.Ops[i]
			ex = append(ex, fmt.Sprintf("%q at %d (%s)", op.Value, op.Offset, c.opRef(i)))
			recs = append(recs, Record{k.p, op.Offset, op.Value})
		}
		c.add(Anomaly{Kind: KindUnseen, Topic: k.topic, Partition: k.p, Count: len(ops),
			Msg: fmt.Sprintf("%s: %d acknowledged sends are not in the final read: %s", k, len(ops), examples(ex)),
			Ops: ops, Records: recs})
	}

	// Nonmonotonic sends: per producer and partition, in Start order.
	by := map[pk][]int{}
	for _, i := range sends {
		op := c.h.Ops[i]
		key := pk{op.Process, tp{op.Topic, op.Partition}}
		by[key] = append(by[key], i)
	}
	keys := slices.SortedFunc(maps.Keys(by), func(a, b pk) int {
		return cmp.Or(strings.Compare(a.process, b.process), cmpTP(a.k, b.k))
	})
	for _, key := range keys {
		ops := by[key]
		slices.SortStableFunc(ops, func(a, b int) int { return cmp.Compare(c.h.Ops[a].Start, c.h.Ops[b].Start) })
		for j := 1; j < len(ops); j++ {
			a, b := c.h.Ops[ops[j-1]], c.h.Ops[ops[j]]
			if b.Offset > a.Offset {
				continue
			}
			c.add(Anomaly{Kind: KindNonmonotonicSend, Topic: key.k.topic, Partition: key.k.p,
				Msg: fmt.Sprintf("%s: %s sent %q, acknowledged at %d, after %s sent %q, acknowledged at %d",
					key.k, c.opRef(ops[j]), b.Value, b.Offset, c.opRef(ops[j-1]), a.Value, a.Offset),
				Ops:     []int{ops[j-1], ops[j]},
				Records: []Record{{key.k.p, a.Offset, a.Value}, {key.k.p, b.Offset, b.Value}}})
		}
	}
}

// unique reports whether v is a value the run writes once
// (History.Unique).
func (c *checker) unique(v string) bool {
	return len(c.h.Unique) == 0 || slices.ContainsFunc(c.h.Unique, func(p string) bool { return strings.HasPrefix(v, p) })
}

// polledChecks reports polled records whose offset the Final read lacks.
func (c *checker) polledChecks() {
	finalAt := map[tp]map[int64]bool{} // the Final read's offsets, and those reported
	missing := map[tp][]Record{}
	missingOps := map[tp][]int{}
	for i, op := range c.h.Ops {
		if op.Kind != OpPoll {
			continue
		}
		for _, rec := range op.Records {
			k := tp{op.Topic, rec.Partition}
			recs, ok := c.h.Final[k.topic][k.p]
			if !ok {
				continue
			}
			if ls, known := c.logStart(k); known && rec.Offset < ls {
				continue
			}
			at := finalAt[k]
			if at == nil {
				at = map[int64]bool{}
				for _, r := range recs {
					at[r.Offset] = true
				}
				finalAt[k] = at
			}
			if at[rec.Offset] {
				continue
			}
			at[rec.Offset] = true // reported once
			missing[k] = append(missing[k], rec)
			missingOps[k] = append(missingOps[k], i)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(missing), cmpTP) {
		recs := missing[k]
		slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.Offset, b.Offset) })
		var ex []string
		for _, r := range recs {
			ex = append(ex, r.String())
		}
		c.add(Anomaly{Kind: KindPolledNotInFinal, Topic: k.topic, Partition: k.p, Count: len(recs),
			Msg: fmt.Sprintf("%s: %d polled offsets hold no record in the final read: %s", k, len(recs), examples(ex)),
			Ops: slices.Compact(missingOps[k]), Records: recs})
	}
}

// byProcess returns each process's operations in Start order.
func (c *checker) byProcess() ([]string, map[string][]int) {
	by := map[string][]int{}
	for i, op := range c.h.Ops {
		by[op.Process] = append(by[op.Process], i)
	}
	for _, ops := range by {
		slices.SortStableFunc(ops, func(a, b int) int { return cmp.Compare(c.h.Ops[a].Start, c.h.Ops[b].Start) })
	}
	return slices.Sorted(maps.Keys(by)), by
}

// pollChecks reports skips and nonmonotonic polls.
func (c *checker) pollChecks() {
	type last struct {
		op  int
		rec Record
	}
	procs, by := c.byProcess()
	for _, proc := range procs {
		pos := map[tp]last{}
		owned := map[string][]int32{} // topic: the last OpAssign's partitions
		ops := slices.Clone(by[proc])
		slices.SortStableFunc(ops, func(a, b int) int { return cmp.Compare(c.h.Ops[a].End, c.h.Ops[b].End) })
		for _, i := range ops {
			op := c.h.Ops[i]
			switch op.Kind {
			case OpAssign:
				prev, known := owned[op.Topic]
				for k := range pos {
					if k.topic == op.Topic && (!known || !slices.Contains(prev, k.p) || !slices.Contains(op.Parts, k.p)) {
						delete(pos, k)
					}
				}
				owned[op.Topic] = op.Parts
			case OpPoll:
				for _, rec := range op.Records {
					k := tp{op.Topic, rec.Partition}
					prev, ok := pos[k]
					pos[k] = last{i, rec}
					if !ok {
						continue
					}
					c.pollStep(k, prev.op, prev.rec, i, rec)
				}
			}
		}
	}
}

// pollStep checks one step of a consumer in partition k: from record a
// (polled by operation ia) to b (by ib).
func (c *checker) pollStep(k tp, ia int, a Record, ib int, b Record) {
	within := ia == ib
	where := "in one poll " + c.opRef(ib)
	if !within {
		where = "from " + c.opRef(ia) + " to " + c.opRef(ib)
	}
	ops := []int{ia, ib}
	if within {
		ops = ops[:1]
	}
	if b.Offset <= a.Offset {
		kind := KindNonmonotonicPoll
		if within {
			kind = KindIntNonmonotonicPoll
		}
		c.add(Anomaly{Kind: kind, Topic: k.topic, Partition: k.p,
			Msg: fmt.Sprintf("%s: %s polled offset %d (%q) then %d (%q) %s",
				k, c.h.Ops[ib].Process, a.Offset, a.Value, b.Offset, b.Value, where),
			Ops: ops, Records: []Record{a, b}})
		return
	}
	if b.Offset == a.Offset+1 {
		return
	}
	pi := c.parts[k]
	from := a.Offset + 1
	if ls, ok := c.logStart(k); ok {
		from = max(from, ls) // below it, retention may have been first
	}
	j, _ := slices.BinarySearch(pi.offsets, from)
	var skipped []Record
	for ; j < len(pi.offsets) && pi.offsets[j] < b.Offset; j++ {
		for _, s := range pi.at[pi.offsets[j]] {
			skipped = append(skipped, Record{k.p, s.offset, s.value})
		}
	}
	if len(skipped) == 0 {
		return
	}
	kind := KindPollSkip
	if within {
		kind = KindIntPollSkip
	}
	var ex []string
	for _, r := range skipped {
		ex = append(ex, r.String())
	}
	c.add(Anomaly{Kind: kind, Topic: k.topic, Partition: k.p,
		Msg: fmt.Sprintf("%s: %s polled offset %d (%q) then %d (%q) %s, skipping %d known records: %s",
			k, c.h.Ops[ib].Process, a.Offset, a.Value, b.Offset, b.Value, where, len(skipped), examples(ex)),
		Ops: ops, Records: append([]Record{a, b}, skipped...)})
}

// registerGroups returns the groups of the offsets workload: those with
// an OpCommit from a process named "offsets-*".
func (c *checker) registerGroups() map[string]bool {
	g := map[string]bool{}
	for _, op := range c.h.Ops {
		if op.Kind == OpCommit && strings.HasPrefix(op.Process, "offsets-") {
			g[op.Group] = true
		}
	}
	return g
}

// commitChecks reports committed offsets that went backwards in the
// queue workload's groups.
func (c *checker) commitChecks() {
	reg := c.registerGroups()
	fetches := map[string][]int{}
	for i, op := range c.h.Ops {
		if op.Kind == OpFetchOffsets && op.Outcome == OK && !reg[op.Group] {
			fetches[op.Group] = append(fetches[op.Group], i)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(fetches)) {
		ops := fetches[g]
		parts := map[int32]bool{}
		for _, i := range ops {
			for p := range c.h.Ops[i].Offsets {
				parts[p] = true
			}
		}
		byStart := slices.Clone(ops)
		slices.SortStableFunc(byStart, func(a, b int) int { return cmp.Compare(c.h.Ops[a].Start, c.h.Ops[b].Start) })
		byEnd := slices.Clone(ops)
		slices.SortStableFunc(byEnd, func(a, b int) int { return cmp.Compare(c.h.Ops[a].End, c.h.Ops[b].End) })
		for _, p := range slices.Sorted(maps.Keys(parts)) {
			val := func(i int) int64 {
				if o, ok := c.h.Ops[i].Offsets[p]; ok {
					return o
				}
				return -1
			}
			best, j := -1, 0 // best: the ended fetch with the highest offset
			for _, i := range byStart {
				for ; j < len(byEnd) && c.h.Ops[byEnd[j]].End < c.h.Ops[i].Start; j++ {
					if best < 0 || val(byEnd[j]) > val(best) {
						best = byEnd[j]
					}
				}
				if best >= 0 && val(i) < val(best) {
					op := c.h.Ops[i]
					c.add(Anomaly{Kind: KindCommitBackwards, Topic: op.Topic, Group: g, Partition: p,
						Msg: fmt.Sprintf("group %q partition %d: %s returned committed offset %d after %s had returned %d",
							g, p, c.opRef(i), val(i), c.opRef(best), val(best)),
						Ops: []int{best, i}})
				}
			}
		}
	}
}

// commitStalledChecks reports partitions whose committed offset, in
// History.CommitGroup, did not move on after the heal.
func (c *checker) commitStalledChecks() {
	g := c.h.CommitGroup
	if g == "" || c.h.Healed <= 0 {
		return
	}
	var fetches []int
	topics := map[string]bool{}
	for i, op := range c.h.Ops {
		if op.Kind == OpFetchOffsets && op.Outcome == OK && op.Group == g {
			fetches = append(fetches, i)
			topics[op.Topic] = true
		}
	}
	slices.SortStableFunc(fetches, func(a, b int) int { return cmp.Compare(c.h.Ops[a].End, c.h.Ops[b].End) })
	val := func(i int, p int32) int64 {
		if o, ok := c.h.Ops[i].Offsets[p]; ok {
			return o
		}
		return -1
	}
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		for _, p := range slices.Sorted(maps.Keys(c.h.Final[topic])) {
			recs := c.h.Final[topic][p]
			if len(recs) == 0 {
				continue
			}
			end := recs[len(recs)-1].Offset + 1
			atHeal, healOp := int64(-1), -1
			for _, i := range fetches {
				if c.h.Ops[i].End <= c.h.Healed && val(i, p) > atHeal {
					atHeal, healOp = val(i, p), i
				}
			}
			last := fetches[len(fetches)-1:]
			lastVal := int64(-1)
			if len(last) > 0 {
				lastVal = val(last[0], p)
			}
			if end <= atHeal || lastVal > atHeal {
				continue
			}
			var ops []int
			if healOp >= 0 {
				ops = append(ops, healOp)
			}
			ops = append(ops, last...)
			c.add(Anomaly{Kind: KindCommitStalled, Topic: topic, Group: g, Partition: p,
				Msg: fmt.Sprintf("group %q %s/%d: committed offset %d when the faults were healed at %s, %d at the end, while the final read ends at %d",
					g, topic, p, atHeal, secs(c.h.Healed), lastVal, end),
				Ops: ops})
		}
	}
}

// livenessChecks reports partitions that never had a leader after the
// heal.
func (c *checker) livenessChecks() {
	for _, topic := range slices.Sorted(maps.Keys(c.h.FinalErrors)) {
		c.add(Anomaly{Kind: KindFinalReadFailed, Topic: topic,
			Msg: fmt.Sprintf("%s: the final read after the heal did not complete: %s", topic, c.h.FinalErrors[topic])})
	}
	if c.h.Drained > 0 {
		polled := map[string]bool{}
		for i := range c.h.Ops {
			if op := &c.h.Ops[i]; op.Kind == OpPoll && op.Outcome == OK {
				for _, r := range op.Records {
					polled[r.Value] = true
				}
			}
		}
		left := map[int32][]int{}
		for i := range c.h.Ops {
			if op := &c.h.Ops[i]; op.Kind == OpSend && op.Outcome == OK && op.Topic == c.h.DrainTopic && !polled[op.Value] {
				left[op.Partition] = append(left[op.Partition], i)
			}
		}
		for _, p := range slices.Sorted(maps.Keys(left)) {
			ops := left[p]
			var ex []string
			var recs []Record
			for _, i := range ops {
				op := c.h.Ops[i]
				ex = append(ex, fmt.Sprintf("%q at %d (%s)", op.Value, op.Offset, c.opRef(i)))
				recs = append(recs, Record{p, op.Offset, op.Value})
			}
			c.add(Anomaly{Kind: KindUnpolled, Topic: c.h.DrainTopic, Partition: p, Count: len(ops),
				Msg: fmt.Sprintf("%s/%d: %d acknowledged sends no consumer polled, though the producers stopped at %s and the group had until %s: %s",
					c.h.DrainTopic, p, len(ops), secs(c.h.Drained), secs(c.h.Finished), examples(ex)),
				Ops: ops, Records: recs})
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(c.h.Liveness)) {
		for _, p := range slices.Sorted(maps.Keys(c.h.Liveness[topic])) {
			if c.h.Liveness[topic][p] >= 0 {
				continue
			}
			c.add(Anomaly{Kind: KindNoLeaderAfterHeal, Topic: topic, Partition: p,
				Msg: fmt.Sprintf("%s/%d had no leader that accepted a write after the faults were healed at %s",
					topic, p, secs(c.h.Healed))})
		}
	}
}
