package chaos

import (
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/sluicemq/sluice/tools/localcluster"
)

// The network partitions the nemesis draws: sides that cover every node
// once, a minority smaller than the majority, and a bridge whose middle
// node keeps both halves while the halves lose each other.
func TestNemesisComponents(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		c := localcluster.Unstarted(nodes, nil)
		for seed := range uint64(20) {
			n := NewNemesis(c, rand.New(rand.NewPCG(seed, 1)), func() time.Duration { return 0 }, "t", 1, slog.Default())
			for _, kind := range []string{FaultPartition, FaultBridge} {
				comps, what, err := n.components(t.Context(), kind)
				if err != nil {
					t.Fatal(err)
				}
				all := flatten(comps)
				slices.Sort(all)
				if want := plusOne(identity(nodes)); !slices.Equal(all, want) {
					t.Fatalf("%d nodes, %s %q: sides %v cover %v, want %v", nodes, kind, what, comps, all, want)
				}
				switch kind {
				case FaultPartition:
					if len(comps) != 2 || len(comps[0]) >= len(comps[1]) || len(comps[0]) == 0 {
						t.Fatalf("%d nodes: minority/majority %v", nodes, comps)
					}
				case FaultBridge:
					if len(comps) != 3 || len(comps[1]) != 1 || len(comps[0]) == 0 || len(comps[2]) == 0 {
						t.Fatalf("%d nodes: bridge %v", nodes, comps)
					}
					links := bridgeLinks(comps)
					mid := comps[1][0]
					for _, l := range links {
						if l[0] == mid || l[1] == mid {
							t.Fatalf("bridge %v cuts a link of its middle node %d: %v", comps, mid, l)
						}
					}
					if want := 2 * len(comps[0]) * len(comps[2]); len(links) != want {
						t.Fatalf("bridge %v: %d links cut, want %d", comps, len(links), want)
					}
				}
			}
		}
	}
}

// One seed draws one schedule of kinds and durations.
func TestNemesisDeterministic(t *testing.T) {
	draw := func(seed uint64) []time.Duration {
		n := NewNemesis(&Cluster{}, rand.New(rand.NewPCG(seed, 2)), nil, "t", 1, slog.Default())
		var ds []time.Duration
		for range 10 {
			ds = append(ds, n.dur(time.Second, 5*time.Second), time.Duration(n.rng.IntN(len(AllFaults))))
		}
		return ds
	}
	if a, b := draw(7), draw(7); !slices.Equal(a, b) {
		t.Fatalf("seed 7 drew %v then %v", a, b)
	}
	if a, b := draw(7), draw(8); slices.Equal(a, b) {
		t.Fatalf("seeds 7 and 8 drew the same %v", a)
	}
}

