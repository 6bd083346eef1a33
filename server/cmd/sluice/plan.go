package main

// The plan (sluice reassign plan) proposes replicas for a set of
// partitions on a given list of brokers. In order of priority:
//
//  1. Even: every topic's replicas are spread over the brokers so that no
//     two brokers differ by more than one, and so are all the plan's
//     replicas together (an exact rounding of both always exists).
//  2. Minimal movement: a replica already on a listed broker stays there
//     whenever the spread allows; every other replica is a copy the
//     cluster has to make.
//  3. Preferred leaders (the first replica) spread the same way, per
//     topic and over the whole plan, keeping a partition's preferred
//     leader when the spread allows. Unlike replicas, leaders can only
//     be chosen among a partition's replicas, so this is best effort.
//  4. Ties go round-robin: partition i of the plan's k-th topic prefers
//     brokers in the order given, starting at the (i+k)-th (so a plan
//     from scratch is the classic round-robin layout).
//
// Both steps are a min-cost flow (partition -> (topic, broker) ->
// broker), solved by successive shortest paths with costs compared
// lexicographically, so one priority never trades against another.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// errPlan marks a plan that cannot be made from its inputs.
var errPlan = errors.New("plan")

// planReassignment proposes replicas for every partition of current on
// brokers, with rf replicas each (0 keeps each partition's count).
func planReassignment(current []assignment, brokers []int32, rf int) ([]assignment, error) {
	n := len(brokers)
	if n == 0 {
		return nil, fmt.Errorf("%w: no brokers to place replicas on", errPlan)
	}
	index := make(map[int32]int, n)
	for i, b := range brokers {
		if b < 0 {
			return nil, fmt.Errorf("%w: broker id %d is negative", errPlan, b)
		}
		if _, dup := index[b]; dup {
			return nil, fmt.Errorf("%w: broker %d is listed twice", errPlan, b)
		}
		index[b] = i
	}
	if rf < 0 {
		return nil, fmt.Errorf("%w: replication factor %d is below 1", errPlan, rf)
	}
	if rf > n {
		return nil, fmt.Errorf("%w: replication factor %d needs %d brokers, but only %d are given", errPlan, rf, rf, n)
	}
	if len(current) == 0 {
		return nil, fmt.Errorf("%w: no partitions to place", errPlan)
	}
	parts := slices.Clone(current)
	sortAssignments(parts)
	want := make([]int, len(parts))
	for i, p := range parts {
		if i > 0 && parts[i-1].tp() == p.tp() {
			return nil, fmt.Errorf("%w: %s is listed twice", errPlan, p.tp())
		}
		want[i] = rf
		if rf == 0 {
			want[i] = len(p.Replicas)
		}
		if want[i] == 0 {
			return nil, fmt.Errorf("%w: %s has no replicas; give --replication-factor", errPlan, p.tp())
		}
		if want[i] > n {
			return nil, fmt.Errorf("%w: %s has %d replicas, but only %d brokers are given (give more brokers, or a smaller --replication-factor)", errPlan, p.tp(), want[i], n)
		}
	}

	// Topics in order, and each partition's topic number and rank start.
	topicOf := make([]int, len(parts))
	start := make([]int, len(parts))
	var topicSizes []int // partitions per topic
	for i, p := range parts {
		if i == 0 || parts[i-1].Topic != p.Topic {
			topicSizes = append(topicSizes, 0)
		}
		k := len(topicSizes) - 1
		topicOf[i] = k
		start[i] = (topicSizes[k] + k) % n
		topicSizes[k]++
	}
	// rank is how far broker index b is from partition i's round-robin
	// start: the tie-break.
	rank := func(i, b int) int64 { return int64((b - start[i] + n) % n) }

	// Replicas.
	unitsPerTopic := make([]int, len(topicSizes))
	total := 0
	for i := range parts {
		unitsPerTopic[topicOf[i]] += want[i]
		total += want[i]
	}
	g, s, t, tb := spreadGraph(len(parts), len(topicSizes), n, unitsPerTopic, total, false)
	edges := make([][]int, len(parts)) // edges[i][b]: partition i to broker index b
	for i, p := range parts {
		g.addEdge(s, 1+i, want[i], cost{})
		pos := make(map[int32]int64)
		for j, r := range p.Replicas {
			pos[r] = int64(j)
		}
		edges[i] = make([]int, n)
		for b := range n {
			c := cost{moves: 1, rank: rank(i, b)}
			if j, ok := pos[brokers[b]]; ok {
				c = cost{rank: j} // kept; earlier replicas first if some must go
			}
			edges[i][b] = g.addEdge(1+i, tb(topicOf[i], b), 1, c)
		}
	}
	if got := g.minCostFlow(s, t); got != total {
		panicf("plan: placed %d of %d replicas", got, total) // a rounding always exists
	}
	chosen := make([][]int, len(parts)) // broker indexes per partition
	for i := range parts {
		for b := range n {
			if g.flowOn(edges[i][b]) > 0 {
				chosen[i] = append(chosen[i], b)
			}
		}
	}

	// Preferred leaders, among each partition's chosen replicas.
	g, s, t, tb = spreadGraph(len(parts), len(topicSizes), n, topicSizes, len(parts), true)
	leaderEdges := make([][]int, len(parts)) // aligned with chosen
	for i, p := range parts {
		g.addEdge(s, 1+i, 1, cost{})
		for _, b := range chosen[i] {
			c := cost{moves: 1, rank: rank(i, b)}
			if len(p.Replicas) > 0 && p.Replicas[0] == brokers[b] {
				c = cost{}
			}
			leaderEdges[i] = append(leaderEdges[i], g.addEdge(1+i, tb(topicOf[i], b), 1, c))
		}
	}
	if got := g.minCostFlow(s, t); got != len(parts) {
		panicf("plan: chose %d of %d leaders", got, len(parts))
	}

	// Order: the leader, the kept replicas in their current order, then
	// the new ones by rank.
	out := make([]assignment, len(parts))
	for i, p := range parts {
		leader := -1
		for j, b := range chosen[i] {
			if g.flowOn(leaderEdges[i][j]) > 0 {
				leader = b
			}
		}
		replicas := []int32{brokers[leader]}
		in := make(map[int32]bool)
		for _, b := range chosen[i] {
			in[brokers[b]] = true
		}
		for _, r := range p.Replicas {
			if in[r] && r != brokers[leader] {
				replicas = append(replicas, r)
				in[r] = false
			}
		}
		var added []int
		for _, b := range chosen[i] {
			if in[brokers[b]] && b != leader {
				added = append(added, b)
			}
		}
		sort.Slice(added, func(x, y int) bool { return rank(i, added[x]) < rank(i, added[y]) })
		for _, b := range added {
			replicas = append(replicas, brokers[b])
		}
		out[i] = assignment{Topic: p.Topic, Partition: p.Partition, Replicas: replicas}
	}
	return out, nil
}

