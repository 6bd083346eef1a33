package chaos

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// The builders of hand-made transactional histories, on topic "t".

// tv is the record of index i of count in transaction n of process proc,
// at p@o.
func tv(proc string, n, i, count int, p int32, o int64) Record {
	return Record{Partition: p, Offset: o, Value: TxnValue(proc, n, i, count)}
}

// txnOp is transaction n of proc, asked to end as end ("" : never
// ended), with outcome out, having produced recs.
func txnOp(proc string, n int, end string, out Outcome, start, stop int, recs ...Record) Op {
	return Op{Process: proc, Kind: OpTxn, Outcome: out, Topic: "t", Value: TxnName(proc, n), Txn: end,
		Start: ms(start), End: ms(stop), Records: recs}
}

func txnPoll(proc string, start, end int, recs ...Record) Op {
	return Op{Process: proc, Kind: OpPoll, Outcome: OK, Topic: "t", Start: ms(start), End: ms(end), Records: recs}
}

func txnFinal(recs ...Record) map[string]map[int32][]Record {
	f := map[string]map[int32][]Record{"t": {0: nil, 1: nil}}
	for _, r := range recs {
		f["t"][r.Partition] = append(f["t"][r.Partition], r)
	}
	return f
}

func TestCheckTxn(t *testing.T) {
	// t0 and t1 of txn-0 committed; t2 aborted: its records at 3 and 4
	// of partition 0 (and the markers at 2, 5 and 3 of partition 1).
	c0a, c0b := tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)
	c1a, c1b := tv("txn-0", 1, 0, 2, 1, 1), tv("txn-0", 1, 1, 2, 0, 1)
	a2a, a2b := tv("txn-0", 2, 0, 2, 0, 3), tv("txn-0", 2, 1, 2, 0, 4)
	committed := []Op{txnOp("txn-0", 0, TxnCommit, OK, 0, 10, c0a, c0b), txnOp("txn-0", 1, TxnCommit, OK, 11, 20, c1a, c1b)}
	aborted := txnOp("txn-0", 2, TxnAbort, OK, 21, 30, a2a, a2b)
	// u3 is txn-1's transaction t3, of unknown outcome: asked to commit,
	// no answer.
	u3a, u3b := tv("txn-1", 3, 0, 2, 0, 6), tv("txn-1", 3, 1, 2, 1, 6)
	unknown := txnOp("txn-1", 3, TxnCommit, Info, 31, 40, u3a, u3b)
	type want = map[AnomalyKind]int
	cases := []struct {
		name string
		h    History
		want want
	}{
		{name: "valid", want: want{}, h: History{
			Ops: ops(committed, []Op{aborted, txnPoll("txn-reader-0", 15, 16, c0a), txnPoll("txn-reader-0", 25, 26, c1b),
				txnPoll("txn-reader-1", 25, 26, c0b, c1a)}),
			Final: txnFinal(c0a, c1b, c0b, c1a)}},
		{name: "unknown outcome: committed", want: want{}, h: History{
			Ops: ops(committed, []Op{unknown}), Final: txnFinal(c0a, c1b, u3a, c0b, c1a, u3b)}},
		{name: "unknown outcome: aborted", want: want{}, h: History{
			Ops: ops(committed, []Op{unknown}), Final: txnFinal(c0a, c1b, c0b, c1a)}},

		{name: "aborted read by a poll", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops: ops(committed, []Op{aborted, txnPoll("txn-reader-0", 25, 26, c0a, c1b, a2a)})}},
		{name: "aborted read by the final read", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops: ops(committed, []Op{aborted}), Final: txnFinal(c0a, c1b, a2a, a2b, c0b, c1a)}},
		{name: "asked to abort, no answer, read", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops:   ops(committed, []Op{txnOp("txn-0", 2, TxnAbort, Info, 21, 30, a2a, a2b)}),
			Final: txnFinal(c0a, c1b, a2a, a2b, c0b, c1a)}},
		{name: "never ended, read", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops:   ops(committed, []Op{txnOp("txn-0", 2, "", Fail, 21, 30, a2a, a2b)}),
			Final: txnFinal(c0a, c1b, a2a, a2b, c0b, c1a)}},
		{name: "never completed, read", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops:   ops(committed, []Op{txnOp("txn-0", 2, "", Info, 21, 0)}),
			Final: txnFinal(c0a, c1b, a2a, a2b, c0b, c1a)}},
		{name: "commit never sent, read", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops:   ops(committed, []Op{txnOp("txn-0", 2, TxnCommit, Fail, 21, 30, a2a, a2b)}),
			Final: txnFinal(c0a, c1b, a2a, a2b, c0b, c1a)}},
		{name: "a transaction the history does not have, read", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops: committed, Final: txnFinal(c0a, c1b, a2a, a2b, c0b, c1a)}},

		{name: "lost commit", want: want{KindTxnLostCommit: 1}, h: History{
			Ops: ops(committed, []Op{aborted}), Final: txnFinal(c0a, c0b)}},
		{name: "lost commit, partly", want: want{KindTxnLostCommit: 1, KindTxnPartial: 1}, h: History{
			Ops: ops(committed, []Op{aborted}), Final: txnFinal(c0a, c1b, c0b)}},
		{name: "unknown outcome, partly", want: want{KindTxnPartial: 1}, h: History{
			Ops: ops(committed, []Op{unknown}), Final: txnFinal(c0a, c1b, c0b, c1a, u3b)}},
		{name: "aborted, partly read", want: want{KindTxnAbortedRead: 1, KindTxnPartial: 1}, h: History{
			Ops: ops(committed, []Op{aborted}), Final: txnFinal(c0a, c1b, a2b, c0b, c1a)}},
		{name: "a failed final read is not checked for lost commits", want: want{KindFinalReadFailed: 1}, h: History{
			Ops: ops(committed, []Op{aborted}), Final: txnFinal(c0a, c0b), FinalErrors: map[string]string{"t": "deadline"}}},

		{name: "a record in two partitions", want: want{KindTxnDuplicate: 1}, h: History{
			Ops: committed, Final: txnFinal(c0a, c1b, c0b, c1a, rec(1, 2, c1b.Value))}},
		{name: "a record twice in a partition", want: want{KindTxnDuplicate: 1, KindDuplicate: 1}, h: History{
			Ops: committed, Final: txnFinal(c0a, c1b, rec(0, 2, c1b.Value), c0b, c1a)}},

		{name: "a later transaction first", want: want{KindTxnOrder: 1}, h: History{
			Ops: committed, Final: txnFinal(rec(0, 0, c1b.Value), rec(0, 1, c0a.Value), c0b, c1a)}},
		{name: "a transaction's records out of order", want: want{KindTxnOrder: 1}, h: History{
			Ops:   []Op{txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 0, 1))},
			Final: txnFinal(tv("txn-0", 0, 1, 2, 0, 0), tv("txn-0", 0, 0, 2, 0, 1))}},
		{name: "two producers interleaved", want: want{}, h: History{
			Ops: ops(committed, []Op{unknown}), Final: txnFinal(c0a, u3a, c1b, u3b, c0b, c1a)}},
		{name: "unknown outcome out of order", want: want{KindTxnOrder: 1}, h: History{
			Ops:   ops(committed, []Op{unknown, txnOp("txn-1", 4, TxnCommit, OK, 41, 50, tv("txn-1", 4, 0, 1, 0, 7))}),
			Final: txnFinal(c0a, tv("txn-1", 4, 0, 1, 0, 2), u3a, c1b, u3b, c0b, c1a)}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			r := Check(&tc.h)
			got := map[AnomalyKind]int{}
			for k, n := range r.Counts {
				if n != 0 {
					got[k] = n
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("counts %v, want %v", got, tc.want)
			}
			for _, a := range r.Anomalies {
				t.Logf("%s: %s", a.Kind, a.Msg)
				if a.Msg == "" || a.Count < 1 {
					t.Errorf("anomaly %+v has no message or count", a)
				}
				for _, i := range a.Ops {
					if i < 0 || i >= len(tc.h.Ops) {
						t.Errorf("%s names op %d of %d", a.Kind, i, len(tc.h.Ops))
					}
				}
			}
		})
	}
}

