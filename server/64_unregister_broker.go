package server

// UnregisterBroker, version 0 (KIP-500/KIP-631; Kafka's kafka-cluster.sh
// unregister), served by the active controller (forwarded from any
// broker). Kafka removes the registration at once, leaving any replica on
// the broker offline; Sluice decommissions instead when the broker still
// holds replicas: it is marked decommissioning (no new replicas, none
// moved to it), the controller reassigns each of its replicas to the
// least loaded usable broker (controller.Controller's drain, a few
// partitions at a time), and removes the registration once no partition names it. The
// answer comes as soon as the decommission started (error NONE, with a
// message saying so); the broker leaves DescribeCluster and Metadata when
// it is done (it is fenced then, and unregistered once stopped). A stopped
// broker (its session expired) holding no replica is unregistered at
// once, as in Kafka; a running one is fenced and unregistered once it
// stops, so it does not register again as a new broker.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 64, minVersion: 0, maxVersion: 0, serve: serveUnregisterBroker})
}

func serveUnregisterBroker(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	if fresp, ok, err := b.forward(ctx, cc, req, nil); ok {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = kafkaCode(err), errMessage(err)
			return resp, nil
		}
		return fresp, nil
	}
	msg, err := b.cl.act.Unregister(req.BrokerID)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = controllerCode(err), errMessage(err)
		return resp, nil
	}
	resp.ErrorMessage = &msg
	return resp, nil
}
