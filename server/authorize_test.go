package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// aclRule is one grant of the test authorizer: op on the resource of type
// rt named name ("*": every name).
type aclRule struct {
	op   kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	name string
}

// ruleAuthz is a test-only Authorizer: a table of grants by principal.
// DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS
// by ALTER_CONFIGS, as in Kafka's StandardAuthorizer; super users may do
// anything.
type ruleAuthz struct {
	mu    sync.Mutex
	super map[string]bool
	rules map[string][]aclRule
	// brokers are principals SuperUser reports (see there).
	brokers map[string]bool
	// deniedHost is a client address denied everything (a second
	// loopback address tells a test's client from the brokers').
	deniedHost string
}

func newRuleAuthz(super ...string) *ruleAuthz {
	a := &ruleAuthz{super: map[string]bool{}, rules: map[string][]aclRule{}, brokers: map[string]bool{}}
	for _, s := range super {
		a.super[s] = true
	}
	return a
}

func (a *ruleAuthz) allow(principal string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, names ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range names {
		a.rules[principal] = append(a.rules[principal], aclRule{op, rt, n})
	}
}

// grants reports whether a granted operation g covers op.
func grants(g, op kmsg.ACLOperation) bool {
	switch {
	case g == op, g == kmsg.ACLOperationAll:
		return true
	case op == kmsg.ACLOperationDescribe:
		return g == kmsg.ACLOperationRead || g == kmsg.ACLOperationWrite || g == kmsg.ACLOperationDelete || g == kmsg.ACLOperationAlter
	case op == kmsg.ACLOperationDescribeConfigs:
		return g == kmsg.ACLOperationAlterConfigs
	}
	return false
}

func (a *ruleAuthz) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if host == a.deniedHost {
		return false
	}
	if a.super[principal] {
		return true
	}
	for _, r := range a.rules[principal] {
		if r.rt == rt && (r.name == "*" || r.name == name) && grants(r.op, op) {
			return true
		}
	}
	return false
}

// SuperUser is a super user, or a principal the test names a broker's
// (brokers): trusted as a broker, yet checked as any client by Authorize,
// so that a test's client and the brokers may share User:ANONYMOUS.
func (a *ruleAuthz) SuperUser(principal string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.super[principal] || a.brokers[principal]
}

func (a *ruleAuthz) AuthorizeAny(principal, _ string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.super[principal] {
		return true
	}
	for _, r := range a.rules[principal] {
		if r.rt == rt && grants(r.op, op) {
			return true
		}
	}
	return false
}

const authzJaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";`

// authzBroker is a broker with the test authorizer az: a PLAINTEXT
// listener whose User:ANONYMOUS is a super user (the test's own set-up
// and the broker's clients), and a SASL_PLAINTEXT one for alice and bob.
type authzBroker struct {
	b        *Broker
	az       *ruleAuthz
	plain    string // PLAINTEXT address
	saslAddr string
}

func startAuthzBroker(t *testing.T, sets ...string) *authzBroker {
	t.Helper()
	az := newRuleAuthz("User:ANONYMOUS", "User:admin")
	b := newTestBroker(t, nil, slog.LevelInfo, func(b *Broker) { b.authz = az }, append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + authzJaas,
	}, sets...)...)
	return &authzBroker{b: b, az: az, plain: b.Addr().String(), saslAddr: b.ListenerAddr("SASL_PLAINTEXT").String()}
}

// createTopics creates topics of one partition.
func (ab *authzBroker) createTopics(t *testing.T, topics ...string) {
	t.Helper()
	for _, topic := range topics {
		if _, err := ab.b.createTopic(topic, 1, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
}

// client is a client logged in as user (password user-secret). Its
// Produce and Fetch stop at v12, which name topics (v13 names them by
// ID, which a principal that may not describe a topic does not know),
// OffsetCommit and OffsetFetch at v9 for the same reason.
func (ab *authzBroker) client(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.Produce.Int16(), 12)
	vs.SetMaxKeyVersion(kmsg.Fetch.Int16(), 12)
	vs.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	vs.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9)
	return newClient(t, ab.saslAddr, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second), kgo.MaxVersions(vs)}, opts...)...)
}

