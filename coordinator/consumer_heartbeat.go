package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2
)

// ConsumerGroupHeartbeat is ConsumerGroupHeartbeat v0-v1 (KIP-848): epoch
// 0 joins (or rejoins), -1 leaves, -2 leaves temporarily (static members),
// and any other epoch is a member's regular heartbeat. In v0 the server
// picks the ID of a joining member that has none; v1 clients always send
// one (KIP-1082).
//
// A change of membership, subscriptions or subscribed topics' partition
// counts bumps the group epoch (written as a ConsumerGroupMetadata record),
// and the next heartbeat computes the target assignment for it. Each
// member then moves to the target on its own heartbeats: it first gives up
// partitions the target takes away from it (keeping its epoch until it
// reports them gone), then receives the new partitions that no other member
// still owns, at the target epoch.
//
// Nothing is pushed: a member learns of a revocation, and of partitions
// another member released, only in the response to its own heartbeat. So
// after members join together, the ones whose targets the first member
// still owns have nothing until that member has heartbeated twice (told,
// then acknowledged) and they have heartbeated again, up to about two
// group.consumer.heartbeat.interval.ms (5 s by default, which clients use
// instead of their own), as in Kafka.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	h := &heartbeat{c: c, req: req, resp: resp, memberID: req.MemberID, client: clientFrom(ctx)}
	if code, msg := validateHeartbeat(req); code != 0 {
		return h.answer(code, msg)
	}
	if h.memberID == "" { // v0 join
		h.memberID = newConsumerMemberID()
	}
	s, code := c.lookupShard(req.Group)
	if code != 0 {
		return h.answer(code, "")
	}
	h.s = s
	if code := c.write(ctx, s, h.check, h.apply); code != 0 {
		msg := ""
		if code == h.code {
			msg = h.msg
		}
		return h.answer(code, msg)
	}
	return resp
}

// validateHeartbeat checks the request fields as Kafka does before looking
// at the group (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR).
func validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	invalid := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return invalid("MemberId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == epochLeave:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	case e == epochJoin:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case e == epochStaticLeave:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	default:
		return invalid("MemberEpoch is invalid.")
	}
	if a := req.ServerAssignor; a != nil && !knownAssignor(*a) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s, %s.", *a, assignorRange, assignorUniform)
	}
	return 0, ""
}

// newConsumerMemberID is a random member ID in the form of Kafka's
// Uuid.toString (22 characters of URL-safe base64).
func newConsumerMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// heartbeat is one ConsumerGroupHeartbeat going through Coordinator.write:
// check validates it against the group without changing anything and
// decides whether the group epoch moves (the record to write); apply then
// changes the group. write holds the shard's writeMu from check to apply,
// so the group is as check saw it.
type heartbeat struct {
	c        *Coordinator
	s        *shard
	req      *kmsg.ConsumerGroupHeartbeatRequest
	resp     *kmsg.ConsumerGroupHeartbeatResponse
	memberID string
	client   clientInfo // from WithClient

	// Set by check.
	code     int16
	msg      string
	cg       *consumerGroup  // the group, or a new one
	next     *consumerMember // the member's new subscription (joins, heartbeats)
	replaced *consumerMember // a static member whose instance ID the member takes over
	bump     bool            // the group epoch moves
	metaKey  string
	recs     []Record // the records check returned
	// view is the group as apply leaves it (epoch, metaKey, target) and
	// member the member after this heartbeat, both computed by check so
	// the records written are what apply installs; before* are the
	// member's assignment and state before reconciling.
	view                  consumerGroup
	member                *consumerMember
	before, beforePending partitionSet
	beforeState           memberState
}

func (h *heartbeat) answer(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	h.resp.ErrorCode = code
	if msg != "" {
		h.resp.ErrorMessage = &msg
	}
	return h.resp
}

func (h *heartbeat) fail(code int16, format string, args ...any) ([]Record, int16) {
	h.code, h.msg = code, fmt.Sprintf(format, args...)
	return nil, code
}

