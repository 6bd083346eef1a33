package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL (SASL_PLAINTEXT listeners; SASL_SSL once TLS exists). Kafka's SASL
// keys stay in the table of Kafka keys (kafkakeys.go), including their
// listener.name.<listener>.<key> forms; Sluice acts on these, read through
// the methods below, so Unacted leaves them out:
//
//	sasl.enabled.mechanisms                      (and listener.name.<l>.)
//	listener.name.<l>.<mechanism>.sasl.jaas.config
//	listener.name.<l>.oauthbearer.sasl.server.callback.handler.class
//	connections.max.reauth.ms                    (and listener.name.<l>.)
//	sasl.server.max.receive.size
//	sasl.mechanism.inter.broker.protocol
//	sasl.mechanism.controller.protocol
//	connection.failed.authentication.delay.ms
//
// A broker's own SASL login (inter-broker and controller connections,
// Kafka's broker login) is the username and password options of the
// listener's sasl.jaas.config for the mechanism, as in Kafka:
//
//	listener.name.<l>.plain.sasl.jaas.config=... required username="broker" password="..." user_broker="..." ;
//
// A listener-prefixed key uses the listener name in lower case, as Kafka
// writes it (listener.name.sasl_plaintext.plain.sasl.jaas.config);
// either case is accepted.

// SASL mechanisms Sluice serves.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
)

