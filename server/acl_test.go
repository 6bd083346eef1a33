package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

var aclSets = []string{"authorizer.class.name=" + config.StandardAuthorizerClass, "super.users=User:admin"}

// saslAdmin is a kadm client logged in as user (PLAIN, saslJaas's users).
func saslAdmin(t *testing.T, addr, user, pass string) *kadm.Client {
	return kadm.NewClient(newClient(t, addr, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()), kgo.RequestRetries(0)))
}

// aclStrings describes every ACL the filter b selects, as
// "type:pattern:name principal host op perm", sorted.
func aclStrings(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, r := range res {
		if r.Err != nil {
			return nil, r.Err
		}
		for _, d := range r.Described {
			out = append(out, fmt.Sprintf("%s:%s:%s %s %s %s %s", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
		}
	}
	slices.Sort(out)
	return out, nil
}

func createACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// anyACLs is the filter of every ACL.
func anyACLs() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
		Allow().Deny().AllowHosts().DenyHosts()
}

// allowedTo is the filter of principal's ALLOW ACLs.
func allowedTo(principal string) *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().Allow(principal).AllowHosts()
}

// TestACLAPIs: CreateAcls, DescribeAcls and DeleteAcls with kadm against a
// broker with the StandardAuthorizer and a SASL PLAIN super user: who may
// call them, Kafka's filters, identical ACLs, a restart.
func TestACLAPIs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, plainAddr, addr := startSaslBroker(t, dir, aclSets...)
	admin := saslAdmin(t, addr, "admin", "admin-secret")
	alice := saslAdmin(t, addr, "alice", "alice-secret")
	anon := kadm.NewClient(newClient(t, plainAddr, kgo.RequestRetries(0)))

	// Not a super user, no ACL: CLUSTER_AUTHORIZATION_FAILED for all three.
	for name, c := range map[string]*kadm.Client{"alice": alice, "anonymous": anon} {
		err := createACLs(t, c, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead))
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("%s CreateAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
		}
		if _, err := aclStrings(t, c, anyACLs()); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("%s DescribeAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.DeleteACLs(ctx, anyACLs())
		cancel()
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("%s DeleteAcls: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", name, err, res)
		}
	}

	for _, bld := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite),
		kadm.NewACLs().Deny("User:*").DenyHosts("10.0.0.1").Topics("*").Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:alice").Groups("g").Operations(kadm.OpRead),
	} {
		if err := createACLs(t, admin, bld); err != nil {
			t.Fatalf("admin CreateAcls: %v", err)
		}
	}
	all := []string{
		"CLUSTER:LITERAL:kafka-cluster User:alice * DESCRIBE ALLOW",
		"GROUP:LITERAL:g User:alice * READ ALLOW",
		"TOPIC:LITERAL:* User:* 10.0.0.1 ALL DENY",
		"TOPIC:LITERAL:orders User:alice * READ ALLOW",
		"TOPIC:PREFIXED:ord User:alice * WRITE ALLOW",
	}
	check := func(what string, c *kadm.Client, f *kadm.ACLBuilder, want []string) {
		t.Helper()
		got, err := aclStrings(t, c, f)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %v %q\nwant %q", what, err, got, want)
		}
	}
	check("any", admin, anyACLs(), all)
	topic := func(name string, pt kadm.ACLPattern) *kadm.ACLBuilder {
		return kadm.NewACLs().Topics(name).ResourcePatternType(pt).Operations().Allow().Deny().AllowHosts().DenyHosts()
	}
	check("MATCH orders", admin, topic("orders", kadm.ACLPatternMatch), []string{all[2], all[3], all[4]})
	check("MATCH other", admin, topic("other", kadm.ACLPatternMatch), []string{all[2]})
	check("ANY ord", admin, topic("ord", kadm.ACLPatternAny), []string{all[4]})
	check("LITERAL orders", admin, topic("orders", kadm.ACLPatternLiteral), []string{all[3]})
	check("PREFIXED orders", admin, topic("orders", kadm.ACLPatternPrefixed), []string{})
	check("principal", admin, allowedTo("User:alice"), []string{all[0], all[1], all[3], all[4]})

	// alice now holds DESCRIBE on the cluster through an ACL: she may
	// describe ACLs, and still not create them (that needs ALTER).
	check("alice describes", alice, anyACLs(), all)
	if err := createACLs(t, alice, kadm.NewACLs().Allow("User:alice").Topics("x").Operations(kadm.OpRead)); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice CreateAcls with DESCRIBE only: %v", err)
	}
	// An identical ACL is one ACL.
	if err := createACLs(t, admin, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead)); err != nil {
		t.Fatalf("identical ACL: %v", err)
	}
	check("after identical", admin, anyACLs(), all)

	// Bad bindings: INVALID_REQUEST each, the good one created.
	req := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []struct {
		rt        kmsg.ACLResourceType
		name      string
		principal string
		pt        kmsg.ACLResourcePatternType
	}{
		{kmsg.ACLResourceTypeCluster, "not-the-cluster", "User:x", kmsg.ACLResourcePatternTypeLiteral},
		{kmsg.ACLResourceTypeTopic, "", "User:x", kmsg.ACLResourcePatternTypeLiteral},
		{kmsg.ACLResourceTypeTopic, "t", "nocolon", kmsg.ACLResourcePatternTypeLiteral},
		{kmsg.ACLResourceTypeTopic, "t", "User:x", kmsg.ACLResourcePatternTypeMatch},
		{kmsg.ACLResourceTypeAny, "t", "User:x", kmsg.ACLResourcePatternTypeLiteral},
		{kmsg.ACLResourceTypeTopic, "t", "User:x", kmsg.ACLResourcePatternTypeLiteral},
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = c.rt, c.name, c.pt
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = c.principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw := newClient(t, addr, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	resp, err := req.RequestWith(ctx, raw)
	if err != nil || len(resp.Results) != 6 {
		t.Fatalf("raw CreateAcls: %v %+v", err, resp)
	}
	for i, r := range resp.Results {
		want := kerr.InvalidRequest.Code
		if i == 5 {
			want = 0
		}
		if r.ErrorCode != want {
			t.Errorf("creation %d: code %d, want %d", i, r.ErrorCode, want)
		}
	}
	all = append(all, "TOPIC:LITERAL:t User:x * READ ALLOW")
	slices.Sort(all)

	// A client calling itself a broker is still alice.
	spoof := kadm.NewClient(newClient(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.ClientID(brokerClientIDPrefix+"1"), kgo.RequestRetries(0)))
	if err := createACLs(t, spoof, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAlter)); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice with a broker's client id: %v", err)
	}

	// Codes Kafka does not know, UNKNOWN filter fields: INVALID_REQUEST
	// per creation and filter; the broker serves on.
	creq := kmsg.NewPtrCreateACLsRequest()
	for _, f := range []func(*kmsg.CreateACLsRequestCreation){
		func(c *kmsg.CreateACLsRequestCreation) { c.Operation = 99 },
		func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = 99 },
		func(c *kmsg.CreateACLsRequestCreation) { c.PermissionType = kmsg.ACLPermissionTypeAny },
		func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = 99 },
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeTopic, "t", "User:x", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		f(&cr)
		creq.Creations = append(creq.Creations, cr)
	}
	if cresp, err := creq.RequestWith(ctx, raw); err != nil || len(cresp.Results) != 4 {
		t.Fatalf("odd creations: %v %+v", err, cresp)
	} else {
		for i, r := range cresp.Results {
			if r.ErrorCode != kerr.InvalidRequest.Code {
				t.Errorf("odd creation %d: code %d", i, r.ErrorCode)
			}
		}
	}
	delreq := kmsg.NewPtrDeleteACLsRequest()
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationUnknown, 99} {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, op, kmsg.ACLPermissionTypeAny
		delreq.Filters = append(delreq.Filters, f)
	}
	if dresp, err := delreq.RequestWith(ctx, raw); err != nil || len(dresp.Results) != 2 ||
		dresp.Results[0].ErrorCode != kerr.InvalidRequest.Code || dresp.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("odd delete filters: %v %+v", err, dresp)
	}
	// Version 0 (no pattern type: LITERAL) still works.
	v0 := kmsg.NewPtrDescribeACLsRequest()
	v0.ResourceType, v0.ResourceName, v0.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeLiteral
	v0.Operation, v0.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if r, err := raw.Request(ctx, pinnedRequest{v0, 0}); err != nil {
		t.Fatalf("DescribeAcls v0: %v", err)
	} else if resp := r.(*kmsg.DescribeACLsResponse); resp.ErrorCode != 0 || len(resp.Resources) != 1 || len(resp.Resources[0].ACLs) != 1 {
		t.Fatalf("DescribeAcls v0: %+v", resp)
	}

	// A filter with an UNKNOWN field: INVALID_REQUEST.
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType, dreq.Operation, dreq.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationUnknown, kmsg.ACLPermissionTypeAny
	if dresp, err := dreq.RequestWith(ctx, raw); err != nil || dresp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("UNKNOWN operation filter: %v %+v", err, dresp)
	}

	// The ACLs survive a restart.
	b.Close()
	_, _, addr = startSaslBroker(t, dir, aclSets...)
	admin = saslAdmin(t, addr, "admin", "admin-secret")
	check("after restart", admin, anyACLs(), all)

	// Delete alice's ACLs: each filter reports what it matched.
	dres, err := admin.DeleteACLs(ctx, allowedTo("User:alice"))
	if err != nil || len(dres) != 1 || dres[0].Err != nil || len(dres[0].Deleted) != 4 {
		t.Fatalf("DeleteAcls: %v %+v", err, dres)
	}
	check("after delete", admin, anyACLs(), []string{
		"TOPIC:LITERAL:* User:* 10.0.0.1 ALL DENY",
		"TOPIC:LITERAL:t User:x * READ ALLOW",
	})
}

