package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// SSLConfig is Kafka's ssl.* keys for one listener (Config.ListenerSSL)
// or one client (ClientSSL). Only PEM keystores and truststores are read
// (ssl.keystore.type=PEM, ssl.truststore.type=PEM); JKS and PKCS12 are
// refused by Check with a message saying how to convert them.
type SSLConfig struct {
	// KeystoreType is ssl.keystore.type: PEM (Kafka's default, JKS, and
	// PKCS12 are refused once a keystore is given).
	KeystoreType string
	// KeystoreLocation is ssl.keystore.location: a PEM file holding the
	// private key and the certificate chain (leaf first).
	KeystoreLocation string
	// KeystoreCertificateChain and KeystoreKey are
	// ssl.keystore.certificate.chain and ssl.keystore.key: the same, inline
	// (PEM text), instead of KeystoreLocation.
	KeystoreCertificateChain string
	KeystoreKey              string
	// KeyPassword is ssl.key.password: the password of an encrypted PKCS#8
	// key (BEGIN ENCRYPTED PRIVATE KEY; PBES2 with PBKDF2 and AES-CBC,
	// what openssl writes).
	KeyPassword string
	// TruststoreType is ssl.truststore.type (PEM; see KeystoreType).
	TruststoreType string
	// TruststoreLocation is ssl.truststore.location: a PEM file of CA
	// certificates; TruststoreCertificates (ssl.truststore.certificates)
	// the same inline. With neither, the system's roots.
	TruststoreLocation     string
	TruststoreCertificates string
	// ClientAuth is ssl.client.auth: none, requested or required (server
	// side only).
	ClientAuth string
	// EnabledProtocols is ssl.enabled.protocols: TLSv1.2 and TLSv1.3
	// (Kafka's default: both).
	EnabledProtocols []string
	// Protocol is ssl.protocol (Kafka's SSLContext protocol, TLSv1.3 by
	// default): checked, and otherwise EnabledProtocols decides.
	Protocol string
	// CipherSuites is ssl.cipher.suites: IANA names of TLS 1.2 suites
	// (Java's names are the same); empty means Go's defaults. TLS 1.3
	// suites are accepted and not configurable (Go always enables them).
	CipherSuites []string
	// PrincipalMappingRules is ssl.principal.mapping.rules: how a client
	// certificate's subject becomes a principal's name (PrincipalMapper).
	PrincipalMappingRules string
	// EndpointIdentificationAlgorithm is
	// ssl.endpoint.identification.algorithm: https (verify the server's
	// host name, Kafka's default) or empty (verify the chain only). Client
	// side: the broker's own connections to other brokers, the CLI.
	EndpointIdentificationAlgorithm string
}

// defaultSSL is Kafka's defaults.
func defaultSSL() SSLConfig {
	return SSLConfig{
		KeystoreType:                    "JKS",
		TruststoreType:                  "JKS",
		ClientAuth:                      "none",
		EnabledProtocols:                []string{"TLSv1.2", "TLSv1.3"},
		Protocol:                        "TLSv1.3",
		PrincipalMappingRules:           "DEFAULT",
		EndpointIdentificationAlgorithm: "https",
	}
}

// sslKeys are the ssl.* keys Sluice honours, set through keyTable: the
// ones a listener.name.<listener>. prefix may override.
func isSSLKey(key string) bool {
	e, ok := entries[key]
	return ok && strings.HasPrefix(key, "ssl.") && e.spec == e.canon
}

// SecurityProtocol is the security protocol of the named listener
// (listener.security.protocol.map), "" if it has none.
func (c *Config) SecurityProtocol(listener string) string {
	return c.ListenerSecurityProtocolMap[listener]
}

// UsesTLS reports whether a security protocol runs over TLS.
func UsesTLS(protocol string) bool { return protocol == "SSL" || protocol == "SASL_SSL" }

