package server

// DeleteAcls, versions 0-3 (KIP-11; v1 adds the resource pattern type,
// KIP-290; v2 is flexible; v3 adds the USER resource type). Kafka 4
// serves 0-3 (v0 deprecated). Served by the active controller (forwarded
// from any broker after the cluster check here, answered once this
// broker's metadata no longer shows the deleted ACLs), as Kafka's
// AclControlManager.deleteAcls: every ACL a filter selects (meta.ACLFilter)
// is removed, all filters' removals one metadata change; each filter's
// result lists the ACLs it matched (an ACL two filters match is in both).
// A filter with an UNKNOWN field is INVALID_REQUEST. Errors for every
// filter: CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster,
// SECURITY_DISABLED without an authorizer.

import (
	"context"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 31, minVersion: 0, maxVersion: 3, serve: serveDeleteAcls})
}

func serveDeleteAcls(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	failAll := func(err error) (kmsg.Response, error) {
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = kafkaCode(err), errMessage(err)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	if err := b.aclAPIAllowed(cc, kmsg.ACLOperationAlter); err != nil {
		return failAll(err)
	}
	if b.authz == nil {
		return failAll(errSecurityDisabled)
	}
	if fresp, ok, err := b.forward(ctx, cc, req, b.aclsDeleted); ok {
		if err != nil {
			return failAll(err)
		}
		return fresp, nil
	}
	filters := make([]meta.ACLFilter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
	}
	deleted, errs, err := b.meta.DeleteACLs(filters)
	if err != nil {
		return failAll(err)
	}
	n := 0
	for i := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = kafkaCode(aclErr(errs[i])), errMessage(aclErr(errs[i]))
		for _, a := range deleted[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.ResourceName, kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
			n++
		}
		resp.Results = append(resp.Results, r)
	}
	b.logger.Info("sluice: ACLs deleted", "filters", len(filters), "matched", n)
	return resp, nil
}

// aclsDeleted reports whether this broker's metadata no longer shows the
// ACLs a forwarded DeleteAcls removed.
func (b *Broker) aclsDeleted(r kmsg.Response) bool {
	resp, ok := r.(*kmsg.DeleteACLsResponse)
	if !ok {
		return true
	}
	for _, res := range resp.Results {
		for _, m := range res.MatchingACLs {
			if m.ErrorCode == 0 && b.meta.HasACL(aclBinding(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType)) {
				return false
			}
		}
	}
	return true
}
