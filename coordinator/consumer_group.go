package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

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
//	    written as 0: no MetadataHash)
//
// One is written each time the group epoch moves (a member joins, leaves,
// times out, changes its subscription, or a subscribed topic changes), and
// a tombstone when the group is deleted. Members, target assignments and
// current assignments are written too (key versions 5 to 8; formats and
// rules in consumer_records.go), so after a restart or a coordinator move
// members continue with their member ID and epoch, without a rebalance.

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
	// targetReplayed is set once a replayed target assignment metadata
	// record set targetEpoch (replay only; see consumer_records.go).
	targetReplayed bool
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

// consumerLoaded runs when g's shard finished replaying: replayed members
// get a fresh session timeout (and a rebalance timeout if they have
// partitions to revoke), as Kafka gives them after a failover. The
// subscribed topics are described as they are now, so only a change after
// the load moves the epoch.
func (c *Coordinator) consumerLoaded(g *group) {
	cg := g.consumer
	cg.targetReplayed = false
	cg.metaKey = c.subscriptionMetaKeyLocked(cg, nil)
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		c.armSessionLocked(g, m)
		if m.state == memberUnrevoked {
			c.armRebalanceLocked(g, m)
		}
	}
	if !cg.isEmpty() {
		g.emptySince = time.Time{}
	}
}

// consumerMetadataKey is the ConsumerGroupMetadataKey of group.
func consumerMetadataKey(group string) []byte {
	return consumerKey(keyConsumerGroupMetadata, group, "")
}

// consumerMetadataRecord is the ConsumerGroupMetadataValue record of group
// at epoch.
func consumerMetadataRecord(group string, epoch int32) Record {
	return Record{Key: consumerMetadataKey(group), Value: consumerEpochValue(consumerMetadataValueV, epoch)}
}

// decodeConsumerMetadataValue returns the epoch of a
// ConsumerGroupMetadataValue, skipping its tagged fields.
func decodeConsumerMetadataValue(b []byte) (int32, error) { return decodeConsumerEpochValue(b) }

// consumerReplay applies a replayed record with key version >= 3 (KIP-848
// consumer group records) to shard s; see consumer_records.go. Key
// versions other than 3 and 5 to 8 are skipped.
func (c *Coordinator) consumerReplay(s *shard, keyVersion int16, r Record) error {
	switch keyVersion {
	case keyConsumerGroupMetadata, keyConsumerMember, keyConsumerTargetMetadata, keyConsumerTargetMember, keyConsumerCurrentAssignment:
	default:
		return nil
	}
	_, id, member, err := decodeConsumerKey(r.Key)
	if err != nil {
		return fmt.Errorf("consumer group record key (version %d): %w", keyVersion, err)
	}
	if err := c.checkShard(s, id); err != nil {
		return err
	}
	g := s.groups[id]
	if r.Value == nil {
		if g == nil || g.consumer == nil {
			return nil
		}
		cg := g.consumer
		switch keyVersion {
		case keyConsumerGroupMetadata:
			cg.shutdown()
			g.consumer = nil
			if len(g.offsets) == 0 && g.classic == nil {
				c.removeLocked(g)
			}
		case keyConsumerMember:
			if m := cg.members[member]; m != nil {
				delete(cg.members, member)
				if m.instanceID != nil && cg.static[*m.instanceID] == member {
					delete(cg.static, *m.instanceID)
				}
			}
		case keyConsumerTargetMember:
			delete(cg.target, member)
		case keyConsumerCurrentAssignment:
			if m := cg.members[member]; m != nil {
				m.epoch, m.prevEpoch, m.state = 0, 0, memberStable
				m.assigned, m.pendingRevocation = partitionSet{}, partitionSet{}
			}
		}
		return nil
	}
	if g != nil && g.classic != nil && !g.classic.isEmpty() && keyVersion != keyConsumerGroupMetadata {
		// Member records of a consumer group the classic group that
		// now lives here replaced: stale, skip them.
		return nil
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
	cg := g.consumer
	switch keyVersion {
	case keyConsumerGroupMetadata:
		epoch, err := decodeConsumerMetadataValue(r.Value)
		if err != nil {
			return fmt.Errorf("consumer group metadata value of group %q: %w", id, err)
		}
		cg.epoch = epoch
		if !cg.targetReplayed {
			cg.targetEpoch = epoch
		}
	case keyConsumerTargetMetadata:
		epoch, err := decodeConsumerEpochValue(r.Value)
		if err != nil {
			return fmt.Errorf("consumer group target assignment metadata value of group %q: %w", id, err)
		}
		cg.targetEpoch, cg.targetReplayed = epoch, true
	case keyConsumerTargetMember:
		a, err := decodeConsumerTargetValue(r.Value)
		if err != nil {
			return fmt.Errorf("consumer group target assignment of member %q of group %q: %w", member, id, err)
		}
		cg.target[member] = a
	case keyConsumerMember:
		n, err := decodeConsumerMemberValue(member, r.Value)
		if err != nil {
			return fmt.Errorf("consumer group member metadata of member %q of group %q: %w", member, id, err)
		}
		if n.rebalanceTimeout == 0 {
			n.rebalanceTimeout = c.cfg.ConsumerSessionTimeout
		}
		m := replayedMember(cg, member)
		if m.instanceID != nil && cg.static[*m.instanceID] == member {
			delete(cg.static, *m.instanceID)
		}
		m.instanceID, m.rackID, m.clientID, m.clientHost = n.instanceID, n.rackID, n.clientID, n.clientHost
		m.topics, m.regex, m.re, m.rebalanceTimeout, m.assignor = n.topics, n.regex, n.re, n.rebalanceTimeout, n.assignor
		if m.instanceID != nil {
			cg.static[*m.instanceID] = member
		}
	case keyConsumerCurrentAssignment:
		m := replayedMember(cg, member)
		if err := decodeConsumerCurrentValue(m, r.Value); err != nil {
			return fmt.Errorf("consumer group current assignment of member %q of group %q: %w", member, id, err)
		}
	}
	return nil
}

// replayedMember returns cg's member id, adding it if it is not there yet
// (its records may come in any order).
func replayedMember(cg *consumerGroup, id string) *consumerMember {
	m := cg.members[id]
	if m == nil {
		m = &consumerMember{id: id, assigned: partitionSet{}, pendingRevocation: partitionSet{}}
		cg.members[id] = m
	}
	return m
}

// consumerTombstonesLocked returns the tombstones deleting all of g's
// consumer group records (so compaction removes them): each member's
// records, each target assignment, the target epoch, the group epoch, and
// the classic group metadata it may have been converted from.
func (c *Coordinator) consumerTombstonesLocked(g *group) []Record {
	cg := g.consumer
	var recs []Record
	for _, id := range sortedKeys(cg.members) {
		recs = append(recs, consumerMemberTombstones(g.id, id)...)
	}
	for _, id := range sortedKeys(cg.target) {
		if cg.members[id] == nil {
			recs = append(recs, Record{Key: consumerKey(keyConsumerTargetMember, g.id, id)})
		}
	}
	return append(recs,
		Record{Key: consumerKey(keyConsumerTargetMetadata, g.id, "")},
		Record{Key: consumerMetadataKey(g.id)},
		Record{Key: groupKey(g.id)})
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
			if set[info.Name] {
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
