package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// On a SASL listener a connection speaks raft only once authenticated:
// a raft magic before that (first, mid-exchange, after a failed login) is
// an oversized SASL frame and closes the connection; after a login (the
// raft dialler's, saslLoginConn) the same bytes hand it to the transport,
// which then waits for the rest of its hello. Other clients are served
// throughout.
func TestSaslRaftHandOffNeedsAuthentication(t *testing.T) {
	t.Parallel()
	_, plainAddr, addr := startSaslBroker(t, "", "connection.failed.authentication.delay.ms=0")
	raft := []byte("SLRT")

	r := dialSasl(t, addr)
	r.c.Write(append(raft, 0, 0, 0, 0))
	r.closed("raft magic first")

	r = dialSasl(t, addr)
	r.roundTrip(kmsg.NewPtrApiVersionsRequest())
	if resp := r.roundTrip(handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	r.c.Write(raft)
	r.closed("raft magic after the handshake")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r = dialSasl(t, addr)
	err := saslLoginConn(ctx, r.c, addr, "test", plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism())
	if !errors.Is(err, errPeerSasl) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	r.c.Write(raft)
	r.closed("raft magic after a failed login")

	// Kafka clients are not disturbed.
	if err := saslProduceConsume(t, addr, "raft-refused", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil {
		t.Fatal(err)
	}

	// The dialler's SCRAM login (an inter-broker SCRAM mechanism), once
	// the credential is in the metadata.
	adm := kadm.NewClient(newClient(t, plainAddr))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "pw"}})
	if err != nil || res["broker"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	for _, tc := range []struct {
		pass string
		ok   bool
	}{{"pw", true}, {"wrong", false}} {
		c := dialSasl(t, addr)
		err := saslLoginConn(ctx, c.c, addr, "test", scram.Auth{User: "broker", Pass: tc.pass}.AsSha512Mechanism())
		if (err == nil) != tc.ok {
			t.Errorf("SCRAM login with %q: %v", tc.pass, err)
		}
	}

	// Logged in, raft on a client listener (neither a controller nor
	// the inter-broker listener, which raft dials) is refused too, as
	// Kafka serves raft on controller listeners only.
	loggedIn := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := saslLoginConn(ctx, c, addr, "test", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil {
			t.Fatalf("login: %v", err)
		}
		c.Write(raft)
		return c
	}
	c := loggedIn(addr)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
		t.Fatalf("authenticated raft connection on a client listener: held open, want it closed")
	}

	// Logged in on the inter-broker listener: handed to raft, which
	// waits for the rest of the hello instead of closing.
	_, _, ibAddr := startSaslBroker(t, "", "inter.broker.listener.name=SASL_PLAINTEXT")
	c = loggedIn(ibAddr)
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("authenticated raft connection: %v, want it held open by the transport", err)
	}
}

// connection.failed.authentication.delay.ms: a failed login is answered
// SASL_AUTHENTICATION_FAILED and closed no sooner than the delay after
// its token, while another client logs in meanwhile (only the failed
// connection's goroutine waits; one login takes far less than the 5 s).
func TestSaslFailedAuthenticationDelay(t *testing.T) {
	t.Parallel()
	const delay = 5 * time.Second
	_, _, addr := startSaslBroker(t, "", "connection.failed.authentication.delay.ms=5000")
	r := dialSasl(t, addr)
	r.c.SetDeadline(time.Now().Add(30 * time.Second))
	if resp := r.roundTrip(handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	type answer struct {
		after time.Duration
		code  int16
		err   error
	}
	failed := make(chan answer, 1)
	go func() {
		start := time.Now()
		r.send(authenticate(1, []byte("\x00alice\x00wrong")))
		body, err := r.frame()
		a := answer{after: time.Since(start), err: err}
		if err == nil {
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.Version = 1
			a.err = resp.ReadFrom(body[4:])
			a.code = resp.ErrorCode
		}
		failed <- a
	}()
	if err := saslLogin(t, addr, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-failed:
		t.Fatalf("the failed login was answered (%+v) before another client logged in", a)
	default:
	}
	a := <-failed
	if a.err != nil || a.code != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("failed login: %v, code %d, want SASL_AUTHENTICATION_FAILED", a.err, a.code)
	}
	if a.after < delay {
		t.Fatalf("failed login answered after %v, want at least %v", a.after, delay)
	}
	r.closed("after the failed login")
}

// The raft dialler (dialPeer) logs in to a SASL listener: with the right
// password it returns the authenticated connection; a refused login is an
// error and a WARN line naming the address, so a misconfigured node is
// visible without debug logs.
func TestPeerSaslLoginRefusedIsLogged(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	b := newTestBroker(t, logs, slog.LevelInfo, nil,
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+saslJaas)
	addr := b.ListenerAddr("SASL_PLAINTEXT").String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.cl.peerSasl.interBroker = plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	c, err := b.cl.dialPeer(ctx, addr)
	if err != nil {
		t.Fatalf("login as admin: %v", err)
	}
	c.Close()
	if strings.Contains(logs.String(), "SASL login to another node refused") {
		t.Fatalf("a refusal logged for a good login:\n%s", logs)
	}
	b.cl.peerSasl.interBroker = plain.Auth{User: "admin", Pass: "wrong"}.AsMechanism()
	if _, err := b.cl.dialPeer(ctx, addr); !errors.Is(err, errPeerSasl) {
		t.Fatalf("wrong password: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "SASL login to another node refused") || !strings.Contains(l, addr) {
		t.Fatalf("no WARN for the refused login:\n%s", l)
	}
}
