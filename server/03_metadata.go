package server

// Metadata, versions 0-12. v1 makes a null topic list mean "all topics"
// (v0: empty means all); v2 adds the cluster id; v4 lets the client ask
// for auto-creation (earlier versions always may); v9 is flexible; v10
// adds topic IDs; v12 may ask for a topic by ID alone.

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 3, minVersion: 0, maxVersion: 12, serve: serveMetadata})
}

// clusterID is reported in Metadata and DescribeCluster.
const clusterID = "sluice-single-node"

func serveMetadata(_ context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = b.metadataBrokers(connListener(cc))
	id := clusterIDFor(&b.cfg)
	resp.ClusterID = &id
	resp.ControllerID = b.controllerForClients()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	// Kafka's KafkaApis.handleTopicMetadataRequest: DESCRIBE on a topic
	// to see it (the all-topics list leaves the others out; a topic
	// asked for by name answers TOPIC_AUTHORIZATION_FAILED whether it
	// exists or not), and CREATE on the cluster or the topic to have an
	// unknown one auto-created.
	describable := b.authorizer(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	defer b.metadataAuthorizedOperations(cc, req, resp)
	if all {
		for _, t := range b.meta.Topics() {
			if describable(t.Name) {
				resp.Topics = append(resp.Topics, b.topicMetadata(t))
			}
		}
		return resp, nil
	}
	autoCreate := b.cfg.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)
	creatable := b.authorizer(cc, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic)
	if b.authorized(cc, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, clusterResource) {
		creatable = func(string) bool { return true }
	}
	// denied is the answer for a topic the principal may not see or
	// create: no ID, no partitions (Kafka leaves the ID out by name).
	denied := func(rt kmsg.MetadataRequestTopic, t meta.Topic) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
		if rt.Topic == nil {
			mt.TopicID = t.ID // asked by ID: IDs are not secret
		} else {
			mt.IsInternal = isInternalTopic(*rt.Topic)
		}
		return mt
	}
	var createErrs map[string]error
	if autoCreate {
		var wanted []kmsg.MetadataRequestTopic
		for _, rt := range req.Topics {
			if rt.Topic != nil && describable(*rt.Topic) && creatable(*rt.Topic) {
				wanted = append(wanted, rt)
			}
		}
		createErrs = b.autoCreate(wanted)
	}
	for _, rt := range req.Topics {
		var (
			t  meta.Topic
			ok bool
		)
		if rt.Topic != nil {
			if !describable(*rt.Topic) {
				resp.Topics = append(resp.Topics, denied(rt, t))
				continue
			}
			t, ok = b.meta.Topic(*rt.Topic)
		} else {
			if t, ok = b.meta.TopicByID(rt.TopicID); ok && !describable(t.Name) {
				resp.Topics = append(resp.Topics, denied(rt, t))
				continue
			}
		}
		if !ok && rt.Topic != nil && autoCreate && !creatable(*rt.Topic) {
			resp.Topics = append(resp.Topics, denied(rt, t))
			continue
		}
		if !ok && rt.Topic != nil && isInternalTopic(*rt.Topic) && autoCreate {
			// An internal topic is created with its own layout, never
			// with the defaults of an auto-created topic.
			it := b.offsetsTopicSpec()
			if *rt.Topic == txnTopic {
				it = b.txnTopicSpec()
			}
			if err := b.ensureInternalTopic(it); err == nil {
				t, ok = b.meta.Topic(it.name)
			}
		}
		if !ok && rt.Topic != nil && autoCreate && !isInternalTopic(*rt.Topic) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if err, refused := createErrs[*rt.Topic]; refused {
				mt.ErrorCode = kafkaCode(err)
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(t))
	}
	return resp, nil
}

// metadataAuthorizedOperations fills Metadata v8+'s authorized
// operations (KIP-430) when asked: the cluster's up to v10 (0 without
// DESCRIBE on the cluster), each topic's that is answered without an
// authorization or unknown-ID error (Kafka's KafkaApis; the fields stay
// at their default, -2147483648, otherwise).
func (b *Broker) metadataAuthorizedOperations(cc *clientConn, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.Version < 8 {
		return
	}
	if req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, clusterResource) {
			resp.AuthorizedOperations = b.authorizedOperations(cc, kmsg.ACLResourceTypeCluster, clusterResource)
		}
	}
	if !req.IncludeTopicAuthorizedOperations {
		return
	}
	for i := range resp.Topics {
		mt := &resp.Topics[i]
		if mt.Topic == nil || mt.ErrorCode == kerr.TopicAuthorizationFailed.Code || mt.ErrorCode == kerr.UnknownTopicID.Code {
			continue
		}
		mt.AuthorizedOperations = b.authorizedOperations(cc, kmsg.ACLResourceTypeTopic, *mt.Topic)
	}
}

