package server

// UnregisterBroker, version 0 (KIP-500/KIP-631; Kafka's kafka-cluster.sh
// unregister), served by the active controller (forwarded from any
// broker). Kafka removes the registration at once, leaving any replica on
// the broker offline; Sluice decommissions instead when the broker still
// holds replicas: it is marked decommissioning (no new replicas, none
// moved to it), the controller reassigns each of its replicas to the
// least loaded usable broker (activeController.drain, a few partitions at
// a time), and removes the registration once no partition names it. The
// answer comes as soon as the decommission started (error NONE, with a
// message saying so); the broker leaves DescribeCluster and Metadata when
// it is done (it is fenced then, and unregistered once stopped). A stopped
// broker (its session expired) holding no replica is unregistered at
// once, as in Kafka; a running one is fenced and unregistered once it
// stops, so it does not register again as a new broker.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
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
	br, ok := b.meta.Broker(req.BrokerID)
	if !ok {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		msg := fmt.Sprintf("broker %d is not registered", req.BrokerID)
		resp.ErrorMessage = &msg
		return resp, nil
	}
	n := len(replicasOn(b.meta.Topics(), req.BrokerID))
	var err error
	var msg string
	switch {
	case n == 0 && !b.cl.act.alive(req.BrokerID):
		err = b.meta.UnregisterBroker(req.BrokerID)
		msg = fmt.Sprintf("broker %d held no replica and is unregistered", req.BrokerID)
	case n == 0 && !br.Decommissioning:
		// Running: unregistered now, it would register again at its next
		// heartbeat. It is fenced instead, and unregistered once stopped.
		err = b.meta.DecommissionBroker(req.BrokerID, true)
		msg = fmt.Sprintf("broker %d holds no replica: it is fenced now and unregistered once it stops", req.BrokerID)
		b.cl.act.kick()
	case br.Decommissioning:
		msg = fmt.Sprintf("broker %d is being decommissioned already: %d partition(s) still name it", req.BrokerID, n)
	default:
		err = b.meta.DecommissionBroker(req.BrokerID, true)
		msg = fmt.Sprintf("decommissioning broker %d: its replicas of %d partition(s) move to other brokers; once it holds none it is fenced (out of Metadata and DescribeCluster), then stop it and it is unregistered once its session expires (watch ListPartitionReassignments)", req.BrokerID, n)
		b.cl.act.kick()
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = controllerCode(err), errMessage(err)
		return resp, nil
	}
	b.logger.Info("sluice: controller: UnregisterBroker", "broker", req.BrokerID, "outcome", msg)
	resp.ErrorMessage = &msg
	return resp, nil
}

// partitionRef names one partition.
type partitionRef struct {
	t meta.Topic
	p int32
}

// replicasOn are the partitions whose replica list names broker id.
func replicasOn(topics []meta.Topic, id int32) []partitionRef {
	var out []partitionRef
	for _, t := range topics {
		for p := range t.Assignments {
			if slices.Contains(t.Assignments[p], id) {
				out = append(out, partitionRef{t, int32(p)})
			}
		}
	}
	return out
}

// drainConcurrency is how many partitions a decommission moves at once.
const drainConcurrency = 8

// drainEvery is how often the controller looks at decommissioning
// brokers.
const drainEvery = time.Second

