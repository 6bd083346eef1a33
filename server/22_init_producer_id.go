package server

// InitProducerID, versions 0-4. v2 is flexible; v3 adds the producer's
// current id and epoch (KIP-360), which must be both set or both -1
// (INVALID_REQUEST otherwise, as KafkaApis.handleInitProducerIdRequest
// answers). Without a transactional id Kafka always hands out a new
// producer id with epoch 0, whatever id and epoch were sent; so does
// Sluice. With a transactional id the transaction coordinator answers
// (txn.go).

import (
	"context"
	"sync"

	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 22, minVersion: 0, maxVersion: 4, serve: serveInitProducerID})
}

func serveInitProducerID(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	// Kafka's KafkaApis.handleInitProducerIdRequest: WRITE on the
	// transactional id; without one, IDEMPOTENT_WRITE on the cluster or
	// WRITE on some topic.
	switch {
	case req.TransactionalID != nil:
		if !b.authorized(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
	case !b.authorized(cc, kmsg.ACLOperationIdempotentWrite, kmsg.ACLResourceTypeCluster, clusterResource) &&
		!b.authorizedAny(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID != nil {
		return b.txn.InitProducerID(ctx, req), nil // txn.go
	}
	if (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	id, err := b.producerIDs.next(b.allocateProducerIDs)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// producerIDBlockSize is how many producer ids one metadata record
// reserves (Kafka's ProducerIdManager asks its controller for blocks of
// 1000, one ProducerIdsRecord each).
const producerIDBlockSize = 1000

// producerIDs hands out producer ids from a block reserved in the
// metadata, reserving the next block when it runs out. A restart forgets
// the rest of the block: ids are skipped, never reused.
type producerIDs struct {
	mu     sync.Mutex
	nextID int64 // next id to hand out
	end    int64 // end of the current block (exclusive)
}

// next returns a new producer id; errors are the metadata store's.
func (p *producerIDs) next(allocate func() (int64, error)) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nextID >= p.end {
		first, err := allocate()
		if err != nil {
			return 0, err
		}
		p.nextID, p.end = first, first+producerIDBlockSize
	}
	id := p.nextID
	p.nextID++
	return id, nil
}

// allocateProducerIDs reserves a block of producerIDBlockSize ids: in the
// metadata on a single node, from the active controller in a cluster
// (AllocateProducerIds, as KRaft brokers), so two brokers never hand out
// the same id.
func (b *Broker) allocateProducerIDs() (int64, error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = b.cfg.NodeID, b.cl.epoch.Load()
	ctx, cancel := context.WithTimeout(b.cl.ctx, 10*time.Second)
	defer cancel()
	kresp, err := b.cl.toController(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.AllocateProducerIDsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	if resp.ProducerIDLen != producerIDBlockSize {
		return 0, fmt.Errorf("server: the controller allocated %d producer ids, want %d", resp.ProducerIDLen, producerIDBlockSize)
	}
	return resp.ProducerIDStart, nil
}
