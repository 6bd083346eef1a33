package coordinator

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
// following Kafka's ClassicGroup and GroupMetadataManager:
//
//   - classic.go: the group and member state, the hooks the core calls
//     (replay, describe, commit checks) and the GroupMetadataValue record;
//   - classic_rebalance.go: JoinGroup and the rebalance itself (initial
//     delay, join completion, protocol selection, timers);
//   - classic_member.go: SyncGroup, Heartbeat, LeaveGroup and member
//     removal.
//
// Requests that wait (a JoinGroup until the rebalance completes, a
// follower's SyncGroup until the leader's assignment) register a buffered
// channel on their member under Coordinator.mu and wait for it without the
// lock; whoever completes the step answers every registered channel.

// classicState is a classic group's state, as Kafka names them.
type classicState int8

const (
	classicEmpty classicState = iota
	classicPreparingRebalance
	classicCompletingRebalance
	classicStable
	classicDead
)

func (s classicState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[s]
}

// newMemberJoinTimeout is Kafka's group.classic.new.member.join.timeout: a
// member that joined for the first time and never received its JoinGroup
// response is removed after it.
const newMemberJoinTimeout = 5 * time.Minute

// classicGroup is a classic (JoinGroup/SyncGroup) group's membership state.
type classicGroup struct {
	state classicState
	// ptype is the members' protocol type; kept when the group empties,
	// as Kafka does, and replaced by the next first member.
	ptype string
	// protocol is the protocol selected for the current generation, ""
	// while the group is Empty.
	protocol   string
	generation int32
	leader     string
	members    map[string]*classicMember
	// static maps group.instance.id to the member id holding it.
	static map[string]string
	// pending are KIP-394 member ids handed out with MEMBER_ID_REQUIRED
	// and not yet used to join; each has an expiry timer.
	pending map[string]func() bool
	// pendingSync are the members that got this generation's JoinGroup
	// response and have not sent SyncGroup yet.
	pendingSync map[string]bool
	// initialDelay is set while the first rebalance out of Empty waits for
	// group.initial.rebalance.delay.ms; newMemberAdded extends it.
	initialDelay, newMemberAdded bool
	// joinTimer completes the join phase (rebalance timeout or initial
	// delay); syncTimer removes members that did not sync in time. Each
	// bump of timerSeq invalidates callbacks already running.
	stopJoinTimer, stopSyncTimer func() bool
	timerSeq                     uint64
	// seq numbers members in joining order (leader succession).
	seq uint64
	// writes counts background writes of the group's records (tests wait
	// for them).
	writes sync.WaitGroup
}

// classicMember is one member of a classic group.
type classicMember struct {
	id               string
	instanceID       *string
	clientID, host   string
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte
	// isNew is set until the member's first JoinGroup response.
	isNew bool
	seq   uint64
	// join and sync are the waiting JoinGroup and SyncGroup, if any.
	join chan *kmsg.JoinGroupResponse
	sync chan *kmsg.SyncGroupResponse
	// stopSession cancels the session timer; sessionSeq invalidates a
	// timer callback already running.
	stopSession func() bool
	sessionSeq  uint64
}

func newClassicGroup() *classicGroup {
	return &classicGroup{
		members:     map[string]*classicMember{},
		static:      map[string]string{},
		pending:     map[string]func() bool{},
		pendingSync: map[string]bool{},
	}
}

// classicLocked returns g's classic state, creating it for a group known
// only by its offsets.
func classicLocked(g *group) *classicGroup {
	if g.classic == nil {
		g.classic = newClassicGroup()
	}
	return g.classic
}

// classicLive reports whether cg is still g's live classic state: not shut
// down, not replaced (a KIP-848 conversion sets g.classic to nil, a replay
// or a conversion back creates a new one), and g still its shard's group.
// A timer callback or a request that resumes after releasing
// Coordinator.mu checks it before touching the group, with the classic
// state it captured while it held the lock.
func (g *group) classicLive(cg *classicGroup) bool {
	return cg != nil && g.classic == cg && cg.state != classicDead && g.shard.groups[g.id] == g
}

// isEmpty reports whether the group has no members.
func (cg *classicGroup) isEmpty() bool {
	return cg.state == classicEmpty || cg.state == classicDead
}

