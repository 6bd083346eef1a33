package coordinator

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, KIP-447), after Kafka 4's
// OffsetMetadataManager:
//
//   - TxnOffsetCommit writes the offsets as OffsetCommitKey/Value records
//     (the formats OffsetCommit writes) in ONE transactional batch of the
//     producer (TxnLog.AppendTxn) and keeps them as pending offsets of
//     that producer in the shard (shard.pending: Kafka's
//     pendingTransactionalOffsets). OffsetFetch does not return them.
//   - The broker writes the producer's transaction marker to the
//     __consumer_offsets partition (WriteTxnMarkers) and calls CompleteTxn;
//     a replay meets the marker as a control batch. A commit marker
//     materializes the producer's pending offsets, each only if its record
//     is newer in the log than the partition's committed offset (Kafka's
//     replayEndTransactionMarker compares record offsets; shard.seq stands
//     for them); an abort marker drops them.
//   - An offset tombstone deletes the committed offset and every pending
//     offset of that partition (Kafka's OffsetMetadataManager.replay).

// noProducerID is Kafka's RecordBatch.NO_PRODUCER_ID: the producer id of a
// batch that is not transactional.
const noProducerID = -1

// TxnLog is a Log that also writes transactional batches and replays
// batches with their producer and control information.
type TxnLog interface {
	Log
	// AppendTxn writes recs as one transactional batch of the producer
	// (id, epoch) and returns once committed. Errors are Append's; an
	// error wrapping a *kerr.Error of producer fencing
	// (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, INVALID_TXN_STATE,
	// INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE,
	// UNKNOWN_PRODUCER_ID) is answered with that code.
	AppendTxn(ctx context.Context, producerID int64, producerEpoch int16, recs []Record) error
	// ReplayBatches calls fn for every batch from the log start offset to
	// the high watermark in offset order: data batches with their
	// records, control batches (transaction markers) with Control set and
	// Commit the marker type.
	ReplayBatches(fn func(b ReplayBatch) error) error
}

// ReplayBatch is one record batch of a __consumer_offsets partition, as
// TxnLog.ReplayBatches reads it.
type ReplayBatch struct {
	ProducerID    int64 // -1 for non-transactional batches
	Transactional bool
	Control       bool
	Commit        bool
	Records       []Record
}

// pendingOffsets are one producer's pending transactional offsets in a
// shard: group, then topic, then partition.
type pendingOffsets map[string]map[string]map[int32]*committedOffset

// nextSeq returns the sequence number of the offset commit record applied
// now (see shard.seq).
func (s *shard) nextSeq() int64 {
	s.seq++
	return s.seq
}

// addPendingLocked stores o as producerID's pending offset of
// group/topic/partition, creating the group if needed (Kafka creates a
// simple group when it replays an offset commit of an unknown group),
// and stamps o with the next sequence number.
func (c *Coordinator) addPendingLocked(s *shard, producerID int64, group, topic string, partition int32, o *committedOffset) {
	if s.groups[group] == nil {
		newGroup(s, group, c.cfg.Clock.Now())
	}
	o.seq = s.nextSeq()
	if s.pending == nil {
		s.pending = map[int64]pendingOffsets{}
	}
	po := s.pending[producerID]
	if po == nil {
		po = pendingOffsets{}
		s.pending[producerID] = po
	}
	ts := po[group]
	if ts == nil {
		ts = map[string]map[int32]*committedOffset{}
		po[group] = ts
	}
	ps := ts[topic]
	if ps == nil {
		ps = map[int32]*committedOffset{}
		ts[topic] = ps
	}
	ps[partition] = o
}

// hasPendingLocked reports whether some producer has a pending offset for
// group/topic/partition (Kafka's hasPendingTransactionalOffsets). It walks
// the open producers of the shard: few at a time.
func (s *shard) hasPendingLocked(group, topic string, partition int32) bool {
	for _, po := range s.pending {
		if po[group][topic][partition] != nil {
			return true
		}
	}
	return false
}

// groupHasPendingLocked reports whether group has a pending offset of any
// producer (Kafka's openTransactions.contains(groupId)).
func (s *shard) groupHasPendingLocked(group string) bool {
	for _, po := range s.pending {
		if len(po[group]) > 0 {
			return true
		}
	}
	return false
}

// pendingPartitionsLocked returns the topic/partitions of group that have
// a pending offset of some producer, sorted, without duplicates.
func (s *shard) pendingPartitionsLocked(group string) map[string][]int32 {
	seen := map[string]map[int32]bool{}
	for _, po := range s.pending {
		for topic, ps := range po[group] {
			for p := range ps {
				if seen[topic] == nil {
					seen[topic] = map[int32]bool{}
				}
				seen[topic][p] = true
			}
		}
	}
	out := map[string][]int32{}
	for topic, ps := range seen {
		out[topic] = sortedKeys(ps)
	}
	return out
}

