package main

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestUserScramAddConfig(t *testing.T) {
	ups, err := parseAddConfig("SCRAM-SHA-256=[iterations=8192,password=a,b],SCRAM-SHA-512=[password=x]")
	if err == nil {
		t.Fatalf("a comma in a bracketed password accepted: %+v", ups)
	}
	ups, err = parseAddConfig("SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=other]")
	if err != nil || len(ups) != 2 {
		t.Fatalf("%+v %v", ups, err)
	}
	if ups[0].Mechanism != kadm.ScramSha256 || ups[0].Iterations != 8192 || ups[0].Password != "secret" ||
		ups[1].Mechanism != kadm.ScramSha512 || ups[1].Iterations != 4096 || ups[1].Password != "other" {
		t.Fatalf("%+v", ups)
	}
	if ups, err := parseAddConfig("SCRAM-SHA-512=plainpw"); err != nil || ups[0].Password != "plainpw" {
		t.Fatalf("%+v %v", ups, err)
	}
	for _, bad := range []string{"SCRAM-SHA-1=[password=x]", "SCRAM-SHA-256=[iterations=x,password=y]", "SCRAM-SHA-256=[iterations=5000]", "SCRAM-SHA-256=[password=x", "nothing"} {
		if _, err := parseAddConfig(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestUserCommandConfigSasl(t *testing.T) {
	jaas := `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s";`
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		opts, err := saslOpts(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.jaas.config": jaas})
		if err != nil || len(opts) != 1 {
			t.Fatalf("%s: %v", mech, err)
		}
	}
	if opts, err := saslOpts(map[string]string{}); err != nil || opts != nil {
		t.Fatal("PLAINTEXT by default")
	}
	for _, bad := range []map[string]string{
		{"security.protocol": "SSL"},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas}, // GSSAPI
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x required;"},
	} {
		if _, err := saslOpts(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
