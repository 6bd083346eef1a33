package server

// Heartbeat, versions 0-4 (classic groups). v3 adds the group instance id
// (KIP-345), v4 is flexible.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(12, 4, (*coordinator.Coordinator).Heartbeat)
}
