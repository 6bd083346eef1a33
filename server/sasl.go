package server

// SASL authentication on SASL_PLAINTEXT listeners (and, once TLS wraps a
// listener's connections, SASL_SSL: the exchange runs over whatever
// net.Conn the listener gives), as Kafka's SaslServerAuthenticator:
//
//   - Until authenticated, a connection's frames are served here, not by
//     the request handlers (conn.go hands them over, serveSasl). A frame
//     may be at most sasl.server.max.receive.size bytes (default 524288);
//     a larger one closes the connection before its body is read, so an
//     unauthenticated client holds at most that much memory.
//   - First, ApiVersions (once) and SaslHandshake (v0 or v1) are served;
//     any other request closes the connection without an answer, as in
//     Kafka (IllegalSaslStateException, no response). A mechanism not
//     enabled on the listener (sasl.enabled.mechanisms, or its
//     listener.name.<l>. form) is answered UNSUPPORTED_SASL_MECHANISM with
//     the enabled list, then the connection closes.
//   - After a v1 handshake the tokens come in SaslAuthenticate requests
//     (v0-v2); after a v0 handshake they come raw, each framed by a 4-byte
//     length, and the server's tokens go back the same way (what clients
//     before KIP-152 do). Any other request while authenticating closes
//     the connection (Kafka answers it ILLEGAL_SASL_STATE first; kmsg has
//     no generic error response, so Sluice closes only).
//   - A failed authentication is answered SASL_AUTHENTICATION_FAILED with
//     a message (v1 handshakes; a v0 exchange just closes), then the
//     connection closes. Malformed tokens are failures too. The answer
//     and the close wait connection.failed.authentication.delay.ms
//     (default 100; 0: none), as Kafka's; so does an unsupported
//     mechanism's.
//   - Raft's connections come in on the inter-broker and controller
//     listeners: on a SASL listener a connection may hand itself to the
//     raft transport only once authenticated (conn.go, raftAllowed).
//   - Once authenticated the connection's principal is User:<name>
//     (clientConn.principal), and requests are served as on PLAINTEXT.
//     SaslHandshake and SaslAuthenticate then answer ILLEGAL_SASL_STATE
//     (as on a PLAINTEXT listener), unless re-authentication applies.
//
// Re-authentication (KIP-368): with connections.max.reauth.ms > 0, or a
// mechanism whose credential expires (OAUTHBEARER), a SaslAuthenticate
// v1+ answer that completes authentication carries SessionLifetimeMs,
// the smaller of the two (else 0), and the session expires then: a
// request other than SaslHandshake after that closes the connection. A SaslHandshake on an authenticated connection whose
// session has an expiry (and whose last re-authentication began at least
// a second before) starts a re-authentication: the same mechanism, ending
// in the same principal, or the connection closes.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslPhase is where a connection's SASL exchange is.
type saslPhase int

const (
	saslVersionsOrHandshake saslPhase = iota // nothing served yet: ApiVersions or SaslHandshake
	saslHandshake                            // ApiVersions served: SaslHandshake only
	saslAuthenticate                         // handshake done: the mechanism's tokens
	saslComplete                             // authenticated
)

// saslSession is one connection's SASL state; the connection's reader
// owns it.
type saslSession struct {
	listener   string
	phase      saslPhase
	headers    bool   // tokens in SaslAuthenticate (a v1 handshake)
	mechName   string // the handshake's mechanism
	mech       saslMech
	badMech    bool      // a re-authentication asked for another mechanism
	reauth     bool      // the exchange is a re-authentication
	principal  string    // "User:<name>" once authenticated
	expiry     time.Time // the session's end (zero: none)
	lastReauth time.Time
}

// newSaslSession is the SASL state of a new connection on listener, nil
// when the listener is not a SASL one.
func (b *Broker) newSaslSession(listener string) *saslSession {
	if !b.cfg.IsSaslListener(listener) {
		return nil
	}
	return &saslSession{listener: listener}
}

// pending reports whether cc's frames are SASL's (not yet authenticated,
// or re-authenticating).
func (s *saslSession) pending() bool { return s != nil && s.phase != saslComplete }

// principal is the connection's authenticated principal: User:<name> on
// a SASL listener, the client certificate's mapped subject on a TLS
// listener (tls.go), User:ANONYMOUS elsewhere (Kafka's principal for
// PLAINTEXT connections).
func (cc *clientConn) principal() string {
	if cc.sasl != nil && cc.sasl.principal != "" {
		return cc.sasl.principal
	}
	if cc.tlsPrincipal != "" {
		return cc.tlsPrincipal
	}
	return anonymous
}

// errSaslClose closes a connection for a SASL reason.
var errSaslClose = fmt.Errorf("%w: SASL", errClose)