// request sends req to the one broker directly (no routing by the
// client, which would need metadata the principal may not see).
func request[R kmsg.Response](t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

// produceTo builds a Produce of one batch to partition 0 of each topic.
func produceTo(txnID *string, data []byte, topics ...string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, txnID
	for _, topic := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = data
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// The data path (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
// Metadata, DescribeProducers) as Kafka's KafkaApis authorizes it: the
// allowed principal is served; the denied one gets Kafka's code, and an
// existing topic looks exactly like a missing one to a principal without
// DESCRIBE on it.
func TestAuthzDataPath(t *testing.T) {
	t.Parallel()
	ab := startAuthzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ab.createTopics(t, "known", "hidden")
	topicRes, cluster := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster
	ab.az.allow("User:alice", kmsg.ACLOperationRead, topicRes, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationWrite, topicRes, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationDescribe, topicRes, "auto-ok", "auto-no")
	ab.az.allow("User:alice", kmsg.ACLOperationCreate, topicRes, "auto-ok")
	ab.az.allow("User:bob", kmsg.ACLOperationAlter, cluster, clusterResource) // nothing on topics

	alice := ab.client(t, "alice", kgo.DefaultProduceTopic("known"), kgo.ConsumeTopics("known"))
	bob := ab.client(t, "bob")
	// Metadata v10, the last with the cluster's authorized operations.
	alice27 := ab.client(t, "alice", kgo.MaxVersions(kversion.V2_7_0()))
	bob27 := ab.client(t, "bob", kgo.MaxVersions(kversion.V2_7_0()))

	// Allowed: alice produces and consumes with a real client.
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice produce: %v", err)
	}
	if fs := alice.PollFetches(ctx); fs.Err0() != nil || fs.NumRecords() != 1 {
		t.Fatalf("alice fetch: %v, %d records", fs.Err0(), fs.NumRecords())
	}

	// Transactional batches need WRITE on the transactional id, for the
	// whole request.
	txb := batch.NewBuildOptions()
	txb.ProducerID, txb.ProducerEpoch, txb.BaseSequence, txb.Transactional = 1, 0, 0, true
	txn := batch.Build(txb, []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte("t")}})
	presp := request[*kmsg.ProduceResponse](t, ctx, alice, produceTo(kmsg.StringPtr("tx"), txn, "known"))
	if c := presp.Topics[0].Partitions[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional produce without WRITE on the id: %s, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", codeName(c))
	}

	// Per topic: alice writes "known", not "hidden".
	presp = request[*kmsg.ProduceResponse](t, ctx, alice, produceTo(nil, oneBatch(), "known", "hidden"))
	if c0, c1 := presp.Topics[0].Partitions[0].ErrorCode, presp.Topics[1].Partitions[0].ErrorCode; c0 != 0 || c1 != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice produce known, hidden: %s, %s; want NONE, TOPIC_AUTHORIZATION_FAILED", codeName(c0), codeName(c1))
	}

	// Each API, as bob, for the existing "known" and the missing
	// "missing": the same answer, TOPIC_AUTHORIZATION_FAILED.
	type probe struct {
		name string
		code func(topic string) int16
	}
	probes := []probe{
		{"Produce", func(topic string) int16 {
			return request[*kmsg.ProduceResponse](t, ctx, bob, produceTo(nil, oneBatch(), topic)).Topics[0].Partitions[0].ErrorCode
		}},
		{"Fetch", func(topic string) int16 {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxBytes, req.SessionEpoch, req.ReplicaID = 12, 1<<20, -1, -1
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = topic
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			req.Topics = append(req.Topics, ft)
			return request[*kmsg.FetchResponse](t, ctx, bob, req).Topics[0].Partitions[0].ErrorCode
		}},
		{"ListOffsets", func(topic string) int16 {
			req := kmsg.NewPtrListOffsetsRequest()
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = topic
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
			req.Topics = append(req.Topics, lt)
			return request[*kmsg.ListOffsetsResponse](t, ctx, bob, req).Topics[0].Partitions[0].ErrorCode
		}},
		{"OffsetForLeaderEpoch", func(topic string) int16 {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
			ot.Topic = topic
			op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			ot.Partitions = append(ot.Partitions, op)
			req.Topics = append(req.Topics, ot)
			return request[*kmsg.OffsetForLeaderEpochResponse](t, ctx, bob, req).Topics[0].Partitions[0].ErrorCode
		}},
		{"Metadata", func(topic string) int16 {
			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = true
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, mt)
			resp := request[*kmsg.MetadataResponse](t, ctx, bob, req)
			if len(resp.Topics[0].Partitions) != 0 || resp.Topics[0].TopicID != [16]byte{} {
				t.Errorf("Metadata of %q to bob shows partitions or an ID: %+v", topic, resp.Topics[0])
			}
			return resp.Topics[0].ErrorCode
		}},
		{"DescribeProducers", func(topic string) int16 {
			req := kmsg.NewPtrDescribeProducersRequest()
			dt := kmsg.NewDescribeProducersRequestTopic()
			dt.Topic, dt.Partitions = topic, []int32{0}
			req.Topics = append(req.Topics, dt)
			return request[*kmsg.DescribeProducersResponse](t, ctx, bob, req).Topics[0].Partitions[0].ErrorCode
		}},
	}
	for _, p := range probes {
		known, missing := p.code("known"), p.code("missing")
		if known != kerr.TopicAuthorizationFailed.Code || missing != known {
			t.Errorf("%s as bob: known %s, missing %s; want TOPIC_AUTHORIZATION_FAILED for both", p.name, codeName(known), codeName(missing))
		}
	}
	if _, ok := ab.b.meta.Topic("missing"); ok {
		t.Errorf("bob's Metadata auto-created a topic he may not describe")
	}

	// Metadata as alice: the all-topics list has only what she may
	// describe; auto-creation needs CREATE; authorized operations.
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	resp := request[*kmsg.MetadataResponse](t, ctx, alice, req)
	var names []string
	for _, mt := range resp.Topics {
		names = append(names, *mt.Topic)
	}
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "known" {
		t.Fatalf("alice's all-topics Metadata: %v, want [known]", names)
	}
	want := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationWrite | 1<<kmsg.ACLOperationDescribe)
	if got := resp.Topics[0].AuthorizedOperations; got != want {
		t.Errorf("alice's authorized operations on known: %b, want %b", got, want)
	}
	req = kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation, req.IncludeClusterAuthorizedOperations = 10, true, true
	for _, topic := range []string{"auto-ok", "auto-no", "hidden"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
	}
	resp = request[*kmsg.MetadataResponse](t, ctx, alice27, req)
	got := map[string]int16{}
	for _, mt := range resp.Topics {
		got[*mt.Topic] = mt.ErrorCode
	}
	if got["auto-no"] != kerr.TopicAuthorizationFailed.Code || got["hidden"] != kerr.TopicAuthorizationFailed.Code || got["auto-ok"] == kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's Metadata with auto-creation: %v; want auto-ok created, auto-no and hidden TOPIC_AUTHORIZATION_FAILED", got)
	}
	if resp.AuthorizedOperations != 0 {
		t.Errorf("cluster authorized operations without DESCRIBE on the cluster: %b, want 0", resp.AuthorizedOperations)
	}
	if _, ok := ab.b.meta.Topic("auto-ok"); !ok {
		t.Errorf("auto-ok not created for alice, who may create it")
	}
	if _, ok := ab.b.meta.Topic("auto-no"); ok {
		t.Errorf("auto-no created for alice, who may not create it")
	}
	// bob, with ALTER on the cluster (which implies DESCRIBE), gets the
	// cluster's operations.
	resp = request[*kmsg.MetadataResponse](t, ctx, bob27, req)
	if wantOps := int32(1<<kmsg.ACLOperationAlter | 1<<kmsg.ACLOperationDescribe); resp.AuthorizedOperations != wantOps {
		t.Errorf("bob's cluster authorized operations: %b, want %b", resp.AuthorizedOperations, wantOps)
	}
}

