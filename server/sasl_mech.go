package server

// The SASL mechanisms' server sides: PLAIN (RFC 4616) against the users of
// the listener's JAAS config, and SCRAM-SHA-256 and SCRAM-SHA-512 (RFC
// 5802, RFC 7677) against the credentials in the metadata (meta.ScramCredential:
// salt, iterations, StoredKey, ServerKey). A mechanism gets the client's
// tokens in order and returns its answers; done once the client is
// authenticated. Every error is an authentication failure (the
// connection closes), its message safe to send to the client: it never
// tells whether the user exists.

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
)

// saslMech is one exchange of a mechanism's server side.
type saslMech interface {
	// step takes the client's next token and returns the server's
	// answer (nil for none); done is set once the client is
	// authenticated. An error ends the exchange.
	step(in []byte) (out []byte, done bool, err error)
	// user is the authenticated user name, once done.
	user() string
}

// saslAuthError is a failed authentication, answered with
// SASL_AUTHENTICATION_FAILED and msg.
type saslAuthError struct{ msg string }

func (e *saslAuthError) Error() string { return e.msg }

func authFailed(format string, args ...any) error {
	return &saslAuthError{msg: fmt.Sprintf(format, args...)}
}

// plainMech checks "authzid NUL authcid NUL passwd" against users.
type plainMech struct {
	users map[string]string // JAAS user_<name>="<password>"
	name  string
}

func (m *plainMech) user() string { return m.name }

func (m *plainMech) step(in []byte) ([]byte, bool, error) {
	if m.name != "" {
		return nil, false, authFailed("PLAIN: unexpected token after authentication")
	}
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, false, authFailed("PLAIN: malformed response: want authzid NUL username NUL password, got %d fields", len(parts))
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), parts[2]
	switch {
	case user == "":
		return nil, false, authFailed("PLAIN: no username given")
	case len(pass) == 0:
		return nil, false, authFailed("PLAIN: no password given")
	case authzid != "" && authzid != user:
		return nil, false, authFailed("PLAIN: the authorization id must be the username or empty")
	}
	want, ok := m.users[user]
	if !ok {
		want = "\x00" // compare anyway: the same time for unknown users
	}
	if subtle.ConstantTimeCompare([]byte(want), pass) != 1 || !ok {
		return nil, false, authFailed("Authentication failed: invalid username or password")
	}
	m.name = user
	return []byte{}, true, nil
}

// scramHash is the hash of a SCRAM mechanism.
func scramHash(mech meta.ScramMechanism) func() hash.Hash {
	if mech == meta.ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// scramMechanism maps a SASL mechanism name to its meta mechanism.
func scramMechanism(name string) (meta.ScramMechanism, bool) {
	switch name {
	case config.MechScramSHA256:
		return meta.ScramSHA256, true
	case config.MechScramSHA512:
		return meta.ScramSHA512, true
	}
	return 0, false
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// scramKeys derives RFC 5802's StoredKey and ServerKey from a salted
// password.
func scramKeys(mech meta.ScramMechanism, salted []byte) (stored, server []byte) {
	h := scramHash(mech)
	ck := hmacOf(h, salted, []byte("Client Key"))
	sum := h()
	sum.Write(ck)
	return sum.Sum(nil), hmacOf(h, salted, []byte("Server Key"))
}

// scramMech is RFC 5802's server: client-first, server-first,
// client-final, server-final.
type scramMech struct {
	mech   meta.ScramMechanism
	lookup func(user string) (meta.ScramCredential, bool)

	state       int // 0: awaiting client-first; 1: awaiting client-final; 2: done
	gs2         string
	name        string
	nonce       string // the client's and ours
	clientBare  string
	serverFirst string
	cred        meta.ScramCredential
}

func (m *scramMech) user() string { return m.name }

func (m *scramMech) fail() error {
	return authFailed("Authentication failed: invalid credentials with SASL mechanism %s", m.mech)
}

func (m *scramMech) step(in []byte) ([]byte, bool, error) {
	switch m.state {
	case 0:
		return m.clientFirst(string(in))
	case 1:
		return m.clientFinal(string(in))
	}
	return nil, false, authFailed("%s: unexpected token after authentication", m.mech)
}

// saslName decodes RFC 5802's saslname (=2C is ',', =3D is '=').
func saslName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

func printableNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

func (m *scramMech) clientFirst(msg string) ([]byte, bool, error) {
	// gs2-header: "n" or "y" (no channel binding), then [a=authzid], ",".
	cb, rest, ok := strings.Cut(msg, ",")
	if !ok || (cb != "n" && cb != "y") {
		return nil, false, authFailed("%s: malformed client-first message (channel binding is not supported)", m.mech)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok || (authz != "" && !strings.HasPrefix(authz, "a=")) {
		return nil, false, authFailed("%s: malformed client-first message", m.mech)
	}
	m.gs2, m.clientBare = cb+","+authz+",", bare
	fields := strings.Split(bare, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, false, authFailed("%s: malformed client-first message", m.mech)
	}
	for _, ext := range fields[2:] {
		// Extensions (KIP-86: tokenauth for delegation tokens) are
		// not served.
		k, _, ok := strings.Cut(ext, "=")
		if !ok || k == "" {
			return nil, false, authFailed("%s: malformed client-first message", m.mech)
		}
		if k == "tokenauth" {
			return nil, false, authFailed("%s: delegation tokens are not supported", m.mech)
		}
	}
	name, ok := saslName(fields[0][2:])
	clientNonce := fields[1][2:]
	if !ok || name == "" || !printableNonce(clientNonce) {
		return nil, false, authFailed("%s: malformed client-first message", m.mech)
	}
	if authz != "" && authz[2:] != fields[0][2:] {
		return nil, false, authFailed("%s: the authorization id must be the username or empty", m.mech)
	}
	cred, ok := m.lookup(name)
	if !ok {
		return nil, false, m.fail()
	}
	var r [24]byte
	rand.Read(r[:])
	m.name, m.cred = name, cred
	m.nonce = clientNonce + base64.RawURLEncoding.EncodeToString(r[:])
	m.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", m.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	m.state = 1
	return []byte(m.serverFirst), false, nil
}

func (m *scramMech) clientFinal(msg string) ([]byte, bool, error) {
	withoutProof, proof64, ok := strings.Cut(msg, ",p=")
	if !ok || strings.Contains(proof64, ",") {
		return nil, false, authFailed("%s: malformed client-final message", m.mech)
	}
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, false, authFailed("%s: malformed client-final message", m.mech)
	}
	cbind, err := base64.StdEncoding.DecodeString(fields[0][2:])
	if err != nil || string(cbind) != m.gs2 {
		return nil, false, authFailed("%s: channel binding does not match the client-first message", m.mech)
	}
	// Kafka accepts a nonce that ends with the server-first one
	// (librdkafka sends its own nonce in front of it again).
	if !strings.HasSuffix(fields[1][2:], m.nonce) {
		return nil, false, authFailed("%s: nonce does not match", m.mech)
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	h := scramHash(m.mech)
	if err != nil || len(proof) != h().Size() {
		return nil, false, authFailed("%s: malformed client proof", m.mech)
	}
	auth := []byte(m.clientBare + "," + m.serverFirst + "," + withoutProof)
	sig := hmacOf(h, m.cred.StoredKey, auth)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	sum := h()
	sum.Write(clientKey)
	if subtle.ConstantTimeCompare(sum.Sum(nil), m.cred.StoredKey) != 1 {
		return nil, false, m.fail()
	}
	m.state = 2
	serverSig := hmacOf(h, m.cred.ServerKey, auth)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, nil
}
