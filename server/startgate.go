package server

import (
	"time"
)

// The start-up gate. Kafka's BrokerServer.startup enables request
// processing on its listeners (SocketServer.enableRequestProcessing) only
// once the broker has registered, the controller has acknowledged it as
// caught up and unfenced it (lifecycleManager.initialCatchUpFuture, then
// setReadyToUnfence); until then it does not accept on them (a listener
// with a fixed port is not even bound: Kafka defers opening it "so that
// systems which assume that the socket being open indicates readiness are
// not confused"). A client that came in the first second would otherwise
// see a cluster without this broker: auto-creation on a one-voter node
// has no broker to place the replica on (the topic is not created, and
// Metadata answers UNKNOWN_TOPIC_OR_PARTITION until it is).
//
// Sluice's clustered broker does the equivalent on its client listeners
// (those not in controller.listener.names): their connections are
// accepted and the raft connections among them handed to the transport
// at once (raft to a broker-only node rides its inter-broker listener,
// and this broker cannot catch up without it; on a SASL listener raft's
// connections log in first, so the SASL exchange is served before the
// gate too), but no other Kafka request of theirs is read until this
// broker is registered and its current
// registration is unfenced in its own copy of the metadata
// (Broker.unfencedReason). The controller listeners serve meanwhile: the
// brokers of the quorum register through them. The wait is bounded
// (startGateMax, Kafka's initial.broker.registration.timeout.ms
// default); past it the client listeners serve anyway, with a warning
// naming what is missing. A single node, a one-voter cluster, waits too:
// it registers with itself, in-process, within a fraction of a second. A
// controller-only node (whose listeners are all controller listeners)
// serves at once. The gate
// opens once: a broker fenced later keeps serving (its Metadata leaves
// itself out), as Kafka's does.

// startGateMax bounds the start-up gate's wait (Kafka's
// initial.broker.registration.timeout.ms default, 60 s).
const startGateMax = 60 * time.Second

// startGateCheck is how often the gate looks at the broker's state.
const startGateCheck = 20 * time.Millisecond

// openStartGate decides at Start whether the client listeners wait:
// only a clustered broker's do.
func (b *Broker) openStartGate() {
	b.gate = make(chan struct{})
	if !b.cfg.IsBroker() {
		close(b.gate)
		return
	}
	max := b.gateMax
	if max <= 0 {
		max = startGateMax
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.awaitUnfenced(max)
	}()
}

// awaitUnfenced opens the gate once this broker is registered and
// unfenced, or once max passed; it logs what it waits for, and each
// change of it.
func (b *Broker) awaitUnfenced(max time.Duration) {
	start := time.Now()
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	t := time.NewTicker(startGateCheck)
	defer t.Stop()
	logged := ""
	for {
		reason := b.unfencedReason()
		if reason == "" {
			b.logger.Info("sluice: broker: registered and unfenced; the client listeners serve", "waited", time.Since(start).Round(time.Millisecond).String())
			close(b.gate)
			return
		}
		if reason != logged {
			b.logger.Info("sluice: broker: the client listeners wait until this broker is registered with the controller and unfenced (the controller listeners serve meanwhile)",
				"waiting_for", reason, "waited", time.Since(start).Round(time.Millisecond).String(), "max", max.String())
			logged = reason
		}
		select {
		case <-b.cl.stopping():
			return
		case <-deadline.C:
			b.logger.Warn("sluice: broker: not unfenced in time; the client listeners serve anyway (clients may not see this broker in Metadata until it is)",
				"waiting_for", reason, "waited", max.String())
			close(b.gate)
			return
		case <-t.C:
		}
	}
}

// passStartGate waits until connection requests of listener may be read:
// at once on a controller listener. False when the broker closes first.
func (b *Broker) passStartGate(listener string) bool {
	select {
	case <-b.gate:
		return true
	default:
	}
	if b.isControllerListener(listener) {
		return true
	}
	select {
	case <-b.gate:
		return true
	case <-b.cl.stopping():
		return false
	case <-b.ctx.Done():
		return false
	}
}

// unfencedReason is why this clustered broker is not registered and
// unfenced yet ("" once it is): its current registration, by its broker
// epoch, unfenced in its own copy of the metadata.
func (b *Broker) unfencedReason() string {
	epoch := b.cl.epoch.Load()
	if epoch < 0 {
		return "not registered with the controller yet"
	}
	br, ok := b.meta.Broker(b.cfg.NodeID)
	switch {
	case !ok || br.Epoch != epoch:
		return "this broker's registration is not in the applied metadata yet"
	case br.Fenced:
		return "fenced: the controller has not unfenced this broker (catching up with the metadata log, or its heartbeats are not heard)"
	}
	return ""
}
