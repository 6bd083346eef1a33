package meta

import (
	"fmt"
	"sync"
	"testing"
)

func withHost(b ACLBinding, host string) ACLBinding { b.Host = host; return b }

func newTestAuthorizer(t *testing.T, acls []ACLBinding, super []string, allowIfNone bool) *Authorizer {
	t.Helper()
	s, _ := openTemp(t)
	if len(acls) > 0 {
		errs, err := s.CreateACLs(acls)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("acl %d: %v", i, e)
			}
		}
	}
	return NewAuthorizer(s, super, allowIfNone)
}

type authzCase struct {
	principal, host string
	op              ACLOperation
	rt              ACLResourceType
	name            string
	want            bool
}

func runAuthz(t *testing.T, a *Authorizer, cases []authzCase) {
	t.Helper()
	for _, c := range cases {
		if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("Authorize(%s, %s, op %d, rt %d, %q) = %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}
}

const ip1, ip2 = "192.168.0.1", "192.168.0.2"

// The cases follow StandardAuthorizerTest (testSimpleAuthorizations,
// testDenyPrecedence..., testPrefixAcls, testSuperUsers, ...) in spirit.
func TestAuthorizerSimple(t *testing.T) {
	a := newTestAuthorizer(t, []ACLBinding{
		pre(ACLResourceTopic, "foo", "User:alice", ACLOpAll, ACLPermAllow),
		lit(ACLResourceTopic, "foo_", "User:bob", ACLOpRead, ACLPermAllow),
		pre(ACLResourceTopic, "foo_", "User:bob", ACLOpAll, ACLPermDeny),
		lit(ACLResourceGroup, "*", "User:*", ACLOpDescribe, ACLPermAllow),
		lit(ACLResourceGroup, "admins", "User:*", ACLOpAll, ACLPermDeny),
		withHost(lit(ACLResourceTopic, "hosted", "User:carol", ACLOpWrite, ACLPermAllow), ip1),
		lit(ACLResourceTopic, "implied", "User:dan", ACLOpAlter, ACLPermAllow),
		lit(ACLResourceTopic, "implied", "User:dan", ACLOpAlterConfigs, ACLPermAllow),
		lit(ACLResourceTopic, "denyread", "User:dan", ACLOpRead, ACLPermDeny),
		lit(ACLResourceTopic, "denyread", "User:dan", ACLOpAll, ACLPermAllow),
	}, []string{"User:root"}, false)
	runAuthz(t, a, []authzCase{
		// PREFIXED ALL for alice: every operation on foo*, nothing else.
		{"User:alice", ip1, ACLOpWrite, ACLResourceTopic, "foo", true},
		{"User:alice", ip1, ACLOpRead, ACLResourceTopic, "foobar", true},
		{"User:alice", ip1, ACLOpRead, ACLResourceTopic, "fo", false},
		{"User:alice", ip1, ACLOpRead, ACLResourceGroup, "foo", false},
		// DENY beats ALLOW: bob's LITERAL READ on foo_ loses to the PREFIXED DENY ALL.
		{"User:bob", ip1, ACLOpRead, ACLResourceTopic, "foo_", false},
		// The wildcard resource and wildcard principal.
		{"User:bob", ip1, ACLOpDescribe, ACLResourceGroup, "anygroup", true},
		{"User:bob", ip1, ACLOpRead, ACLResourceGroup, "anygroup", false},
		{"User:bob", ip1, ACLOpDescribe, ACLResourceGroup, "admins", false},
		// Host: the ACL's host only.
		{"User:carol", ip1, ACLOpWrite, ACLResourceTopic, "hosted", true},
		{"User:carol", ip2, ACLOpWrite, ACLResourceTopic, "hosted", false},
		// Implied operations: ALTER implies DESCRIBE, ALTER_CONFIGS DESCRIBE_CONFIGS.
		{"User:dan", ip1, ACLOpDescribe, ACLResourceTopic, "implied", true},
		{"User:dan", ip1, ACLOpDescribeConfigs, ACLResourceTopic, "implied", true},
		{"User:dan", ip1, ACLOpRead, ACLResourceTopic, "implied", false},
		// A DENY of READ does not deny the DESCRIBE that ALL allows.
		{"User:dan", ip1, ACLOpRead, ACLResourceTopic, "denyread", false},
		{"User:dan", ip1, ACLOpDescribe, ACLResourceTopic, "denyread", true},
		{"User:dan", ip1, ACLOpWrite, ACLResourceTopic, "denyread", true},
		// No ACL at all on the resource: denied (allow.everyone.if.no.acl.found=false).
		{"User:dan", ip1, ACLOpRead, ACLResourceTopic, "nothing", false},
		{"User:dan", ip1, ACLOpClusterAction, ACLResourceCluster, "kafka-cluster", false},
		// Super users may do anything, even where a DENY applies.
		{"User:root", ip1, ACLOpAlter, ACLResourceCluster, "kafka-cluster", true},
		{"User:root", ip1, ACLOpRead, ACLResourceTopic, "foo_", true},
		{"User:root", ip1, ACLOpDescribe, ACLResourceGroup, "admins", true},
	})
}

// allow.everyone.if.no.acl.found: allowed only where no ACL applies to the
// resource at all, whoever the ACL is for.
func TestAuthorizerAllowIfNoACL(t *testing.T) {
	a := newTestAuthorizer(t, []ACLBinding{
		lit(ACLResourceTopic, "owned", "User:alice", ACLOpRead, ACLPermAllow),
		pre(ACLResourceTopic, "pre", "User:alice", ACLOpRead, ACLPermAllow),
	}, nil, true)
	runAuthz(t, a, []authzCase{
		{"User:bob", ip1, ACLOpRead, ACLResourceTopic, "free", true},
		{"User:bob", ip1, ACLOpRead, ACLResourceTopic, "owned", false},
		{"User:bob", ip1, ACLOpRead, ACLResourceTopic, "prefix", false},
		{"User:alice", ip1, ACLOpWrite, ACLResourceTopic, "owned", false},
		{"User:alice", ip1, ACLOpRead, ACLResourceTopic, "owned", true},
		{"User:bob", ip1, ACLOpRead, ACLResourceGroup, "owned", true},
	})
}

// The authorizer sees creations and deletions as they apply, reading
// concurrently with them.
func TestAuthorizerFollowsChanges(t *testing.T) {
	s, _ := openTemp(t)
	a := NewAuthorizer(s, nil, false)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				a.Authorize("User:x", ip1, ACLOpRead, ACLResourceTopic, "t3")
				a.AuthorizeAny("User:x", ip1, ACLOpRead, ACLResourceTopic)
			}
		}
	}()
	for i := range 5 {
		b := lit(ACLResourceTopic, fmt.Sprintf("t%d", i), "User:x", ACLOpRead, ACLPermAllow)
		if errs, err := s.CreateACLs([]ACLBinding{b}); err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
		if !a.Authorize("User:x", ip1, ACLOpRead, ACLResourceTopic, b.ResourceName) {
			t.Fatalf("%s not allowed after create", b.ResourceName)
		}
	}
	f := anyFilter
	f.ResourceName = strp("t3")
	if _, errs, err := s.DeleteACLs([]ACLFilter{f}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	close(stop)
	wg.Wait()
	if a.Authorize("User:x", ip1, ACLOpRead, ACLResourceTopic, "t3") {
		t.Fatal("t3 allowed after delete")
	}
	if !a.Authorize("User:x", ip1, ACLOpRead, ACLResourceTopic, "t2") {
		t.Fatal("t2 not allowed")
	}
}

