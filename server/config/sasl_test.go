package config

import (
	"slices"
	"strings"
	"testing"
	"time"
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

// The login of a node to a SASL inter-broker or controller listener:
// the mechanism must be served, enabled on the listener and (controller)
// PLAIN, and the listener's JAAS config must name the node's username and
// password; a one-voter node needs none.
func TestSaslInterNodeLogin(t *testing.T) {
	const login = `x required username="broker" password="pw" user_broker="pw";`
	base := map[string]string{
		"controller.quorum.voters":                            "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"inter.broker.listener.name":                          "SASL_PLAINTEXT",
		"listener.security.protocol.map":                      "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": login,
		"listener.name.controller.plain.sasl.jaas.config":     login,
	}
	for _, tc := range []struct {
		name    string
		sets    map[string]string
		wantBad string // the key reported; "" for valid
	}{
		{"plain both", nil, ""},
		{"no username", map[string]string{"listener.name.controller.plain.sasl.jaas.config": `x required user_broker="pw";`}, "listener.name.controller.plain.sasl.jaas.config"},
		{"scram controller", map[string]string{"sasl.mechanism.controller.protocol": "SCRAM-SHA-256"}, "sasl.mechanism.controller.protocol"},
		{"scram inter-broker", map[string]string{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
			"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": `x required username="broker" password="pw";`}, ""},
		{"scram without login", map[string]string{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}, "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"},
		{"not enabled", map[string]string{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "sasl.mechanism.inter.broker.protocol"},
		{"GSSAPI", map[string]string{"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "sasl.mechanism.inter.broker.protocol"},
		{"delay", map[string]string{"connection.failed.authentication.delay.ms": "-1"}, "connection.failed.authentication.delay.ms"},
		{"delay past idle", map[string]string{"connection.failed.authentication.delay.ms": "600000"}, "connection.failed.authentication.delay.ms"},
	} {
		c := Default()
		for _, sets := range []map[string]string{base, tc.sets} {
			for k, v := range sets {
				if err := c.Set(k, v); err != nil {
					t.Fatalf("%s: %s: %v", tc.name, k, err)
				}
			}
		}
		err := c.Validate()
		switch {
		case tc.wantBad == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantBad != "" && (err == nil || !strings.Contains(err.Error(), tc.wantBad)):
			t.Errorf("%s: %v, want a problem with %s", tc.name, err, tc.wantBad)
		}
	}
	c := Default()
	for k, v := range base {
		c.Set(k, v)
	}
	if u, p, ok := c.SaslLogin("CONTROLLER", MechPlain); !ok || u != "broker" || p != "pw" {
		t.Errorf("login %q %q %v", u, p, ok)
	}
	if c.FailedAuthenticationDelay() != 100*time.Millisecond || c.SaslMechanismControllerProtocol() != MechPlain {
		t.Error("defaults")
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

// OAUTHBEARER's unsecured validator takes unsigned tokens: a controller
// listener refuses it (anyone could log in as a node).
func TestSaslOAuthBearerNotOnControllerListener(t *testing.T) {
	c := Default()
	for k, v := range map[string]string{
		"process.roles":                      "broker,controller",
		"node.id":                            "1",
		"listeners":                          "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.listener.names":          "CONTROLLER",
		"controller.quorum.voters":           "1@127.0.0.1:9093",
		"listener.security.protocol.map":     "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
		"sasl.mechanism.controller.protocol": "PLAIN",
		"listener.name.controller.sasl.enabled.mechanisms":      "PLAIN,OAUTHBEARER",
		"listener.name.controller.plain.sasl.jaas.config":       `org.apache.kafka.common.security.plain.PlainLoginModule required username="n" password="p" user_n="p";`,
		"listener.name.controller.oauthbearer.sasl.jaas.config": OAuthBearerLoginModule + ` required;`,
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "not allowed on a controller listener") {
		t.Fatalf("Validate: %v, want OAUTHBEARER refused on the controller listener", err)
	}
}
