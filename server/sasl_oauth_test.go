package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// oauthJaas is the OAUTHBEARER listener's JAAS config of these tests: the
// unsecured validator, requiring the scope "kafka".
const oauthJaas = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="1000";`

// oauthSets enable OAUTHBEARER and PLAIN on the SASL_PLAINTEXT listener.
var oauthSets = []string{
	"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
	"listener.name.sasl_plaintext.sasl.enabled.mechanisms=OAUTHBEARER,PLAIN",
	"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + saslJaas,
	"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + oauthJaas,
}

// unsecuredJWS is a compact unsecured JWS of the given JSON header and
// claims: base64url without padding, an empty signature.
func unsecuredJWS(header, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(claims)) + "."
}

// aliceToken is a valid token for alice with scope kafka, expiring in
// lifetime.
func aliceToken(lifetime time.Duration) string {
	now := time.Now().Unix()
	return unsecuredJWS(`{"alg":"none"}`, fmt.Sprintf(`{"sub":"alice","iat":%d,"exp":%d,"scope":["kafka","other"]}`, now, now+int64(lifetime/time.Second)))
}

func TestSaslOAuthBearerFranz(t *testing.T) {
	t.Parallel()
	var ps principals
	b := newTestBroker(t, nil, slog.LevelInfo, ps.hook, oauthSets...)
	addr := b.ListenerAddr("SASL_PLAINTEXT").String()
	if err := saslProduceConsume(t, addr, "oauth", oauth.Auth{Token: aliceToken(time.Hour), Extensions: map[string]string{"traceId": "abc"}}.AsMechanism()); err != nil {
		t.Fatalf("alice: %v", err)
	}
	if !ps.has("User:alice") {
		t.Errorf("principals %v, want User:alice (the token's sub)", ps.got)
	}
	now := time.Now().Unix()
	claims := func(c string) string { return unsecuredJWS(`{"alg":"none"}`, c) }
	for _, tc := range []struct {
		name, token, zid, status string
	}{
		{"expired", claims(fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka"}`, now-60)), "", "invalid_token"},
		{"no exp", claims(`{"sub":"alice","scope":"kafka"}`), "", "invalid_token"},
		{"exp a string", claims(fmt.Sprintf(`{"sub":"alice","exp":"%d","scope":"kafka"}`, now+60)), "", "invalid_token"},
		{"issued in the future", claims(fmt.Sprintf(`{"sub":"alice","iat":%d,"exp":%d,"scope":"kafka"}`, now+60, now+120)), "", "invalid_token"},
		{"exp not after iat", claims(fmt.Sprintf(`{"sub":"alice","iat":%d,"exp":%d,"scope":"kafka"}`, now, now)), "", "invalid_token"},
		{"missing scope", claims(fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"read write"}`, now+60)), "", "insufficient_scope"},
		{"no principal claim", claims(fmt.Sprintf(`{"user":"alice","exp":%d,"scope":"kafka"}`, now+60)), "", "invalid_token"},
		{"principal a number", claims(fmt.Sprintf(`{"sub":42,"exp":%d,"scope":"kafka"}`, now+60)), "", "invalid_token"},
		{"bad JSON", unsecuredJWS(`{"alg":"none"}`, `{"sub":"alice",`), "", "invalid_token"},
		{"signed", unsecuredJWS(`{"alg":"HS256"}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka"}`, now+60)) + "c2ln", "", "invalid_token"},
		{"garbage", "!!not-a-token", "", ""},
		{"another authzid", aliceToken(time.Hour), "bob", ""},
	} {
		err := saslLogin(t, addr, oauth.Auth{Token: tc.token, Zid: tc.zid}.AsMechanism())
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", tc.name, err)
			continue
		}
		if tc.status != "" && !strings.Contains(err.Error(), `"status":"`+tc.status+`"`) {
			t.Errorf("%s: %v, want the status %s", tc.name, err, tc.status)
		}
	}
	if ps.has("User:bob") {
		t.Errorf("principals %v: bob authenticated", ps.got)
	}
}

