package server

// InitProducerID, versions 0-4. v2 is flexible; v3 lets a producer bump
// its epoch by sending its current id and epoch (KIP-360). Transactional
// ids are not supported yet.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 22, minVersion: 0, maxVersion: 4, serve: serveInitProducerID})
}

func serveInitProducerID(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < 32767 {
		// KIP-360: bump the epoch of an idempotent producer.
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp, nil
	}
	id, err := b.meta.AllocateProducerIDs(1)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
