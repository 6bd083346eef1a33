package coordinator

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup is JoinGroup v0-v9. It returns once the rebalance it joins
// completes, or at once with an error, MEMBER_ID_REQUIRED (v4+, KIP-394),
// or the current generation for an unchanged rejoin. If ctx ends first it
// answers COORDINATOR_NOT_AVAILABLE and the member stops waiting (a member
// that never completed a join is removed). SkipAssignment (v9, KIP-814) is
// never set: a static leader that rejoins a Stable group is told the old
// leader id, as Kafka did before KIP-814, so it does not reassign.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	finish := func(r *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
		r.Version = req.Version
		return r
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	j := &classicJoin{req: req, client: clientFrom(ctx), session: session, rebalance: rebalance}
	resp, wait, write := c.classicJoin(j)
	switch {
	case write != nil:
		return finish(write(ctx))
	case wait == nil:
		return finish(resp)
	}
	return finish(await(c, ctx, wait.ch, func() *kmsg.JoinGroupResponse {
		if !wait.g.classicLive(wait.cg) {
			return joinError(kerr.CoordinatorNotAvailable.Code, "")
		}
		if m := wait.cg.members[wait.memberID]; m != nil && m.join == wait.ch {
			m.join = nil
			if m.isNew {
				c.removeMemberLocked(wait.g, m)
			} else {
				c.maybeCompleteJoinLocked(wait.g)
			}
		}
		return joinError(kerr.CoordinatorNotAvailable.Code, "")
	}))
}

// classicJoin is one JoinGroup request being handled.
type classicJoin struct {
	req                *kmsg.JoinGroupRequest
	client             clientInfo
	session, rebalance time.Duration
}

// joinWait is a JoinGroup waiting for its rebalance.
type joinWait struct {
	g        *group
	cg       *classicGroup // g's classic state when the wait began
	memberID string
	ch       chan *kmsg.JoinGroupResponse
}

// classicJoin is classicJoinLocked with c.mu held.
func (c *Coordinator) classicJoin(j *classicJoin) (*kmsg.JoinGroupResponse, *joinWait, func(context.Context) *kmsg.JoinGroupResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classicJoinLocked(j)
}

