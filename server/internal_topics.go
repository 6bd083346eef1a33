package server

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Internal topics: every rule about them lives here. Sluice has Kafka's
// two: __consumer_offsets, the group coordinator's log (groups.go), and
// __transaction_state, the transaction coordinator's (txn.go). The broker
// creates each on first use with its own layout (internalTopic); clients
// may read them but not create, delete or grow them, and their partitions
// are opened as internal (replica.Options.Internal), so the partition
// itself refuses client produce and DeleteRecords with
// INVALID_TOPIC_EXCEPTION, as Kafka does.

// offsetsTopic is Kafka's internal topic for committed offsets and groups.
const offsetsTopic = "__consumer_offsets"

// txnTopic is Kafka's internal topic for the transaction coordinator's
// state.
const txnTopic = "__transaction_state"

// isInternalTopic reports whether name is an internal topic (Metadata's
// IsInternal, the partition's Internal option).
func isInternalTopic(name string) bool { return name == offsetsTopic || name == txnTopic }

// internalTopic is how the broker creates an internal topic.
type internalTopic struct {
	name       string
	partitions int32
	rf         int16 // before the cap by the cluster's size
	// configs are its topic configs for the replication factor it gets.
	configs func(rf int16) map[string]string
	keyType int8 // the FindCoordinator key type whose lookup creates it
}

// offsetsTopicSpec: offsets.topic.num.partitions and
// offsets.topic.replication.factor.
func (b *Broker) offsetsTopicSpec() internalTopic {
	return internalTopic{name: offsetsTopic, partitions: b.cfg.OffsetsTopicNumPartitions, rf: b.cfg.OffsetsTopicReplicationFactor,
		configs: func(int16) map[string]string { return offsetsTopicConfigs() }, keyType: coordinatorKeyGroup}
}

// offsetsTopicConfigs are the topic configs Kafka gives __consumer_offsets:
// compacted, 100 MiB segments (offsets.topic.segment.bytes), producer
// compression.
func offsetsTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy":   "compact",
		"segment.bytes":    strconv.Itoa(100 << 20),
		"compression.type": "producer",
	}
}

// txnTopicSpec: transaction.state.log.num.partitions and
// transaction.state.log.replication.factor; the topic configs Kafka's
// TransactionStateManager gives it: compacted,
// transaction.state.log.segment.bytes, uncompressed, and
// min.insync.replicas transaction.state.log.min.isr (capped by the
// replication factor it gets, so a small cluster can write it).
func (b *Broker) txnTopicSpec() internalTopic {
	c := b.cfg
	return internalTopic{name: txnTopic, partitions: c.TransactionStateLogNumPartitions, rf: c.TransactionStateLogReplicationFactor,
		configs: func(rf int16) map[string]string {
			return map[string]string{
				"cleanup.policy":      "compact",
				"segment.bytes":       strconv.Itoa(int(c.TransactionStateLogSegmentBytes)),
				"compression.type":    "uncompressed",
				"min.insync.replicas": strconv.Itoa(int(min(c.TransactionStateLogMinISR, int32(rf)))),
			}
		}, keyType: coordinatorKeyTransaction}
}

// checkClientCreate refuses a CreateTopics of an internal topic: the
// broker creates it, with its own layout, on first use.
func checkClientCreate(name string) error {
	if isInternalTopic(name) {
		return kafkaErrorf(kerr.InvalidRequest, "Creation of internal topic %s is prohibited.", name)
	}
	return nil
}

// checkClientDelete refuses deleting an internal topic: it would drop
// every group's committed offsets.
func checkClientDelete(name string) error {
	if isInternalTopic(name) {
		return kafkaErrorf(kerr.InvalidRequest, "internal topic %s cannot be deleted", name)
	}
	return nil
}

// checkClientGrow refuses adding partitions to an internal topic: a
// group's partition is its hash mod the count, so growing it would move
// groups away from their committed offsets.
func checkClientGrow(name string) error {
	if isInternalTopic(name) {
		return kafkaErrorf(kerr.InvalidPartitions, "partitions cannot be added to internal topic %s", name)
	}
	return nil
}
