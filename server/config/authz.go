package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Authorization. Kafka's key authorizer.class.name names the authorizer;
// Sluice serves one, StandardAuthorizerClass (the semantics of Kafka's
// StandardAuthorizer, meta.Authorizer), and refuses any other class. The
// authorizer's own keys, which Kafka hands to it with every broker config
// (StandardAuthorizer's SUPER_USERS_CONFIG and
// ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG), stay in the table of Kafka
// keys; Sluice acts on these three, read through the methods below, so
// Unacted leaves them out:
//
//	authorizer.class.name            "" (off) or StandardAuthorizerClass
//	super.users                      principals separated by ';' ("User:admin;User:ops")
//	allow.everyone.if.no.acl.found   true or false (default false)

// StandardAuthorizerClass is the authorizer.class.name that turns
// authorization on.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

func authzActed(key string) bool {
	switch key {
	case "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found":
		return true
	}
	return false
}

// AuthorizerEnabled reports whether authorizer.class.name names
// StandardAuthorizerClass (Validate refuses any other non-empty value).
func (c *Config) AuthorizerEnabled() bool {
	return strings.TrimSpace(c.unacted["authorizer.class.name"]) == StandardAuthorizerClass
}

// SuperUsers is super.users as written (split with meta.ParseSuperUsers).
func (c *Config) SuperUsers() string { return c.unacted["super.users"] }

// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found (default
// false, Kafka's).
func (c *Config) AllowEveryoneIfNoACLFound() bool {
	v, _ := strconv.ParseBool(strings.ToLower(strings.TrimSpace(c.unacted["allow.everyone.if.no.acl.found"])))
	return v
}

// validateAuthz refuses an authorizer class other than Kafka's
// StandardAuthorizer.
func (c *Config) validateAuthz(bad func(key string, reason error)) {
	if v := strings.TrimSpace(c.unacted["authorizer.class.name"]); v != "" && v != StandardAuthorizerClass {
		bad("authorizer.class.name", fmt.Errorf("authorizer %s is not available: Sluice serves only %s (or leave the key empty for no authorization)", v, StandardAuthorizerClass))
	}
}