// AuthorizeAny follows Kafka's authorizeByResourceType (and the cases of
// AuthorizerTest's testAuthorizeByResourceType*).
func TestAuthorizerAny(t *testing.T) {
	for _, tc := range []struct {
		name        string
		acls        []ACLBinding
		allowIfNone bool
		principal   string
		want        bool
	}{
		{"no acls", nil, false, "User:a", false},
		{"no acls, allow if none", nil, true, "User:a", true},
		{"super user", nil, false, "User:root", true},
		{"literal allow", []ACLBinding{lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermAllow)}, false, "User:a", true},
		{"other principal", []ACLBinding{lit(ACLResourceTopic, "t", "User:b", ACLOpWrite, ACLPermAllow)}, false, "User:a", false},
		{"wildcard principal", []ACLBinding{lit(ACLResourceTopic, "t", "User:*", ACLOpWrite, ACLPermAllow)}, false, "User:a", true},
		{"all op", []ACLBinding{pre(ACLResourceTopic, "t", "User:a", ACLOpAll, ACLPermAllow)}, false, "User:a", true},
		{"other op", []ACLBinding{lit(ACLResourceTopic, "t", "User:a", ACLOpRead, ACLPermAllow)}, false, "User:a", false},
		{"literal deny same name", []ACLBinding{
			lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermAllow),
			lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermDeny)}, false, "User:a", false},
		{"prefixed deny covers", []ACLBinding{
			lit(ACLResourceTopic, "topic1", "User:a", ACLOpWrite, ACLPermAllow),
			pre(ACLResourceTopic, "top", "User:a", ACLOpWrite, ACLPermDeny)}, false, "User:a", false},
		{"prefixed deny elsewhere", []ACLBinding{
			lit(ACLResourceTopic, "topic1", "User:a", ACLOpWrite, ACLPermAllow),
			pre(ACLResourceTopic, "other", "User:a", ACLOpWrite, ACLPermDeny)}, false, "User:a", true},
		{"wildcard deny", []ACLBinding{
			lit(ACLResourceTopic, "*", "User:a", ACLOpWrite, ACLPermAllow),
			lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermAllow),
			lit(ACLResourceTopic, "*", "User:a", ACLOpWrite, ACLPermDeny)}, false, "User:a", false},
		{"wildcard allow beats prefixed deny", []ACLBinding{
			lit(ACLResourceTopic, "*", "User:a", ACLOpWrite, ACLPermAllow),
			pre(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermDeny)}, false, "User:a", true},
		{"other type", []ACLBinding{lit(ACLResourceGroup, "t", "User:a", ACLOpWrite, ACLPermAllow)}, false, "User:a", false},
		{"other host", []ACLBinding{withHost(lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermAllow), ip2)}, false, "User:a", false},
	} {
		a := newTestAuthorizer(t, tc.acls, []string{"User:root"}, tc.allowIfNone)
		if got := a.AuthorizeAny(tc.principal, ip1, ACLOpWrite, ACLResourceTopic); got != tc.want {
			t.Errorf("%s: AuthorizeAny = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An IPv6 ACL host matches the connection's address however either is
// written: Kafka's tools write the uncompressed form Java prints, Go's
// connection host is compressed.
func TestAuthorizerIPv6Host(t *testing.T) {
	a := newTestAuthorizer(t, []ACLBinding{
		lit(ACLResourceTopic, "t", "User:a", ACLOpAll, ACLPermAllow),
		withHost(lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermDeny), "2001:db8:0:0:0:0:0:1"),
		withHost(lit(ACLResourceTopic, "t", "User:a", ACLOpRead, ACLPermDeny), "10.0.0.7"),
		withHost(lit(ACLResourceTopic, "t", "User:a", ACLOpDelete, ACLPermDeny), "client.example"),
	}, nil, false)
	runAuthz(t, a, []authzCase{
		{"User:a", "2001:db8::1", ACLOpWrite, ACLResourceTopic, "t", false},
		{"User:a", "2001:DB8:0::1", ACLOpWrite, ACLResourceTopic, "t", false},
		{"User:a", "2001:db8::2", ACLOpWrite, ACLResourceTopic, "t", true},
		{"User:a", "::ffff:10.0.0.7", ACLOpRead, ACLResourceTopic, "t", false},
		{"User:a", "10.0.0.8", ACLOpRead, ACLResourceTopic, "t", true},
		{"User:a", "client.example", ACLOpDelete, ACLResourceTopic, "t", false},
		{"User:a", "other.example", ACLOpDelete, ACLResourceTopic, "t", true},
	})
	if a.AuthorizeAny("User:b", "2001:db8::1", ACLOpWrite, ACLResourceTopic) {
		t.Error("AuthorizeAny for a principal without ACLs = true")
	}
	b := newTestAuthorizer(t, []ACLBinding{
		withHost(lit(ACLResourceTopic, "t", "User:a", ACLOpWrite, ACLPermAllow), "2001:db8:0:0:0:0:0:1"),
	}, nil, false)
	if !b.AuthorizeAny("User:a", "2001:db8::1", ACLOpWrite, ACLResourceTopic) {
		t.Error("AuthorizeAny with an uncompressed IPv6 ALLOW host = false")
	}
}

func TestParseSuperUsers(t *testing.T) {
	got := ParseSuperUsers(" User:a ;User:b;; ")
	if len(got) != 2 || got[0] != "User:a" || got[1] != "User:b" {
		t.Fatalf("ParseSuperUsers = %q", got)
	}
	if ParseSuperUsers("") != nil {
		t.Fatal("empty super.users")
	}
}