// saslCheckExpired closes a connection whose session expired, unless the
// request (key) is the SaslHandshake that re-authenticates it.
func (cc *clientConn) saslCheckExpired(key int16) error {
	s := cc.sasl
	if s == nil || s.expiry.IsZero() || key == kmsg.SASLHandshake.Int16() || time.Now().Before(s.expiry) {
		return nil
	}
	return fmt.Errorf("%w: session of %s expired (connections.max.reauth.ms)", errSaslClose, s.principal)
}

// serveSasl reads one frame of size bytes before authentication and
// serves it.
func (cc *clientConn) serveSasl(ctx context.Context, r io.Reader, size int32) error {
	if max := cc.b.cfg.SaslServerMaxReceiveSize(); size < 0 || size > max {
		return fmt.Errorf("%w: invalid receive size %d before authentication (sasl.server.max.receive.size=%d)", errSaslClose, size, max)
	}
	body, err := readBody(r, int(size))
	if err != nil {
		return cc.receiveErr(err)
	}
	cc.conn.SetReadDeadline(time.Time{})
	if err := cc.waitAnswered(0); err != nil {
		return err
	}
	s := cc.sasl
	if s.phase == saslAuthenticate && !s.headers {
		err := cc.saslRawToken(body)
		if err != nil {
			cc.failedAuthDelay(ctx)
		}
		return err
	}
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if rd.Complete() != nil {
		return fmt.Errorf("%w: not a Kafka request before authentication (GSSAPI is not supported)", errSaslClose)
	}
	if clientID != nil {
		cc.clientID = *clientID
	}
	h, ok := handlers[key]
	req := kmsg.RequestForKey(key)
	allowed := key == kmsg.SASLHandshake.Int16() ||
		key == kmsg.ApiVersions.Int16() && s.phase == saslVersionsOrHandshake && !s.reauth ||
		key == kmsg.SASLAuthenticate.Int16() && s.phase == saslAuthenticate
	if s.phase == saslAuthenticate && key == kmsg.SASLHandshake.Int16() {
		allowed = false
	}
	if !ok || req == nil || !allowed {
		return fmt.Errorf("%w: unexpected %s request in SASL state %d", errSaslClose, kmsg.NameForKey(key), s.phase)
	}
	a := &answer{corr: corr, key: key, version: version, start: cc.b.metrics.now()}
	if version < h.minVersion || version > h.maxVersion {
		if key == kmsg.ApiVersions.Int16() {
			a.version, a.finish = 0, ready(apiVersionsUnsupported(cc.b, cc))
			return cc.queue(a)
		}
		return fmt.Errorf("%w: %s version %d outside [%d, %d]", errSaslClose, kmsg.NameForKey(key), version, h.minVersion, h.maxVersion)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return fmt.Errorf("%w: malformed request header: %v", errSaslClose, err)
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		return fmt.Errorf("%w: malformed %s v%d: %v", errSaslClose, kmsg.NameForKey(key), version, err)
	}
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp, err := serveApiVersions(ctx, cc.b, cc, req)
		if err != nil {
			return err
		}
		s.phase = saslHandshake
		a.finish = ready(resp)
		return cc.queue(a)
	case *kmsg.SASLHandshakeRequest:
		resp, err := cc.saslHandshake(req)
		if err != nil {
			cc.failedAuthDelay(ctx)
		}
		a.finish = ready(resp)
		cc.queue(a)
		return err
	case *kmsg.SASLAuthenticateRequest:
		resp, err := cc.saslAuthenticate(req)
		if err != nil {
			cc.failedAuthDelay(ctx)
		}
		a.finish = ready(resp)
		cc.queue(a)
		return err
	}
	return fmt.Errorf("%w: unexpected request", errSaslClose)
}