// shutdown stops the group's timers and answers its waiting requests with
// NOT_COORDINATOR (clients look the coordinator up again) when the group is
// removed, its shard unloaded, or the coordinator closed.
func (cg *classicGroup) shutdown() {
	cg.state = classicDead
	cg.stopTimers()
	for id, stop := range cg.pending {
		stop()
		delete(cg.pending, id)
	}
	for _, m := range cg.members {
		if m.stopSession != nil {
			m.stopSession()
		}
		m.sessionSeq++
		m.answerJoin(joinError(kerr.NotCoordinator.Code, ""))
		m.answerSync(syncError(kerr.NotCoordinator.Code))
	}
}

// stopTimers cancels the join and sync timers.
func (cg *classicGroup) stopTimers() {
	cg.timerSeq++
	for _, stop := range []*func() bool{&cg.stopJoinTimer, &cg.stopSyncTimer} {
		if *stop != nil {
			(*stop)()
			*stop = nil
		}
	}
}

// stateName is Empty, PreparingRebalance, CompletingRebalance, Stable or Dead.
func (cg *classicGroup) stateName() string { return cg.state.String() }

// protocolType is the members' protocol type ("consumer", "connect", ...).
func (cg *classicGroup) protocolType() string { return cg.ptype }

// transitionLocked moves g to state, keeping g.emptySince (the core's
// offset expiry) in step: set on entering Empty, zero otherwise.
func (c *Coordinator) transitionLocked(g *group, state classicState) {
	g.classic.state = state
	if state == classicEmpty {
		g.emptySince = c.cfg.Clock.Now()
	} else {
		g.emptySince = time.Time{}
	}
}

// await waits for a waiting request's answer on ch until ctx ends; then,
// under c.mu, it takes an answer that arrived meanwhile or returns
// abandon(), which unregisters the wait.
func await[T any](c *Coordinator, ctx context.Context, ch chan T, abandon func() T) T {
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case r := <-ch: // answered while we took the lock
		return r
	default:
	}
	return abandon()
}

// answerJoin sends r to the member's waiting JoinGroup, if any.
func (m *classicMember) answerJoin(r *kmsg.JoinGroupResponse) {
	if m.join != nil {
		m.join <- r
		m.join = nil
	}
}

// answerSync sends r to the member's waiting SyncGroup, if any.
func (m *classicMember) answerSync(r *kmsg.SyncGroupResponse) {
	if m.sync != nil {
		m.sync <- r
		m.sync = nil
	}
}

// metadata is the member's metadata for protocol, nil if it does not
// support it.
func (m *classicMember) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are the member's, in the same order
// with the same metadata (an unchanged rejoin).
func (m *classicMember) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && string(a.Metadata) == string(b.Metadata)
	})
}

func joinError(code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode, r.MemberID = code, memberID
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}

// newMemberID is Kafka's member id: prefix (the client id, or the
// group.instance.id of a static member), "-", a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// clientKey is the context key of WithClient.
type clientKey struct{}

type clientInfo struct{ id, host string }

// WithClient returns ctx carrying the request's client id and the client's
// host, which JoinGroup records for the member (DescribeGroups reports them,
// and member ids start with the client id). Kafka reports the host as
// "/" followed by the client's IP address.
func WithClient(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{clientID, host})
}

