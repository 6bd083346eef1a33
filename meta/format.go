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
	// ErrInvalidReplicationFactor: a replication factor below 1.
	ErrInvalidReplicationFactor = errors.New("meta: invalid replication factor")
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
	// recordVersion is the first byte of every encoded record and of every
	// versioned state value.
	recordVersion byte = 1

	keyFormat        = "format"
	keyLogPrefix     = "log/"        // + 8-byte big-endian offset
	keyTopicName     = "topic/name/" // + topic name bytes
	keyTopicID       = "topic/id/"   // + 16 raw ID bytes
	keyProducerNext  = "producer/next"
	keyBrokerConfigs = "config/broker"

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
	TypeTopic               RecordType = 1
	TypePartitionsAdded     RecordType = 2
	TypeTopicConfigsChanged RecordType = 3
	TypeTopicRemoved        RecordType = 4
	TypeProducerIDBlock     RecordType = 5
	TypeBrokerConfigChanged RecordType = 6
)

// statePrefixes are the key ranges that hold the state (everything but the
// log and the format key); Rebuild clears exactly these.
var statePrefixes = []string{"config/", "producer/", "topic/"}

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
	b[0] = recordVersion
	binary.BigEndian.PutUint64(b[1:], uint64(next))
	return b
}

func decodeProducerNext(b []byte) (int64, error) {
	if len(b) != 9 || b[0] != recordVersion {
		return 0, fmt.Errorf("%w: producer/next value % x", ErrCorrupt, b)
	}
	return int64(binary.BigEndian.Uint64(b[1:])), nil
}

// encodeConfigs is the config/broker value: version, then a map.
func encodeConfigs(m map[string]string) []byte {
	e := encoder{b: []byte{recordVersion}}
	e.strMap(m)
	return e.b
}

func decodeConfigs(b []byte) (map[string]string, error) {
	if len(b) < 1 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: config value version", ErrCorrupt)
	}
	d := decoder{b: b[1:]}
	m := d.strMap()
	if err := d.finish(); err != nil {
		return nil, err
	}
	return m, nil
}
