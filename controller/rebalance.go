package controller

import (
	"context"
	"slices"
)

// Election is one partition whose leadership goes to its preferred
// replica.
type Election struct {
	Topic     string
	Partition int32
	Leader    int32 // the current leader, asked to hand over
	Preferred int32 // the first of the replica list
}

// Preferred is what a preferred leader election of one partition needs
// (Kafka's PreferredReplicaLeaderElection rules).
type Preferred int

const (
	// PreferredElect: the leader hands over to the preferred replica.
	PreferredElect Preferred = iota
	// PreferredNotNeeded: the preferred replica leads
	// (ELECTION_NOT_NEEDED).
	PreferredNotNeeded
	// PreferredNoReplicas: the partition has no replica
	// (PREFERRED_LEADER_NOT_AVAILABLE).
	PreferredNoReplicas
	// PreferredNoLeader: no leader now, an election is under way
	// (PREFERRED_LEADER_NOT_AVAILABLE).
	PreferredNoLeader
	// PreferredNotInSync: the preferred replica is not in the ISR
	// (PREFERRED_LEADER_NOT_AVAILABLE).
	PreferredNotInSync
)

// PreferredDecision decides a preferred election of a partition with
// these replicas, leader (-1: none) and ISR.
func PreferredDecision(replicas []int32, leader int32, isr []int32) Preferred {
	switch {
	case len(replicas) == 0:
		return PreferredNoReplicas
	case leader == replicas[0]:
		return PreferredNotNeeded
	case leader < 0:
		return PreferredNoLeader
	case !slices.Contains(isr, replicas[0]):
		return PreferredNotInSync
	}
	return PreferredElect
}

// rebalance is the automatic preferred leader election
// (auto.leader.rebalance.enable, Kafka's KafkaController
// checkAndTriggerAutoLeaderRebalance): every
// leader.imbalance.check.interval.seconds, each broker whose preferred
// partitions are led elsewhere for more than
// leader.imbalance.per.broker.percentage of them gets those back (the
// ones whose preferred replica is live and in sync, and not being
// reassigned). The elections run in their own goroutine (they wait for
// the leaders' transfers); one at a time.
func (a *Controller) rebalance(ctx context.Context) {
	if !a.cfg.AutoLeaderRebalance {
		return
	}
	now := a.now()
	a.mu.Lock()
	if a.rebalancing || now.Sub(a.rebalanced) < a.cfg.ImbalanceCheckInterval {
		a.mu.Unlock()
		return
	}
	if a.rebalanced.IsZero() {
		// The first check comes one interval after this controller
		// took over, as Kafka schedules it.
		a.rebalanced = now
		a.mu.Unlock()
		return
	}
	a.rebalancing = true
	a.mu.Unlock()
	elect := a.imbalanced()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			a.rebalancing, a.rebalanced = false, a.now()
			a.mu.Unlock()
		}()
		if len(elect) == 0 {
			return
		}
		moved := a.host.ElectPreferred(ctx, elect)
		a.logger.Info("sluice: controller: leader rebalance: preferred leaders elected", "partitions", len(elect), "elected", moved)
	}()
}

// imbalanced are the elections a rebalance makes now.
func (a *Controller) imbalanced() []Election {
	preferred := map[int32]int{}
	notLed := map[int32][]Election{}
	for _, t := range a.st.Topics() {
		for p := int32(0); p < t.Partitions && int(p) < len(t.Assignments); p++ {
			if len(t.Assignments[p]) == 0 || isMoving(t, p) {
				continue
			}
			pref := t.Assignments[p][0]
			preferred[pref]++
			leader, isr := a.host.Partition(t, p)
			if PreferredDecision(t.Assignments[p], leader, isr) == PreferredElect {
				notLed[pref] = append(notLed[pref], Election{Topic: t.Name, Partition: p, Leader: leader, Preferred: pref})
			}
		}
	}
	var elect []Election
	for id, es := range notLed {
		if br, ok := a.st.Broker(id); !ok || br.Fenced || br.Decommissioning {
			continue // a leaving broker gets no leadership back
		}
		if 100*len(es) > int(a.cfg.ImbalancePerBrokerPercentage)*preferred[id] {
			elect = append(elect, es...)
		}
	}
	return elect
}