// failedAuthDelay waits connection.failed.authentication.delay.ms (or
// until the broker closes) before a failed authentication is answered
// and its connection closed: Kafka's Selector delays both (its
// DelayedAuthenticationFailureClose), slowing a client that guesses
// passwords. Only the connection's reader waits.
func (cc *clientConn) failedAuthDelay(ctx context.Context) {
	d := cc.b.cfg.FailedAuthenticationDelay()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// saslHandshake answers a handshake and starts the mechanism; an error
// (after the answer) closes the connection.
func (cc *clientConn) saslHandshake(req *kmsg.SASLHandshakeRequest) (kmsg.Response, error) {
	s := cc.sasl
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = cc.b.cfg.SaslEnabledMechanisms(s.listener)
	enabled := false
	for _, m := range resp.SupportedMechanisms {
		enabled = enabled || m == req.Mechanism
	}
	if !enabled {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, fmt.Errorf("%w: unsupported SASL mechanism %q", errSaslClose, req.Mechanism)
	}
	s.headers = req.Version >= 1
	if s.reauth && req.Mechanism != s.mechName {
		s.badMech = true // Kafka answers the handshake, then fails the exchange
	}
	s.mechName = req.Mechanism
	s.mech = cc.b.newSaslMech(s.listener, req.Mechanism)
	s.phase = saslAuthenticate
	return resp, nil
}

// newSaslMech starts the server side of an enabled mechanism.
func (b *Broker) newSaslMech(listener, name string) saslMech {
	if mech, ok := scramMechanism(name); ok {
		return &scramMech{mech: mech, lookup: func(user string) (c meta.ScramCredential, ok bool) {
			return b.meta.ScramCredential(user, mech)
		}}
	}
	j, err := config.ParseJaas(b.cfg.SaslJaasConfig(listener, name))
	if name == config.MechOAuthBearer {
		v, _ := j.UnsecuredValidator() // checked by Validate
		return &oauthMech{v: v, now: time.Now}
	}
	users := map[string]string{}
	if err == nil {
		users = j.PlainUsers()
	}
	return &plainMech{users: users}
}

// saslStep runs the mechanism on one token; on completion it sets the
// principal and the session's expiry.
func (cc *clientConn) saslStep(token []byte) (out []byte, done bool, lifetimeMs int64, err error) {
	s := cc.sasl
	if s.badMech {
		return nil, false, 0, authFailed("re-authentication must use the session's mechanism")
	}
	out, done, err = s.mech.step(token)
	if err != nil || !done {
		return out, done, 0, err
	}
	p := "User:" + s.mech.user()
	if s.reauth && p != s.principal {
		return nil, false, 0, authFailed("re-authentication must keep the session's principal")
	}
	s.principal, s.phase, s.reauth = p, saslComplete, false
	lifetimeMs, s.expiry = sessionLifetime(time.Now(), cc.b.cfg.ConnectionsMaxReauthMs(s.listener), s.mech)
	cc.logger.Debug("sluice: SASL authenticated", "principal", cc.principal(), "mechanism", s.mechName, "listener", s.listener)
	if cc.b.onPrincipal != nil {
		cc.b.onPrincipal(s.listener, cc.principal())
	}
	return out, true, lifetimeMs, nil
}

// sessionLifetime is a new session's lifetime and expiry (zero: none), as
// Kafka's SaslServerAuthenticator: the smaller of maxReauthMs
// (connections.max.reauth.ms, 0 for none) and the time left until the
// credential expires, for a mechanism whose credential does (OAUTHBEARER's
// token exp); never negative.
func sessionLifetime(now time.Time, maxReauthMs int64, mech saslMech) (ms int64, expiry time.Time) {
	c, expires := mech.(interface{ credentialExpiry() time.Time })
	switch {
	case expires:
		ms = max(c.credentialExpiry().Sub(now).Milliseconds(), 0)
		if maxReauthMs > 0 {
			ms = min(ms, maxReauthMs)
		}
	case maxReauthMs > 0:
		ms = maxReauthMs
	default:
		return 0, time.Time{}
	}
	return ms, now.Add(time.Duration(ms) * time.Millisecond)
}

// saslAuthenticate serves a SaslAuthenticate before authentication.
func (cc *clientConn) saslAuthenticate(req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	out, _, lifetime, err := cc.saslStep(req.SASLAuthBytes)
	if err != nil {
		var ae *saslAuthError
		msg := "Authentication failed with SASL mechanism " + cc.sasl.mechName
		if errors.As(err, &ae) {
			msg = ae.msg
		}
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		return resp, fmt.Errorf("%w: authentication failed: %s", errSaslClose, msg)
	}
	if out == nil {
		out = []byte{}
	}
	resp.SASLAuthBytes, resp.SessionLifetimeMillis = out, lifetime
	return resp, nil
}

// saslRawToken serves a raw token (after a v0 handshake): the answer is
// written raw, size-prefixed; a failure closes without an answer.
func (cc *clientConn) saslRawToken(token []byte) error {
	out, _, _, err := cc.saslStep(token)
	if err != nil {
		return fmt.Errorf("%w: authentication failed: %v", errSaslClose, err)
	}
	if out != nil {
		return cc.queue(&answer{raw: out, finish: ready(nil)})
	}
	return nil
}

// saslReauthenticate serves a SaslHandshake on an authenticated
// connection: it starts a re-authentication when the session has an
// expiry and the last one began a second or more ago; ok is false when
// it does not apply (the request is then answered ILLEGAL_SASL_STATE).
// The exchange is then served by serveSasl.
func (cc *clientConn) saslReauthenticate(req *kmsg.SASLHandshakeRequest) (resp kmsg.Response, ok bool) {
	s := cc.sasl
	if s == nil || s.phase != saslComplete || s.expiry.IsZero() || time.Since(s.lastReauth) < time.Second {
		return nil, false
	}
	s.lastReauth = time.Now()
	s.reauth, s.badMech = true, false
	resp, err := cc.saslHandshake(req)
	if err != nil {
		// An unsupported mechanism: answered so; the exchange then
		// fails at its first token (Kafka closes at once).
		s.phase, s.badMech = saslAuthenticate, true
	}
	return resp, true
}

// writeRaw writes a raw SASL token, size-prefixed.
func writeRaw(w *bufio.Writer, token []byte) error {
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(token)))
	w.Write(size[:])
	w.Write(token)
	return w.Flush()
}
