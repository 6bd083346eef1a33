package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// startSaslSSLBroker starts a broker with a PLAINTEXT listener and a
// SASL_SSL one, its certificate issued by the returned CA.
func startSaslSSLBroker(t *testing.T, before func(*Broker), sets ...string) (*Broker, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	b := newTestBroker(t, nil, slog.LevelInfo, before, append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + srv.File,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + ca.PEMFile,
	}, sets...)...)
	return b, ca
}

// A SASL_SSL listener: TLS first, then SASL over it (Kafka's
// SASL_SSL). franz-go logs in with PLAIN and SCRAM over TLS, produces and
// consumes; the principal is the SASL user, not the certificate's; a
// wrong password is refused; a client without TLS gets nothing.
func TestSaslSSL(t *testing.T) {
	t.Parallel()
	var ps principals
	b, ca := startSaslSSLBroker(t, ps.hook, "listener.name.sasl_ssl.plain.sasl.jaas.config="+saslJaas)
	addr := b.ListenerAddr("SASL_SSL").String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tlsConf := ca.ClientConfig(nil)
	cl := newClient(t, addr, kgo.DialTLSConfig(tlsConf), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("sasl-ssl"), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("sasl-ssl"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_SSL: %v", err)
	}
	if fs := cl.PollFetches(ctx); fs.Err0() != nil || fs.NumRecords() != 1 {
		t.Fatalf("consume over SASL_SSL: %d records, %v", fs.NumRecords(), fs.Err0())
	}
	if !ps.has("User:alice") {
		t.Errorf("principals %v, want User:alice", ps.got)
	}

	wrong := newClient(t, addr, kgo.DialTLSConfig(tlsConf), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, wrong); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password over SASL_SSL: %v", err)
	}
	// SCRAM over TLS, with a credential made through the PLAINTEXT
	// listener (AlterUserScramCredentials).
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}})
	if err != nil || res["bob"].Err != nil {
		t.Fatalf("AlterUserScramCredentials: %v %+v", err, res)
	}
	eventually(t, 10*time.Second, "bob's SCRAM login over SASL_SSL", func() error {
		c := newClient(t, addr, kgo.DialTLSConfig(tlsConf), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()), kgo.RequestRetries(0))
		defer c.Close()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c)
		return err
	})
	// A plaintext client on the SASL_SSL port gets no answer.
	plainCl := newClient(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(pctx, plainCl); err == nil {
		t.Error("a client without TLS was answered on the SASL_SSL listener")
	}
}

// kcat (librdkafka) over SASL_SSL with PLAIN and SCRAM-SHA-512, trusting
// the test CA (ssl.ca.location).
func TestSaslSSLKcat(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	b, ca := startSaslSSLBroker(t, nil, "listener.name.sasl_ssl.plain.sasl.jaas.config="+saslJaas)
	addr := b.ListenerAddr("SASL_SSL").String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.Addr().String()))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}}); err != nil || res["bob"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	for _, tc := range []struct{ mech, user, pass string }{
		{"PLAIN", "alice", "alice-secret"},
		{"SCRAM-SHA-512", "bob", "bob-secret"},
	} {
		topic := "kcat-ssl-" + strings.ToLower(tc.mech)
		args := []string{"-b", addr, "-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + ca.PEMFile,
			"-X", "sasl.mechanisms=" + tc.mech, "-X", "sasl.username=" + tc.user, "-X", "sasl.password=" + tc.pass, "-t", topic}
		runTool(t, "k1:v1\n", kcat, append(args, "-P", "-K:")...)
		if out := runTool(t, "", kcat, append(args, "-C", "-e", "-q", "-o", "beginning", "-f", "%k=%s\n")...); out != "k1=v1\n" {
			t.Fatalf("%s over SASL_SSL: kcat consumed %q", tc.mech, out)
		}
	}
}
