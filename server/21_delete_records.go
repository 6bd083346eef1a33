package server

// DeleteRecords, versions 0-2. v1 adds the throttle time; v2 is flexible.
// Each partition's log start offset moves up to the requested offset (-1:
// the high watermark); the answer's low watermark is the new log start
// offset. An offset past the high watermark is OFFSET_OUT_OF_RANGE; one at
// or below the log start offset changes nothing.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 21, minVersion: 0, maxVersion: 2, serve: serveDeleteRecords})
}

func serveDeleteRecords(ctx context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			lw, err := b.deleteRecords(ctx, req.TimeoutMillis, rt.Topic, rp.Partition, rp.Offset)
			sp.LowWatermark = lw
			if err != nil {
				sp.LowWatermark = -1
				sp.ErrorCode = kafkaCode(err)
				if sp.ErrorCode == kerr.KafkaStorageError.Code {
					b.logger.Error("sluice: delete records failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// deleteRecords moves one partition's log start offset up to offset (-1:
// the high watermark) and returns the log start offset; the partition
// applies Kafka's rules (replica.Partition.DeleteRecords).
//
// In a cluster the leader replicates the deletion through raft and
// returns once it is committed and applied, waiting at most timeoutMs
// (the request's; REQUEST_TIMED_OUT after, the deletion may still apply).
func (b *Broker) deleteRecords(ctx context.Context, timeoutMs int32, topic string, p int32, offset int64) (int64, error) {
	part, ok := b.partition(topic, p)
	if !ok {
		switch b.missingPartitionCode(topic, p) {
		case kerr.KafkaStorageError.Code:
			return -1, kafkaErrorf(kerr.KafkaStorageError, "partition %s-%d is offline", topic, p)
		case kerr.NotLeaderForPartition.Code:
			return -1, kafkaErrorf(kerr.NotLeaderForPartition, "partition %s-%d is not on this broker; it goes to the partition leader", topic, p)
		}
		return -1, kafkaErrorf(kerr.UnknownTopicOrPartition, "no partition %s-%d", topic, p)
	}
	if timeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
		defer cancel()
	}
	lw, err := part.DeleteRecordsContext(ctx, offset)
	if errors.Is(err, context.DeadlineExceeded) {
		return -1, kafkaErrorf(kerr.RequestTimedOut, "partition %s-%d: the deletion was not committed within %d ms", topic, p, timeoutMs)
	}
	return lw, err
}