// authzCase is one request as one client and the code its answer must
// carry (code reads it).
type authzCase struct {
	name string
	cl   *kgo.Client
	req  kmsg.Request
	code func(kmsg.Response) int16
	want int16
}

func runAuthzCases(t *testing.T, ctx context.Context, cases []authzCase) {
	t.Helper()
	for _, c := range cases {
		resp := request[kmsg.Response](t, ctx, c.cl, c.req)
		if got := c.code(resp); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, codeName(got), codeName(c.want))
		}
	}
}

// The group APIs as Kafka's KafkaApis authorizes them.
func TestAuthzGroups(t *testing.T) {
	t.Parallel()
	ab := startAuthzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ab.createTopics(t, "known", "hidden")
	group, topicRes, cluster := kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster
	ab.az.allow("User:alice", kmsg.ACLOperationRead, topicRes, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationRead, group, "g1")
	ab.az.allow("User:bob", kmsg.ACLOperationDescribe, cluster, clusterResource)

	// Offsets the super user commits: g1 on both topics, g-hidden.
	adm := kadm.NewClient(newClient(t, ab.plain))
	for _, g := range []string{"g1", "g-hidden"} {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "known", Partition: 0, At: 0})
		os.Add(kadm.Offset{Topic: "hidden", Partition: 0, At: 0})
		if err := adm.CommitAllOffsets(ctx, g, os); err != nil {
			t.Fatalf("commit %s: %v", g, err)
		}
	}

	// Allowed: alice consumes in group g1 with a real client.
	if err := newClient(t, ab.plain, kgo.DefaultProduceTopic("known")).ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer := ab.client(t, "alice", kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("known"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if fs := consumer.PollFetches(ctx); fs.Err0() != nil || fs.NumRecords() != 1 {
		t.Fatalf("alice in g1: %v, %d records", fs.Err0(), fs.NumRecords())
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits in g1: %v", err)
	}
	consumer.Close()

	alice, bob := ab.client(t, "alice"), ab.client(t, "bob")
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 7)
	alice7 := ab.client(t, "alice", kgo.MaxVersions(vs))

	findCoordinator := func(keyType int8, key string) *kmsg.FindCoordinatorRequest {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorType, r.CoordinatorKeys, r.CoordinatorKey = keyType, []string{key}, key
		return r
	}
	fcCode := func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode }
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g1", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID = "g1", "m"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g1", "m"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.Members = "g1", []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberEpoch, cgh.SubscribedTopicNames, cgh.RebalanceTimeoutMillis = "g1", 0, []string{"known"}, 10000
	commit := func(g string, topics ...string) *kmsg.OffsetCommitRequest {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = g, -1
		for _, topic := range topics {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	commitCode := func(topic int) func(kmsg.Response) int16 {
		return func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetCommitResponse).Topics[topic].Partitions[0].ErrorCode
		}
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"g1"}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g1"}
	odel := kmsg.NewPtrOffsetDeleteRequest()
	odel.Group = "g1"
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{"g1"}
	top := func(r kmsg.Response) int16 {
		switch r := r.(type) {
		case *kmsg.JoinGroupResponse:
			return r.ErrorCode
		case *kmsg.SyncGroupResponse:
			return r.ErrorCode
		case *kmsg.HeartbeatResponse:
			return r.ErrorCode
		case *kmsg.LeaveGroupResponse:
			return r.ErrorCode
		case *kmsg.ConsumerGroupHeartbeatResponse:
			return r.ErrorCode
		case *kmsg.OffsetDeleteResponse:
			return r.ErrorCode
		case *kmsg.DescribeGroupsResponse:
			return r.Groups[0].ErrorCode
		case *kmsg.DeleteGroupsResponse:
			return r.Groups[0].ErrorCode
		case *kmsg.ConsumerGroupDescribeResponse:
			return r.Groups[0].ErrorCode
		}
		panic("unexpected response")
	}
	gaf, taf := kerr.GroupAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code
	runAuthzCases(t, ctx, []authzCase{
		{"FindCoordinator group as alice", alice, findCoordinator(0, "g1"), fcCode, 0},
		{"FindCoordinator group as bob", bob, findCoordinator(0, "g1"), fcCode, gaf},
		{"FindCoordinator txn as bob", bob, findCoordinator(1, "tx"), fcCode, kerr.TransactionalIDAuthorizationFailed.Code},
		{"JoinGroup as bob", bob, join, top, gaf},
		{"SyncGroup as bob", bob, sync, top, gaf},
		{"Heartbeat as bob", bob, hb, top, gaf},
		{"LeaveGroup as bob", bob, leave, top, gaf},
		{"ConsumerGroupHeartbeat as bob", bob, cgh, top, gaf},
		{"DescribeGroups as bob", bob, describe, top, gaf},
		{"ConsumerGroupDescribe as bob", bob, cgd, top, gaf},
		{"DeleteGroups as alice (READ only)", alice, del, top, gaf},
		{"OffsetDelete as alice (READ only)", alice, odel, top, gaf},
		{"OffsetCommit as bob", bob, commit("g1", "known"), commitCode(0), gaf},
		{"OffsetCommit known as alice", alice, commit("g1", "known", "hidden", "missing"), commitCode(0), 0},
		{"OffsetCommit hidden as alice", alice, commit("g1", "known", "hidden", "missing"), commitCode(1), taf},
		{"OffsetCommit missing as alice", alice, commit("g1", "known", "hidden", "missing"), commitCode(2), taf},
	})

	// OffsetFetch, both forms: the group needs DESCRIBE; named topics
	// without DESCRIBE fail alike whether they exist or not; the
	// all-topics form leaves them out.
	// fetch asks for g's offsets of topics (nil: every topic), in both
	// request forms (the client's version picks one), and returns the
	// group's error and each topic's.
	// fetchList is fetch with a list that may be empty and not null.
	fetchList := func(cl *kgo.Client, g string, topics []string) (int16, map[string]int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		req.Group, rg.Group = g, g
		if topics != nil {
			req.Topics, rg.Topics = []kmsg.OffsetFetchRequestTopic{}, []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for _, topic := range topics {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0}
			req.Topics = append(req.Topics, rt)
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = topic, []int32{0}
			rg.Topics = append(rg.Topics, gt)
		}
		req.Groups = append(req.Groups, rg)
		resp := request[*kmsg.OffsetFetchResponse](t, ctx, cl, req)
		codes := map[string]int16{}
		if resp.Version >= 8 {
			for _, rt := range resp.Groups[0].Topics {
				codes[rt.Topic] = rt.Partitions[0].ErrorCode
			}
			return resp.Groups[0].ErrorCode, codes
		}
		for _, rt := range resp.Topics {
			codes[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return resp.ErrorCode, codes
	}
	fetch := func(cl *kgo.Client, g string, topics ...string) (int16, map[string]int16) {
		return fetchList(cl, g, topics)
	}
	for _, cl := range []*kgo.Client{alice, alice7} {
		code, codes := fetch(cl, "g1", "known", "hidden", "missing")
		if code != 0 || len(codes) != 3 || codes["known"] != 0 || codes["hidden"] != taf || codes["missing"] != taf {
			t.Errorf("alice's OffsetFetch of named topics: %s %v", codeName(code), codes)
		}
		if code, codes = fetch(cl, "g1"); code != 0 || len(codes) != 1 || codes["known"] != 0 {
			t.Errorf("alice's OffsetFetch of every topic: %s %v, want known only", codeName(code), codes)
		}
		// An empty list asks for nothing; a list of denied topics
		// answers for those alone (never for every topic).
		if code, codes = fetchList(cl, "g1", []string{}); code != 0 || len(codes) != 0 {
			t.Errorf("alice's OffsetFetch of an empty list: %s %v, want nothing", codeName(code), codes)
		}
		if code, codes = fetch(cl, "g1", "hidden"); code != 0 || len(codes) != 1 || codes["hidden"] != taf {
			t.Errorf("alice's OffsetFetch of hidden: %s %v, want hidden denied only", codeName(code), codes)
		}
		if code, _ = fetch(cl, "g-hidden"); code != gaf {
			t.Errorf("alice's OffsetFetch of g-hidden: %s, want GROUP_AUTHORIZATION_FAILED", codeName(code))
		}
	}

	// DescribeGroups as alice, with her operations on g1.
	describe.IncludeAuthorizedOperations = true
	dresp := request[*kmsg.DescribeGroupsResponse](t, ctx, alice, describe)
	if want := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe); dresp.Groups[0].ErrorCode != 0 || dresp.Groups[0].AuthorizedOperations != want {
		t.Errorf("alice's DescribeGroups of g1: %s, operations %b, want %b", codeName(dresp.Groups[0].ErrorCode), dresp.Groups[0].AuthorizedOperations, want)
	}

	// ListGroups: alice sees g1 only; bob, with DESCRIBE on the cluster,
	// every group.
	list := func(cl *kgo.Client) []string {
		l, err := kadm.NewClient(cl).ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l.Groups()
	}
	if gs := list(alice); len(gs) != 1 || gs[0] != "g1" {
		t.Errorf("alice's ListGroups: %v, want [g1]", gs)
	}
	if gs := list(bob); len(gs) != 2 {
		t.Errorf("bob's ListGroups: %v, want g1 and g-hidden", gs)
	}
}

