package chaos

import (
	"maps"
	"strings"
	"testing"
)

// ctpOp is consume-transform-produce transaction n of proc (group "g"),
// which read read and produced recs.
func ctpOp(proc string, n int, end string, out Outcome, start, stop int, read []Record, recs ...Record) Op {
	op := txnOp(proc, n, end, out, start, stop, recs...)
	op.Group, op.Read = "g", read
	return op
}

func TestCheckTxnCycles(t *testing.T) {
	// T1 (txn-0/t0) and T2 (txn-1/t0) write p0 and p1 (and p2).
	type want = map[AnomalyKind]int
	cases := []struct {
		name   string
		h      History
		want   want
		cycles int // Result.TxnWriteCycles
		msg    []string
	}{
		{name: "G0: two producers in opposite orders in two partitions", want: want{}, cycles: 1, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1)),
				txnOp("txn-1", 0, TxnCommit, OK, 0, 10, tv("txn-1", 0, 0, 2, 0, 1), tv("txn-1", 0, 1, 2, 1, 0)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-1", 0, 0, 2, 0, 1), tv("txn-1", 0, 1, 2, 1, 0), tv("txn-0", 0, 1, 2, 1, 1))}},
		{name: "G0: interleaved in one partition", want: want{}, cycles: 1, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 0, 2)),
				txnOp("txn-1", 0, TxnCommit, OK, 0, 10, tv("txn-1", 0, 0, 1, 0, 1)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-1", 0, 0, 1, 0, 1), tv("txn-0", 0, 1, 2, 0, 2))}},
		{name: "no G0: the same order in both partitions", want: want{}, cycles: 0, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)),
				txnOp("txn-1", 0, TxnCommit, OK, 0, 10, tv("txn-1", 0, 0, 2, 0, 1), tv("txn-1", 0, 1, 2, 1, 1)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-1", 0, 0, 2, 0, 1), tv("txn-0", 0, 1, 2, 1, 0), tv("txn-1", 0, 1, 2, 1, 1))}},

		{name: "consume-transform-produce, no cycle", want: want{}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)),
				ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{tv("txn-0", 0, 0, 2, 0, 0)}, tv("ctp-0", 0, 0, 1, 1, 1)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0), tv("ctp-0", 0, 0, 1, 1, 1))}},
		{name: "G1c: each read the other's record", want: want{KindTxnG1c: 1},
			msg: []string{"ctp-0/t0 wr-> ctp-1/t0 (it read p0@0=", "ctp-1/t0 wr-> ctp-0/t0 (it read p1@0="},
			h: History{
				Ops: []Op{
					ctpOp("ctp-0", 0, TxnCommit, OK, 0, 10, []Record{tv("ctp-1", 0, 0, 1, 1, 0)}, tv("ctp-0", 0, 0, 1, 0, 0)),
					ctpOp("ctp-1", 0, TxnCommit, OK, 0, 10, []Record{tv("ctp-0", 0, 0, 1, 0, 0)}, tv("ctp-1", 0, 0, 1, 1, 0)),
				},
				Final: txnFinal(tv("ctp-0", 0, 0, 1, 0, 0), tv("ctp-1", 0, 0, 1, 1, 0))}},
		{name: "G1c: a transaction that read another's record wrote before it", want: want{KindTxnG1c: 1},
			msg: []string{"txn-0/t0 wr-> ctp-0/t0 (it read p0@0=", "ctp-0/t0 ww-> txn-0/t0 (p1@0="},
			h: History{
				Ops: []Op{
					txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1)),
					ctpOp("ctp-0", 0, TxnCommit, OK, 5, 20, []Record{tv("txn-0", 0, 0, 2, 0, 0)}, tv("ctp-0", 0, 0, 1, 1, 0)),
				},
				Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("ctp-0", 0, 0, 1, 1, 0), tv("txn-0", 0, 1, 2, 1, 1))}},
		// T1 ww-> T2 in p0, T3 read T2's record in p2, T3 ww-> T1 in
		// p1: Kafka allows it (T1 open throughout).
		{name: "no G1c: ww, wr in another partition, ww", want: want{}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 30, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1)),
				txnOp("txn-1", 0, TxnCommit, OK, 1, 10, tv("txn-1", 0, 0, 2, 0, 1), tv("txn-1", 0, 1, 2, 2, 0)),
				ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{tv("txn-1", 0, 1, 2, 2, 0)}, tv("ctp-0", 0, 0, 1, 1, 0)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-1", 0, 0, 2, 0, 1), tv("ctp-0", 0, 0, 1, 1, 0),
				tv("txn-0", 0, 1, 2, 1, 1), tv("txn-1", 0, 1, 2, 2, 0))}},
		// The same, but T3 read T2's record in p0, past T1's: p0's last
		// stable offset had passed T1's record, so T1 had ended before
		// T3 wrote p1, and T1's p1 record cannot follow T3's.
		{name: "G1c: ww then wr in one partition, ww", want: want{KindTxnG1c: 1},
			msg: []string{"txn-0/t0 wr-> ctp-0/t0 (it read p0@1, past p0@0=", "ctp-0/t0 ww-> txn-0/t0 (p1@0="},
			h: History{
				Ops: []Op{
					txnOp("txn-0", 0, TxnCommit, OK, 0, 30, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1)),
					txnOp("txn-1", 0, TxnCommit, OK, 1, 10, tv("txn-1", 0, 0, 2, 0, 1), tv("txn-1", 0, 1, 2, 2, 0)),
					ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{tv("txn-1", 0, 0, 2, 0, 1)}, tv("ctp-0", 0, 0, 1, 1, 0)),
				},
				Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-1", 0, 0, 2, 0, 1), tv("ctp-0", 0, 0, 1, 1, 0),
					tv("txn-0", 0, 1, 2, 1, 1), tv("txn-1", 0, 1, 2, 2, 0))}},
		{name: "G1c: read past an offset the final read lacks", want: want{KindTxnG1c: 1}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 30, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1)),
				ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{{Partition: 0, Offset: 7, Value: "liveness-0-1-0"}}, tv("ctp-0", 0, 0, 1, 1, 0)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("ctp-0", 0, 0, 1, 1, 0), tv("txn-0", 0, 1, 2, 1, 1))}},
		{name: "no G1c: a read below every record of the partition", want: want{}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 30, tv("txn-0", 0, 0, 2, 0, 5), tv("txn-0", 0, 1, 2, 1, 1)),
				ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{{Partition: 0, Offset: 2, Value: "liveness-0-1-0"}}, tv("ctp-0", 0, 0, 1, 1, 0)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 5), tv("ctp-0", 0, 0, 1, 1, 0), tv("txn-0", 0, 1, 2, 1, 1))}},
		{name: "an aborted transform's read and write are no dependencies", want: want{}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1)),
				ctpOp("ctp-0", 0, TxnAbort, OK, 5, 20, []Record{tv("txn-0", 0, 0, 2, 0, 0)}, tv("ctp-0", 0, 0, 1, 1, 0)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 1))}},
		{name: "a transform read an aborted record", want: want{KindTxnAbortedRead: 1}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnAbort, OK, 0, 10, tv("txn-0", 0, 0, 1, 0, 0)),
				ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{tv("txn-0", 0, 0, 1, 0, 0)}, tv("ctp-0", 0, 0, 1, 1, 0)),
			},
			Final: txnFinal(tv("ctp-0", 0, 0, 1, 1, 0))}},

		{name: "double consume", want: want{KindTxnDoubleConsume: 2}, msg: []string{"2 records read by two committed transactions"}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)),
				ctpOp("ctp-0", 0, TxnCommit, OK, 11, 20, []Record{tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)}, tv("ctp-0", 0, 0, 1, 1, 1)),
				ctpOp("ctp-1", 0, TxnCommit, OK, 21, 30, []Record{tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)}, tv("ctp-1", 0, 0, 1, 1, 2)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0), tv("ctp-0", 0, 0, 1, 1, 1), tv("ctp-1", 0, 0, 1, 1, 2))}},
		{name: "read twice, once committed", want: want{}, h: History{
			Ops: []Op{
				txnOp("txn-0", 0, TxnCommit, OK, 0, 10, tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0)),
				ctpOp("ctp-0", 0, TxnAbort, OK, 11, 20, []Record{tv("txn-0", 0, 0, 2, 0, 0)}, tv("ctp-0", 0, 0, 1, 1, 1)),
				ctpOp("ctp-0", 1, TxnCommit, Info, 21, 25, []Record{tv("txn-0", 0, 0, 2, 0, 0)}),
				ctpOp("ctp-1", 0, TxnCommit, OK, 21, 30, []Record{tv("txn-0", 0, 0, 2, 0, 0)}, tv("ctp-1", 0, 0, 1, 1, 2)),
			},
			Final: txnFinal(tv("txn-0", 0, 0, 2, 0, 0), tv("txn-0", 0, 1, 2, 1, 0), tv("ctp-1", 0, 0, 1, 1, 2))}},
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
			if r.TxnWriteCycles != tc.cycles {
				t.Errorf("%d write cycles, want %d (notes %q)", r.TxnWriteCycles, tc.cycles, r.Notes)
			}
			if tc.cycles > 0 && (len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "write cycles (G0)")) {
				t.Errorf("no note on the write cycle: %q", r.Notes)
			}
			var all strings.Builder
			for _, a := range r.Anomalies {
				t.Logf("%s: %s", a.Kind, a.Msg)
				all.WriteString(a.Msg + "\n")
				if a.Msg == "" || a.Count < 1 {
					t.Errorf("anomaly %+v has no message or count", a)
				}
				for _, i := range a.Ops {
					if i < 0 || i >= len(tc.h.Ops) {
						t.Errorf("%s names op %d of %d", a.Kind, i, len(tc.h.Ops))
					}
				}
			}
			for _, n := range r.Notes {
				t.Logf("note: %s", n)
			}
			for _, m := range tc.msg {
				if !strings.Contains(all.String(), m) {
					t.Errorf("no anomaly message contains %q", m)
				}
			}
		})
	}
}

func TestEventGraphCycles(t *testing.T) {
	g := newEventGraph()
	n := func(i int) int { return g.node(evNode{kind: 'T', txn: string(rune('a' + i))}) }
	for i := range 7 {
		n(i)
	}
	// a -> b -> c -> a, d -> e (no cycle), f -> f, g alone.
	g.edge(n(0), n(1))
	g.edge(n(1), n(2))
	g.edge(n(2), n(0))
	g.edge(n(2), n(3))
	g.edge(n(3), n(4))
	g.edge(n(5), n(5))
	cs := g.cycles()
	if len(cs) != 2 || len(cs[0]) != 3 || len(cs[1]) != 1 || cs[1][0] != n(5) {
		t.Fatalf("cycles %v", cs)
	}
	if c := g.cycleIn(cs[0]); len(c) != 3 || c[0] != n(0) || c[1] != n(1) || c[2] != n(2) {
		t.Errorf("cycle %v", c)
	}
	if c := g.cycleIn(cs[1]); len(c) != 1 {
		t.Errorf("self cycle %v", c)
	}
}
