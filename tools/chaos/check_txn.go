package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The transaction checks, on the OpTxn operations of the txn workload
// (workload_txn.go), the read_committed polls of their topics and the
// topics' Final reads (read_committed: FinalReadCommitted). A record's
// value names its transaction, its index and the transaction's record
// count (TxnValue), so a record read anywhere is tied to the OpTxn that
// wrote it. A transaction may have committed when EndTransaction was
// asked to commit and answered (OK) or gave no answer (Info: Jepsen's
// indeterminate); it is acknowledged committed only when it answered OK.
// A transaction asked to abort, one whose EndTransaction was never sent
// (Fail, or no Txn: the producer was abandoned and a new instance fenced
// it) and one with no OpTxn in the history cannot have committed.
//
//   - txn-aborted-read: a read_committed poll or the Final read returned
//     a record of a transaction that cannot have committed (read
//     uncommitted or aborted data: Jepsen's G1a, aborted read). One
//     anomaly per transaction.
//   - txn-lost-commit: a transaction acknowledged committed with a
//     record missing from the Final read of its topic. One anomaly per
//     transaction; one with some of its records in the Final read is
//     txn-partial too.
//   - txn-partial: the Final read holds some but not all records of a
//     transaction (whatever its outcome): atomicity broken, the
//     transaction half visible (Jepsen's broken transaction; G1c-style
//     in the Kafka analysis' terms). One anomaly per transaction.
//   - txn-duplicate: a transaction's record (one value) at two or more
//     offsets of the Final read. One anomaly per value.
//   - txn-order: within a partition of the Final read, a producer's
//     records (of transactions that may have committed) out of order:
//     a later transaction's record (the producer runs one transaction
//     after another) at a lower offset than an earlier one's, or a
//     transaction's records not in the order produced. One anomaly per
//     partition and producer, Count the number of steps backwards.
//
//   - txn-g1c (check_txn_cycles.go): a cycle of dependencies between
//     committed transactions (G1c, cyclic information flow) that Kafka's
//     transactions with read_committed forbid. One anomaly per strongly
//     connected component, naming one cycle.
//   - txn-double-consume (check_txn_cycles.go): a record read by two
//     acknowledged committed consume-transform-produce transactions of
//     one consumer group (exactly-once processing broken: the group's
//     offset was committed past it twice). One anomaly per pair of
//     transactions, Count the records.
//
// # Cycles: why G1c fails a run and G0 does not
//
// Jepsen's Kafka workload (jepsen.tests.kafka, used in the Redpanda
// 21.10.1 analysis, jepsen.io/analyses/redpanda-21.10.1, 2022) infers
// Elle's dependencies from the logs: a partition is a list that
// transactions append to, its offset order the version order, so T1
// ww-> T2 when T2's record follows T1's in a partition, and T1 wr-> T2
// when T2 read a record of T1's. That analysis found write cycles (G0)
// and discussed them as a property of Kafka's transaction protocol, not
// of Redpanda: a Kafka transaction makes a producer's writes atomic (all
// of them visible or none), but no lock or ordering holds between
// transactions. Each partition's leader appends records in arrival
// order, the commit markers land partition by partition, and
// read_committed bounds what a partition returns by that partition's own
// last stable offset (LSO, the first offset of its oldest open
// transaction). So T1 before T2 in partition A while T2 is before T1 in
// partition B is what two producers writing both partitions at once
// produce, and Kafka promises nothing against it (the "write isolation"
// its documentation is unclear about, in that analysis's words). So
// jepsen.tests.kafka infers ww edges only with its :ww-deps option, and
// the Redpanda test's --no-ww-deps leaves them out to hunt for pure wr
// cycles, write cycles being everywhere; the circular information flow
// that analysis reported in Redpanda (G1c) was a bug, since fixed.
//
// Here: G0 cycles (ww edges only, between transactions) are counted
// (Result.TxnWriteCycles, one note with an example) and do not fail a
// run. G1c is checked with ww edges where they are sound: on a graph of
// events (a transaction's read, each of its appends, its commit, and
// each partition's LSO passing each record), whose every edge is a
// precedence in time that Kafka guarantees (check_txn_cycles.go lists
// them). A read of T2's record at offset o means the LSO had passed o,
// so every transaction with a record below o in that partition was
// decided; a consume-transform-produce transaction reads before it
// appends; a transaction's appends precede its commit. Mixing ww and wr
// naively at the level of transactions would be wrong for Kafka too:
// T1 ww-> T2 in partition A, T3 read T2's record in partition C (wr),
// T3 ww-> T1 in partition B is allowed (T1 open throughout, appending to
// A early and to B late; T2's record in C is visible while A's LSO still
// waits for T1). The event graph has no cycle there: T1's appends to A
// and to B are separate events with no order between them. Had T3 read
// T2's record in A, it would be a cycle: A's LSO cannot pass T1's record
// before T1 ends, and T1 appended to B after T3 did.
//
// Only the consume-transform-produce transactions (workload_txn.go's
// transformers) read, so only they have wr edges: without them the G1c
// check has nothing to find.
//
// Topics whose final read failed (History.FinalErrors) or that have no
// Final read are left out of the checks that need it.