// The transaction APIs as Kafka's KafkaApis authorizes them.
func TestAuthzTransactions(t *testing.T) {
	t.Parallel()
	ab := startAuthzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ab.createTopics(t, "known", "hidden")
	txnRes, topicRes := kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeTopic
	ab.az.allow("User:alice", kmsg.ACLOperationWrite, txnRes, "tx-a")
	ab.az.allow("User:alice", kmsg.ACLOperationWrite, topicRes, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationRead, topicRes, "known")

	// Allowed: alice's transactional producer commits.
	producer := ab.client(t, "alice", kgo.TransactionalID("tx-a"), kgo.DefaultProduceTopic("known"))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
		t.Fatalf("alice's transactional produce: %v", err)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("alice's commit: %v", err)
	}
	// A transaction alice may not see.
	admin := newClient(t, ab.plain, kgo.TransactionalID("tx-hidden"), kgo.DefaultProduceTopic("hidden"))
	if err := admin.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	alice, bob := ab.client(t, "alice"), ab.client(t, "bob")
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	alice3, bob3 := ab.client(t, "alice", kgo.MaxVersions(vs)), ab.client(t, "bob", kgo.MaxVersions(vs))

	initPID := func(txnID *string) *kmsg.InitProducerIDRequest {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionalID, r.TransactionTimeoutMillis = txnID, 10000
		return r
	}
	pidCode := func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }
	addParts := func(topics ...string) *kmsg.AddPartitionsToTxnRequest {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx-a", 1, 0
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "tx-a", 1, true
		for _, topic := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0}
			r.Topics = append(r.Topics, rt)
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = topic, []int32{0}
			tx.Topics = append(tx.Topics, tt)
		}
		r.Transactions = append(r.Transactions, tx)
		return r
	}
	addCode := func(topic int) func(kmsg.Response) int16 {
		return func(r kmsg.Response) int16 {
			resp := r.(*kmsg.AddPartitionsToTxnResponse)
			if resp.Version >= 4 {
				return resp.ErrorCode
			}
			return resp.Topics[topic].Partitions[0].ErrorCode
		}
	}
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.TransactionalID, addOffsets.Group = "tx-a", "g-none"
	endTxn := kmsg.NewPtrEndTxnRequest()
	endTxn.TransactionalID = "tx-a"
	txnCommit := kmsg.NewPtrTxnOffsetCommitRequest()
	txnCommit.TransactionalID, txnCommit.Group = "tx-a", "g-none"
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = "known"
	tct.Partitions = append(tct.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
	txnCommit.Topics = append(txnCommit.Topics, tct)
	markers := kmsg.NewPtrWriteTxnMarkersRequest()
	wm := kmsg.NewWriteTxnMarkersRequestMarker()
	wm.ProducerID = 1
	wm.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "known", Partitions: []int32{0}}}
	markers.Markers = append(markers.Markers, wm)
	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{"tx-a"}
	code := func(r kmsg.Response) int16 {
		switch r := r.(type) {
		case *kmsg.AddOffsetsToTxnResponse:
			return r.ErrorCode
		case *kmsg.EndTxnResponse:
			return r.ErrorCode
		case *kmsg.TxnOffsetCommitResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.WriteTxnMarkersResponse:
			return r.Markers[0].Topics[0].Partitions[0].ErrorCode
		case *kmsg.DescribeTransactionsResponse:
			return r.TransactionStates[0].ErrorCode
		}
		panic("unexpected response")
	}
	tiaf := kerr.TransactionalIDAuthorizationFailed.Code
	runAuthzCases(t, ctx, []authzCase{
		{"InitProducerId tx-a as bob", bob, initPID(kmsg.StringPtr("tx-a")), pidCode, tiaf},
		{"idempotent InitProducerId as bob (no write anywhere)", bob, initPID(nil), pidCode, kerr.ClusterAuthorizationFailed.Code},
		{"idempotent InitProducerId as alice (WRITE on a topic)", alice, initPID(nil), pidCode, 0},
		{"AddPartitionsToTxn v3 as bob", bob3, addParts("known"), addCode(0), tiaf},
		{"AddPartitionsToTxn v3 as alice: known not attempted", alice3, addParts("known", "hidden"), addCode(0), kerr.OperationNotAttempted.Code},
		{"AddPartitionsToTxn v3 as alice: hidden", alice3, addParts("known", "hidden"), addCode(1), kerr.TopicAuthorizationFailed.Code},
		{"AddPartitionsToTxn v4 (brokers') as alice", alice, addParts("known"), addCode(0), kerr.ClusterAuthorizationFailed.Code},
		{"AddOffsetsToTxn as bob", bob, addOffsets, code, tiaf},
		{"AddOffsetsToTxn as alice without READ on the group", alice, addOffsets, code, kerr.GroupAuthorizationFailed.Code},
		{"EndTxn as bob", bob, endTxn, code, tiaf},
		{"TxnOffsetCommit as bob", bob, txnCommit, code, tiaf},
		{"TxnOffsetCommit as alice without READ on the group", alice, txnCommit, code, kerr.GroupAuthorizationFailed.Code},
		{"WriteTxnMarkers as alice", alice, markers, code, kerr.ClusterAuthorizationFailed.Code},
		{"DescribeTransactions as bob", bob, describe, code, tiaf},
		{"DescribeTransactions as alice", alice, describe, code, 0},
	})

	// ListTransactions: alice sees tx-a (WRITE implies DESCRIBE) and not
	// tx-hidden; the super user sees both.
	listed := func(cl *kgo.Client) map[string]bool {
		resp := request[*kmsg.ListTransactionsResponse](t, ctx, cl, kmsg.NewPtrListTransactionsRequest())
		out := map[string]bool{}
		for _, st := range resp.TransactionStates {
			out[st.TransactionalID] = true
		}
		return out
	}
	if got := listed(alice); len(got) != 1 || !got["tx-a"] {
		t.Errorf("alice's ListTransactions: %v, want tx-a", got)
	}
	if got := listed(newClient(t, ab.plain)); !got["tx-a"] || !got["tx-hidden"] {
		t.Errorf("the super user's ListTransactions: %v, want tx-a and tx-hidden", got)
	}

	// Produce v12 adds a transactional batch's partition to the
	// transaction: a topic alice may not write is refused before that
	// and never joins it (Kafka filters unauthorized topics before
	// handleProduceAppend).
	var pid int64
	var epoch int16
	eventually(t, 10*time.Second, "InitProducerId tx-a as alice", func() error {
		r := request[*kmsg.InitProducerIDResponse](t, ctx, alice, initPID(kmsg.StringPtr("tx-a")))
		if r.ErrorCode != 0 {
			return kerr.ErrorForCode(r.ErrorCode)
		}
		pid, epoch = r.ProducerID, r.ProducerEpoch
		return nil
	})
	txb := batch.NewBuildOptions()
	txb.ProducerID, txb.ProducerEpoch, txb.BaseSequence, txb.Transactional = pid, epoch, 0, true
	txn := batch.Build(txb, []batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte("t")}})
	presp := request[*kmsg.ProduceResponse](t, ctx, alice, produceTo(kmsg.StringPtr("tx-a"), txn, "known", "hidden"))
	if c0, c1 := presp.Topics[0].Partitions[0].ErrorCode, presp.Topics[1].Partitions[0].ErrorCode; presp.Version != 12 || c0 != 0 || c1 != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's transactional Produce v%d to known and hidden: %s, %s, want NONE, TOPIC_AUTHORIZATION_FAILED", presp.Version, codeName(c0), codeName(c1))
	}
	describe.TransactionalIDs = []string{"tx-a"}
	dresp := request[*kmsg.DescribeTransactionsResponse](t, ctx, newClient(t, ab.plain), describe)
	var inTxn []string
	for _, st := range dresp.TransactionStates {
		for _, rt := range st.Topics {
			for _, p := range rt.Partitions {
				inTxn = append(inTxn, fmt.Sprintf("%s-%d", rt.Topic, p))
			}
		}
	}
	if len(inTxn) != 1 || inTxn[0] != "known-0" {
		t.Errorf("tx-a's partitions after the Produce: %v, want known-0 only", inTxn)
	}
}

