package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch with errors.Is; the server maps them to
// Kafka error codes at the protocol boundary.
var (
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("meta: store closed")
	// ErrCorrupt marks metadata that cannot be decoded or breaks an
	// invariant of the stored state (the one corruption marker).
	ErrCorrupt = errors.New("meta: corrupt metadata")
	// ErrInvalidTopicName: the name breaks Kafka's topic name rules.
	ErrInvalidTopicName = errors.New("meta: invalid topic name")
	// ErrTopicExists: a topic with this name exists.
	ErrTopicExists = errors.New("meta: topic already exists")
	// ErrTopicCollision: the name equals an existing topic's name once '.'
	// and '_' are treated as the same character.
	ErrTopicCollision = errors.New("meta: topic name collides with an existing topic")
	// ErrUnknownTopic: no topic has this name.
	ErrUnknownTopic = errors.New("meta: unknown topic")
	// ErrUnknownTopicID: no topic has this ID.
	ErrUnknownTopicID = errors.New("meta: unknown topic id")
	// ErrInvalidPartitions: a partition count below 1, or not above the
	// current count when adding partitions.
	ErrInvalidPartitions = errors.New("meta: invalid partition count")
	// ErrInvalidReplicationFactor: a replication factor below 1, or (Place)
	// above the number of brokers.
	ErrInvalidReplicationFactor = errors.New("meta: invalid replication factor")
	// ErrInvalidReplicaAssignment: an explicit replica assignment that
	// Kafka refuses (INVALID_REPLICA_ASSIGNMENT): an empty replica list, a
	// broker twice in one list, an unregistered broker, lists of different
	// lengths, the wrong number of lists, or assignments given for a topic
	// kept without them (and the reverse).
	ErrInvalidReplicaAssignment = errors.New("meta: invalid replica assignment")
	// ErrUnknownBroker: no broker with this node id is registered.
	ErrUnknownBroker = errors.New("meta: unknown broker")
	// ErrStaleBrokerEpoch: a fence for a broker epoch that is not the
	// broker's current one (Kafka's STALE_BROKER_EPOCH).
	ErrStaleBrokerEpoch = errors.New("meta: stale broker epoch")
	// ErrUnknownPartition: a partition index outside the topic.
	ErrUnknownPartition = errors.New("meta: unknown partition")
	// ErrNoReassignmentInProgress: a reassignment was cancelled for a
	// partition that has none in progress (Kafka's
	// NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignmentInProgress = errors.New("meta: no partition reassignment in progress")
	// ErrStaleMoveEpoch: a leader's report computed at an earlier
	// partition epoch than the partition's (ChangePartitionsAt; Kafka's
	// INVALID_UPDATE_VERSION).
	ErrStaleMoveEpoch = errors.New("meta: the report's partition epoch is not the partition's")
	// ErrFencedLeaderEpoch: a partition change with a leader epoch below
	// the stored one (Kafka's FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("meta: fenced leader epoch")
	// ErrInvalidBroker: a broker registration Kafka would refuse (a
	// negative node id, a listener without a name or twice, a port out of
	// range), or a per-broker config change for a negative node id.
	ErrInvalidBroker = errors.New("meta: invalid broker registration")
	// ErrOutOfOrder: ApplyReplicated was given an entry past the next
	// replicated offset (a gap in the replicated log).
	ErrOutOfOrder = errors.New("meta: replicated records out of order")
	// ErrRestored: Records was asked for local log records from before
	// the last RestoreState, which removed them.
	ErrRestored = errors.New("meta: the local log records were replaced by a restored state")
	// ErrInvalidConfig: an empty config key, or a key both set and deleted
	// by one change. Config values are not checked here.
	ErrInvalidConfig = errors.New("meta: invalid config change")
	// ErrInvalidProducerIDs: a producer id block that is empty, overflows,
	// or does not start at the next free id.
	ErrInvalidProducerIDs = errors.New("meta: invalid producer id block")
	// ErrInvalidRecord: a record that cannot apply to the current state for
	// a reason no more specific error names (for example a topic ID that is
	// zero, reserved or in use).
	ErrInvalidRecord = errors.New("meta: invalid record")
	// ErrStorage: a change could not be made durable (a full disk, a
	// failed fsync, too many open files) or the store is recovering from
	// such a failure. The change was not applied; a later one may succeed
	// once the cause is gone.
	ErrStorage = errors.New("meta: storage failure")
	// ErrInvalidOptions marks every Options.Validate problem.
	ErrInvalidOptions = errors.New("meta: invalid options")
)

