package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/tools/faultproxy"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The nemesis's fault kinds. Every choice a fault makes (its target's
// role, durations, the partition of the nodes, a delay, an offset) comes
// from the run's seed; which node has that role (the leader of a
// partition, the active controller) is the cluster's answer at the time.
const (
	FaultKillLeader     = "kill-leader"     // SIGKILL the leader of a partition of the queue topic; restart it after the hold
	FaultKillFollower   = "kill-follower"   // SIGKILL a follower of such a partition
	FaultKillController = "kill-controller" // SIGKILL the active controller
	FaultPause          = "pause"           // SIGSTOP a node (a leader half the time) past broker.session.timeout.ms and the election timeout, then SIGCONT
	FaultIsolate        = "isolate"         // cut one node (a leader half the time) from every other
	FaultPartition      = "partition"       // split the nodes into a majority and a minority
	FaultBridge         = "bridge"          // two halves that cannot reach each other, and one node that reaches both
	FaultDiskSlow       = "disk-slow"       // delay one node's fsyncs and writes (test build)
	FaultDiskFail       = "disk-fail"       // fail one node's writes with EIO (test build)
	FaultClock          = "clock"           // jump one node's wall clock by minutes to an hour, either way (test build)
	FaultRollingRestart = "rolling-restart" // SIGTERM (controlled shutdown) and restart each node in turn
	FaultMove           = "move"            // reassign a partition to another replica set while the next fault runs, then move it back
	// FaultMoveIsolated is three steps on one partition (FINDINGS.md, "A
	// partition without a writable leader after the heal"): isolate one
	// of its replicas and, while it is cut off, reassign the partition
	// away from another replica and back, then heal and wait for the move
	// back; SIGKILL a follower of it and restart it; slow the disk of the
	// replica that left and came back (test build; skipped without it).
	FaultMoveIsolated = "move-isolated"
	// The coordinator faults aim at the transaction coordinator of one of
	// the txn workload's transactional.ids (SetTxnIDs; drawn from the
	// seed), found with FindCoordinator (key type 1): the leader of the
	// __transaction_state partition that id hashes to. Killed, paused or
	// cut off in the middle of transactions, it leaves them to a new
	// coordinator, which must complete or abort each one (never half).
	FaultKillCoordinator    = "kill-coordinator"    // SIGKILL it; restart it after the hold
	FaultPauseCoordinator   = "pause-coordinator"   // SIGSTOP it past broker.session.timeout.ms and the election timeout, then SIGCONT
	FaultIsolateCoordinator = "isolate-coordinator" // cut it from every other node
)

// CoordinatorFaults are the kinds that need the txn workload's
// transactional.ids.
var CoordinatorFaults = []string{FaultKillCoordinator, FaultPauseCoordinator, FaultIsolateCoordinator}

// AllFaults are every kind, in the order of a sequential schedule.
var AllFaults = []string{FaultKillLeader, FaultKillFollower, FaultKillController, FaultPause,
	FaultIsolate, FaultPartition, FaultBridge, FaultDiskSlow, FaultDiskFail, FaultClock,
	FaultRollingRestart, FaultMove, FaultMoveIsolated,
	FaultKillCoordinator, FaultPauseCoordinator, FaultIsolateCoordinator}

// ParseFaults parses a comma-separated list of kinds ("all" for every one).
func ParseFaults(s string) ([]string, error) {
	if s == "" || s == "all" {
		return slices.Clone(AllFaults), nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(AllFaults, k) {
			return nil, fmt.Errorf("chaos: unknown fault %q (known: %s)", k, strings.Join(AllFaults, ", "))
		}
		out = append(out, k)
	}
	return out, nil
}

// Timings are the ranges the nemesis draws its durations from, each
// [lo, hi). The zero value is the soak's (DefaultTimings).
type Timings struct {
	// Hold is how long a fault is held: a kill, a cut, a disk or clock
	// fault, and each step of a move-isolated. Its lower bound must
	// outlast raft's election timeout (1 to 2 s) and
	// broker.session.timeout.ms (SessionMs), so that a held fault forces
	// an election and a fencing. 3 to 8 s by default.
	Hold [2]time.Duration
	// Gap is the quiet time after a fault healed, before the next one.
	// 2 to 5 s by default.
	Gap [2]time.Duration
	// PauseOver is how long a pause outlasts broker.session.timeout.ms.
	// 1 to 5 s by default.
	PauseOver [2]time.Duration
}