// The transaction anomaly kinds.
const (
	KindTxnAbortedRead AnomalyKind = "txn-aborted-read"
	KindTxnLostCommit  AnomalyKind = "txn-lost-commit"
	KindTxnPartial     AnomalyKind = "txn-partial"
	KindTxnDuplicate   AnomalyKind = "txn-duplicate"
	KindTxnOrder       AnomalyKind = "txn-order"
)

// txnIndex maps transaction names (TxnName) to their OpTxn.
type txnIndex struct {
	h      *History
	ops    map[string]int
	topics map[string]bool // topics with an OpTxn
}

func newTxnIndex(h *History) *txnIndex {
	x := &txnIndex{h: h, ops: map[string]int{}, topics: map[string]bool{}}
	for i, op := range h.Ops {
		if op.Kind == OpTxn {
			x.ops[op.Value] = i
			x.topics[op.Topic] = true
		}
	}
	return x
}

// mayCommit reports whether transaction name may have committed, and
// why not when it cannot have.
func (x *txnIndex) mayCommit(name string) (bool, string) {
	i, ok := x.ops[name]
	if !ok {
		return false, "no transaction of that name in the history"
	}
	op := x.h.Ops[i]
	switch {
	case op.Txn == TxnAbort && op.Outcome == OK:
		return false, "EndTransaction answered abort"
	case op.Txn == TxnAbort:
		return false, "EndTransaction was asked to abort (no answer)"
	case op.Txn == "":
		return false, "never ended: EndTransaction was not called"
	case op.Outcome == Fail:
		return false, "EndTransaction(commit) was never sent"
	}
	return true, ""
}

// committed reports whether transaction name is acknowledged committed.
func (x *txnIndex) committed(name string) bool {
	i, ok := x.ops[name]
	return ok && x.h.Ops[i].Txn == TxnCommit && x.h.Ops[i].Outcome == OK
}

// txnRef names transaction name's operation for people.
func (c *checker) txnRef(x *txnIndex, name string) string {
	if i, ok := x.ops[name]; ok {
		op := c.h.Ops[i]
		end := op.Txn
		if end == "" {
			end = "not ended"
		}
		return fmt.Sprintf("%s (%s, %s)", name, c.opRef(i), end)
	}
	return name + " (no operation)"
}