// On-disk format constants. These are part of the format specified in the
// package doc; changing any of them is a format change.
const (
	// formatVersion is the value of the format key: the key layout and
	// value encodings below.
	formatVersion byte = 1
	// recordVersion is the first byte of every record written: version 2
	// added the replica assignments of TopicRecord and PartitionsAdded and
	// the types 7 to 9; the types 10 to 13 were added to version 2 later
	// (a new type changes no existing encoding; a decoder that predates
	// it refuses it as an unknown type). recordVersion1 records (the
	// layout without assignments) are still decoded: older data
	// directories hold them.
	recordVersion  byte = 2
	recordVersion1 byte = 1
	// valueVersion is the first byte of every state value that is not an
	// encoded record (producer/next, config/broker, config/node/,
	// topic/leader/, topic/move/, broker/, replicated/next).
	valueVersion byte = 1

	keyFormat        = "format"
	keyLogPrefix     = "log/"        // + 8-byte big-endian offset
	keyTopicName     = "topic/name/" // + topic name bytes
	keyTopicID       = "topic/id/"   // + 16 raw ID bytes
	keyProducerNext  = "producer/next"
	keyBrokerConfigs = "config/broker"
	keyTopicLeader   = "topic/leader/" // + 16 raw ID bytes + 4-byte big-endian partition
	keyTopicMove     = "topic/move/"   // + 16 raw ID bytes + 4-byte big-endian partition
	keyBroker        = "broker/"       // + 4-byte big-endian node id
	keyNodeConfigs   = "config/node/"  // + 4-byte big-endian node id
	keyScram         = "config/scram/" // + mechanism byte + user name
	keyACL           = "config/acl/"   // + 16 raw ACL id bytes
	keyQuota         = "config/quota/" // + uvarint-prefixed entity + quota key
	keyReplicated    = "replicated/next"

	// reserveName is the space reserve's file in the store's folder (not
	// a Pebble file, and not part of the key space).
	reserveName = "SLUICE-RESERVE"

	logKeyLen = len(keyLogPrefix) + 8
)

// RecordType is the second byte of an encoded record. The values are part
// of the format.
type RecordType byte

// Record types.
const (
	TypeTopic                  RecordType = 1
	TypePartitionsAdded        RecordType = 2
	TypeTopicConfigsChanged    RecordType = 3
	TypeTopicRemoved           RecordType = 4
	TypeProducerIDBlock        RecordType = 5
	TypeBrokerConfigChanged    RecordType = 6
	TypeBrokerRegistered       RecordType = 7
	TypeBrokerFenced           RecordType = 8
	TypePartitionChanged       RecordType = 9
	TypePartitionReassigned    RecordType = 10
	TypeBrokerDecommissioning  RecordType = 11
	TypeBrokerUnregistered     RecordType = 12
	TypeNodeConfigChanged      RecordType = 13
	TypeTopicAdopted           RecordType = 14
	TypeScramCredentialChanged RecordType = 15
	TypeACLChanged             RecordType = 16
	TypeClientQuotaChanged     RecordType = 17
)

// The broker/ value's flags byte (a bit field; a value written before
// decommissioning existed holds 0 or 1, which read the same).
const (
	brokerFenced          byte = 1 << 0
	brokerDecommissioning byte = 1 << 1
	brokerFlagsKnown           = brokerFenced | brokerDecommissioning
)

// statePrefixes are the key ranges that hold the state (everything but the
// log, the format key and replicated/next); Rebuild clears exactly these.
var statePrefixes = []string{"broker/", "config/", "producer/", "topic/"}

func (t RecordType) String() string {
	switch t {
	case TypeTopic:
		return "TopicRecord"
	case TypePartitionsAdded:
		return "PartitionsAdded"
	case TypeTopicConfigsChanged:
		return "TopicConfigsChanged"
	case TypeTopicRemoved:
		return "TopicRemoved"
	case TypeProducerIDBlock:
		return "ProducerIDBlock"
	case TypeBrokerConfigChanged:
		return "BrokerConfigChanged"
	case TypeBrokerRegistered:
		return "BrokerRegistered"
	case TypeBrokerFenced:
		return "BrokerFenced"
	case TypePartitionChanged:
		return "PartitionChanged"
	case TypePartitionReassigned:
		return "PartitionReassigned"
	case TypeBrokerDecommissioning:
		return "BrokerDecommissioning"
	case TypeBrokerUnregistered:
		return "BrokerUnregistered"
	case TypeNodeConfigChanged:
		return "NodeConfigChanged"
	case TypeTopicAdopted:
		return "TopicAdopted"
	case TypeScramCredentialChanged:
		return "ScramCredentialChanged"
	case TypeACLChanged:
		return "ACLChanged"
	case TypeClientQuotaChanged:
		return "ClientQuotaChanged"
	}
	return fmt.Sprintf("RecordType(%d)", byte(t))
}