// DefaultTimings are the soak's timings.
var DefaultTimings = Timings{
	Hold:      [2]time.Duration{3 * time.Second, 8 * time.Second},
	Gap:       [2]time.Duration{2 * time.Second, 5 * time.Second},
	PauseOver: [2]time.Duration{time.Second, 5 * time.Second},
}

// orDefault fills t's zero ranges from DefaultTimings.
func (t Timings) orDefault() Timings {
	if t.Hold[1] == 0 {
		t.Hold = DefaultTimings.Hold
	}
	if t.Gap[1] == 0 {
		t.Gap = DefaultTimings.Gap
	}
	if t.PauseOver[1] == 0 {
		t.PauseOver = DefaultTimings.PauseOver
	}
	return t
}

// Nemesis injects faults into a cluster on a schedule drawn from its
// random source and records each one.
type Nemesis struct {
	c          *Cluster
	rng        *rand.Rand
	timings    Timings
	since      func() time.Duration
	topic      string // the topic whose partitions' leaders are targets
	partitions int32
	txnIDs     []string // the transactional.ids whose coordinators the coordinator faults aim at
	log        *slog.Logger

	faults []Fault
	// holds: what to undo at the end (Heal) for a fault still in force.
	killed  map[int]bool
	paused  map[int]bool
	diskSet map[int]bool
	moves   []pendingMove
	// unsupported is set once a test-build fault was not applied by the
	// broker (a binary built without -tags faults).
	unsupported bool
}

type pendingMove struct {
	fault    int // index in faults
	tp       int32
	original []int32
}

// NewNemesis returns a nemesis for c whose choices come from rng, with
// DefaultTimings (SetTimings changes them).
func NewNemesis(c *Cluster, rng *rand.Rand, since func() time.Duration, topic string, partitions int32, log *slog.Logger) *Nemesis {
	return &Nemesis{c: c, rng: rng, timings: DefaultTimings, since: since, topic: topic, partitions: partitions, log: log,
		killed: map[int]bool{}, paused: map[int]bool{}, diskSet: map[int]bool{}}
}

// SetTimings sets the ranges of the nemesis's durations (zero ranges:
// DefaultTimings'). The draws are the same whatever the ranges, so a
// seed picks the same faults and targets.
func (n *Nemesis) SetTimings(t Timings) { n.timings = t.orDefault() }

// SetTxnIDs sets the transactional.ids whose coordinators the
// coordinator faults aim at (none: those faults are not applied).
func (n *Nemesis) SetTxnIDs(ids []string) { n.txnIDs = slices.Clone(ids) }

// Faults are the faults injected so far.
func (n *Nemesis) Faults() []Fault { return slices.Clone(n.faults) }

// Run injects faults until d has passed: one at a time, each held for a
// few seconds, healed, then a quiet gap. kinds in order when sequential
// (every kind at least once, however long that takes on a slow machine,
// then further passes while d lasts), else drawn at random. A fault that
// cannot be applied (no leader to find) is skipped and logged.
func (n *Nemesis) Run(ctx context.Context, kinds []string, sequential bool, d time.Duration) error {
	end := time.Now().Add(d)
	for i := 0; (time.Now().Before(end) || (sequential && i < len(kinds))) && ctx.Err() == nil; i++ {
		var k string
		if sequential {
			k = kinds[i%len(kinds)]
		} else {
			k = kinds[n.rng.IntN(len(kinds))]
		}
		if err := n.episode(ctx, k, kinds); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			n.log.Warn("chaos: nemesis: fault not applied", "kind", k, "err", err)
		}
		if err := n.sleep(ctx, n.dur(n.timings.Gap[0], n.timings.Gap[1])); err != nil {
			return nil
		}
	}
	return nil
}

