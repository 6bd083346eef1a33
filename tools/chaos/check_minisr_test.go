package chaos

import (
	"strings"
	"testing"
)

// TestCheckMinISRAck: the min-isr-ack check on hand-made histories (times
// in ms; faults count from 500 ms after their start to 500 ms before their
// end).
func TestCheckMinISRAck(t *testing.T) {
	pause := func(node, start, end int) Fault {
		return Fault{Kind: FaultPause, Nodes: []int{node}, Down: []int{node}, Start: ms(start), End: ms(end)}
	}
	net := func(kind string, start, end int, sides ...[]int) Fault {
		return Fault{Kind: kind, Start: ms(start), End: ms(end), Sides: sides}
	}
	min := func(n int) map[string]int { return map[string]int{"q": n} }
	cases := []struct {
		name string
		h    History
		want int // min-isr-ack writes
	}{
		{"issue 28: min.insync.replicas=3, a follower paused, acknowledged", History{Nodes: 3, MinInsync: min(3),
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100), send("producer-0", 0, "b", 6, 2200, 2300)}}, 2},
		{"min.insync.replicas=2, a follower paused: two copies are enough", History{Nodes: 3, MinInsync: min(2),
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 0},
		{"invoked before the pause was surely in force", History{Nodes: 3, MinInsync: min(3),
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 1200, 2000)}}, 0},
		{"acknowledged around the resume", History{Nodes: 3, MinInsync: min(3),
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 7000, 7600)}}, 0},
		{"a fault lasting to the end of the fault phase", History{Nodes: 3, MinInsync: min(3), Healed: ms(9000),
			Faults: []Fault{pause(3, 1000, 0)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 7000, 8000)}}, 1},
		{"min.insync.replicas=2, two followers paused", History{Nodes: 3, MinInsync: min(2),
			Faults: []Fault{pause(2, 1000, 8000), pause(3, 1500, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2100, 2200), appendOp("log-0", "x", OK, 0, 3000, 3100)}}, 1},
		{"an append to a topic with min.insync.replicas=2, two followers paused", History{Nodes: 3, MinInsync: map[string]int{"log": 2},
			Faults: []Fault{pause(2, 1000, 8000), pause(3, 1500, 8000)},
			Ops:    []Op{appendOp("log-0", "x", OK, 0, 3000, 3100)}}, 1},
		{"the second pause began during the write", History{Nodes: 3, MinInsync: min(2),
			Faults: []Fault{pause(2, 1000, 8000), pause(3, 2000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 1600, 2600)}}, 0},
		{"an isolated node: the other two reach each other", History{Nodes: 3, MinInsync: min(2),
			Faults: []Fault{net(FaultIsolate, 1000, 8000, []int{1}, []int{2, 3})},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 0},
		{"an isolated node with min.insync.replicas=3", History{Nodes: 3, MinInsync: min(3),
			Faults: []Fault{net(FaultIsolate, 1000, 8000, []int{1}, []int{2, 3})},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 1},
		{"a bridge: its middle reaches everyone", History{Nodes: 3, MinInsync: min(3),
			Faults: []Fault{net(FaultBridge, 1000, 8000, []int{1}, []int{2}, []int{3})},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 0},
		{"a partition and a pause on five nodes", History{Nodes: 5, MinInsync: min(3),
			Faults: []Fault{net(FaultPartition, 1000, 8000, []int{1, 2}, []int{3, 4, 5}), pause(4, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 1},
		{"replicas recorded: two of three paused on five nodes", History{Nodes: 5, MinInsync: min(2),
			Replicas: map[string]map[int32][]int{"q": {0: {1, 2, 3}}},
			Faults:   []Fault{pause(1, 1000, 8000), pause(2, 1000, 8000)},
			Ops:      []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 1},
		{"replicas recorded, but a move ran: any node may hold it", History{Nodes: 5, MinInsync: min(2),
			Replicas: map[string]map[int32][]int{"q": {0: {1, 2, 3}}},
			Faults:   []Fault{pause(1, 1000, 8000), pause(2, 1000, 8000), {Kind: FaultMove, Start: ms(1500), End: ms(9000)}},
			Ops:      []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 0},
		{"acks=1 producers are not held to min.insync.replicas", History{Nodes: 3, MinInsync: min(3), Acks1: true,
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100), send("probe", 0, "p", 6, 2200, 2300)}}, 1},
		{"failed and info sends say nothing", History{Nodes: 3, MinInsync: min(3),
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops: []Op{{Process: "producer-0", Kind: OpSend, Outcome: Fail, Topic: "q", Value: "a", Start: ms(2000), End: ms(2100)},
				{Process: "producer-0", Kind: OpSend, Outcome: Info, Topic: "q", Value: "b", Start: ms(2000)}}}, 0},
		{"a history without min.insync.replicas is not checked", History{Nodes: 3,
			Faults: []Fault{pause(3, 1000, 8000)},
			Ops:    []Op{send("producer-0", 0, "a", 5, 2000, 2100)}}, 0},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			r := Check(&tc.h)
			if got := r.Counts[KindMinISRAck]; got != tc.want {
				t.Errorf("min-isr-ack count %d, want %d", got, tc.want)
			}
			for _, a := range r.Anomalies {
				t.Logf("%s: %s", a.Kind, a.Msg)
				if a.Kind == KindMinISRAck && (len(a.Ops) != a.Count || a.Msg == "") {
					t.Errorf("anomaly %+v: ops and count disagree, or no message", a)
				}
			}
		})
	}
}
