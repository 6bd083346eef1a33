package replica

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
)

// TestRaftScenarios runs the replication scenarios in testdata/raft
// (rewrite the expected output with: go test -run TestRaftScenarios
// -rewrite). One group; nodes 1..N; logical ticks; a chaosNet.
//
// Commands:
//
//	cluster nodes=N [lag-ms=L] [min-isr=M]  N nodes, every one started
//	campaign node=I             node I campaigns; waits until every live node follows it
//	transfer to=I               the leader hands leadership to I; waits as campaign
//	produce node=I [acks=all|1|0] [pid=P epoch=E seq=S]
//	                            one batch of the input's lines as values; prints its offsets or error
//	produce-async node=I ...    as produce, without waiting; "await" waits for them
//	await                       waits for every produce-async and prints each result
//	partition A,B|C             cuts the links between the two sides
//	pause node=I / resume node=I
//	                            node I neither sends nor receives, and no liveness report says so (SIGSTOP)
//	caught-up                   the leader's replicas: whether each has caught up since it led (ReplicaProgress.CaughtUp set)
//	fence nodes=I,J             every host's Host.SetFenced (nodes=0: none)
//	pending                     every produce-async: its result, or "waiting" (does not wait)
//	wait-hw node=I hw=N         ticks until node I's high watermark is N
//	heal                        restores every link
//	stop node=I / start node=I  clean stop and restart
//	crash node=I [seed=S]       power cut: unsynced data lost; the node stays down
//	settle                      ticks until every live node has the same high watermark and log end
//	state                       every live node: leader, log end offset, high watermark, records served
//	epochs node=I               OffsetForLeaderEpoch of the node's every epoch
//	ticks n=N                   N ticks
//	cluster ... compact=1       cleanup.policy=compact (min.cleanable.dirty.ratio 0)
//	produce-keyed-many node=I n=N keys=K [from=F]
//	                            N batches of one record each, key k<i%K>, value v<F+i>
//	clean                       runs the cleaner once on every live node, below its high watermark
//	log node=I                  whether the node has segments below the raft start, and the leader's
//	snapfail n=N                the next N snapshot-file requests fail mid-transfer
//	fetches                     whether snapshot files were requested since the last fetches
//	delete-records node=I [offset=X]
//	                            DeleteRecords below X (default -1: the high watermark); prints the low watermark or error
//	delete-records-async ...    as delete-records, without waiting; "await" waits for them after the produces
func TestRaftScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/raft", func(t *testing.T, path string) {
		var c *pcluster
		var async []*Pending
		var asyncDeletes []chan string
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			num := func(k string, def int) int {
				v, ok := args[k]
				if !ok {
					return def
				}
				n, err := strconv.Atoi(v)
				if err != nil {
					d.Fatalf(t, "%s=%s: %v", k, v, err)
				}
				return n
			}
			node := func() uint64 { return uint64(num("node", 1)) }
			switch d.Cmd {
			case "cluster":
				c = newPCluster(t, num("nodes", 3), 1, uint64(num("seed", 1)))
				if ms := num("lag-ms", 0); ms > 0 {
					c.lagTime = time.Duration(ms) * time.Millisecond
				}
				if m := num("min-isr", 0); m > 0 {
					c.cfg.MinInsyncReplicas = m
				}
				if b := num("segment-bytes", 0); b > 0 {
					c.cfg.Log.SegmentBytes = int64(b)
				}
				if b := num("retention-bytes", 0); b > 0 {
					c.cfg.Log.RetentionBytes = int64(b)
				}
				if num("compact", 0) == 1 {
					c.cfg.Log.CleanupPolicy = segment.PolicyCompact
					c.cfg.Log.MinCleanableDirtyRatio = 0
				}
				c.startAll()
				return ""
			case "campaign":
				id := node()
				ticks := 0
				c.drive(fmt.Sprintf("node %d to lead", id), func() bool {
					if ticks%20 == 0 {
						// Campaign again, or, if another node it can
						// reach won meanwhile, have that one hand over.
						var err error
						if other := c.reachableLeader(id); other != 0 {
							err = c.nodes[other].host.TransferLeadership(c.groups[0], id)
						} else {
							err = c.nodes[id].host.Campaign(c.groups[0])
						}
						if err != nil {
							t.Fatalf("campaign: %v", err)
						}
					}
					ticks++
					return c.leads(id)
				})
				return fmt.Sprintf("leader %d", id)
			case "wait-isr":
				want := num("n", 0)
				c.drive(fmt.Sprintf("an ISR of %d", want), func() bool {
					p := c.leader(c.groups[0])
					return p != nil && len(p.ISR()) == want
				})
				return ""
			case "transfer":
				to := uint64(num("to", 0))
				lead := c.waitLeader(c.groups[0])
				lid, _, _ := lead.Leader()
				if err := c.nodes[lid].host.TransferLeadership(c.groups[0], to); err != nil {
					return "error: " + err.Error()
				}
				c.waitFor(to)
				return fmt.Sprintf("leader %d", to)
			case "produce", "produce-async":
				p := c.nodes[node()].parts[c.groups[0]]
				vals := strings.Fields(d.Input)
				b := valueBatch(vals...)
				if _, ok := args["pid"]; ok {
					b = idempotentBatch(int64(num("pid", 0)), int16(num("epoch", 0)), int32(num("seq", 0)), vals...)
				}
				acks := AcksAll
				switch args["acks"] {
				case "1":
					acks = AcksLeader
				case "0":
					acks = AcksNone
				}
				pd, err := p.ProduceWith(b, ProduceOptions{Acks: acks})
				if err != nil {
					return "error: " + errName(err)
				}
				if d.Cmd == "produce-async" {
					async = append(async, pd)
					return ""
				}
				res, err := c.wait(pd)
				return result(res.BaseOffset, res.LastOffset, err)
			case "await":
				var out strings.Builder
				for i, pd := range async {
					res, err := c.wait(pd)
					fmt.Fprintf(&out, "%d: %s\n", i, result(res.BaseOffset, res.LastOffset, err))
				}
				async = nil
				for i, done := range asyncDeletes {
					var res string
					c.drive("a DeleteRecords to return", func() bool {
						select {
						case res = <-done:
							return true
						default:
							return false
						}
					})
					fmt.Fprintf(&out, "delete %d: %s\n", i, res)
				}
				asyncDeletes = nil
				return out.String()
			case "partition":
				sides := strings.Split(d.CmdArgs[0].Key, "|")
				if len(sides) != 2 {
					d.Fatalf(t, "partition A,B|C")
				}
				c.net.partition(ids(sides[0]), ids(sides[1]))
				return ""
			case "heal":
				c.net.heal()
				return ""
			case "pause", "resume":
				c.net.pause(node(), d.Cmd == "pause")
				return ""
			case "caught-up":
				var lead *Partition
				c.drive("a leader", func() bool { lead = c.newestLeader(); return lead != nil })
				prog, err := lead.rs.host.Progress(lead.rs.id)
				if err != nil {
					return "error: " + err.Error()
				}
				var out []string
				for _, pr := range prog {
					s := fmt.Sprintf("%d:%v", pr.ID, !pr.CaughtUp.IsZero())
					if pr.Learner {
						s += "(learner)"
					}
					out = append(out, s)
				}
				slices.Sort(out)
				return strings.Join(out, " ")
			case "fence":
				var fenced []uint64
				for _, id := range ids(args["nodes"]) {
					if id != 0 {
						fenced = append(fenced, id)
					}
				}
				for _, n := range c.up() {
					n.host.SetFenced(fenced)
				}
				return ""
			case "pending":
				var out strings.Builder
				for i, pd := range async {
					done := pd.done == nil
					if !done {
						select {
						case <-pd.done:
							done = true
						default:
						}
					}
					if done {
						fmt.Fprintf(&out, "%d: %s\n", i, result(pd.res.BaseOffset, pd.res.LastOffset, pd.err))
					} else {
						fmt.Fprintf(&out, "%d: waiting\n", i)
					}
				}
				return out.String()
			case "wait-hw":
				p := c.nodes[node()].parts[c.groups[0]]
				want := int64(num("hw", 0))
				c.drive(fmt.Sprintf("node %d's high watermark at %d", node(), want), func() bool { return p.HighWatermark() == want })
				return ""
			case "stop":
				c.stop(node())
				return ""
			case "start":
				c.start(node())
				return ""
			case "crash":
				c.crash(node(), int64(num("seed", 1)))
				return ""
			case "delete-records":
				// DeleteRecords on node I below offset X (-1: the high
				// watermark), driven until it returns.
				p := c.nodes[node()].parts[c.groups[0]]
				return c.deleteRecords(p, int64(num("offset", -1)))
			case "delete-records-async":
				p := c.nodes[node()].parts[c.groups[0]]
				off := int64(num("offset", -1))
				done := make(chan string, 1)
				go func() {
					lso, err := p.DeleteRecords(off)
					done <- deleteResult(lso, err)
				}()
				asyncDeletes = append(asyncDeletes, done)
				return ""
			case "retention":
				var out strings.Builder
				for _, n := range c.up() {
					p := n.parts[c.groups[0]]
					k, err := p.DeleteOldSegments()
					if err != nil {
						d.Fatalf(t, "retention on node %d: %v", n.id, err)
					}
					fmt.Fprintf(&out, "node %d: %d segments deleted, log start offset %d\n", n.id, k, p.LogStartOffset())
				}
				return out.String()
			case "produce-many":
				// n batches of one record each, values v0, v1, ...
				p := c.nodes[node()].parts[c.groups[0]]
				var last *Pending
				for i := range num("n", 1) {
					pd, err := p.ProduceWith(valueBatch(fmt.Sprintf("v%d", i)), ProduceOptions{Acks: AcksAll})
					if err != nil {
						return "error: " + errName(err)
					}
					last = pd
				}
				res, err := c.wait(last)
				return result(res.BaseOffset, res.LastOffset, err)
			case "produce-keyed-many":
				p := c.nodes[node()].parts[c.groups[0]]
				keys, from := num("keys", 1), num("from", 0)
				var last *Pending
				for i := range num("n", 1) {
					pd, err := p.ProduceWith(keyedBatch(fmt.Sprintf("k%d=v%d", i%keys, from+i)), ProduceOptions{Acks: AcksAll})
					if err != nil {
						return "error: " + errName(err)
					}
					last = pd
				}
				res, err := c.wait(last)
				return result(res.BaseOffset, res.LastOffset, err)
			case "clean":
				var out strings.Builder
				for _, n := range c.up() {
					p := n.parts[c.groups[0]]
					if _, err := p.log.Clean(p.HighWatermark()); err != nil {
						d.Fatalf(t, "clean on node %d: %v", n.id, err)
					}
					fmt.Fprintf(&out, "node %d: segments below the raft start: %v\n", n.id, len(p.log.SnapshotSegments()) > 0)
				}
				return out.String()
			case "log":
				// Also whether its segments below the raft start are
				// byte for byte the leader's.
				p := c.nodes[node()].parts[c.groups[0]]
				mine, err := p.log.SnapshotFiles()
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				same := "no leader"
				if lead := c.leader(c.groups[0]); lead != nil {
					theirs, err := lead.log.SnapshotFiles()
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					same = fmt.Sprint(slices.Equal(mine, theirs))
				}
				return fmt.Sprintf("segments below the raft start: %v, log start offset %d, the leader's files: %s\n", len(mine) > 0, p.LogStartOffset(), same)
			case "snapfail":
				c.net.mu.Lock()
				c.net.snapFail = num("n", 1)
				c.net.mu.Unlock()
				return ""
			case "fetches":
				c.net.mu.Lock()
				k := c.net.snapFetches
				left := c.net.snapFail
				c.net.snapFetches = 0
				c.net.mu.Unlock()
				return fmt.Sprintf("snapshot files requested: %v, failures left to inject: %d\n", k > 0, left)
			case "join":
				// A new node joins as a learner of the group whose
				// voters are listed (before the leader adds it).
				id := node()
				if _, ok := c.nodes[id]; !ok {
					c.addNode(id)
				}
				c.joining[id] = []uint64{id}
				c.joinVoters[id] = ids(args["voters"])
				c.start(id)
				return ""
			case "conf":
				// One membership change through the leader (ConfChangeV2,
				// a single change each): add-learner=I, promote=I,
				// remove=I; waits until the leader applied it.
				var lead *Partition
				c.drive("a leader", func() bool { lead = c.newestLeader(); return lead != nil })
				var cc raftpb.ConfChangeSingle
				var want func(prog []ReplicaProgress) bool
				has := func(prog []ReplicaProgress, id uint64) (bool, bool) {
					for _, pr := range prog {
						if pr.ID == id {
							return true, pr.Learner
						}
					}
					return false, false
				}
				switch {
				case args["add-learner"] != "":
					id := uint64(num("add-learner", 0))
					cc = raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddLearnerNode, NodeID: id}
					want = func(prog []ReplicaProgress) bool { in, l := has(prog, id); return in && l }
				case args["promote"] != "":
					id := uint64(num("promote", 0))
					cc = raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode, NodeID: id}
					want = func(prog []ReplicaProgress) bool { in, l := has(prog, id); return in && !l }
				case args["remove"] != "":
					id := uint64(num("remove", 0))
					cc = raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode, NodeID: id}
					want = func(prog []ReplicaProgress) bool { in, _ := has(prog, id); return !in }
				default:
					d.Fatalf(t, "conf add-learner=I | promote=I | remove=I")
				}
				if err := lead.rs.host.ProposeConfChange(lead.rs.id, raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{cc}}); err != nil {
					return "error: " + err.Error()
				}
				c.drive("the membership change", func() bool {
					prog, err := lead.rs.host.Progress(lead.rs.id)
					return err == nil && want(prog)
				})
				prog, _ := lead.rs.host.Progress(lead.rs.id)
				var out []string
				for _, pr := range prog {
					s := strconv.FormatUint(pr.ID, 10)
					if pr.Learner {
						s += "(learner)"
					}
					out = append(out, s)
				}
				slices.Sort(out)
				return "replicas " + strings.Join(out, " ")
			case "ticks":
				for range num("n", 1) {
					c.tick()
				}
				return ""
			case "settle":
				c.settle()
				return ""
			case "state":
				var out strings.Builder
				var first []string
				var firstID uint64
				for _, n := range c.up() {
					p := n.parts[c.groups[0]]
					lead, _, ok := p.Leader()
					l := "none"
					if ok {
						l = strconv.FormatUint(lead, 10)
					}
					if c.cfg.Log.Compacts() {
						// Which records survived cleaning depends on
						// where segments were cut, which depends on
						// how many elections added entries: print the
						// compacted view (the last value of each key)
						// and whether every record is the first node's.
						recs := compactedRecords(t, p)
						if first == nil {
							first, firstID = recs, n.id
						}
						fmt.Fprintf(&out, "node %d: leader=%s lso=%d leo=%d hw=%d latest=%s same records as node %d: %v\n", n.id, l, p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(),
							strings.Join(latestByKey(recs), " "), firstID, slices.Equal(recs, first))
						continue
					}
					recs := records(t, p)
					if len(recs) > 12 {
						recs = append(append(recs[:3:3], fmt.Sprintf("...(%d)", len(recs)-6)), recs[len(recs)-3:]...)
					}
					fmt.Fprintf(&out, "node %d: leader=%s lso=%d leo=%d hw=%d records=%s\n", n.id, l, p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(), strings.Join(recs, " "))
				}
				return out.String()
			case "epochs":
				p := c.nodes[node()].parts[c.groups[0]]
				var out strings.Builder
				p.mu.Lock()
				entries := append([]epochEntry(nil), p.epochs.entries...)
				p.mu.Unlock()
				for i, e := range entries {
					epoch, end := p.EndOffsetForEpoch(e.epoch)
					fmt.Fprintf(&out, "epoch #%d starts at %d ends at %d (answered as epoch #%d)\n", i, e.startOffset, end, indexOfEpoch(entries, epoch))
				}
				return out.String()
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
				return ""
			}
		})
	})
}