// episode applies one fault, holds it, heals it. A move overlaps the
// next (non-move) fault.
func (n *Nemesis) episode(ctx context.Context, kind string, kinds []string) error {
	if kind == FaultMove {
		if err := n.startMove(ctx); err != nil {
			// The reassignment may have been applied all the same.
			return errors.Join(err, n.finishMoves(ctx, 30*time.Second))
		}
		others := overlapKinds(kinds)
		if len(others) > 0 {
			if err := n.episode(ctx, others[n.rng.IntN(len(others))], nil); err != nil {
				n.log.Warn("chaos: nemesis: fault during a move not applied", "err", err)
			}
		} else if err := n.sleep(ctx, n.dur(3*time.Second, 6*time.Second)); err != nil {
			return err
		}
		return n.finishMoves(ctx, 30*time.Second)
	}
	if kind == FaultMoveIsolated {
		return n.moveIsolated(ctx)
	}
	hold := n.dur(n.timings.Hold[0], n.timings.Hold[1])
	switch kind {
	case FaultKillLeader, FaultKillFollower, FaultKillController, FaultKillCoordinator:
		id, what, err := n.target(ctx, kind)
		if err != nil {
			return err
		}
		return n.kill(ctx, kind, what, id, hold)
	case FaultPause, FaultPauseCoordinator:
		tk := n.pick(FaultKillLeader, "")
		if kind == FaultPauseCoordinator {
			tk = FaultKillCoordinator
		}
		id, what, err := n.target(ctx, tk)
		if err != nil {
			return err
		}
		hold = SessionMs*time.Millisecond + n.dur(n.timings.PauseOver[0], n.timings.PauseOver[1])
		f := n.begin(kind, fmt.Sprintf("SIGSTOP %s for %v", what, hold.Round(time.Millisecond)), id)
		n.faults[f].Down = []int{id}
		if err := n.c.Pause(id); err != nil {
			return err
		}
		n.paused[id] = true
		if err := n.sleep(ctx, hold); err != nil {
			return err
		}
		err = n.c.Resume(id)
		delete(n.paused, id)
		n.end(f)
		return err
	case FaultIsolate, FaultPartition, FaultBridge, FaultIsolateCoordinator:
		comps, what, err := n.components(ctx, kind)
		if err != nil {
			return err
		}
		mode := n.mode()
		f := n.begin(kind, fmt.Sprintf("%s (%v)", what, mode), flatten(comps)...)
		n.faults[f].Sides = comps
		if kind == FaultBridge {
			err = n.c.CutLinks(bridgeLinks(comps), mode)
		} else {
			err = n.c.Partition(comps, mode)
		}
		if err != nil {
			// Some links may be cut: heal them now rather than leave
			// them in force under the faults that follow.
			err = errors.Join(err, n.c.HealNetwork())
			n.end(f)
			return err
		}
		if err := n.sleep(ctx, hold); err != nil {
			return err
		}
		err = n.c.HealNetwork()
		n.end(f)
		return err
	case FaultDiskSlow, FaultDiskFail, FaultClock:
		if n.unsupported {
			return errors.New("the broker binary applies no test-build faults (build it with -tags faults)")
		}
		id, what, err := n.target(ctx, n.pick(FaultKillLeader, ""))
		if err != nil {
			return err
		}
		var nf NodeFaults
		var desc, fk string
		switch kind {
		case FaultDiskSlow:
			nf.FsyncDelayMs, nf.WriteDelayMs = 50+n.rng.IntN(450), n.rng.IntN(20)
			desc, fk = fmt.Sprintf("slow disk on %s: fsync +%d ms, write +%d ms", what, nf.FsyncDelayMs, nf.WriteDelayMs), kind
		case FaultDiskFail:
			nf.FailWrites = true
			desc, fk = fmt.Sprintf("failing disk on %s: writes fail with EIO", what), kind
		case FaultClock:
			off := time.Minute + time.Duration(n.rng.Int64N(int64(59*time.Minute)))
			if n.rng.IntN(2) == 0 {
				off = -off
			}
			nf.ClockOffsetMs = off.Milliseconds()
			desc, fk = fmt.Sprintf("clock of %s jumps %+v", what, off.Round(time.Second)), kind
		}
		return n.nodeFault(ctx, fk, desc, id, nf, hold)
	case FaultRollingRestart:
		order := n.rng.Perm(len(n.c.Nodes()))
		f := n.begin(FaultRollingRestart, fmt.Sprintf("rolling restart (SIGTERM, start) in the order %v", plusOne(order)), plusOne(order)...)
		defer n.end(f)
		for _, i := range order {
			id := i + 1
			if _, err := n.c.Stop(id); err != nil {
				n.log.Warn("chaos: nemesis: controlled shutdown", "node", id, "err", err)
			}
			n.killed[id] = true
			if err := n.restart(ctx, id); err != nil {
				return err
			}
			if err := n.c.WaitReady(ctx, 60*time.Second); err != nil {
				return fmt.Errorf("after restarting node %d: %w", id, err)
			}
			if err := n.c.WaitInSync(ctx, n.topic, 60*time.Second); err != nil {
				return fmt.Errorf("after restarting node %d: %w", id, err)
			}
		}
		return nil
	}
	return fmt.Errorf("chaos: unknown fault %q", kind)
}

