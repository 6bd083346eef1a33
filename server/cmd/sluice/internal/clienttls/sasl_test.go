package clienttls

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCommandConfigSasl(t *testing.T) {
	jaas := `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s";`
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		opts, err := propsOpts(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.jaas.config": jaas})
		if err != nil || len(opts) != 1 {
			t.Fatalf("%s: %v", mech, err)
		}
	}
	oauthJaas := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";`
	if opts, err := propsOpts(map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": oauthJaas}); err != nil || len(opts) != 1 {
		t.Fatalf("OAUTHBEARER: %v", err)
	}
	if opts, err := propsOpts(map[string]string{}); err != nil || opts != nil {
		t.Fatal("PLAINTEXT by default")
	}
	if opts, err := propsOpts(map[string]string{"security.protocol": "SSL"}); err != nil || opts != nil {
		t.Fatalf("SSL (TLS alone) gave SASL options %v, %v", opts, err)
	}
	for _, bad := range []map[string]string{
		{"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas},       // GSSAPI
		{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas}, // GSSAPI
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x required;"},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`},
		{"security.protocol": "KERBEROS"},
	} {
		if _, err := propsOpts(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestUnsecuredToken(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tok, ext, err := unsecuredToken(map[string]string{
		"unsecuredLoginPrincipalClaimName": "user",
		"unsecuredLoginStringClaim_user":   "alice",
		"unsecuredLoginNumberClaim_level":  "3",
		"unsecuredLoginListClaim_scope":    ",kafka,,read",
		"unsecuredLoginLifetimeSeconds":    "60",
		"unsecuredLoginExtension_traceId":  "abc",
		"username":                         "ignored",
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[2] != "" || ext["traceId"] != "abc" {
		t.Fatalf("token %q, extensions %v", tok, ext)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if string(header) != `{"alg":"none"}` || json.Unmarshal(body, &claims) != nil {
		t.Fatalf("header %s, claims %s", header, body)
	}
	if claims["user"] != "alice" || claims["level"] != 3.0 || claims["iat"] != 1700000000.0 || claims["exp"] != 1700000060.0 ||
		len(claims["scope"].([]any)) != 2 || claims["username"] != nil {
		t.Fatalf("claims %s", body)
	}
	for _, bad := range []map[string]string{
		{},                                      // no sub
		{"unsecuredLoginStringClaim_user": "a"}, // sub still the principal claim
		{"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "x"},
		{"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginStringClaim_exp": "1"},
		{"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "0"},
	} {
		if _, _, err := unsecuredToken(bad, now); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestSaslFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("secret\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	t.Setenv(EnvPassword, "")
	f := saslFlags{passwordFile: pw}
	if p, err := f.password(); err != nil || p != "secret" {
		t.Fatalf("password file: %q %v", p, err)
	}
	t.Setenv(EnvPassword, "from-env")
	if p, err := (&saslFlags{}).password(); err != nil || p != "from-env" {
		t.Fatalf("env: %q %v", p, err)
	}
	for _, ok := range []saslFlags{
		{mechanism: "plain", username: "a"},
		{mechanism: "SCRAM-SHA-512", username: "a", passwordFile: pw},
		{mechanism: "OAUTHBEARER"},
	} {
		if opts, err := ok.opts(nil); err != nil || len(opts) != 1 {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []saslFlags{
		{username: "a"},
		{passwordFile: pw},
		{mechanism: "PLAIN"},
		{mechanism: "GSSAPI", username: "a"},
		{mechanism: "OAUTHBEARER", username: "a"},
		{mechanism: "PLAIN", username: "a", passwordFile: empty},
		{mechanism: "PLAIN", username: "a", passwordFile: filepath.Join(t.TempDir(), "missing")},
	} {
		if _, err := bad.opts(nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	t.Setenv(EnvPassword, "")
	if _, err := (&saslFlags{mechanism: "PLAIN", username: "a"}).opts(nil); err == nil {
		t.Error("no password accepted")
	}
}