// deleteRecords runs p.DeleteRecords(offset), ticking until it returns.
func (c *pcluster) deleteRecords(p *Partition, offset int64) string {
	c.t.Helper()
	done := make(chan string, 1)
	go func() {
		lso, err := p.DeleteRecords(offset)
		done <- deleteResult(lso, err)
	}()
	var res string
	c.drive("a DeleteRecords to return", func() bool {
		select {
		case res = <-done:
			return true
		default:
			return false
		}
	})
	return res
}

func deleteResult(lso int64, err error) string {
	if err != nil {
		return "error: " + errName(err)
	}
	return fmt.Sprintf("low watermark %d", lso)
}

// indexOfEpoch names an epoch by its position in the cache (terms depend
// on election timing; positions do not).
func indexOfEpoch(entries []epochEntry, epoch int32) int {
	for i, e := range entries {
		if e.epoch == epoch {
			return i
		}
	}
	return -1
}

func ids(s string) []uint64 {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		n, _ := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		out = append(out, n)
	}
	return out
}

func result(base, last int64, err error) string {
	if err != nil {
		return "error: " + errName(err)
	}
	return fmt.Sprintf("offsets %d-%d", base, last)
}

// errName is an error's Kafka name, for scenario output.
func errName(err error) string {
	switch {
	case errors.Is(err, ErrNotLeader):
		return "NOT_LEADER_OR_FOLLOWER"
	case errors.Is(err, ErrLeaderNotAvailable):
		return "LEADER_NOT_AVAILABLE"
	case errors.Is(err, ErrNotEnoughReplicasAfterAppend):
		return "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
	case errors.Is(err, ErrNotEnoughReplicas):
		return "NOT_ENOUGH_REPLICAS"
	case errors.Is(err, ErrOutOfOrderSequence):
		return "OUT_OF_ORDER_SEQUENCE_NUMBER"
	case errors.Is(err, ErrInvalidProducerEpoch):
		return "INVALID_PRODUCER_EPOCH"
	case errors.Is(err, ErrOffsetOutOfRange):
		return "OFFSET_OUT_OF_RANGE"
	}
	return err.Error()
}

