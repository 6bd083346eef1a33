package server

// Authorization of the transaction APIs (Kafka's KafkaApis handlers of
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
// DescribeTransactions and ListTransactions; InitProducerId's check is in
// 22_init_producer_id.go, WriteTxnMarkers' in txn.go). Checks run only
// with an authorizer.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnChecks are the checks of the APIs txnAPI registers, by key.
var txnChecks = map[int16]apiCheck{
	24: checkAddPartitionsToTxn,
	25: checkAddOffsetsToTxn,
	26: checkEndTxn,
	65: checkDescribeTransactions,
	66: checkListTransactions,
}

var txnAuthFailed = kerr.TransactionalIDAuthorizationFailed.Code

// txnWritable reports whether the principal may WRITE the transactional
// id.
func (b *Broker) txnWritable(cc *clientConn, id string) bool {
	return b.authorized(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id)
}

// clusterAction reports whether the principal may act as a broker
// (CLUSTER_ACTION on the cluster).
func (b *Broker) clusterAction(cc *clientConn) bool {
	return b.authorized(cc, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, clusterResource)
}

// checkAddPartitionsToTxn: v4+ (brokers' verification, and batches of
// transactions) needs CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED.
// v0-v3 need WRITE on the transactional id (else every partition answers
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic, internal
// topics never: if one is denied nothing is added, denied partitions
// answer TOPIC_AUTHORIZATION_FAILED, unknown ones
// UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.
func checkAddPartitionsToTxn(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if !b.clusterAction(cc) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp
		}
		return serve(req)
	}
	answer := func(code func(topic string, partition int32) int16) kmsg.Response {
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code(rt.Topic, p)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	if !b.txnWritable(cc, req.TransactionalID) {
		return answer(func(string, int32) int16 { return txnAuthFailed })
	}
	writable := b.authorizer(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
	denied := false
	for _, rt := range req.Topics {
		if isInternalTopic(rt.Topic) || !writable(rt.Topic) {
			denied = true
		}
	}
	if !denied {
		return serve(req)
	}
	return answer(func(topic string, p int32) int16 {
		switch t, ok := b.meta.Topic(topic); {
		case isInternalTopic(topic) || !writable(topic):
			return kerr.TopicAuthorizationFailed.Code
		case !ok || p < 0 || p >= t.Partitions:
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.OperationNotAttempted.Code
	})
}

// checkAddOffsetsToTxn: WRITE on the transactional id, then READ on the
// group.
func checkAddOffsetsToTxn(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.txnWritable(cc, req.TransactionalID):
		resp.ErrorCode = txnAuthFailed
	case !b.authorized(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		resp.ErrorCode = groupAuthFailed
	default:
		return serve(req)
	}
	return resp
}

// checkEndTxn: WRITE on the transactional id.
func checkEndTxn(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.EndTxnRequest)
	if b.txnWritable(cc, req.TransactionalID) {
		return serve(req)
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = txnAuthFailed, -1, -1
	return resp
}

// checkDescribeTransactions: DESCRIBE on each transactional id, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the partitions of topics the
// principal may not describe are left out.
func checkDescribeTransactions(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	var allowed []string
	for _, id := range req.TransactionalIDs {
		if b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id) {
			allowed = append(allowed, id)
		}
	}
	served := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
	if len(allowed) > 0 {
		sreq := *req
		sreq.TransactionalIDs = allowed
		for _, st := range serve(&sreq).(*kmsg.DescribeTransactionsResponse).TransactionStates {
			served[st.TransactionalID] = st
		}
	}
	describable := b.authorizer(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st, ok := served[id]
		if !ok {
			st = kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, txnAuthFailed
		}
		kept := st.Topics[:0]
		for _, t := range st.Topics {
			if describable(t.Topic) {
				kept = append(kept, t)
			}
		}
		st.Topics = kept
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

// checkListTransactions lists only the transactional ids the principal
// may describe.
func checkListTransactions(b *Broker, cc *clientConn, kreq kmsg.Request, serve func(kmsg.Request) kmsg.Response) kmsg.Response {
	resp := serve(kreq).(*kmsg.ListTransactionsResponse)
	resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(st kmsg.ListTransactionsResponseTransactionState) bool {
		return !b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, st.TransactionalID)
	})
	return resp
}

// checkTxnOffsetCommit: WRITE on the transactional id (else every
// partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
// group (GROUP_AUTHORIZATION_FAILED) and on each topic (its partitions
// answer TOPIC_AUTHORIZATION_FAILED; the coordinator is not asked when
// no topic is left).
func checkTxnOffsetCommit(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	fail := func(resp *kmsg.TxnOffsetCommitResponse, rt kmsg.TxnOffsetCommitRequestTopic, code int16) {
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	code := int16(0)
	switch {
	case b.authz == nil || cc == nil:
		return serveTxnOffsetCommit(ctx, b, cc, req)
	case !b.txnWritable(cc, req.TransactionalID):
		code = txnAuthFailed
	case !b.authorized(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		code = groupAuthFailed
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			fail(resp, rt, code)
		}
		return resp, nil
	}
	readable := b.authorizer(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	kept, denied := split(req.Topics, func(rt kmsg.TxnOffsetCommitRequestTopic) bool { return readable(rt.Topic) })
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	if len(kept) > 0 || len(denied) == 0 {
		req.Topics = kept
		kresp, err := serveTxnOffsetCommit(ctx, b, cc, req)
		if err != nil {
			return nil, err
		}
		resp = kresp.(*kmsg.TxnOffsetCommitResponse)
	}
	for _, rt := range denied {
		fail(resp, rt, kerr.TopicAuthorizationFailed.Code)
	}
	return resp, nil
}