func (h *heartbeat) check() ([]Record, int16) {
	h.code, h.msg, h.cg, h.next, h.replaced, h.bump, h.member = 0, "", nil, nil, nil, false, nil
	recs, code := h.checkLocked()
	h.recs = recs
	return recs, code
}

func (h *heartbeat) checkLocked() ([]Record, int16) {
	c, req := h.c, h.req
	g := h.s.groups[req.Group]
	switch {
	case g != nil && g.consumer != nil:
		h.cg = g.consumer
	case g != nil && g.classic != nil && !g.classic.isEmpty():
		return h.fail(kerr.GroupIDNotFound.Code, "Group %s is not a consumer group", req.Group)
	case req.MemberEpoch != epochJoin:
		return h.fail(kerr.GroupIDNotFound.Code, "Consumer group %s not found.", req.Group)
	default: // a new group, or an empty classic one to convert
		h.cg = newConsumerGroup()
	}
	cg := h.cg
	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		m := cg.members[h.memberID]
		if req.InstanceID != nil {
			owner, ok := cg.static[*req.InstanceID]
			switch {
			case !ok:
				return h.fail(kerr.UnknownMemberID.Code, "Instance id %s is unknown.", *req.InstanceID)
			case owner != h.memberID:
				return h.fail(kerr.FencedInstanceID.Code, "Static member %s with instance id %s was fenced by member %s.", h.memberID, *req.InstanceID, owner)
			}
		}
		if m == nil {
			return h.fail(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", h.memberID, req.Group)
		}
		if req.MemberEpoch == epochStaticLeave && m.instanceID != nil {
			// It keeps its partitions, at epoch -2 (see apply).
			away := *m
			away.epoch, away.prevEpoch, away.pendingRevocation = epochStaticLeave, m.epoch, partitionSet{}
			return []Record{consumerCurrentRecord(req.Group, &away)}, 0
		}
		h.bump = true
		return append(consumerMemberTombstones(req.Group, m.id), consumerMetadataRecord(req.Group, cg.epoch+1)), 0
	}

	m := cg.members[h.memberID]
	if m == nil && len(cg.members) >= int(c.cfg.ConsumerMaxSize) {
		return h.fail(kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity of %d members.", c.cfg.ConsumerMaxSize)
	}
	if req.MemberEpoch == epochJoin {
		if iid := req.InstanceID; iid != nil {
			if owner, ok := cg.static[*iid]; ok && owner != h.memberID {
				if om := cg.members[owner]; om != nil && om.epoch != epochStaticLeave {
					return h.fail(kerr.UnreleasedInstanceID.Code, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", h.memberID, *iid, owner)
				} else if om != nil {
					h.replaced = om
				}
			}
		}
	} else {
		if m == nil {
			if iid := req.InstanceID; iid != nil {
				if owner, ok := cg.static[*iid]; ok && owner != h.memberID {
					return h.fail(kerr.FencedInstanceID.Code, "Static member %s with instance id %s was fenced by member %s.", h.memberID, *iid, owner)
				}
			}
			return h.fail(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", h.memberID, req.Group)
		}
		if code, msg := checkMemberEpoch(m, req); code != 0 {
			return h.fail(code, "%s", msg)
		}
	}

	// The member's subscription after this request.
	base := m
	if base == nil {
		base = h.replaced
	}
	next := &consumerMember{id: h.memberID, rebalanceTimeout: c.cfg.ConsumerSessionTimeout}
	if base != nil {
		next.topics, next.regex, next.re, next.assignor = base.topics, base.regex, base.re, base.assignor
		next.rebalanceTimeout, next.rackID, next.instanceID = base.rebalanceTimeout, base.rackID, base.instanceID
	}
	next.clientID, next.clientHost = h.client.id, h.client.host
	if req.SubscribedTopicNames != nil {
		next.topics = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	if r := req.SubscribedTopicRegex; r != nil {
		next.regex, next.re = nil, nil
		if *r != "" {
			re, err := compileSubscriptionRegex(*r)
			if err != nil {
				return h.fail(kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *r, err)
			}
			rs := *r
			next.regex, next.re = &rs, re
		}
	}
	if req.ServerAssignor != nil {
		next.assignor = *req.ServerAssignor
	}
	if req.RackID != nil {
		next.rackID = req.RackID
	}
	if req.InstanceID != nil {
		next.instanceID = req.InstanceID
	}
	if req.RebalanceTimeoutMillis > 0 {
		next.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	h.next = next

	h.metaKey = c.subscriptionMetaKeyLocked(cg, next)
	h.bump = base == nil || cg.epoch == 0 || h.metaKey != cg.metaKey ||
		!slices.Equal(base.topics, next.topics) || !sameRegex(base.regex, next.regex) || base.assignor != next.assignor
	return h.plan(m), 0
}

// plan computes what apply will do to the group and member m (nil for a
// joining member) on a view of the group, without changing it, and returns
// the records of the change: tombstones of a replaced static member, the
// member's metadata if it changed, the group epoch if it moves, the target
// assignment where it changed, and the member's current assignment if it
// changed.
func (h *heartbeat) plan(m *consumerMember) []Record {
	cg, next, group, id := h.cg, h.next, h.req.Group, h.memberID
	view := *cg
	view.members = maps.Clone(cg.members)
	view.target = maps.Clone(cg.target)
	var recs []Record
	if old := h.replaced; old != nil {
		// The new member takes over the away static member's
		// partitions and target, at epoch 0 (it reconciles to the
		// target epoch below). Its target record moves with it.
		delete(view.members, old.id)
		if t, ok := view.target[old.id]; ok {
			view.target[id] = t
		}
		delete(view.target, old.id)
		recs = append(recs,
			Record{Key: consumerKey(keyConsumerCurrentAssignment, group, old.id)},
			Record{Key: consumerKey(keyConsumerMember, group, old.id)})
	}
	nm := &consumerMember{}
	switch {
	case m != nil:
		*nm = *m
		nm.stopSession, nm.stopRebalance = nil, nil
		nm.topics, nm.regex, nm.re, nm.assignor = next.topics, next.regex, next.re, next.assignor
		nm.rebalanceTimeout, nm.rackID, nm.instanceID = next.rebalanceTimeout, next.rackID, next.instanceID
		nm.clientID, nm.clientHost = next.clientID, next.clientHost
	case h.replaced != nil:
		*nm = *next
		old := h.replaced
		nm.epoch, nm.prevEpoch, nm.state = 0, 0, old.state
		nm.assigned, nm.pendingRevocation = old.assigned, old.pendingRevocation
	default:
		*nm = *next
	}
	nm.assigned, nm.pendingRevocation = nm.assigned.clone(), nm.pendingRevocation.clone()
	view.members[id] = nm
	if m == nil || !sameMemberMetadata(m, nm) {
		recs = append(recs, consumerMemberRecord(group, nm))
	}
	if h.bump {
		view.epoch++
		view.metaKey = h.metaKey
		recs = append(recs, consumerMetadataRecord(group, view.epoch))
	}
	if view.epoch > view.targetEpoch {
		h.c.computeTargetLocked(&view)
	}
	recs = append(recs, consumerTargetRecords(group, cg.target, view.target)...)
	if view.targetEpoch != cg.targetEpoch {
		recs = append(recs, consumerTargetMetaRecord(group, view.targetEpoch))
	}
	h.before, h.beforeState, h.beforePending = nm.assigned.clone(), nm.state, nm.pendingRevocation.clone()
	if nm.epoch == epochStaticLeave { // back from a temporary leave, same member ID
		nm.epoch, nm.prevEpoch = 0, 0
	}
	view.reconcile(nm, ownedAssignment(h.req.Topics))
	if m == nil || !sameCurrentAssignment(m, nm) {
		recs = append(recs, consumerCurrentRecord(group, nm))
	}
	h.view, h.member = view, nm
	return recs
}

// checkMemberEpoch fences a member whose heartbeat carries an epoch other
// than its own, unless it is the previous one and the member owns no
// partition it should not (it missed the response that moved it).
func checkMemberEpoch(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	switch e := req.MemberEpoch; {
	case e > m.epoch:
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", e, m.epoch)
	case e < m.epoch:
		if e == m.prevEpoch && req.Topics != nil && ownedSubset(req.Topics, m.assigned) {
			return 0, ""
		}
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", e, m.epoch)
	}
	return 0, ""
}

func sameRegex(a, b *string) bool { return sameOptional(a, b) }

// ownedSubset reports whether every partition of owned is in a.
func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a partitionSet) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(t.TopicID, p) {
				return false
			}
		}
	}
	return true
}

// ownedAssignment is the request's owned partitions, nil if not sent.
func ownedAssignment(owned []kmsg.ConsumerGroupHeartbeatRequestTopic) partitionSet {
	if owned == nil {
		return nil
	}
	a := partitionSet{}
	for _, t := range owned {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a
}

// subscriptionMetaKeyLocked describes the topics cg's members (with next
// replacing its member) subscribe to: name, ID and partition count each.
func (c *Coordinator) subscriptionMetaKeyLocked(cg *consumerGroup, next *consumerMember) string {
	var b []byte
	for _, name := range c.subscribedTopicsLocked(cg, next) {
		info, _ := c.cfg.Topics.ByName(name)
		b = fmt.Appendf(b, "%s/%x/%d;", info.Name, info.ID, info.Partitions)
	}
	return string(b)
}

func (h *heartbeat) apply() {
	c, req, resp := h.c, h.req, h.resp
	now := c.cfg.Clock.Now()
	g := h.s.groups[req.Group]
	if g == nil {
		g = newGroup(h.s, req.Group, now)
	}
	if g.consumer == nil {
		if g.classic != nil && !g.classic.isEmpty() {
			// A classic member joined while the epoch record was
			// written (JoinGroup does not take the shard's writeMu):
			// the group stays classic, and a tombstone undoes the
			// record for replays.
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("Group %s is not a consumer group", req.Group)
			resp.ErrorMessage = &msg
			if len(h.recs) > 0 {
				var undo []Record
				for _, r := range h.recs {
					undo = append(undo, Record{Key: r.Key})
				}
				c.writeAsync(h.s, func() ([]Record, int16) {
					if g := h.s.groups[req.Group]; g != nil && g.consumer != nil {
						return nil, 0
					}
					return undo, 0
				}, nil)
			}
			return
		}
		if g.classic != nil {
			g.classic.shutdown()
			g.classic = nil
		}
		g.consumer = h.cg
	}
	cg := g.consumer
	id := h.memberID
	resp.MemberID = &id

	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		m := cg.members[id]
		resp.MemberEpoch = req.MemberEpoch
		if !h.bump { // a static member leaves for a while: it keeps its partitions
			m.epoch, m.prevEpoch = epochStaticLeave, m.epoch
			m.pendingRevocation = partitionSet{}
			if m.stopRebalance != nil {
				m.stopRebalance()
				m.stopRebalance = nil
			}
			m.rebalanceSeq++
			return
		}
		c.removeConsumerMemberLocked(g, m)
		cg.epoch++
		cg.metaKey = c.subscriptionMetaKeyLocked(cg, nil)
		return
	}

	if old := h.replaced; old != nil {
		c.removeConsumerMemberLocked(g, old)
	}
	nm, view := h.member, &h.view
	m := cg.members[id]
	if m == nil {
		m = nm
		cg.members[id] = m
		g.emptySince = time.Time{}
	} else {
		m.topics, m.regex, m.re, m.assignor = nm.topics, nm.regex, nm.re, nm.assignor
		m.rebalanceTimeout, m.rackID, m.instanceID = nm.rebalanceTimeout, nm.rackID, nm.instanceID
		m.clientID, m.clientHost = nm.clientID, nm.clientHost
		m.epoch, m.prevEpoch, m.state = nm.epoch, nm.prevEpoch, nm.state
		m.assigned, m.pendingRevocation = nm.assigned, nm.pendingRevocation
	}
	if m.instanceID != nil {
		cg.static[*m.instanceID] = id
	}
	cg.epoch, cg.metaKey = view.epoch, view.metaKey
	cg.target, cg.targetEpoch, cg.assignor = view.target, view.targetEpoch, view.assignor
	before, beforeState, beforePending := h.before, h.beforeState, h.beforePending

	c.armSessionLocked(g, m)
	switch {
	case m.state != memberUnrevoked:
		if m.stopRebalance != nil {
			m.stopRebalance()
			m.stopRebalance = nil
		}
		m.rebalanceSeq++
	case beforeState != memberUnrevoked || !beforePending.equal(m.pendingRevocation):
		c.armRebalanceLocked(g, m)
	}

	resp.MemberEpoch = m.epoch
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if req.MemberEpoch == epochJoin || full || !before.equal(m.assigned) {
		resp.Assignment = heartbeatAssignment(m.assigned)
	}
}

// heartbeatAssignment is a as a heartbeat response carries it.
func heartbeatAssignment(a partitionSet) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, t := range sortedTopicIDs(a) {
		rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		rt.TopicID, rt.Partitions = t, slices.Clone(a[t])
		out.Topics = append(out.Topics, rt)
	}
	return &out
}

