package server

// Authorization of the group APIs (Kafka's KafkaApis handlers of JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
// DescribeGroups, ListGroups, DeleteGroups, OffsetDelete,
// ConsumerGroupHeartbeat and ConsumerGroupDescribe). Each check runs
// before the coordinator (coordinated, groups.go) and only with an
// authorizer (but see fillsOperations): it answers a denied request itself, or serves the
// authorized part of a request and adds the denied part's errors to the
// answer.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiCheck authorizes a request served by a coordinator: it returns the
// answer, calling serve for what the coordinator should answer.
type apiCheck func(b *Broker, cc *clientConn, req kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response

// fillsOperations are the APIs whose check also runs without an
// authorizer: it fills the groups' authorized operations, then every
// supported one (Kafka's AuthHelper.authorizedOperations).
var fillsOperations = map[int16]bool{15: true, 69: true}

// groupChecks are the checks by API key.
var groupChecks = map[int16]apiCheck{
	8:  checkOffsetCommit,
	9:  checkOffsetFetch,
	11: groupReadCheck(func(r *kmsg.JoinGroupRequest) string { return r.Group }, func(r *kmsg.JoinGroupResponse, c int16) { r.ErrorCode = c }),
	12: groupReadCheck(func(r *kmsg.HeartbeatRequest) string { return r.Group }, func(r *kmsg.HeartbeatResponse, c int16) { r.ErrorCode = c }),
	13: groupReadCheck(func(r *kmsg.LeaveGroupRequest) string { return r.Group }, func(r *kmsg.LeaveGroupResponse, c int16) { r.ErrorCode = c }),
	14: groupReadCheck(func(r *kmsg.SyncGroupRequest) string { return r.Group }, func(r *kmsg.SyncGroupResponse, c int16) { r.ErrorCode = c }),
	15: checkDescribeGroups,
	16: checkListGroups,
	42: checkDeleteGroups,
	47: checkOffsetDelete,
	68: groupReadCheck(func(r *kmsg.ConsumerGroupHeartbeatRequest) string { return r.Group }, func(r *kmsg.ConsumerGroupHeartbeatResponse, c int16) { r.ErrorCode = c }),
	69: checkConsumerGroupDescribe,
}

var groupAuthFailed = kerr.GroupAuthorizationFailed.Code

// groupReadCheck is the check of an API of one group's members: READ on
// the group, else GROUP_AUTHORIZATION_FAILED.
func groupReadCheck[Req kmsg.Request, Resp kmsg.Response](group func(Req) string, fail func(Resp, int16)) apiCheck {
	return func(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
		req := kreq.(Req)
		if b.authorized(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, group(req)) {
			return serve(req)
		}
		resp := req.ResponseKind().(Resp)
		fail(resp, groupAuthFailed)
		return resp
	}
}

// split splits items into those ok allows and the others, in order.
func split[T any](items []T, ok func(T) bool) (allowed, denied []T) {
	for _, it := range items {
		if ok(it) {
			allowed = append(allowed, it)
		} else {
			denied = append(denied, it)
		}
	}
	return allowed, denied
}

// requestTopicName is the name of a topic a request names by name or, at
// byID, by ID; false for an unknown ID (the coordinator answers
// UNKNOWN_TOPIC_ID).
func (b *Broker) requestTopicName(byID bool, name string, id [16]byte) (string, bool) {
	if !byID {
		return name, true
	}
	t, ok := b.meta.TopicByID(id)
	return t.Name, ok
}

// checkOffsetCommit: READ on the group (else every partition answers
// GROUP_AUTHORIZATION_FAILED) and on each topic (else its partitions
// answer TOPIC_AUTHORIZATION_FAILED, whether it exists or not).
func checkOffsetCommit(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.OffsetCommitRequest)
	fail := func(resp *kmsg.OffsetCommitResponse, rt kmsg.OffsetCommitRequestTopic, code int16) {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !b.authorized(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			fail(resp, rt, groupAuthFailed)
		}
		return resp
	}
	readable := b.authorizer(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	kept, denied := split(req.Topics, func(rt kmsg.OffsetCommitRequestTopic) bool {
		name, ok := b.requestTopicName(req.Version >= 10, rt.Topic, rt.TopicID)
		return !ok || readable(name)
	})
	var resp *kmsg.OffsetCommitResponse
	if len(kept) == 0 && len(denied) > 0 {
		resp = req.ResponseKind().(*kmsg.OffsetCommitResponse) // Kafka does not ask the coordinator
	} else {
		req.Topics = kept
		resp = serve(req).(*kmsg.OffsetCommitResponse)
	}
	for _, rt := range denied {
		fail(resp, rt, kerr.TopicAuthorizationFailed.Code)
	}
	return resp
}

// checkOffsetFetch: DESCRIBE on each group (else the group answers
// GROUP_AUTHORIZATION_FAILED) and on each topic: a named topic without it
// answers TOPIC_AUTHORIZATION_FAILED, and the offsets of every topic
// (topics null) leave it out. The coordinator's answer is filtered
// whatever the request named: whether it reads a list as "all" is the
// coordinator's business, and an answer naming a topic the principal may
// not describe must never leave the broker.
func checkOffsetFetch(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.OffsetFetchRequest)
	describable := b.authorizer(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	failed := func(topic string, id [16]byte, parts []int32, code int16) kmsg.OffsetFetchResponseGroupTopic {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = topic, id
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if req.Version < 8 {
		// One group, its topics at the top level: the same rules on
		// the group form.
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = req.Group
		if req.Topics != nil {
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for _, t := range req.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			rg.Topics = append(rg.Topics, gt)
		}
		out, served := b.offsetFetchGroupAuthz(cc, req.Version, &rg, describable, failed)
		if served {
			req.Topics = nil
			if rg.Topics != nil {
				req.Topics = []kmsg.OffsetFetchRequestTopic{}
			}
			for _, gt := range rg.Topics {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic, t.Partitions = gt.Topic, gt.Partitions
				req.Topics = append(req.Topics, t)
			}
			resp := serve(req).(*kmsg.OffsetFetchResponse)
			b.mergeOffsetFetchV7(resp, out, describable)
			return resp
		}
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		b.mergeOffsetFetchV7(resp, out, describable)
		return resp
	}
	outs := make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
	var kept []kmsg.OffsetFetchRequestGroup
	var keptAt []int
	for i := range req.Groups {
		out, served := b.offsetFetchGroupAuthz(cc, req.Version, &req.Groups[i], describable, failed)
		outs[i] = out
		if served {
			kept, keptAt = append(kept, req.Groups[i]), append(keptAt, i)
		}
	}
	if len(kept) > 0 {
		req.Groups = kept
		sresp := serve(req).(*kmsg.OffsetFetchResponse)
		for j, sg := range sresp.Groups {
			if j >= len(keptAt) {
				break
			}
			denied := outs[keptAt[j]].Topics
			sg.Topics = filterOffsetTopics(b, req.Version, sg.Topics, describable)
			sg.Topics = append(sg.Topics, denied...)
			outs[keptAt[j]] = sg
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.Groups = outs
	return resp
}

// offsetFetchGroupAuthz checks one group of an OffsetFetch: it returns
// the group's answer so far (the group's error, or the denied topics'
// partitions) and whether the coordinator should serve the group, whose
// Topics it leaves holding the authorized ones.
func (b *Broker) offsetFetchGroupAuthz(cc *clientConn, version int16, rg *kmsg.OffsetFetchRequestGroup, describable func(string) bool,
	failed func(string, [16]byte, []int32, int16) kmsg.OffsetFetchResponseGroupTopic) (kmsg.OffsetFetchResponseGroup, bool) {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = rg.Group
	if !b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, rg.Group) {
		out.ErrorCode = groupAuthFailed
		for _, t := range rg.Topics { // v0-1 read the error there
			out.Topics = append(out.Topics, failed(t.Topic, t.TopicID, t.Partitions, groupAuthFailed))
		}
		return out, false
	}
	if rg.Topics == nil {
		return out, true
	}
	kept := []kmsg.OffsetFetchRequestGroupTopic{}
	for _, t := range rg.Topics {
		if name, ok := b.requestTopicName(version >= 10, t.Topic, t.TopicID); ok && !describable(name) {
			out.Topics = append(out.Topics, failed(t.Topic, t.TopicID, t.Partitions, kerr.TopicAuthorizationFailed.Code))
		} else {
			kept = append(kept, t)
		}
	}
	rg.Topics = kept
	return out, true
}

// filterOffsetTopics leaves out the topics the principal may not
// describe.
func filterOffsetTopics(b *Broker, version int16, topics []kmsg.OffsetFetchResponseGroupTopic, describable func(string) bool) []kmsg.OffsetFetchResponseGroupTopic {
	kept := topics[:0]
	for _, t := range topics {
		if name, ok := b.requestTopicName(version >= 10, t.Topic, t.TopicID); !ok || describable(name) {
			kept = append(kept, t)
		}
	}
	return kept
}

// mergeOffsetFetchV7 puts a group's answer into the top-level form of
// OffsetFetch v0-v7: the group's error, the served topics filtered to the
// describable ones, and the denied topics.
func (b *Broker) mergeOffsetFetchV7(resp *kmsg.OffsetFetchResponse, out kmsg.OffsetFetchResponseGroup, describable func(string) bool) {
	if out.ErrorCode != 0 {
		resp.ErrorCode = out.ErrorCode
	}
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		if describable(t.Topic) {
			kept = append(kept, t)
		}
	}
	resp.Topics = kept
	for _, gt := range out.Topics {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.ErrorCode
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
}

// groupsCheck is the check of an API naming several groups: the ones the
// principal may op are served, the others answer
// GROUP_AUTHORIZATION_FAILED (deny adds one to the answer). ops, when
// set, fills the served groups' authorized operations (KIP-430) with the
// function it is given.
func groupsCheck[Req kmsg.Request, Resp kmsg.Response](op kmsg.ACLOperation, groups func(Req) *[]string, deny func(Resp, string),
	ops func(Req, Resp, func(group string) int32)) apiCheck {
	return func(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
		req := kreq.(Req)
		allowed, denied := split(*groups(req), func(g string) bool { return b.authorized(cc, op, kmsg.ACLResourceTypeGroup, g) })
		resp := req.ResponseKind().(Resp)
		if len(allowed) > 0 {
			*groups(req) = allowed
			resp = serve(req).(Resp)
			if ops != nil {
				ops(req, resp, func(g string) int32 { return b.authorizedOperations(cc, kmsg.ACLResourceTypeGroup, g) })
			}
		}
		for _, g := range denied {
			deny(resp, g)
		}
		return resp
	}
}

// checkDescribeGroups: DESCRIBE on each group; v3+ fills the authorized
// operations when asked.
var checkDescribeGroups = groupsCheck(kmsg.ACLOperationDescribe,
	func(r *kmsg.DescribeGroupsRequest) *[]string { return &r.Groups },
	func(r *kmsg.DescribeGroupsResponse, g string) {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.ErrorCode = g, groupAuthFailed
		r.Groups = append(r.Groups, dg)
	},
	func(req *kmsg.DescribeGroupsRequest, resp *kmsg.DescribeGroupsResponse, ops func(string) int32) {
		for i := range resp.Groups {
			if g := &resp.Groups[i]; req.Version >= 3 && req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = ops(g.Group)
			}
		}
	})

// checkConsumerGroupDescribe: as DescribeGroups, for KIP-848 groups.
var checkConsumerGroupDescribe = groupsCheck(kmsg.ACLOperationDescribe,
	func(r *kmsg.ConsumerGroupDescribeRequest) *[]string { return &r.Groups },
	func(r *kmsg.ConsumerGroupDescribeResponse, g string) {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group, dg.ErrorCode = g, groupAuthFailed
		r.Groups = append(r.Groups, dg)
	},
	func(req *kmsg.ConsumerGroupDescribeRequest, resp *kmsg.ConsumerGroupDescribeResponse, ops func(string) int32) {
		for i := range resp.Groups {
			if g := &resp.Groups[i]; req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = ops(g.Group)
			}
		}
	})

// checkDeleteGroups: DELETE on each group.
var checkDeleteGroups = groupsCheck(kmsg.ACLOperationDelete,
	func(r *kmsg.DeleteGroupsRequest) *[]string { return &r.Groups },
	func(r *kmsg.DeleteGroupsResponse, g string) {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group, dg.ErrorCode = g, groupAuthFailed
		r.Groups = append(r.Groups, dg)
	}, nil)

// checkListGroups: DESCRIBE on the cluster lists every group; without
// it, only the groups the principal may describe.
func checkListGroups(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	resp := serve(kreq).(*kmsg.ListGroupsResponse)
	if b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, clusterResource) {
		return resp
	}
	resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
		return !b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group)
	})
	return resp
}

// checkOffsetDelete: DELETE on the group (else
// GROUP_AUTHORIZATION_FAILED for the request) and READ on each topic
// (else its partitions answer TOPIC_AUTHORIZATION_FAILED).
func checkOffsetDelete(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !b.authorized(cc, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = groupAuthFailed
		return resp
	}
	readable := b.authorizer(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	kept, denied := split(req.Topics, func(rt kmsg.OffsetDeleteRequestTopic) bool { return readable(rt.Topic) })
	req.Topics = kept
	resp := serve(req).(*kmsg.OffsetDeleteResponse)
	for _, rt := range denied {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