// kill SIGKILLs node id, holds, and restarts it: a fault of kind.
func (n *Nemesis) kill(ctx context.Context, kind, what string, id int, hold time.Duration) error {
	f := n.begin(kind, what, id)
	n.faults[f].Down = []int{id}
	if err := n.c.Kill(id); err != nil {
		return err
	}
	n.killed[id] = true
	if err := n.sleep(ctx, hold); err != nil {
		return err
	}
	if err := n.restart(ctx, id); err != nil {
		return err // still down: Heal starts it and ends the fault
	}
	n.end(f)
	return nil
}

// nodeFault applies nf to node id through its fault file (test build),
// holds, and clears it: a fault of kind. A broker without the test
// build's faults applies none: the fault is dropped from the record, and
// the nemesis applies no more of them.
func (n *Nemesis) nodeFault(ctx context.Context, kind, desc string, id int, nf NodeFaults, hold time.Duration) error {
	f := n.begin(kind, desc, id)
	if err := n.setFaults(ctx, id, nf); err != nil {
		// Not applied: a binary without -tags faults. Keep no
		// record of a fault that never happened.
		n.c.SetFaults(id, NodeFaults{})
		n.faults = n.faults[:f]
		if countInFile(n.c.Nodes()[id-1].LogPath, "sluice: faults: applied") == 0 {
			n.unsupported = true
		}
		return err
	}
	n.diskSet[id] = true
	if err := n.sleep(ctx, hold); err != nil {
		return err
	}
	err := n.c.SetFaults(id, NodeFaults{})
	delete(n.diskSet, id)
	if !n.c.Running(id) {
		// A broker may stop on a failing disk (Kafka halts when its
		// metadata log dir fails); the operator starts it again.
		n.log.Info("chaos: nemesis: the broker had stopped during the fault; starting it", "node", id)
		err = errors.Join(err, n.restart(ctx, id))
	}
	n.end(f)
	return err
}

// overlapKinds are the kinds a move may overlap: not a move.
func overlapKinds(kinds []string) []string {
	return slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == FaultMove || k == FaultMoveIsolated })
}

// mode draws how a cut link fails: blackholed or reset.
func (n *Nemesis) mode() faultproxy.Mode {
	if n.rng.IntN(2) == 0 {
		return faultproxy.Reset
	}
	return faultproxy.Blackhole
}

// pick returns a half the time, else b.
func (n *Nemesis) pick(a, b string) string {
	if n.rng.IntN(2) == 0 {
		return a
	}
	return b
}

func (n *Nemesis) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

func (n *Nemesis) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (n *Nemesis) begin(kind, what string, nodes ...int) int {
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	n.faults = append(n.faults, Fault{Kind: kind, Nodes: nodes, What: what, Start: n.since()})
	n.log.Info("chaos: nemesis: fault", "kind", kind, "what", what)
	return len(n.faults) - 1
}

func (n *Nemesis) end(i int) {
	n.faults[i].End = n.since()
	n.log.Info("chaos: nemesis: healed", "kind", n.faults[i].Kind, "what", n.faults[i].What)
}

