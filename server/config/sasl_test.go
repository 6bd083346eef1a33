package config

import (
	"slices"
	"testing"
)

func TestSaslJaasParse(t *testing.T) {
	j, err := ParseJaas(`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a \"q\";b";`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Options["username"] != "admin" || j.PlainUsers()["alice"] != `a "q";b` || len(j.PlainUsers()) != 2 {
		t.Fatalf("%+v", j)
	}
	for _, bad := range []string{"", "x required", `x maybe a="b";`, `x required a="b"`, `x required a=;`, `x required a="b; `, `x required a="b"; y required;`} {
		if _, err := ParseJaas(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSaslConfig(t *testing.T) {
	c := Default()
	for k, v := range map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config":    `org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`,
		"listener.name.sasl_plaintext.connections.max.reauth.ms": "60000",
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.SaslEnabledMechanisms("SASL_PLAINTEXT"); !slices.Equal(got, []string{"PLAIN", "SCRAM-SHA-256"}) {
		t.Errorf("mechanisms %v", got)
	}
	if c.ConnectionsMaxReauthMs("SASL_PLAINTEXT") != 60000 || c.SaslServerMaxReceiveSize() != 524288 {
		t.Error("reauth or max receive")
	}
	if u := c.Unacted(); len(u) != 0 {
		t.Errorf("unacted %v", u)
	}
	c.Set("sasl.enabled.mechanisms", "GSSAPI")
	if err := c.Validate(); err == nil {
		t.Error("GSSAPI accepted")
	}
}

func TestSaslControllerListenerRefused(t *testing.T) {
	c := Default()
	if err := c.Set("listener.security.protocol.map", "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil {
		t.Fatal("a SASL controller listener accepted")
	}
}
