package replica

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Quiescence and liveness (CockroachDB quiesces idle ranges the same way;
// DESIGN.md, "Replication", has the reasons).
//
//   - A leader whose group has been idle for QuiesceTicks ticks (no new
//     entry; everything committed and applied; every follower not
//     reported down has acknowledged the last index and is replicating;
//     those and the leader a majority of the voters; no joint
//     configuration; no leadership transfer) sends each live replica a
//     quiesce message (GroupMessage.Quiesce: a MsgHeartbeat with its term,
//     commit and last index) and stops ticking.
//   - A follower that agrees (same term and leader, its log ends at that
//     index) steps it as a heartbeat (learning the commit index and
//     restarting its election timer) and stops ticking. One that missed
//     it keeps ticking and eventually asks for a pre-vote, which wakes the
//     others; they refuse it (CheckQuorum: they heard from their leader)
//     and the leader, awake again, brings it back and quiesces again.
//   - Any message but a heartbeat response, and any call that changes
//     the group (a proposal, a campaign, a membership change, a
//     leadership transfer), wakes a quiesced group: it ticks again.
//     Status and Progress do not wake it.
//   - Liveness: the transport reports a peer that stopped answering
//     (Host.PeerDown). Each group whose leader is that peer forgets its
//     leader (raft's ForgetLeader, so it grants pre-votes at once) and
//     wakes; the lowest live voter campaigns at once and again every
//     campaignEvery ticks, a few times, while there is no leader. The
//     groups this replica leads wake too, so a leader cut off from its
//     followers ticks and steps down (CheckQuorum). Host.PeerUp wakes the
//     groups this replica leads, so they catch the returning peer up.
//
// A quiesced group is out of the host's ticking set, so Tick and the
// scheduler never see it.

const (
	// campaignEvery is how many ticks the designated replica waits
	// between campaigns after its leader was reported down, and the
	// preferred replica of a new group between its first campaigns
	// (GroupConfig.CampaignIfNew).
	campaignEvery = 2
	// campaignTries is how many times it campaigns; raft's own election
	// timeout takes over after that.
	campaignTries = 5
)

// setTicking adds g to the ticking set or takes it out.
func (h *Host) setTicking(g *group, on bool) {
	h.tickMu.Lock()
	defer h.tickMu.Unlock()
	if on {
		h.ticking[g] = struct{}{}
	} else {
		delete(h.ticking, g)
	}
}

// wakes reports whether a mailbox wakes a quiesced group.
func (h *Host) wakes(inbox []GroupMessage, ops []groupOp) bool {
	for i := range inbox {
		if !inbox[i].Quiesce && inbox[i].Msg.Type != raftpb.MsgHeartbeatResp {
			return true
		}
	}
	for i := range ops {
		if ops[i].wake {
			return true
		}
	}
	return false
}

// unquiesce makes g tick again. Called by the worker handling g.
func (h *Host) unquiesce(g *group) {
	if !g.quiesced {
		return
	}
	g.quiesced = false
	g.idleTicks = 0
	h.setTicking(g, true)
}

// quiesce stops g ticking. Called by the worker handling g.
func (h *Host) quiesce(g *group) {
	if g.quiesced {
		return
	}
	g.quiesced = true
	g.idleTicks = 0
	h.setTicking(g, false)
}

// quiesceVisit is maybeQuiesce's walk over the leader's progress.
type quiesceVisit struct {
	last, self uint64
	ok         bool
	voters     int // voters caught up and live, the leader included
}

// maybeQuiesce quiesces g if it leads an idle group, appending its
// quiesce messages to out. Called by the worker after the group's Ready
// (if any) was advanced; idle time counts ticks.
func (h *Host) maybeQuiesce(g *group, out []GroupMessage) []GroupMessage {
	ticked := g.ticked
	g.ticked = 0
	if h.cfg.DisableQuiescence || g.quiesced || g.role != raft.StateLeader {
		return out
	}
	if ticked == 0 {
		return out
	}
	if cw, ok := g.machine.(copyWaiter); ok && cw.waitingCopies() {
		// acks=all waits on the replicas' progress and the ISR, which
		// only a ticking leader keeps current (raft_acks.go).
		g.idleTicks = 0
		return out
	}
	st := g.rn.BasicStatus()
	last, err := g.storage.LastIndex()
	if err != nil || g.rn.HasReady() || st.LeadTransferee != 0 || st.Commit != last || st.Applied != last ||
		len(g.state.ConfState.VotersOutgoing) > 0 || last != g.idleLast {
		g.idleTicks, g.idleLast = 0, last
		return out
	}
	g.idleTicks += ticked
	if g.idleTicks < h.cfg.QuiesceTicks {
		return out
	}
	g.qv = quiesceVisit{last: last, self: h.cfg.NodeID, ok: true}
	if g.quiesceFn == nil {
		g.quiesceFn = func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
			v := &g.qv
			if id == v.self {
				v.voters++
				return
			}
			if h.isDown(id) {
				return
			}
			if pr.Match != v.last || pr.State != tracker.StateReplicate {
				v.ok = false
				return
			}
			if typ == raft.ProgressTypePeer {
				v.voters++
			}
		}
	}
	g.rn.WithProgress(g.quiesceFn)
	if !g.qv.ok || 2*g.qv.voters <= len(g.state.ConfState.Voters) {
		return out
	}
	for _, ids := range [2][]uint64{g.state.ConfState.Voters, g.state.ConfState.Learners} {
		for _, id := range ids {
			if id == h.cfg.NodeID || h.isDown(id) {
				continue
			}
			out = append(out, GroupMessage{Group: g.id, Quiesce: true, Msg: raftpb.Message{
				Type: raftpb.MsgHeartbeat, From: h.cfg.NodeID, To: id, Term: st.Term, Commit: st.Commit, Index: last,
			}})
		}
	}
	h.quiesce(g)
	return out
}

