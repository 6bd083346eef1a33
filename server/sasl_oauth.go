package server

// SASL OAUTHBEARER (RFC 7628, KIP-255) with Kafka's default server
// callback, the unsecured JWS validator (Kafka's OAuthBearerSaslServer
// with OAuthBearerUnsecuredValidatorCallbackHandler). It accepts unsigned
// tokens: for development and tests, never for production.
//
// The client's one message is RFC 7628's initial response:
//
//	n,[a=<authzid>],%x01auth=Bearer <token>%x01[<key>=<value>%x01]...%x01
//
// The token is a compact JWS "<header>.<claims>." (base64url JSON
// objects, the signature empty) whose header has "alg":"none". The claims
// must hold exp (a number of seconds since the epoch, after now minus the
// allowed clock skew) and the principal claim (a non-blank string);
// iat, if present, a number not after now plus the skew and before exp;
// the scope claim (a string or a list of strings) must hold every
// required scope. nbf is not checked (neither does Kafka). The JAAS
// options of listener.name.<l>.oauthbearer.sasl.jaas.config name the
// claims and the rules (config.UnsecuredValidator). Extensions are
// accepted and ignored.
//
// A token that fails validation is not yet a failure: the server answers
// RFC 7628's JSON error ({"status":"invalid_token"}, or
// "insufficient_scope" with the required scope), the client answers a
// single %x01, and only then does the exchange fail with
// SASL_AUTHENTICATION_FAILED carrying that JSON. A malformed initial
// response, or an authzid other than the token's principal, fails at once.
// On success the principal is User:<principal claim>, and the token's exp
// bounds the session (KIP-368, saslStep: the lifetime is the smaller of
// exp - now and connections.max.reauth.ms).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/server/config"
)

// oauthMech is one OAUTHBEARER exchange.
type oauthMech struct {
	v   config.UnsecuredValidator
	now func() time.Time

	challenge string    // the JSON error sent, awaiting the client's %x01
	name      string    // the principal, once done
	expiry    time.Time // the token's exp, once done
}

func (m *oauthMech) user() string { return m.name }

// credentialExpiry is when the token expires (exp), once done.
func (m *oauthMech) credentialExpiry() time.Time { return m.expiry }

// oauthInitial is RFC 7628's client initial response as Kafka's
// OAuthBearerClientInitialResponse reads it: a gs2 header without channel
// binding, then key=value pairs (keys letters only, values printable
// ASCII, space, tab, CR or LF), each ended by %x01, then %x01.
var (
	oauthInitial = regexp.MustCompile("^n,(?:a=((?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,\x01((?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01$")
	oauthAuth    = regexp.MustCompile(`^(\w+) +([-_~+/.a-zA-Z0-9]+=*)$`)
)

func (m *oauthMech) step(in []byte) ([]byte, bool, error) {
	if len(in) == 1 && in[0] == 0x01 && m.challenge != "" {
		return nil, false, authFailed("%s", m.challenge)
	}
	if m.name != "" {
		return nil, false, authFailed("OAUTHBEARER: unexpected token after authentication")
	}
	m.challenge = ""
	sub := oauthInitial.FindSubmatch(in)
	if sub == nil {
		return nil, false, authFailed("OAUTHBEARER: invalid client initial response")
	}
	authzid := string(sub[1])
	var auth []byte
	var hasAuth bool
	for _, kv := range bytes.Split(sub[2], []byte{0x01}) {
		if k, v, ok := bytes.Cut(kv, []byte("=")); ok && string(k) == "auth" {
			auth, hasAuth = v, true
		}
	}
	if !hasAuth {
		return nil, false, authFailed("OAUTHBEARER: invalid client initial response: no auth")
	}
	am := oauthAuth.FindSubmatch(auth)
	if am == nil || !strings.EqualFold(string(am[1]), "bearer") {
		return nil, false, authFailed("OAUTHBEARER: invalid client initial response: auth must be 'Bearer <token>'")
	}
	principal, exp, scopeErr, err := m.validate(string(am[2]))
	if err != nil {
		if scopeErr {
			m.challenge = fmt.Sprintf(`{"status":"insufficient_scope", "scope":"[%s]"}`, strings.Join(m.v.RequiredScope, ", "))
		} else {
			m.challenge = `{"status":"invalid_token"}`
		}
		return []byte(m.challenge), false, nil
	}
	if authzid != "" && authzid != principal {
		return nil, false, authFailed("OAUTHBEARER: the authorization id %q is not the token's principal %q", authzid, principal)
	}
	m.name, m.expiry = principal, exp
	return []byte{}, true, nil
}

