package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 consumer groups: the state kept per group and member, the hooks
// the core calls, and the group's records.
//
// # Records
//
//	ConsumerGroupMetadataKey   (key version 3, not flexible):
//	    int16 version = 3 | string group (int16 length, UTF-8)
//	ConsumerGroupMetadataValue (value version 0, flexible):
//	    int16 version = 0 | int32 epoch | tagged fields (uvarint count;
//	    written as 0: no MetadataHash, no CreationTimeMs)
//
// One is written each time the group epoch moves (a member joins, leaves,
// times out, changes its subscription, or a subscribed topic changes), and
// a tombstone when the group is deleted. Kafka's member, target assignment
// and current assignment records (key versions 4 to 8, 13) are not written,
// and are skipped if a log holds them: after a restart or a coordinator move
// the group comes back with its epoch and offsets but no members, and every
// member's next heartbeat gets UNKNOWN_MEMBER_ID, so it rejoins with epoch 0
// (and gets a fresh assignment under a bumped epoch).

// Record key and value versions of the consumer group records (part of the
// __consumer_offsets format).
const (
	keyConsumerGroupMetadata = 3
	consumerMetadataValueV   = 0
)

// memberState is where a member is in reconciling its assignment with the
// group's target (Kafka's MemberState).
type memberState int8

const (
	// memberStable: the member owns its target assignment at its epoch.
	memberStable memberState = iota
	// memberUnrevoked: the member must first give up partitions
	// (pendingRevocation) before moving to the target epoch.
	memberUnrevoked
	// memberUnreleased: the member is at the target epoch but waits for
	// partitions other members still own.
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberUnrevoked:
		return "unrevoked"
	case memberUnreleased:
		return "unreleased"
	}
	return "stable"
}

// consumerGroup is a KIP-848 consumer group's membership state.
type consumerGroup struct {
	// epoch is the group epoch; targetEpoch the epoch the target
	// assignment was computed for (epoch > targetEpoch: Assigning).
	epoch, targetEpoch int32
	members            map[string]*consumerMember
	// target is the target assignment of each member at targetEpoch.
	target map[string]partitionSet
	// metaKey describes the subscribed topics (names, IDs, partition
	// counts) as of the last epoch bump; a different one bumps the epoch.
	metaKey string
	// static maps group.instance.id to the member ID holding it.
	static map[string]string
	// assignor is the server assignor of the last target assignment.
	assignor string
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id         string
	instanceID *string
	rackID     *string
	// clientID and clientHost come from the request context
	// (WithClient), as of the member's last heartbeat.
	clientID   string
	clientHost string

	// epoch is the member epoch (-2 while a static member is away);
	// prevEpoch the one before the last change, which the member may
	// still send if it missed a response.
	epoch, prevEpoch int32
	state            memberState
	rebalanceTimeout time.Duration

	topics   []string // sorted subscribed topic names
	regex    *string  // subscribed topic regex
	re       *regexp.Regexp
	assignor string // requested server assignor, "" if none

	// assigned are the partitions the member owns (and was told about);
	// pendingRevocation those it still owns but must give up.
	assigned, pendingRevocation partitionSet

	// sessionSeq and rebalanceSeq identify the current session and
	// rebalance timers; a timer firing with an older one does nothing.
	sessionSeq, rebalanceSeq uint64
	stopSession              func() bool
	stopRebalance            func() bool
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*consumerMember{}, target: map[string]partitionSet{}, static: map[string]string{}}
}

func (g *consumerGroup) isEmpty() bool { return len(g.members) == 0 }

// shutdown stops every member's timers.
func (g *consumerGroup) shutdown() {
	for _, m := range g.members {
		m.stopTimers()
	}
}

func (m *consumerMember) stopTimers() {
	if m.stopSession != nil {
		m.stopSession()
		m.stopSession = nil
	}
	if m.stopRebalance != nil {
		m.stopRebalance()
		m.stopRebalance = nil
	}
	m.sessionSeq++
	m.rebalanceSeq++
}

// stateName is Kafka's ConsumerGroupState: Empty without members,
// Assigning while the target lags the group epoch, Reconciling while a
// member has not converged to the target, else Stable.
func (g *consumerGroup) stateName() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.targetEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.state != memberStable || (m.epoch != g.targetEpoch && m.epoch >= 0) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// consumerLoaded runs when g's shard finished replaying. Members are not
// persisted, so there are no timers to start.
func (c *Coordinator) consumerLoaded(g *group) {}

