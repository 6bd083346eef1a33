package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// A three-node cluster whose every listener (clients, inter-broker,
// controller, and so raft) is SASL_SSL, the nodes logging in to each
// other with PLAIN (their JAAS username and password): it forms, and
// survives the crash of a partition's leader while a SCRAM client
// produces with acks=all; the crashed node rejoins over SASL_SSL and every
// acknowledged record is read back once (leaderCrashScenario). A
// broker-only node then joins and takes a replica. The web console logs
// in as its HTTP user. The StandardAuthorizer decides throughout: the
// nodes' own login, User:broker, is the one super user (as Kafka's
// brokers are), and the client app holds only the ACLs it needs.
func TestSaslSSLClusterLeaderCrash(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	srv := ca.Issue(t, tlstest.Options{CommonName: "broker"})
	const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_app="app-secret";`
	tc := startCluster(t, 3,
		"listener.security.protocol.map=PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+srv.File,
		"ssl.truststore.type=PEM", "ssl.truststore.location="+ca.PEMFile,
		"listener.name.plaintext.plain.sasl.jaas.config="+jaas,
		"listener.name.controller.plain.sasl.jaas.config="+jaas,
		"listener.name.controller.sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		"sasl.mechanism.controller.protocol=PLAIN",
		"metrics.listen=127.0.0.1:0",
		"authorizer.class.name="+config.StandardAuthorizerClass, "super.users=User:broker")
	tls := kgo.DialTLSConfig(ca.ClientConfig(nil))
	tc.dialOpts = []kgo.Opt{tls, kgo.SASL(plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism())}
	tc.waitBrokers(3)
	// The operator (the super user) grants app a producer's and a
	// consumer's ACLs on the scenario's topics and creates its SCRAM
	// credential; app may describe the cluster (the console).
	operator := kadm.NewClient(tc.client())
	for _, bld := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:app").Topics("fail", "four").Operations(kadm.OpCreate, kadm.OpWrite, kadm.OpRead, kadm.OpDescribe),
		kadm.NewACLs().Allow("User:app").Clusters().Operations(kadm.OpIdempotentWrite, kadm.OpDescribe),
	} {
		if err := createACLs(t, operator, bld); err != nil {
			t.Fatalf("CreateAcls: %v", err)
		}
	}
	tc.dialOpts = []kgo.Opt{tls, kgo.SASL(plain.Auth{User: "app", Pass: "app-secret"}.AsMechanism())}
	// app is no super user: a topic without its ACLs is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := kadm.NewClient(tc.client()).CreateTopic(ctx, 1, 3, nil, "other"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("app creates a topic it has no ACL for: %v %+v, want TOPIC_AUTHORIZATION_FAILED", err, res)
	}
	// The web console reaches its broker over SASL_SSL as its HTTP
	// user.
	eventually(t, 20*time.Second, "the console's overview", func() error {
		if code, body, _ := httpGetAs(t, tc.broker(0), "/ui/api/overview", "app", "app-secret"); code != 200 || !strings.Contains(body, fmt.Sprintf(`"port":%d`, tc.cports[2])) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})

	// The clients of the scenario log in with SCRAM, once the
	// credential has replicated.
	res, err := operator.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "app", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "app-scram"}})
	if err != nil || res["app"].Err != nil {
		t.Fatalf("AlterUserScramCredentials: %v %+v", err, res)
	}
	scramOpts := []kgo.Opt{tls, kgo.SASL(scram.Auth{User: "app", Pass: "app-scram"}.AsSha256Mechanism())}
	eventually(t, 20*time.Second, "the SCRAM credential on every node", func() error {
		for i := range 3 {
			if _, ok := tc.broker(i).meta.ScramCredential("app", meta.ScramSHA256); !ok {
				return fmt.Errorf("not on node %d yet", i+1)
			}
		}
		return nil
	})
	tc.dialOpts = scramOpts
	leaderCrashScenario(t, tc)

	// A broker-only node: the metadata log's leader reaches it, a raft
	// learner, over its SASL_SSL inter-broker listener, which serves
	// raft (after the login) before the node is registered and its
	// start gate opens.
	tc.startBrokerOnly(4, tc.extra...)
	tc.waitBrokers(4)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(tc.client()).CreateTopic(ctx, 1, 4, nil, "four"); err != nil {
		t.Fatal(err)
	}
	tc.waitLeaders("four", 4)
}
