package server

// DescribeGroups, versions 0-6. v3 adds authorized operations (Sluice has
// no ACLs), v4 the members' group instance ids, v5 is flexible, v6 reports
// an unknown group with GROUP_ID_NOT_FOUND and an error message.

import "github.com/sluicemq/sluice/coordinator"

func init() {
	coordinated(15, 6, (*coordinator.Coordinator).DescribeGroups)
}
