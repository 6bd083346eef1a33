package coordinator

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Key versions of __consumer_offsets records (the int16 every key starts
// with), as Kafka's coordinator record schemas number them.
const (
	keyOffsetCommitV0  = 0
	keyOffsetCommitV1  = 1
	keyGroupMetadata   = 2
	firstConsumerKeyV  = 3 // KIP-848 consumer group records: 3 and up
	offsetCommitValueV = 3 // OffsetCommitValue version written (leader epoch, no expire)
	groupMetadataValV  = 3 // GroupMetadataValue version written (static members)
)

// offsetKey is the record key of group's committed offset for
// topic/partition.
func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyOffsetCommitV1, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

// offsetRecord is the record committing o.
func offsetRecord(group, topic string, partition int32, o *committedOffset) Record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueV
	if o.expireTime >= 0 {
		v.Version = 1 // the only version with an explicit expire timestamp
		v.ExpireTimestamp = o.expireTime
	}
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitTime
	return Record{Key: offsetKey(group, topic, partition), Value: v.AppendTo(nil)}
}

// groupKey is the record key of a group's metadata.
func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyGroupMetadata, Group: group}
	return k.AppendTo(nil)
}

// keyVersion is the version every key starts with, or -1 if the key is too
// short.
func keyVersion(key []byte) int16 {
	if len(key) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(key))
}

// replayLocked applies one replayed record to the shard. Records of groups
// belonging to other partitions are refused (the log is not ours); records
// of unknown key versions are skipped, as Kafka skips unknown record types.
// producerID is the producer of the record's batch if it is transactional,
// else noProducerID: a transactional offset commit becomes a pending offset
// of its producer, and only offset commits care (Kafka's
// GroupCoordinatorShard.replay passes the producer id to
// OffsetMetadataManager.replay alone).
func (c *Coordinator) replayLocked(s *shard, r Record, producerID int64) error {
	switch v := keyVersion(r.Key); {
	case v == keyOffsetCommitV0 || v == keyOffsetCommitV1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("offset commit key: %w", err)
		}
		if err := c.checkShard(s, k.Group); err != nil {
			return err
		}
		if r.Value == nil {
			s.tombstoneLocked(k.Group, k.Topic, k.Partition)
			return nil
		}
		var val kmsg.OffsetCommitValue
		if err := val.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("offset commit value of group %q: %w", k.Group, err)
		}
		g := s.groups[k.Group]
		if g == nil {
			g = newGroup(s, k.Group, c.cfg.Clock.Now())
		}
		o := &committedOffset{offset: val.Offset, leaderEpoch: -1, metadata: val.Metadata, commitTime: val.CommitTimestamp, expireTime: -1}
		if val.Version >= 3 {
			o.leaderEpoch = val.LeaderEpoch
		}
		if val.Version == 1 {
			o.expireTime = val.ExpireTimestamp
		}
		if producerID != noProducerID {
			c.addPendingLocked(s, producerID, k.Group, k.Topic, k.Partition, o)
			return nil
		}
		g.setOffset(k.Topic, k.Partition, o)
	case v == keyGroupMetadata:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("group metadata key: %w", err)
		}
		if err := c.checkShard(s, k.Group); err != nil {
			return err
		}
		g := s.groups[k.Group]
		if r.Value == nil {
			if g != nil {
				c.removeLocked(g)
			}
			return nil
		}
		var val kmsg.GroupMetadataValue
		if err := val.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("group metadata value of group %q: %w", k.Group, err)
		}
		if g == nil {
			g = newGroup(s, k.Group, c.cfg.Clock.Now())
		}
		c.classicReplay(g, &val)
	case v >= firstConsumerKeyV:
		return c.consumerReplay(s, v, r)
	default:
		c.cfg.Logger.Warn("coordinator: skipping a record with a short key", "partition", s.partition)
	}
	return nil
}

// checkShard refuses a record of a group that does not hash to s: that
// would mean the log holds another partition's records (or the partition
// count changed), and serving it would split a group across coordinators.
func (c *Coordinator) checkShard(s *shard, group string) error {
	if p := c.Partition(group); p != s.partition {
		return fmt.Errorf("record of group %q, which belongs to partition %d, not %d (was offsets.topic.num.partitions changed?)", group, p, s.partition)
	}
	return nil
}

// setOffset stores o, a commit applied now (live or replayed), stamping
// it with the shard's next record sequence number.
func (g *group) setOffset(topic string, partition int32, o *committedOffset) {
	o.seq = g.shard.nextSeq()
	g.putOffset(topic, partition, o)
}

// putOffset stores o as it is (a materialized transactional offset keeps
// the sequence number of its record).
func (g *group) putOffset(topic string, partition int32, o *committedOffset) {
	ps := g.offsets[topic]
	if ps == nil {
		ps = map[int32]*committedOffset{}
		g.offsets[topic] = ps
	}
	ps[partition] = o
}

func (g *group) deleteOffset(topic string, partition int32) {
	if ps := g.offsets[topic]; ps != nil {
		delete(ps, partition)
		if len(ps) == 0 {
			delete(g.offsets, topic)
		}
	}
}

func (g *group) offset(topic string, partition int32) *committedOffset {
	return g.offsets[topic][partition]
}
