package server

// OffsetFetch, versions 0-10. v2 fetches every committed offset of a group
// when the topic list is null and adds a top-level error, v5 returns leader
// epochs, v6 is flexible, v7 adds require_stable (KIP-447; Sluice has no
// pending transactional offsets, so it changes nothing), v8 batches groups,
// v9 (KIP-848) names the member and epoch, v10 names topics by ID.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(9, 10, (*coordinator.Coordinator).OffsetFetch)
}