// spreadGraph builds the flow network shared by both steps: source (0),
// partitions (1..parts), one node per (topic, broker), one per broker,
// sink. A (topic, broker) node passes floor(units/n) of its topic's units
// for free and one more at an unevenness of 1; a broker likewise of all
// units. As the total is fixed, any broker below the floor forces a unit
// above it elsewhere, so the cheapest flow is the even one. With soft,
// both may pass more still, at an unevenness of 2 a unit (leaders cannot
// always be spread; without soft, an even spread always exists). It
// returns the graph, the source, the sink, and the (topic, broker) node
// lookup.
func spreadGraph(parts, topics, n int, unitsPerTopic []int, total int, soft bool) (*flowGraph, int, int, func(k, b int) int) {
	brokerNode := func(b int) int { return 1 + parts + topics*n + b }
	sink := 1 + parts + topics*n + n
	g := newFlowGraph(sink + 1)
	tb := func(k, b int) int { return 1 + parts + k*n + b }
	limit := func(from, to, units int) {
		if q := units / n; q > 0 {
			g.addEdge(from, to, q, cost{})
		}
		if units%n > 0 {
			g.addEdge(from, to, 1, cost{uneven: 1})
		}
		if soft {
			g.addEdge(from, to, units, cost{uneven: 2})
		}
	}
	for k := range topics {
		for b := range n {
			limit(tb(k, b), brokerNode(b), unitsPerTopic[k])
		}
	}
	for b := range n {
		limit(brokerNode(b), sink, total)
	}
	return g, 0, sink, tb
}