// classicJoinLocked handles a JoinGroup under c.mu: it returns a response,
// a registered wait, or a write to make (a static member replaced in a
// Stable group) that returns the response.
func (c *Coordinator) classicJoinLocked(j *classicJoin) (*kmsg.JoinGroupResponse, *joinWait, func(context.Context) *kmsg.JoinGroupResponse) {
	req := j.req
	fail := func(code int16) (*kmsg.JoinGroupResponse, *joinWait, func(context.Context) *kmsg.JoinGroupResponse) {
		return joinError(code, req.MemberID), nil, nil
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if _, code := c.shardLocked(req.Group); code != 0 {
		return fail(code)
	}
	if j.session < c.cfg.MinSessionTimeout || j.session > c.cfg.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	g, _ := c.groupLocked(req.Group, req.MemberID == "" && req.ProtocolType != "" && len(req.Protocols) > 0)
	if g == nil {
		if req.MemberID == "" {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		return fail(kerr.UnknownMemberID.Code)
	}
	if g.consumer != nil {
		if !g.consumer.isEmpty() {
			// Joining a KIP-848 group with members using the classic
			// protocol (KIP-848's online migration) is not supported.
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		// An empty consumer group becomes a classic group, as Kafka's
		// default group.consumer.migration.policy does; the classic
		// group's first GroupMetadata record supersedes it on replay.
		c.convertToClassicLocked(g)
	}
	cg := classicLocked(g)
	switch {
	case cg.state == classicDead:
		return fail(kerr.CoordinatorNotAvailable.Code)
	case !cg.supports(req.ProtocolType, req.Protocols):
		return fail(kerr.InconsistentGroupProtocol.Code)
	case !cg.accepts(req.MemberID, c.cfg.GroupMaxSize):
		return joinError(kerr.GroupMaxSizeReached.Code, ""), nil, nil
	}

	if req.MemberID == "" {
		prefix := j.client.id
		if req.InstanceID != nil {
			prefix = *req.InstanceID
		}
		id := newMemberID(prefix)
		if req.InstanceID != nil {
			if old, ok := cg.static[*req.InstanceID]; ok {
				return c.replaceStaticLocked(g, j, old, id)
			}
		} else if req.Version >= 4 {
			// KIP-394: the member must come back with this id within its
			// session timeout; the rebalance waits for it meanwhile.
			cg.pending[id] = c.cfg.Clock.AfterFunc(j.session, func() { c.expirePending(g, cg, id) })
			return joinError(kerr.MemberIDRequired.Code, id), nil, nil
		}
		return nil, c.addMemberLocked(g, j, id), nil
	}
	if stop, ok := cg.pending[req.MemberID]; ok {
		stop()
		delete(cg.pending, req.MemberID)
		return nil, c.addMemberLocked(g, j, req.MemberID), nil
	}
	if code := cg.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return fail(code)
	}
	m := cg.members[req.MemberID]
	c.scheduleSessionLocked(g, m, m.sessionTimeout)
	switch cg.state {
	case classicPreparingRebalance:
		return nil, c.updateMemberLocked(g, m, j), nil
	case classicCompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost its response: answer again.
			return c.joinResponseLocked(g, m, cg.leader), nil, nil
		}
	case classicStable:
		if m.id != cg.leader && m.matches(req.Protocols) {
			return c.joinResponseLocked(g, m, cg.leader), nil, nil
		}
	default:
		return fail(kerr.UnknownMemberID.Code)
	}
	// A leader's rejoin or changed metadata starts a rebalance.
	return nil, c.updateMemberLocked(g, m, j), nil
}

// supports is Kafka's ClassicGroup.supportsProtocols: an Empty group takes
// any protocol type with at least one protocol; otherwise the type must
// match and one of the protocols must be supported by every member.
func (cg *classicGroup) supports(ptype string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if cg.state == classicEmpty {
		return ptype != "" && len(protocols) > 0
	}
	if ptype != cg.ptype {
		return false
	}
	for _, p := range protocols {
		if cg.supportedByAll(p.Name) {
			return true
		}
	}
	return false
}

func (cg *classicGroup) supportedByAll(protocol string) bool {
	for _, m := range cg.members {
		if !slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol }) {
			return false
		}
	}
	return true
}

// accepts is Kafka's acceptJoiningMember: whether group.max.size leaves
// room for memberID.
func (cg *classicGroup) accepts(memberID string, maxSize int32) bool {
	m := cg.members[memberID]
	switch cg.state {
	case classicPreparingRebalance:
		return m != nil && m.join != nil || cg.numAwaitingJoin() < int(maxSize)
	case classicCompletingRebalance, classicStable:
		return m != nil || len(cg.members) < int(maxSize)
	}
	return true
}

func (cg *classicGroup) numAwaitingJoin() int {
	n := 0
	for _, m := range cg.members {
		if m.join != nil {
			n++
		}
	}
	return n
}

// addMemberLocked adds a member that joins for the first time and starts
// or joins a rebalance.
func (c *Coordinator) addMemberLocked(g *group, j *classicJoin, id string) *joinWait {
	cg := g.classic
	cg.seq++
	m := &classicMember{
		id: id, instanceID: j.req.InstanceID, clientID: j.client.id, host: j.client.host,
		protocols: j.req.Protocols, sessionTimeout: j.session, rebalanceTimeout: j.rebalance,
		isNew: true, seq: cg.seq,
		join: make(chan *kmsg.JoinGroupResponse, 1),
	}
	if cg.state == classicPreparingRebalance && cg.initialDelay {
		cg.newMemberAdded = true
	}
	if len(cg.members) == 0 {
		cg.ptype = j.req.ProtocolType
	}
	cg.members[id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = id
	}
	if cg.leader == "" {
		cg.leader = id
	}
	c.scheduleSessionLocked(g, m, newMemberJoinTimeout)
	w := &joinWait{g: g, cg: cg, memberID: id, ch: m.join}
	c.maybeRebalanceLocked(g)
	return w
}