// restart starts a killed or stopped node again.
func (n *Nemesis) restart(ctx context.Context, id int) error {
	if err := n.c.Start(ctx, id); err != nil {
		return err
	}
	delete(n.killed, id)
	return nil
}

// target finds the node a fault aims at: the leader or a follower of a
// random partition of the topic, the active controller, or (kind "") any
// node that is running and not paused.
func (n *Nemesis) target(ctx context.Context, kind string) (int, string, error) {
	p := int32(n.rng.IntN(int(n.partitions)))
	follower := n.rng.IntN(2)
	switch kind {
	case FaultKillCoordinator:
		if len(n.txnIDs) == 0 {
			return 0, "", errors.New("no transactional.ids to find the coordinator of (the txn workload is not running)")
		}
		txnID := n.txnIDs[n.rng.IntN(len(n.txnIDs))]
		id, err := n.coordinator(ctx, txnID)
		if err != nil {
			return 0, "", err
		}
		return id, fmt.Sprintf("node %d (transaction coordinator of %s)", id, txnID), nil
	case FaultKillController:
		id, err := n.c.Controller(ctx)
		if err != nil {
			return 0, "", err
		}
		return id, fmt.Sprintf("node %d (the active controller)", id), nil
	case FaultKillLeader, FaultKillFollower:
		md, err := n.c.Metadata(ctx, 0, n.topic)
		if err != nil {
			return 0, "", err
		}
		pd, ok := md.Topics[n.topic].Partitions[p]
		if !ok || pd.Leader < 0 {
			return 0, "", fmt.Errorf("%s/%d has no leader", n.topic, p)
		}
		if kind == FaultKillLeader {
			return int(pd.Leader), fmt.Sprintf("node %d (leader of %s/%d)", pd.Leader, n.topic, p), nil
		}
		var fs []int32
		for _, r := range pd.Replicas {
			if r != pd.Leader {
				fs = append(fs, r)
			}
		}
		if len(fs) == 0 {
			return 0, "", fmt.Errorf("%s/%d has no follower", n.topic, p)
		}
		id := int(fs[follower%len(fs)])
		return id, fmt.Sprintf("node %d (follower of %s/%d)", id, n.topic, p), nil
	}
	var up []int
	for _, nd := range n.c.Nodes() {
		if n.c.Running(nd.ID) && !n.c.Paused(nd.ID) {
			up = append(up, nd.ID)
		}
	}
	if len(up) == 0 {
		return 0, "", errors.New("no node running")
	}
	id := up[n.rng.IntN(len(up))]
	return id, fmt.Sprintf("node %d", id), nil
}

// coordinator finds the node coordinating transactional.id txnID
// (FindCoordinator, key type 1), retrying for up to 10 s while the
// cluster has none (a coordinator loading its partition after an
// earlier fault).
func (n *Nemesis) coordinator(ctx context.Context, txnID string) (int, error) {
	var id int
	err := Poll(ctx, 10*time.Second, func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		r, ok := n.c.Admin().FindTxnCoordinators(rctx, txnID)[txnID]
		switch {
		case !ok:
			return fmt.Errorf("no FindCoordinator answer for %s", txnID)
		case r.Err != nil:
			return fmt.Errorf("FindCoordinator %s: %w", txnID, r.Err)
		case r.NodeID <= 0 || int(r.NodeID) > len(n.c.Nodes()):
			return fmt.Errorf("FindCoordinator %s: node %d", txnID, r.NodeID)
		}
		id = int(r.NodeID)
		return nil
	})
	return id, err
}

