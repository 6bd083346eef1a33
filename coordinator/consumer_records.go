package coordinator

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// KIP-848 consumer group records: encoding, decoding and replay. The
// schemas are Kafka's (group-coordinator/src/main/resources/common/message),
// so a tool that reads __consumer_offsets decodes Sluice's records as it
// decodes Kafka's.
//
// # Record formats
//
// Keys are not flexible: int16 key version | string group (int16 length,
// UTF-8) [| string member]. Values are flexible (KIP-482): int16 value
// version = 0, then the fields below, compact strings and arrays (uvarint
// length + 1, 0 for null), and a tagged-field section (uvarint count,
// written as 0; read and skipped) at the end of the value and of every
// nested struct. Integers are big endian; uuid is 16 bytes.
//
//	key 3  ConsumerGroupMetadata            {group}
//	       value: int32 Epoch | tags          (see consumer_group.go)
//	key 4  ConsumerGroupPartitionMetadata   {group}
//	       not written (deprecated since Kafka 4.1); skipped on replay
//	key 5  ConsumerGroupMemberMetadata      {group, member}
//	       value: nullable string InstanceId | nullable string RackId |
//	              string ClientId | string ClientHost |
//	              []string SubscribedTopicNames |
//	              nullable string SubscribedTopicRegex |
//	              int32 RebalanceTimeoutMs | nullable string ServerAssignor |
//	              tags (tag 0, ClassicMemberMetadata, never written)
//	key 6  ConsumerGroupTargetAssignmentMetadata {group}
//	       value: int32 AssignmentEpoch | tags
//	key 7  ConsumerGroupTargetAssignmentMember {group, member}
//	       value: []TopicPartitions TopicPartitions | tags
//	key 8  ConsumerGroupCurrentMemberAssignment {group, member}
//	       value: int32 MemberEpoch | int32 PreviousMemberEpoch |
//	              int8 State (0 stable, 1 unrevoked, 2 unreleased) |
//	              []TopicPartitions AssignedPartitions |
//	              []TopicPartitions PartitionsPendingRevocation | tags
//
//	TopicPartitions: uuid TopicId | []int32 Partitions | tags
//
// Topics are written sorted by ID and partitions in ascending order, so
// the same state always encodes to the same bytes.
//
// # When they are written
//
// In the same batch as the change they record (Coordinator.write), in
// Kafka's order: a member's metadata (5) when it joins or its subscription,
// instance, rack, client, rebalance timeout or assignor changes; the group
// epoch (3) when it moves; the target of each member whose target changed
// (7) and the target epoch (6) when a target assignment is computed; a
// member's current assignment (8) only when its epoch, state or partitions
// change. A member that leaves, times out or is replaced gets tombstones
// for its 8, 7 and 5; deleting a group tombstones every record of it.
//
// # Replay
//
// Records apply in log order, each setting what it holds; a tombstone of 5
// removes the member, of 7 its target, of 8 its assignment. The group
// epoch (3) also sets the target epoch until a target assignment metadata
// record (6) was replayed, for logs written before members were persisted.
// Unknown key versions (Kafka's regular expression, share and streams group
// records) are skipped. When the shard is loaded, every replayed member
// gets a fresh session timeout (and a rebalance timeout if it has
// partitions to revoke), as Kafka does after a coordinator failover.

// Record key and value versions of the consumer group records (part of the
// __consumer_offsets format).
const (
	keyConsumerGroupMetadata     = 3
	keyConsumerPartitionMetadata = 4 // not written
	keyConsumerMember            = 5
	keyConsumerTargetMetadata    = 6
	keyConsumerTargetMember      = 7
	keyConsumerCurrentAssignment = 8

	consumerMetadataValueV   = 0
	consumerMemberValueV     = 0
	consumerTargetMetaValueV = 0
	consumerTargetValueV     = 0
	consumerCurrentValueV    = 0
)

// consumerKey is the key of a consumer group record of key version v; the
// member is left out for the group-level records (3, 4, 6).
func consumerKey(v int16, group, member string) []byte {
	k := kbin.AppendString(kbin.AppendInt16(nil, v), group)
	if consumerKeyHasMember(v) {
		k = kbin.AppendString(k, member)
	}
	return k
}

func consumerKeyHasMember(v int16) bool {
	return v == keyConsumerMember || v == keyConsumerTargetMember || v == keyConsumerCurrentAssignment
}

// decodeConsumerKey decodes a key of version 3, 5, 6, 7 or 8.
func decodeConsumerKey(b []byte) (v int16, group, member string, err error) {
	r := kbin.Reader{Src: b}
	v = r.Int16()
	group = r.String()
	if consumerKeyHasMember(v) {
		member = r.String()
	}
	return v, group, member, r.Complete()
}

