package coordinator

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit commits offsets for a group (OffsetCommit v0-v10, Kafka's
// semantics): members of a group are checked against its generation (classic)
// or member epoch (KIP-848); a commit with generation -1 and no member id
// into a group without members is a "simple" commit (a consumer using
// assign() with a group id, or an admin tool) and creates the group if
// needed. All partitions of the request are written as one record batch and
// applied once it is committed.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	// Resolve topics and check partitions before touching the group.
	type part struct {
		topic string
		p     *kmsg.OffsetCommitRequestTopicPartition
		rp    *kmsg.OffsetCommitResponseTopicPartition
	}
	var parts []part
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		info, ok := c.requestTopic(req.Version >= 10, rt.Topic, rt.TopicID)
		for j := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rt.Partitions[j].Partition
			switch {
			case !ok && req.Version >= 10:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case !ok || sp.Partition < 0 || sp.Partition >= info.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rt.Partitions[j].Metadata != nil && len(*rt.Partitions[j].Metadata) > c.cfg.OffsetMetadataMaxBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		for j := range rt.Partitions {
			if st := &resp.Topics[len(resp.Topics)-1]; st.Partitions[j].ErrorCode == 0 {
				parts = append(parts, part{topic: info.Name, p: &rt.Partitions[j], rp: &st.Partitions[j]})
			}
		}
	}
	setAll := func(code int16) *kmsg.OffsetCommitResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return resp
	}

	s, code := c.lookupShard(req.Group)
	if req.Group == "" {
		code = kerr.InvalidGroupID.Code
	}
	if code != 0 {
		return setAll(code)
	}
	now := c.cfg.Clock.Now().UnixMilli()
	var values []*committedOffset
	check := func() ([]Record, int16) {
		g := s.groups[req.Group]
		if g == nil {
			if req.Generation >= 0 {
				if req.Version >= 9 {
					return nil, kerr.GroupIDNotFound.Code
				}
				return nil, kerr.IllegalGeneration.Code
			}
			g = newGroup(s, req.Group, c.cfg.Clock.Now())
		}
		if code := c.commitCheckLocked(g, req.Version, req.Generation, req.MemberID, req.InstanceID); code != 0 {
			return nil, code
		}
		recs := make([]Record, 0, len(parts))
		values = values[:0]
		for _, p := range parts {
			o := &committedOffset{offset: p.p.Offset, leaderEpoch: -1, commitTime: now, expireTime: -1}
			if req.Version >= 6 {
				o.leaderEpoch = p.p.LeaderEpoch
			}
			if p.p.Metadata != nil {
				o.metadata = *p.p.Metadata
			}
			if req.Version == 1 && p.p.Timestamp >= 0 {
				o.commitTime = p.p.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
				o.expireTime = o.commitTime + req.RetentionTimeMillis
			}
			values = append(values, o)
			recs = append(recs, offsetRecord(req.Group, p.topic, p.p.Partition, o))
		}
		return recs, 0
	}
	apply := func() {
		g := s.groups[req.Group]
		if g == nil { // deleted while we wrote: the write recreates it, as replay would
			g = newGroup(s, req.Group, c.cfg.Clock.Now())
		}
		for i, p := range parts {
			g.setOffset(p.topic, p.p.Partition, values[i])
		}
	}
	if len(parts) == 0 {
		return resp
	}
	return setAll(c.writePipelined(ctx, s, check, apply))
}

// commitCheckLocked validates the member of an offset commit against g,
// by g's kind.
func (c *Coordinator) commitCheckLocked(g *group, version int16, generation int32, memberID string, instanceID *string) int16 {
	if g.consumer != nil {
		return c.consumerCommitCheckLocked(g, version, generation, memberID, instanceID)
	}
	return c.classicCommitCheckLocked(g, version, generation, memberID, instanceID)
}

// OffsetFetch returns committed offsets (OffsetFetch v0-v10): -1 for
// partitions without one; every committed partition when the topic list is
// null (v2+), none when it is empty (Kafka's isAllPartitions is
// topics == null). Pending transactional offsets (TxnOffsetCommit) are never
// returned; with require_stable (v7+) a partition that has one answers
// UNSTABLE_OFFSET_COMMIT with offset -1 instead of its committed offset
// (Kafka's OffsetMetadataManager.fetchOffsets/fetchAllOffsets: the
// all-partitions form lists committed partitions only). v9+ may name a
// KIP-848 member and epoch, which are checked.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version <= 7 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = req.Group
		rg.MemberEpoch = -1
		if req.Topics != nil { // an empty list asks for nothing, null for all
			rg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		}
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = t.Topic, t.Partitions
			rg.Topics = append(rg.Topics, rt)
		}
		g := c.offsetFetchGroup(req.Version, &rg, req.Version >= 7 && req.RequireStable)
		resp.ErrorCode = g.ErrorCode
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				if req.Version <= 1 && g.ErrorCode != 0 {
					rp.ErrorCode = g.ErrorCode // v0-1 have no group-level error
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for i := range req.Groups {
		resp.Groups = append(resp.Groups, c.offsetFetchGroup(req.Version, &req.Groups[i], req.RequireStable))
	}
	return resp
}