// The admin APIs as Kafka's KafkaApis and ControllerApis authorize them.
func TestAuthzAdmin(t *testing.T) {
	t.Parallel()
	ab := startAuthzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ab.createTopics(t, "known", "del-me")
	topicRes, cluster := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster
	ab.az.allow("User:alice", kmsg.ACLOperationCreate, topicRes, "a-new")
	ab.az.allow("User:alice", kmsg.ACLOperationRead, topicRes, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationAlterConfigs, topicRes, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationDelete, topicRes, "del-me")
	ab.az.allow("User:alice", kmsg.ACLOperationDescribe, cluster, clusterResource)
	alice, bob := ab.client(t, "alice"), ab.client(t, "bob")

	createTopics := func(topics ...string) *kmsg.CreateTopicsRequest {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.TimeoutMillis = 10000
		for _, topic := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	cresp := request[*kmsg.CreateTopicsResponse](t, ctx, alice, createTopics("a-new", "b-new"))
	got := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, st := range cresp.Topics {
		got[st.Topic] = st
	}
	if st := got["a-new"]; st.ErrorCode != 0 || st.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(st.Configs) != 0 {
		t.Errorf("alice creates a-new: %s, config error %s, %d configs; want created, configs withheld (no DESCRIBE_CONFIGS)", codeName(st.ErrorCode), codeName(st.ConfigErrorCode), len(st.Configs))
	}
	if st := got["b-new"]; st.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice creates b-new: %s, want TOPIC_AUTHORIZATION_FAILED", codeName(st.ErrorCode))
	}
	if _, ok := ab.b.meta.Topic("b-new"); ok {
		t.Errorf("b-new created without CREATE")
	}

	deleteTopics := func(topics ...string) *kmsg.DeleteTopicsRequest {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.TimeoutMillis, r.TopicNames = 10000, topics
		for _, topic := range topics {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	delCode := func(topic string) func(kmsg.Response) int16 {
		return func(r kmsg.Response) int16 {
			for _, st := range r.(*kmsg.DeleteTopicsResponse).Topics {
				if st.Topic != nil && *st.Topic == topic {
					return st.ErrorCode
				}
			}
			return -100
		}
	}
	configs := func(rt kmsg.ConfigResourceType, name string) *kmsg.DescribeConfigsRequest {
		r := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rt, name
		r.Resources = append(r.Resources, rr)
		return r
	}
	alterConfigs := func(rt kmsg.ConfigResourceType, name string) *kmsg.IncrementalAlterConfigsRequest {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rt, name
		rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("100000")}}
		r.Resources = append(r.Resources, rr)
		return r
	}
	deleteRecords := kmsg.NewPtrDeleteRecordsRequest()
	deleteRecords.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "known", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	deleteRecords.TimeoutMillis = 5000
	createParts := kmsg.NewPtrCreatePartitionsRequest()
	createParts.TimeoutMillis = 5000
	createParts.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "known", Count: 3}}
	elect := kmsg.NewPtrElectLeadersRequest()
	elect.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "known", Partitions: []int32{0}}}
	reassign := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	reassign.TimeoutMillis = 5000
	alterScram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alterScram.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "carol", Mechanism: 1}}
	quorum := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic, qt.Partitions = metaTopic, []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	quorum.Topics = append(quorum.Topics, qt)
	unregister := kmsg.NewPtrUnregisterBrokerRequest()
	unregister.BrokerID = 99
	alterQuotas := kmsg.NewPtrAlterClientQuotasRequest()
	alterQuotas.Entries = []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("bob")}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}},
	}}
	code := func(r kmsg.Response) int16 {
		switch r := r.(type) {
		case *kmsg.DeleteRecordsResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.CreatePartitionsResponse:
			return r.Topics[0].ErrorCode
		case *kmsg.DescribeConfigsResponse:
			return r.Resources[0].ErrorCode
		case *kmsg.IncrementalAlterConfigsResponse:
			return r.Resources[0].ErrorCode
		case *kmsg.ElectLeadersResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.AlterUserSCRAMCredentialsResponse:
			return r.Results[0].ErrorCode
		case *kmsg.AlterClientQuotasResponse:
			return r.Entries[0].ErrorCode
		}
		return reflect.ValueOf(r).Elem().FieldByName("ErrorCode").Interface().(int16)
	}
	taf, caf := kerr.TopicAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code
	runAuthzCases(t, ctx, []authzCase{
		{"DeleteTopics known as bob", bob, deleteTopics("known"), delCode("known"), taf},
		{"DeleteTopics missing as bob", bob, deleteTopics("missing"), delCode("missing"), taf},
		{"DeleteTopics known as alice (DESCRIBE, no DELETE)", alice, deleteTopics("known"), delCode("known"), taf},
		{"DeleteTopics del-me as alice", alice, deleteTopics("del-me", "missing"), delCode("del-me"), 0},
		{"DeleteRecords as bob", bob, deleteRecords, code, taf},
		{"CreatePartitions as bob", bob, createParts, code, taf},
		{"DescribeConfigs topic as bob", bob, configs(kmsg.ConfigResourceTypeTopic, "known"), code, taf},
		{"DescribeConfigs topic as alice (ALTER_CONFIGS)", alice, configs(kmsg.ConfigResourceTypeTopic, "known"), code, 0},
		{"DescribeConfigs broker as alice", alice, configs(kmsg.ConfigResourceTypeBroker, "1"), code, caf},
		{"IncrementalAlterConfigs topic as bob", bob, alterConfigs(kmsg.ConfigResourceTypeTopic, "known"), code, taf},
		{"IncrementalAlterConfigs topic as alice", alice, alterConfigs(kmsg.ConfigResourceTypeTopic, "known"), code, 0},
		{"IncrementalAlterConfigs broker as alice", alice, alterConfigs(kmsg.ConfigResourceTypeBroker, ""), code, caf},
		{"DescribeLogDirs as bob", bob, kmsg.NewPtrDescribeLogDirsRequest(), code, caf},
		{"DescribeLogDirs as alice", alice, kmsg.NewPtrDescribeLogDirsRequest(), code, 0},
		{"ElectLeaders as alice", alice, elect, code, caf},
		{"AlterPartitionReassignments as alice", alice, reassign, code, caf},
		{"ListPartitionReassignments as bob", bob, kmsg.NewPtrListPartitionReassignmentsRequest(), code, caf},
		{"DescribeUserScramCredentials as bob", bob, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), code, caf},
		{"AlterUserScramCredentials as alice", alice, alterScram, code, caf},
		{"DescribeQuorum as bob", bob, quorum, code, caf},
		{"UnregisterBroker as alice", alice, unregister, code, caf},
		{"DescribeClientQuotas as alice (DESCRIBE, no DESCRIBE_CONFIGS)", alice, kmsg.NewPtrDescribeClientQuotasRequest(), code, caf},
		{"AlterClientQuotas as alice", alice, alterQuotas, code, caf},
	})
	if q, _ := ab.b.meta.ClientQuotas(); len(q) != 0 {
		t.Errorf("client quotas altered without ALTER_CONFIGS: %v", q)
	}
	// A client cannot pass for a broker forwarding a request by its
	// client id: without CLUSTER_ACTION it is checked as any client.
	posing := ab.client(t, "bob", kgo.ClientID(brokerClientIDPrefix+"9"))
	if c := delCode("known")(request[*kmsg.DeleteTopicsResponse](t, ctx, posing, deleteTopics("known"))); c != taf {
		t.Errorf("DeleteTopics as bob with a broker's client id: %s, want TOPIC_AUTHORIZATION_FAILED", codeName(c))
	}
	// Nor by CLUSTER_ACTION, which an ACL gives (or
	// allow.everyone.if.no.acl.found): only a super user passes for one.
	ab.az.allow("User:bob", kmsg.ACLOperationClusterAction, cluster, clusterResource)
	if c := delCode("known")(request[*kmsg.DeleteTopicsResponse](t, ctx, posing, deleteTopics("known"))); c != taf {
		t.Errorf("DeleteTopics as bob with CLUSTER_ACTION and a broker's client id: %s, want TOPIC_AUTHORIZATION_FAILED", codeName(c))
	}
	if _, ok := ab.b.meta.Topic("known"); !ok {
		t.Errorf("known deleted by a principal without DELETE")
	}
	if _, ok := ab.b.meta.Topic("del-me"); ok {
		t.Errorf("del-me not deleted by alice, who may")
	}

	// DescribeCluster's authorized operations: alice's DESCRIBE, none
	// for bob.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if ops := request[*kmsg.DescribeClusterResponse](t, ctx, alice, dc).ClusterAuthorizedOperations; ops != 1<<kmsg.ACLOperationDescribe {
		t.Errorf("alice's cluster operations: %b, want DESCRIBE", ops)
	}
	if ops := request[*kmsg.DescribeClusterResponse](t, ctx, bob, dc).ClusterAuthorizedOperations; ops != 0 {
		t.Errorf("bob's cluster operations: %b, want 0", ops)
	}
}