// logKey is the key of the log record at offset off.
func logKey(off uint64) []byte {
	k := make([]byte, logKeyLen)
	copy(k, keyLogPrefix)
	binary.BigEndian.PutUint64(k[len(keyLogPrefix):], off)
	return k
}

// parseLogKey returns the offset a log key names; ok is false for any
// other key.
func parseLogKey(k []byte) (off uint64, ok bool) {
	if len(k) != logKeyLen || string(k[:len(keyLogPrefix)]) != keyLogPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(keyLogPrefix):]), true
}

func topicNameKey(name string) []byte { return []byte(keyTopicName + name) }

func topicIDKey(id [16]byte) []byte { return append([]byte(keyTopicID), id[:]...) }

// topicLeaderPrefix is the prefix of every leader key of the topic.
func topicLeaderPrefix(id [16]byte) string { return keyTopicLeader + string(id[:]) }

func topicLeaderKey(id [16]byte, part int32) []byte {
	return binary.BigEndian.AppendUint32([]byte(topicLeaderPrefix(id)), uint32(part))
}

// parseTopicLeaderKey returns the topic and partition a leader key names.
func parseTopicLeaderKey(k []byte) (id [16]byte, part int32, ok bool) {
	return parsePartitionKey(keyTopicLeader, k)
}

// topicMovePrefix is the prefix of every move key of the topic.
func topicMovePrefix(id [16]byte) string { return keyTopicMove + string(id[:]) }

func topicMoveKey(id [16]byte, part int32) []byte {
	return binary.BigEndian.AppendUint32([]byte(topicMovePrefix(id)), uint32(part))
}

// parseTopicMoveKey returns the topic and partition a move key names.
func parseTopicMoveKey(k []byte) (id [16]byte, part int32, ok bool) {
	return parsePartitionKey(keyTopicMove, k)
}

// parsePartitionKey parses prefix | 16-byte topic ID | 4-byte partition.
func parsePartitionKey(prefix string, k []byte) (id [16]byte, part int32, ok bool) {
	if len(k) != len(prefix)+20 || string(k[:len(prefix)]) != prefix {
		return id, 0, false
	}
	copy(id[:], k[len(prefix):])
	return id, int32(binary.BigEndian.Uint32(k[len(prefix)+16:])), true
}

// brokerKey is the broker/ key of a node id (never negative, so the keys
// sort by id).
func brokerKey(id int32) []byte { return binary.BigEndian.AppendUint32([]byte(keyBroker), uint32(id)) }

func parseBrokerKey(k []byte) (int32, bool) { return parseNodeKey(keyBroker, k) }

// nodeConfigsKey is the config/node/ key of a node id (never negative).
func nodeConfigsKey(id int32) []byte {
	return binary.BigEndian.AppendUint32([]byte(keyNodeConfigs), uint32(id))
}

func parseNodeConfigsKey(k []byte) (int32, bool) { return parseNodeKey(keyNodeConfigs, k) }

// parseNodeKey parses prefix | 4-byte node id; ok is false for another
// shape or a negative id.
func parseNodeKey(prefix string, k []byte) (int32, bool) {
	if len(k) != len(prefix)+4 || string(k[:len(prefix)]) != prefix {
		return 0, false
	}
	id := int32(binary.BigEndian.Uint32(k[len(prefix):]))
	return id, id >= 0
}

