package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The dependency cycles between committed transactions (Elle's inference
// over Kafka logs, as jepsen.tests.kafka does it), and the double
// consumption of the consume-transform-produce transactions. The
// reasoning, and why a write cycle (G0) is counted but not an anomaly,
// is in check_txn.go's comment.
//
// The G1c graph is one of events, each edge a real-time precedence that
// Kafka's transactions and read_committed guarantee, so that a cycle is
// a contradiction (every edge "happened before"). For each transaction T
// of the Final read (committed, as the read_committed Final read says):
//
//   - R(T), its read: the poll of a consume-transform-produce
//     transaction (Op.Read), before it began;
//   - A(T, r), the append of its record r, for each of its records in
//     the Final read;
//   - C(T), its commit (the coordinator's decision).
//
// and for each position k of a partition's Final read (its transactional
// records, in offset order), V(k): the partition's last stable offset
// passing k, that is k's transaction decided and every one below.
//
//	R(T) -> A(T, r)        a transaction reads, then produces
//	A(T, r) -> C(T)        its records are appended before EndTxn
//	A(k) -> A(k+1)         offset order is append order (ww)
//	C(T(k)) -> V(k)        the marker follows the decision
//	V(k) -> V(k+1)         the last stable offset only grows
//	V(k) -> R(T)           T's read_committed poll returned an offset at
//	                       or past k's: the last stable offset had passed
//	                       k (wr, and ww then wr in one partition)
//
// A cycle of these is G1c (cyclic information flow), always with a wr
// edge: the append order of one partition has no cycle. A transaction's
// appends to two partitions are not ordered with each other, so
// "T1 before T2 in partition A, T2 before T1 in partition B" is no cycle
// here; it is one of the transaction graph of ww edges only (G0).

// The cycle and exactly-once anomaly kinds.
const (
	// KindTxnG1c: a cycle of write-read and write-write dependencies
	// between committed transactions that read_committed forbids.
	KindTxnG1c AnomalyKind = "txn-g1c"
	// KindTxnDoubleConsume: a record read by two acknowledged committed
	// consume-transform-produce transactions of one group: its offset
	// was committed twice past it (exactly-once processing broken).
	KindTxnDoubleConsume AnomalyKind = "txn-double-consume"
)

// txnCycleChecks reports G1c cycles over the Final reads of topics and
// counts G0 write cycles (Result.TxnWriteCycles).
func (c *checker) txnCycleChecks(x *txnIndex, topics []string) {
	for _, t := range topics {
		g := newEventGraph()
		// The transactions of the Final read, and their records by
		// partition in offset order.
		type pos struct {
			rec Record
			txn string
			a   int // A node
			v   int // V node
		}
		parts := map[int32][]pos{}
		txns := map[string]bool{}
		appends := map[string][]int{} // transaction: its A nodes
		for _, p := range slices.Sorted(maps.Keys(c.h.Final[t])) {
			for _, r := range c.h.Final[t][p] {
				name, _, _, ok := ParseTxnValue(r.Value)
				if !ok {
					continue
				}
				txns[name] = true
				ps := parts[p]
				k := pos{rec: r, txn: name}
				k.a = g.node(evNode{kind: 'A', txn: name, rec: r})
				k.v = g.node(evNode{kind: 'V', txn: name, rec: r})
				appends[name] = append(appends[name], k.a)
				g.edge(k.a, g.node(evNode{kind: 'C', txn: name}))
				g.edge(g.node(evNode{kind: 'C', txn: name}), k.v)
				if n := len(ps); n > 0 {
					g.edge(ps[n-1].a, k.a)
					g.edge(ps[n-1].v, k.v)
				}
				parts[p] = append(ps, k)
			}
		}
		// Reads: V(k) -> R(T) for the highest k at or below each read
		// offset.
		for _, name := range slices.Sorted(maps.Keys(txns)) {
			i, ok := x.ops[name]
			if !ok || len(c.h.Ops[i].Read) == 0 {
				continue
			}
			op := c.h.Ops[i]
			r := g.node(evNode{kind: 'R', txn: name})
			for _, a := range appends[name] {
				g.edge(r, a)
			}
			for _, rd := range op.Read {
				ps := parts[rd.Partition]
				j, found := slices.BinarySearchFunc(ps, rd.Offset, func(k pos, o int64) int {
					switch {
					case k.rec.Offset < o:
						return -1
					case k.rec.Offset > o:
						return 1
					}
					return 0
				})
				if !found {
					j-- // the highest position below the offset read
				}
				if j < 0 {
					continue
				}
				g.readEdge(ps[j].v, r, rd)
			}
		}
		for _, scc := range g.cycles() {
			c.reportG1c(x, t, g, scc)
		}

		// G0: the transactions' write-write graph.
		ww := newEventGraph()
		for _, name := range slices.Sorted(maps.Keys(txns)) {
			ww.node(evNode{kind: 'T', txn: name})
		}
		for _, p := range slices.Sorted(maps.Keys(parts)) {
			ps := parts[p]
			for j := 1; j < len(ps); j++ {
				if ps[j-1].txn != ps[j].txn {
					a, b := ww.node(evNode{kind: 'T', txn: ps[j-1].txn}), ww.node(evNode{kind: 'T', txn: ps[j].txn})
					ww.wwEdge(a, b, ps[j-1].rec, ps[j].rec)
				}
			}
		}
		cycles := ww.cycles()
		c.r.TxnWriteCycles += len(cycles)
		if len(cycles) > 0 {
			var steps []string
			cyc := ww.cycleIn(cycles[0])
			for j, n := range cyc {
				next := cyc[(j+1)%len(cyc)]
				w := ww.ww[[2]int{n, next}]
				steps = append(steps, fmt.Sprintf("%s (%s before %s)", ww.nodes[n].txn, w[0], w[1]))
			}
			c.r.Notes = append(c.r.Notes, fmt.Sprintf("%s: %d write cycles (G0) between committed transactions, not an anomaly "+
				"(Kafka's transactions do not order producers' writes across partitions: check_txn.go); the first: %s, then back",
				t, len(cycles), strings.Join(steps, " -> ")))
		}
	}
}

// reportG1c reports one strongly connected component of the event graph
// as a G1c anomaly, naming one cycle in it.
func (c *checker) reportG1c(x *txnIndex, t string, g *eventGraph, scc []int) {
	cyc := g.cycleIn(scc)
	// Rotate the cycle to start at a transaction's R node, so that the
	// steps read from a read.
	for j, n := range cyc {
		if g.nodes[n].kind == 'R' {
			cyc = append(cyc[j:], cyc[:j]...)
			break
		}
	}
	var names []string
	var steps []string
	var recs []Record
	var from Record // the record a V chain started at, of transaction fromTxn
	var fromTxn string
	for j, n := range cyc {
		next := cyc[(j+1)%len(cyc)]
		a, b := g.nodes[n], g.nodes[next]
		if a.kind != 'V' && !slices.Contains(names, a.txn) { // a V chain passes other transactions' records
			names = append(names, a.txn)
		}
		switch {
		case a.kind == 'A' && b.kind == 'A' && a.txn != b.txn:
			steps = append(steps, fmt.Sprintf("%s ww-> %s (%s before %s)", a.txn, b.txn, a.rec, b.rec))
			recs = append(recs, a.rec, b.rec)
		case a.kind == 'C' && b.kind == 'V':
			from, fromTxn = b.rec, a.txn
		case a.kind == 'V' && b.kind == 'R':
			rd := g.reads[[2]int{n, next}]
			if rd.Offset == from.Offset && rd.Partition == from.Partition {
				steps = append(steps, fmt.Sprintf("%s wr-> %s (it read %s)", fromTxn, b.txn, from))
				recs = append(recs, from)
			} else {
				steps = append(steps, fmt.Sprintf("%s wr-> %s (it read p%d@%d, past %s: read_committed returns nothing past an open transaction)",
					fromTxn, b.txn, rd.Partition, rd.Offset, from))
				recs = append(recs, from, rd)
			}
		}
	}
	var ops []int
	var refs []string
	for _, name := range names {
		if i, ok := x.ops[name]; ok {
			ops = append(ops, i)
		}
		refs = append(refs, c.txnRef(x, name))
	}
	p := int32(0)
	if len(recs) > 0 {
		p = recs[0].Partition
	}
	c.add(Anomaly{Kind: KindTxnG1c, Topic: t, Partition: p,
		Msg: fmt.Sprintf("%s: a cycle of %d committed transactions (G1c: each step is a precedence in time that transactions and read_committed guarantee): %s; then back. Transactions: %s",
			t, len(names), strings.Join(steps, "; "), strings.Join(refs, ", ")),
		Ops: ops, Records: recs})
}

// txnDoubleConsume reports records read by two acknowledged committed
// consume-transform-produce transactions of one group.
func (c *checker) txnDoubleConsume(x *txnIndex) {
	type key struct {
		group, topic string
		p            int32
		o            int64
	}
	by := map[key][]string{}
	for _, name := range slices.Sorted(maps.Keys(x.ops)) {
		op := c.h.Ops[x.ops[name]]
		if op.Group == "" || !x.committed(name) {
			continue
		}
		for _, r := range op.Read {
			k := key{op.Group, op.Topic, r.Partition, r.Offset}
			if !slices.Contains(by[k], name) {
				by[k] = append(by[k], name)
			}
		}
	}
	type pair struct {
		group, topic string
		a, b         string
	}
	twice := map[pair][]Record{}
	for k, names := range by {
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				a, b := names[i], names[j]
				if x.ops[a] > x.ops[b] {
					a, b = b, a
				}
				pr := pair{k.group, k.topic, a, b}
				twice[pr] = append(twice[pr], Record{Partition: k.p, Offset: k.o})
			}
		}
	}
	prs := slices.SortedFunc(maps.Keys(twice), func(a, b pair) int {
		return cmp.Or(cmp.Compare(x.ops[a.a], x.ops[b.a]), cmp.Compare(x.ops[a.b], x.ops[b.b]))
	})
	for _, pr := range prs {
		recs := twice[pr]
		slices.SortFunc(recs, func(a, b Record) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
		var ex []string
		for _, r := range recs {
			ex = append(ex, fmt.Sprintf("p%d@%d", r.Partition, r.Offset))
		}
		c.add(Anomaly{Kind: KindTxnDoubleConsume, Topic: pr.topic, Group: pr.group, Partition: recs[0].Partition, Count: len(recs),
			Msg: fmt.Sprintf("%s, group %s: %d records read by two committed transactions, %s and %s (each committed the group's offsets past them): %s",
				pr.topic, pr.group, len(recs), c.txnRef(x, pr.a), c.txnRef(x, pr.b), examples(ex)),
			Ops: []int{x.ops[pr.a], x.ops[pr.b]}, Records: recs})
	}
}