// A raft connection (conn.go handOffRaft) needs CLUSTER_ACTION on the
// cluster: without it the broker closes it at once.
func TestAuthzRaftHandOff(t *testing.T) {
	t.Parallel()
	ab := startAuthzBroker(t)
	open := func() net.Conn {
		c, err := net.Dial("tcp", ab.plain)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte("SLRT")); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Allowed (User:ANONYMOUS is a super user here): the raft transport
	// holds the connection, waiting for its messages.
	c := open()
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("raft connection of a super user: %v, want it held open", err)
	}
	ab.az.mu.Lock()
	delete(ab.az.super, "User:ANONYMOUS")
	ab.az.mu.Unlock()
	c = open()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("raft connection without CLUSTER_ACTION: %v, want it closed", err)
	}
}

// In a cluster, an admin request is authorized on the broker that
// received it, before it is forwarded; the controller trusts what a
// broker (a super user) forwards.
func TestAuthzClusterForwarding(t *testing.T) {
	t.Parallel()
	az := newRuleAuthz()
	anon, topicRes := "User:ANONYMOUS", kmsg.ACLResourceTypeTopic
	// The brokers' own clients and the test's are User:ANONYMOUS: the
	// brokers' principal (trusted as a broker, SuperUser), with
	// CLUSTER_ACTION for raft and the controller-only APIs, and CREATE on
	// fwd-ok.
	az.brokers[anon] = true
	az.allow(anon, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, clusterResource)
	az.allow(anon, kmsg.ACLOperationCreate, topicRes, "fwd-ok")
	az.deniedHost = "127.0.0.2"
	tc := startClusterBefore(t, 3, func(b *Broker) { b.authz = az })
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	follower := -1
	waitFor(t, 20*time.Second, "an active controller", func() bool {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		for i, b := range tc.brokers {
			if b.cl.isController() {
				follower = (i + 1) % 3
				return true
			}
		}
		return false
	})
	cl := tc.direct(follower)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for _, topic := range []string{"fwd-ok", "fwd-no"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
		req.Topics = append(req.Topics, rt)
	}
	resp := request[*kmsg.CreateTopicsResponse](t, ctx, cl, req)
	got := map[string]int16{}
	for _, st := range resp.Topics {
		got[st.Topic] = st.ErrorCode
	}
	if got["fwd-ok"] != 0 || got["fwd-no"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("CreateTopics at broker %d (not the controller): %v; want fwd-ok created, fwd-no TOPIC_AUTHORIZATION_FAILED", follower+1, got)
	}
	b := tc.brokers[follower]
	if _, ok := b.meta.Topic("fwd-ok"); !ok {
		t.Errorf("fwd-ok not in broker %d's metadata after a forwarded create", follower+1)
	}
	if _, ok := b.meta.Topic("fwd-no"); ok {
		t.Errorf("fwd-no created without CREATE")
	}
	// A broker creates __consumer_offsets at the controller for a
	// client (FindCoordinator), with its CLUSTER_ACTION alone.
	az.allow(anon, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, "g")
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
	waitFor(t, 20*time.Second, "__consumer_offsets created through a broker", func() bool {
		request[*kmsg.FindCoordinatorResponse](t, ctx, cl, fc)
		_, ok := b.meta.Topic(offsetsTopic)
		return ok
	})

	// The controller-only APIs need CLUSTER_ACTION: a client from
	// 127.0.0.2 has none, one from 127.0.0.1 has the brokers' rights.
	ctrlAddr := fmt.Sprintf("127.0.0.1:%d", tc.ctrl[(follower+2)%3])
	from := func(ip string) *kgo.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return newClient(t, ctrlAddr, kgo.Dialer(d.DialContext), kgo.RequestRetries(0))
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 99, 1
	if c := request[*kmsg.BrokerHeartbeatResponse](t, ctx, from("127.0.0.2"), hb).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("BrokerHeartbeat without CLUSTER_ACTION: %s, want CLUSTER_AUTHORIZATION_FAILED", codeName(c))
	}
	if c := request[*kmsg.BrokerHeartbeatResponse](t, ctx, from("127.0.0.1"), hb).ErrorCode; c == kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("BrokerHeartbeat with CLUSTER_ACTION: %s", codeName(c))
	}
}

