package server

// JoinGroup, versions 0-9 (the classic group protocol; package coordinator
// has the state machine). v1 adds the rebalance timeout, v4 (KIP-394)
// answers an empty member id with MEMBER_ID_REQUIRED and an id to rejoin
// with, v5 (KIP-345) adds the group instance id, v6 is flexible, v7 returns
// the protocol type and name, v8 adds a reason (KIP-800), v9 (KIP-814)
// skip-assignment. The request waits for the rebalance to complete.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(11, 9, (*coordinator.Coordinator).JoinGroup)
}
