package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// startACLBroker starts a broker whose only listener is SASL_PLAINTEXT
// (PLAIN users admin, alice, bob: authzJaas) with the StandardAuthorizer
// and User:admin its one super user: no principal of the broker's own is
// granted anything. It returns the listener's address.
func startACLBroker(t *testing.T, dir string) (*Broker, string) {
	t.Helper()
	b, _ := startBroker(t, dir,
		"listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+authzJaas,
		"authorizer.class.name="+config.StandardAuthorizerClass, "super.users=User:admin")
	return b, b.ListenerAddr("SASL_PLAINTEXT").String()
}

// asUser is a client logged in as user (PLAIN, password user-secret) with
// franz-go's defaults (idempotent, acks=all, newest versions) and opts.
func asUser(t *testing.T, addr, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, addr, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()),
		kgo.RetryTimeout(5 * time.Second)}, opts...)...)
}

// produceValues produces n records valued prefix-i to topic and returns the
// first error.
func produceValues(ctx context.Context, cl *kgo.Client, topic, prefix string, n int) error {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// consumeValues polls cl until it has want records, an error, or ctx
// ends, and returns the values, sorted.
func consumeValues(ctx context.Context, cl *kgo.Client, want int) ([]string, error) {
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return got, fmt.Errorf("%d of %d records: %w", len(got), want, err)
		}
		if err := fs.Err(); err != nil {
			return got, err
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	return got, nil
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	slices.Sort(out)
	return out
}

// TestACLEndToEnd is an operator's day with the real StandardAuthorizer
// on one broker, franz-go as every client: admin (the super user) creates
// a topic; alice without ACLs cannot produce to it or see it; with
// kafka-acls --producer's ACLs she produces idempotently with acks=all;
// bob with --consumer's ACLs consumes in his group and commits, but
// cannot produce or use another group; a transactional producer needs
// WRITE on its transactional id; a DENY beats an ALLOW; a PREFIXED ACL
// covers its names, and WRITE on a topic is enough for an idempotent
// producer (KIP-679); everything holds after a restart.
func TestACLEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, addr := startACLBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin := kadm.NewClient(asUser(t, addr, "admin"))
	grant := func(bld *kadm.ACLBuilder) {
		t.Helper()
		if err := createACLs(t, admin, bld); err != nil {
			t.Fatalf("CreateAcls: %v", err)
		}
	}
	if _, err := admin.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatalf("admin creates orders: %v", err)
	}

	// alice, no ACLs: her produce fails on the topic, her Metadata does
	// not list it.
	if err := produceValues(ctx, asUser(t, addr, "alice", kgo.DisableIdempotentWrite()), "orders", "denied", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := produceValues(ctx, asUser(t, addr, "alice"), "orders", "denied", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces idempotently without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// An idempotent producer id needs IDEMPOTENT_WRITE on the cluster or
	// WRITE on some topic (Kafka's KafkaApis, KIP-679).
	initPID := func() error {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, asUser(t, addr, "alice"))
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	if err := initPID(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice's InitProducerId without ACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	aliceAdm := kadm.NewClient(asUser(t, addr, "alice"))
	if tds, err := aliceAdm.ListTopics(ctx); err != nil || tds.Has("orders") {
		t.Fatalf("alice's Metadata of every topic: %v %v, want no orders", err, tds.Names())
	}
	// (kadm reports a topic's authorization error as the call's.)
	if tds, err := aliceAdm.ListTopics(ctx, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's Metadata of orders: %v %+v, want TOPIC_AUTHORIZATION_FAILED", err, tds["orders"])
	}

	// kafka-acls --producer --topic orders (and --idempotent).
	grant(kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate))
	grant(kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpIdempotentWrite))
	if err := initPID(); err != nil {
		t.Fatalf("alice's InitProducerId with the producer ACLs: %v", err)
	}
	alice := asUser(t, addr, "alice", kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := produceValues(ctx, alice, "orders", "o", 20); err != nil {
		t.Fatalf("alice produces with the producer ACLs: %v", err)
	}

	// kafka-acls --consumer --topic orders --group bob-group.
	grant(kadm.NewACLs().Allow("User:bob").Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe))
	grant(kadm.NewACLs().Allow("User:bob").Groups("bob-group").Operations(kadm.OpRead))
	bob := asUser(t, addr, "bob", kgo.ConsumerGroup("bob-group"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if got, err := consumeValues(ctx, bob, 20); err != nil || !slices.Equal(got, values("o", 20)) {
		t.Fatalf("bob consumes: %v %q", err, got)
	}
	if err := bob.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("bob commits: %v", err)
	}
	bob.Close()
	committed := func(what string) {
		t.Helper()
		offs, err := admin.FetchOffsets(ctx, "bob-group")
		if err != nil || offs.Error() != nil {
			t.Fatalf("%s: OffsetFetch: %v %v", what, err, offs.Error())
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != 20 {
			t.Fatalf("%s: bob-group committed %d records of orders, want 20", what, sum)
		}
	}
	committed("after the commit")
	bobAdm := kadm.NewClient(asUser(t, addr, "bob"))
	bobCannot := func(what string) {
		t.Helper()
		if err := produceValues(ctx, asUser(t, addr, "bob", kgo.DisableIdempotentWrite()), "orders", "bob", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s: bob produces: %v, want TOPIC_AUTHORIZATION_FAILED", what, err)
		}
		if _, err := bobAdm.FetchOffsets(ctx, "other-group"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("%s: bob's OffsetFetch of other-group: %v, want GROUP_AUTHORIZATION_FAILED", what, err)
		}
		other := asUser(t, addr, "bob", kgo.ConsumerGroup("other-group"), kgo.ConsumeTopics("orders"))
		if _, err := consumeValues(ctx, other, 1); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("%s: bob joins other-group: %v, want GROUP_AUTHORIZATION_FAILED", what, err)
		}
		other.Close()
	}
	bobCannot("before the restart")

	// Transactions: WRITE on the transactional id.
	txnProduce := func(id string, commit bool, prefix string) error {
		cl := asUser(t, addr, "alice", kgo.TransactionalID(id), kgo.RequestRetries(2))
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := produceValues(ctx, cl, "orders", prefix, 5); err != nil {
			cl.EndTransaction(ctx, kgo.TryAbort)
			return err
		}
		return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	}
	if err := txnProduce("alice-tx", true, "t"); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional produce without WRITE on alice-tx: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	grant(kadm.NewACLs().Allow("User:alice").TransactionalIDs("alice-tx").Operations(kadm.OpWrite, kadm.OpDescribe))
	if err := txnProduce("alice-tx", true, "t"); err != nil {
		t.Fatalf("transactional produce, committed: %v", err)
	}
	if err := txnProduce("alice-tx", false, "aborted"); err != nil {
		t.Fatalf("transactional produce, aborted: %v", err)
	}
	// read_committed: the 20 plain records and the committed 5, not the
	// aborted ones (the fetch reaches the end: the last stable offset is
	// past the abort's marker).
	rc := asUser(t, addr, "bob", kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got, err := consumeValues(ctx, rc, 25)
	if want := append(values("o", 20), values("t", 5)...); err != nil || !slices.Equal(got, sorted(want)) {
		t.Fatalf("read_committed: %v %q", err, got)
	}
	rc.Close()

	// A DENY beats an ALLOW: alice may not write to orders while it
	// stands, and may again once it is deleted.
	deny := kadm.NewACLs().Deny("User:alice").DenyHosts("*").Topics("orders").Operations(kadm.OpWrite)
	grant(deny)
	if err := produceValues(ctx, asUser(t, addr, "alice"), "orders", "x", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces under a DENY: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if res, err := admin.DeleteACLs(ctx, deny); err != nil || len(res) != 1 || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls of the DENY: %v %+v", err, res)
	}
	if err := produceValues(ctx, asUser(t, addr, "alice"), "orders", "o2", 1); err != nil {
		t.Fatalf("alice produces once the DENY is gone: %v", err)
	}

	// A PREFIXED ACL: alice- topics, auto-created by alice's produce
	// (CREATE on the prefix); a topic outside the prefix is still hers
	// to neither see nor write.
	grant(kadm.NewACLs().Allow("User:alice").Topics("alice-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "bob-events"); err != nil {
		t.Fatal(err)
	}
	if err := produceValues(ctx, asUser(t, addr, "alice", kgo.AllowAutoTopicCreation()), "alice-events", "p", 3); err != nil {
		t.Fatalf("alice produces to alice-events (PREFIXED alice-): %v", err)
	}
	if err := produceValues(ctx, asUser(t, addr, "alice", kgo.DisableIdempotentWrite()), "bob-events", "p", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to bob-events: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// KIP-679: WRITE on some topic is enough for an idempotent producer
	// id: bob, with WRITE on the prefix bob- and no IDEMPOTENT_WRITE,
	// produces idempotently to bob-events.
	grant(kadm.NewACLs().Allow("User:bob").Topics("bob-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	if err := produceValues(ctx, asUser(t, addr, "bob"), "bob-events", "b", 2); err != nil {
		t.Fatalf("bob produces idempotently with WRITE on bob- only: %v", err)
	}

	// A restart: the ACLs are in the metadata and still decide.
	b.Close()
	_, addr = startACLBroker(t, dir)
	admin = kadm.NewClient(asUser(t, addr, "admin"))
	bobAdm = kadm.NewClient(asUser(t, addr, "bob"))
	if err := produceValues(ctx, asUser(t, addr, "alice"), "orders", "after", 5); err != nil {
		t.Fatalf("alice produces after the restart: %v", err)
	}
	if err := produceValues(ctx, asUser(t, addr, "alice", kgo.DisableIdempotentWrite()), "bob-events", "p", 1); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after the restart: alice produces to bob-events: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	committed("after the restart")
	bobCannot("after the restart")
	// ListGroups shows a principal the groups it may describe (Kafka's
	// KafkaApis): admin's offsets make admin-group, bob sees his own only.
	var toCommit kadm.Offsets
	toCommit.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := admin.CommitOffsets(ctx, "admin-group", toCommit); err != nil {
		t.Fatalf("admin commits admin-group: %v", err)
	}
	for who, want := range map[*kadm.Client][]string{admin: {"admin-group", "bob-group"}, bobAdm: {"bob-group"}} {
		lg, err := who.ListGroups(ctx)
		if got := sorted(lg.Groups()); err != nil || !slices.Equal(got, want) {
			t.Fatalf("ListGroups: %v %q, want %q", err, got, want)
		}
	}
	bob = asUser(t, addr, "bob", kgo.ConsumerGroup("bob-group"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	// From the committed offsets: the committed transaction, alice's
	// record after the DENY and the 5 after the restart.
	if got, err := consumeValues(ctx, bob, 11); err != nil || !slices.Equal(got, sorted(append(append(values("t", 5), values("o2", 1)...), values("after", 5)...))) {
		t.Fatalf("bob consumes after the restart: %v %q", err, got)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
