package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// kcatRun runs kcat (librdkafka) logged in as user over SASL_PLAINTEXT
// with PLAIN, bounded to 60s, and returns its combined output.
func kcatRun(kcat, bs, user, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", bs, "-X", "security.protocol=sasl_plaintext",
		"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=" + user, "-X", "sasl.password=" + user + "-secret"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The operator's flow with the sluice command and kcat, against one
// broker whose only listener is SASL_PLAINTEXT, with the StandardAuthorizer
// and User:admin the super user: `sluice topic create` and `sluice acl add
// --producer/--consumer` as admin; kcat as alice is refused until she has
// the producer ACLs, then produces idempotently; kcat as bob consumes
// everything in his group, which commits, and cannot produce.
func TestACLProducerConsumerKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_CLIENTS") != "" {
			t.Fatal("kcat not installed (test.sh installs it)")
		}
		t.Skip("kcat not installed")
	}
	t.Parallel()
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";`
	b := startSluiceBroker(t, "listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+jaas,
		"authorizer.class.name="+config.StandardAuthorizerClass, "super.users=User:admin")
	bs := b.ListenerAddr("SASL_PLAINTEXT").String()
	props := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := []string{"--bootstrap-server", bs, "--command-config", props}
	mustSluice(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, admin...)...)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	produce := []string{"-P", "-t", "orders", "-X", "enable.idempotence=true", "-X", "acks=all"}
	const input = "a\nb\nc\nd\n"
	// refused: kcat reports the refusal (librdkafka's fatal idempotence
	// error may still exit 0) and orders holds want records.
	refused := func(user string, want int64) {
		t.Helper()
		out, err := kcatRun(kcat, bs, user, input, produce...)
		if !strings.Contains(strings.ToLower(out), "authorization failed") {
			t.Fatalf("kcat as %s produces: %v\n%s", user, err, out)
		}
		ends, err := adm.ListEndOffsets(ctx, "orders")
		if err != nil || ends.Error() != nil {
			t.Fatalf("ListOffsets: %v %v", err, ends.Error())
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		if n != want {
			t.Fatalf("kcat as %s was refused, yet orders holds %d records, want %d", user, n, want)
		}
	}
	refused("alice", 0)
	mustSluice(t, append([]string{"acl", "add", "--allow-principal", "User:alice", "--producer", "--idempotent", "--topic", "orders"}, admin...)...)
	if out, err := kcatRun(kcat, bs, "alice", input, produce...); err != nil {
		t.Fatalf("kcat as alice with the producer ACLs: %v\n%s", err, out)
	}
	refused("bob", 4)

	mustSluice(t, append([]string{"acl", "add", "--allow-principal", "User:bob", "--consumer", "--topic", "orders", "--group", "bob-group"}, admin...)...)
	out, err := kcatRun(kcat, bs, "bob", "", "-G", "bob-group", "-X", "auto.offset.reset=earliest", "-c", "4", "-q", "-f", "%s\n", "orders")
	if err != nil {
		t.Fatalf("kcat -G as bob: %v\n%s", err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	if strings.Join(got, "") != "abcd" {
		t.Fatalf("kcat -G as bob consumed %q", out)
	}
	// kcat commits on close: the group's offsets cover the 4 records.
	offs, err := adm.FetchOffsets(ctx, "bob-group")
	if err != nil || offs.Error() != nil {
		t.Fatalf("OffsetFetch bob-group: %v %v", err, offs.Error())
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 4 {
		t.Fatalf("bob-group committed %d records, want 4", sum)
	}
	// The producer ACLs did not make bob a producer.
	refused("bob", 4)
}