// skipTags reads and drops a tagged-field section.
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()              // tag
		r.Span(int(r.Uvarint())) // value
	}
}

// consumerMemberValue is the ConsumerGroupMemberMetadataValue of m.
func consumerMemberValue(m *consumerMember) []byte {
	v := kbin.AppendInt16(nil, consumerMemberValueV)
	v = kbin.AppendCompactNullableString(v, m.instanceID)
	v = kbin.AppendCompactNullableString(v, m.rackID)
	v = kbin.AppendCompactString(v, m.clientID)
	v = kbin.AppendCompactString(v, m.clientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.topics))
	for _, t := range m.topics {
		v = kbin.AppendCompactString(v, t)
	}
	v = kbin.AppendCompactNullableString(v, m.regex)
	v = kbin.AppendInt32(v, int32(m.rebalanceTimeout.Milliseconds()))
	var assignor *string
	if m.assignor != "" {
		assignor = &m.assignor
	}
	v = kbin.AppendCompactNullableString(v, assignor)
	return kbin.AppendUvarint(v, 0)
}

// decodeConsumerMemberValue decodes a ConsumerGroupMemberMetadataValue
// into a member with id (subscription, instance, rack, client, timeouts;
// no assignment).
func decodeConsumerMemberValue(id string, b []byte) (*consumerMember, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v < 0 {
		return nil, fmt.Errorf("consumer group member metadata value version %d", v)
	}
	m := &consumerMember{id: id}
	m.instanceID = r.CompactNullableString()
	m.rackID = r.CompactNullableString()
	m.clientID = r.CompactString()
	m.clientHost = r.CompactString()
	if n := r.CompactArrayLen(); n > 0 {
		m.topics = make([]string, 0, n)
		for range n {
			m.topics = append(m.topics, r.CompactString())
		}
	}
	m.regex = r.CompactNullableString()
	m.rebalanceTimeout = msDuration(r.Int32())
	if a := r.CompactNullableString(); a != nil {
		m.assignor = *a
	}
	skipTags(&r)
	if err := r.Complete(); err != nil {
		return nil, err
	}
	if m.regex != nil {
		re, err := compileSubscriptionRegex(*m.regex)
		if err != nil {
			return nil, fmt.Errorf("subscription regex %q: %w", *m.regex, err)
		}
		m.re = re
	}
	return m, nil
}

// sameMemberMetadata reports whether a and b encode to the same
// ConsumerGroupMemberMetadataValue.
func sameMemberMetadata(a, b *consumerMember) bool {
	return sameOptional(a.instanceID, b.instanceID) && sameOptional(a.rackID, b.rackID) &&
		a.clientID == b.clientID && a.clientHost == b.clientHost &&
		slices.Equal(a.topics, b.topics) && sameOptional(a.regex, b.regex) &&
		a.rebalanceTimeout.Milliseconds() == b.rebalanceTimeout.Milliseconds() && a.assignor == b.assignor
}

// sameOptional reports whether two nullable strings are equal.
func sameOptional(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// msDuration is a millisecond field as a duration; 0 if not positive.
func msDuration(ms int32) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// appendTopicPartitions appends a as a compact array of TopicPartitions.
func appendTopicPartitions(v []byte, a partitionSet) []byte {
	ids := sortedTopicIDs(a)
	v = kbin.AppendCompactArrayLen(v, len(ids))
	for _, id := range ids {
		v = kbin.AppendUuid(v, id)
		v = kbin.AppendCompactArrayLen(v, len(a[id]))
		for _, p := range a[id] {
			v = kbin.AppendInt32(v, p)
		}
		v = kbin.AppendUvarint(v, 0)
	}
	return v
}

func readTopicPartitions(r *kbin.Reader) partitionSet {
	a := partitionSet{}
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		id := r.Uuid()
		for np := r.CompactArrayLen(); np > 0 && r.Ok(); np-- {
			a.add(id, r.Int32())
		}
		skipTags(r)
	}
	return a
}

// consumerTargetValue is a ConsumerGroupTargetAssignmentMemberValue.
func consumerTargetValue(a partitionSet) []byte {
	v := kbin.AppendInt16(nil, consumerTargetValueV)
	v = appendTopicPartitions(v, a)
	return kbin.AppendUvarint(v, 0)
}

func decodeConsumerTargetValue(b []byte) (partitionSet, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v < 0 {
		return nil, fmt.Errorf("consumer group target assignment member value version %d", v)
	}
	a := readTopicPartitions(&r)
	skipTags(&r)
	return a, r.Complete()
}

