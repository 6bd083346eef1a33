package chaos

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The network partitions the nemesis draws: sides that cover every node
// once, a minority smaller than the majority, and a bridge whose middle
// node keeps both halves while the halves lose each other.
func TestNemesisComponents(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		c := &Cluster{}
		for i := range nodes {
			c.nodes = append(c.nodes, &Node{ID: i + 1})
		}
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
