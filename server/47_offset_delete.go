package server

// OffsetDelete, version 0 (KIP-496): deletes committed offsets of topics a
// group does not subscribe to.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(47, 0, (*coordinator.Coordinator).OffsetDelete)
}