// consumerEpochValue is a ConsumerGroupMetadataValue or a
// ConsumerGroupTargetAssignmentMetadataValue: an int32 epoch.
func consumerEpochValue(version int16, epoch int32) []byte {
	v := kbin.AppendInt16(nil, version)
	v = kbin.AppendInt32(v, epoch)
	return kbin.AppendUvarint(v, 0) // no tagged fields
}

// decodeConsumerEpochValue returns the epoch of a ConsumerGroupMetadataValue
// or ConsumerGroupTargetAssignmentMetadataValue, skipping tagged fields
// (Kafka 4.1's MetadataHash).
func decodeConsumerEpochValue(b []byte) (int32, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v < 0 {
		return 0, fmt.Errorf("consumer group epoch value version %d", v)
	}
	epoch := r.Int32()
	skipTags(&r)
	return epoch, r.Complete()
}

// consumerCurrentValue is the ConsumerGroupCurrentMemberAssignmentValue of m.
func consumerCurrentValue(m *consumerMember) []byte {
	v := kbin.AppendInt16(nil, consumerCurrentValueV)
	v = kbin.AppendInt32(v, m.epoch)
	v = kbin.AppendInt32(v, m.prevEpoch)
	v = kbin.AppendInt8(v, int8(m.state))
	v = appendTopicPartitions(v, m.assigned)
	v = appendTopicPartitions(v, m.pendingRevocation)
	return kbin.AppendUvarint(v, 0)
}

// decodeConsumerCurrentValue sets m's epochs, state and partitions from a
// ConsumerGroupCurrentMemberAssignmentValue.
func decodeConsumerCurrentValue(m *consumerMember, b []byte) error {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v < 0 {
		return fmt.Errorf("consumer group current member assignment value version %d", v)
	}
	epoch, prev, state := r.Int32(), r.Int32(), r.Int8()
	assigned := readTopicPartitions(&r)
	pending := readTopicPartitions(&r)
	skipTags(&r)
	if err := r.Complete(); err != nil {
		return err
	}
	if state < int8(memberStable) || state > int8(memberUnreleased) {
		return fmt.Errorf("member state %d", state)
	}
	m.epoch, m.prevEpoch, m.state = epoch, prev, memberState(state)
	m.assigned, m.pendingRevocation = assigned, pending
	return nil
}

// sameCurrentAssignment reports whether a and b encode to the same
// ConsumerGroupCurrentMemberAssignmentValue.
func sameCurrentAssignment(a, b *consumerMember) bool {
	return a.epoch == b.epoch && a.prevEpoch == b.prevEpoch && a.state == b.state &&
		a.assigned.equal(b.assigned) && a.pendingRevocation.equal(b.pendingRevocation)
}

// Record builders.

func consumerMemberRecord(group string, m *consumerMember) Record {
	return Record{Key: consumerKey(keyConsumerMember, group, m.id), Value: consumerMemberValue(m)}
}

func consumerCurrentRecord(group string, m *consumerMember) Record {
	return Record{Key: consumerKey(keyConsumerCurrentAssignment, group, m.id), Value: consumerCurrentValue(m)}
}

func consumerTargetRecord(group, member string, a partitionSet) Record {
	return Record{Key: consumerKey(keyConsumerTargetMember, group, member), Value: consumerTargetValue(a)}
}

func consumerTargetMetaRecord(group string, epoch int32) Record {
	return Record{Key: consumerKey(keyConsumerTargetMetadata, group, ""), Value: consumerEpochValue(consumerTargetMetaValueV, epoch)}
}

// consumerMemberTombstones are the tombstones removing member: its current
// assignment, target assignment and metadata, in Kafka's order.
func consumerMemberTombstones(group, member string) []Record {
	return []Record{
		{Key: consumerKey(keyConsumerCurrentAssignment, group, member)},
		{Key: consumerKey(keyConsumerTargetMember, group, member)},
		{Key: consumerKey(keyConsumerMember, group, member)},
	}
}

// consumerTargetRecords are the records moving the target assignment from
// prev to next: a target record for each member whose target changed and a
// tombstone for each member no longer in it.
func consumerTargetRecords(group string, prev, next map[string]partitionSet) []Record {
	var recs []Record
	for _, id := range sortedKeys(next) {
		if old, ok := prev[id]; !ok || !old.equal(next[id]) {
			recs = append(recs, consumerTargetRecord(group, id, next[id]))
		}
	}
	for _, id := range sortedKeys(prev) {
		if _, ok := next[id]; !ok {
			recs = append(recs, Record{Key: consumerKey(keyConsumerTargetMember, group, id)})
		}
	}
	return recs
}