// waitFor ticks until node id leads (see leads).
func (c *pcluster) waitFor(id uint64) {
	c.t.Helper()
	c.drive(fmt.Sprintf("node %d to lead", id), func() bool { return c.leads(id) })
}

// leads reports whether node id is the leader and every live node it can
// reach follows it.
func (c *pcluster) leads(id uint64) bool {
	n := c.nodes[id]
	if n.host == nil || !n.parts[c.groups[0]].IsLeader() {
		return false
	}
	for _, o := range c.up() {
		if o.id == id || c.net.isCut(id, o.id) || c.net.isPaused(o.id) {
			continue
		}
		if l, _, ok := o.parts[c.groups[0]].Leader(); !ok || l != id {
			return false
		}
	}
	return true
}

// settle ticks until every live node has the same log end offset and high
// watermark, equal to each other.
func (c *pcluster) settle() {
	c.t.Helper()
	c.drive("the replicas to agree", func() bool {
		var leo, hw int64 = -1, -1
		for _, n := range c.up() {
			p := n.parts[c.groups[0]]
			if leo == -1 {
				leo, hw = p.LogEndOffset(), p.HighWatermark()
			}
			if p.LogEndOffset() != leo || p.HighWatermark() != hw || hw != leo {
				return false
			}
		}
		lead := c.leader(c.groups[0])
		if lead == nil {
			return false
		}
		// Every replica applied what the leader committed: a replicated
		// DeleteRecords takes no offset, so a follower can match the
		// leader's log end and high watermark before it applied one.
		ls, err := lead.rs.host.Status(c.groups[0])
		if err != nil {
			return false
		}
		for _, n := range c.up() {
			st, err := n.host.Status(c.groups[0])
			if err != nil || st.Applied < ls.Commit {
				return false
			}
		}
		return true
	})
}

// reachableLeader returns a node other than id that leads and that id
// can reach, or 0.
func (c *pcluster) reachableLeader(id uint64) uint64 {
	for _, n := range c.up() {
		if n.id != id && !c.net.isCut(id, n.id) && n.parts[c.groups[0]].IsLeader() {
			return n.id
		}
	}
	return 0
}

// newestLeader returns the replica that leads in the newest term (a node
// that joined and knows no leader yet does not count), or nil.
func (c *pcluster) newestLeader() *Partition {
	var best *Partition
	for _, n := range c.up() {
		p := n.parts[c.groups[0]]
		if !p.IsLeader() {
			continue
		}
		if best == nil || p.LeaderEpoch() > best.LeaderEpoch() {
			best = p
		}
	}
	return best
}