func (c *Coordinator) offsetFetchGroup(version int16, rg *kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = rg.Group
	c.mu.Lock()
	defer c.mu.Unlock()
	g, code := c.groupLocked(rg.Group, false)
	if code != 0 {
		out.ErrorCode = code
		// Kafka lists the requested partitions with the error too (v0-1
		// read it there).
		for _, t := range rg.Topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		return out
	}
	if g != nil && version >= 9 && rg.MemberID != nil && g.consumer != nil {
		if code := c.consumerFetchCheckLocked(g, *rg.MemberID, rg.MemberEpoch); code != 0 {
			out.ErrorCode = code
			return out
		}
	}
	entry := func(topic string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
		empty := ""
		rp.Metadata = &empty
		if requireStable && g != nil && g.shard.hasPendingLocked(g.id, topic, p) {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return rp
		}
		if g != nil {
			if o := g.offset(topic, p); o != nil {
				rp.Offset, rp.LeaderEpoch = o.offset, o.leaderEpoch
				md := o.metadata
				rp.Metadata = &md
			}
		}
		return rp
	}
	if rg.Topics == nil { // every committed offset
		if g == nil {
			return out
		}
		for _, topic := range sortedKeys(g.offsets) {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = topic
			if version >= 10 {
				info, ok := c.cfg.Topics.ByName(topic)
				if !ok {
					continue // a deleted topic has no ID to name it by
				}
				rt.TopicID = info.ID
			}
			for _, p := range sortedKeys(g.offsets[topic]) {
				rt.Partitions = append(rt.Partitions, entry(topic, p))
			}
			out.Topics = append(out.Topics, rt)
		}
		return out
	}
	for _, t := range rg.Topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := t.Topic
		known := true
		if version >= 10 {
			info, ok := c.cfg.Topics.ByID(t.TopicID)
			name, known = info.Name, ok
		}
		for _, p := range t.Partitions {
			rp := entry(name, p)
			if !known {
				rp.ErrorCode = kerr.UnknownTopicID.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// OffsetDelete deletes a group's committed offsets (OffsetDelete v0,
// KIP-496): GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for a
// classic group with members of a non-consumer protocol, and
// GROUP_SUBSCRIBED_TO_TOPIC for partitions of topics the group's members
// subscribe to. A partition with a committed or a pending transactional
// offset gets a tombstone, which deletes both (Kafka's deleteOffsets).
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	g, code := c.lookupGroup(req.Group)
	if code == 0 && g == nil {
		code = kerr.GroupIDNotFound.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	type del struct {
		topic string
		p     int32
	}
	var dels []del
	check := func() ([]Record, int16) {
		g := g.shard.groups[req.Group]
		if g == nil {
			return nil, kerr.GroupIDNotFound.Code
		}
		var subscribed map[string]bool
		if g.consumer != nil {
			subscribed = c.consumerSubscribedLocked(g)
		} else {
			var code int16
			if subscribed, code = c.classicSubscribedLocked(g); code != 0 {
				return nil, code
			}
		}
		var recs []Record
		dels = dels[:0]
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				rp.ErrorCode = 0
				switch {
				case subscribed[rt.Topic]:
					rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
				case g.offset(rt.Topic, rp.Partition) != nil || g.shard.hasPendingLocked(g.id, rt.Topic, rp.Partition):
					// Kafka's deleteOffsets: a pending transactional
					// offset is deleted too (the tombstone drops it).
					dels = append(dels, del{rt.Topic, rp.Partition})
					recs = append(recs, Record{Key: offsetKey(req.Group, rt.Topic, rp.Partition)})
				}
			}
		}
		return recs, 0
	}
	apply := func() {
		for _, d := range dels {
			g.shard.tombstoneLocked(req.Group, d.topic, d.p)
		}
	}
	resp.ErrorCode = c.write(ctx, g.shard, check, apply)
	return resp
}

// scheduleExpiry arms the next offsets.retention.check.interval.ms pass.
func (c *Coordinator) scheduleExpiry() {
	c.stopExpiry = c.cfg.Clock.AfterFunc(c.cfg.OffsetsRetentionCheckInterval, func() {
		c.expireOffsets()
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed {
			c.scheduleExpiry()
		}
	})
}

// expireOffsets removes expired offsets (KIP-211): in a group without
// members, an offset expires offsets.retention.minutes after the later of
// its commit and the moment the group became empty; an offset committed
// with an explicit expire timestamp (OffsetCommit v1-v4) expires then. A
// group left with no offsets and no members is deleted. Offsets of groups
// with members do not expire. As in Kafka's cleanupExpiredOffsets, an
// offset whose partition has a pending transactional offset does not
// expire yet, and a group with pending transactional offsets is kept.
func (c *Coordinator) expireOffsets() {
	shards := c.servedShards()
	for _, s := range shards {
		type exp struct {
			group, topic string
			p            int32
		}
		var exps []exp
		var gone []string
		check := func() ([]Record, int16) {
			now := c.cfg.Clock.Now()
			exps, gone = exps[:0], gone[:0]
			var recs []Record
			for _, id := range sortedKeys(s.groups) {
				g := s.groups[id]
				if !g.isEmptyLocked() {
					continue
				}
				left := 0
				for topic, ps := range g.offsets {
					for p, o := range ps {
						base := time.UnixMilli(o.commitTime)
						if g.emptySince.After(base) {
							base = g.emptySince
						}
						expired := !now.Before(base.Add(c.cfg.OffsetsRetention))
						if o.expireTime >= 0 {
							expired = now.UnixMilli() >= o.expireTime
						}
						if expired && !s.hasPendingLocked(id, topic, p) {
							exps = append(exps, exp{id, topic, p})
							recs = append(recs, Record{Key: offsetKey(id, topic, p)})
						} else {
							left++
						}
					}
				}
				if left == 0 && !s.groupHasPendingLocked(id) { // empty (checked above), no offsets left
					gone = append(gone, id)
					recs = append(recs, c.groupTombstonesLocked(g)...)
				}
			}
			return recs, 0
		}
		apply := func() {
			for _, e := range exps {
				s.tombstoneLocked(e.group, e.topic, e.p)
			}
			for _, id := range gone {
				if g := s.groups[id]; g != nil {
					c.removeLocked(g)
				}
			}
		}
		if code := c.write(context.Background(), s, check, apply); code != 0 && code != kerr.NotCoordinator.Code {
			c.cfg.Logger.Warn("coordinator: expiring offsets failed", "partition", s.partition, "error", kerr.ErrorForCode(code))
		}
	}
}

// groupTombstonesLocked returns the records deleting g's own records (not
// its offsets).
func (c *Coordinator) groupTombstonesLocked(g *group) []Record {
	if g.consumer != nil {
		return c.consumerTombstonesLocked(g)
	}
	return []Record{{Key: groupKey(g.id)}}
}

// TopicDeleted removes every group's committed and pending transactional
// offsets of a deleted topic (Kafka's onTopicsDeleted does the same when a
// topic goes away, so a recreated topic does not inherit positions). It writes the tombstones to each loaded
// partition and returns once they are applied; failures are logged.
func (c *Coordinator) TopicDeleted(ctx context.Context, topic string) {
	shards := c.servedShards()
	for _, s := range shards {
		type del struct {
			group string
			p     int32
		}
		var dels []del
		check := func() ([]Record, int16) {
			dels = dels[:0]
			var recs []Record
			for _, id := range sortedKeys(s.groups) {
				ps := map[int32]bool{}
				for p := range s.groups[id].offsets[topic] {
					ps[p] = true
				}
				for _, p := range s.pendingPartitionsLocked(id)[topic] {
					ps[p] = true
				}
				for _, p := range sortedKeys(ps) {
					dels = append(dels, del{id, p})
					recs = append(recs, Record{Key: offsetKey(id, topic, p)})
				}
			}
			return recs, 0
		}
		apply := func() {
			for _, d := range dels {
				s.tombstoneLocked(d.group, topic, d.p)
			}
		}
		if code := c.write(ctx, s, check, apply); code != 0 && code != kerr.NotCoordinator.Code {
			c.cfg.Logger.Warn("coordinator: removing offsets of a deleted topic failed", "topic", topic, "partition", s.partition, "error", kerr.ErrorForCode(code))
		}
	}
}

// servedShards returns the shards loaded now, for passes over all groups.
func (c *Coordinator) servedShards() []*shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	return shards
}

// requestTopic looks up a request's topic by ID (byID: the versions that
// name topics by ID, OffsetCommit v10+, TxnOffsetCommit v6+) or by name.
func (c *Coordinator) requestTopic(byID bool, name string, id [16]byte) (TopicInfo, bool) {
	if byID {
		return c.cfg.Topics.ByID(id)
	}
	return c.cfg.Topics.ByName(name)
}