// removeConsumerMemberLocked removes m from g (it left, timed out or was
// fenced), freeing its partitions; the caller moves the group epoch.
func (c *Coordinator) removeConsumerMemberLocked(g *group, m *consumerMember) {
	cg := g.consumer
	m.stopTimers()
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	if len(cg.members) == 0 {
		g.emptySince = c.cfg.Clock.Now()
	}
}

// computeTargetLocked computes cg's target assignment for its epoch with
// the assignor its members prefer.
func (c *Coordinator) computeTargetLocked(cg *consumerGroup) {
	spec := &assignSpec{
		members: sortedKeys(cg.members),
		subs:    map[string][]string{},
		topics:  map[string]TopicInfo{},
		prev:    cg.target,
	}
	for id, m := range cg.members {
		var subs []string
		for _, t := range c.memberTopicsLocked(m) {
			if info, ok := c.cfg.Topics.ByName(t); ok {
				spec.topics[t] = info
				subs = append(subs, t)
			}
		}
		spec.subs[id] = subs
	}
	cg.assignor = cg.preferredAssignor()
	cg.target = assign(cg.assignor, spec)
	cg.targetEpoch = cg.epoch
}

// owners returns, for every partition owned by a member of cg (assigned to
// it, or still to be revoked from it), that member.
func (cg *consumerGroup) owners() map[tpKey]*consumerMember {
	out := map[tpKey]*consumerMember{}
	for _, m := range cg.members {
		m.assigned.each(func(t [16]byte, p int32) { out[tpKey{t, p}] = m })
		m.pendingRevocation.each(func(t [16]byte, p int32) { out[tpKey{t, p}] = m })
	}
	return out
}