// validate checks an unsecured JWS as Kafka's unsecured validator and
// returns its principal and expiry; scope reports a failure for a missing
// required scope (insufficient_scope), any other error an invalid token.
func (m *oauthMech) validate(token string) (principal string, exp time.Time, scope bool, err error) {
	parts := strings.Split(token, ".")
	if strings.Contains(token, "..") || len(parts) != 3 {
		return "", exp, false, fmt.Errorf("not a compact JWS of three parts")
	}
	header, err := jwsPart(parts[0])
	if err != nil {
		return "", exp, false, err
	}
	claims, err := jwsPart(parts[1])
	if err != nil {
		return "", exp, false, err
	}
	if alg, _ := header["alg"].(string); alg != "none" || parts[2] != "" {
		return "", exp, false, fmt.Errorf("not an unsecured JWS (alg none, no signature)")
	}
	scopes, ok := jwsScope(claims[m.v.ScopeClaim])
	if !ok {
		return "", exp, false, fmt.Errorf("claim %s is not a string or a list", m.v.ScopeClaim)
	}
	expS, ok := jwsNumber(claims, "exp")
	if !ok || expS == nil {
		return "", exp, false, fmt.Errorf("no numeric exp claim")
	}
	principal, _ = claims[m.v.PrincipalClaim].(string)
	if strings.TrimSpace(principal) == "" {
		return "", exp, false, fmt.Errorf("no principal claim %s", m.v.PrincipalClaim)
	}
	iatS, ok := jwsNumber(claims, "iat")
	if !ok {
		return "", exp, false, fmt.Errorf("iat is not a number")
	}
	nowMs, skew := float64(m.now().UnixMilli()), float64(m.v.ClockSkewMs)
	switch {
	case iatS != nil && 1000**iatS > nowMs+skew:
		return "", exp, false, fmt.Errorf("issued in the future")
	case nowMs-skew >= 1000**expS:
		return "", exp, false, fmt.Errorf("expired")
	case iatS != nil && *expS <= *iatS:
		return "", exp, false, fmt.Errorf("exp not after iat")
	}
	for _, want := range m.v.RequiredScope {
		if !slices.Contains(scopes, want) {
			return "", exp, true, fmt.Errorf("scope %s missing", want)
		}
	}
	// Far-future exps are clamped (2^53 ms: some 285,000 years) to stay
	// within time.Time.
	return principal, time.UnixMilli(int64(math.Min(math.Round(1000**expS), 1<<53))), false, nil
}

// jwsPart decodes one base64url part of a JWS (padded or not; the
// standard alphabet is accepted too, as Kafka's decoder does) into a JSON
// object.
func jwsPart(s string) (map[string]any, error) {
	s = strings.TrimRight(s, "=")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, fmt.Errorf("malformed base64url")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil || obj == nil || d.More() {
		return nil, fmt.Errorf("malformed JSON")
	}
	return obj, nil
}

// jwsNumber is a numeric claim in seconds: nil when absent, ok false when
// it is not a number.
func jwsNumber(claims map[string]any, name string) (*float64, bool) {
	v, present := claims[name]
	if !present {
		return nil, true
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return nil, false
	}
	return &f, true
}

// jwsScope is the scope claim's items: a string is one item, a list its
// non-blank items, each trimmed; ok false for another type.
func jwsScope(v any) ([]string, bool) {
	switch v := v.(type) {
	case nil:
		return nil, true
	case string:
		if s := strings.TrimSpace(v); s != "" {
			return []string{s}, true
		}
		return nil, true
	case []any:
		var out []string
		for _, e := range v {
			if s := strings.TrimSpace(fmt.Sprint(e)); s != "" {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}
