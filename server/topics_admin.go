package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topic deletion and growth. Every change to the set of topics or
// partitions (createTopic, deleteTopic, addPartitions) holds b.topicsMu, so
// a folder is never removed while another request opens a log in it, and
// a name being deleted cannot be recreated before its folders are gone.
// Lock order: topicsMu, then b.mu (taken briefly by openPartition and
// dropPartition).
//
// A deletion commits in the metadata first (that is the acknowledgement),
// then closes the logs and removes the folders. A crash in between leaves
// folders no topic owns; they are never opened (New opens only the
// metadata's topics) and openNewPartition removes such a leftover before a
// new topic or partition of the same name uses the folder, so a recreated
// topic never sees old data.

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
	for p := int32(0); p < t.Partitions; p++ {
		b.dropPartition(t.Name, p)
	}
	if t.Name != offsetsTopic {
		b.coord.TopicDeleted(context.Background(), t.Name)
	}
	b.logger.Info("sluice: topic deleted", "topic", t.Name, "id", meta.FormatTopicID(t.ID), "partitions", t.Partitions)
	return t, nil
}

// dropPartition takes a partition out of service, closes its log and
// removes its folder. The topic is already gone from the metadata, so
// failures are only logged: the folder is a leftover that
// openNewPartition removes before the name is used again.
func (b *Broker) dropPartition(topic string, p int32) {
	tp := topicPartition{topic, p}
	b.mu.Lock()
	part, ok := b.parts[tp]
	delete(b.parts, tp)
	b.mu.Unlock()
	if ok {
		// Requests that looked the partition up before this point see
		// segment.ErrClosed (UNKNOWN_TOPIC_OR_PARTITION).
		if err := part.Close(); err != nil {
			b.logger.Warn("sluice: close deleted partition", "topic", topic, "partition", p, "err", err)
		}
	}
	if err := b.fs.RemoveAll(b.partitionDir(topic, p)); err != nil {
		b.logger.Warn("sluice: remove deleted partition folder", "topic", topic, "partition", p, "err", err)
	}
}

// openNewPartition opens the log of a partition that has just come into
// existence (a new topic, or growth), first removing any folder a deleted
// topic of the same name left behind after a crash. Called with topicsMu
// held.
func (b *Broker) openNewPartition(t meta.Topic, p int32) (*replica.Partition, error) {
	dir := b.partitionDir(t.Name, p)
	if _, err := b.fs.Stat(dir); err == nil {
		b.logger.Warn("sluice: removing a partition folder that belongs to no topic (left by a deleted topic, or put there by hand)", "dir", dir)
		if err := b.fs.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	return b.openPartition(t, p)
}

// addPartitions grows a topic to count partitions and opens the new ones.
// Errors are kafkaErrors for requests Kafka refuses.
func (b *Broker) addPartitions(name string, count int32, validateOnly bool) error {
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
	if validateOnly {
		return nil
	}
	err := b.meta.AddPartitions(name, count)
	switch {
	case errors.Is(err, meta.ErrInvalidPartitions):
		return kafkaErrorf(kerr.InvalidPartitions, "%v", err)
	case errors.Is(err, meta.ErrUnknownTopic), errors.Is(err, meta.ErrUnknownTopicID):
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", name)
	case err != nil:
		return fmt.Errorf("server: add partitions to %q: %w", name, err)
	}
	old := t.Partitions
	if t, ok = b.meta.Topic(name); !ok {
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", name)
	}
	for p := old; p < t.Partitions; p++ {
		if _, err := b.openNewPartition(t, p); err != nil {
			return fmt.Errorf("server: add partitions to %q: partition %d: %w", name, p, err)
		}
	}
	b.logger.Info("sluice: partitions added", "topic", name, "partitions", t.Partitions)
	return nil
}
