package server

// OffsetForLeaderEpoch, versions 0-4 (KIP-101, KIP-279). v1 returns the
// leader epoch found; v2 checks the client's current leader epoch; v3
// adds the replica id; v4 is flexible. For each partition it answers the
// largest leader epoch <= the requested one and the offset where the next
// epoch starts (the log end offset for the current epoch), from the
// partition's leader epoch cache.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 23, minVersion: 0, maxVersion: 4, serve: serveOffsetForLeaderEpoch})
}

func serveOffsetForLeaderEpoch(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	awaitTopicLeases(ctx, b, req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) (string, []int32) {
		var ps []int32
		for _, p := range t.Partitions {
			ps = append(ps, p.Partition)
		}
		return t.Topic, ps
	})
	// Kafka's KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION
	// (a broker) may ask for any topic, anyone else needs DESCRIBE on it.
	describable := b.authorizer(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	if b.authorized(cc, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, clusterResource) {
		describable = func(string) bool { return true }
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			part, ok := b.partition(rt.Topic, rp.Partition)
			switch {
			case !describable(rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !ok:
				sp.ErrorCode = b.missingPartitionCode(rt.Topic, rp.Partition)
			case req.Version >= 2 && part.CheckLeaderEpoch(rp.CurrentLeaderEpoch) != nil:
				sp.ErrorCode = kafkaCode(part.CheckLeaderEpoch(rp.CurrentLeaderEpoch))
			case b.notLeader(part, "OffsetForLeaderEpoch") != nil:
				sp.ErrorCode = kafkaCode(b.notLeader(part, "OffsetForLeaderEpoch"))
			default:
				// From the log's leader epochs (Kafka's
				// LeaderEpochFileCache.endOffsetFor): -1/-1 for an
				// epoch newer than any the log has.
				sp.LeaderEpoch, sp.EndOffset = part.EndOffsetForEpoch(rp.LeaderEpoch)
				if err := b.notLeader(part, "OffsetForLeaderEpoch"); err != nil {
					// The lease again, after the answer was taken
					// (readlease.go).
					sp.LeaderEpoch, sp.EndOffset, sp.ErrorCode = -1, -1, kafkaCode(err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
