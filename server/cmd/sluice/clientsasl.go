package main

// Client security for the cluster commands: --command-config FILE, Kafka's
// client properties file as kafka-topics.sh and kafka-configs.sh take it.
// Honoured keys: security.protocol (PLAINTEXT or SASL_PLAINTEXT),
// sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; default GSSAPI,
// as Kafka, which is refused) and sasl.jaas.config (its username and
// password options). Other keys are ignored.

import (
	"os"
	"strings"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// commandConfigOpts reads a --command-config file into client options.
func commandConfigOpts(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("--command-config: %v", err)
	}
	defer f.Close()
	props, err := config.ParseProperties(f)
	if err != nil {
		return nil, usageErrorf("--command-config %s: %v", path, err)
	}
	return saslOpts(props)
}

// saslOpts turns Kafka client properties into franz-go options.
func saslOpts(props map[string]string) ([]kgo.Opt, error) {
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	switch proto {
	case "", "PLAINTEXT", "SSL":
		return nil, nil // TLS: clienttls
	case "SASL_PLAINTEXT", "SASL_SSL": // SASL_SSL's TLS: clienttls
	default:
		return nil, usageErrorf("--command-config: security.protocol=%s is not supported (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", proto)
	}
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = "GSSAPI"
	}
	j, err := config.ParseJaas(props["sasl.jaas.config"])
	if err != nil {
		return nil, usageErrorf("--command-config: sasl.jaas.config: %v", err)
	}
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" {
		return nil, usageErrorf("--command-config: sasl.jaas.config has no username")
	}
	switch mech {
	case "PLAIN":
		return []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}, nil
	case "SCRAM-SHA-256":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())}, nil
	case "SCRAM-SHA-512":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, nil
	}
	return nil, usageErrorf("--command-config: sasl.mechanism=%s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mech)
}
