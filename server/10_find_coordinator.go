package server

// FindCoordinator, versions 0-6. v1 adds the key type (0 group, 1
// transaction) and an error message, v3 is flexible, v4 (KIP-699) batches
// keys in CoordinatorKeys with one answer each, v6 (KIP-932) adds share
// keys (type 2), which Sluice refuses with INVALID_REQUEST. A single node
// coordinates every group: the answer is this broker, once
// __consumer_offsets exists (the first group lookup creates it; a failure
// to do so is COORDINATOR_NOT_AVAILABLE, which clients retry).
// A transaction key (type 1) is answered with the leader of its
// __transaction_state partition, created on the first lookup the same way.

import (
	"context"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 10, minVersion: 0, maxVersion: 6, serve: serveFindCoordinator})
}

// Coordinator key types (FindCoordinator v1+).
const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
)

func serveFindCoordinator(_ context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (nodeID int32, host string, port int32, err error) {
		// Kafka's KafkaApis.handleFindCoordinatorRequest: DESCRIBE on
		// the group or the transactional id, checked first.
		switch req.CoordinatorType {
		case coordinatorKeyGroup:
			if !b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key) {
				return -1, "", -1, kafkaErrorf(kerr.GroupAuthorizationFailed, "not authorized to describe group %q", key)
			}
		case coordinatorKeyTransaction:
			if !b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key) {
				return -1, "", -1, kafkaErrorf(kerr.TransactionalIDAuthorizationFailed, "not authorized to describe transactional id %q", key)
			}
		}
		switch req.CoordinatorType {
		case coordinatorKeyGroup:
			if err := b.ensureOffsetsTopic(); err != nil {
				return -1, "", -1, err
			}
			return b.groupCoordinator(key, connListener(cc))
		case coordinatorKeyTransaction:
			if err := b.ensureInternalTopic(b.txnTopicSpec()); err != nil {
				return -1, "", -1, err
			}
			return b.coordinatorOf(txnTopic, key, connListener(cc))
		default:
			return -1, "", -1, kafkaErrorf(kerr.InvalidRequest, "coordinator key type %d is not supported", req.CoordinatorType)
		}
	}
	if req.Version <= 3 {
		var err error
		resp.NodeID, resp.Host, resp.Port, err = find(req.CoordinatorKey)
		resp.ErrorCode = kafkaCode(err)
		if req.Version >= 1 {
			resp.ErrorMessage = errMessage(err)
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var err error
		c.NodeID, c.Host, c.Port, err = find(key)
		c.ErrorCode = kafkaCode(err)
		c.ErrorMessage = errMessage(err)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

// groupCoordinator is a group's coordinator: the leader of its
// __consumer_offsets partition (Kafka's rule), at its endpoint for the
// listener; COORDINATOR_NOT_AVAILABLE (retriable) while that partition has
// no leader.
func (b *Broker) groupCoordinator(group, listener string) (nodeID int32, host string, port int32, err error) {
	return b.coordinatorOf(offsetsTopic, group, listener)
}

// coordinatorOf is the leader of key's partition of an internal topic
// (abs(Java hashCode(key)) mod its partitions: Kafka's partitionFor, the
// same for groups and transactional ids).
func (b *Broker) coordinatorOf(topic, key, listener string) (nodeID int32, host string, port int32, err error) {
	t, ok := b.meta.Topic(topic)
	if !ok {
		return -1, "", -1, kafkaErrorf(kerr.CoordinatorNotAvailable, "%s does not exist yet", topic)
	}
	p := coordinator.Partition(key, t.Partitions)
	v := b.partitionView(t, p)
	if v.leader < 0 {
		return -1, "", -1, kafkaErrorf(kerr.CoordinatorNotAvailable, "partition %d of %s has no leader now", p, topic)
	}
	host, port, ok = b.brokerEndpoint(v.leader, listener)
	if !ok {
		return -1, "", -1, kafkaErrorf(kerr.CoordinatorNotAvailable, "the leader of partition %d of %s, broker %d, is not available", p, topic, v.leader)
	}
	return v.leader, host, port, nil
}
