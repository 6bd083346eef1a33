package server

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicRequest is one topic to create; Partitions or ReplicationFactor -1
// take the broker defaults (num.partitions, default.replication.factor).
type topicRequest struct {
	name       string
	partitions int32
	rf         int16
	configs    map[string]string
	// assignment, when set, is the replica list of each partition, in
	// partition order (CreateTopics' manual assignment); partitions and
	// rf are then -1.
	assignment [][]int32
}

// createTopic is createTopics for one topic.
func (b *Broker) createTopic(name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (meta.Topic, error) {
	ts, errs := b.createTopics([]topicRequest{{name: name, partitions: partitions, rf: rf, configs: configs}}, validateOnly)
	return ts[0], errs[0]
}

// createTopics validates and creates topics, and returns once the
// reconciler has opened their partitions (or tried to: see reconcile.go).
// The topics that pass validation and the partition limit (sluice.max.partitions,
// counted in request order; internal topics count but are never refused) are written in one metadata commit. A topic is
// created whole or not at all: one whose partitions fail to open is
// deleted again (its folders removed) and answered KAFKA_STORAGE_ERROR.
// errs[i] is a kafkaError, or an internal error (KAFKA_STORAGE_ERROR).
func (b *Broker) createTopics(reqs []topicRequest, validateOnly bool) (topics []meta.Topic, errs []error) {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	topics, errs = make([]meta.Topic, len(reqs)), make([]error, len(reqs))
	limit := b.maxPartitions()
	have := b.partitionCount()
	var specs []meta.TopicSpec
	var idx []int
	for i, r := range reqs {
		spec, err := b.checkTopic(r)
		// Internal topics (__consumer_offsets) are not held to the
		// limit: consumer groups must not stop because user topics used
		// it up (the derivation leaves room for them).
		if err == nil && !isInternalTopic(r.name) && have+int64(spec.Partitions) > limit {
			err = kafkaErrorf(kerr.PolicyViolation, "topic %q: %d partitions would make %d on this broker, above its limit of %d (sluice.max.partitions%s)",
				r.name, spec.Partitions, have+int64(spec.Partitions), limit, b.maxPartitionsSource())
		}
		if err != nil {
			errs[i] = err
			continue
		}
		have += int64(spec.Partitions)
		if validateOnly {
			topics[i] = meta.Topic{Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor, Configs: spec.Configs}
			continue
		}
		specs = append(specs, spec)
		idx = append(idx, i)
	}
	if len(specs) == 0 {
		return topics, errs
	}
	created, cerrs, err := b.meta.CreateTopics(specs)
	if err != nil {
		for _, i := range idx {
			errs[i] = fmt.Errorf("server: create topic %q: %w", reqs[i].name, err)
		}
		return topics, errs
	}
	var made []int
	for j, i := range idx {
		switch err := cerrs[j]; {
		case errors.Is(err, meta.ErrTopicExists):
			errs[i] = kafkaErrorf(kerr.TopicAlreadyExists, "topic %q already exists", reqs[i].name)
		case errors.Is(err, meta.ErrTopicCollision):
			errs[i] = kafkaErrorf(kerr.InvalidTopicException, "%v", err)
		case err != nil:
			errs[i] = fmt.Errorf("server: create topic %q: %w", reqs[i].name, err)
		default:
			topics[i] = created[j]
			made = append(made, i)
		}
	}
	if len(made) == 0 {
		return topics, errs
	}
	b.recon.changedSoon()
	rolledBack := false
	for _, i := range made {
		t := topics[i]
		if msg, failed := b.recon.openFailure(t); failed {
			errs[i] = b.rollBackTopic(t, msg)
			topics[i] = meta.Topic{}
			rolledBack = true
			continue
		}
		b.logger.Info("sluice: topic created", "topic", t.Name, "partitions", t.Partitions)
	}
	if rolledBack {
		b.recon.changedSoon() // close what did open, remove its folders
		for _, i := range made {
			if errs[i] != nil {
				b.removeTopicDirs(reqs[i].name)
			}
		}
	}
	return topics, errs
}

// checkTopic validates one topic to create against the broker's rules and
// the metadata, filling in the defaults.
func (b *Broker) checkTopic(r topicRequest) (meta.TopicSpec, error) {
	if err := meta.ValidateTopicName(r.name); err != nil {
		return meta.TopicSpec{}, kafkaErrorf(kerr.InvalidTopicException, "%v", err)
	}
	if r.name == metaTopic {
		// The metadata log's name (KRaft reserves it; a topic of that
		// name would take its folder).
		return meta.TopicSpec{}, kafkaErrorf(kerr.InvalidTopicException, "topic name %s is reserved for the cluster metadata log", metaTopic)
	}
	partitions, rf := r.partitions, r.rf
	if partitions == -1 {
		partitions = b.cfg.NumPartitions
	}
	if rf == -1 {
		rf = b.cfg.DefaultReplicationFactor
	}
	var assignment [][]int32
	if r.assignment != nil {
		if r.partitions != -1 || r.rf != -1 {
			// Kafka's rule (ReplicationControlManager).
			return meta.TopicSpec{}, kafkaErrorf(kerr.InvalidRequest, "topic %q: both numPartitions or replicationFactor and replicasAssignments were set; both cannot be used at the same time", r.name)
		}
		if err := meta.ValidateAssignment(r.assignment, b.usableBroker); err != nil {
			return meta.TopicSpec{}, kafkaErrorf(kerr.InvalidReplicaAssignment, "topic %q: %v", r.name, err)
		}
		assignment = r.assignment
		partitions, rf = int32(len(assignment)), int16(len(assignment[0]))
	}
	if partitions < 1 {
		return meta.TopicSpec{}, kafkaErrorf(kerr.InvalidPartitions, "partitions %d: must be at least 1", partitions)
	}
	if assignment == nil {
		var err error
		if assignment, err = b.place(0, partitions, rf, -1); err != nil {
			return meta.TopicSpec{}, err
		}
	}
	if _, err := b.topicConfig(r.configs); err != nil {
		return meta.TopicSpec{}, kafkaErrorf(kerr.InvalidConfig, "%v", err)
	}
	if _, ok := b.meta.Topic(r.name); ok {
		return meta.TopicSpec{}, kafkaErrorf(kerr.TopicAlreadyExists, "topic %q already exists", r.name)
	}
	return meta.TopicSpec{Name: r.name, Partitions: partitions, ReplicationFactor: rf, Configs: r.configs, Assignments: assignment}, nil
}

// usableBroker reports whether replicas may be placed on broker id: a
// registered, unfenced broker (KRaft's usable brokers) that is not being
// decommissioned.
func (b *Broker) usableBroker(id int32) bool {
	br, ok := b.meta.Broker(id)
	return ok && !br.Fenced && !br.Decommissioning
}

// place assigns rf replicas to each of n new partitions, after existing
// ones, over the usable brokers (meta.PlaceMore: round-robin,
// rack-aware). leader0 is the preferred leader of the topic's partition 0,
// whose pattern new partitions continue; -1 for a new topic, which starts
// at random. A replication factor above the usable broker count is
// INVALID_REPLICATION_FACTOR, as in Kafka.
func (b *Broker) place(existing, n int32, rf int16, leader0 int32) ([][]int32, error) {
	// A broker the controller's transport already reports down (a
	// second without a frame) gets no new replica even before its session
	// expires and it is fenced: a raft group needs its voters to elect.
	down := b.cl.host.PeersDown()
	var brokers []meta.PlacementBroker
	for _, br := range b.meta.Brokers() {
		if !br.Fenced && !br.Decommissioning && !slices.Contains(down, uint64(br.NodeID)) {
			brokers = append(brokers, meta.PlacementBroker{ID: br.NodeID, Rack: br.Rack})
		}
	}
	if rf < 1 || int(rf) > len(brokers) {
		return nil, kafkaErrorf(kerr.InvalidReplicationFactor, "unable to replicate the partition %d time(s): the target replication factor of %d cannot be reached because only %d broker(s) are registered and unfenced", rf, rf, len(brokers))
	}
	start := rand.IntN(len(brokers))
	if leader0 >= 0 {
		// The start that gave partition 0 its leader (the index of that
		// leader in Place's broker order).
		for s := range brokers {
			if a, err := meta.Place(brokers, 1, rf, s); err == nil && a[0][0] == leader0 {
				start = s
				break
			}
		}
	}
	a, err := meta.PlaceMore(brokers, existing, n, rf, start)
	if err != nil {
		return nil, kafkaErrorf(kerr.InvalidReplicationFactor, "%v", err)
	}
	return a, nil
}

// clusterSize is how many brokers the cluster has: the voters or the
// registered brokers, whichever are more.
func (b *Broker) clusterSize() int {
	return max(len(b.cl.voters), len(b.meta.Brokers()))
}

// usableBrokerCount is how many brokers replicas may be placed on.
func (b *Broker) usableBrokerCount() int {
	down := b.cl.host.PeersDown()
	n := 0
	for _, br := range b.meta.Brokers() {
		if !br.Fenced && !br.Decommissioning && !slices.Contains(down, uint64(br.NodeID)) {
			n++
		}
	}
	return n
}

// rollBackTopic deletes a topic whose partitions did not all open and
// returns the error its creator gets.
func (b *Broker) rollBackTopic(t meta.Topic, openErr string) error {
	b.logger.Error("sluice: a partition of a new topic cannot be opened; the topic is deleted again",
		"topic", t.Name, "partitions", t.Partitions, "err", openErr)
	if _, err := b.meta.DeleteTopicByID(t.ID); err != nil {
		b.logger.Error("sluice: cannot delete the topic whose partitions failed to open", "topic", t.Name, "err", err)
	}
	return kafkaErrorf(kerr.KafkaStorageError, "topic %q not created: a partition cannot be opened: %s", t.Name, openErr)
}

// removeTopicDirs removes the folders a rolled-back topic's partitions
// left (an open that failed part-way leaves one without partition.metadata,
// which nothing else would remove).
func (b *Broker) removeTopicDirs(name string) {
	if _, ok := b.meta.Topic(name); ok {
		return
	}
	for _, ld := range b.cfg.LogDirs {
		names, err := b.fs.List(ld)
		if err != nil {
			continue
		}
		for _, n := range names {
			rest, ok := strings.CutPrefix(n, name+"-")
			if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
				continue
			}
			if err := removePartitionDir(b.fs, filepath.Join(ld, n)); err != nil {
				b.logger.Warn("sluice: remove a rolled-back partition folder", "dir", filepath.Join(ld, n), "err", err)
			}
		}
	}
}