// reconcile moves m toward cg's target assignment (Kafka's
// CurrentAssignmentBuilder); owned are the partitions the member reported
// owning, nil if it did not send them.
func (cg *consumerGroup) reconcile(m *consumerMember, owned partitionSet) {
	switch m.state {
	case memberStable:
		if m.epoch != cg.targetEpoch {
			cg.nextAssignment(m, owned, m.epoch)
		}
	case memberUnrevoked:
		// Until the member reports the revoked partitions gone, it
		// keeps its epoch and is told the same assignment. Once they
		// are, a further revocation (the target moved again) happens
		// at the next epoch.
		if owned != nil && !ownsAny(owned, m.pendingRevocation) {
			cg.nextAssignment(m, owned, m.epoch+1)
		}
	case memberUnreleased:
		cg.nextAssignment(m, owned, m.epoch)
	}
}

// nextAssignment computes m's next step toward its target: partitions
// leaving it are revoked first (the member moves to revokeEpoch, at most
// its epoch + 1, and waits there); otherwise it moves to the target epoch
// with the target partitions nobody else owns (unreleased until the others
// give up the rest).
func (cg *consumerGroup) nextAssignment(m *consumerMember, owned partitionSet, revokeEpoch int32) {
	target := cg.target[m.id]
	owners := cg.owners()
	keep, revoke, unreleased := partitionSet{}, partitionSet{}, false
	m.assigned.each(func(t [16]byte, p int32) {
		if target.has(t, p) {
			keep.add(t, p)
		} else {
			revoke.add(t, p)
		}
	})
	if len(revoke) > 0 && (owned == nil || ownsAny(owned, revoke)) {
		m.setEpoch(revokeEpoch)
		m.state, m.assigned, m.pendingRevocation = memberUnrevoked, keep, revoke
		return
	}
	target.each(func(t [16]byte, p int32) {
		if keep.has(t, p) {
			return
		}
		if o := owners[tpKey{t, p}]; o != nil && o != m {
			unreleased = true
			return
		}
		keep.add(t, p)
	})
	m.setEpoch(cg.targetEpoch)
	m.assigned, m.pendingRevocation = keep, partitionSet{}
	m.state = memberStable
	if unreleased {
		m.state = memberUnreleased
	}
}

