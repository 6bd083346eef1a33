package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestQuotaCommands(t *testing.T) {
	bs := startSluice(t)
	b := []string{"--bootstrap-server", bs}
	out := mustSluice(t, append([]string{"quota", "alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app",
		"--add-config", "producer_byte_rate=1048576,request_percentage=50"}, b...)...)
	wantContains(t, "alter", out, "Completed updating quotas for user-principal 'alice', client-id 'app'.")
	mustSluice(t, append([]string{"quota", "alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=2048"}, b...)...)
	mustSluice(t, append([]string{"quota", "alter", "--entity-type", "ips", "--entity-name", "10.0.0.1", "--add-config", "connection_creation_rate=5"}, b...)...)
	out = mustSluice(t, append([]string{"quota", "alter", "--entity-type", "clients", "--entity-name", "x", "--add-config", "producer_byte_rate=1", "--validate-only"}, b...)...)
	wantContains(t, "validate", out, "Validated quotas for client-id 'x'.")

	out = mustSluice(t, append([]string{"quota", "describe"}, b...)...)
	wantContains(t, "describe", out,
		"Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576, request_percentage=50",
		"Quota configs for the default user-principal are consumer_byte_rate=2048",
		"Quota configs for ip '10.0.0.1' are connection_creation_rate=5")
	if strings.Contains(out, "'x'") {
		t.Fatalf("--validate-only applied:\n%s", out)
	}
	out = mustSluice(t, append([]string{"quota", "describe", "--entity-type", "users", "--entity-default"}, b...)...)
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "default user-principal") {
		t.Fatalf("describe the default user:\n%s", out)
	}

	// The same through kadm.
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qs, err := kadm.NewClient(cl).DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}})
	if err != nil || len(qs) != 1 || qs[0].Values[0].Value != 5 {
		t.Fatalf("kadm describe: %v %+v", err, qs)
	}

	mustSluice(t, append([]string{"quota", "alter", "--entity-type", "ips", "--entity-name", "10.0.0.1", "--delete-config", "connection_creation_rate"}, b...)...)
	out = mustSluice(t, append([]string{"quota", "describe", "--entity-type", "ips"}, b...)...)
	if out != "" {
		t.Fatalf("after delete-config: %q", out)
	}

	wantExit(t, 1, append([]string{"quota", "alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "bogus=1"}, b...), "INVALID_REQUEST")
	wantExit(t, 1, append([]string{"quota", "alter", "--entity-type", "ips", "--entity-name", "10.0.0.1", "--entity-type", "users", "--entity-name", "bob", "--add-config", "connection_creation_rate=1"}, b...), "INVALID_REQUEST")
	wantExit(t, 2, append([]string{"quota", "alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"}, b...), "--entity-name or --entity-default")
	wantExit(t, 2, append([]string{"quota", "alter", "--entity-type", "groups", "--entity-name", "g", "--add-config", "producer_byte_rate=1"}, b...), "unknown --entity-type")
	wantExit(t, 2, append([]string{"quota", "alter", "--entity-type", "users", "--entity-name", "bob"}, b...), "--add-config or --delete-config")
	wantExit(t, 2, append([]string{"quota", "alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "producer_byte_rate=lots"}, b...), "not key=number")
}