// consumerMetadataKey is the ConsumerGroupMetadataKey of group.
func consumerMetadataKey(group string) []byte {
	return kbin.AppendString(kbin.AppendInt16(nil, keyConsumerGroupMetadata), group)
}

// consumerMetadataRecord is the ConsumerGroupMetadataValue record of group
// at epoch.
func consumerMetadataRecord(group string, epoch int32) Record {
	v := kbin.AppendInt16(nil, consumerMetadataValueV)
	v = kbin.AppendInt32(v, epoch)
	v = kbin.AppendUvarint(v, 0) // no tagged fields
	return Record{Key: consumerMetadataKey(group), Value: v}
}

// decodeConsumerMetadataValue returns the epoch of a
// ConsumerGroupMetadataValue, skipping its tagged fields.
func decodeConsumerMetadataValue(b []byte) (int32, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v < 0 {
		return 0, fmt.Errorf("consumer group metadata value version %d", v)
	}
	epoch := r.Int32()
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()              // tag
		r.Span(int(r.Uvarint())) // value
	}
	return epoch, r.Complete()
}

// consumerReplay applies a replayed record with key version >= 3 (KIP-848
// consumer group records) to shard s. Only ConsumerGroupMetadata records
// are read; the other consumer group record types are skipped.
func (c *Coordinator) consumerReplay(s *shard, keyVersion int16, r Record) error {
	if keyVersion != keyConsumerGroupMetadata {
		return nil
	}
	kr := kbin.Reader{Src: r.Key}
	kr.Int16()
	id := kr.String()
	if err := kr.Complete(); err != nil {
		return fmt.Errorf("consumer group metadata key: %w", err)
	}
	if err := c.checkShard(s, id); err != nil {
		return err
	}
	g := s.groups[id]
	if r.Value == nil {
		if g != nil && g.consumer != nil {
			g.consumer.shutdown()
			g.consumer = nil
			if len(g.offsets) == 0 && g.classic == nil {
				c.removeLocked(g)
			}
		}
		return nil
	}
	epoch, err := decodeConsumerMetadataValue(r.Value)
	if err != nil {
		return fmt.Errorf("consumer group metadata value of group %q: %w", id, err)
	}
	if g == nil {
		g = newGroup(s, id, c.cfg.Clock.Now())
	}
	if g.classic != nil { // an empty classic group converted later
		g.classic.shutdown()
		g.classic = nil
	}
	if g.consumer == nil {
		g.consumer = newConsumerGroup()
	}
	g.consumer.epoch, g.consumer.targetEpoch = epoch, epoch
	return nil
}

// consumerTombstonesLocked returns the tombstones deleting g's consumer
// group records: its metadata, and the classic group metadata it may have
// been converted from.
func (c *Coordinator) consumerTombstonesLocked(g *group) []Record {
	return []Record{{Key: consumerMetadataKey(g.id)}, {Key: groupKey(g.id)}}
}

