// Package clienttls is the CLI's client security flags, TLS and SASL: a
// Kafka client properties file (--command-config, as Kafka's tools take
// it: security.protocol, ssl.*, sasl.mechanism and sasl.jaas.config keys;
// sasl.go) and simple --tls and --sasl flags, which override it. Every
// command that talks to a cluster registers them (Add) and dials with
// Opts.
package clienttls

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/sluicemq/sluice/server/config"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Flags are the client security flags.
type Flags struct {
	commandConfig string
	tls           bool
	ca            string
	cert          string
	key           string
	serverName    string
	sasl          saslFlags
}

// Add registers the flags on fs.
func Add(fs *pflag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.commandConfig, "command-config", "", "a Kafka client properties `file` (security.protocol=SSL, SASL_PLAINTEXT or SASL_SSL, ssl.truststore.location, ssl.keystore.location, ... (PEM stores only), sasl.mechanism, sasl.jaas.config), as Kafka's tools take")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (security.protocol=SSL); implied by --tls-ca, --tls-cert")
	fs.StringVar(&f.ca, "tls-ca", "", "PEM `file` of the CA certificates to trust (default: the system's)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM `file` of the client certificate chain, for mutual TLS (with --tls-key)")
	fs.StringVar(&f.key, "tls-key", "", "PEM `file` of the client private key (with --tls-cert)")
	fs.StringVar(&f.serverName, "tls-server-name", "", "the `name` the brokers' certificates must carry (default: the host dialled)")
	f.sasl.add(fs)
	return f
}

// props reads the --command-config file (none: empty).
func (f *Flags) props() (map[string]string, error) {
	if f.commandConfig == "" {
		return map[string]string{}, nil
	}
	r, err := os.Open(f.commandConfig)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	defer r.Close()
	props, err := config.ParseProperties(r)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", f.commandConfig, err)
	}
	return props, nil
}

// tlsConfig is the TLS configuration to dial with, nil for plaintext.
func (f *Flags) tlsConfig(props map[string]string) (*tls.Config, error) {
	protocol, s, err := config.ClientSecurity(props)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", f.commandConfig, err)
	}
	if f.tls || f.ca != "" || f.cert != "" || f.key != "" || f.serverName != "" {
		protocol = "SSL"
	}
	if !config.UsesTLS(protocol) {
		return nil, nil
	}
	if f.ca != "" {
		s.TruststoreType, s.TruststoreLocation, s.TruststoreCertificates = "PEM", f.ca, ""
	}
	if (f.cert == "") != (f.key == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if f.cert != "" {
		chain, err := os.ReadFile(f.cert)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		key, err := os.ReadFile(f.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-key: %w", err)
		}
		s.KeystoreType, s.KeystoreLocation = "PEM", ""
		s.KeystoreCertificateChain, s.KeystoreKey = string(chain), string(key)
	}
	tc, err := s.ClientTLS(f.serverName)
	if err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	return tc, nil
}

// Opts are the kgo options the flags ask for: DialTLSConfig and SASL,
// each when asked. Errors name the flag or key at fault.
func (f *Flags) Opts() ([]kgo.Opt, error) {
	props, err := f.props()
	if err != nil {
		return nil, err
	}
	tc, err := f.tlsConfig(props)
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	sasl, err := f.sasl.opts(props)
	if err != nil {
		return nil, err
	}
	return append(opts, sasl...), nil
}
