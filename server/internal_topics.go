package server

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Internal topics: every rule about them lives here. Sluice has one,
// Kafka's __consumer_offsets, the group coordinator's log (groups.go). The
// broker creates it on first use with its own layout (offsetsTopicConfigs,
// offsets.topic.num.partitions); clients may read it but not create,
// delete or grow it, and its partitions are opened as internal
// (replica.Options.Internal), so the partition itself refuses client
// produce and DeleteRecords with INVALID_TOPIC_EXCEPTION, as Kafka does.

// offsetsTopic is Kafka's internal topic for committed offsets and groups.
const offsetsTopic = "__consumer_offsets"

// isInternalTopic reports whether name is an internal topic (Metadata's
// IsInternal, the partition's Internal option).
func isInternalTopic(name string) bool { return name == offsetsTopic }

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
