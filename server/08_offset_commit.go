package server

// OffsetCommit, versions 0-10 (package coordinator has the rules). v1 adds
// the generation and member id and a per-partition commit timestamp, v2-v4
// a retention time (an explicit expiry), v6 the leader epoch, v7 (KIP-345)
// the group instance id, v8 is flexible, v9 (KIP-848) carries a consumer
// group's member epoch in the generation field and answers
// GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH, v10 (KIP-848) names topics by
// ID.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(8, 10, (*coordinator.Coordinator).OffsetCommit)
}
