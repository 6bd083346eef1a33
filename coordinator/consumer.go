package coordinator

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// STUB: the KIP-848 consumer group protocol arrives in this file. The hooks
// below are what the core calls; each runs with Coordinator.mu held.

// consumerGroup is a KIP-848 consumer group's membership state.
type consumerGroup struct{}

func (g *consumerGroup) isEmpty() bool     { return true }
func (g *consumerGroup) shutdown()         {}
func (g *consumerGroup) stateName() string { return "Empty" }

// consumerLoaded runs when g's shard finished replaying.
func (c *Coordinator) consumerLoaded(g *group) {}

// consumerReplay applies a replayed record with key version >= 3 (KIP-848
// consumer group records) to shard s.
func (c *Coordinator) consumerReplay(s *shard, keyVersion int16, r Record) error { return nil }

// consumerCommitCheckLocked validates an offset commit's member and member
// epoch (carried in the generation field) against a consumer group.
func (c *Coordinator) consumerCommitCheckLocked(g *group, version int16, epoch int32, memberID string, instanceID *string) int16 {
	return kerr.UnknownMemberID.Code
}

// consumerFetchCheckLocked validates OffsetFetch v9+'s member id and epoch.
func (c *Coordinator) consumerFetchCheckLocked(g *group, memberID string, epoch int32) int16 {
	return 0
}

// consumerDescribeClassicLocked answers DescribeGroups for a consumer group.
func (c *Coordinator) consumerDescribeClassicLocked(g *group, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.State = g.stateName()
	dg.ProtocolType = "consumer"
	return dg
}

// consumerSubscribedLocked returns the topics g's members subscribe to.
func (c *Coordinator) consumerSubscribedLocked(g *group) map[string]bool { return nil }

// consumerTombstonesLocked returns the tombstones deleting g's consumer
// group records.
func (c *Coordinator) consumerTombstonesLocked(g *group) []Record { return nil }

// ConsumerGroupHeartbeat is ConsumerGroupHeartbeat v0-v1 (KIP-848).
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

// ConsumerGroupDescribe is ConsumerGroupDescribe v0-v1 (KIP-848).
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	return resp
}
