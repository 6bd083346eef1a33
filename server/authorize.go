package server

import (
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization (KIP-11, Kafka's Authorizer interface with the semantics
// of org.apache.kafka.metadata.authorizer.StandardAuthorizer). The
// broker asks an Authorizer before serving an action; with no
// authorizer.class.name configured b.authz is nil and every action is
// allowed, as in Kafka.

// Authorizer decides actions. Implementations are safe for concurrent
// use and never block on the network: they read a cache of the ACLs in
// the replicated metadata.
type Authorizer interface {
	// Authorize reports whether principal ("User:alice") connecting from
	// host (an IP address, "127.0.0.1") may perform op on the resource of
	// type rt named name (a topic, group, transactional id, or
	// "kafka-cluster" for the cluster). op and rt are never ANY.
	Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
	// AuthorizeAny reports whether principal may perform op on at least
	// one resource of type rt (Kafka's authorizeByResourceType: an
	// InitProducerId without a transactional id needs IDEMPOTENT_WRITE on
	// the cluster or WRITE on some topic).
	AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool
	// SuperUser reports whether principal is one of super.users, which
	// may do anything (and which the brokers' own principals must be:
	// fromBroker).
	SuperUser(principal string) bool
}

// clusterResource is the name of the one CLUSTER resource (Kafka's
// Resource.CLUSTER_NAME).
const clusterResource = "kafka-cluster"

// host is the IP address of the connection's peer, as ACLs match it
// ("" when unknown).
func (cc *clientConn) host() string {
	if cc == nil || cc.conn == nil {
		return ""
	}
	h, _, err := net.SplitHostPort(cc.conn.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return h
}

// authorized reports whether the connection's principal may perform op
// on the resource. True without an authorizer, for calls from inside the
// broker (cc nil) and for another broker's requests (fromBroker: a super
// user, whom the authorizer allows everything anyway).
func (b *Broker) authorized(cc *clientConn, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil || cc == nil {
		return true
	}
	return b.authz.Authorize(cc.principal(), cc.host(), op, rt, name) || b.fromBroker(cc)
}

// authorizedAny reports whether the connection's principal may perform op
// on some resource of type rt (see Authorizer.AuthorizeAny).
func (b *Broker) authorizedAny(cc *clientConn, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if b.authz == nil || cc == nil {
		return true
	}
	return b.authz.AuthorizeAny(cc.principal(), cc.host(), op, rt) || b.fromBroker(cc)
}

// fromBroker reports whether a connection is another broker's: the
// client id of a broker's clients (brokerClientIDPrefix) and, with an
// authorizer, a principal in super.users, so a client cannot pass for a
// broker by its client id, nor by a CLUSTER_ACTION that an ACL (or
// allow.everyone.if.no.acl.found) gives. A broker's request is trusted:
// the controller serves an admin request a broker forwarded as that
// broker authorized it (admin_authz.go; Kafka carries the client's
// principal in an Envelope instead), a leader hands leadership to the
// preferred replica when a broker asks, and client quotas do not hold
// it. Kafka's KRaft brokers are super users too.
//
// Without an authorizer any connection with a broker's client id passes,
// as in Kafka, where anyone may then act as a broker.
func (b *Broker) fromBroker(cc *clientConn) bool {
	if cc == nil || !strings.HasPrefix(cc.clientID, brokerClientIDPrefix) {
		return false
	}
	return b.authz == nil || b.authz.SuperUser(cc.principal())
}

// supportedOperations are the operations ACLs can grant on each resource
// type (Kafka's AclEntry.supportedOperations): the bits an
// authorized-operations field may hold.
var supportedOperations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite},
}

// authorizedOperations is the authorized-operations bit field (KIP-430)
// of the resource for the connection's principal: bit n set when the
// operation of code n is allowed, over the type's supported operations
// (Kafka's AuthHelper.authorizedOperations; every supported one without
// an authorizer).
func (b *Broker) authorizedOperations(cc *clientConn, rt kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations[rt] {
		if b.authorized(cc, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// authorizer returns a check of op on resources of type rt by name for
// the connection's principal, remembering each name's answer for the
// request it serves (one request names a topic once per partition).
func (b *Broker) authorizer(cc *clientConn, op kmsg.ACLOperation, rt kmsg.ACLResourceType) func(name string) bool {
	if b.authz == nil || cc == nil {
		return func(string) bool { return true }
	}
	seen := map[string]bool{}
	return func(name string) bool {
		ok, done := seen[name]
		if !done {
			ok = b.authorized(cc, op, rt, name)
			seen[name] = ok
		}
		return ok
	}
}
