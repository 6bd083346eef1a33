package server

// The web console behind authentication. When a client listener of the
// broker is SASL_PLAINTEXT or SASL_SSL, /ui/ (the page and its JSON API)
// requires HTTP Basic authentication with the broker's own SASL
// credentials, and answers 401 with a WWW-Authenticate challenge
// otherwise; /metrics, /healthz and /readyz stay open (Prometheus and
// orchestrators scrape them without credentials; they show no records).
//
// The console reaches the cluster through that SASL listener
// (consoleBootstrap) as the HTTP user: a user and password are checked
// against the mechanisms the listener enables, in order PLAIN (the
// listener's JAAS user_<name> entries, compared in constant time),
// SCRAM-SHA-512, SCRAM-SHA-256 (the stored credential: the password is
// salted with its salt and iterations, PBKDF2 as RFC 5802's Hi, and its
// StoredKey compared in constant time), and the first that matches is the
// mechanism the console's Kafka client logs in with. OAUTHBEARER has no
// password, so a listener that enables only it admits no console user.
//
// With an authorizer (authorizer.class.name) and no SASL client listener
// the console is refused: it could only read the cluster as the broker's
// own identity (its keystore certificate on SSL, ANONYMOUS on PLAINTEXT,
// often a super user), so anyone reaching the metrics port would browse
// every topic whatever the ACLs say. /ui/ answers 403 with the reason,
// which the broker logs once at start; /metrics and the health checks
// stay open.
//
// A SCRAM check costs the credential's iterations of PBKDF2 (4096 to
// 16384), and the page sends the header with each of its API requests, so
// a successful check is remembered for consoleAuthTTL (keyed by a hash of
// the user, password and StoredKey: a changed credential is checked
// anew), and at most consoleAuthConcurrency checks run at once (the
// others wait), so guessing passwords costs the broker at most that many
// cores.

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/console"
)

// consoleAuthTTL is how long a successful SCRAM check is remembered;
// consoleAuthCacheSize bounds the remembered checks;
// consoleAuthConcurrency bounds the PBKDF2 derivations running at once.
const (
	consoleAuthTTL         = time.Minute
	consoleAuthCacheSize   = 64
	consoleAuthConcurrency = 2
)

// consoleAuth checks the console's HTTP users against a SASL listener's
// credentials.
type consoleAuth struct {
	b        *Broker
	listener string // the SASL listener the console dials

	slots   chan struct{} // consoleAuthConcurrency PBKDF2 derivations
	derived atomic.Int64  // PBKDF2 derivations run (tests)

	mu   sync.Mutex
	seen map[[32]byte]time.Time // successful SCRAM checks, until then
}

func newConsoleAuth(b *Broker, listener string) *consoleAuth {
	return &consoleAuth{b: b, listener: listener, slots: make(chan struct{}, consoleAuthConcurrency)}
}

// wrap returns h behind HTTP Basic authentication.
func (a *consoleAuth) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		var u console.User
		if ok {
			u, ok = a.login(user, pass)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="sluice console", charset="UTF-8"`)
			http.Error(w, "the console needs a user and password of the broker's SASL listener "+a.listener+" (PLAIN or SCRAM)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r.WithContext(console.WithUser(r.Context(), u)))
	})
}

// consoleRefusedReason is why a broker with an authorizer and no SASL
// client listener serves no console.
const consoleRefusedReason = "the web console is disabled: this broker has an authorizer (authorizer.class.name) and no SASL_PLAINTEXT or SASL_SSL client listener to log the console's users in with, and the console would otherwise read every topic as the broker's own identity; add a SASL client listener to use it"

// consoleRefused logs why the console is off and returns the /ui/
// handler that answers 403 Forbidden with that reason.
func (b *Broker) consoleRefused() http.Handler {
	b.logger.Warn("sluice: " + consoleRefusedReason)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, consoleRefusedReason, http.StatusForbidden)
	})
}

// login checks user and pass against the listener's mechanisms and
// returns the console user that logs in with the first that matches.
func (a *consoleAuth) login(user, pass string) (console.User, bool) {
	if user == "" || pass == "" {
		return console.User{}, false
	}
	mechs := a.b.cfg.SaslEnabledMechanisms(a.listener)
	sum := sha256.Sum256([]byte(user + "\x00" + pass))
	key := func(mech string) string { return mech + "/" + user + "/" + hex.EncodeToString(sum[:8]) }
	if slices.Contains(mechs, config.MechPlain) {
		users := map[string]string{}
		if j, err := config.ParseJaas(a.b.cfg.SaslJaasConfig(a.listener, config.MechPlain)); err == nil {
			users = j.PlainUsers()
		}
		want, ok := users[user]
		if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) == 1 && ok {
			m, _ := config.ClientMechanism(config.MechPlain, user, pass)
			return console.User{Key: key(config.MechPlain), SASL: m}, true
		}
	}
	for _, name := range []string{config.MechScramSHA512, config.MechScramSHA256} {
		mech, _ := scramMechanism(name)
		if !slices.Contains(mechs, name) {
			continue
		}
		cred, ok := a.b.meta.ScramCredential(user, mech)
		if !ok {
			// An unknown user costs the derivation a known one's wrong
			// password costs, so the answer's timing does not tell
			// which users exist.
			a.scramMatches(mech, unknownScramUser(user), pass)
			continue
		}
		if !a.scramMatches(mech, cred, pass) {
			continue
		}
		m, _ := config.ClientMechanism(name, user, pass)
		return console.User{Key: key(name), SASL: m}, true
	}
	return console.User{}, false
}

// unknownScramUser is a credential no password matches (its StoredKey
// is empty), with Kafka's default iteration count (4096, the
// kafka-configs.sh default and the usual one), for an unknown user's
// login to derive against.
func unknownScramUser(user string) meta.ScramCredential {
	return meta.ScramCredential{User: user, Salt: []byte("sluice-console-unknown-user"), Iterations: 4096}
}

// scramMatches reports whether pass derives cred's StoredKey (RFC 5802:
// SaltedPassword = Hi(pass, salt, i), StoredKey = H(HMAC(SaltedPassword,
// "Client Key"))).
func (a *consoleAuth) scramMatches(mech meta.ScramMechanism, cred meta.ScramCredential, pass string) bool {
	h := sha256.New()
	h.Write([]byte(cred.User + "\x00" + pass + "\x00"))
	h.Write(cred.StoredKey)
	var seenKey [32]byte
	h.Sum(seenKey[:0])
	now := time.Now()
	a.mu.Lock()
	until, seen := a.seen[seenKey]
	a.mu.Unlock()
	if seen && now.Before(until) {
		return true
	}
	newHash := scramHash(mech)
	a.slots <- struct{}{}
	a.derived.Add(1)
	salted, err := pbkdf2.Key(newHash, pass, cred.Salt, int(cred.Iterations), newHash().Size())
	<-a.slots
	if err != nil {
		return false
	}
	stored, _ := scramKeys(mech, salted)
	if subtle.ConstantTimeCompare(stored, cred.StoredKey) != 1 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil || len(a.seen) >= consoleAuthCacheSize {
		a.seen = map[[32]byte]time.Time{}
	}
	a.seen[seenKey] = now.Add(consoleAuthTTL)
	return true
}