// updateMemberLocked takes a known member's rejoin: new protocols and
// timeouts, and a wait for the rebalance it starts or joins.
func (c *Coordinator) updateMemberLocked(g *group, m *classicMember, j *classicJoin) *joinWait {
	m.protocols, m.sessionTimeout, m.rebalanceTimeout = j.req.Protocols, j.session, j.rebalance
	// A rejoin supersedes a JoinGroup still waiting (its client gave up
	// on it).
	m.answerJoin(joinError(kerr.RebalanceInProgress.Code, m.id))
	m.join = make(chan *kmsg.JoinGroupResponse, 1)
	w := &joinWait{g: g, cg: g.classic, memberID: m.id, ch: m.join}
	c.maybeRebalanceLocked(g)
	return w
}

// maybeRebalanceLocked starts a rebalance, or lets the running one
// complete if everyone has joined.
func (c *Coordinator) maybeRebalanceLocked(g *group) {
	switch g.classic.state {
	case classicEmpty, classicStable, classicCompletingRebalance:
		c.prepareRebalanceLocked(g)
	case classicPreparingRebalance:
		c.maybeCompleteJoinLocked(g)
	}
}

// replaceStaticLocked is Kafka's updateStaticMemberThenRebalance: the static
// member holding j's instance id gets the new member id id; the old id is
// fenced. In a Stable group whose selected protocol would not change, the
// member gets the current generation back without a rebalance once the new
// membership is written.
func (c *Coordinator) replaceStaticLocked(g *group, j *classicJoin, oldID, id string) (*kmsg.JoinGroupResponse, *joinWait, func(context.Context) *kmsg.JoinGroupResponse) {
	cg := g.classic
	old := cg.members[oldID]
	oldLeader := cg.leader
	c.swapMemberIDLocked(g, old, id)
	saved := *old
	old.protocols, old.sessionTimeout, old.rebalanceTimeout = j.req.Protocols, j.session, j.rebalance
	c.scheduleSessionLocked(g, old, old.sessionTimeout)
	m := old
	switch cg.state {
	case classicStable:
		if cg.selectProtocol() != cg.protocol {
			return nil, c.updateMemberLocked(g, m, j), nil
		}
		generation := cg.generation
		write := func(ctx context.Context) *kmsg.JoinGroupResponse {
			// The group may have been removed or converted to a
			// KIP-848 group since c.mu was released: check and apply
			// run under it and look at cg only while it is live.
			var resp *kmsg.JoinGroupResponse
			code := c.write(ctx, g.shard, func() ([]Record, int16) {
				if !g.classicLive(cg) || cg.members[id] != m {
					return nil, kerr.UnknownMemberID.Code
				}
				return []Record{c.groupRecordLocked(g, nil)}, 0
			}, func() {
				if !g.classicLive(cg) {
					resp = joinError(kerr.UnknownMemberID.Code, "")
					return
				}
				resp = c.joinResponseLocked(g, m, oldLeader)
				resp.Generation = generation
			})
			if code == 0 {
				return resp
			}
			c.undoReplace(g, cg, m, id, oldID, saved)
			return joinError(code, "")
		}
		return nil, nil, write
	case classicCompletingRebalance:
		// The leader may be assigning to the old id: rebalance again.
		return nil, c.updateMemberLocked(g, m, j), nil
	default: // PreparingRebalance
		return nil, c.updateMemberLocked(g, m, j), nil
	}
}

// undoReplace reverts a static member replacement whose write failed, as
// Kafka does: m, known as id since the replacement, gets back oldID and
// its former protocols and timeouts.
func (c *Coordinator) undoReplace(g *group, cg *classicGroup, m *classicMember, id, oldID string, saved classicMember) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.classicLive(cg) && cg.members[id] == m {
		c.swapMemberIDLocked(g, m, oldID)
		m.protocols, m.sessionTimeout, m.rebalanceTimeout = saved.protocols, saved.sessionTimeout, saved.rebalanceTimeout
	}
}

// swapMemberIDLocked renames member m to id, answering whatever the old id
// waits on with FENCED_INSTANCE_ID (Kafka's replaceStaticMember).
func (c *Coordinator) swapMemberIDLocked(g *group, m *classicMember, id string) {
	cg := g.classic
	m.answerJoin(joinError(kerr.FencedInstanceID.Code, m.id))
	m.answerSync(syncError(kerr.FencedInstanceID.Code))
	delete(cg.members, m.id)
	if cg.leader == m.id {
		cg.leader = id
	}
	if cg.pendingSync[m.id] {
		delete(cg.pendingSync, m.id)
		cg.pendingSync[id] = true
	}
	m.id = id
	cg.members[id] = m
	cg.static[*m.instanceID] = id
}