// Every API at every version served, as a request with its defaults
// (empty lists, null names), from a principal with no rights and from one
// with a few: the checks answer or refuse, and never take the broker
// down.
func TestAuthzEveryAPIDefaults(t *testing.T) {
	t.Parallel()
	ab := startAuthzBroker(t)
	ab.createTopics(t, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "known")
	ab.az.allow("User:alice", kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, "")
	for _, user := range []string{"bob", "alice"} {
		for _, h := range sortedHandlers() {
			if h.key == kmsg.SASLHandshake.Int16() || h.key == kmsg.SASLAuthenticate.Int16() {
				continue // the SASL exchange itself
			}
			for v := h.minVersion; v <= h.maxVersion; v++ {
				// A client per request: a refused one closes the
				// connection.
				cl := ab.client(t, user)
				req := kmsg.RequestForKey(h.key)
				req.SetVersion(v)
				if p, ok := req.(*kmsg.ProduceRequest); ok {
					p.Acks = 1 // acks=0 has no answer to wait for
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cl.SeedBrokers()[0].Request(ctx, pinnedRequest{req, v})
				cancel()
				cl.Close()
			}
		}
	}
	if n := handlerPanics.Load(); n > 0 {
		t.Fatalf("%d requests made a handler panic", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	request[*kmsg.MetadataResponse](t, ctx, ab.client(t, "alice"), kmsg.NewPtrMetadataRequest()) // still serving
}

// Without an authorizer every supported operation is reported, as Kafka
// does: the cluster's (DescribeCluster, Metadata v8-10), a topic's, a
// group's.
func TestAuthorizedOperationsWithoutAuthorizer(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	if _, err := b.createTopic("known", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bits := func(rt kmsg.ACLResourceType) int32 {
		var n int32
		for _, op := range supportedOperations[rt] {
			n |= 1 << op
		}
		return n
	}
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V2_7_0()))
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if got := request[*kmsg.DescribeClusterResponse](t, ctx, newClient(t, addr), dc).ClusterAuthorizedOperations; got != bits(kmsg.ACLResourceTypeCluster) {
		t.Errorf("DescribeCluster's operations: %b, want %b", got, bits(kmsg.ACLResourceTypeCluster))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.IncludeClusterAuthorizedOperations, md.IncludeTopicAuthorizedOperations = true, true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("known")}}
	mresp := request[*kmsg.MetadataResponse](t, ctx, cl, md)
	if mresp.AuthorizedOperations != bits(kmsg.ACLResourceTypeCluster) || mresp.Topics[0].AuthorizedOperations != bits(kmsg.ACLResourceTypeTopic) {
		t.Errorf("Metadata v%d operations: cluster %b, topic %b", mresp.Version, mresp.AuthorizedOperations, mresp.Topics[0].AuthorizedOperations)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
	var g kmsg.DescribeGroupsResponseGroup
	request[*kmsg.FindCoordinatorResponse](t, ctx, cl, &kmsg.FindCoordinatorRequest{CoordinatorKey: "g"}) // creates __consumer_offsets
	waitFor(t, 20*time.Second, "the group coordinator", func() bool {
		g = request[*kmsg.DescribeGroupsResponse](t, ctx, cl, dg).Groups[0]
		return g.ErrorCode != kerr.NotCoordinator.Code && g.ErrorCode != kerr.CoordinatorLoadInProgress.Code && g.ErrorCode != kerr.CoordinatorNotAvailable.Code
	})
	if g.ErrorCode != 0 || g.AuthorizedOperations != bits(kmsg.ACLResourceTypeGroup) {
		t.Errorf("DescribeGroups of a dead group: %s, operations %b, want %b", codeName(g.ErrorCode), g.AuthorizedOperations, bits(kmsg.ACLResourceTypeGroup))
	}
}