// autoCreate creates the unknown topics a Metadata request names (the
// internal topics aside), with the broker defaults, in one metadata commit.
// It returns the answer of each topic it refused: INVALID_TOPIC_EXCEPTION
// for a name that can never be valid, and THROTTLING_QUOTA_EXCEEDED
// (retriable: a client asking again gets the next ones) past the first
// sluice.auto.create.topics.max.per.request topics. A creation that fails
// (INVALID_REPLICATION_FACTOR while too few brokers can take a replica, a
// partition limit, the controller out of reach) is logged (summarized per
// interval: clients retry without end), not returned: the topic is
// answered UNKNOWN_TOPIC_OR_PARTITION, which clients retry,
// as Kafka's AutoTopicCreationManager checks only the name
// (filterCreatableTopics) and answers every topic it sends to the
// controller so, without waiting for the outcome.
func (b *Broker) autoCreate(topics []kmsg.MetadataRequestTopic) map[string]error {
	var reqs []topicRequest
	errs := map[string]error{}
	seen := map[string]bool{}
	for _, rt := range topics {
		if rt.Topic == nil || isInternalTopic(*rt.Topic) || seen[*rt.Topic] {
			continue
		}
		name := *rt.Topic
		seen[name] = true
		if _, ok := b.meta.Topic(name); ok {
			continue
		}
		if err := meta.ValidateTopicName(name); err != nil {
			errs[name] = kafkaErrorf(kerr.InvalidTopicException, "%v", err)
			continue
		}
		if len(reqs) >= int(b.cfg.AutoCreateTopicsMaxPerRequest) {
			errs[name] = kafkaErrorf(kerr.ThrottlingQuotaExceeded,
				"topic %q not auto-created: one request may create at most %d topics (sluice.auto.create.topics.max.per.request)", name, b.cfg.AutoCreateTopicsMaxPerRequest)
			continue
		}
		reqs = append(reqs, topicRequest{name: name, partitions: -1, rf: -1})
	}
	if len(reqs) == 0 {
		return errs
	}
	failed := map[string]error{}
	if !b.cl.isController() {
		b.autoCreateRemote(reqs, failed)
	} else {
		_, cerrs := b.createTopics(reqs, false)
		for i, err := range cerrs {
			if err != nil && !errIs(err, kerr.TopicAlreadyExists) {
				failed[reqs[i].name] = err
			}
		}
	}
	if n := len(failed); n > 0 {
		var first error
		for _, err := range failed {
			first = err
			break
		}
		b.autoCreateFails.note("failed", n, "asked", len(seen), "example", first.Error())
	}
	return errs
}

// autoCreateRemote has the active controller create topics a Metadata
// request named (a cluster broker that is not the controller): one
// CreateTopics with the broker defaults, then a bounded wait for this
// broker's own metadata to show them. The topics not created go into
// failed with why.
func (b *Broker) autoCreateRemote(reqs []topicRequest, failed map[string]error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(forwardTimeout / time.Millisecond)
	for _, r := range reqs {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = r.name, -1, -1
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(b.cl.ctx, forwardTimeout)
	defer cancel()
	kresp, err := b.cl.ctrl.request(ctx, req)
	if err != nil {
		for _, r := range reqs {
			failed[r.name] = fmt.Errorf("topic %q not auto-created: the controller is not reachable: %w", r.name, err)
		}
		return
	}
	for _, st := range kresp.(*kmsg.CreateTopicsResponse).Topics {
		if code := st.ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
			msg := ""
			if st.ErrorMessage != nil {
				msg = *st.ErrorMessage
			}
			failed[st.Topic] = kafkaErrorf(kerr.ErrorForCode(code).(*kerr.Error), "topic %q not auto-created by the controller: %s", st.Topic, msg)
		}
	}
	b.awaitLocalMetadata(ctx, func() bool {
		for _, r := range reqs {
			if _, no := failed[r.name]; no {
				continue
			}
			if _, ok := b.meta.Topic(r.name); !ok {
				return false
			}
		}
		return true
	})
}

func (b *Broker) topicMetadata(t meta.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	for p := int32(0); p < t.Partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		v := b.partitionView(t, p)
		mp.Leader, mp.LeaderEpoch = v.leader, v.epoch
		mp.Replicas, mp.ISR, mp.OfflineReplicas = v.replicas, v.isr, v.offline
		if v.err != nil {
			mp.ErrorCode = v.err.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