// finalTxnTopics are the txn topics with a usable Final read.
func (c *checker) finalTxnTopics(x *txnIndex) []string {
	var ts []string
	for t := range x.topics {
		if _, failed := c.h.FinalErrors[t]; failed {
			continue
		}
		if _, ok := c.h.Final[t]; ok {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// txnChecks runs the transaction checks.
func (c *checker) txnChecks() {
	x := newTxnIndex(c.h)
	if len(x.topics) == 0 {
		return
	}
	for _, i := range x.ops {
		op := c.h.Ops[i]
		switch {
		case op.Txn == TxnCommit && op.Outcome == OK:
			c.r.TxnCommitted++
		case op.Txn == TxnAbort && op.Outcome == OK:
			c.r.TxnAborted++
		case op.Txn == TxnCommit && op.Outcome == Info:
			c.r.TxnUnknown++
		default:
			c.r.TxnNotCommitted++
		}
	}
	c.txnAbortedReads(x)
	final := c.finalTxnTopics(x)
	c.txnFinalChecks(x, final)
	c.txnOrderChecks(x, final)
	c.txnCycleChecks(x, final)
	c.txnDoubleConsume(x)
}

// txnAbortedReads reports reads of transactions that cannot have
// committed.
func (c *checker) txnAbortedReads(x *txnIndex) {
	type obs struct {
		from src
		rec  Record
	}
	seenBy := map[string][]obs{}
	topicOf := map[string]string{}
	note := func(topic string, from src, r Record) {
		name, _, _, ok := ParseTxnValue(r.Value)
		if !ok {
			return
		}
		if may, _ := x.mayCommit(name); may {
			return
		}
		seenBy[name] = append(seenBy[name], obs{from, r})
		topicOf[name] = topic
	}
	for i, op := range c.h.Ops {
		if op.Kind == OpPoll && x.topics[op.Topic] {
			for _, r := range op.Records {
				note(op.Topic, src{i}, r)
			}
		}
		if op.Kind == OpTxn {
			for _, r := range op.Read {
				note(op.Topic, src{i}, r)
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(x.topics)) {
		for _, p := range slices.Sorted(maps.Keys(c.h.Final[t])) {
			for _, r := range c.h.Final[t][p] {
				note(t, src{-1}, r)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(seenBy)) {
		obs := seenBy[name]
		_, why := x.mayCommit(name)
		var ex []string
		var recs []Record
		var ops []int
		if i, ok := x.ops[name]; ok {
			ops = append(ops, i)
		}
		for _, o := range obs {
			ex = append(ex, fmt.Sprintf("%s by %s", o.rec, c.srcRef(o.from)))
			if !slices.Contains(recs, o.rec) {
				recs = append(recs, o.rec)
			}
			if o.from.op >= 0 && !slices.Contains(ops, o.from.op) {
				ops = append(ops, o.from.op)
			}
		}
		c.add(Anomaly{Kind: KindTxnAbortedRead, Topic: topicOf[name], Partition: obs[0].rec.Partition,
			Msg: fmt.Sprintf("%s/%d: transaction %s cannot have committed (%s), yet %d read_committed reads returned its records: %s",
				topicOf[name], obs[0].rec.Partition, c.txnRef(x, name), why, len(obs), examples(ex)),
			Ops: ops, Records: recs})
	}
}

// txnFinalChecks reports lost commits, partial transactions and
// duplicates in the Final reads of topics.
func (c *checker) txnFinalChecks(x *txnIndex, topics []string) {
	for _, t := range topics {
		type part struct {
			count int
			have  map[int][]Record // index: where it was read
		}
		byTxn := map[string]*part{}
		where := map[string][]Record{}
		for _, p := range slices.Sorted(maps.Keys(c.h.Final[t])) {
			for _, r := range c.h.Final[t][p] {
				name, i, n, ok := ParseTxnValue(r.Value)
				if !ok {
					continue
				}
				where[r.Value] = append(where[r.Value], r)
				pt := byTxn[name]
				if pt == nil {
					pt = &part{count: n, have: map[int][]Record{}}
					byTxn[name] = pt
				}
				pt.have[i] = append(pt.have[i], r)
			}
		}
		for _, v := range slices.Sorted(maps.Keys(where)) {
			rs := where[v]
			if len(rs) < 2 {
				continue
			}
			name, _, _, _ := ParseTxnValue(v)
			var ex []string
			for _, r := range rs {
				ex = append(ex, r.String())
			}
			var ops []int
			if i, ok := x.ops[name]; ok {
				ops = []int{i}
			}
			c.add(Anomaly{Kind: KindTxnDuplicate, Topic: t, Partition: rs[0].Partition,
				Msg: fmt.Sprintf("%s: record %q of %s is at %d offsets of the final read: %s", t, v, c.txnRef(x, name), len(rs), examples(ex)),
				Ops: ops, Records: rs})
		}
		for _, name := range slices.Sorted(maps.Keys(byTxn)) {
			pt := byTxn[name]
			if len(pt.have) >= pt.count {
				continue
			}
			var missing []string
			for i := range pt.count {
				if _, ok := pt.have[i]; !ok {
					missing = append(missing, strconv.Itoa(i))
				}
			}
			var recs []Record
			for _, i := range slices.Sorted(maps.Keys(pt.have)) {
				recs = append(recs, pt.have[i]...)
			}
			var ops []int
			if i, ok := x.ops[name]; ok {
				ops = []int{i}
			}
			c.add(Anomaly{Kind: KindTxnPartial, Topic: t, Partition: recs[0].Partition,
				Msg: fmt.Sprintf("%s: the final read holds %d of the %d records of %s: records %s are missing, %s is there",
					t, len(pt.have), pt.count, c.txnRef(x, name), strings.Join(missing, ", "), recs[0]),
				Ops: ops, Records: recs})
		}
		// Lost commits: every record of an acknowledged commit.
		for _, name := range slices.Sorted(maps.Keys(x.ops)) {
			i := x.ops[name]
			op := c.h.Ops[i]
			if op.Topic != t || !x.committed(name) {
				continue
			}
			var lost []Record
			var ex []string
			for _, r := range op.Records {
				if len(where[r.Value]) == 0 {
					lost = append(lost, r)
					ex = append(ex, r.String())
				}
			}
			if len(lost) == 0 {
				continue
			}
			c.add(Anomaly{Kind: KindTxnLostCommit, Topic: t, Partition: lost[0].Partition,
				Msg: fmt.Sprintf("%s: %s was acknowledged committed, but %d of its %d records are not in the final read: %s",
					t, c.txnRef(x, name), len(lost), len(op.Records), examples(ex)),
				Ops: []int{i}, Records: lost})
		}
	}
}

// txnOrderChecks reports a producer's records out of order within a
// partition of the Final read.
func (c *checker) txnOrderChecks(x *txnIndex, topics []string) {
	type pos struct {
		n, i int
		rec  Record
	}
	for _, t := range topics {
		for _, p := range slices.Sorted(maps.Keys(c.h.Final[t])) {
			last := map[string]pos{}
			back := map[string][]Record{} // producer: pairs (earlier, later) out of order
			ex := map[string][]string{}
			for _, r := range c.h.Final[t][p] {
				name, i, _, ok := ParseTxnValue(r.Value)
				if !ok {
					continue
				}
				if may, _ := x.mayCommit(name); !may {
					continue
				}
				proc, n, ok := parseTxnName(name)
				if !ok {
					continue
				}
				cur := pos{n, i, r}
				prev, seen := last[proc]
				last[proc] = cur
				if !seen {
					continue
				}
				if d := cmp.Or(cmp.Compare(n, prev.n), cmp.Compare(i, prev.i)); d >= 0 {
					continue // in order, or the same record again (txn-duplicate)
				}
				back[proc] = append(back[proc], prev.rec, r)
				ex[proc] = append(ex[proc], fmt.Sprintf("%s then %s", prev.rec, r))
			}
			for _, proc := range slices.Sorted(maps.Keys(back)) {
				recs := back[proc]
				var ops []int
				for _, r := range recs {
					name, _, _, _ := ParseTxnValue(r.Value)
					if i, ok := x.ops[name]; ok && !slices.Contains(ops, i) {
						ops = append(ops, i)
					}
				}
				c.add(Anomaly{Kind: KindTxnOrder, Topic: t, Partition: p, Count: len(recs) / 2,
					Msg: fmt.Sprintf("%s/%d: %d records of %s come after a record it produced later, in offset order: %s",
						t, p, len(recs)/2, proc, examples(ex[proc])),
					Ops: ops, Records: recs})
			}
		}
	}
}

// parseTxnName splits a TxnName into its process and number.
func parseTxnName(name string) (process string, n int, ok bool) {
	proc, num, found := strings.Cut(name, "/t")
	if !found {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return proc, n, err == nil
}
