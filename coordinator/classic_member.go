package coordinator

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicMemberLocked finds the classic group and member a SyncGroup or
// Heartbeat names, in Kafka's order of checks: coordinator errors, unknown
// group or member (UNKNOWN_MEMBER_ID), a fenced static member, the
// generation.
func (c *Coordinator) classicMemberLocked(groupID string, generation int32, memberID string, instanceID *string) (*group, *classicMember, int16) {
	g, code := c.groupLocked(groupID, false)
	switch {
	case code != 0:
		return nil, nil, code
	case g == nil || g.consumer != nil:
		return nil, nil, kerr.UnknownMemberID.Code
	}
	cg := classicLocked(g)
	if cg.state == classicDead {
		return nil, nil, kerr.CoordinatorNotAvailable.Code
	}
	if code := cg.validateMember(memberID, instanceID); code != 0 {
		return nil, nil, code
	}
	if generation != cg.generation {
		return nil, nil, kerr.IllegalGeneration.Code
	}
	return g, cg.members[memberID], 0
}

// SyncGroup is SyncGroup v0-v5. The leader's assignment is written as the
// group's GroupMetadataValue and then given to every member (those the
// leader left out get an empty one); followers wait for it. If the group
// starts another rebalance first, waiting members get
// REBALANCE_IN_PROGRESS; if the write fails, they get its error and the
// group rebalances.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	finish := func(r *kmsg.SyncGroupResponse) *kmsg.SyncGroupResponse {
		r.Version = req.Version
		return r
	}
	resp, leader, wait := c.syncGroup(req)
	switch {
	case leader != nil:
		return finish(c.storeAssignment(ctx, leader.g, leader.cg, leader.m, leader.id, leader.generation, req.GroupAssignment))
	case wait == nil:
		return finish(resp)
	}
	return finish(await(c, ctx, wait.ch, func() *kmsg.SyncGroupResponse {
		if wait.m.sync == wait.ch {
			wait.m.sync = nil
		}
		return syncError(kerr.CoordinatorNotAvailable.Code)
	}))
}

// syncLeader is a leader's SyncGroup that stores its assignment.
type syncLeader struct {
	g          *group
	cg         *classicGroup
	m          *classicMember
	id         string // m's id when it sent SyncGroup
	generation int32
}

// syncWait is a follower's SyncGroup waiting for the leader's assignment.
type syncWait struct {
	m  *classicMember
	ch chan *kmsg.SyncGroupResponse
}

// syncGroup handles a SyncGroup under c.mu: it returns a response, the
// leader's assignment to store, or a follower's registered wait.
func (c *Coordinator) syncGroup(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, *syncLeader, *syncWait) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, code := c.classicMemberLocked(req.Group, req.Generation, req.MemberID, req.InstanceID)
	if code != 0 {
		return syncError(code), nil, nil
	}
	cg := g.classic
	if req.ProtocolType != nil && *req.ProtocolType != cg.ptype || req.Protocol != nil && *req.Protocol != cg.protocol {
		return syncError(kerr.InconsistentGroupProtocol.Code), nil, nil
	}
	c.scheduleSessionLocked(g, m, m.sessionTimeout)
	switch cg.state {
	case classicPreparingRebalance:
		return syncError(kerr.RebalanceInProgress.Code), nil, nil
	case classicStable:
		delete(cg.pendingSync, m.id)
		return c.syncResponseLocked(g, m), nil, nil
	}
	// CompletingRebalance: the leader stores its assignment; followers
	// wait for it.
	delete(cg.pendingSync, m.id)
	m.answerSync(syncError(kerr.RebalanceInProgress.Code)) // superseded
	if m.id == cg.leader {
		return nil, &syncLeader{g: g, cg: cg, m: m, id: m.id, generation: cg.generation}, nil
	}
	m.sync = make(chan *kmsg.SyncGroupResponse, 1)
	return nil, nil, &syncWait{m: m, ch: m.sync}
}