func clientFrom(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (cg *classicGroup) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range cg.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// sortedMembers returns the members in joining order.
func (cg *classicGroup) sortedMembers() []*classicMember {
	ms := make([]*classicMember, 0, len(cg.members))
	for _, m := range cg.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *classicMember) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

// groupRecordLocked is the GroupMetadataValue record of g's current
// generation; assignment, if not nil, replaces the members' assignments.
func (c *Coordinator) groupRecordLocked(g *group, assignment map[string][]byte) Record {
	cg := g.classic
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValV
	v.ProtocolType = cg.ptype
	v.Generation = cg.generation
	if cg.protocol != "" {
		p := cg.protocol
		v.Protocol = &p
	}
	if cg.leader != "" {
		l := cg.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = c.cfg.Clock.Now().UnixMilli()
	for _, m := range cg.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.host
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription = m.metadata(cg.protocol)
		vm.Assignment = m.assignment
		if assignment != nil {
			vm.Assignment = assignment[m.id]
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return Record{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// classicReplay applies a replayed GroupMetadataValue to g: the group comes
// back Stable with its generation, protocol, leader and members (or Empty
// without members), so members that keep heartbeating continue without a
// rebalance.
func (c *Coordinator) classicReplay(g *group, v *kmsg.GroupMetadataValue) {
	if g.classic != nil {
		g.classic.shutdown()
	}
	if g.consumer != nil { // a consumer group that emptied and became classic
		g.consumer.shutdown()
		g.consumer = nil
	}
	cg := newClassicGroup()
	g.classic = cg
	cg.ptype, cg.generation = v.ProtocolType, v.Generation
	if v.Protocol != nil {
		cg.protocol = *v.Protocol
	}
	if v.Leader != nil {
		cg.leader = *v.Leader
	}
	for _, vm := range v.Members {
		cg.seq++
		m := &classicMember{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, host: vm.ClientHost,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: cg.protocol, Metadata: vm.Subscription}},
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			assignment:       vm.Assignment,
			seq:              cg.seq,
		}
		if v.Version < 1 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		cg.members[m.id] = m
		if m.instanceID != nil {
			cg.static[*m.instanceID] = m.id
		}
	}
	if len(cg.members) == 0 {
		cg.state, cg.protocol, cg.leader = classicEmpty, "", ""
		g.emptySince = c.cfg.Clock.Now()
		if v.CurrentStateTimestamp > 0 {
			g.emptySince = time.UnixMilli(v.CurrentStateTimestamp)
		}
	} else {
		cg.state = classicStable
		g.emptySince = time.Time{}
	}
}

// classicLoaded runs when g's shard finished replaying: replayed members'
// sessions start now.
func (c *Coordinator) classicLoaded(g *group) {
	for _, m := range g.classic.members {
		c.scheduleSessionLocked(g, m, m.sessionTimeout)
	}
}

// classicCommitCheckLocked validates an offset commit's member against a
// classic group (g.classic may be nil: a group known only by its offsets),
// in the order of Kafka's ClassicGroup.validateOffsetCommit.
func (c *Coordinator) classicCommitCheckLocked(g *group, version int16, generation int32, memberID string, instanceID *string) int16 {
	cg := g.classic
	if cg == nil {
		cg = newClassicGroup()
	}
	switch {
	case cg.state == classicDead:
		return kerr.CoordinatorNotAvailable.Code
	case generation < 0 && cg.state == classicEmpty:
		return 0 // a simple commit: assign() consumers and admin tools
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := cg.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != cg.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if cg.state != classicEmpty {
		return kerr.UnknownMemberID.Code
	}
	if cg.state == classicCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// validateMember is Kafka's ClassicGroup.validateMember: a static member is
// found by its instance id and fenced if the member id is not the one
// holding it.
func (cg *classicGroup) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		switch held, ok := cg.static[*instanceID]; {
		case !ok:
			return kerr.UnknownMemberID.Code
		case held != memberID:
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if cg.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// classicDescribeLocked describes g for DescribeGroups as Kafka does: the
// protocol, members' metadata and assignments only while Stable; client
// ids, hosts and instance ids always.
func (c *Coordinator) classicDescribeLocked(g *group, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.State = g.stateName()
	dg.ProtocolType = g.protocolType()
	cg := g.classic
	if cg == nil {
		return dg
	}
	stable := cg.state == classicStable
	if stable {
		dg.Protocol = cg.protocol
	}
	for _, m := range cg.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.host
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			if md := m.metadata(cg.protocol); md != nil {
				dm.ProtocolMetadata = md
			}
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// classicSubscribedLocked returns the topics g's members subscribe to, for
// OffsetDelete, or NON_EMPTY_GROUP when g has members of a protocol type
// other than "consumer" (whose subscriptions Sluice cannot read).
func (c *Coordinator) classicSubscribedLocked(g *group) (map[string]bool, int16) {
	cg := g.classic
	if cg == nil || cg.isEmpty() {
		return nil, 0
	}
	if cg.ptype != "consumer" {
		return nil, kerr.NonEmptyGroup.Code
	}
	topics := map[string]bool{}
	for _, m := range cg.members {
		var md kmsg.ConsumerMemberMetadata
		if md.ReadFrom(m.metadata(cg.protocol)) != nil {
			continue
		}
		for _, t := range md.Topics {
			topics[t] = true
		}
	}
	return topics, 0
}