// ListenerSSL is the ssl.* settings of the named listener: the ssl.* keys
// with Kafka's per-listener overrides,
// listener.name.<lower-case listener name>.ssl.*, applied on top.
func (c *Config) ListenerSSL(listener string) SSLConfig {
	over := c.listenerSSL[strings.ToLower(listener)]
	if len(over) == 0 {
		return c.SSL
	}
	tmp := Config{SSL: c.SSL}
	for _, k := range slices.Sorted(maps.Keys(over)) {
		entries[k].spec.set(&tmp, over[k]) // checked when set
	}
	return tmp.SSL
}

// ListenerSSLSet reports whether listener.name.<listener>.<key> is set
// (key an ssl.* key).
func (c *Config) ListenerSSLSet(listener, key string) bool {
	_, ok := c.listenerSSL[strings.ToLower(listener)][key]
	return ok
}

// setListenerSSL records listener.name.<listener>.<ssl key>=value, after
// checking the value as the key's own. ok is false when key is not such
// an override.
func (c *Config) setListenerSSL(key, value string) (ok bool, err error) {
	rest, found := strings.CutPrefix(key, listenerPrefix)
	if !found {
		return false, nil
	}
	name, sslKey, found := strings.Cut(rest, ".")
	if !found || name == "" || !isSSLKey(sslKey) {
		return false, nil
	}
	name = strings.ToLower(name) // Kafka's prefix is the lower-case name
	e := entries[sslKey]
	tmp := Config{SSL: c.SSL}
	if err := e.spec.set(&tmp, value); err != nil {
		return true, &Error{Key: key, Value: value, Reason: err.Error(), Err: ErrInvalidValue}
	}
	if e.spec.check != nil {
		if err := e.spec.check(&tmp); err != nil {
			return true, &Error{Key: key, Value: value, Reason: err.Error(), Err: ErrInvalidValue}
		}
	}
	m := make(map[string]map[string]string, len(c.listenerSSL)+1)
	maps.Copy(m, c.listenerSSL)
	inner := maps.Clone(m[name])
	if inner == nil {
		inner = map[string]string{}
	}
	inner[sslKey] = value
	m[name] = inner
	c.listenerSSL = m
	return true, nil
}

// validateSecurity checks each listener's security protocol: one of
// Kafka's four, with usable ssl.* settings for SSL and SASL_SSL (the SASL
// keys are validateSasl's).
func (c *Config) validateSecurity(bad func(string, error)) {
	for _, l := range c.Listeners {
		p, ok := c.ListenerSecurityProtocolMap[l.Name]
		if !ok {
			bad("listeners", fmt.Errorf("listener name %s is not in listener.security.protocol.map", l.Name))
			continue
		}
		if UsesTLS(p) {
			if err := c.ListenerSSL(l.Name).Check(true); err != nil {
				bad("listeners", fmt.Errorf("listener %s (%s): %w", l.Name, p, err))
			}
		}
	}
}