// drain moves the replicas of decommissioning brokers to others and
// unregisters a decommissioning broker that no partition names any more.
func (a *activeController) drain() {
	b := a.c.b
	a.mu.Lock()
	if time.Since(a.drained) < drainEvery {
		a.mu.Unlock()
		return
	}
	a.drained = time.Now()
	a.mu.Unlock()
	brokers := b.meta.Brokers()
	topics := b.meta.Topics()
	load := map[int32]int{}
	for _, t := range topics {
		for _, rs := range t.Assignments {
			for _, id := range rs {
				load[id]++
			}
		}
	}
	down := b.cl.host.PeersDown()
	usable := func(id int32) bool {
		for _, br := range brokers {
			if br.NodeID == id {
				return !br.Fenced && !br.Decommissioning && !slices.Contains(down, uint64(id))
			}
		}
		return false
	}
	gone := func(id int32) bool {
		for _, br := range brokers {
			if br.NodeID == id {
				return br.Fenced || br.Decommissioning
			}
		}
		return true
	}
	for _, br := range brokers {
		if !br.Decommissioning {
			continue
		}
		on := replicasOn(topics, br.NodeID)
		if len(on) == 0 {
			a.retire(br)
			continue
		}
		moving := 0
		var reqs []meta.ReassignRequest
		for _, pr := range on {
			if isMoving(pr.t, pr.p) {
				moving++
			}
		}
		// pick is the usable broker holding the fewest replicas that
		// the list does not name, or -1.
		pick := func(cur []int32) int32 {
			to := int32(-1)
			for _, cand := range brokers {
				id := cand.NodeID
				if !usable(id) || slices.Contains(cur, id) {
					continue
				}
				if to < 0 || load[id] < load[to] || (load[id] == load[to] && id < to) {
					to = id
				}
			}
			return to
		}
		for _, pr := range on {
			target := pr.t.TargetReplicas(pr.p)
			if isMoving(pr.t, pr.p) {
				// A move whose new replica's broker is gone (fenced:
				// its session expired; or decommissioning) would wait
				// for it for ever: replace it by another (the replaced
				// one leaves).
				adding, _, _ := pr.t.Reassigning(pr.p)
				i := slices.IndexFunc(target, func(id int32) bool { return slices.Contains(adding, id) && gone(id) })
				if i < 0 {
					continue
				}
				to := pick(pr.t.Assignments[pr.p])
				if to < 0 {
					a.warnDrainStuck(br.NodeID, pr)
					continue
				}
				target = slices.Clone(target)
				target[i] = to
				load[to]++
				reqs = append(reqs, meta.ReassignRequest{TopicID: pr.t.ID, Partition: pr.p, Target: target})
				continue
			}
			if moving+len(reqs) >= drainConcurrency {
				continue
			}
			cur := pr.t.Assignments[pr.p]
			to := pick(cur)
			if to < 0 {
				a.warnDrainStuck(br.NodeID, pr)
				continue
			}
			target = slices.Clone(cur)
			target[slices.Index(target, br.NodeID)] = to
			load[to]++
			reqs = append(reqs, meta.ReassignRequest{TopicID: pr.t.ID, Partition: pr.p, Target: target})
		}
		if len(reqs) == 0 {
			continue
		}
		errs, err := b.meta.Reassign(reqs)
		if err != nil {
			b.logger.Warn("sluice: controller: decommission: cannot start reassignments; retried", "broker", br.NodeID, "err", err)
			continue
		}
		for i, e := range errs {
			if e != nil {
				b.logger.Warn("sluice: controller: decommission: a reassignment was refused; retried", "broker", br.NodeID, "partition", reqs[i].Partition, "err", e)
			}
		}
		b.logger.Info("sluice: controller: decommission: moving replicas off the broker", "broker", br.NodeID, "started", len(reqs), "left", len(on))
	}
}

// retire ends the decommission of a broker that holds no replica any
// more: it is fenced (out of Metadata; its heartbeats never unfence it
// again, serveBrokerHeartbeat), and unregistered once it stopped (its
// session expired), so a process still running does not register again
// as a new broker. Started again after that, it joins as a new, empty
// broker.
func (a *activeController) retire(br meta.Broker) {
	b := a.c.b
	if !br.Fenced {
		if err := b.meta.FenceBroker(br.NodeID, br.Epoch, true); err != nil {
			b.logger.Warn("sluice: controller: cannot fence a decommissioned broker; retried", "broker", br.NodeID, "err", err)
			return
		}
		b.logger.Info("sluice: controller: decommission done: the broker holds no replica and is fenced; stop it, and it is unregistered once its session expires", "broker", br.NodeID)
		return
	}
	if a.alive(br.NodeID) {
		return // still running
	}
	if err := b.meta.UnregisterBroker(br.NodeID); err != nil && !errors.Is(err, meta.ErrUnknownBroker) {
		b.logger.Warn("sluice: controller: cannot unregister a decommissioned broker; retried", "broker", br.NodeID, "err", err)
		return
	}
	b.logger.Info("sluice: controller: a decommissioned broker stopped and is unregistered", "broker", br.NodeID)
}

// alive reports whether broker id heartbeated within its session.
func (a *activeController) alive(id int32) bool {
	a.mu.Lock()
	heard, ok := a.heard[id]
	a.mu.Unlock()
	return ok && time.Since(heard) <= time.Duration(a.c.b.cfg.BrokerSessionTimeoutMs)*time.Millisecond
}

// warnDrainStuck logs, once a minute per broker, that a decommission
// cannot move a partition: no usable broker lacks a replica of it.
func (a *activeController) warnDrainStuck(id int32, pr partitionRef) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Since(a.drainWarned[id]) < time.Minute {
		return
	}
	a.drainWarned[id] = time.Now()
	a.c.b.logger.Warn("sluice: controller: decommission: no usable broker can take a replica (every unfenced broker that is not decommissioning holds one already); add a broker or lower the partition's replication factor with a reassignment",
		"broker", id, "topic", pr.t.Name, "partition", pr.p, "replicas", pr.t.Assignments[pr.p])
}