// TestACLAPIsSecurityDisabled: without authorizer.class.name the ACL APIs
// answer SECURITY_DISABLED (Kafka's AclApis).
func TestACLAPIsSecurityDisabled(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	adm := kadm.NewClient(newClient(t, addr, kgo.RequestRetries(0)))
	if _, err := aclStrings(t, adm, anyACLs()); !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls: %v", err)
	}
	if err := createACLs(t, adm, kadm.NewACLs().Allow("User:a").Topics("t").Operations(kadm.OpRead)); !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("CreateAcls: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.DeleteACLs(ctx, anyACLs())
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteAcls: %v %+v", err, res)
	}
}

// TestACLCluster: an ACL created through one node is visible on every
// node and decides there; a delete through another node too.
func TestACLCluster(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3, "authorizer.class.name="+config.StandardAuthorizerClass, "super.users=User:ANONYMOUS")
	adm := func(i int) *kadm.Client {
		return kadm.NewClient(newClient(t, fmt.Sprintf("127.0.0.1:%d", tc.cports[i])))
	}
	for i := range 3 { // through each node: forwarded to the controller from two of them
		name := fmt.Sprintf("t%d", i)
		if err := createACLs(t, adm(i), kadm.NewACLs().Allow("User:alice").Topics(name).Operations(kadm.OpRead)); err != nil {
			t.Fatalf("create through node %d: %v", i+1, err)
		}
		// The node that answered shows it at once (the answer waits for it).
		if !tc.brokers[i].meta.HasACL(aclBinding(kmsg.ACLResourceTypeTopic, name, kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)) {
			t.Fatalf("node %d answered before its metadata showed the ACL", i+1)
		}
	}
	for i := range 3 {
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d shows the three ACLs", i+1), func() bool {
			got, err := aclStrings(t, adm(i), anyACLs())
			return err == nil && len(got) == 3
		})
		for j := range 3 {
			name := fmt.Sprintf("t%d", j)
			if !tc.brokers[i].authz.Authorize("User:alice", "127.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) ||
				tc.brokers[i].authz.Authorize("User:bob", "127.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
				t.Fatalf("node %d decides wrongly on %s", i+1, name)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := adm(2).DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("t0").Operations())
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("delete: %v %+v", err, res)
	}
	for i := range 3 {
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d no longer allows t0", i+1), func() bool {
			return !tc.brokers[i].authz.Authorize("User:alice", "127.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "t0")
		})
	}
}
