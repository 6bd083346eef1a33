package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/meta"
)

// Unregister is UnregisterBroker (KIP-500/KIP-631). Kafka removes the
// registration at once, leaving any replica on the broker offline; Sluice
// decommissions instead when the broker still holds replicas: it is
// marked decommissioning (no new replicas, none moved to it), the
// controller reassigns each of its replicas to the least loaded usable
// broker (drain, a few partitions at a time), and removes the
// registration once no partition names it. A stopped broker (its session
// expired) holding no replica is unregistered at once, as in Kafka; a
// running one is fenced and unregistered once it stops, so it does not
// register again as a new broker. msg says which happened.
func (a *Controller) Unregister(id int32) (msg string, err error) {
	br, ok := a.st.Broker(id)
	if !ok {
		return "", fmt.Errorf("%w: broker %d is not registered", ErrBrokerNotRegistered, id)
	}
	n := len(replicasOn(a.st.Topics(), id))
	switch {
	case n == 0 && !a.alive(id):
		err = a.st.UnregisterBroker(id)
		msg = fmt.Sprintf("broker %d held no replica and is unregistered", id)
	case n == 0 && !br.Decommissioning:
		// Running: unregistered now, it would register again at its next
		// heartbeat. It is fenced instead, and unregistered once stopped.
		err = a.st.DecommissionBroker(id, true)
		msg = fmt.Sprintf("broker %d holds no replica: it is fenced now and unregistered once it stops", id)
		a.Kick()
	case br.Decommissioning:
		msg = fmt.Sprintf("broker %d is being decommissioned already: %d partition(s) still name it", id, n)
	default:
		err = a.st.DecommissionBroker(id, true)
		msg = fmt.Sprintf("decommissioning broker %d: its replicas of %d partition(s) move to other brokers; once it holds none it is fenced (out of Metadata and DescribeCluster), then stop it and it is unregistered once its session expires (watch ListPartitionReassignments)", id, n)
		a.Kick()
	}
	if err != nil {
		return "", err
	}
	a.logger.Info("sluice: controller: UnregisterBroker", "broker", id, "outcome", msg)
	return msg, nil
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

// isMoving reports whether partition p of t has a reassignment in
// progress.
func isMoving(t meta.Topic, p int32) bool {
	_, _, ok := t.Reassigning(p)
	return ok
}

// drainConcurrency is how many partitions a decommission moves at once.
const drainConcurrency = 8

// drainEvery is how often the controller looks at decommissioning
// brokers.
const drainEvery = time.Second

// drain moves the replicas of decommissioning brokers to others and
// unregisters a decommissioning broker that no partition names any more.
func (a *Controller) drain() {
	now := a.now()
	a.mu.Lock()
	if now.Sub(a.drained) < drainEvery {
		a.mu.Unlock()
		return
	}
	a.drained = now
	a.mu.Unlock()
	brokers := a.st.Brokers()
	topics := a.st.Topics()
	load := map[int32]int{}
	for _, t := range topics {
		for _, rs := range t.Assignments {
			for _, id := range rs {
				load[id]++
			}
		}
	}
	down := a.host.PeersDown()
	usable := func(id int32) bool {
		for _, br := range brokers {
			if br.NodeID == id {
				return !br.Fenced && !br.Decommissioning && !slices.Contains(down, id)
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
		errs, err := a.st.Reassign(reqs)
		if err != nil {
			a.logger.Warn("sluice: controller: decommission: cannot start reassignments; retried", "broker", br.NodeID, "err", err)
			continue
		}
		for i, e := range errs {
			if e != nil {
				a.logger.Warn("sluice: controller: decommission: a reassignment was refused; retried", "broker", br.NodeID, "partition", reqs[i].Partition, "err", e)
			}
		}
		a.logger.Info("sluice: controller: decommission: moving replicas off the broker", "broker", br.NodeID, "started", len(reqs), "left", len(on))
	}
}

// retire ends the decommission of a broker that holds no replica any
// more: it is fenced (out of Metadata; its heartbeats never unfence it
// again, Heartbeat), and unregistered once it stopped (its session
// expired), so a process still running does not register again as a new
// broker. Started again after that, it joins as a new, empty broker.
func (a *Controller) retire(br meta.Broker) {
	if !br.Fenced {
		if err := a.st.FenceBroker(br.NodeID, br.Epoch, true); err != nil {
			a.logger.Warn("sluice: controller: cannot fence a decommissioned broker; retried", "broker", br.NodeID, "err", err)
			return
		}
		a.logger.Info("sluice: controller: decommission done: the broker holds no replica and is fenced; stop it, and it is unregistered once its session expires", "broker", br.NodeID)
		return
	}
	if a.alive(br.NodeID) {
		return // still running
	}
	if err := a.st.UnregisterBroker(br.NodeID); err != nil && !errors.Is(err, meta.ErrUnknownBroker) {
		a.logger.Warn("sluice: controller: cannot unregister a decommissioned broker; retried", "broker", br.NodeID, "err", err)
		return
	}
	a.logger.Info("sluice: controller: a decommissioned broker stopped and is unregistered", "broker", br.NodeID)
}

// warnDrainStuck logs, once a minute per broker, that a decommission
// cannot move a partition: no usable broker lacks a replica of it.
func (a *Controller) warnDrainStuck(id int32, pr partitionRef) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.drainWarned[id]) < time.Minute {
		return
	}
	a.drainWarned[id] = now
	a.logger.Warn("sluice: controller: decommission: no usable broker can take a replica (every unfenced broker that is not decommissioning holds one already); add a broker or lower the partition's replication factor with a reassignment",
		"broker", id, "topic", pr.t.Name, "partition", pr.p, "replicas", pr.t.Assignments[pr.p])
}

// completeMoves ends every reassignment whose partition's reported ISR
// holds the whole target and none of the removing replicas (Kafka's
// controller completes a reassignment on such an AlterPartition). Check
// runs it.
func (a *Controller) completeMoves() {
	for _, r := range a.st.Reassignments() {
		t, ok := a.st.TopicByID(r.TopicID)
		if !ok || !t.ReassignmentDone(r.Partition) {
			continue
		}
		done, err := a.st.CompleteReassignment(r.TopicID, r.Partition)
		switch {
		case err != nil:
			a.logger.Warn("sluice: controller: cannot complete a reassignment; retried", "topic", r.Topic, "partition", r.Partition, "err", err)
		case done:
			a.logger.Info("sluice: controller: reassignment completed", "topic", r.Topic, "partition", r.Partition, "replicas", t.TargetReplicas(r.Partition))
		}
	}
}
