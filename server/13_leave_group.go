package server

// LeaveGroup, versions 0-5 (classic groups). v3 (KIP-345) leaves a batch
// of members by member id or group instance id with an answer each, v4 is
// flexible, v5 adds a reason (KIP-800).

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(13, 5, (*coordinator.Coordinator).LeaveGroup)
}
