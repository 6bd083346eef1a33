package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/server/tlstest"
)

// TestTLSCommands: topic, produce and consume reach an SSL listener
// with mutual TLS through a Kafka client properties file
// (--command-config) and through the --tls flags; without them the
// commands fail.
func TestTLSCommands(t *testing.T) {
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	cli := ca.Issue(t, tlstest.Options{CommonName: "ops", Client: true})
	bs := startSluice(t,
		"listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+srv.File,
		"ssl.truststore.type=PEM", "ssl.truststore.location="+ca.PEMFile,
		"ssl.client.auth=required")
	props := filepath.Join(t.TempDir(), "client.properties")
	os.WriteFile(props, []byte(strings.Join([]string{
		"security.protocol=SSL",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + ca.PEMFile,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + cli.File,
		"client.id=ignored",
	}, "\n")), 0o600)
	withFile := []string{"--bootstrap-server", bs, "--command-config", props}
	mustSluice(t, append([]string{"topic", "create", "--topic", "secure"}, withFile...)...)
	if code, _, _ := sluiceIn(t, "a\nb\n", append([]string{"produce", "--topic", "secure"}, withFile...)...); code != 0 {
		t.Fatalf("produce: exit %d", code)
	}
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	os.WriteFile(keyFile, cli.KeyPEM, 0o600)
	os.WriteFile(certFile, cli.CertPEM, 0o600)
	withFlags := []string{"--bootstrap-server", bs, "--tls-ca", ca.PEMFile, "--tls-cert", certFile, "--tls-key", keyFile}
	out := mustSluice(t, append([]string{"consume", "--topic", "secure", "-e"}, withFlags...)...)
	if out != "a\nb\n" {
		t.Errorf("consume: %q", out)
	}
	// No client certificate: refused.
	if code, _, _ := sluice(t, "topic", "list", "--bootstrap-server", bs, "--tls-ca", ca.PEMFile, "--timeout", "3s"); code == 0 {
		t.Error("topic list without a client certificate succeeded")
	}
	// A JKS truststore in the properties file is refused, saying why.
	os.WriteFile(props, []byte("security.protocol=SSL\nssl.truststore.location=/x.jks\n"), 0o600)
	wantExit(t, 2, []string{"topic", "list", "--bootstrap-server", bs, "--command-config", props}, "only PEM truststores")
}