// tombstoneLocked applies an offset tombstone: the committed offset of
// group/topic/partition and every producer's pending offset of it go
// (Kafka's OffsetMetadataManager.replay of a null value).
func (s *shard) tombstoneLocked(group, topic string, partition int32) {
	if g := s.groups[group]; g != nil {
		g.deleteOffset(topic, partition)
	}
	for pid, po := range s.pending {
		ts := po[group]
		if ts[topic] == nil {
			continue
		}
		delete(ts[topic], partition)
		if len(ts[topic]) == 0 {
			delete(ts, topic)
		}
		if len(ts) == 0 {
			delete(po, group)
		}
		if len(po) == 0 {
			delete(s.pending, pid)
		}
	}
}

// endTxnLocked applies producerID's transaction marker (Kafka's
// OffsetMetadataManager.replayEndTransactionMarker): its pending offsets
// leave the pending set; on commit each becomes the committed offset of
// its partition unless the committed one's record is newer in the log (a
// plain commit written after the transactional one, before the marker,
// wins). A marker of a producer without pending offsets is a no-op.
func (c *Coordinator) endTxnLocked(s *shard, producerID int64, commit bool) {
	po := s.pending[producerID]
	if po == nil {
		return
	}
	delete(s.pending, producerID)
	if !commit {
		return
	}
	for _, id := range sortedKeys(po) {
		g := s.groups[id]
		if g == nil {
			// Deleted meanwhile by records that left this producer's
			// offsets pending (a KIP-848 group's metadata tombstone):
			// the offsets still commit, into a simple group, as a
			// replay of them would create it.
			g = newGroup(s, id, c.cfg.Clock.Now())
		}
		for topic, ps := range po[id] {
			for p, o := range ps {
				if cur := g.offset(topic, p); cur == nil || o.seq > cur.seq {
					g.putOffset(topic, p, o)
				}
			}
		}
	}
}

// replayBatchLocked applies one batch of a TxnLog's replay: a control
// batch is its producer's transaction marker, a transactional data batch
// holds pending offsets of its producer, any other batch is applied as
// Log.Replay's records are. record applies (or skips, loudly) one record.
func (c *Coordinator) replayBatchLocked(s *shard, b ReplayBatch, record func(Record, int64)) {
	if b.Control {
		if b.ProducerID >= 0 {
			c.endTxnLocked(s, b.ProducerID, b.Commit)
		}
		return
	}
	pid := int64(noProducerID)
	if b.Transactional && b.ProducerID >= 0 {
		pid = b.ProducerID
	}
	for _, r := range b.Records {
		record(r, pid)
	}
}

// CompleteTxn applies the marker of producerID written to
// __consumer_offsets partition p: commit materializes the producer's
// pending offsets in every group of the shard, abort drops them. A
// partition not loaded is a no-op (the next Load replays the marker). It
// waits for the shard's writes in flight (and a Load replaying), so the
// marker applies between whole writes; applying a marker twice (replayed,
// then completed) is a no-op the second time.
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool) {
	c.mu.Lock()
	s := c.shards[p]
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.waitApplied()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.shards[p] != s {
		return
	}
	c.endTxnLocked(s, producerID, commit)
}

// txnFencingCodes are the errors of a transactional append that are the
// producer's, not the coordinator's: TxnOffsetCommit answers them as they
// are (Kafka's coordinator runtime returns the log's error).
var txnFencingCodes = map[int16]bool{
	kerr.InvalidProducerEpoch.Code:     true,
	kerr.ProducerFenced.Code:           true,
	kerr.InvalidTxnState.Code:          true,
	kerr.InvalidProducerIDMapping.Code: true,
	kerr.TransactionAbortable.Code:     true,
	kerr.UnknownProducerID.Code:        true,
}