// OAUTHBEARER's classes (Kafka's): the login module its JAAS config names,
// and the only server callback handler Sluice implements, the unsecured
// JWS validator (the default when none is configured).
const (
	OAuthBearerLoginModule        = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	OAuthBearerUnsecuredValidator = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// defaultSaslMechanisms is sasl.enabled.mechanisms when not set. Kafka's
// default is GSSAPI, which Sluice does not implement.
var defaultSaslMechanisms = []string{MechPlain, MechScramSHA256, MechScramSHA512}

// DefaultSaslServerMaxReceiveSize is sasl.server.max.receive.size's
// default (Kafka's): the largest frame read before authentication.
const DefaultSaslServerMaxReceiveSize = 524288

// saslActed are the keys (after any listener prefix) Sluice acts on.
func saslActed(key string) bool {
	switch key {
	case "sasl.enabled.mechanisms", "connections.max.reauth.ms", "sasl.server.max.receive.size",
		"sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
		"connection.failed.authentication.delay.ms":
		return true
	}
	if rest, ok := strings.CutPrefix(key, listenerPrefix); ok {
		if _, k, ok := strings.Cut(rest, "."); ok {
			if k == "sasl.enabled.mechanisms" || k == "connections.max.reauth.ms" {
				return true
			}
			if mech, ok := strings.CutSuffix(k, ".sasl.jaas.config"); ok && supportedMech(strings.ToUpper(mech)) {
				return true
			}
			if k == "oauthbearer.sasl.server.callback.handler.class" {
				return true
			}
		}
	}
	return false
}

func supportedMech(m string) bool {
	return m == MechPlain || m == MechScramSHA256 || m == MechScramSHA512 || m == MechOAuthBearer
}

// listenerValue is listener.name.<listener>.<key> if set (the name in
// either case), else key if set.
func (c *Config) listenerValue(listener, key string) (string, bool) {
	for _, n := range []string{strings.ToLower(listener), listener} {
		if v, ok := c.unacted[listenerPrefix+n+"."+key]; ok {
			return v, true
		}
	}
	v, ok := c.unacted[key]
	return v, ok
}

// IsSaslListener reports whether the named listener's security protocol
// is SASL_PLAINTEXT or SASL_SSL.
func (c *Config) IsSaslListener(listener string) bool {
	p := c.ListenerSecurityProtocolMap[listener]
	return p == "SASL_PLAINTEXT" || p == "SASL_SSL"
}

// SaslEnabledMechanisms is the listener's sasl.enabled.mechanisms (its
// listener.name.<l>. form first). Default: PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 (Kafka: GSSAPI).
func (c *Config) SaslEnabledMechanisms(listener string) []string {
	v, ok := c.listenerValue(listener, "sasl.enabled.mechanisms")
	if !ok {
		return append([]string(nil), defaultSaslMechanisms...)
	}
	l, _ := parseList(v)
	return l
}

// SaslJaasConfig is listener.name.<l>.<mechanism>.sasl.jaas.config (the
// mechanism in lower case, as Kafka writes it), or "".
func (c *Config) SaslJaasConfig(listener, mechanism string) string {
	m := strings.ToLower(mechanism)
	for _, n := range []string{strings.ToLower(listener), listener} {
		if v, ok := c.unacted[listenerPrefix+n+"."+m+".sasl.jaas.config"]; ok {
			return v
		}
	}
	return ""
}

// SaslServerCallbackHandler is
// listener.name.<l>.<mechanism>.sasl.server.callback.handler.class (the
// mechanism in lower case), or "" for the mechanism's default.
func (c *Config) SaslServerCallbackHandler(listener, mechanism string) string {
	m := strings.ToLower(mechanism)
	for _, n := range []string{strings.ToLower(listener), listener} {
		if v, ok := c.unacted[listenerPrefix+n+"."+m+".sasl.server.callback.handler.class"]; ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ConnectionsMaxReauthMs is the listener's connections.max.reauth.ms:
// the longest an authenticated SASL session lasts before the client must
// re-authenticate (KIP-368); 0, the default, for no limit.
func (c *Config) ConnectionsMaxReauthMs(listener string) int64 {
	v, ok := c.listenerValue(listener, "connections.max.reauth.ms")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return max(n, 0)
}

// SaslServerMaxReceiveSize is sasl.server.max.receive.size: the largest
// frame a connection may send before it is authenticated. Default 524288.
func (c *Config) SaslServerMaxReceiveSize() int32 {
	v, ok := c.unacted["sasl.server.max.receive.size"]
	if !ok {
		return DefaultSaslServerMaxReceiveSize
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	return int32(n)
}

// SaslMechanismInterBrokerProtocol is sasl.mechanism.inter.broker.protocol:
// the mechanism brokers log in with on a SASL inter-broker listener.
// Default PLAIN (Kafka's default, GSSAPI, is not served).
func (c *Config) SaslMechanismInterBrokerProtocol() string {
	return c.saslMechanism("sasl.mechanism.inter.broker.protocol")
}

// SaslMechanismControllerProtocol is sasl.mechanism.controller.protocol:
// the mechanism brokers and controllers log in with on a SASL controller
// listener. Default PLAIN (Kafka: GSSAPI); SCRAM is refused there, as
// the controllers cannot read a credential before the metadata log is
// replicated, which needs the login.
func (c *Config) SaslMechanismControllerProtocol() string {
	return c.saslMechanism("sasl.mechanism.controller.protocol")
}

func (c *Config) saslMechanism(key string) string {
	if v, ok := c.unacted[key]; ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return MechPlain
}

// SaslLogin is this node's SASL login for reaching listener (its
// inter-broker or controller listener) with mechanism: the username and
// password options of the listener's sasl.jaas.config for the mechanism,
// as Kafka's broker login reads them. ok is false when either is missing.
func (c *Config) SaslLogin(listener, mechanism string) (user, password string, ok bool) {
	j, err := ParseJaas(c.SaslJaasConfig(listener, mechanism))
	if err != nil {
		return "", "", false
	}
	user, password = j.Options["username"], j.Options["password"]
	return user, password, user != "" && password != ""
}

// DefaultFailedAuthenticationDelayMs is connection.failed.authentication.delay.ms's
// default (Kafka's).
const DefaultFailedAuthenticationDelayMs = 100

// FailedAuthenticationDelay is connection.failed.authentication.delay.ms:
// how long a connection whose authentication failed waits before it is
// answered and closed (Kafka's Selector delays both). Default 100 ms; 0
// closes at once.
func (c *Config) FailedAuthenticationDelay() time.Duration {
	v, ok := c.unacted["connection.failed.authentication.delay.ms"]
	if !ok {
		return DefaultFailedAuthenticationDelayMs * time.Millisecond
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	return time.Duration(max(n, 0)) * time.Millisecond
}

// validateSasl checks the SASL keys of each SASL listener.
func (c *Config) validateSasl(bad func(key string, reason error)) {
	if n := c.SaslServerMaxReceiveSize(); n < 1 {
		bad("sasl.server.max.receive.size", fmt.Errorf("must be at least 1, is %d", n))
	}
	if v, ok := c.unacted["connection.failed.authentication.delay.ms"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		switch {
		case err != nil || n < 0:
			bad("connection.failed.authentication.delay.ms", fmt.Errorf("must be a whole number of milliseconds, at least 0: %q", v))
		case c.ConnectionsMaxIdleMs > 0 && n >= c.ConnectionsMaxIdleMs:
			// Kafka's KafkaConfig requires it too.
			bad("connection.failed.authentication.delay.ms", fmt.Errorf("%d must be less than connections.max.idle.ms=%d", n, c.ConnectionsMaxIdleMs))
		}
	}
	c.validateSaslLogin(bad, c.InterBrokerListenerName, "sasl.mechanism.inter.broker.protocol", c.SaslMechanismInterBrokerProtocol(), false)
	if len(c.ControllerListenerNames) > 0 {
		c.validateSaslLogin(bad, c.ControllerListenerNames[0], "sasl.mechanism.controller.protocol", c.SaslMechanismControllerProtocol(), true)
	}
	for _, l := range c.Listeners {
		if !c.IsSaslListener(l.Name) {
			continue
		}
		mechs := c.SaslEnabledMechanisms(l.Name)
		if len(mechs) == 0 {
			bad("sasl.enabled.mechanisms", fmt.Errorf("listener %s: no SASL mechanism enabled", l.Name))
		}
		for _, m := range mechs {
			if !supportedMech(m) {
				bad("sasl.enabled.mechanisms", fmt.Errorf("listener %s: mechanism %s is not supported (Sluice serves %s, %s, %s and %s)", l.Name, m, MechPlain, MechScramSHA256, MechScramSHA512, MechOAuthBearer))
			}
			if m == MechOAuthBearer {
				c.validateOAuthBearer(l.Name, bad)
				if slices.Contains(c.ControllerListenerNames, l.Name) {
					// The unsecured validator takes any unsigned
					// token: on a controller listener anyone could
					// log in as a node.
					bad("sasl.enabled.mechanisms", fmt.Errorf("controller listener %s: OAUTHBEARER (Kafka's unsecured validator: unsigned tokens, anyone may claim any principal) is not allowed on a controller listener; enable it on client listeners only, with listener.name.<l>.sasl.enabled.mechanisms", l.Name))
				}
			}
			if m != MechPlain {
				continue
			}
			jaas := c.SaslJaasConfig(l.Name, m)
			if _, set := c.listenerValue(l.Name, "sasl.enabled.mechanisms"); jaas == "" && set {
				bad("sasl.enabled.mechanisms", fmt.Errorf("listener %s enables PLAIN but listener.name.%s.plain.sasl.jaas.config is not set", l.Name, strings.ToLower(l.Name)))
			}
			if jaas != "" {
				if _, err := ParseJaas(jaas); err != nil {
					bad(listenerPrefix+strings.ToLower(l.Name)+".plain.sasl.jaas.config", err)
				}
			}
		}
	}
}

// validateOAuthBearer checks an OAUTHBEARER listener: its JAAS config
// names Kafka's OAuthBearerLoginModule with valid unsecured validator
// options, and its server callback handler, if set, is the unsecured
// validator (Kafka's JWKS validator, which checks signed tokens against an
// identity provider, is not implemented).
func (c *Config) validateOAuthBearer(listener string, bad func(key string, reason error)) {
	prefix := listenerPrefix + strings.ToLower(listener) + ".oauthbearer."
	if h := c.SaslServerCallbackHandler(listener, MechOAuthBearer); h != "" && h != OAuthBearerUnsecuredValidator {
		bad(prefix+"sasl.server.callback.handler.class", fmt.Errorf("%s is not supported: Sluice validates OAUTHBEARER tokens only as Kafka's unsecured validator (%s: unsigned JWS, alg none), for development and tests; remove the key to use it", h, OAuthBearerUnsecuredValidator))
	}
	jaas := c.SaslJaasConfig(listener, MechOAuthBearer)
	if jaas == "" {
		bad("sasl.enabled.mechanisms", fmt.Errorf("listener %s enables OAUTHBEARER but %ssasl.jaas.config is not set (%s required;)", listener, prefix, OAuthBearerLoginModule))
		return
	}
	j, err := ParseJaas(jaas)
	if err == nil && j.LoginModule != OAuthBearerLoginModule {
		err = fmt.Errorf("login module %s: OAUTHBEARER needs %s", j.LoginModule, OAuthBearerLoginModule)
	}
	if err == nil {
		_, err = j.UnsecuredValidator()
	}
	if err != nil {
		bad(prefix+"sasl.jaas.config", err)
	}
}

// validateSaslLogin checks this node's login to a SASL inter-broker or
// controller listener: the mechanism (key's) is served and enabled on the
// listener (Kafka's KafkaConfig requires the latter for the inter-broker
// one), not SCRAM on a controller listener, and the listener's JAAS
// config for it names a username and password. A one-voter node dials
// nobody and needs no login.
func (c *Config) validateSaslLogin(bad func(key string, reason error), listener, key, mech string, controller bool) {
	if listener == "" || !c.IsSaslListener(listener) || c.soloQuorum {
		return
	}
	if !supportedMech(mech) || mech == MechOAuthBearer {
		bad(key, fmt.Errorf("mechanism %s is not supported between nodes (use %s, %s or %s)", mech, MechPlain, MechScramSHA256, MechScramSHA512))
		return
	}
	if controller && mech != MechPlain {
		bad(key, fmt.Errorf("controller listener %s: use PLAIN; %s cannot work between controllers, which read SCRAM credentials from the metadata log that this login must first replicate", listener, mech))
		return
	}
	enabled := false
	for _, m := range c.SaslEnabledMechanisms(listener) {
		enabled = enabled || m == mech
	}
	if !enabled {
		bad(key, fmt.Errorf("%s must be included in the sasl.enabled.mechanisms of listener %s when SASL is used for its connections", mech, listener))
	}
	if _, _, ok := c.SaslLogin(listener, mech); !ok {
		bad(listenerPrefix+strings.ToLower(listener)+"."+strings.ToLower(mech)+".sasl.jaas.config",
			fmt.Errorf("listener %s is used between nodes with SASL %s: its JAAS config must set this node's username and password options", listener, mech))
	}
}

// ClientMechanism is franz-go's client side of a user-and-password
// mechanism Sluice serves (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), as the
// broker's own logins, the console and the sluice command use it; any
// other name is an error.
func ClientMechanism(mech, user, pass string) (sasl.Mechanism, error) {
	switch mech {
	case MechPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case MechScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case MechScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %s is not supported with a user and password (%s, %s, %s)", mech, MechPlain, MechScramSHA256, MechScramSHA512)
}
