package meta

import (
	"net/netip"
	"strings"
)

// Authorizer decides actions from the ACLs in a Store with the semantics
// of Kafka's StandardAuthorizer (StandardAuthorizerData.authorize and
// Authorizer.authorizeByResourceType). Each call reads the store's
// current ACL set (an immutable index swapped in as ACLChanged records
// apply) and holds no lock while it decides: it is safe for concurrent
// use and never waits on the network. The server wraps it in its own
// Authorizer interface (meta does not import the protocol's types).
type Authorizer struct {
	store       *Store
	superUsers  map[string]bool
	allowIfNone bool
}

// NewAuthorizer returns an authorizer over s's ACLs. superUsers are
// principals ("User:admin") allowed everything (Kafka's super.users);
// allowIfNoACL is Kafka's allow.everyone.if.no.acl.found: the answer
// when no ACL at all applies to the resource (default false: deny).
func NewAuthorizer(s *Store, superUsers []string, allowIfNoACL bool) *Authorizer {
	a := &Authorizer{store: s, superUsers: map[string]bool{}, allowIfNone: allowIfNoACL}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	return a
}

// SuperUser reports whether principal is one of the super users.
func (a *Authorizer) SuperUser(principal string) bool { return a.superUsers[principal] }

// ParseSuperUsers splits Kafka's super.users value: principals separated
// by ';', blanks around each ignored, empty entries dropped
// (StandardAuthorizer.getConfiguredSuperUsers).
func ParseSuperUsers(v string) []string {
	var out []string
	for _, u := range strings.Split(v, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// wildcardPrincipal is Kafka's WILDCARD_KAFKA_PRINCIPAL.
const wildcardPrincipal = "User:*"

// Authorize reports whether principal ("User:alice") from host (an IP
// address) may perform op on the resource of type rt named name. op and
// rt are concrete (not ANY or UNKNOWN). A super user may do anything.
// Otherwise the ACLs that apply to the resource are the LITERAL ones
// named name, the PREFIXED ones whose name prefixes name, and the LITERAL
// "*"; of those, the ones for principal or User:* and for host or "*"
// decide: a DENY for op or ALL denies; else an ALLOW for op or ALL, or an
// ALLOW implying op (READ, WRITE, DELETE, ALTER imply DESCRIBE;
// ALTER_CONFIGS implies DESCRIBE_CONFIGS), allows; else, when no ACL at
// all applies to the resource, the answer is allow.everyone.if.no.acl.found,
// and otherwise deny.
func (a *Authorizer) Authorize(principal, host string, op ACLOperation, rt ACLResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	set := a.store.aclSet()
	var allowed, any bool
	check := func(l []*ACL) (denied bool) {
		for _, x := range l {
			any = true
			switch result(x, principal, host, op) {
			case ACLPermDeny:
				return true
			case ACLPermAllow:
				allowed = true
			}
		}
		return false
	}
	if check(set.byResource[aclResourceKey{rt, ACLPatternLiteral, name}]) {
		return false
	}
	if p := set.prefixed[rt]; len(p) > 0 {
		for i := len(name); i > 0; i-- {
			if p[name[:i]] && check(set.byResource[aclResourceKey{rt, ACLPatternPrefixed, name[:i]}]) {
				return false
			}
		}
	}
	if name != ACLWildcard && check(set.byResource[aclResourceKey{rt, ACLPatternLiteral, ACLWildcard}]) {
		return false
	}
	if allowed {
		return true
	}
	return !any && a.allowIfNone
}

// result is what one ACL says about the action: ACLPermDeny, ACLPermAllow,
// or ACLPermUnknown when it does not apply (StandardAuthorizerData's
// findResult). Implied operations apply to ALLOW ACLs only: a DENY of
// READ does not deny DESCRIBE.
func result(x *ACL, principal, host string, op ACLOperation) ACLPermission {
	if x.Principal != principal && x.Principal != wildcardPrincipal {
		return ACLPermUnknown
	}
	if !hostMatches(x.Host, host) {
		return ACLPermUnknown
	}
	if x.Operation != ACLOpAll && x.Operation != op {
		if x.Permission != ACLPermAllow || !implies(x.Operation, op) {
			return ACLPermUnknown
		}
	}
	return x.Permission
}

// hostMatches reports whether an ACL's host applies to a connection from
// host: "*" matches every host; two IP addresses match when they are the
// same address in any spelling (Kafka compares against
// InetAddress.getHostAddress, whose IPv6 form is uncompressed,
// "2001:db8:0:0:0:0:0:1", while Go writes "2001:db8::1"; an IPv4-mapped
// IPv6 address is its IPv4 address, as in Java); anything else compares
// as a string.
func hostMatches(aclHost, host string) bool {
	if aclHost == ACLWildcard || aclHost == host {
		return true
	}
	a, err := netip.ParseAddr(aclHost)
	if err != nil {
		return false
	}
	h, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return a.Unmap() == h.Unmap()
}

// implies reports whether an ALLOW of have allows want as well.
func implies(have, want ACLOperation) bool {
	switch want {
	case ACLOpDescribe:
		return have == ACLOpRead || have == ACLOpWrite || have == ACLOpDelete || have == ACLOpAlter
	case ACLOpDescribeConfigs:
		return have == ACLOpAlterConfigs
	}
	return false
}

// AuthorizeAny reports whether principal from host may perform op on at
// least one resource of type rt (Kafka's Authorizer.authorizeByResourceType,
// which StandardAuthorizer inherits): true if op is allowed on a resource
// no ACL names (a super user, a LITERAL "*" ALLOW,
// allow.everyone.if.no.acl.found with no applicable ACL); false if a
// LITERAL "*" DENY applies; else true if some ALLOW pattern (for op or
// ALL, no implied operations) is neither denied by a LITERAL DENY of the
// same name nor covered by a PREFIXED DENY of one of its prefixes.
func (a *Authorizer) AuthorizeAny(principal, host string, op ACLOperation, rt ACLResourceType) bool {
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	set := a.store.aclSet()
	type pat struct {
		pt   ACLPatternType
		name string
	}
	var allows []pat
	var wildcardAllow bool
	deny := map[pat]bool{}
	for k, l := range set.byResource {
		if k.rt != rt {
			continue
		}
		for _, x := range l {
			if !hostMatches(x.Host, host) || x.Principal != principal && x.Principal != wildcardPrincipal ||
				x.Operation != op && x.Operation != ACLOpAll {
				continue
			}
			p := pat{k.pt, k.name}
			switch {
			case x.Permission == ACLPermDeny && p == pat{ACLPatternLiteral, ACLWildcard}:
				return false
			case x.Permission == ACLPermDeny:
				deny[p] = true
			case p == pat{ACLPatternLiteral, ACLWildcard}:
				wildcardAllow = true
			default:
				allows = append(allows, p)
			}
		}
	}
	if wildcardAllow {
		return true
	}
next:
	for _, p := range allows {
		if p.pt == ACLPatternLiteral && deny[p] {
			continue
		}
		for i := 1; i <= len(p.name); i++ {
			if deny[pat{ACLPatternPrefixed, p.name[:i]}] {
				continue next
			}
		}
		return true
	}
	return false
}
