package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
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

// sluice user scram add/describe/delete against a broker, through its
// SASL listener with --command-config (PLAIN), and the new user logging
// in with SCRAM.
func TestUserScramCommands(t *testing.T) {
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`
	cfg, err := config.Load("", []string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + jaas, "log.dirs=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	bs := b.ListenerAddr("SASL_PLAINTEXT").String()
	props := filepath.Join(t.TempDir(), "admin.properties")
	os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="+jaas+"\n"), 0o600)
	common := []string{"--bootstrap-server", bs, "--command-config", props}

	code, out, errOut := sluice(t, append([]string{"user", "scram", "add", "--user", "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"}, common...)...)
	if code != 0 {
		t.Fatalf("add: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = sluice(t, append([]string{"user", "scram", "describe"}, common...)...)
	if code != 0 || !strings.Contains(out, "'alice' are SCRAM-SHA-256=iterations=8192") {
		t.Fatalf("describe: exit %d\n%s", code, out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("alice's SCRAM login: %v", err)
	}
	code, _, _ = sluice(t, append([]string{"user", "scram", "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-256"}, common...)...)
	if code != 0 {
		t.Fatalf("delete: exit %d", code)
	}
	code, _, errOut = sluice(t, append([]string{"user", "scram", "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-256"}, common...)...)
	if code == 0 || !strings.Contains(errOut, "RESOURCE_NOT_FOUND") {
		t.Fatalf("second delete: exit %d\n%s", code, errOut)
	}
	// Without --command-config the SASL listener closes the connection.
	code, _, _ = sluice(t, "user", "scram", "describe", "--bootstrap-server", bs, "--timeout", "3s")
	if code == 0 {
		t.Fatal("describe without SASL succeeded")
	}
}
