package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/cmd/sluice/internal/clienttls"
)

// The --sasl-* flags against a broker whose only listener is
// SASL_PLAINTEXT: PLAIN with --sasl-password-file, SCRAM with
// SLUICE_SASL_PASSWORD, OAUTHBEARER with a token file and with
// --command-config's unsecured login options.
func TestSaslFlagsCommands(t *testing.T) {
	const plainJaas = `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`
	const oauthJaas = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`
	bs := startSluice(t, "listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,OAUTHBEARER",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+plainJaas,
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="+oauthJaas)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv(clienttls.EnvPassword, "")
	admin := []string{"--bootstrap-server", bs, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin", "--sasl-password-file", file("admin.pw", "admin-secret\n")}
	if code, _, errOut := sluice(t, append([]string{"topic", "create", "--topic", "secured"}, admin...)...); code != 0 {
		t.Fatalf("topic create as admin (PLAIN): exit %d\n%s", code, errOut)
	}
	if code, _, errOut := sluice(t, append([]string{"user", "scram", "add", "--user", "bob", "--add-config", "SCRAM-SHA-256=[iterations=4096,password=bob-secret]"}, admin...)...); code != 0 {
		t.Fatalf("user scram add: exit %d\n%s", code, errOut)
	}

	// SCRAM, the password from the environment.
	t.Setenv(clienttls.EnvPassword, "bob-secret")
	code, out, _ := sluice(t, "topic", "list", "--bootstrap-server", bs, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "bob")
	if code != 0 || !strings.Contains(out, "secured") {
		t.Fatalf("topic list as bob (SCRAM): exit %d\n%s", code, out)
	}
	t.Setenv(clienttls.EnvPassword, "wrong")
	if code, _, errOut := sluice(t, "topic", "list", "--bootstrap-server", bs, "--timeout", "5s", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "bob"); code == 0 || !strings.Contains(errOut, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: exit %d\n%s", code, errOut)
	}
	t.Setenv(clienttls.EnvPassword, "")

	// OAUTHBEARER: --command-config's unsecured login builds the token.
	props := file("oauth.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config="+
		`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="carol";`+"\n")
	if code, _, errOut := sluiceIn(t, "k:v\n", "produce", "--topic", "secured", "--key-separator", ":", "--bootstrap-server", bs, "--command-config", props); code != 0 {
		t.Fatalf("produce with OAUTHBEARER (--command-config): exit %d\n%s", code, errOut)
	}
	// A token in a file, with --sasl-mechanism OAUTHBEARER.
	enc := base64.RawURLEncoding.EncodeToString
	token := enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"carol","exp":%d}`, time.Now().Unix()+600))) + "."
	code, out, errOut := sluice(t, "consume", "--topic", "secured", "-e", "--format", `%k=%v\n`, "--bootstrap-server", bs,
		"--sasl-mechanism", "OAUTHBEARER", "--sasl-password-file", file("token", token))
	if code != 0 || out != "k=v\n" {
		t.Fatalf("consume with an OAUTHBEARER token: exit %d\n%s\n%s", code, out, errOut)
	}
	// Flags the command line cannot use: usage errors.
	if code, _, _ := sluice(t, "topic", "list", "--bootstrap-server", bs, "--sasl-username", "bob"); code != 2 {
		t.Fatalf("--sasl-username alone: exit %d, want 2", code)
	}
	if code, _, _ := sluice(t, "topic", "list", "--bootstrap-server", bs, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin"); code != 2 {
		t.Fatalf("no password: exit %d, want 2", code)
	}
}