// components draws the sides of a network partition.
func (n *Nemesis) components(ctx context.Context, kind string) ([][]int, string, error) {
	ids := plusOne(n.rng.Perm(len(n.c.Nodes())))
	switch kind {
	case FaultIsolate, FaultIsolateCoordinator:
		tk := FaultKillCoordinator
		if kind == FaultIsolate {
			tk = n.pick(FaultKillLeader, "")
		}
		id, what, err := n.target(ctx, tk)
		if err != nil {
			return nil, "", err
		}
		rest := slices.DeleteFunc(ids, func(x int) bool { return x == id })
		return [][]int{{id}, rest}, "isolate " + what, nil
	case FaultPartition:
		k := (len(ids) - 1) / 2
		minority, majority := ids[:k], ids[k:]
		return [][]int{minority, majority}, fmt.Sprintf("minority %v | majority %v", minority, majority), nil
	default: // bridge: halves ids[:h] and ids[h+1:], ids[h] reaches both
		h := len(ids) / 2
		return [][]int{ids[:h], {ids[h]}, ids[h+1:]}, fmt.Sprintf("bridge: %v | %d | %v", ids[:h], ids[h], ids[h+1:]), nil
	}
}

// bridgeLinks are the links between the first and last of three
// components, both directions.
func bridgeLinks(comps [][]int) [][2]int {
	var ls [][2]int
	for _, a := range comps[0] {
		for _, b := range comps[2] {
			ls = append(ls, [2]int{a, b}, [2]int{b, a})
		}
	}
	return ls
}

func flatten(comps [][]int) []int {
	var out []int
	for _, c := range comps {
		out = append(out, c...)
	}
	return out
}

func plusOne(perm []int) []int {
	out := make([]int, len(perm))
	for i, x := range perm {
		out[i] = x + 1
	}
	return out
}

// setFaults writes a node's fault file and checks, once, that its broker
// applies it (a line "sluice: faults: applied" in its log within 3 s).
func (n *Nemesis) setFaults(ctx context.Context, id int, nf NodeFaults) error {
	node := n.c.Nodes()[id-1]
	before := countInFile(node.LogPath, "sluice: faults: applied")
	if err := n.c.SetFaults(id, nf); err != nil {
		return err
	}
	return Poll(ctx, 3*time.Second, func(context.Context) error {
		if countInFile(node.LogPath, "sluice: faults: applied") > before {
			return nil
		}
		if n.c.Paused(id) {
			return nil // it applies it when resumed
		}
		return errors.New("not applied")
	})
}

func countInFile(path, s string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), s)
}

// startMove reassigns a random partition of the topic: on three nodes it
// drops one replica (replication factor 3 to 2), on five it replaces one
// replica by a node outside the list. The move back happens in
// finishMoves.
func (n *Nemesis) startMove(ctx context.Context) error {
	p := int32(n.rng.IntN(int(n.partitions)))
	md, err := n.c.Metadata(ctx, 0, n.topic)
	if err != nil {
		return err
	}
	pd, ok := md.Topics[n.topic].Partitions[p]
	if !ok || len(pd.Replicas) == 0 {
		return fmt.Errorf("%s/%d: no replicas in metadata", n.topic, p)
	}
	orig := slices.Clone(pd.Replicas)
	target := moveTarget(n.rng, orig, n.rng.IntN(len(orig)), len(n.c.Nodes()))
	f := n.begin(FaultMove, fmt.Sprintf("reassign %s/%d from %v to %v", n.topic, p, orig, target), toInts(union(orig, target))...)
	// Pending even if reassign fails: an attempt it retried may have been
	// applied (its answer lost), and the move back is a no-op otherwise.
	n.moves = append(n.moves, pendingMove{fault: f, tp: p, original: orig})
	return n.reassign(ctx, p, target)
}

// moveTarget is where a move takes a partition on replicas orig, in a
// cluster of nodes 1..nodes: without orig[drop] (replication factor one
// less) when every node holds a replica, else with orig[drop] replaced
// by a node outside orig, drawn from rng.
func moveTarget(rng *rand.Rand, orig []int32, drop, nodes int) []int32 {
	target := slices.Clone(orig)
	if nodes <= len(orig) {
		return slices.Delete(target, drop, drop+1)
	}
	var outside []int32
	for id := int32(1); id <= int32(nodes); id++ {
		if !slices.Contains(orig, id) {
			outside = append(outside, id)
		}
	}
	target[drop] = outside[rng.IntN(len(outside))]
	return target
}

func (n *Nemesis) reassign(ctx context.Context, p int32, replicas []int32) error {
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(n.topic, p, replicas)
	return Poll(ctx, 20*time.Second, func(ctx context.Context) error {
		resp, err := n.c.Admin().AlterPartitionAssignments(ctx, req)
		if err != nil {
			return err
		}
		return resp.Error()
	})
}