// quiesceFollower handles a leader's quiesce message m: a follower that
// agrees with it steps it as a heartbeat and stops ticking. Called by the
// worker handling g, in mailbox order.
func (h *Host) quiesceFollower(g *group, m raftpb.Message) {
	if h.cfg.DisableQuiescence {
		return
	}
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateFollower || st.Term != m.Term || st.Lead != m.From || m.Commit != m.Index {
		return
	}
	if last, err := g.storage.LastIndex(); err != nil || last != m.Index {
		return
	}
	hb := raftpb.Message{Type: raftpb.MsgHeartbeat, From: m.From, To: h.cfg.NodeID, Term: m.Term, Commit: m.Commit}
	if err := g.rn.Step(hb); err != nil {
		return
	}
	h.quiesce(g)
}

// isDown reports whether peer id was reported down. It takes no lock.
func (h *Host) isDown(id uint64) bool {
	p := h.down.Load()
	return p != nil && slices.Contains(*p, id)
}

// PeerDown reports that broker id stopped answering (the transport's
// liveness timeout). The groups it led forget it and elect at once; the
// groups this broker leads wake (see the top of the file).
func (h *Host) PeerDown(id uint64) { h.setDown(id, true) }

// PeersDown returns the peers reported down (PeerDown) and not up again.
func (h *Host) PeersDown() []uint64 {
	if p := h.down.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// PeerUp reports that broker id answers again: the quiesced groups this
// broker leads wake to catch it up.
func (h *Host) PeerUp(id uint64) { h.setDown(id, false) }

func (h *Host) setDown(id uint64, down bool) {
	h.downMu.Lock()
	var cur []uint64
	if p := h.down.Load(); p != nil {
		cur = *p
	}
	if slices.Contains(cur, id) == down {
		h.downMu.Unlock()
		return
	}
	var next []uint64
	if down {
		next = append(slices.Clone(cur), id)
	} else {
		next = slices.DeleteFunc(slices.Clone(cur), func(x uint64) bool { return x == id })
	}
	h.down.Store(&next)
	h.downMu.Unlock()
	h.mu.RLock()
	var gs []*group
	for _, g := range h.groups {
		lead := g.leadHint.Load()
		if (down && lead == id) || lead == h.cfg.NodeID {
			gs = append(gs, g)
		}
	}
	h.mu.RUnlock()
	for _, g := range gs {
		g.mu.Lock()
		g.recheck = true
		g.mu.Unlock()
	}
	h.sched.enqueueAll(gs)
}

// checkLiveness runs in the worker after a peer's liveness changed: a
// leader wakes (CheckQuorum runs on ticks; a returning peer needs
// appends); a follower whose leader is down forgets it and wakes, and
// the lowest live voter campaigns.
func (h *Host) checkLiveness(g *group) {
	st := g.rn.BasicStatus()
	switch {
	case st.RaftState == raft.StateLeader:
		h.unquiesce(g)
	case st.RaftState == raft.StateFollower && st.Lead != 0 && h.isDown(st.Lead):
		h.unquiesce(g)
		if err := g.rn.ForgetLeader(); err != nil {
			return
		}
		if h.designated(g, st.Lead) {
			// retryCampaign, right after this in step, campaigns.
			g.campaignTry, g.campaignLeft = campaignTries, 0
		}
	}
}

// designated reports whether this replica is the lowest voter of g other
// than the dead leader and the peers reported down.
func (h *Host) designated(g *group, dead uint64) bool {
	if len(g.state.ConfState.VotersOutgoing) > 0 {
		return false // joint: leave it to raft's timeout
	}
	var low uint64
	for _, v := range g.state.ConfState.Voters {
		if v != dead && !h.isDown(v) && (low == 0 || v < low) {
			low = v
		}
	}
	return low == h.cfg.NodeID
}

// retryCampaign campaigns for a designated replica (or a new group's
// preferred one) whose group still has no leader, every campaignEvery
// ticks, campaignTries times.
func (h *Host) retryCampaign(g *group) {
	if g.campaignTry == 0 || g.joining {
		return
	}
	g.campaignLeft -= g.ticked
	if g.campaignLeft > 0 {
		return
	}
	st := g.rn.BasicStatus()
	if st.Lead != 0 || st.RaftState == raft.StateLeader || st.RaftState == raft.StateCandidate {
		g.campaignTry = 0
		return
	}
	g.campaignTry--
	g.campaignLeft = campaignEvery
	_ = g.rn.Campaign()
}

// HostStats counts a host's groups.
type HostStats struct {
	Groups   int // raft groups on the host
	Quiesced int // of which quiesced (not ticking)
}

// Stats returns the host's counts.
func (h *Host) Stats() HostStats {
	h.mu.RLock()
	n := len(h.groups)
	h.mu.RUnlock()
	h.tickMu.Lock()
	t := len(h.ticking)
	h.tickMu.Unlock()
	return HostStats{Groups: n, Quiesced: max(0, n-t)}
}
