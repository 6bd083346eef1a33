package server

// SyncGroup, versions 0-5 (classic groups). The leader sends the
// assignment, followers wait for it. v3 adds the group instance id, v4 is
// flexible, v5 checks the protocol type and name (KIP-559).

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(14, 5, (*coordinator.Coordinator).SyncGroup)
}
