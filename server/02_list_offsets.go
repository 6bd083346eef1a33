package server

// ListOffsets, versions 1-8. v1 is the first with a single offset per
// timestamp; v2 adds the isolation level; v4 adds leader epochs; v6 is
// flexible; v7 accepts -3 (the max timestamp, KIP-734); v8 -4 (local log
// start, tiered storage: the same as -2 here).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 2, minVersion: 1, maxVersion: 8, serve: serveListOffsets})
}

// specialTimestampVersion is the first ListOffsets version that may ask
// for each special timestamp: -3 the max timestamp (KIP-734), -4 the local
// log start (KIP-1005), -5 the earliest pending upload (v9, not served:
// always refused).
var specialTimestampVersion = map[int64]int16{-3: 7, -4: 8, -5: 9}

func serveListOffsets(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	if req.ReplicaID != debuggingReplicaID {
		awaitTopicLeases(ctx, b, req.Topics, func(t kmsg.ListOffsetsRequestTopic) (string, []int32) {
			var ps []int32
			for _, p := range t.Partitions {
				ps = append(ps, p.Partition)
			}
			return t.Topic, ps
		})
	}
	// Kafka's KafkaApis.handleListOffsetRequest: DESCRIBE on each topic,
	// checked before existence.
	describable := b.authorizer(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, 0
			if !describable(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			part, ok := b.partition(rt.Topic, rp.Partition)
			if !ok {
				sp.ErrorCode = b.missingPartitionCode(rt.Topic, rp.Partition)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if req.Version >= 4 {
				if err := part.CheckLeaderEpoch(rp.CurrentLeaderEpoch); err != nil {
					sp.ErrorCode = kafkaCode(err)
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			// Kafka's debugging replica id (-2) may ask any replica, which
			// answers from its own log (its log end offset for latest).
			debug := req.ReplicaID == debuggingReplicaID
			if err := b.notLeader(part, "ListOffsets"); err != nil && !debug {
				sp.ErrorCode = kafkaCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if minVersion, special := specialTimestampVersion[rp.Timestamp]; special && req.Version < minVersion {
				// ReplicaManager.isListOffsetsTimestampUnsupported.
				sp.ErrorCode = kerr.UnsupportedVersion.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			// A read_committed lookup by timestamp (-3 too) finds no
			// offset at or past the last stable offset, taken before the
			// lookup (Kafka's ReplicaManager.fetchOffset against
			// Partition.fetchOffsetForTimestamp's lastFetchableOffset:
			// timestamp and offset -1, no error).
			stable := int64(-1)
			if req.IsolationLevel == 1 && !debug {
				stable = part.LastStableOffset()
			}
			visible := func(off int64) bool { return stable < 0 || off < stable }
			switch rp.Timestamp {
			// The epoch returned is the leader epoch of the batch holding
			// the offset (the latest epoch for the latest offset), as
			// Kafka's fetchOffsetForTimestamp answers.
			case -1: // latest: the high watermark (read_committed: the last stable offset)
				sp.Offset = part.HighWatermark()
				if req.IsolationLevel == 1 {
					sp.Offset = part.LastStableOffset()
				}
				if debug {
					sp.Offset = part.LogEndOffset()
				}
				sp.LeaderEpoch = part.LatestEpoch()
			case -2, -4: // earliest
				sp.Offset = part.LogStartOffset()
				sp.LeaderEpoch = part.EpochOf(sp.Offset)
			case -3:
				if ts, off, found, err := part.MaxTimestamp(); err != nil {
					sp.ErrorCode = kafkaCode(err)
				} else if found && visible(off) {
					sp.Timestamp, sp.Offset, sp.LeaderEpoch = ts, off, part.EpochOf(off)
				}
			default:
				if off, ts, found, err := part.OffsetForTimestamp(rp.Timestamp); err != nil {
					sp.ErrorCode = kafkaCode(err)
				} else if found && visible(off) {
					sp.Timestamp, sp.Offset, sp.LeaderEpoch = ts, off, part.EpochOf(off)
				}
			}
			if !debug && sp.ErrorCode == 0 {
				// The lease again, after the offset was taken (readlease.go).
				if err := b.notLeader(part, "ListOffsets"); err != nil {
					sp.Timestamp, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = -1, -1, 0, kafkaCode(err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// debuggingReplicaID is ListOffsets' ReplicaID of a debugging tool
// (Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID): served by any replica.
const debuggingReplicaID = -2