// Check checks the settings without reading files: the store types, a
// keystore given (required for a server), client auth, protocols,
// cipher suites and the principal mapping rules.
func (s SSLConfig) Check(server bool) error {
	var errs []error
	hasKeystore := s.KeystoreLocation != "" || s.KeystoreCertificateChain != "" || s.KeystoreKey != ""
	switch {
	case hasKeystore && s.KeystoreType != "PEM":
		errs = append(errs, fmt.Errorf("ssl.keystore.type=%s: only PEM keystores are supported; set ssl.keystore.type=PEM and convert the keystore (keytool -importkeystore -destkeystore ks.p12 -deststoretype PKCS12, then openssl pkcs12 -in ks.p12 -nodes > keystore.pem)", s.KeystoreType))
	case s.KeystoreLocation != "" && (s.KeystoreCertificateChain != "" || s.KeystoreKey != ""):
		errs = append(errs, errors.New("set ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key, not both"))
	case (s.KeystoreCertificateChain == "") != (s.KeystoreKey == ""):
		errs = append(errs, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key go together"))
	case server && !hasKeystore:
		errs = append(errs, errors.New("a TLS listener needs its certificate: set ssl.keystore.type=PEM and ssl.keystore.location (a PEM file with the private key and certificate chain), or ssl.keystore.certificate.chain and ssl.keystore.key"))
	}
	if (s.TruststoreLocation != "" || s.TruststoreCertificates != "") && s.TruststoreType != "PEM" {
		errs = append(errs, fmt.Errorf("ssl.truststore.type=%s: only PEM truststores are supported; set ssl.truststore.type=PEM and give the CA certificates as PEM (keytool -exportcert -rfc)", s.TruststoreType))
	}
	if s.TruststoreLocation != "" && s.TruststoreCertificates != "" {
		errs = append(errs, errors.New("set ssl.truststore.location or ssl.truststore.certificates, not both"))
	}
	if _, err := s.versions(); err != nil {
		errs = append(errs, err)
	}
	if _, err := cipherSuites(s.CipherSuites); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParsePrincipalRules(s.PrincipalMappingRules); err != nil {
		errs = append(errs, fmt.Errorf("ssl.principal.mapping.rules: %w", err))
	}
	return errors.Join(errs...)
}

var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// versions is the lowest and highest of ssl.enabled.protocols.
func (s SSLConfig) versions() ([2]uint16, error) {
	var v [2]uint16
	if len(s.EnabledProtocols) == 0 {
		return v, errors.New("ssl.enabled.protocols: must name TLSv1.2, TLSv1.3 or both")
	}
	for _, p := range s.EnabledProtocols {
		n, ok := tlsVersions[p]
		if !ok {
			return v, fmt.Errorf("ssl.enabled.protocols: %q is not supported (TLSv1.2 and TLSv1.3 are)", p)
		}
		if v[0] == 0 || n < v[0] {
			v[0] = n
		}
		v[1] = max(v[1], n)
	}
	return v, nil
}

// cipherSuites maps IANA suite names to Go's ids; TLS 1.3 suites are
// always on in Go and left out.
func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		known[cs.Name] = cs.ID
	}
	tls13 := map[string]bool{"TLS_AES_128_GCM_SHA256": true, "TLS_AES_256_GCM_SHA384": true, "TLS_CHACHA20_POLY1305_SHA256": true}
	var ids []uint16
	for _, n := range names {
		if tls13[n] {
			continue
		}
		id, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("ssl.cipher.suites: %q is not a supported cipher suite", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// readPEM is a location's bytes, or the inline value (normalizePEM'd).
func readPEM(location, inline, what string) ([]byte, error) {
	if location == "" {
		return normalizePEM(inline), nil
	}
	b, err := os.ReadFile(location)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

var pemBlock = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----`)

// normalizePEM rewrites inline PEM as Kafka accepts it in a properties
// file, where line continuations (\) join the lines with spaces
// ("-----BEGIN CERTIFICATE----- MIIB... -----END CERTIFICATE-----"), into
// the line structure pem.Decode needs. Blocks with headers (legacy
// encrypted keys) are left as they are.
func normalizePEM(s string) []byte {
	var out []byte
	for _, m := range pemBlock.FindAllStringSubmatch(s, -1) {
		body := m[2]
		if strings.Contains(body, ":") {
			out = append(out, m[0]...)
			out = append(out, '\n')
			continue
		}
		body = strings.Join(strings.Fields(body), "")
		out = append(out, "-----BEGIN "+m[1]+"-----\n"...)
		for len(body) > 64 {
			out = append(out, body[:64]+"\n"...)
			body = body[64:]
		}
		if body != "" {
			out = append(out, body+"\n"...)
		}
		out = append(out, "-----END "+m[3]+"-----\n"...)
	}
	return out
}

// Certificate reads the keystore: the certificate chain and its private
// key. ok is false when no keystore is set.
func (s SSLConfig) Certificate() (cert tls.Certificate, ok bool, err error) {
	if s.KeystoreLocation == "" && s.KeystoreCertificateChain == "" {
		return cert, false, nil
	}
	var certPEM, keyPEM []byte
	if s.KeystoreLocation != "" {
		if certPEM, err = readPEM(s.KeystoreLocation, "", "ssl.keystore.location"); err != nil {
			return cert, false, err
		}
		keyPEM = certPEM
	} else {
		certPEM, keyPEM = normalizePEM(s.KeystoreCertificateChain), normalizePEM(s.KeystoreKey)
	}
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			cert.Certificate = append(cert.Certificate, b.Bytes)
		}
	}
	if len(cert.Certificate) == 0 {
		return cert, false, errors.New("keystore: no CERTIFICATE in PEM")
	}
	if cert.PrivateKey, err = pemPrivateKey(keyPEM, s.KeyPassword); err != nil {
		return cert, false, fmt.Errorf("keystore: %w", err)
	}
	if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
		return cert, false, fmt.Errorf("keystore: %w", err)
	}
	// tls.X509KeyPair's check that the key is the certificate's.
	if _, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), mustMarshalKey(cert.PrivateKey)); err != nil {
		return cert, false, fmt.Errorf("keystore: %w", err)
	}
	return cert, true, nil
}

// mustMarshalKey is a private key as PKCS#8 PEM (for X509KeyPair's match
// check); a key Go parsed always marshals.
func mustMarshalKey(key any) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// pemPrivateKey finds the private key in PEM text: PKCS#8, PKCS#1 (RSA),
// SEC 1 (EC), or encrypted PKCS#8 with password.
func pemPrivateKey(b []byte, password string) (any, error) {
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil, errors.New("no private key in PEM (want BEGIN PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY or ENCRYPTED PRIVATE KEY)")
		}
		switch blk.Type {
		case "PRIVATE KEY":
			return x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			if _, enc := blk.Headers["Proc-Type"]; enc {
				return nil, errors.New("legacy encrypted PEM key (Proc-Type): convert it to PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)")
			}
			return x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(blk.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, errors.New("the private key is encrypted: set ssl.key.password")
			}
			der, err := decryptPKCS8(blk.Bytes, []byte(password))
			if err != nil {
				return nil, err
			}
			return x509.ParsePKCS8PrivateKey(der)
		}
	}
}

// CertPool reads the truststore; nil when none is set (the system's
// roots).
func (s SSLConfig) CertPool() (*x509.CertPool, error) {
	if s.TruststoreLocation == "" && s.TruststoreCertificates == "" {
		return nil, nil
	}
	b, err := readPEM(s.TruststoreLocation, s.TruststoreCertificates, "ssl.truststore.location")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("truststore: no CERTIFICATE in PEM")
	}
	return pool, nil
}

// base is what server and client configs share: versions, suites, the
// keystore's certificate.
func (s SSLConfig) base() (*tls.Config, error) {
	if err := s.Check(false); err != nil {
		return nil, err
	}
	v, _ := s.versions()
	suites, _ := cipherSuites(s.CipherSuites)
	cfg := &tls.Config{MinVersion: v[0], MaxVersion: v[1], CipherSuites: suites}
	cert, ok, err := s.Certificate()
	if err != nil {
		return nil, err
	}
	if ok {
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// ServerTLS is a listener's crypto/tls configuration, files read.
func (s SSLConfig) ServerTLS() (*tls.Config, error) {
	if err := s.Check(true); err != nil {
		return nil, err
	}
	cfg, err := s.base()
	if err != nil {
		return nil, err
	}
	if cfg.ClientCAs, err = s.CertPool(); err != nil {
		return nil, err
	}
	switch s.ClientAuth {
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		cfg.ClientAuth = tls.NoClientCert
	}
	return cfg, nil
}

// ClientTLS is a client's crypto/tls configuration, files read: the
// truststore as roots, the keystore (if any) as client certificate.
// serverName, if not empty, is the name verified instead of the dialled
// host's. Without endpoint identification (ssl.endpoint.identification.algorithm
// empty) the chain is verified and the host name is not, as in Kafka.
func (s SSLConfig) ClientTLS(serverName string) (*tls.Config, error) {
	cfg, err := s.base()
	if err != nil {
		return nil, err
	}
	if cfg.RootCAs, err = s.CertPool(); err != nil {
		return nil, err
	}
	cfg.ServerName = serverName
	if s.EndpointIdentificationAlgorithm == "" {
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true // the chain is verified below, the host name is not
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg, nil
}

// PrincipalMapper maps a certificate subject's distinguished name (RFC
// 2253 form, CN=...,OU=...) to a principal name by
// ssl.principal.mapping.rules: a comma-separated list of DEFAULT (the
// name unchanged) and RULE:pattern/replacement/ with an optional L or U
// (lower or upper case the result). The first rule whose pattern matches
// the whole name applies; replacement may use $1... for the pattern's
// groups; / and \ are escaped with \. No rule matching is an error (the
// client is refused), as in Kafka.
type PrincipalMapper struct {
	rules []principalRule
}

type principalRule struct {
	isDefault   bool
	re          *regexp.Regexp
	replacement string
	lower       bool
	upper       bool
}

// ParsePrincipalRules parses ssl.principal.mapping.rules; empty is
// DEFAULT.
func ParsePrincipalRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	s = strings.TrimSpace(s)
	if s == "" {
		s = "DEFAULT"
	}
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t")
		var r principalRule
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			r.isDefault = true
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			s = s[len("RULE:"):]
			var pat, repl string
			var ok bool
			if pat, s, ok = cutUnescaped(s); !ok {
				return nil, errors.New("RULE: want RULE:pattern/replacement/[LU]")
			}
			if repl, s, ok = cutUnescaped(s); !ok {
				return nil, errors.New("RULE: want RULE:pattern/replacement/[LU]")
			}
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("RULE pattern %q: %w", pat, err)
			}
			r.re, r.replacement = re, goReplacement(repl, re.NumSubexp())
			if len(s) > 0 && (s[0] == 'L' || s[0] == 'U') {
				r.lower, r.upper = s[0] == 'L', s[0] == 'U'
				s = s[1:]
			}
		default:
			return nil, fmt.Errorf("invalid rule at %q (want DEFAULT or RULE:pattern/replacement/[LU])", s)
		}
		s = strings.TrimLeft(s, " \t")
		if len(s) > 0 {
			if s[0] != ',' {
				return nil, fmt.Errorf("invalid rule: unexpected %q", s)
			}
			s = s[1:]
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// cutUnescaped cuts s at its first / not escaped by \; \/ becomes /.
func cutUnescaped(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// goReplacement turns a Java replacement ($1, \$ for a literal $) into
// regexp.Expand's (${1}, $$); a reference to a group the pattern lacks
// stays literal text.
func goReplacement(r string, groups int) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case c == '$' && i+1 < len(r) && r[i+1] >= '0' && r[i+1] <= '9':
			j := i + 1
			n := 0
			// The longest reference to an existing group, as Java reads it.
			for j < len(r) && r[j] >= '0' && r[j] <= '9' && (n*10+int(r[j]-'0') <= groups || j == i+1) {
				n = n*10 + int(r[j]-'0')
				j++
			}
			if n > groups {
				b.WriteString("$$")
				b.WriteString(r[i+1 : j])
			} else {
				fmt.Fprintf(&b, "${%d}", n)
			}
			i = j - 1
		case c == '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Name maps a distinguished name.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		match := r.re.FindStringSubmatchIndex(dn)
		if match == nil {
			continue
		}
		out := string(r.re.ExpandString(nil, r.replacement, dn, match))
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule applies to %q", dn)
}
