package server

// DescribeAcls, versions 0-3 (KIP-11; v1 adds the resource pattern type,
// KIP-290; v2 is flexible; v3 adds the USER resource type). Kafka 4
// serves 0-3 (v0 deprecated). Served by any broker from its own metadata
// (Kafka's AclApis.handleDescribeAcls over the authorizer's cache): the
// ACLs the filter selects (meta.ACLFilter: ANY names the exact pattern,
// MATCH every pattern that applies to the name), grouped by resource
// pattern. Errors: CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the
// cluster; SECURITY_DISABLED without an authorizer; INVALID_REQUEST for a
// filter with an UNKNOWN field (Kafka fails such a request at parse).

import (
	"context"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 29, minVersion: 0, maxVersion: 3, serve: serveDescribeAcls})
}

func serveDescribeAcls(_ context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(err error) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = kafkaCode(err), errMessage(err)
		return resp, nil
	}
	if err := b.aclAPIAllowed(cc, kmsg.ACLOperationDescribe); err != nil {
		return fail(err)
	}
	if b.authz == nil {
		return fail(errSecurityDisabled)
	}
	f := aclFilter(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if err := meta.ValidateACLFilter(f); err != nil {
		return fail(aclErr(err))
	}
	for _, a := range b.meta.ACLs(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(a.ResourceType) ||
			resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(a.PatternType) || resp.Resources[n-1].ResourceName != a.ResourceName {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.ResourceName, kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, r)
			n++
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host = a.Principal, a.Host
		acl.Operation, acl.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, acl)
	}
	return resp, nil
}