// syncResponseLocked is m's SyncGroup response in a Stable group.
func (c *Coordinator) syncResponseLocked(g *group, m *classicMember) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	ptype, proto := g.classic.ptype, g.classic.protocol
	r.ProtocolType, r.Protocol = &ptype, &proto
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// storeAssignment writes the leader's assignment for generation and, once
// it is durable, makes the group Stable, answers every waiting SyncGroup
// and returns the leader's response (the leader is member leader, known as
// id when it sent SyncGroup). A failed write answers the followers with its
// error and rebalances.
func (c *Coordinator) storeAssignment(ctx context.Context, g *group, cg *classicGroup, leader *classicMember, id string, generation int32, given []kmsg.SyncGroupRequestGroupAssignment) *kmsg.SyncGroupResponse {
	assignment := map[string][]byte{}
	// current runs under c.mu: cg is still g's group (not converted or
	// removed meanwhile) and still completing generation.
	current := func() bool {
		return g.classicLive(cg) && cg.state == classicCompletingRebalance && cg.generation == generation
	}
	check := func() ([]Record, int16) {
		if !current() {
			return nil, kerr.RebalanceInProgress.Code
		}
		for _, a := range given {
			if cg.members[a.MemberID] != nil {
				assignment[a.MemberID] = a.MemberAssignment
			}
		}
		for id := range cg.members {
			if len(assignment[id]) == 0 {
				assignment[id] = cg.emptyAssignment()
			}
		}
		return []Record{c.groupRecordLocked(g, assignment)}, 0
	}
	resp := syncError(kerr.RebalanceInProgress.Code)
	apply := func() {
		if !current() {
			return
		}
		for _, m := range cg.members {
			m.assignment = assignment[m.id]
			if m.assignment == nil { // joined during the write: not possible in CompletingRebalance
				m.assignment = cg.emptyAssignment()
			}
		}
		c.transitionLocked(g, classicStable)
		for _, m := range cg.members {
			m.answerSync(c.syncResponseLocked(g, m))
		}
		switch {
		case cg.members[id] == leader:
			resp = c.syncResponseLocked(g, leader)
		case leader.instanceID != nil:
			resp = syncError(kerr.FencedInstanceID.Code)
		default:
			resp = syncError(kerr.UnknownMemberID.Code)
		}
	}
	code := c.write(ctx, g.shard, check, apply)
	if code == 0 || code == kerr.RebalanceInProgress.Code {
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if current() {
		for _, m := range cg.members {
			m.assignment = nil
			m.answerSync(syncError(code))
		}
		c.prepareRebalanceLocked(g)
	}
	return syncError(code)
}

// emptyAssignment is what a member the leader left out gets: zero bytes, as
// Kafka gives, except in "consumer" groups, where it is an encoded empty
// ConsumerMemberAssignment (as franz-go's kfake does: some clients cannot
// decode zero bytes).
func (cg *classicGroup) emptyAssignment() []byte {
	if cg.ptype == "consumer" {
		return new(kmsg.ConsumerMemberAssignment).AppendTo(nil)
	}
	return []byte{}
}

// Heartbeat is Heartbeat v0-v4: each valid heartbeat extends the member's
// session; REBALANCE_IN_PROGRESS tells members to rejoin.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, code := c.classicMemberLocked(req.Group, req.Generation, req.MemberID, req.InstanceID)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	switch g.classic.state {
	case classicEmpty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	case classicPreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	c.scheduleSessionLocked(g, m, m.sessionTimeout)
	return resp
}

// LeaveGroup is LeaveGroup v0-v5: v0-v2 name one member id; v3+ (KIP-345)
// a batch of members by member id and/or group.instance.id, each with its
// own error. Every leave starts a rebalance.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = req.MemberID
		leaving = []kmsg.LeaveGroupRequestMember{lm}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, code := c.groupLocked(req.Group, false)
	switch {
	case code != 0:
	case g == nil || g.consumer != nil:
		code = kerr.UnknownMemberID.Code
	case classicLocked(g).state == classicDead:
		code = kerr.CoordinatorNotAvailable.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	for _, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = c.leaveLocked(g, lm.MemberID, lm.InstanceID)
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	return resp
}

// leaveLocked removes one leaving member, returning its error code.
func (c *Coordinator) leaveLocked(g *group, memberID string, instanceID *string) int16 {
	cg := g.classic
	if stop, ok := cg.pending[memberID]; ok && instanceID == nil {
		stop()
		delete(cg.pending, memberID)
		c.maybeCompleteJoinLocked(g)
		return 0
	}
	if instanceID != nil {
		held, ok := cg.static[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case memberID != "" && memberID != held:
			return kerr.FencedInstanceID.Code
		}
		memberID = held
	}
	m := cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.removeMemberLocked(g, m)
	return 0
}

// removeMemberLocked is Kafka's removeMemberAndUpdateClassicGroup: the
// member goes (a JoinGroup it waits on gets UNKNOWN_MEMBER_ID) and the
// group rebalances, or completes its join phase if the member was the last
// one it waited for.
func (c *Coordinator) removeMemberLocked(g *group, m *classicMember) {
	c.dropMemberLocked(g, m)
	switch g.classic.state {
	case classicStable, classicCompletingRebalance:
		c.prepareRebalanceLocked(g)
	case classicPreparingRebalance:
		c.maybeCompleteJoinLocked(g)
	}
}

// dropMemberLocked removes m from g without rebalancing; a new leader is
// the longest-standing member left.
func (c *Coordinator) dropMemberLocked(g *group, m *classicMember) {
	cg := g.classic
	m.answerJoin(joinError(kerr.UnknownMemberID.Code, ""))
	m.answerSync(syncError(kerr.UnknownMemberID.Code))
	if m.stopSession != nil {
		m.stopSession()
	}
	m.sessionSeq++
	delete(cg.members, m.id)
	delete(cg.pendingSync, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	if cg.leader == m.id {
		cg.leader = ""
		if ms := cg.sortedMembers(); len(ms) > 0 {
			cg.leader = ms[0].id
		}
	}
}

// scheduleSessionLocked (re)starts m's session timer: when it fires, m is
// removed unless it waits for a join or sync (which the rebalance and sync
// timeouts bound).
func (c *Coordinator) scheduleSessionLocked(g *group, m *classicMember, d time.Duration) {
	if m.stopSession != nil {
		m.stopSession()
	}
	m.sessionSeq++
	seq := m.sessionSeq
	cg := g.classic
	m.stopSession = c.cfg.Clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !g.classicLive(cg) || cg.members[m.id] != m || m.sessionSeq != seq {
			return
		}
		if !m.isNew && (m.join != nil || m.sync != nil) {
			c.scheduleSessionLocked(g, m, m.sessionTimeout)
			return
		}
		c.removeMemberLocked(g, m)
	})
}

// expirePending drops a KIP-394 member id of cg, g's classic state when it
// was handed out, that was not used in time.
func (c *Coordinator) expirePending(g *group, cg *classicGroup, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := cg.pending[id]; !ok || !g.classicLive(cg) {
		return
	}
	delete(cg.pending, id)
	c.maybeCompleteJoinLocked(g)
}
