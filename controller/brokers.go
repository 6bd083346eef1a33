package controller

import (
	"github.com/sluicemq/sluice/meta"
)

// Register records broker r's registration and returns its new broker
// epoch; its session starts now.
func (a *Controller) Register(r meta.BrokerRegistered) (epoch int64, err error) {
	epoch, err = a.st.RegisterBroker(r)
	if err != nil {
		a.logger.Warn("sluice: controller: broker registration failed", "broker", r.NodeID, "err", err)
		return 0, err
	}
	a.heartbeat(r.NodeID)
	a.Kick()
	a.logger.Info("sluice: controller: broker registered", "broker", r.NodeID, "broker_epoch", epoch, "rack", r.Rack)
	return epoch, nil
}

// Heartbeat is a broker's heartbeat (BrokerHeartbeat).
type Heartbeat struct {
	Broker         int32
	Epoch          int64
	MetadataOffset int64 // the metadata log offset the broker applied
	WantFence      bool
	WantShutdown   bool
}

// HeartbeatReply is the controller's answer to a heartbeat.
type HeartbeatReply struct {
	CaughtUp, Fenced, ShouldShutdown bool
}

// Heartbeat renews a broker's session and fences or unfences it.
// ErrStaleBrokerEpoch when the epoch is not the broker's registration.
func (a *Controller) Heartbeat(h Heartbeat) (HeartbeatReply, error) {
	br, ok := a.st.Broker(h.Broker)
	if !ok || br.Epoch != h.Epoch {
		return HeartbeatReply{}, ErrStaleBrokerEpoch
	}
	a.heartbeat(h.Broker)
	// Caught up: the broker applied the metadata log up to its own
	// registration (KRaft's rule).
	caughtUp := h.MetadataOffset >= br.Epoch
	a.mu.Lock()
	if h.WantShutdown {
		a.leaving[br.NodeID] = br.Epoch
	}
	e, leaving := a.leaving[br.NodeID]
	leaving = leaving && e == br.Epoch
	a.mu.Unlock()
	fence := br.Fenced
	switch {
	case h.WantShutdown || h.WantFence || leaving:
		fence = true
	case br.Fenced && caughtUp && !(br.Decommissioning && len(replicasOn(a.st.Topics(), br.NodeID)) == 0):
		// A decommissioned broker that holds no replica any more stays
		// fenced until it stops (retire).
		fence = false
	}
	if fence != br.Fenced {
		if err := a.st.FenceBroker(br.NodeID, br.Epoch, fence); err != nil {
			return HeartbeatReply{}, err
		}
		a.logger.Info("sluice: controller: broker fencing changed", "broker", br.NodeID, "fenced", fence, "shutting_down", h.WantShutdown)
	}
	return HeartbeatReply{CaughtUp: caughtUp, Fenced: fence, ShouldShutdown: h.WantShutdown}, nil
}

// AlterPartition records a leader's report of its partitions' leadership
// and ISR; epochs are the partition epochs the report was computed at,
// one per change. The partition epoch (Kafka's) counts the partition's
// reassignment records: a report computed before the latest one is
// refused (meta.ErrStaleMoveEpoch, INVALID_UPDATE_VERSION), so it cannot
// complete a move it predates. errs has one error per change;
// ErrStaleBrokerEpoch refuses the whole report.
func (a *Controller) AlterPartition(broker int32, brokerEpoch int64, changes []meta.PartitionChanged, epochs []int32) (errs []error, err error) {
	if br, ok := a.st.Broker(broker); !ok || br.Epoch != brokerEpoch {
		return nil, ErrStaleBrokerEpoch
	}
	return a.st.ChangePartitionsAt(changes, epochs)
}

// AllocateProducerIDs hands out a block of n producer ids, returning the
// first.
func (a *Controller) AllocateProducerIDs(n int64) (first int64, err error) {
	return a.st.AllocateProducerIDs(n)
}
