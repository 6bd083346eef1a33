package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ClientSecurity reads the security keys of a Kafka client's properties
// (the file Kafka's tools take as --command-config): security.protocol
// (PLAINTEXT by default) and the ssl.* keys Sluice honours, with Kafka's
// defaults. Other keys are ignored (the SASL ones are the CLI's).
func ClientSecurity(props map[string]string) (protocol string, ssl SSLConfig, err error) {
	protocol = strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	if !slices.Contains(securityProtocols, protocol) {
		return "", ssl, fmt.Errorf("security.protocol=%s: want one of %s", protocol, strings.Join(securityProtocols, ", "))
	}
	tmp := Config{SSL: defaultSSL()}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if !isSSLKey(k) {
			continue
		}
		e := entries[k]
		if err := e.spec.set(&tmp, props[k]); err != nil {
			return "", ssl, fmt.Errorf("%s: %w", k, err)
		}
		if e.spec.check != nil {
			if err := e.spec.check(&tmp); err != nil {
				return "", ssl, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	return protocol, tmp.SSL, nil
}
