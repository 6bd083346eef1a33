package config

import (
	"slices"
	"strings"
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

func TestSaslOAuthBearerConfig(t *testing.T) {
	const jaas = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope=" a  b " unsecuredValidatorAllowableClockSkewMs="500";`
	base := map[string]string{
		"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms":      "OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas,
	}
	load := func(over map[string]string) (Config, error) {
		c := Default()
		for _, m := range []map[string]string{base, over} {
			for k, v := range m {
				if err := c.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		return c, c.Validate()
	}
	c, err := load(map[string]string{"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": OAuthBearerUnsecuredValidator})
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Unacted(); len(u) != 0 {
		t.Errorf("unacted %v", u)
	}
	j, _ := ParseJaas(c.SaslJaasConfig("SASL_PLAINTEXT", MechOAuthBearer))
	v, err := j.UnsecuredValidator()
	if err != nil || v.PrincipalClaim != "user" || v.ScopeClaim != "scope" || !slices.Equal(v.RequiredScope, []string{"a", "b"}) || v.ClockSkewMs != 500 {
		t.Errorf("validator %+v %v", v, err)
	}
	if v, _ := (Jaas{}).UnsecuredValidator(); v.PrincipalClaim != "sub" || v.ClockSkewMs != 0 || len(v.RequiredScope) != 0 {
		t.Errorf("defaults %+v", v)
	}
	for name, over := range map[string]map[string]string{
		"JWKS validator": {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
		"no JAAS":        {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": ""},
		"PLAIN module":   {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required;`},
		"negative skew":  {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAuthBearerLoginModule + ` required unsecuredValidatorAllowableClockSkewMs="-1";`},
		"skew not int":   {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAuthBearerLoginModule + ` required unsecuredValidatorAllowableClockSkewMs="1s";`},
		"bad scope":      {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAuthBearerLoginModule + ` required unsecuredValidatorRequiredScope="a\"b";`},
	} {
		if _, err := load(over); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "JWKS validator" && !strings.Contains(err.Error(), "not supported") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
