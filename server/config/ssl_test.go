package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/server/tlstest"
)

func TestPrincipalMappingRules(t *testing.T) {
	for _, tc := range []struct {
		rules, dn, want, wantErr string
	}{
		{"DEFAULT", "CN=alice,OU=eng", "CN=alice,OU=eng", ""},
		{"", "CN=alice", "CN=alice", ""},
		{"RULE:^CN=(.*?),OU=(.*)$/$1@$2/", "CN=alice,OU=eng", "alice@eng", ""},
		{"RULE:^CN=(.*?),OU=(.*)$/$1/U, DEFAULT", "CN=alice,OU=eng", "ALICE", ""},
		{"RULE:^CN=([^,]*)$/$1/L,DEFAULT", "CN=Bob,OU=x", "CN=Bob,OU=x", ""},
		{"RULE:^CN=(.*)$/$1/L", "CN=Bob", "bob", ""},
		{"RULE:^CN=(.*)$/$1\\/x/", "CN=a", "a/x", ""},
		{"RULE:^CN=(.*)$/$3-$1/", "CN=a", "$3-a", ""}, // no group 3: literal, as Kafka
		{"RULE:^CN=(.*)$/$1/", "OU=a", "", "no ssl.principal.mapping.rules rule applies"},
		{"RULE:^CN=(.*)$", "", "", "want RULE:pattern/replacement/"},
		{"NOPE", "", "", "invalid rule"},
		{"RULE:(/x/", "", "", "RULE pattern"},
	} {
		m, err := ParsePrincipalRules(tc.rules)
		if err == nil {
			var got string
			got, err = m.Name(tc.dn)
			if err == nil && got != tc.want {
				t.Errorf("%q on %q = %q, want %q", tc.rules, tc.dn, got, tc.want)
			}
		}
		if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q on %q: err %v, want %q", tc.rules, tc.dn, err, tc.wantErr)
		}
	}
}

func TestSSLListenerConfig(t *testing.T) {
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	base := []string{
		"listeners=SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + srv.File,
		"ssl.truststore.type=pem",
		"ssl.truststore.location=" + ca.PEMFile,
		"listener.name.ssl.ssl.client.auth=required",
	}
	c, err := Load("", base)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ListenerSSL("SSL").ClientAuth; got != "required" {
		t.Errorf("per-listener client auth = %q", got)
	}
	if got := c.SSL.ClientAuth; got != "none" {
		t.Errorf("global client auth = %q", got)
	}
	if _, err := c.ListenerSSL("SSL").ServerTLS(); err != nil {
		t.Fatal(err)
	}
	// Inline PEM, as Kafka's ssl.keystore.certificate.chain and key.
	c, err = Load("", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PEM",
		"ssl.keystore.certificate.chain=" + string(srv.CertPEM), "ssl.keystore.key=" + string(srv.KeyPEM),
		"ssl.truststore.type=PEM", "ssl.truststore.certificates=" + string(ca.PEM)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListenerSSL("SSL").ServerTLS(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sets    []string
		wantErr string
	}{
		{[]string{"ssl.keystore.type=JKS"}, "only PEM keystores are supported"},
		{[]string{"ssl.keystore.type=PKCS12"}, "only PEM keystores are supported"},
		{[]string{"ssl.truststore.type=JKS"}, "only PEM truststores are supported"},
		{[]string{"ssl.client.auth=always"}, "must be one of none, requested, required"},
		{[]string{"ssl.enabled.protocols=TLSv1.1"}, `"TLSv1.1" is not supported`},
		{[]string{"ssl.cipher.suites=TLS_FOO"}, `"TLS_FOO" is not a supported cipher suite`},
		{[]string{"ssl.principal.mapping.rules=RULE:x"}, "want RULE:pattern"},
		{[]string{"listener.name.ssl.ssl.client.auth=maybe"}, "must be one of none"},
	} {
		_, err := Load("", append(append([]string(nil), base...), tc.sets...))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: err %v, want %q", tc.sets, err, tc.wantErr)
		}
	}
}

// An encrypted PKCS#8 key (openssl pkcs8 -topk8 -v2 aes-256-cbc) is read
// with ssl.key.password.
func TestSSLEncryptedKey(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	dir := t.TempDir()
	plain := filepath.Join(dir, "key.pem")
	os.WriteFile(plain, srv.KeyPEM, 0o600)
	for _, prf := range []string{"hmacWithSHA256", "hmacWithSHA1"} {
		out, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-v2prf", prf, "-in", plain, "-passout", "pass:secret").Output()
		if err != nil {
			t.Fatal(err)
		}
		s := SSLConfig{KeystoreType: "PEM", KeystoreCertificateChain: string(srv.CertPEM), KeystoreKey: string(out), KeyPassword: "secret",
			EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}}
		if _, ok, err := s.Certificate(); err != nil || !ok {
			t.Fatalf("%s: %v", prf, err)
		}
		s.KeyPassword = "wrong"
		if _, _, err := s.Certificate(); err == nil {
			t.Errorf("%s: a wrong password was accepted", prf)
		}
		s.KeyPassword = ""
		if _, _, err := s.Certificate(); err == nil || !strings.Contains(err.Error(), "set ssl.key.password") {
			t.Errorf("%s: no password: %v", prf, err)
		}
	}
}

// Inline PEM in a properties file, its lines joined by continuations as
// Kafka's documentation writes it, is read.
func TestSSLInlinePEMWithContinuations(t *testing.T) {
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	cont := func(pem []byte) string {
		return strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", " \\\n  ")
	}
	p := writeFile(t, strings.Join([]string{
		"listeners=SSL://127.0.0.1:0",
		"ssl.keystore.type=PEM",
		"ssl.keystore.certificate.chain=" + cont(srv.CertPEM),
		"ssl.keystore.key=" + cont(srv.KeyPEM),
		"ssl.truststore.type=PEM",
		"ssl.truststore.certificates=" + cont(ca.PEM),
	}, "\n")+"\n")
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.SSL.KeystoreKey, "\n") {
		t.Fatalf("continuations kept newlines: %q", c.SSL.KeystoreKey)
	}
	tc, err := c.ListenerSSL("SSL").ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if len(tc.Certificates) != 1 || tc.ClientCAs == nil {
		t.Errorf("certificates %d, client CAs %v", len(tc.Certificates), tc.ClientCAs)
	}
}
