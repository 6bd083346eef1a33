package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tlsSets are the keys of a single node whose client listener,
// PLAINTEXT by name, is SSL (Kafka allows any name to map to SSL).
func tlsSets(ca *tlstest.CA, srv *tlstest.Leaf, extra ...string) []string {
	return append([]string{
		"listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + srv.File,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + ca.PEMFile,
	}, extra...)
}

// principals records the principals the broker established.
type principals struct {
	mu  sync.Mutex
	got []string
}

func (p *principals) hook(b *Broker) {
	b.onPrincipal = func(_, principal string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.got = append(p.got, principal)
	}
}

func (p *principals) has(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.got {
		if g == s {
			return true
		}
	}
	return false
}

// tlsRoundTrip produces n records to topic and reads them back, before
// the test's deadline (deadlineContext: no speed target).
func tlsRoundTrip(t *testing.T, addr string, tc *tls.Config, topic string, n int) error {
	t.Helper()
	ctx, cancel := deadlineContext(t)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tc), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumed %d of %d: %w", got, n, err)
		}
		if err := fs.Err0(); err != nil {
			return err
		}
		got += fs.NumRecords()
	}
	return nil
}

func TestTLSProduceConsume(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	var ps principals
	b := newTestBroker(t, nil, slog.LevelInfo, ps.hook, tlsSets(ca, srv)...)
	if err := tlsRoundTrip(t, b.Addr().String(), ca.ClientConfig(nil), "tls", 20); err != nil {
		t.Fatal(err)
	}
	if !ps.has("User:ANONYMOUS") {
		t.Errorf("principals %v, want User:ANONYMOUS", ps.got)
	}
	// A client that does not trust the CA is refused by its own check.
	cl, _ := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.DialTLSConfig(&tls.Config{}), kgo.RetryTimeout(time.Second))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted server: %v", err)
	}
}

// ssl.client.auth=required: a client without a certificate is refused;
// with one, its subject is mapped by ssl.principal.mapping.rules.
func TestTLSMutualAuth(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	alice := ca.Issue(t, tlstest.Options{CommonName: "Alice", OU: "eng", Client: true})
	var ps principals
	b := newTestBroker(t, nil, slog.LevelInfo, ps.hook, tlsSets(ca, srv,
		"listener.name.plaintext.ssl.client.auth=required",
		`ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=eng$/$1/L,DEFAULT`)...)
	if err := tlsPing(b.Addr().String(), ca.ClientConfig(nil)); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if err := tlsRoundTrip(t, b.Addr().String(), ca.ClientConfig(alice), "mtls", 5); err != nil {
		t.Fatal(err)
	}
	if !ps.has("User:alice") {
		t.Errorf("principals %v, want User:alice", ps.got)
	}
	// A certificate from another CA is refused too.
	other := tlstest.NewCA(t).Issue(t, tlstest.Options{CommonName: "mallory", Client: true})
	if err := tlsPing(b.Addr().String(), ca.ClientConfig(other)); err == nil {
		t.Fatal("a client with an untrusted certificate was served")
	}
}

// tlsPing is one request over TLS, retried for a few seconds at most.
func tlsPing(addr string, tc *tls.Config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tc), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// ssl.client.auth=requested: a client without a certificate is served as
// User:ANONYMOUS; a certificate no rule maps is refused, as in Kafka.
func TestTLSRequestedAuthAndUnmappedSubject(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	admin := ca.Issue(t, tlstest.Options{CommonName: "admin", Client: true})
	bob := ca.Issue(t, tlstest.Options{CommonName: "bob", Client: true})
	var ps principals
	b := newTestBroker(t, nil, slog.LevelInfo, ps.hook, tlsSets(ca, srv,
		"ssl.client.auth=requested", `ssl.principal.mapping.rules=RULE:^CN=admin$/operator/`)...)
	addr := b.Addr().String()
	if err := tlsPing(addr, ca.ClientConfig(nil)); err != nil {
		t.Fatalf("no certificate: %v", err)
	}
	if err := tlsPing(addr, ca.ClientConfig(admin)); err != nil {
		t.Fatalf("admin: %v", err)
	}
	if err := tlsPing(addr, ca.ClientConfig(bob)); err == nil {
		t.Error("a certificate no rule maps was served")
	}
	for _, want := range []string{"User:ANONYMOUS", "User:operator"} {
		if !ps.has(want) {
			t.Errorf("principals %v, want %s", ps.got, want)
		}
	}
}

