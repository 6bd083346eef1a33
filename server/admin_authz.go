package server

// Authorization of the admin APIs and the brokers' APIs (Kafka's
// KafkaApis and ControllerApis): checked on the broker that received the
// request, as the client's principal, before the handler runs, so before
// a handler forwards the request to the active controller (cluster_rpc.go).
// The controller trusts a request a broker forwarded (fromBroker,
// authorize.go); Kafka carries the client's principal in an Envelope
// instead. Checks run only with an authorizer.

import (
	"context"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminChecks are the checks by API key.
var adminChecks = map[int16]apiCheck{
	19: checkCreateTopics,
	20: checkDeleteTopics,
	21: checkDeleteRecords,
	32: configsCheck(kmsg.ACLOperationDescribeConfigs, func(r *kmsg.DescribeConfigsRequest) *[]kmsg.DescribeConfigsRequestResource { return &r.Resources },
		func(r kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(resp *kmsg.DescribeConfigsResponse, rt kmsg.ConfigResourceType, name string, code int16) {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = rt, name, code
			resp.Resources = append(resp.Resources, rr)
		}),
	33: configsCheck(kmsg.ACLOperationAlterConfigs, func(r *kmsg.AlterConfigsRequest) *[]kmsg.AlterConfigsRequestResource { return &r.Resources },
		func(r kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(resp *kmsg.AlterConfigsResponse, rt kmsg.ConfigResourceType, name string, code int16) {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = rt, name, code
			resp.Resources = append(resp.Resources, rr)
		}),
	44: configsCheck(kmsg.ACLOperationAlterConfigs, func(r *kmsg.IncrementalAlterConfigsRequest) *[]kmsg.IncrementalAlterConfigsRequestResource {
		return &r.Resources
	},
		func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return r.ResourceType, r.ResourceName
		},
		func(resp *kmsg.IncrementalAlterConfigsResponse, rt kmsg.ConfigResourceType, name string, code int16) {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = rt, name, code
			resp.Resources = append(resp.Resources, rr)
		}),
	35: clusterCheck(kmsg.ACLOperationDescribe),
	37: checkCreatePartitions,
	43: checkElectLeaders,
	45: clusterCheck(kmsg.ACLOperationAlter),
	48: clusterCheck(kmsg.ACLOperationDescribeConfigs),
	49: checkAlterClientQuotas,
	46: clusterCheck(kmsg.ACLOperationDescribe),
	50: clusterCheck(kmsg.ACLOperationDescribe),
	51: checkAlterUserScramCredentials,
	55: clusterCheck(kmsg.ACLOperationDescribe),
	64: clusterCheck(kmsg.ACLOperationAlter),
	// The controller-only APIs: brokers' requests.
	56: clusterCheck(kmsg.ACLOperationClusterAction),
	62: clusterCheck(kmsg.ACLOperationClusterAction),
	63: clusterCheck(kmsg.ACLOperationClusterAction),
	67: clusterCheck(kmsg.ACLOperationClusterAction),
}

// serveAuthorized runs h on req after its admin check, if any (conn.go),
// under the controller mutation quota (serveMutating).
func (b *Broker) serveAuthorized(ctx context.Context, h handler, cc *clientConn, req kmsg.Request) (kmsg.Response, error) {
	check := adminChecks[h.key]
	if check == nil || b.authz == nil || cc == nil || b.fromBroker(cc) {
		return b.serveMutating(ctx, h, cc, req) // quota_mutation.go
	}
	var err error
	resp := check(b, cc, req, func(req kmsg.Request) kmsg.Response {
		var resp kmsg.Response
		resp, err = b.serveMutating(ctx, h, cc, req)
		return resp
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// setErrorCode sets a response's top-level ErrorCode field.
func setErrorCode(resp kmsg.Response, code int16) {
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.CanSet() {
		f.SetInt(int64(code))
	}
}

// clusterCheck is the check of an API that needs op on the cluster, else
// its top-level error is CLUSTER_AUTHORIZATION_FAILED.
func clusterCheck(op kmsg.ACLOperation) apiCheck {
	return func(b *Broker, cc *clientConn, req kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
		if b.authorized(cc, op, kmsg.ACLResourceTypeCluster, clusterResource) {
			return serve(req)
		}
		resp := req.ResponseKind()
		setErrorCode(resp, kerr.ClusterAuthorizationFailed.Code)
		return resp
	}
}

// checkAlterClientQuotas: ALTER_CONFIGS on the cluster, else every entry
// is CLUSTER_AUTHORIZATION_FAILED (Kafka's handleAlterClientQuotas).
func checkAlterClientQuotas(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	if b.authorized(cc, kmsg.ACLOperationAlterConfigs, kmsg.ACLResourceTypeCluster, clusterResource) {
		return serve(req)
	}
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, en := range e.Entity {
			ren := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ren.Type, ren.Name = en.Type, en.Name
			re.Entity = append(re.Entity, ren)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

// errAuthorization is the message Kafka gives a denied topic.
var errAuthorization = kmsg.StringPtr("Authorization failed.")

// checkCreateTopics: CREATE on the cluster or on each topic, else
// TOPIC_AUTHORIZATION_FAILED; a created topic's configs (v5+) need
// DESCRIBE_CONFIGS on it, else they are left out and its config error is
// TOPIC_AUTHORIZATION_FAILED.
func checkCreateTopics(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	creatable := b.authorizer(cc, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic)
	if b.authorized(cc, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, clusterResource) {
		creatable = func(string) bool { return true }
	}
	allowed, denied := split(req.Topics, func(rt kmsg.CreateTopicsRequestTopic) bool { return creatable(rt.Topic) })
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	if len(allowed) > 0 {
		req.Topics = allowed
		resp = serve(req).(*kmsg.CreateTopicsResponse)
		for i := range resp.Topics {
			st := &resp.Topics[i]
			if st.ErrorCode == 0 && req.Version >= 5 && !b.authorized(cc, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, st.Topic) {
				st.Configs, st.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
			}
		}
	}
	for _, rt := range denied {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.TopicAuthorizationFailed.Code, errAuthorization
		st.NumPartitions, st.ReplicationFactor = -1, -1
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// checkDeleteTopics: DESCRIBE on a topic first (without it the topic
// answers TOPIC_AUTHORIZATION_FAILED whether it exists or not), then
// DELETE on an existing one (Kafka's ControllerApis.deleteTopics). An
// unknown topic ID is the handler's (UNKNOWN_TOPIC_ID).
func checkDeleteTopics(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	describable := b.authorizer(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	deletable := b.authorizer(cc, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic)
	ok := func(name *string, id [16]byte) bool {
		var n string
		if name != nil {
			n = *name
		} else if t, known := b.meta.TopicByID(id); known {
			n = t.Name
		} else {
			return true
		}
		_, exists := b.meta.Topic(n)
		return describable(n) && (!exists || deletable(n))
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	deny := func(name *string, id [16]byte) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID, st.ErrorCode, st.ErrorMessage = name, id, kerr.TopicAuthorizationFailed.Code, errAuthorization
		resp.Topics = append(resp.Topics, st)
	}
	var denied int
	if req.Version < 6 {
		allowed, names := split(req.TopicNames, func(n string) bool { return ok(&n, [16]byte{}) })
		req.TopicNames, denied = allowed, len(names)
		defer func() {
			for _, n := range names {
				deny(kmsg.StringPtr(n), [16]byte{})
			}
		}()
	} else {
		allowed, topics := split(req.Topics, func(rt kmsg.DeleteTopicsRequestTopic) bool { return ok(rt.Topic, rt.TopicID) })
		req.Topics, denied = allowed, len(topics)
		defer func() {
			for _, rt := range topics {
				deny(rt.Topic, rt.TopicID)
			}
		}()
	}
	if denied == 0 || len(req.TopicNames)+len(req.Topics) > 0 {
		resp = serve(req).(*kmsg.DeleteTopicsResponse)
	}
	return resp
}

// checkDeleteRecords: DELETE on each topic, else its partitions answer
// TOPIC_AUTHORIZATION_FAILED.
func checkDeleteRecords(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	deletable := b.authorizer(cc, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic)
	allowed, denied := split(req.Topics, func(rt kmsg.DeleteRecordsRequestTopic) bool { return deletable(rt.Topic) })
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	if len(allowed) > 0 {
		req.Topics = allowed
		resp = serve(req).(*kmsg.DeleteRecordsResponse)
	}
	for _, rt := range denied {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark, sp.ErrorCode = rp.Partition, -1, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// checkCreatePartitions: ALTER on each topic, else
// TOPIC_AUTHORIZATION_FAILED (Kafka's ControllerApis.handleCreatePartitions:
// ALTER on the cluster does not stand for it).
func checkCreatePartitions(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	alterable := b.authorizer(cc, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic)
	allowed, denied := split(req.Topics, func(rt kmsg.CreatePartitionsRequestTopic) bool { return alterable(rt.Topic) })
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	if len(allowed) > 0 {
		req.Topics = allowed
		resp = serve(req).(*kmsg.CreatePartitionsResponse)
	}
	for _, rt := range denied {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.TopicAuthorizationFailed.Code, errAuthorization
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// configACL is the ACL resource of a config resource and the error
// of a denied one: a topic's own, a group's own, the cluster for brokers,
// broker loggers and client metrics (Kafka's ConfigAdminManager and
// AuthHelper).
func configACL(rt kmsg.ConfigResourceType, name string) (kmsg.ACLResourceType, string, int16) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return kmsg.ACLResourceTypeTopic, name, kerr.TopicAuthorizationFailed.Code
	case kmsg.ConfigResourceTypeGroupConfig:
		return kmsg.ACLResourceTypeGroup, name, kerr.GroupAuthorizationFailed.Code
	}
	return kmsg.ACLResourceTypeCluster, clusterResource, kerr.ClusterAuthorizationFailed.Code
}

// configsCheck is the check of DescribeConfigs (op DESCRIBE_CONFIGS),
// AlterConfigs and IncrementalAlterConfigs (ALTER_CONFIGS): op on each
// resource's ACL resource (configACL), else the resource answers
// the matching authorization error.
func configsCheck[Req kmsg.Request, Resp kmsg.Response, Res any](op kmsg.ACLOperation, resources func(Req) *[]Res,
	of func(Res) (kmsg.ConfigResourceType, string), deny func(Resp, kmsg.ConfigResourceType, string, int16)) apiCheck {
	return func(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
		req := kreq.(Req)
		allowed, denied := split(*resources(req), func(r Res) bool {
			art, name, _ := configACL(of(r))
			return b.authorized(cc, op, art, name)
		})
		resp := req.ResponseKind().(Resp)
		if len(allowed) > 0 {
			*resources(req) = allowed
			resp = serve(req).(Resp)
		}
		for _, r := range denied {
			rt, name := of(r)
			_, _, code := configACL(rt, name)
			deny(resp, rt, name, code)
		}
		return resp
	}
}

// checkElectLeaders: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// at the top (v1+) and for every partition named.
func checkElectLeaders(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.ElectLeadersRequest)
	if b.authorized(cc, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, clusterResource) {
		return serve(req)
	}
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// checkAlterUserScramCredentials: ALTER on the cluster, else every user
// named answers CLUSTER_AUTHORIZATION_FAILED.
func checkAlterUserScramCredentials(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if b.authorized(cc, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, clusterResource) {
		return serve(req)
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
			resp.Results = append(resp.Results, r)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp
}
