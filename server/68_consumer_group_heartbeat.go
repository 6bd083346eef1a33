package server

// ConsumerGroupHeartbeat, versions 0-1: the KIP-848 consumer group
// protocol (join, heartbeat and leave in one API; assignment computed by the
// broker). v1 (KIP-1082) has the client choose its member id.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(68, 1, (*coordinator.Coordinator).ConsumerGroupHeartbeat)
}