// evNode is a node of a dependency graph: kind 'R', 'A', 'C' or 'V' of
// the G1c event graph (rec: the record of an A or V node), or 'T', a
// transaction of the ww graph.
type evNode struct {
	kind byte
	txn  string
	rec  Record
}

// eventGraph is a directed graph with its edges' evidence.
type eventGraph struct {
	nodes []evNode
	index map[evNode]int
	adj   [][]int
	has   map[[2]int]bool
	reads map[[2]int]Record    // V -> R: the record read
	ww    map[[2]int][2]Record // T -> T: the records in order
}

func newEventGraph() *eventGraph {
	return &eventGraph{index: map[evNode]int{}, has: map[[2]int]bool{}, reads: map[[2]int]Record{}, ww: map[[2]int][2]Record{}}
}

func (g *eventGraph) node(n evNode) int {
	if i, ok := g.index[n]; ok {
		return i
	}
	g.nodes = append(g.nodes, n)
	g.adj = append(g.adj, nil)
	g.index[n] = len(g.nodes) - 1
	return len(g.nodes) - 1
}

func (g *eventGraph) edge(a, b int) {
	if g.has[[2]int{a, b}] {
		return
	}
	g.has[[2]int{a, b}] = true
	g.adj[a] = append(g.adj[a], b)
}