// cost is an edge's cost, compared field by field in order.
type cost struct {
	uneven int64 // units above an even spread
	moves  int64 // replicas (or preferred leaders) that change
	rank   int64 // distance from the round-robin order
}

func (a cost) add(b cost) cost {
	return cost{a.uneven + b.uneven, a.moves + b.moves, a.rank + b.rank}
}

func (a cost) neg() cost { return cost{-a.uneven, -a.moves, -a.rank} }

func (a cost) less(b cost) bool {
	if a.uneven != b.uneven {
		return a.uneven < b.uneven
	}
	if a.moves != b.moves {
		return a.moves < b.moves
	}
	return a.rank < b.rank
}

// flowGraph is a residual network for min-cost flow. Edge e's reverse is
// e^1.
type flowGraph struct {
	adj  [][]int
	to   []int
	cap  []int
	cost []cost
}

func newFlowGraph(nodes int) *flowGraph { return &flowGraph{adj: make([][]int, nodes)} }

// addEdge adds u->v with capacity c and cost w and returns its index.
func (g *flowGraph) addEdge(u, v, c int, w cost) int {
	e := len(g.to)
	g.to = append(g.to, v, u)
	g.cap = append(g.cap, c, 0)
	g.cost = append(g.cost, w, w.neg())
	g.adj[u] = append(g.adj[u], e)
	g.adj[v] = append(g.adj[v], e+1)
	return e
}

// flowOn is the flow through edge e.
func (g *flowGraph) flowOn(e int) int { return g.cap[e^1] }

// minCostFlow pushes as much flow from s to t as fits, cheapest first,
// and returns the amount. It is the primal-dual method: Bellman-Ford (by
// queue: the residual graph has negative edges but, as every augmentation
// follows a shortest path, no negative cycle) finds each node's distance
// from s, then a Dinic blocking flow saturates every shortest path at
// once, and so on until t is out of reach.
func (g *flowGraph) minCostFlow(s, t int) int {
	nodes := len(g.adj)
	dist := make([]cost, nodes)
	reached := make([]bool, nodes)
	queued := make([]bool, nodes)
	level := make([]int, nodes)
	next := make([]int, nodes) // Dinic's current edge per node
	flow := 0
	for {
		clear(reached)
		reached[s], dist[s] = true, cost{}
		queue := []int{s}
		queued[s] = true
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			queued[u] = false
			for _, e := range g.adj[u] {
				if g.cap[e] == 0 {
					continue
				}
				v, d := g.to[e], dist[u].add(g.cost[e])
				if !reached[v] || d.less(dist[v]) {
					reached[v], dist[v] = true, d
					if !queued[v] {
						queued[v] = true
						queue = append(queue, v)
					}
				}
			}
		}
		if !reached[t] {
			return flow
		}
		// admissible: a residual edge on a shortest path.
		admissible := func(e int) bool {
			u, v := g.to[e^1], g.to[e]
			return g.cap[e] > 0 && reached[v] && dist[u].add(g.cost[e]) == dist[v]
		}
		for {
			for i := range level {
				level[i] = -1
			}
			level[s] = 0
			queue = append(queue[:0], s)
			for len(queue) > 0 {
				u := queue[0]
				queue = queue[1:]
				for _, e := range g.adj[u] {
					if v := g.to[e]; level[v] < 0 && admissible(e) {
						level[v] = level[u] + 1
						queue = append(queue, v)
					}
				}
			}
			if level[t] < 0 {
				break
			}
			clear(next)
			var push func(u, limit int) int
			push = func(u, limit int) int {
				if u == t {
					return limit
				}
				for ; next[u] < len(g.adj[u]); next[u]++ {
					e := g.adj[u][next[u]]
					v := g.to[e]
					if level[v] != level[u]+1 || !admissible(e) {
						continue
					}
					if f := push(v, min(limit, g.cap[e])); f > 0 {
						g.cap[e] -= f
						g.cap[e^1] += f
						return f
					}
				}
				return 0
			}
			for f := push(s, math.MaxInt); f > 0; f = push(s, math.MaxInt) {
				flow += f
			}
		}
	}
}

// panicf reports a broken invariant of this program.
func panicf(format string, args ...any) {
	panic(fmt.Sprintf("sluice: invariant broken: "+format, args...))
}
