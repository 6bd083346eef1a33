package server

// DeleteGroups, versions 0-2: groups without members, with their offsets.
// v2 is flexible.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(42, 2, (*coordinator.Coordinator).DeleteGroups)
}