// joinResponseLocked is m's JoinGroup response for the current generation,
// naming leader as the leader; the leader gets every member's metadata.
func (c *Coordinator) joinResponseLocked(g *group, m *classicMember, leader string) *kmsg.JoinGroupResponse {
	cg := g.classic
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation, r.LeaderID, r.MemberID = cg.generation, leader, m.id
	ptype, proto := cg.ptype, cg.protocol
	r.ProtocolType, r.Protocol = &ptype, &proto
	if m.id == leader {
		for _, o := range cg.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = o.id, o.instanceID, o.metadata(cg.protocol)
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

// prepareRebalanceLocked moves g to PreparingRebalance: members waiting for
// a sync are told REBALANCE_IN_PROGRESS, and the join phase ends when every
// member has rejoined or the rebalance timeout passes. Out of Empty, the
// first rebalance waits group.initial.rebalance.delay.ms (extended while
// members keep arriving, up to the rebalance timeout).
func (c *Coordinator) prepareRebalanceLocked(g *group) {
	cg := g.classic
	if cg.state == classicCompletingRebalance {
		for _, m := range cg.members {
			m.assignment = nil
			m.answerSync(syncError(kerr.RebalanceInProgress.Code))
		}
	}
	cg.stopTimers()
	cg.pendingSync = map[string]bool{}
	initial := cg.state == classicEmpty
	c.transitionLocked(g, classicPreparingRebalance)
	if !initial {
		if cg.allJoined() {
			c.completeJoinLocked(g)
			return
		}
		c.scheduleJoinLocked(g, cg.rebalanceTimeout(), func() { c.completeJoinLocked(g) })
		return
	}
	delay := c.cfg.InitialRebalanceDelay
	if delay <= 0 {
		c.completeJoinLocked(g)
		return
	}
	cg.initialDelay, cg.newMemberAdded = true, false
	c.scheduleInitialLocked(g, delay, max(cg.rebalanceTimeout()-delay, 0))
}

// scheduleInitialLocked is Kafka's InitialDelayedJoin: after delay, if a
// member was added meanwhile and time remains, wait again.
func (c *Coordinator) scheduleInitialLocked(g *group, delay, remaining time.Duration) {
	c.scheduleJoinLocked(g, delay, func() {
		cg := g.classic
		if cg.newMemberAdded && remaining > 0 {
			cg.newMemberAdded = false
			next := min(c.cfg.InitialRebalanceDelay, remaining)
			c.scheduleInitialLocked(g, next, max(remaining-c.cfg.InitialRebalanceDelay, 0))
			return
		}
		c.completeJoinLocked(g)
	})
}

// scheduleJoinLocked arms the join timer; f runs under c.mu unless the
// timer was replaced or the group shut down meanwhile.
func (c *Coordinator) scheduleJoinLocked(g *group, d time.Duration, f func()) {
	cg := g.classic
	if cg.stopJoinTimer != nil {
		cg.stopJoinTimer()
	}
	seq := cg.timerSeq
	cg.stopJoinTimer = c.cfg.Clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.classicLive(cg) && cg.timerSeq == seq {
			cg.stopJoinTimer = nil
			f()
		}
	})
}

// allJoined is Kafka's hasAllMembersJoined: every member waits for the
// join and no KIP-394 member id is outstanding.
func (cg *classicGroup) allJoined() bool {
	return cg.numAwaitingJoin() == len(cg.members) && len(cg.pending) == 0
}

// maybeCompleteJoinLocked completes the join phase once everyone joined
// (not during the initial delay, which always runs its course).
func (c *Coordinator) maybeCompleteJoinLocked(g *group) {
	cg := g.classic
	if cg.state == classicPreparingRebalance && !cg.initialDelay && cg.allJoined() {
		c.completeJoinLocked(g)
	}
}

