package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3/raftpb"
)

// The active controller's duties (Kafka's QuorumController and its
// BrokerHeartbeatManager): it registers brokers, keeps their sessions from
// heartbeats (in memory: a new active controller gives every broker a
// fresh session), fences a broker whose session expired
// (broker.session.timeout.ms) and unfences one that has caught up with the
// metadata log, records leaders' reports of leadership and ISR, hands out
// producer-id blocks, and adds brokers that are not voters to the metadata
// group as raft learners.
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

// controllerCheckEvery is how often the active controller checks broker
// sessions and learners.
const controllerCheckEvery = 250 * time.Millisecond

type activeController struct {
	c      *cluster
	kickCh chan struct{}

	mu sync.Mutex
	// term is the metadata group's term whose duties started (0: none):
	// a new term, even this node's again, starts every session afresh.
	term  int32
	heard map[int32]time.Time // each broker's session: its last heartbeat or registration, or this term's start
	// beat is each broker's last heartbeat or registration as this
	// process heard it, kept across terms (heard restarts every session
	// at a new term): DescribeQuorum's LastFetchTimestamp.
	beat     map[int32]time.Time
	learners map[int32]bool // learners added to the metadata group in this term
	// leaving are the brokers in controlled shutdown, with the broker
	// epoch that asked: never unfenced again in that epoch.
	leaving map[int32]int64
	// rebalanced is when the last leader rebalance ended (zero: none
	// yet in this process); rebalancing while one runs (43_elect_leaders.go).
	rebalanced  time.Time
	rebalancing bool
	// drained is when drain last ran; drainWarned when it last warned
	// about each broker it cannot drain (64_unregister_broker.go).
	drained     time.Time
	drainWarned map[int32]time.Time
}

func newActiveController(c *cluster) *activeController {
	return &activeController{c: c, kickCh: make(chan struct{}, 1), heard: map[int32]time.Time{}, beat: map[int32]time.Time{}, learners: map[int32]bool{}, leaving: map[int32]int64{}, drainWarned: map[int32]time.Time{}}
}

func (a *activeController) kick() {
	select {
	case a.kickCh <- struct{}{}:
	default:
	}
}

// heartbeat notes that broker id was heard from.
func (a *activeController) heartbeat(id int32) {
	now := time.Now()
	a.mu.Lock()
	a.heard[id] = now
	a.beat[id] = now
	a.mu.Unlock()
}

func (a *activeController) run() {
	defer a.c.wg.Done()
	t := time.NewTicker(controllerCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-a.c.stopping():
			return
		case <-t.C:
		case <-a.kickCh:
		}
		a.check()
	}
}

// check runs the duties once.
func (a *activeController) check() {
	c := a.c
	b := c.b
	_, term, _ := c.metaPart.Leader()
	if !c.isController() {
		a.mu.Lock()
		a.term = 0
		a.mu.Unlock()
		return
	}
	now := time.Now()
	brokers := b.meta.Brokers()
	session := time.Duration(b.cfg.BrokerSessionTimeoutMs) * time.Millisecond
	var expired []meta.Broker
	var learners []int32
	a.mu.Lock()
	if a.term != term {
		// A new leadership: every broker starts a fresh session.
		a.term = term
		clear(a.heard)
		clear(a.learners)
		clear(a.leaving)
		for _, br := range brokers {
			a.heard[br.NodeID] = now
		}
	}
	for _, br := range brokers {
		if _, ok := a.heard[br.NodeID]; !ok {
			a.heard[br.NodeID] = now
		}
		if !br.Fenced && now.Sub(a.heard[br.NodeID]) > session {
			expired = append(expired, br)
		}
		if _, voter := c.voters[br.NodeID]; !voter && !a.learners[br.NodeID] {
			learners = append(learners, br.NodeID)
		}
	}
	a.mu.Unlock()
	for _, br := range expired {
		if err := b.meta.FenceBroker(br.NodeID, br.Epoch, true); err != nil {
			b.logger.Warn("sluice: controller: cannot fence a broker whose session expired", "broker", br.NodeID, "err", err)
			continue
		}
		b.logger.Warn("sluice: controller: fenced a broker: no heartbeat within broker.session.timeout.ms", "broker", br.NodeID, "session_timeout_ms", b.cfg.BrokerSessionTimeoutMs)
	}
	for _, id := range learners {
		cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: uint64(id)}}}
		if err := c.host.ProposeConfChange(metaGroup, cc); err != nil {
			b.logger.Warn("sluice: controller: cannot add a broker to the metadata log as a learner", "broker", id, "err", err)
			continue
		}
		a.mu.Lock()
		a.learners[id] = true
		a.mu.Unlock()
	}
	a.completeMoves()
	a.drain()
	a.rebalance()
}

