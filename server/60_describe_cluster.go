package server

// DescribeCluster, versions 0-2 (KIP-700): the cluster id, the controller
// and the brokers. v2 (KIP-1073) lists fenced brokers too, marked
// IsFenced, when IncludeFencedBrokers asks. v1 adds the endpoint type: Sluice has broker endpoints
// only, so asking for controllers (2) is UNSUPPORTED_ENDPOINT_TYPE, as it
// is on a Kafka broker's listener. A single node is its own controller.
// Sluice has no ACLs, so when asked, the authorized cluster operations are
// every operation Kafka defines on the cluster resource.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 60, minVersion: 0, maxVersion: 2, serve: serveDescribeCluster})
}

// endpointTypeBrokers is DescribeCluster's EndpointType for brokers (v1+;
// 2 is controllers).
const endpointTypeBrokers = 1

func serveDescribeCluster(_ context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		if req.EndpointType != endpointTypeBrokers {
			err := kafkaErrorf(kerr.UnsupportedEndpointType, "endpoint type %d asked of a broker endpoint (only %d, brokers, is served)", req.EndpointType, endpointTypeBrokers)
			resp.ErrorCode = kafkaCode(err)
			resp.ErrorMessage = errMessage(err)
			return resp, nil
		}
	}
	resp.ClusterID = clusterIDFor(&b.cfg)
	resp.ControllerID = b.controllerForClients()
	for _, cb := range b.liveBrokers(connListener(cc)) {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port, br.Rack = cb.id, cb.host, cb.port, cb.rack
		resp.Brokers = append(resp.Brokers, br)
	}
	if req.Version >= 2 && req.IncludeFencedBrokers {
		for _, cb := range b.fencedBrokers(connListener(cc)) {
			br := kmsg.NewDescribeClusterResponseBroker()
			br.NodeID, br.Host, br.Port, br.Rack = cb.id, cb.host, cb.port, cb.rack
			br.IsFenced = true
			resp.Brokers = append(resp.Brokers, br)
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		// The principal's operations on the cluster (every supported
		// one without an authorizer), none without DESCRIBE on it
		// (Kafka's AuthHelper.computeDescribeClusterResponse).
		resp.ClusterAuthorizedOperations = 0
		if b.authorized(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, clusterResource) {
			resp.ClusterAuthorizedOperations = b.authorizedOperations(cc, kmsg.ACLResourceTypeCluster, clusterResource)
		}
	}
	return resp, nil
}