// finishMoves waits (up to d each) until every started move completed,
// then moves each partition back to its original replicas.
func (n *Nemesis) finishMoves(ctx context.Context, d time.Duration) error {
	var errs []error
	var left []pendingMove // not moved back: Heal tries again
	for _, m := range n.moves {
		if err := n.waitMoved(ctx, m.tp, d); err != nil {
			errs = append(errs, err)
		}
		if err := n.reassign(ctx, m.tp, m.original); err != nil {
			errs = append(errs, err)
			left = append(left, m)
			continue
		}
		if err := n.waitMoved(ctx, m.tp, d); err != nil {
			errs = append(errs, err)
		}
		n.end(m.fault)
	}
	n.moves = left
	return errors.Join(errs...)
}

// waitMoved waits until the partition has no reassignment in progress.
func (n *Nemesis) waitMoved(ctx context.Context, p int32, d time.Duration) error {
	return Poll(ctx, d, func(ctx context.Context) error {
		resp, err := n.c.Admin().ListPartitionReassignments(ctx, kadm.TopicsSet{n.topic: {p: struct{}{}}})
		if err != nil {
			return err
		}
		if r, ok := resp[n.topic][p]; ok && (len(r.AddingReplicas) > 0 || len(r.RemovingReplicas) > 0) {
			return fmt.Errorf("%s/%d still moving: adding %v, removing %v", n.topic, p, r.AddingReplicas, r.RemovingReplicas)
		}
		return nil
	})
}

// moveIsolated injects FaultMoveIsolated: isolatedMove, then a follower
// of the partition killed and restarted, then a slow disk on the replica
// the move took away and back.
func (n *Nemesis) moveIsolated(ctx context.Context) error {
	// Every draw first: one seed, one schedule, whatever the cluster
	// answers.
	p := int32(n.rng.IntN(int(n.partitions)))
	plan := rand.New(rand.NewPCG(n.rng.Uint64(), n.rng.Uint64()))
	mode := n.mode()
	holdRange := n.timings.Hold
	hold, settle, gap := n.dur(holdRange[0], holdRange[1]), n.dur(time.Second, 3*time.Second), n.dur(time.Second, 4*time.Second)
	killHold, diskHold := n.dur(holdRange[0], holdRange[1]), n.dur(holdRange[0], holdRange[1])
	follower := n.rng.IntN(2)
	disk := NodeFaults{FsyncDelayMs: 50 + n.rng.IntN(450), WriteDelayMs: n.rng.IntN(20)}

	md, err := n.c.Metadata(ctx, 0, n.topic)
	if err != nil {
		return err
	}
	pd, ok := md.Topics[n.topic].Partitions[p]
	if !ok || len(pd.Replicas) < 2 {
		return fmt.Errorf("%s/%d: %d replicas in metadata, a move-isolated needs two", n.topic, p, len(pd.Replicas))
	}
	orig := slices.Clone(pd.Replicas)
	iso, dropped, target := moveIsolatedPlan(plan, orig, len(n.c.Nodes()))
	if err := n.isolatedMove(ctx, p, orig, target, int(iso), mode, hold, settle); err != nil {
		return err
	}

	if err := n.sleep(ctx, gap); err != nil {
		return err
	}
	if md, err = n.c.Metadata(ctx, 0, n.topic); err != nil {
		return err
	}
	pd = md.Topics[n.topic].Partitions[p]
	var fs []int32
	for _, r := range pd.Replicas {
		if r != pd.Leader {
			fs = append(fs, r)
		}
	}
	if pd.Leader < 0 || len(fs) == 0 {
		return fmt.Errorf("%s/%d after the move: leader %d, replicas %v: no follower to kill", n.topic, p, pd.Leader, pd.Replicas)
	}
	id := int(fs[follower%len(fs)])
	if err := n.kill(ctx, FaultMoveIsolated, fmt.Sprintf("SIGKILL node %d (follower of %s/%d, after the move)", id, n.topic, p), id, killHold); err != nil {
		return err
	}

	if n.unsupported {
		n.log.Info("chaos: nemesis: move-isolated: no slow disk (the broker binary applies no test-build faults)")
		return nil
	}
	desc := fmt.Sprintf("slow disk on node %d (the replica of %s/%d the move took away and back): fsync +%d ms, write +%d ms",
		dropped, n.topic, p, disk.FsyncDelayMs, disk.WriteDelayMs)
	if err := n.nodeFault(ctx, FaultMoveIsolated, desc, int(dropped), disk, diskHold); err != nil {
		return fmt.Errorf("move-isolated's slow disk: %w", err)
	}
	return nil
}

