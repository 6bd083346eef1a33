package server

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topic deletion and growth. Requests only validate and write metadata
// records, holding b.topicsMu so that a check and the change it guards
// (a config read-modify-write, the internal-topic rules) do not interleave
// with another request's; the reconciler (reconcile.go) then opens, closes
// and removes partitions, and the request waits for it (bounded).
//
// A deletion commits in the metadata first (that is the acknowledgement),
// then the reconciler closes the logs and removes the folders (renamed to
// a "-delete" name first, so a removal cut short leaves nothing under the
// partition's name; start-up removes such folders). A crash in between
// leaves folders no topic owns; they are never opened, and a new topic of
// the same name removes such a leftover before using the folder (its
// partition.metadata names the old topic ID), so a recreated topic never
// sees old data.

// deleteTopic deletes a topic by name or, when byID, by ID, and removes its
// partitions' data. Errors are kafkaErrors for unknown topics.
func (b *Broker) deleteTopic(name string, id [16]byte, byID bool) (meta.Topic, error) {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	if t, ok := b.meta.TopicByID(id); byID && ok {
		name = t.Name
	}
	if err := checkClientDelete(name); err != nil {
		return meta.Topic{}, err
	}
	var (
		t   meta.Topic
		err error
	)
	if byID {
		t, err = b.meta.DeleteTopicByID(id)
	} else {
		t, err = b.meta.DeleteTopic(name)
	}
	switch {
	case errors.Is(err, meta.ErrUnknownTopicID):
		return t, kafkaErrorf(kerr.UnknownTopicID, "no topic with id %s", meta.FormatTopicID(id))
	case errors.Is(err, meta.ErrUnknownTopic):
		return t, kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", name)
	case err != nil:
		return t, fmt.Errorf("server: delete topic: %w", err)
	}
	b.recon.changedSoon()
	b.logger.Info("sluice: topic deleted", "topic", t.Name, "id", meta.FormatTopicID(t.ID), "partitions", t.Partitions)
	return t, nil
}

// addPartitions grows a topic to count partitions and opens the new ones.
// Errors are kafkaErrors for requests Kafka refuses.
//
// assignment, when set, is the replica list of each new partition
// (CreatePartitions' manual assignment): one per new partition, each a
// valid assignment (meta.ValidateAssignment), else
// INVALID_REPLICA_ASSIGNMENT. Without it the new partitions are placed as
// a new topic's, continuing the topic's round-robin.
func (b *Broker) addPartitions(name string, count int32, assignment [][]int32, validateOnly bool) error {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	t, ok := b.meta.Topic(name)
	if !ok {
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", name)
	}
	if err := checkClientGrow(name); err != nil {
		return err
	}
	if count <= t.Partitions {
		return kafkaErrorf(kerr.InvalidPartitions, "topic %q has %d partitions; partitions can only be added, so the new count must be larger than that, not %d",
			name, t.Partitions, count)
	}
	if have, limit := b.partitionCount(), b.maxPartitions(); have+int64(count-t.Partitions) > limit {
		return kafkaErrorf(kerr.PolicyViolation, "topic %q: %d more partitions would make %d on this broker, above its limit of %d (sluice.max.partitions%s)",
			name, count-t.Partitions, have+int64(count-t.Partitions), limit, b.maxPartitionsSource())
	}
	if assignment != nil {
		if len(assignment) != int(count-t.Partitions) {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "topic %q: %d partitions are being added but the assignment names %d", name, count-t.Partitions, len(assignment))
		}
		if err := meta.ValidateAssignment(assignment, b.usableBroker); err != nil {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "topic %q: %v", name, err)
		}
		if n := int16(len(assignment[0])); n != t.ReplicationFactor {
			return kafkaErrorf(kerr.InvalidReplicaAssignment, "topic %q: the new partitions have %d replicas, the topic's have %d", name, n, t.ReplicationFactor)
		}
	} else {
		leader0 := int32(-1)
		if len(t.Assignments) > 0 && len(t.Assignments[0]) > 0 {
			leader0 = t.Assignments[0][0]
		}
		var err error
		if assignment, err = b.place(t.Partitions, count-t.Partitions, t.ReplicationFactor, leader0); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	err := b.meta.AddPartitionsAssigned(name, count, assignment)
	switch {
	case errors.Is(err, meta.ErrInvalidPartitions):
		return kafkaErrorf(kerr.InvalidPartitions, "%v", err)
	case errors.Is(err, meta.ErrUnknownTopic), errors.Is(err, meta.ErrUnknownTopicID):
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", name)
	case err != nil:
		return fmt.Errorf("server: add partitions to %q: %w", name, err)
	}
	b.recon.changedSoon()
	b.logger.Info("sluice: partitions added", "topic", name, "partitions", count)
	return nil
}
