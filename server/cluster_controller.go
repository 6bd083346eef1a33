package server

import (
	"context"
	"errors"
	"time"

	"github.com/sluicemq/sluice/controller"
	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
)

// The active controller's requests (Kafka's QuorumController and its
// BrokerHeartbeatManager): BrokerRegistration, BrokerHeartbeat,
// AlterPartition and AllocateProducerIDs, decoded here and decided by the
// controller module (controller.Controller: registration, sessions and
// fencing, leader and ISR reports, producer-id blocks, metadata learners,
// reassignment completion, decommission, leader rebalance), which reaches
// this broker only through controllerHost.
//
// A partition's failover does not wait for fencing: raft elects a new
// leader in about a second (its replicas' liveness); fencing only takes a
// broker out of Metadata and out of placement.

func init() {
	register(handler{key: 62, minVersion: 0, maxVersion: 3, serve: serveBrokerRegistration, controllerOnly: true})
	register(handler{key: 63, minVersion: 0, maxVersion: 1, serve: serveBrokerHeartbeat, controllerOnly: true})
	register(handler{key: 56, minVersion: 2, maxVersion: 2, serve: serveAlterPartition, controllerOnly: true})
	register(handler{key: 67, minVersion: 0, maxVersion: 0, serve: serveAllocateProducerIDs, controllerOnly: true})
}

// controllerDuties is what the server asks of the active controller's
// duties (controller.Controller; the server only decodes and answers the
// Kafka requests).
type controllerDuties interface {
	Run(ctx context.Context)
	Kick()
	Register(r meta.BrokerRegistered) (epoch int64, err error)
	Heartbeat(h controller.Heartbeat) (controller.HeartbeatReply, error)
	AlterPartition(broker int32, brokerEpoch int64, changes []meta.PartitionChanged, epochs []int32) ([]error, error)
	AllocateProducerIDs(n int64) (first int64, err error)
	Unregister(id int32) (msg string, err error)
	LastBeats() map[int32]time.Time
}

// newActiveController is the controller's duties over this broker's
// metadata store and raft host.
func newActiveController(c *cluster) controllerDuties {
	cfg := &c.b.cfg
	return controller.New(controller.Options{
		Store: c.b.meta,
		Host:  controllerHost{c},
		Config: controller.Config{
			SessionTimeout:               time.Duration(cfg.BrokerSessionTimeoutMs) * time.Millisecond,
			AutoLeaderRebalance:          cfg.AutoLeaderRebalanceEnable,
			ImbalanceCheckInterval:       time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second,
			ImbalancePerBrokerPercentage: cfg.LeaderImbalancePerBrokerPercentage,
		},
		Logger: c.b.logger,
	})
}

// controllerHost is the broker's side of the controller (controller.Host).
type controllerHost struct{ c *cluster }

func (h controllerHost) Term() (int32, bool) {
	if h.c.metaPart == nil {
		return 0, false
	}
	_, term, _ := h.c.metaPart.Leader()
	return term, h.c.isController()
}

func (h controllerHost) IsVoter(id int32) bool {
	_, ok := h.c.voters[id]
	return ok
}

func (h controllerHost) AddLearner(id int32) error {
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: uint64(id)}}}
	return h.c.host.ProposeConfChange(metaGroup, cc)
}

func (h controllerHost) PeersDown() []int32 { return raftIDs(h.c.host.PeersDown()) }

func (h controllerHost) Partition(t meta.Topic, p int32) (int32, []int32) {
	v := h.c.b.partitionView(t, p)
	return v.leader, v.isr
}

func (h controllerHost) ElectPreferred(ctx context.Context, parts []controller.Election) int {
	targets := make([]electTarget, len(parts))
	for i, e := range parts {
		targets[i] = electTarget{topic: e.Topic, partition: e.Partition, leader: e.Leader, preferred: e.Preferred}
	}
	h.c.b.electAtLeaders(ctx, targets, electWait)
	elected := 0
	for _, et := range targets {
		if et.err == nil {
			elected++
		}
	}
	return elected
}

// controllerCode maps a meta error of a controller change to a Kafka code.
func controllerCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, meta.ErrNotController):
		return kerr.NotController.Code
	case errors.Is(err, controller.ErrStaleBrokerEpoch):
		return kerr.StaleBrokerEpoch.Code
	case errors.Is(err, controller.ErrBrokerNotRegistered):
		return kerr.BrokerIDNotRegistered.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// notActiveController is true (and the caller answers NOT_CONTROLLER) when
// this node is not the active controller.
func notActiveController(b *Broker) bool { return !b.cl.isController() }

func serveBrokerRegistration(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.BrokerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	if notActiveController(b) {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	rec := meta.BrokerRegistered{NodeID: req.BrokerID, IncarnationID: req.IncarnationID}
	if req.Rack != nil {
		rec.Rack = *req.Rack
	}
	for _, l := range req.Listeners {
		rec.Listeners = append(rec.Listeners, meta.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	epoch, err := b.cl.act.Register(rec)
	if err != nil {
		resp.ErrorCode = controllerCode(err)
		return resp, nil
	}
	resp.BrokerEpoch = epoch
	return resp, nil
}

func serveBrokerHeartbeat(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.BrokerHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	if notActiveController(b) {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	r, err := b.cl.act.Heartbeat(controller.Heartbeat{Broker: req.BrokerID, Epoch: req.BrokerEpoch,
		MetadataOffset: req.CurrentMetadataOffset, WantFence: req.WantFence, WantShutdown: req.WantShutdown})
	if err != nil {
		resp.ErrorCode = controllerCode(err)
		return resp, nil
	}
	resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = r.CaughtUp, r.Fenced, r.ShouldShutdown
	return resp, nil
}

func serveAlterPartition(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if notActiveController(b) {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	var changes []meta.PartitionChanged
	var epochs []int32
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			changes = append(changes, meta.PartitionChanged{TopicID: t.TopicID, Partition: p.Partition, Leader: req.BrokerID, LeaderEpoch: p.LeaderEpoch, ISR: p.NewISR})
			epochs = append(epochs, p.PartitionEpoch)
		}
	}
	errs, err := b.cl.act.AlterPartition(req.BrokerID, req.BrokerEpoch, changes, epochs)
	if err != nil {
		resp.ErrorCode = controllerCode(err)
		return resp, nil
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderID, rp.LeaderEpoch, rp.ISR = req.BrokerID, p.LeaderEpoch, p.NewISR
			switch {
			case errors.Is(errs[i], meta.ErrStaleMoveEpoch):
				rp.ErrorCode = kerr.InvalidUpdateVersion.Code
			case errs[i] != nil:
				rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func serveAllocateProducerIDs(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AllocateProducerIDsRequest)
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	if notActiveController(b) {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	first, err := b.cl.act.AllocateProducerIDs(producerIDBlockSize)
	if err != nil {
		resp.ErrorCode = controllerCode(err)
		return resp, nil
	}
	resp.ProducerIDStart, resp.ProducerIDLen = first, producerIDBlockSize
	return resp, nil
}

// toController serves req on this node when it is the active controller,
// else sends it to the active controller.
func (c *cluster) toController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if resp, err := c.serveHere(ctx, req); err == nil {
		return resp, nil
	}
	return c.ctrl.request(ctx, req)
}
