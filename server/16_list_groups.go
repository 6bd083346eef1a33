package server

// ListGroups, versions 0-5. v3 is flexible, v4 (KIP-518) filters by
// state, v5 (KIP-848) by type (classic, consumer).

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(16, 5, (*coordinator.Coordinator).ListGroups)
}
