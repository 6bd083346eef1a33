package server

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
)

// createTopic validates and creates a topic, and returns once the
// reconciler has opened its partitions (or tried to: see reconcile.go).
// partitions or rf -1 take the broker defaults (num.partitions,
// default.replication.factor). Errors are kafkaErrors.
func (b *Broker) createTopic(name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (meta.Topic, error) {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	if err := meta.ValidateTopicName(name); err != nil {
		return meta.Topic{}, kafkaErrorf(kerr.InvalidTopicException, "%v", err)
	}
	if partitions == -1 {
		partitions = b.cfg.NumPartitions
	}
	if rf == -1 {
		rf = b.cfg.DefaultReplicationFactor
	}
	if partitions < 1 {
		return meta.Topic{}, kafkaErrorf(kerr.InvalidPartitions, "partitions %d: must be at least 1", partitions)
	}
	if rf < 1 || rf > 1 {
		return meta.Topic{}, kafkaErrorf(kerr.InvalidReplicationFactor, "replication factor %d: there is 1 live broker", rf)
	}
	if _, err := b.topicConfig(configs); err != nil {
		return meta.Topic{}, kafkaErrorf(kerr.InvalidConfig, "%v", err)
	}
	if _, ok := b.meta.Topic(name); ok {
		return meta.Topic{}, kafkaErrorf(kerr.TopicAlreadyExists, "topic %q already exists", name)
	}
	if validateOnly {
		return meta.Topic{Name: name, Partitions: partitions, ReplicationFactor: rf, Configs: configs}, nil
	}
	t, err := b.meta.CreateTopic(name, partitions, rf, configs)
	switch {
	case errors.Is(err, meta.ErrTopicExists):
		return meta.Topic{}, kafkaErrorf(kerr.TopicAlreadyExists, "topic %q already exists", name)
	case errors.Is(err, meta.ErrTopicCollision):
		return meta.Topic{}, kafkaErrorf(kerr.InvalidTopicException, "%v", err)
	case err != nil:
		return meta.Topic{}, fmt.Errorf("server: create topic %q: %w", name, err)
	}
	b.recon.changedSoon()
	b.logger.Info("sluice: topic created", "topic", name, "partitions", t.Partitions)
	return t, nil
}