// setEpoch moves m to epoch, remembering the one it leaves.
func (m *consumerMember) setEpoch(epoch int32) {
	if m.epoch != epoch {
		m.prevEpoch, m.epoch = m.epoch, epoch
	}
}

// ownsAny reports whether owned holds any partition of a.
func ownsAny(owned, a partitionSet) bool {
	found := false
	a.each(func(t [16]byte, p int32) { found = found || owned.has(t, p) })
	return found
}

// armSessionLocked (re)starts m's session timeout: a member that does not
// heartbeat within group.consumer.session.timeout.ms is removed.
func (c *Coordinator) armSessionLocked(g *group, m *consumerMember) {
	if m.stopSession != nil {
		m.stopSession()
	}
	m.sessionSeq++
	seq := m.sessionSeq
	m.stopSession = c.cfg.Clock.AfterFunc(c.cfg.ConsumerSessionTimeout, func() {
		c.expireConsumerMember(g, m, func() bool { return m.sessionSeq == seq }, "session timeout")
	})
}

// armRebalanceLocked starts m's rebalance timeout: a member that does not
// give up its revoked partitions within its rebalance timeout is fenced.
func (c *Coordinator) armRebalanceLocked(g *group, m *consumerMember) {
	if m.stopRebalance != nil {
		m.stopRebalance()
	}
	m.rebalanceSeq++
	seq := m.rebalanceSeq
	m.stopRebalance = c.cfg.Clock.AfterFunc(m.rebalanceTimeout, func() {
		c.expireConsumerMember(g, m, func() bool { return m.rebalanceSeq == seq && m.state == memberUnrevoked }, "rebalance timeout")
	})
}

// expireConsumerMember removes m from g if current (checked under c.mu)
// still holds, bumping the group epoch. It runs from a timer, with no lock
// held.
func (c *Coordinator) expireConsumerMember(g *group, m *consumerMember, current func() bool, why string) {
	s := g.shard
	valid := func() bool {
		return s.groups[g.id] == g && g.consumer != nil && g.consumer.members[m.id] == m && current()
	}
	check := func() ([]Record, int16) {
		if !valid() {
			return nil, 0
		}
		return append(consumerMemberTombstones(g.id, m.id), consumerMetadataRecord(g.id, g.consumer.epoch+1)), 0
	}
	apply := func() {
		if valid() {
			c.cfg.Logger.Info("coordinator: removing consumer group member", "group", g.id, "member", m.id, "reason", why)
			c.removeConsumerMemberLocked(g, m)
			g.consumer.epoch++
			g.consumer.metaKey = c.subscriptionMetaKeyLocked(g.consumer, nil)
		}
	}
	if code := c.write(context.Background(), s, check, apply); code != 0 && code != kerr.NotCoordinator.Code {
		c.cfg.Logger.Warn("coordinator: removing a consumer group member failed", "group", g.id, "member", m.id, "error", kerr.ErrorForCode(code))
	}
}