// moveIsolatedPlan draws, for a partition on replicas orig (two or more)
// in a cluster of nodes, the replica to isolate, another replica for the
// move to drop, and the replicas the move takes the partition to.
func moveIsolatedPlan(rng *rand.Rand, orig []int32, nodes int) (isolated, dropped int32, target []int32) {
	i := rng.IntN(len(orig))
	d := rng.IntN(len(orig) - 1)
	if d >= i {
		d++
	}
	return orig[i], orig[d], moveTarget(rng, orig, d, nodes)
}

// isolatedMove is move-isolated's first step, one fault: node iso cut
// off from every other node (mode) while partition p is reassigned from
// orig to target and, once that completed or hold passed, back to orig;
// the network heals settle later, and the move back is waited for. A
// step that fails leaves the move pending: Heal moves the partition back
// and ends the fault.
func (n *Nemesis) isolatedMove(ctx context.Context, p int32, orig, target []int32, iso int, mode faultproxy.Mode, hold, settle time.Duration) error {
	var rest []int
	for _, nd := range n.c.Nodes() {
		if nd.ID != iso {
			rest = append(rest, nd.ID)
		}
	}
	f := n.begin(FaultMoveIsolated, fmt.Sprintf("isolate node %d (%v); meanwhile reassign %s/%d from %v to %v and back",
		iso, mode, n.topic, p, orig, target), toInts(union(orig, target))...)
	n.faults[f].Sides = [][]int{{iso}, rest}
	if err := n.c.Partition([][]int{{iso}, rest}, mode); err != nil {
		err = errors.Join(err, n.c.HealNetwork())
		n.end(f)
		return err
	}
	n.moves = append(n.moves, pendingMove{fault: f, tp: p, original: orig})
	err := n.reassign(ctx, p, target)
	if err == nil {
		if werr := n.waitMoved(ctx, p, hold); werr != nil {
			n.log.Info("chaos: nemesis: move-isolated: the move did not complete while a replica was cut off", "err", werr)
		}
		err = n.reassign(ctx, p, orig)
	}
	if err == nil {
		err = n.sleep(ctx, settle)
	}
	if err = errors.Join(err, n.c.HealNetwork()); err != nil {
		return err
	}
	if err := n.waitMoved(ctx, p, 30*time.Second); err != nil {
		return err
	}
	n.moves = slices.DeleteFunc(n.moves, func(m pendingMove) bool { return m.fault == f })
	n.end(f)
	return nil
}

func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func toInts(xs []int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

// Heal ends every fault still in force: resumes paused nodes, starts
// killed ones, heals the network, clears the fault files, and finishes
// the moves.
func (n *Nemesis) Heal(ctx context.Context) error {
	var errs []error
	for _, nd := range n.c.Nodes() {
		if n.paused[nd.ID] || n.c.Paused(nd.ID) {
			errs = append(errs, n.c.Resume(nd.ID))
		}
	}
	n.paused = map[int]bool{}
	for _, nd := range n.c.Nodes() {
		if !n.c.Running(nd.ID) {
			errs = append(errs, n.restart(ctx, nd.ID))
		}
	}
	errs = append(errs, n.c.HealNetwork())
	for _, nd := range n.c.Nodes() {
		errs = append(errs, n.c.SetFaults(nd.ID, NodeFaults{}))
	}
	errs = append(errs, n.finishMoves(ctx, 60*time.Second))
	for i := range n.faults {
		if n.faults[i].End == 0 {
			n.end(i)
		}
	}
	return errors.Join(errs...)
}