// TxnOffsetCommit commits offsets in a transaction (TxnOffsetCommit
// v0-v6, Kafka's GroupCoordinatorService.commitTransactionalOffsets and
// OffsetMetadataManager.commitTransactionalOffset). Checks, in Kafka's
// order: unknown topics or partitions (UNKNOWN_TOPIC_OR_PARTITION;
// UNKNOWN_TOPIC_ID for v6+, which names topics by ID) as KafkaApis answers
// them; an empty group id (INVALID_GROUP_ID); the shard
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); a shard whose log
// cannot write transactional batches (not a TxnLog) answers
// UNSUPPORTED_VERSION; then the group (txnCommitCheckLocked) and, per
// partition, metadata longer than offset.metadata.max.bytes
// (OFFSET_METADATA_TOO_LARGE). The accepted partitions are written as one
// transactional batch of the request's producer id and epoch and become
// pending offsets of that producer: OffsetFetch does not see them until
// CompleteTxn (or a replayed marker) commits them. An unknown group with
// generation -1 is created (a simple group), as Kafka does.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	type part struct {
		topic string
		p     *kmsg.TxnOffsetCommitRequestTopicPartition
		rp    *kmsg.TxnOffsetCommitResponseTopicPartition
	}
	names := make([]string, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		info, ok := c.requestTopic(req.Version >= 6, rt.Topic, rt.TopicID)
		names[i] = info.Name
		for j := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rt.Partitions[j].Partition
			switch {
			case !ok && req.Version >= 6:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case !ok || sp.Partition < 0 || sp.Partition >= info.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	var parts []part
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == 0 {
				parts = append(parts, part{topic: names[i], p: &req.Topics[i].Partitions[j], rp: rp})
			}
		}
	}
	setAll := func(code int16) *kmsg.TxnOffsetCommitResponse {
		for _, p := range parts {
			if p.rp.ErrorCode == 0 {
				p.rp.ErrorCode = code
			}
		}
		return resp
	}
	if len(parts) == 0 {
		return resp
	}
	if req.Group == "" {
		return setAll(kerr.InvalidGroupID.Code)
	}
	s, code := c.lookupShard(req.Group)
	if code != 0 {
		return setAll(code)
	}
	tlog, ok := s.log.(TxnLog)
	if !ok {
		return setAll(kerr.UnsupportedVersion.Code)
	}
	// v0-v2 carry no member: they commit as generation -1, no member id.
	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if req.Version >= 3 {
		generation, memberID, instanceID = req.Generation, req.MemberID, req.InstanceID
	}
	now := c.cfg.Clock.Now().UnixMilli()
	var written []part
	var values []*committedOffset
	check := func() ([]Record, int16) {
		written, values = written[:0], values[:0]
		if g := s.groups[req.Group]; g == nil {
			if generation >= 0 {
				return nil, kerr.IllegalGeneration.Code
			}
		} else if code := c.txnCommitCheckLocked(g, generation, memberID, instanceID); code != 0 {
			return nil, code
		}
		var recs []Record
		for _, p := range parts {
			p.rp.ErrorCode = 0
			if p.p.Metadata != nil && len(*p.p.Metadata) > c.cfg.OffsetMetadataMaxBytes {
				p.rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			o := &committedOffset{offset: p.p.Offset, leaderEpoch: -1, commitTime: now, expireTime: -1}
			if req.Version >= 2 {
				o.leaderEpoch = p.p.LeaderEpoch
			}
			if p.p.Metadata != nil {
				o.metadata = *p.p.Metadata
			}
			written = append(written, p)
			values = append(values, o)
			recs = append(recs, offsetRecord(req.Group, p.topic, p.p.Partition, o))
		}
		return recs, 0
	}
	apply := func() {
		for i, p := range written {
			c.addPendingLocked(s, req.ProducerID, req.Group, p.topic, p.p.Partition, values[i])
		}
	}
	var fenced int16
	appendTxn := func(ctx context.Context, recs []Record) error {
		err := tlog.AppendTxn(ctx, req.ProducerID, req.ProducerEpoch, recs)
		var ke *kerr.Error
		if errors.As(err, &ke) && txnFencingCodes[ke.Code] {
			fenced = ke.Code
		}
		return err
	}
	code = c.writeWith(ctx, s, check, apply, appendTxn)
	if code != 0 && fenced != 0 {
		code = fenced
	}
	// A failed write fails every partition it carried, as Kafka's error
	// response does; those refused before it keep their code.
	return setAll(code)
}

// txnCommitCheckLocked validates a transactional offset commit's member
// against g (Kafka's validateTransactionalOffsetCommit, which calls the
// group's validateOffsetCommit with isTransactional set and answers a
// stale member epoch with ILLEGAL_GENERATION).
//
// Classic groups (ClassicGroup.validateOffsetCommit): a dead group answers
// COORDINATOR_NOT_AVAILABLE; generation < 0 into an Empty group is a
// simple commit; a commit naming a generation, member id or instance id
// must name a member (UNKNOWN_MEMBER_ID; FENCED_INSTANCE_ID for a static
// member held by another member id) of the current generation
// (ILLEGAL_GENERATION); a commit naming none is accepted even while the
// group has members (older TxnOffsetCommit versions carry no member), and
// unlike OffsetCommit a group completing a rebalance is no error.
//
// KIP-848 consumer groups (ConsumerGroup.validateOffsetCommit): a negative
// epoch into a group without members, or generation -1 with no member id
// and no instance id, is accepted; otherwise the member must exist
// (UNKNOWN_MEMBER_ID) and commit at its current epoch (ILLEGAL_GENERATION).
func (c *Coordinator) txnCommitCheckLocked(g *group, generation int32, memberID string, instanceID *string) int16 {
	if cg := g.consumer; cg != nil {
		if generation < 0 && cg.isEmpty() {
			return 0
		}
		if generation == -1 && memberID == "" && instanceID == nil {
			return 0
		}
		m := cg.members[memberID]
		switch {
		case m == nil:
			return kerr.UnknownMemberID.Code
		case generation != m.epoch:
			return kerr.IllegalGeneration.Code
		}
		return 0
	}
	cg := g.classic
	if cg == nil {
		cg = newClassicGroup()
	}
	switch {
	case cg.state == classicDead:
		return kerr.CoordinatorNotAvailable.Code
	case generation < 0 && cg.state == classicEmpty:
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := cg.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != cg.generation {
			return kerr.IllegalGeneration.Code
		}
	}
	return 0
}
