package server

// ACLs and the authorizer (KIP-11, KIP-290's prefixed patterns). The
// engine is meta.Authorizer: Kafka's StandardAuthorizer over the ACLs in
// the replicated metadata (meta/acl.go, record ACLChanged), reading an
// immutable index the metadata swaps as records apply, so a decision
// takes no lock across the network and costs a few map lookups. It lives
// in meta because it needs only the ACLs (meta does not import kmsg);
// aclAuthorizer adapts it to this package's Authorizer (kmsg's enum codes
// are Kafka's, as meta's are: a cast converts). The APIs are
// 29_describe_acls.go, 30_create_acls.go and 31_delete_acls.go.

import (
	"errors"
	"log/slog"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclAuthorizer is the Authorizer of authorizer.class.name =
// config.StandardAuthorizerClass.
type aclAuthorizer struct{ a *meta.Authorizer }

func (x aclAuthorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return x.a.Authorize(principal, host, meta.ACLOperation(op), meta.ACLResourceType(rt), name)
}

func (x aclAuthorizer) AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	return x.a.AuthorizeAny(principal, host, meta.ACLOperation(op), meta.ACLResourceType(rt))
}

func (x aclAuthorizer) SuperUser(principal string) bool { return x.a.SuperUser(principal) }

// newAuthorizer is the authorizer cfg configures over st, nil when
// authorizer.class.name is empty (config.Validate refuses other classes).
func newAuthorizer(cfg *config.Config, st *meta.Store, logger *slog.Logger) Authorizer {
	if !cfg.AuthorizerEnabled() {
		return nil
	}
	supers := meta.ParseSuperUsers(cfg.SuperUsers())
	logger.Info("sluice: authorizer on", "class", config.StandardAuthorizerClass, "super_users", supers,
		"allow_everyone_if_no_acl_found", cfg.AllowEveryoneIfNoACLFound())
	return aclAuthorizer{meta.NewAuthorizer(st, supers, cfg.AllowEveryoneIfNoACLFound())}
}

// errSecurityDisabled is the ACL APIs' answer without an authorizer
// (Kafka's AclApis).
var errSecurityDisabled = kafkaErrorf(kerr.SecurityDisabled, "no authorizer is configured on the broker")

// aclAPIAllowed is the ACL APIs' check: op (ALTER to create or delete,
// DESCRIBE to describe) on the cluster (Kafka's authorizeClusterOperation,
// else CLUSTER_AUTHORIZATION_FAILED). A request a broker forwarded was
// checked there, as its client's principal; the controller takes it from
// a connection whose principal holds CLUSTER_ACTION on the cluster (a
// broker's: Kafka's brokers are super users or hold it, and Kafka carries
// the client's principal in an Envelope instead). A client id alone
// proves nothing.
func (b *Broker) aclAPIAllowed(cc *clientConn, op kmsg.ACLOperation) error {
	if b.fromBroker(cc) {
		return nil
	}
	if !b.authorized(cc, op, kmsg.ACLResourceTypeCluster, clusterResource) {
		return kafkaErrorf(kerr.ClusterAuthorizationFailed, "%s is not authorized for %s on the cluster", cc.principal(), op)
	}
	return nil
}

// aclFilter is a request's filter in meta's terms.
func aclFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) meta.ACLFilter {
	return meta.ACLFilter{ResourceType: meta.ACLResourceType(rt), ResourceName: name, PatternType: meta.ACLPatternType(pt),
		Principal: principal, Host: host, Operation: meta.ACLOperation(op), Permission: meta.ACLPermission(perm)}
}

// aclBinding is a request's ACL in meta's terms.
func aclBinding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) meta.ACLBinding {
	return meta.ACLBinding{ResourceType: meta.ACLResourceType(rt), ResourceName: name, PatternType: meta.ACLPatternType(pt),
		Principal: principal, Host: host, Operation: meta.ACLOperation(op), Permission: meta.ACLPermission(perm)}
}

// aclErr maps the metadata's refusal of an ACL or filter.
func aclErr(err error) error {
	if errors.Is(err, meta.ErrInvalidACL) {
		return kafkaErrorf(kerr.InvalidRequest, "%v", err)
	}
	return err
}