func TestParseFaults(t *testing.T) {
	if ks, err := ParseFaults("all"); err != nil || !slices.Equal(ks, AllFaults) {
		t.Fatalf("all: %v %v", ks, err)
	}
	if ks, err := ParseFaults("pause, kill-leader"); err != nil || !slices.Equal(ks, []string{FaultPause, FaultKillLeader}) {
		t.Fatalf("two: %v %v", ks, err)
	}
	if _, err := ParseFaults("pause,explode"); err == nil {
		t.Fatal("an unknown kind parsed")
	}
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// proxiedCluster is a cluster of nodes without brokers whose links are
// fault proxies to one listener; the proxy of link 1->2 is closed, so
// cutting it fails.
func proxiedCluster(t *testing.T, nodes int) *Cluster {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c := localcluster.Unstarted(nodes, func(from, to int) *faultproxy.Proxy {
		p, err := faultproxy.New("127.0.0.1:0", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	})
	c.Proxy(1, 2).Close() // its Cut fails
	return c
}

// noCutBut12 checks that no link of proxiedCluster's 3 nodes is cut but
// the closed one, 1->2.
func noCutBut12(t *testing.T, c *Cluster) {
	t.Helper()
	for from := 1; from <= 3; from++ {
		for to := 1; to <= 3; to++ {
			if from != to && (from != 1 || to != 2) && c.Proxy(from, to).Mode() != 0 {
				t.Errorf("link %d->%d left %v", from, to, c.Proxy(from, to).Mode())
			}
		}
	}
}

// A network partition that fails part-way (a proxy that refuses its cut)
// leaves no link cut behind it: the faults that follow must not run
// under it.
func TestNemesisPartitionFailureHeals(t *testing.T) {
	c := proxiedCluster(t, 3)
	n := NewNemesis(c, rand.New(rand.NewPCG(1, 1)), func() time.Duration { return time.Second }, "t", 1, slog.Default())
	if err := n.episode(t.Context(), FaultPartition, nil); err == nil {
		t.Fatal("a partition with a closed proxy applied")
	}
	noCutBut12(t, c)
	if f := n.Faults(); len(f) != 1 || f[0].End == 0 {
		t.Errorf("faults %+v: the failed partition is not ended", f)
	}
}

// move-isolated's plan: the isolated replica and the dropped one are two
// replicas of the partition; on three nodes the move leaves the dropped
// one out, on five it swaps it for a node outside the replicas; one seed
// draws one plan.
func TestMoveIsolatedPlan(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		orig := []int32{3, 2, 1}
		seen := map[[2]int32]bool{}
		for seed := range uint64(40) {
			iso, dropped, target := moveIsolatedPlan(rand.New(rand.NewPCG(seed, 3)), orig, nodes)
			iso2, dropped2, target2 := moveIsolatedPlan(rand.New(rand.NewPCG(seed, 3)), orig, nodes)
			if iso != iso2 || dropped != dropped2 || !slices.Equal(target, target2) {
				t.Fatalf("seed %d drew two plans", seed)
			}
			seen[[2]int32{iso, dropped}] = true
			if !slices.Contains(orig, iso) || !slices.Contains(orig, dropped) || iso == dropped {
				t.Fatalf("%d nodes: isolate %d, drop %d of %v", nodes, iso, dropped, orig)
			}
			if slices.Contains(target, dropped) || !slices.Contains(target, iso) {
				t.Fatalf("%d nodes: drop %d of %v: target %v", nodes, dropped, orig, target)
			}
			switch nodes {
			case 3:
				if len(target) != 2 {
					t.Fatalf("3 nodes: target %v", target)
				}
			case 5:
				added := slices.DeleteFunc(slices.Clone(target), func(r int32) bool { return slices.Contains(orig, r) })
				if len(target) != 3 || len(added) != 1 || added[0] < 4 || added[0] > 5 {
					t.Fatalf("5 nodes: target %v of %v", target, orig)
				}
			}
		}
		if len(seen) != 6 { // every ordered pair of distinct replicas
			t.Errorf("%d nodes: 40 seeds drew only the (isolate, drop) pairs %v", nodes, seen)
		}
	}
}

// move-isolated is a kind of its own: in "all", and never the fault a
// move overlaps (it moves a partition itself).
func TestMoveIsolatedKind(t *testing.T) {
	ks, _ := ParseFaults("all")
	if !slices.Contains(ks, FaultMoveIsolated) {
		t.Fatalf("all: %v", ks)
	}
	if ks, err := ParseFaults("move-isolated"); err != nil || !slices.Equal(ks, []string{FaultMoveIsolated}) {
		t.Fatalf("move-isolated: %v %v", ks, err)
	}
	if o := overlapKinds(AllFaults); slices.Contains(o, FaultMove) || slices.Contains(o, FaultMoveIsolated) || len(o) != len(AllFaults)-2 {
		t.Fatalf("a move overlaps %v", o)
	}
	if _, ok := faultColors[FaultMoveIsolated]; !ok {
		t.Error("no colour in the report")
	}
}

// A move-isolated whose isolation fails part-way leaves no link cut, no
// move pending and no fault open, and reassigns nothing.
func TestMoveIsolatedFailureHeals(t *testing.T) {
	c := proxiedCluster(t, 3)
	n := NewNemesis(c, rand.New(rand.NewPCG(1, 1)), func() time.Duration { return time.Second }, "t", 1, slog.Default())
	err := n.isolatedMove(t.Context(), 0, []int32{3, 2, 1}, []int32{3, 2}, 1, faultproxy.Blackhole, time.Second, time.Second)
	if err == nil {
		t.Fatal("an isolation with a closed proxy applied")
	}
	noCutBut12(t, c)
	if f := n.Faults(); len(f) != 1 || f[0].End == 0 || f[0].Kind != FaultMoveIsolated {
		t.Errorf("faults %+v: the failed isolation is not ended", f)
	}
	if len(n.moves) != 0 {
		t.Errorf("moves pending: %+v", n.moves)
	}
}

// The coordinator faults run only with the txn workload.
func TestRunFaults(t *testing.T) {
	all := slices.Clone(AllFaults)
	if f := runFaults([]string{WorkloadQueue, WorkloadLog}, all); len(f) != len(AllFaults)-len(CoordinatorFaults) ||
		slices.ContainsFunc(f, func(k string) bool { return slices.Contains(CoordinatorFaults, k) }) {
		t.Errorf("without txn: %v", f)
	}
	if f := runFaults([]string{WorkloadQueue, WorkloadTxn}, all); !slices.Equal(f, AllFaults) {
		t.Errorf("with txn: %v", f)
	}
	if f := runFaults([]string{WorkloadQueue}, []string{FaultKillCoordinator}); !slices.Equal(f, []string{FaultKillCoordinator}) {
		t.Errorf("only coordinator faults asked: %v", f)
	}
	if !slices.Equal(all, AllFaults) {
		t.Errorf("runFaults changed its argument: %v", all)
	}
}
