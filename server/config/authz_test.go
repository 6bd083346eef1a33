package config

import (
	"strings"
	"testing"
)

func TestAuthorizerConfig(t *testing.T) {
	c := Default()
	if c.AuthorizerEnabled() || c.AllowEveryoneIfNoACLFound() || c.SuperUsers() != "" {
		t.Fatal("authorization on by default")
	}
	for k, v := range map[string]string{
		"authorizer.class.name":          StandardAuthorizerClass,
		"super.users":                    "User:admin;User:ops",
		"allow.everyone.if.no.acl.found": "TRUE",
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.AuthorizerEnabled() || !c.AllowEveryoneIfNoACLFound() || c.SuperUsers() != "User:admin;User:ops" {
		t.Fatal("authorizer keys not read")
	}
	if u := c.Unacted(); len(u) != 0 {
		t.Errorf("unacted %v", u)
	}
	if err := c.Set("allow.everyone.if.no.acl.found", "maybe"); err == nil {
		t.Error("a non-boolean allow.everyone.if.no.acl.found accepted")
	}
	c.Set("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer")
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "authorizer.class.name") || !strings.Contains(err.Error(), StandardAuthorizerClass) {
		t.Fatalf("another authorizer: %v", err)
	}
}