// partitionCount is the number of partitions in the metadata.
func (b *Broker) partitionCount() int64 {
	var n int64
	for _, t := range b.meta.Topics() {
		n += int64(t.Partitions)
	}
	return n
}

// fdsPerPartition is what an open partition holds: its active segment's
// .log, .index and .timeindex. Its closed segments hold none of their own
// (their .log files share the broker's segment.FileCache).
const fdsPerPartition = 3

// maxPartitions is sluice.max.partitions, or when 0 the limit derived from the
// open-file limit (see config.Config.MaxPartitions).
func (b *Broker) maxPartitions() int64 {
	if b.cfg.MaxPartitions > 0 {
		return int64(b.cfg.MaxPartitions)
	}
	return partitionsForFileLimit(openFileLimit(), uint64(b.cfg.LogSegmentOpenFilesMax))
}

// partitionsForFileLimit derives sluice.max.partitions from RLIMIT_NOFILE: what is
// left after max(1024, limit/4) descriptors and the closed-segment cache
// (cacheMax, or when 0 segmentFilesForFileLimit), divided by
// fdsPerPartition; at least 1. An unknown limit (0) puts no bound.
func partitionsForFileLimit(limit, cacheMax uint64) int64 {
	if limit == 0 || limit > 1<<40 {
		return 1 << 31
	}
	if cacheMax == 0 {
		cacheMax = uint64(segmentFilesForFileLimit(limit))
	}
	reserved := max(1024, limit/4) + cacheMax
	if limit <= reserved+fdsPerPartition {
		return 1
	}
	return int64((limit - reserved) / fdsPerPartition)
}

// segmentFilesForFileLimit derives sluice.log.segment.open.files.max from
// RLIMIT_NOFILE: limit/8, at least 64; segment.DefaultOpenFilesMax when
// the limit is unknown (0).
func segmentFilesForFileLimit(limit uint64) int {
	if limit == 0 || limit > 1<<40 {
		return segment.DefaultOpenFilesMax
	}
	return int(max(64, limit/8))
}

// segmentFilesMax is sluice.log.segment.open.files.max, or when 0 the limit
// derived from the open-file limit.
func segmentFilesMax(cfg *config.Config) int {
	if cfg.LogSegmentOpenFilesMax > 0 {
		return int(cfg.LogSegmentOpenFilesMax)
	}
	return segmentFilesForFileLimit(openFileLimit())
}

// maxPartitionsSource explains where the limit comes from, for messages.
func (b *Broker) maxPartitionsSource() string {
	if b.cfg.MaxPartitions > 0 {
		return ""
	}
	return fmt.Sprintf(", derived from the open-file limit %d", openFileLimit())
}
