package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/server/config"
)

// sluice acl add/list/remove against a broker with the StandardAuthorizer,
// as its SASL super user through --command-config, and refused for a
// user who is not.
func TestACLCommands(t *testing.T) {
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`
	b := startSluiceBroker(t, "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+jaas,
		"authorizer.class.name="+config.StandardAuthorizerClass, "super.users=User:admin")
	bs := b.ListenerAddr("SASL_PLAINTEXT").String()
	props := func(user, pass string) string {
		p := filepath.Join(t.TempDir(), user+".properties")
		os.WriteFile(p, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\""+user+"\" password=\""+pass+"\";\n"), 0o600)
		return p
	}
	admin := []string{"--bootstrap-server", bs, "--command-config", props("admin", "admin-secret")}

	code, out, errOut := sluice(t, append([]string{"acl", "add", "--allow-principal", "User:alice", "--producer", "--topic", "orders", "--transactional-id", "tx"}, admin...)...)
	if code != 0 || strings.Count(out, "Added ") != 5 {
		t.Fatalf("add --producer: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = sluice(t, append([]string{"acl", "add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9", "--operation", "Read", "--operation", "describe",
		"--topic", "ord", "--resource-pattern-type", "prefixed"}, admin...)...)
	if code != 0 || strings.Count(out, "Added ") != 2 {
		t.Fatalf("add deny: exit %d\n%s", code, out)
	}
	code, out, _ = sluice(t, append([]string{"acl", "list"}, admin...)...)
	wantContains(t, "list", out,
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
		"(principal=User:alice, host=*, operation=CREATE, permissionType=ALLOW)",
		"ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx, patternType=LITERAL)",
		"(principal=User:*, host=10.0.0.9, operation=READ, permissionType=DENY)")
	if code != 0 {
		t.Fatalf("list: exit %d", code)
	}
	// MATCH on the topic orders: the literal and the prefixed ord ACLs.
	code, out, _ = sluice(t, append([]string{"acl", "list", "--topic", "orders", "--resource-pattern-type", "match"}, admin...)...)
	if code != 0 || strings.Count(out, "Current ACLs") != 2 || strings.Contains(out, "TRANSACTIONAL_ID") {
		t.Fatalf("list match: exit %d\n%s", code, out)
	}

	// alice is not a super user and holds no ALTER on the cluster.
	alice := []string{"--bootstrap-server", bs, "--command-config", props("alice", "alice-secret")}
	code, _, errOut = sluice(t, append([]string{"acl", "add", "--allow-principal", "User:alice", "--operation", "All", "--cluster"}, alice...)...)
	if code == 0 || !strings.Contains(errOut+out, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice add: exit %d\n%s", code, errOut)
	}

	code, out, _ = sluice(t, append([]string{"acl", "remove", "--topic", "orders"}, admin...)...)
	if code != 0 || strings.Count(out, "Removed ") != 3 {
		t.Fatalf("remove: exit %d\n%s", code, out)
	}
	code, out, _ = sluice(t, append([]string{"acl", "list", "--topic", "orders"}, admin...)...)
	if code != 0 || strings.Contains(out, "name=orders") {
		t.Fatalf("list after remove: exit %d\n%s", code, out)
	}

	// Bad command lines: exit 2.
	for _, args := range [][]string{
		{"acl", "add", "--topic", "t"},
		{"acl", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"},
		{"acl", "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"},
		{"acl", "add", "--allow-principal", "User:a", "--consumer", "--topic", "t"},
		{"acl", "add", "--allow-principal", "User:a"},
		{"acl", "remove"},
	} {
		if code, _, _ := sluice(t, append(args, admin...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