// prefixEnd returns the smallest key greater than every key with prefix p
// (p is never empty nor all 0xff here).
func prefixEnd(p string) []byte {
	end := []byte(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic("meta: prefixEnd of all-0xff prefix")
}

// encodeProducerNext is the producer/next value: version, then the next
// free producer id as a big-endian int64.
func encodeProducerNext(next int64) []byte {
	b := make([]byte, 9)
	b[0] = valueVersion
	binary.BigEndian.PutUint64(b[1:], uint64(next))
	return b
}

func decodeProducerNext(b []byte) (int64, error) {
	if len(b) != 9 || b[0] != valueVersion {
		return 0, fmt.Errorf("%w: producer/next value % x", ErrCorrupt, b)
	}
	return int64(binary.BigEndian.Uint64(b[1:])), nil
}

// encodeConfigs is the config/broker and config/node/ value: version,
// then a map.
func encodeConfigs(m map[string]string) []byte {
	e := encoder{b: []byte{valueVersion}}
	e.strMap(m)
	return e.b
}

func decodeConfigs(b []byte) (map[string]string, error) {
	if len(b) < 1 || b[0] != valueVersion {
		return nil, fmt.Errorf("%w: config value version", ErrCorrupt)
	}
	d := decoder{b: b[1:]}
	m := d.strMap()
	if err := d.finish(); err != nil {
		return nil, err
	}
	return m, nil
}

// encodeReplicatedNext is the replicated/next value: version, then the
// next replicated offset to apply as a big-endian int64.
func encodeReplicatedNext(next int64) []byte { return encodeProducerNext(next) }

func decodeReplicatedNext(b []byte) (int64, error) {
	if len(b) != 9 || b[0] != valueVersion || int64(binary.BigEndian.Uint64(b[1:])) < 0 {
		return 0, fmt.Errorf("%w: replicated/next value % x", ErrCorrupt, b)
	}
	return int64(binary.BigEndian.Uint64(b[1:])), nil
}

// encodeLeader is a topic/leader/ value: version | leader int32 |
// leaderEpoch int32 | isr (int32 list).
func encodeLeader(pl PartitionLeader) []byte {
	e := encoder{b: []byte{valueVersion}}
	e.i32(pl.Leader)
	e.i32(pl.LeaderEpoch)
	e.i32List(pl.ISR)
	return e.b
}

func decodeLeader(b []byte) (PartitionLeader, error) {
	if len(b) < 1 || b[0] != valueVersion {
		return PartitionLeader{}, fmt.Errorf("%w: leader value version", ErrCorrupt)
	}
	d := decoder{b: b[1:]}
	pl := PartitionLeader{Leader: d.i32(), LeaderEpoch: d.i32(), ISR: d.i32List()}
	return pl, d.finish()
}

// encodeBroker is a broker/ value: version | flags (1 byte: bit 0
// fenced, bit 1 decommissioning, the others 0) | the encoded
// BrokerRegistered record of the current registration (its Epoch
// stamped).
func encodeBroker(b Broker) []byte {
	v := []byte{valueVersion, 0}
	if b.Fenced {
		v[1] |= brokerFenced
	}
	if b.Decommissioning {
		v[1] |= brokerDecommissioning
	}
	return append(v, EncodeRecord(b.registration())...)
}

func decodeBroker(v []byte) (Broker, error) {
	if len(v) < 2 || v[0] != valueVersion || v[1]&^brokerFlagsKnown != 0 {
		return Broker{}, fmt.Errorf("%w: broker value header % x", ErrCorrupt, v[:min(len(v), 2)])
	}
	rec, err := DecodeRecord(v[2:])
	if err != nil {
		return Broker{}, err
	}
	r, ok := rec.(BrokerRegistered)
	if !ok {
		return Broker{}, fmt.Errorf("%w: broker value holds %v", ErrCorrupt, rec)
	}
	b := r.broker(v[1]&brokerFenced != 0)
	b.Decommissioning = v[1]&brokerDecommissioning != 0
	return b, nil
}

// encodeMove is a topic/move/ value: version | initial (int32 list) |
// adding (int32 list) | removing (int32 list).
func encodeMove(m PartitionMove) []byte {
	e := encoder{b: []byte{valueVersion}}
	e.i32List(m.Initial)
	e.i32List(m.Adding)
	e.i32List(m.Removing)
	e.i32(m.Epoch)
	return e.b
}

func decodeMove(b []byte) (PartitionMove, error) {
	if len(b) < 1 || b[0] != valueVersion {
		return PartitionMove{}, fmt.Errorf("%w: move value version", ErrCorrupt)
	}
	d := decoder{b: b[1:]}
	m := PartitionMove{Initial: d.i32List(), Adding: d.i32List(), Removing: d.i32List()}
	if d.err == nil && len(d.b) > 0 {
		m.Epoch = d.i32() // absent in the first values written: 0
	}
	return m, d.finish()
}