// controllerCode maps a meta error of a controller change to a Kafka code.
func controllerCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, meta.ErrNotController):
		return kerr.NotController.Code
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
	epoch, err := b.meta.RegisterBroker(rec)
	if err != nil {
		b.logger.Warn("sluice: controller: broker registration failed", "broker", req.BrokerID, "err", err)
		resp.ErrorCode = controllerCode(err)
		return resp, nil
	}
	b.cl.act.heartbeat(req.BrokerID)
	b.cl.act.kick()
	b.logger.Info("sluice: controller: broker registered", "broker", req.BrokerID, "broker_epoch", epoch, "rack", rec.Rack)
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
	br, ok := b.meta.Broker(req.BrokerID)
	if !ok || br.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp, nil
	}
	b.cl.act.heartbeat(req.BrokerID)
	// Caught up: the broker applied the metadata log up to its own
	// registration (KRaft's rule).
	caughtUp := req.CurrentMetadataOffset >= br.Epoch
	a := b.cl.act
	a.mu.Lock()
	if req.WantShutdown {
		a.leaving[br.NodeID] = br.Epoch
	}
	e, leaving := a.leaving[br.NodeID]
	leaving = leaving && e == br.Epoch
	a.mu.Unlock()
	fence := br.Fenced
	switch {
	case req.WantShutdown || req.WantFence || leaving:
		fence = true
	case br.Fenced && caughtUp && !(br.Decommissioning && len(replicasOn(b.meta.Topics(), br.NodeID)) == 0):
		// A decommissioned broker that holds no replica any more stays
		// fenced until it stops (activeController.retire).
		fence = false
	}
	if fence != br.Fenced {
		if err := b.meta.FenceBroker(br.NodeID, br.Epoch, fence); err != nil {
			resp.ErrorCode = controllerCode(err)
			return resp, nil
		}
		b.logger.Info("sluice: controller: broker fencing changed", "broker", br.NodeID, "fenced", fence, "shutting_down", req.WantShutdown)
	}
	resp.IsCaughtUp = caughtUp
	resp.IsFenced = fence
	resp.ShouldShutdown = req.WantShutdown
	return resp, nil
}

func serveAlterPartition(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if notActiveController(b) {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	if br, ok := b.meta.Broker(req.BrokerID); !ok || br.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
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
	// The partition epoch (Kafka's) counts the partition's reassignment
	// records: a report computed before the latest one is refused
	// (INVALID_UPDATE_VERSION), so it cannot complete a move it predates.
	errs, err := b.meta.ChangePartitionsAt(changes, epochs)
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
	first, err := b.meta.AllocateProducerIDs(producerIDBlockSize)
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
	if c.isController() {
		h := handlers[req.Key()]
		resp, err := h.serve(ctx, c.b, nil, req)
		if err == nil && topLevelCode(resp) == kerr.NotController.Code {
			err = errNoController
		}
		if err == nil {
			return resp, nil
		}
	}
	return c.ctrl.request(ctx, req)
}