// consumerCommitCheckLocked validates an offset commit's member and member
// epoch (carried in the generation field) against a consumer group, as
// Kafka's ConsumerGroup.validateOffsetCommit: a negative epoch into a group
// without members is a simple commit; otherwise the member must exist
// (UNKNOWN_MEMBER_ID), commit with OffsetCommit v9+ (UNSUPPORTED_VERSION:
// older versions carry a classic generation) and at its current epoch
// (STALE_MEMBER_EPOCH).
func (c *Coordinator) consumerCommitCheckLocked(g *group, version int16, epoch int32, memberID string, instanceID *string) int16 {
	cg := g.consumer
	if epoch < 0 && cg.isEmpty() {
		return 0
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case version < 9:
		return kerr.UnsupportedVersion.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerFetchCheckLocked validates OffsetFetch v9+'s member id and epoch
// (Kafka's ConsumerGroup.validateOffsetFetch).
func (c *Coordinator) consumerFetchCheckLocked(g *group, memberID string, epoch int32) int16 {
	if memberID == "" && epoch < 0 {
		return 0
	}
	m := g.consumer.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerDescribeClassicLocked answers DescribeGroups for a consumer
// group as Kafka 4 does: it is not a classic group, so it is reported Dead
// (with GROUP_ID_NOT_FOUND from v6).
func (c *Coordinator) consumerDescribeClassicLocked(g *group, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.State = "Dead"
	if version >= 6 {
		dg.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + g.id + " is not a classic group."
		dg.ErrorMessage = &msg
	}
	return dg
}

// consumerSubscribedLocked returns the topics g's members subscribe to, by
// name or through their regex.
func (c *Coordinator) consumerSubscribedLocked(g *group) map[string]bool {
	out := map[string]bool{}
	for _, t := range c.subscribedTopicsLocked(g.consumer, nil) {
		out[t] = true
	}
	return out
}

// subscribedTopicsLocked returns the sorted names of the existing topics
// cg's members subscribe to; override, if set, replaces the subscription of
// the member of its id (or adds it).
func (c *Coordinator) subscribedTopicsLocked(cg *consumerGroup, override *consumerMember) []string {
	set := map[string]bool{}
	var regexes []*regexp.Regexp
	add := func(m *consumerMember) {
		for _, t := range m.topics {
			set[t] = true
		}
		if m.re != nil {
			regexes = append(regexes, m.re)
		}
	}
	for id, m := range cg.members {
		if override == nil || id != override.id {
			add(m)
		}
	}
	if override != nil {
		add(override)
	}
	var out []string
	for t := range set {
		if _, ok := c.cfg.Topics.ByName(t); ok {
			out = append(out, t)
		}
	}
	if len(regexes) > 0 {
		for _, info := range c.cfg.Topics.All() {
			if set[info.Name] || !regexEligible(info.Name) {
				continue
			}
			for _, re := range regexes {
				if re.MatchString(info.Name) {
					out = append(out, info.Name)
					break
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// regexEligible reports whether a topic may match a subscription regex:
// internal topics (__consumer_offsets, __transaction_state, ...) never do.
func regexEligible(topic string) bool { return !strings.HasPrefix(topic, "__") }

// memberTopicsLocked returns the existing topics m subscribes to, sorted.
func (c *Coordinator) memberTopicsLocked(m *consumerMember) []string {
	return c.subscribedTopicsLocked(&consumerGroup{}, m)
}

// compileSubscriptionRegex compiles a SubscribedTopicRegex. Kafka uses
// RE2/J, whose syntax Go's regexp shares; the whole topic name must match.
func compileSubscriptionRegex(s string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(s); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + s + ")$")
}

// ConsumerGroupDescribe is ConsumerGroupDescribe v0-v1 (KIP-848): unknown
// groups and groups that are not consumer groups get GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		dg.AuthorizedOperations = -2147483648
		g, code := c.groupLocked(id, false)
		switch {
		case code != 0:
			dg.ErrorCode = code
		case g == nil:
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + id + " not found."
			dg.ErrorMessage = &msg
		case g.consumer == nil:
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + id + " is not a consumer group."
			dg.ErrorMessage = &msg
		default:
			c.describeConsumerLocked(g, &dg, req.Version)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describeConsumerLocked(g *group, dg *kmsg.ConsumerGroupDescribeResponseGroup, version int16) {
	cg := g.consumer
	dg.State = cg.stateName()
	dg.Epoch, dg.AssignmentEpoch = cg.epoch, cg.targetEpoch
	dg.AssignorName = cg.preferredAssignor()
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID = m.id, m.instanceID, m.rackID
		dm.MemberEpoch = m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = m.regex
		dm.Assignment = c.describeAssignment(m.assigned)
		dm.TargetAssignment = c.describeAssignment(cg.target[id])
		if version >= 1 {
			dm.MemberType = 1 // consumer protocol
		}
		dg.Members = append(dg.Members, dm)
	}
}

// describeAssignment lists a by topic name; partitions of topics that no
// longer exist are left out.
func (c *Coordinator) describeAssignment(a partitionSet) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, t := range c.assignmentTopics(a) {
		at := kmsg.NewAssignmentTopicPartition()
		at.TopicID, at.Topic, at.Partitions = t.ID, t.Name, slices.Clone(a[t.ID])
		out.TopicPartitions = append(out.TopicPartitions, at)
	}
	return out
}

// assignmentTopics returns the existing topics of a, sorted by name.
func (c *Coordinator) assignmentTopics(a partitionSet) []TopicInfo {
	var out []TopicInfo
	for id := range a {
		if info, ok := c.cfg.Topics.ByID(id); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(x, y TopicInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// preferredAssignor is the server assignor most members ask for (ties to
// the first name in order), or uniform if none asks.
func (g *consumerGroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := ""
	for _, name := range sortedKeys(votes) {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	if best == "" {
		return defaultAssignor
	}
	return best
}