// completeJoinLocked ends the join phase (Kafka's completeClassicGroupJoin):
// dynamic members that did not rejoin are removed, the generation advances,
// and every member that rejoined gets its JoinGroup response (the leader
// with everyone's metadata); a group left without members becomes Empty and
// its new generation is written. Static members that did not rejoin stay
// (the leader assigns to them too) until their session times out or they
// do not sync in time. A leader that did not rejoin hands over to the
// longest-standing member that did; if only static members that did not
// rejoin are left, the join phase waits another rebalance timeout.
func (c *Coordinator) completeJoinLocked(g *group) {
	cg := g.classic
	cg.stopTimers()
	cg.initialDelay, cg.newMemberAdded = false, false
	for _, m := range cg.sortedMembers() {
		if m.join == nil && m.instanceID == nil {
			c.dropMemberLocked(g, m)
		}
	}
	if !cg.electJoinedLeader() {
		c.scheduleJoinLocked(g, cg.rebalanceTimeout(), func() { c.completeJoinLocked(g) })
		return
	}
	cg.generation++
	if len(cg.members) == 0 {
		cg.protocol, cg.leader = "", ""
		c.transitionLocked(g, classicEmpty)
		generation := cg.generation
		cg.writes.Add(1)
		go func() {
			defer cg.writes.Done()
			code := c.write(context.Background(), g.shard, func() ([]Record, int16) {
				if !g.classicLive(cg) || cg.generation != generation || cg.state != classicEmpty {
					return nil, 0 // a later generation writes itself
				}
				return []Record{c.groupRecordLocked(g, nil)}, 0
			}, nil)
			if code != 0 {
				c.cfg.Logger.Warn("coordinator: writing an empty group failed", "group", g.id, "error", kerr.ErrorForCode(code))
			}
		}()
		return
	}
	cg.protocol = cg.selectProtocol()
	c.transitionLocked(g, classicCompletingRebalance)
	for _, m := range cg.sortedMembers() {
		cg.pendingSync[m.id] = true
		m.isNew = false
		m.answerJoin(c.joinResponseLocked(g, m, cg.leader))
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
	}
	// Members that do not sync within the rebalance timeout are removed.
	seq := cg.timerSeq
	cg.stopSyncTimer = c.cfg.Clock.AfterFunc(cg.rebalanceTimeout(), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !g.classicLive(cg) || cg.timerSeq != seq {
			return
		}
		cg.stopSyncTimer = nil
		// Every member still pending goes, then the group rebalances
		// (Kafka's expirePendingSync); removing them one by one would
		// stop at the first, as the rebalance clears pendingSync.
		var late []*classicMember
		for _, m := range cg.sortedMembers() {
			if cg.pendingSync[m.id] {
				late = append(late, m)
			}
		}
		if len(late) == 0 {
			return
		}
		for _, m := range late {
			c.dropMemberLocked(g, m)
		}
		c.prepareRebalanceLocked(g)
	})
}

// electJoinedLeader is Kafka's maybeElectNewJoinedLeader: a leader that did
// not rejoin hands over to the longest-standing member that did. It
// reports false when members are left but none rejoined.
func (cg *classicGroup) electJoinedLeader() bool {
	if len(cg.members) == 0 {
		return true
	}
	if l := cg.members[cg.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range cg.sortedMembers() {
		if m.join != nil {
			cg.leader = m.id
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for the one it prefers most; the most votes
// win (ties go to the name first in order).
func (cg *classicGroup) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range cg.members {
		for _, p := range m.protocols {
			if cg.supportedByAll(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range sortedKeys(votes) {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// convertToClassicLocked turns g, an empty KIP-848 group, into a classic
// one: its consumer state goes, and its consumer records are tombstoned in
// the background so compaction can remove them (the classic record, key
// version 2, is left alone: the classic group writes its own). The write
// is skipped if the id names a consumer group again by the time it runs.
func (c *Coordinator) convertToClassicLocked(g *group) {
	var recs []Record
	for _, r := range c.consumerTombstonesLocked(g) {
		if keyVersion(r.Key) >= firstConsumerKeyV {
			recs = append(recs, r)
		}
	}
	g.consumer.shutdown()
	g.consumer = nil
	s, id := g.shard, g.id
	c.writeAsync(s, func() ([]Record, int16) {
		if cur := s.groups[id]; cur != nil && cur.consumer != nil {
			return nil, 0
		}
		return recs, 0
	}, nil)
}
