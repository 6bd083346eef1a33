package server

// CreateAcls, versions 0-3 (KIP-11; v1 adds the resource pattern type,
// KIP-290; v2 is flexible; v3 adds the USER resource type). Kafka 4
// serves 0-3 (v0 deprecated). Served by the active controller (forwarded
// from any broker after the cluster check here, answered once this
// broker's metadata shows the new ACLs), as Kafka's AclApis and
// AclControlManager: each creation is checked (a CLUSTER resource named
// other than kafka-cluster, an empty name, an ANY/UNKNOWN/MATCH field, a
// principal not "Type:name": INVALID_REQUEST) and the valid ones are
// created as one metadata change; an ACL identical to an existing one
// succeeds without a second copy. Errors for every creation:
// CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster,
// SECURITY_DISABLED without an authorizer.

import (
	"context"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 30, minVersion: 0, maxVersion: 3, serve: serveCreateAcls})
}

func serveCreateAcls(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	errs := make([]error, len(req.Creations))
	answer := func() (kmsg.Response, error) {
		for _, err := range errs {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = kafkaCode(err), errMessage(err)
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	failAll := func(err error) (kmsg.Response, error) {
		for i := range errs {
			errs[i] = err
		}
		return answer()
	}
	if err := b.aclAPIAllowed(cc, kmsg.ACLOperationAlter); err != nil {
		return failAll(err)
	}
	if b.authz == nil {
		return failAll(errSecurityDisabled)
	}
	bindings := make([]meta.ACLBinding, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = aclBinding(c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Principal, c.Host, c.Operation, c.PermissionType)
	}
	if fresp, ok, err := b.forward(ctx, cc, req, func(r kmsg.Response) bool { return b.aclsCreated(bindings, r) }); ok {
		if err != nil {
			return failAll(err)
		}
		return fresp, nil
	}
	var valid []meta.ACLBinding
	var idx []int
	for i, bd := range bindings {
		switch {
		case bd.ResourceType == meta.ACLResourceCluster && bd.ResourceName != clusterResource:
			errs[i] = kafkaErrorf(kerr.InvalidRequest, "the only valid name for the CLUSTER resource is %s", clusterResource)
		case bd.ResourceName == "":
			errs[i] = kafkaErrorf(kerr.InvalidRequest, "invalid empty resource name")
		default:
			valid = append(valid, bd)
			idx = append(idx, i)
		}
	}
	if len(valid) > 0 {
		merrs, err := b.meta.CreateACLs(valid)
		for j, i := range idx {
			if err != nil {
				errs[i] = err
			} else if merrs[j] != nil {
				errs[i] = aclErr(merrs[j])
			}
		}
		b.logger.Info("sluice: ACLs created", "creations", len(valid), "err", err)
	}
	return answer()
}

// aclsCreated reports whether this broker's metadata shows the ACLs a
// forwarded CreateAcls created.
func (b *Broker) aclsCreated(bindings []meta.ACLBinding, r kmsg.Response) bool {
	resp, ok := r.(*kmsg.CreateACLsResponse)
	if !ok {
		return true
	}
	for i, res := range resp.Results {
		if i < len(bindings) && res.ErrorCode == 0 && !b.meta.HasACL(bindings[i]) {
			return false
		}
	}
	return true
}