// TestCheckTxnNames checks that the transaction anomalies name the
// transaction, its operation and the reads involved.
func TestCheckTxnNames(t *testing.T) {
	a, b := tv("txn-0", 7, 0, 2, 0, 3), tv("txn-0", 7, 1, 2, 1, 5)
	h := &History{Ops: []Op{
		txnOp("txn-0", 7, TxnAbort, OK, 0, 10, a, b),
		txnPoll("txn-reader-1", 20, 21, a),
	}}
	r := Check(h)
	if len(r.Anomalies) != 1 || r.Anomalies[0].Kind != KindTxnAbortedRead {
		t.Fatalf("anomalies %+v", r.Anomalies)
	}
	ab := r.Anomalies[0]
	if !slices.Equal(ab.Ops, []int{0, 1}) || !slices.Equal(ab.Records, []Record{a}) || ab.Topic != "t" ||
		!strings.Contains(ab.Msg, "txn-0/t7") || !strings.Contains(ab.Msg, "answered abort") || !strings.Contains(ab.Msg, "txn-reader-1") {
		t.Errorf("aborted read %+v", ab)
	}
	if r.TxnAborted != 1 || r.TxnCommitted != 0 {
		t.Errorf("transactions: %d committed, %d aborted", r.TxnCommitted, r.TxnAborted)
	}
	var text strings.Builder
	WriteText(&text, h, r)
	if !strings.Contains(text.String(), "txn-0/t7 abort, records p0@3=") || !strings.Contains(text.String(), "1 transactions: 0 committed, 1 aborted") {
		t.Errorf("report lacks the transaction:\n%s", text.String())
	}

	h = &History{Ops: []Op{txnOp("txn-0", 7, TxnCommit, OK, 0, 10, a, b)}, Final: txnFinal(a)}
	r = Check(h)
	kinds := map[AnomalyKind]Anomaly{}
	for _, x := range r.Anomalies {
		kinds[x.Kind] = x
	}
	lost, part := kinds[KindTxnLostCommit], kinds[KindTxnPartial]
	if !slices.Equal(lost.Records, []Record{b}) || !strings.Contains(lost.Msg, "1 of its 2 records") {
		t.Errorf("lost commit %+v", lost)
	}
	if !slices.Equal(part.Records, []Record{a}) || !strings.Contains(part.Msg, "records 1 are missing") {
		t.Errorf("partial %+v", part)
	}
}

func TestParseTxnValue(t *testing.T) {
	name, i, n, ok := ParseTxnValue(TxnValue("txn-2", 41, 3, 5))
	if !ok || name != "txn-2/t41" || i != 3 || n != 5 || name != TxnName("txn-2", 41) {
		t.Errorf("parsed %q %d %d %v", name, i, n, ok)
	}
	proc, num, ok := parseTxnName(name)
	if !ok || proc != "txn-2" || num != 41 {
		t.Errorf("name parsed %q %d %v", proc, num, ok)
	}
	for _, v := range []string{"producer-0-12", "liveness-0-1-2", "txn-0/t1/r2/of2", "txn-0/t1/r-1/of2", "txn-0/tx/r0/of1", "a/b/c/d"} {
		if _, _, _, ok := ParseTxnValue(v); ok {
			t.Errorf("%q parsed", v)
		}
	}
}