func (g *eventGraph) readEdge(v, r int, rd Record) {
	if _, ok := g.reads[[2]int{v, r}]; !ok {
		g.reads[[2]int{v, r}] = rd
	}
	g.edge(v, r)
}

func (g *eventGraph) wwEdge(a, b int, ra, rb Record) {
	if _, ok := g.ww[[2]int{a, b}]; !ok {
		g.ww[[2]int{a, b}] = [2]Record{ra, rb}
	}
	g.edge(a, b)
}

// cycles are the graph's strongly connected components with a cycle
// (two or more nodes, or a node with an edge to itself), by Tarjan's
// algorithm, in order of their smallest node.
func (g *eventGraph) cycles() [][]int {
	n := len(g.nodes)
	idx, low := make([]int, n), make([]int, n)
	on := make([]bool, n)
	for i := range idx {
		idx[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	// Iterative Tarjan: a frame is a node and the next edge to follow.
	type frame struct{ v, e int }
	for s := range n {
		if idx[s] >= 0 {
			continue
		}
		frames := []frame{{s, 0}}
		idx[s], low[s] = next, next
		next++
		stack = append(stack, s)
		on[s] = true
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			if f.e < len(g.adj[f.v]) {
				w := g.adj[f.v][f.e]
				f.e++
				switch {
				case idx[w] < 0:
					idx[w], low[w] = next, next
					next++
					stack = append(stack, w)
					on[w] = true
					frames = append(frames, frame{w, 0})
				case on[w]:
					low[f.v] = min(low[f.v], idx[w])
				}
				continue
			}
			v := f.v
			frames = frames[:len(frames)-1]
			if len(frames) > 0 {
				u := frames[len(frames)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != idx[v] {
				continue
			}
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 || g.has[[2]int{v, v}] {
				slices.Sort(scc)
				out = append(out, scc)
			}
		}
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

// cycleIn is a shortest cycle through the first node of scc (a strongly
// connected component), staying in it: its nodes in order.
func (g *eventGraph) cycleIn(scc []int) []int {
	in := map[int]bool{}
	for _, v := range scc {
		in[v] = true
	}
	s := scc[0]
	prev := map[int]int{}
	queue := []int{s}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.adj[v] {
			if !in[w] {
				continue
			}
			if w == s {
				path := []int{v}
				for path[len(path)-1] != s {
					path = append(path, prev[path[len(path)-1]])
				}
				slices.Reverse(path)
				return path
			}
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int{s}
}
