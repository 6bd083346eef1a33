package coordinator

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// STUB: the classic group protocol arrives in this file. The hooks below
// are what the core (coordinator.go, offsets.go, groups.go, records.go)
// calls; each runs with Coordinator.mu held unless its name says otherwise.

// classicGroup is a classic (JoinGroup/SyncGroup) group's membership state.
type classicGroup struct{}

// isEmpty reports whether the group has no members.
func (g *classicGroup) isEmpty() bool { return true }

// shutdown stops the group's timers and answers its waiting requests
// (COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR) when the group is removed,
// its shard unloaded, or the coordinator closed.
func (g *classicGroup) shutdown() {}

// stateName is Empty, PreparingRebalance, CompletingRebalance, Stable or Dead.
func (g *classicGroup) stateName() string { return "Empty" }

// protocolType is the members' protocol type ("consumer", "connect", ...).
func (g *classicGroup) protocolType() string { return "" }

// classicLoaded runs when g's shard finished replaying (start member
// session timers).
func (c *Coordinator) classicLoaded(g *group) {}

// classicReplay applies a replayed GroupMetadataValue to g.
func (c *Coordinator) classicReplay(g *group, v *kmsg.GroupMetadataValue) {}

// classicCommitCheckLocked validates an offset commit's member against a
// classic group (g.classic may be nil: a group known only by its offsets).
func (c *Coordinator) classicCommitCheckLocked(g *group, version int16, generation int32, memberID string, instanceID *string) int16 {
	if generation < 0 && memberID == "" {
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// classicDescribeLocked describes g for DescribeGroups.
func (c *Coordinator) classicDescribeLocked(g *group, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.State = g.stateName()
	dg.ProtocolType = g.protocolType()
	return dg
}

// classicSubscribedLocked returns the topics g's members subscribe to, for
// OffsetDelete, or NON_EMPTY_GROUP when g has members of a protocol whose
// subscriptions Sluice cannot read.
func (c *Coordinator) classicSubscribedLocked(g *group) (map[string]bool, int16) {
	return nil, 0
}

// JoinGroup is JoinGroup v0-v9.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

// SyncGroup is SyncGroup v0-v5.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

// Heartbeat is Heartbeat v0-v4.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

// LeaveGroup is LeaveGroup v0-v5.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}