// The exchange on the wire: the JSON challenge, the client's %x01, then
// the failure; the session lifetime from the token's exp; garbage tokens.
func TestSaslOAuthBearerWire(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, nil, slog.LevelInfo, nil, append(oauthSets[:len(oauthSets):len(oauthSets)], "listener.name.sasl_plaintext.connections.max.reauth.ms=600000")...)
	addr := b.ListenerAddr("SASL_PLAINTEXT").String()
	initial := func(token string) []byte { return []byte("n,,\x01auth=Bearer " + token + "\x01\x01") }
	start := func() *rawSasl {
		r := dialSasl(t, addr)
		if hs := r.roundTrip(handshake("OAUTHBEARER", 1)).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
			t.Fatalf("handshake: %+v", hs)
		}
		return r
	}

	// Valid, expiring in 30s: the session lasts until exp, not the
	// listener's 10 minutes.
	r := start()
	ar := r.roundTrip(authenticate(1, initial(aliceToken(30*time.Second)))).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 25000 || ar.SessionLifetimeMillis > 30000 {
		t.Fatalf("valid token: %+v, want a session lifetime of about 30s", ar)
	}

	// An exp far in the future (and claims in the standard base64
	// alphabet): the listener's lifetime.
	r = start()
	std := base64.RawStdEncoding.EncodeToString
	far := std([]byte(`{"alg":"none"}`)) + "." + std([]byte(`{"sub":"alice","exp":1e300,"scope":"kafka","note":"??>>"}`)) + "."
	if ar = r.roundTrip(authenticate(1, initial(far))).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 600000 {
		t.Fatalf("exp 1e300: %+v", ar)
	}

	// Past the token's exp the session is over: a request closes the
	// connection (no connections.max.reauth.ms needed).
	r = start()
	ar = r.roundTrip(authenticate(1, initial(aliceToken(2*time.Second)))).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 2000 {
		t.Fatalf("a token expiring in 2s: %+v", ar)
	}
	time.Sleep(time.Duration(ar.SessionLifetimeMillis+200) * time.Millisecond) // past the token's exp; not a wait for a condition
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	r.send(meta)
	r.closed("a request after the token expired")

	// Missing scope: the challenge, then %x01, then the failure with it.
	r = start()
	bad := unsecuredJWS(`{"alg":"none"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, time.Now().Unix()+60))
	ar = r.roundTrip(authenticate(1, initial(bad))).(*kmsg.SASLAuthenticateResponse)
	want := `{"status":"insufficient_scope", "scope":"[kafka]"}`
	if ar.ErrorCode != 0 || string(ar.SASLAuthBytes) != want {
		t.Fatalf("bad scope: %+v, want the challenge %s", ar, want)
	}
	ar = r.roundTrip(authenticate(1, []byte{0x01})).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || *ar.ErrorMessage != want {
		t.Fatalf("after %%x01: %+v", ar)
	}
	r.closed("failed OAUTHBEARER")

	// A challenge answered by another token: validated afresh.
	r = start()
	ar = r.roundTrip(authenticate(1, initial(bad))).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || len(ar.SASLAuthBytes) == 0 {
		t.Fatalf("challenge: %+v", ar)
	}
	if ar = r.roundTrip(authenticate(1, initial(aliceToken(time.Hour)))).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 600000 {
		t.Fatalf("a valid token after a challenge: %+v, want the listener's lifetime", ar)
	}

	// Malformed initial responses fail at once and close.
	for _, tok := range [][]byte{
		{0xff, 0x00, 0x01, 0x80},
		[]byte("n,,\x01auth=Bearer \x01\x01"),
		[]byte("n,,\x01auth=Basic abc\x01\x01"),
		[]byte("n,,\x01host=x\x01\x01"),
		[]byte("y,,\x01auth=Bearer a.b.\x01\x01"),
		[]byte("n,,\x01auth=Bearer a.b.\x01"),
		{0x01},
		{},
	} {
		r = start()
		ar = r.roundTrip(authenticate(1, tok)).(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%q: %+v, want SASL_AUTHENTICATION_FAILED", tok, ar)
		}
		r.closed(fmt.Sprintf("%q", tok))
	}

	// Raw tokens after a v0 handshake: the challenge comes back raw; the
	// %x01 closes.
	r = dialSasl(t, addr)
	r.roundTrip(handshake("OAUTHBEARER", 0))
	writeRawToken(t, r, initial(bad))
	if got, err := r.frame(); err != nil || string(got) != want {
		t.Fatalf("raw challenge: %q %v", got, err)
	}
	writeRawToken(t, r, []byte{0x01})
	r.closed("raw %x01")
}

// writeRawToken writes a size-prefixed raw SASL token.
func writeRawToken(t *testing.T, r *rawSasl, token []byte) {
	t.Helper()
	buf := append([]byte{byte(len(token) >> 24), byte(len(token) >> 16), byte(len(token) >> 8), byte(len(token))}, token...)
	if _, err := r.c.Write(buf); err != nil {
		t.Fatal(err)
	}
}

// OAUTHBEARER over SASL_SSL, and franz-go re-authenticating with fresh
// tokens before each one's exp ends the session (KIP-368 driven by the
// token alone: no connections.max.reauth.ms).
func TestSaslOAuthBearerSSLReauth(t *testing.T) {
	t.Parallel()
	var ps principals
	b, ca := startSaslSSLBroker(t, ps.hook,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config="+oauthJaas)
	var minted atomic.Int32
	mech := oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		minted.Add(1)
		return oauth.Auth{Token: aliceToken(3 * time.Second)}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b.ListenerAddr("SASL_SSL").String(), kgo.DialTLSConfig(ca.ClientConfig(nil)), kgo.SASL(mech),
		kgo.DefaultProduceTopic("oauth-ssl"), kgo.AllowAutoTopicCreation())
	for i := 0; i < 6; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d over SASL_SSL with OAUTHBEARER: %v", i, err)
		}
		time.Sleep(time.Second) // spans the tokens' exp
	}
	if !ps.has("User:alice") {
		t.Fatalf("principals %v, want User:alice", ps.got)
	}
	ps.mu.Lock()
	logins := len(ps.got)
	ps.mu.Unlock()
	if logins < 3 || minted.Load() < 3 {
		t.Fatalf("%d logins with %d tokens over 6s of 3s tokens: no re-authentication", logins, minted.Load())
	}
}

// kcat (librdkafka) with its own unsecured JWT (sasl.oauthbearer.config).
func TestSaslOAuthBearerKcat(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	b := newTestBroker(t, nil, slog.LevelInfo, nil, oauthSets...)
	addr := b.ListenerAddr("SASL_PLAINTEXT").String()
	args := func(config string) []string {
		return []string{"-b", addr, "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=OAUTHBEARER",
			"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=" + config, "-t", "kcat-oauth"}
	}
	ok := args("principal=alice scope=kafka")
	runTool(t, "k1:v1\n", kcat, append(ok, "-P", "-K:")...)
	if out := runTool(t, "", kcat, append(ok, "-C", "-e", "-q", "-o", "beginning", "-f", "%k=%s\n")...); out != "k1=v1\n" {
		t.Fatalf("kcat consumed %q", out)
	}
	// Without the required scope the login fails.
	if out, err := runToolErr(kcat, append(args("principal=alice"), "-L", "-m", "5")...); err == nil {
		t.Fatalf("kcat without the scope succeeded:\n%s", out)
	}
}

// confluent-kafka-python (librdkafka) with its unsecured JWT.
func TestSaslOAuthBearerConfluentPython(t *testing.T) {
	t.Parallel()
	py := pythonWith(t, "confluent_kafka")
	b := newTestBroker(t, nil, slog.LevelInfo, nil, oauthSets...)
	runTool(t, "", py, "-c", confluentSaslScript, b.ListenerAddr("SASL_PLAINTEXT").String(), "OAUTHBEARER", "principal=alice scope=kafka", "", "ck-oauth")
}

// Any client message: no panic, and success only with a principal and an
// expiry.
func FuzzOAuthBearerStep(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer " + aliceToken(time.Hour) + "\x01\x01"))
	f.Add([]byte("n,a=alice,\x01auth=Bearer " + aliceToken(time.Hour) + "\x01k=v\x01\x01"))
	f.Add([]byte("n,,\x01auth=Bearer a..b\x01\x01"))
	f.Add([]byte{0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		m := &oauthMech{v: config.UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope", RequiredScope: []string{"kafka"}}, now: time.Now}
		for _, msg := range [][]byte{in, {0x01}} {
			_, done, err := m.step(msg)
			if done && (err != nil || m.user() == "" || m.credentialExpiry().IsZero()) {
				t.Fatalf("done with user %q, expiry %v, err %v", m.user(), m.credentialExpiry(), err)
			}
			if done || err != nil {
				return
			}
		}
	})
}