// A client that connects and never handshakes, and a plaintext client on
// the TLS port, cost the other clients nothing; both are closed (the
// stalled one after the receive timeout) with a log line.
func TestTLSStalledAndPlaintextClients(t *testing.T) {
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	logs := &logBuffer{}
	b := newTestBroker(t, logs, slog.LevelInfo, func(b *Broker) { b.logEvery = 50 * time.Millisecond },
		tlsSets(ca, srv, "sluice.request.receive.timeout.ms=1500")...)
	addr := b.Addr().String()
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Write(apiVersionsFrame(1)); err != nil {
		t.Fatal(err)
	}
	// No speed target: the TLS client is served beside them, and both
	// are closed, before the test's deadline (a stalled handshake that
	// held the others up for good, or was never given up, fails it).
	ctx, cancel := deadlineContext(t)
	defer cancel()
	if err := tlsRoundTrip(t, addr, ca.ClientConfig(nil), "busy", 5); err != nil {
		t.Fatalf("the TLS client beside the stalled ones: %v", err)
	}
	deadline, _ := ctx.Deadline()
	// The plaintext client gets no Kafka answer, and is closed.
	plain.SetReadDeadline(deadline)
	if n, err := io.ReadAll(plain); err != nil && !isClosedErr(err) {
		t.Errorf("plaintext client: read %d bytes, %v; want the connection closed", len(n), err)
	}
	stalled.SetReadDeadline(deadline)
	if _, err := io.ReadAll(stalled); err != nil && !isClosedErr(err) {
		t.Errorf("stalled client: %v; want the connection closed", err)
	}
	for !strings.Contains(logs.String(), "TLS handshake") {
		select {
		case <-ctx.Done():
			t.Fatalf("no log line for the failed handshakes:\n%s", logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func isClosedErr(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.As(err, &ne) && !ne.Timeout() || strings.Contains(err.Error(), "reset")
}

// The client refuses a broker whose certificate has expired.
func TestTLSExpiredServerCertificate(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker", NotAfter: time.Now().Add(-time.Hour)})
	b := newTestBroker(t, nil, slog.LevelInfo, nil, tlsSets(ca, srv)...)
	cl, _ := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.DialTLSConfig(ca.ClientConfig(nil)), kgo.RetryTimeout(time.Second))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("ping = %v, want a certificate expired error", err)
	}
}

// Keys and passwords given inline are never shown by DescribeConfigs
// (Kafka's PASSWORD keys: null and sensitive).
func TestTLSDescribeConfigsHidesSecrets(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	b := newTestBroker(t, nil, slog.LevelInfo, nil,
		"listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT", "ssl.keystore.type=PEM",
		"ssl.keystore.certificate.chain="+string(srv.CertPEM), "ssl.keystore.key="+string(srv.KeyPEM), "ssl.key.password=hunter2")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.DialTLSConfig(ca.ClientConfig(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "ssl.keystore.key" || c.Key == "ssl.key.password" {
				seen++
				if c.Value != nil || !c.Sensitive {
					t.Errorf("%s: value %v, sensitive %v", c.Key, c.MaybeValue(), c.Sensitive)
				}
			}
			if c.Value != nil && (strings.Contains(*c.Value, "PRIVATE KEY") || strings.Contains(*c.Value, "hunter2")) {
				t.Errorf("%s shows a secret", c.Key)
			}
		}
	}
	if seen != 2 {
		t.Errorf("saw %d of the 2 secret keys", seen)
	}
}

// A listener that cannot read its keystore fails Start, naming it.
func TestTLSListenerBadKeystore(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	os.WriteFile(srv.File, []byte("not pem"), 0o600)
	_, err := startTLSBrokerErr(t, tlsSets(ca, srv)...)
	if err == nil || !strings.Contains(err.Error(), "listener PLAINTEXT") || !strings.Contains(err.Error(), "CERTIFICATE") {
		t.Errorf("Start = %v", err)
	}
}

func startTLSBrokerErr(t *testing.T, sets ...string) (*Broker, error) {
	sets = append([]string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir()}, sets...)
	b, err := newUnstarted(sets...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { b.Close() })
	return b, b.Start()
}

// kcat (librdkafka) over SSL with Kafka's client keys.
func TestTLSKcat(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	b := newTestBroker(t, nil, slog.LevelInfo, nil, tlsSets(ca, srv)...)
	args := []string{"-b", b.Addr().String(), "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.PEMFile, "-t", "kcat-tls"}
	runTool(t, "a\nb\nc\n", kcat, append(args, "-P")...)
	out := runTool(t, "", kcat, append(args, "-C", "-o", "beginning", "-e", "-q")...)
	if got := strings.Fields(out); strings.Join(got, ",") != "a,b,c" {
		t.Errorf("kcat read %q", out)
	}
}

// A three-node cluster whose every listener (clients, inter-broker,
// controller and raft) is SSL with mutual TLS elects and replicates.
func TestTLSClusterInterBroker(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	client := ca.Issue(t, tlstest.Options{CommonName: "app", Client: true})
	tc := startCluster(t, 3,
		"listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:SSL",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+srv.File,
		"ssl.truststore.type=PEM", "ssl.truststore.location="+ca.PEMFile,
		"ssl.client.auth=required")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tc.dialOpts = []kgo.Opt{kgo.DialTLSConfig(ca.ClientConfig(client))}
	tc.waitBrokers(3)
	cl := tc.client(kgo.AllowAutoTopicCreation())
	clusterProduce(t, ctx, cl, "tls-rep", "r", 50)
	tc.waitLeaders("tls-rep", 3)
	cons := tc.client(kgo.ConsumeTopics("tls-rep"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 50 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 50: %v", got, err)
		}
		got += fs.NumRecords()
	}
}

// newUnstarted is a broker built from sets, not started.
func newUnstarted(sets ...string) (*Broker, error) {
	cfg, err := config.Load("", sets)
	if err != nil {
		return nil, err
	}
	return New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// sluice.metrics.ssl.enabled: the metrics listener (metrics, health
// checks, the console) speaks HTTPS with the ssl.* keys, and a plaintext
// request gets no page; a keystore that cannot be read stops start-up.
func TestTLSMetricsListener(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	// The Kafka listener requires client certificates; the metrics
	// listener does not unless told to for itself.
	b := newTestBroker(t, nil, slog.LevelInfo, nil, tlsSets(ca, srv, "metrics.listen=127.0.0.1:0", "sluice.metrics.ssl.enabled=true", "ssl.client.auth=required")...)
	addr := b.MetricsAddr().String()
	if banner := b.Banner(""); !strings.Contains(banner, "https://"+addr+"/ui/") {
		t.Errorf("the banner does not name the console's https address:\n%s", banner)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}}
	for _, path := range []string{"/healthz", "/metrics", "/ui/"} {
		resp, err := hc.Get("https://" + addr + path)
		if err != nil {
			t.Fatalf("https %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("https %s: %s, %d bytes", path, resp.Status, len(body))
		}
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if resp, err := plain.Get("http://" + addr + "/healthz"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain http answered %s: %q", resp.Status, body)
		}
	}

	mtls := newTestBroker(t, nil, slog.LevelInfo, nil, tlsSets(ca, srv, "metrics.listen=127.0.0.1:0", "sluice.metrics.ssl.enabled=true", "listener.name.metrics.ssl.client.auth=required")...)
	if resp, err := hc.Get("https://" + mtls.MetricsAddr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("listener.name.metrics.ssl.client.auth=required: answered %s without a client certificate", resp.Status)
	}
	client := ca.Issue(t, tlstest.Options{CommonName: "prometheus"})
	mhc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(client)}}
	if resp, err := mhc.Get("https://" + mtls.MetricsAddr().String() + "/healthz"); err != nil {
		t.Errorf("with a client certificate: %v", err)
	} else {
		resp.Body.Close()
	}

	bad := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	os.WriteFile(bad.File, []byte("not pem"), 0o600)
	_, err := startTLSBrokerErr(t, "metrics.listen=127.0.0.1:0", "sluice.metrics.ssl.enabled=true", "ssl.keystore.type=PEM", "ssl.keystore.location="+bad.File)
	if err == nil || !strings.Contains(err.Error(), "sluice.metrics.ssl.enabled") {
		t.Errorf("Start with an unreadable keystore = %v", err)
	}
}
