package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With a SASL listener the console asks for the broker's SASL users
// (PLAIN and SCRAM), reads the cluster through that listener as the HTTP
// user, and /metrics and the health checks stay open.
func TestConsoleSaslAuth(t *testing.T) {
	t.Parallel()
	var ps principals
	b := newTestBroker(t, nil, slog.LevelInfo, ps.hook,
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+saslJaas,
		"metrics.listen=127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b.ListenerAddr("PLAINTEXT").String(), kgo.DefaultProduceTopic("ui-sasl"))
	adm := kadm.NewClient(cl)
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"}}); err != nil || res["bob"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ui-sasl"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello-console")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/ui/", "/ui/api/overview", "/ui/api/topics", "/ui/console.js"} {
		for _, cred := range [][2]string{{"", ""}, {"alice", "wrong"}, {"nobody", "x"}, {"bob", "wrong"}, {"bob", ""}} {
			code, _, h := httpGetAs(t, b, path, cred[0], cred[1])
			if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
				t.Fatalf("%s as %q/%q: %d, WWW-Authenticate %q; want 401 with a Basic challenge", path, cred[0], cred[1], code, h.Get("WWW-Authenticate"))
			}
		}
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _, _ := httpGetAs(t, b, path, "", ""); code != http.StatusOK {
			t.Errorf("%s without credentials: %d, want 200 (open)", path, code)
		}
	}
	if ps.has("User:alice") || ps.has("User:bob") {
		t.Fatalf("principals %v before any login", ps.got)
	}

	// alice (PLAIN, the listener's JAAS user) and bob (SCRAM-SHA-256).
	for _, u := range [][2]string{{"alice", "alice-secret"}, {"bob", "bob-secret"}} {
		code, body, _ := httpGetAs(t, b, "/ui/api/topics", u[0], u[1])
		if code != http.StatusOK || !strings.Contains(body, `"ui-sasl"`) {
			t.Fatalf("topics as %s: %d %s", u[0], code, body)
		}
		if !ps.has("User:" + u[0]) {
			t.Fatalf("principals %v: the console did not log in as %s", ps.got, u[0])
		}
	}
	if code, body, _ := httpGetAs(t, b, "/ui/", "bob", "bob-secret"); code != http.StatusOK || !strings.Contains(body, "ui-sasl") {
		t.Fatalf("page as bob: %d\n%s", code, body)
	}
	// The message browser's own consumer logs in too.
	if code, body, _ := httpGetAs(t, b, "/ui/api/topics/ui-sasl/messages?partition=0&offset=0", "bob", "bob-secret"); code != http.StatusOK || !strings.Contains(body, "hello-console") {
		t.Fatalf("messages as bob: %d %s", code, body)
	}
	// A changed password: the old one is refused at once.
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "new-secret"}}); err != nil || res["bob"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, _ := httpGetAs(t, b, "/ui/api/overview", "bob", "bob-secret")
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's old password still admitted: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, _ := httpGetAs(t, b, "/ui/api/overview", "bob", "new-secret"); code != http.StatusOK {
		t.Fatalf("bob's new password: %d", code)
	}
}

// Over a SASL_SSL listener (the only client listener besides PLAINTEXT):
// the console dials it with TLS and the HTTP user's SASL login.
func TestConsoleSaslSSL(t *testing.T) {
	t.Parallel()
	var ps principals
	b, _ := startSaslSSLBroker(t, ps.hook, "listener.name.sasl_ssl.plain.sasl.jaas.config="+saslJaas, "metrics.listen=127.0.0.1:0")
	if code, _, _ := httpGetAs(t, b, "/ui/api/overview", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("overview without credentials: %d, want 401", code)
	}
	if code, body, _ := httpGetAs(t, b, "/ui/api/overview", "alice", "alice-secret"); code != http.StatusOK || !strings.Contains(body, `"brokers"`) {
		t.Fatalf("overview as alice over SASL_SSL: %d %s", code, body)
	}
	if !ps.has("User:alice") {
		t.Fatalf("principals %v: the console did not log in as alice", ps.got)
	}
}

// With an authorizer and no SASL client listener the console is refused
// (it would read as the broker's own identity): /ui/ answers 403 with the
// reason, logged once at start; /metrics and the health checks stay open.
func TestConsoleRefusedWithAuthorizer(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	b := newTestBroker(t, &logs, slog.LevelInfo, func(b *Broker) { b.authz = newRuleAuthz("User:ANONYMOUS") },
		"metrics.listen=127.0.0.1:0")
	for _, path := range []string{"/ui/", "/ui/api/overview", "/ui/api/topics", "/ui/console.js"} {
		if code, body, _ := httpGet(t, b, path); code != http.StatusForbidden || !strings.Contains(body, "authorizer") {
			t.Errorf("%s: %d %q, want 403 naming the authorizer", path, code, body)
		}
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _, _ := httpGet(t, b, path); code != http.StatusOK {
			t.Errorf("%s: %d, want 200", path, code)
		}
	}
	if n := len(logs.lines("web console is disabled")); n != 1 {
		t.Errorf("%d log lines on the refused console, want 1:\n%s", n, logs.String())
	}
}

// A console login of an unknown SCRAM user runs the same PBKDF2
// derivation as a known user's wrong password, so the answer's timing
// does not tell which users exist.
func TestConsoleUnknownUserDerives(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, nil, slog.LevelInfo, nil,
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b.ListenerAddr("PLAINTEXT").String()))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"}}); err != nil || res["bob"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := b.meta.ScramCredential("bob", meta.ScramSHA256); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("bob's credential not applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a := newConsoleAuth(b, "SASL_PLAINTEXT")
	derivations := func(user, pass string) int64 {
		t.Helper()
		before := a.derived.Load()
		if _, ok := a.login(user, pass); ok {
			t.Fatalf("%s/%s logged in", user, pass)
		}
		return a.derived.Load() - before
	}
	// Two SCRAM mechanisms: one derivation each, known user or not.
	if n := derivations("bob", "wrong"); n != 2 {
		t.Errorf("bob's wrong password: %d derivations, want 2", n)
	}
	if n := derivations("nobody", "wrong"); n != 2 {
		t.Errorf("an unknown user: %d derivations, want 2 (as a known user's)", n)
	}
	if _, ok := a.login("bob", "bob-secret"); !ok {
		t.Error("bob's password refused")
	}
}
