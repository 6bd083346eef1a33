package server

// ConsumerGroupDescribe, versions 0-1 (KIP-848): members, epochs and
// assignments of consumer groups.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(69, 1, (*coordinator.Coordinator).ConsumerGroupDescribe)
}
