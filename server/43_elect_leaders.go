package server

// ElectLeaders, versions 0-2 (KIP-183; v1 adds the election type and the
// top-level error, KIP-460; v2 is flexible). A preferred election moves a
// partition's leadership to its preferred replica (the first of its
// replica list) by raft leadership transfer; an unclean election has no
// raft equivalent (raft never elects a replica that lacks a committed
// record), so it is ELECTION_NOT_NEEDED while the partition has a leader
// and ELIGIBLE_LEADERS_NOT_AVAILABLE with an explanation otherwise.
//
// Any broker serves it from its own metadata: it asks each current leader
// to hand over (this same API, sent broker to broker with the
// "sluice-broker-" client id: the leader transfers and waits for the
// outcome) and merges their answers. With null topics every partition is
// considered and, as Kafka, only the partitions that needed an election
// are answered.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/controller"
	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 43, minVersion: 0, maxVersion: 2, serve: serveElectLeaders})
}

// Kafka's election types.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// electWait bounds how long a leader waits for a transfer it started.
const electWait = 10 * time.Second

// electTarget is one partition to elect, with its outcome.
type electTarget struct {
	topic     string
	partition int32
	err       error // nil: elected (or to be asked of leader)
	leader    int32 // the current leader to ask, when err is nil
	preferred int32
}

func serveElectLeaders(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := electionPreferred
	if req.Version >= 1 {
		typ = req.ElectionType
	}
	if typ != electionPreferred && typ != electionUnclean {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	wait := electWait
	if req.TimeoutMillis > 0 {
		wait = min(wait, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	if b.fromBroker(cc) && typ == electionPreferred {
		// Another broker asks this one, the leader, to hand over.
		return b.transferToPreferred(ctx, req, wait), nil
	}
	all := req.Topics == nil
	targets := b.electTargets(req, typ)
	b.electAtLeaders(ctx, targets, wait)
	byTopic := map[string]int{}
	for _, et := range targets {
		if all && errIs(et.err, kerr.ElectionNotNeeded) {
			continue
		}
		i, ok := byTopic[et.topic]
		if !ok {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = et.topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[et.topic] = i
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = et.partition, kafkaCode(et.err), errMessage(et.err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

// electTargets resolves the request's partitions (every partition for
// null topics) and decides what each needs from this broker's metadata:
// an error (unknown, not needed, not possible) or a leader to ask.
func (b *Broker) electTargets(req *kmsg.ElectLeadersRequest, typ int8) []electTarget {
	var out []electTarget
	add := func(t meta.Topic, known bool, name string, p int32) {
		et := electTarget{topic: name, partition: p, leader: -1, preferred: -1}
		switch {
		case !known || p < 0 || p >= t.Partitions:
			et.err = kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", name, p)
		default:
			et = b.electDecision(t, p, typ)
		}
		out = append(out, et)
	}
	if req.Topics == nil {
		for _, t := range b.meta.Topics() {
			for p := int32(0); p < t.Partitions; p++ {
				add(t, true, t.Name, p)
			}
		}
		return out
	}
	for _, rt := range req.Topics {
		t, ok := b.meta.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			add(t, ok, rt.Topic, p)
		}
	}
	return out
}

// electDecision is what partition p of t needs for an election of typ.
func (b *Broker) electDecision(t meta.Topic, p int32, typ int8) electTarget {
	et := electTarget{topic: t.Name, partition: p, leader: -1, preferred: -1}
	v := b.partitionView(t, p)
	if len(v.replicas) > 0 {
		et.preferred = v.replicas[0]
	}
	if typ == electionUnclean {
		if v.leader >= 0 {
			et.err = kafkaErrorf(kerr.ElectionNotNeeded, "Leader election not needed for topic partition %s-%d: it has leader %d", t.Name, p, v.leader)
			return et
		}
		why := "unclean leader election is disabled (unclean.leader.election.enable=false)"
		if b.cfg.UncleanLeaderElectionEnable || t.Configs["unclean.leader.election.enable"] == "true" {
			why = "Sluice replicates with raft, which elects only a replica holding every committed record, so there is no unclean election"
		}
		et.err = kafkaErrorf(kerr.EligibleLeadersNotAvailable, "%s-%d has no leader and %s; it elects a leader by itself once a majority of its replicas (%v) is back", t.Name, p, why, v.replicas)
		return et
	}
	switch controller.PreferredDecision(v.replicas, v.leader, v.isr) {
	case controller.PreferredNoReplicas:
		et.err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d has no replicas", t.Name, p)
	case controller.PreferredNotNeeded:
		et.err = kafkaErrorf(kerr.ElectionNotNeeded, "Leader election not needed for topic partition %s-%d: its preferred replica %d leads", t.Name, p, et.preferred)
	case controller.PreferredNoLeader:
		et.err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d has no leader now (an election is under way); retry", t.Name, p)
	case controller.PreferredNotInSync:
		et.err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "Failed to elect leader for partition %s-%d under strategy PreferredElection: the preferred replica %d is not live and in the ISR %v", t.Name, p, et.preferred, v.isr)
	default:
		et.leader = v.leader
	}
	return et
}

// electAtLeaders asks each current leader of the targets still to elect
// to hand their leadership to the preferred replicas, concurrently, and
// fills in the outcomes.
func (b *Broker) electAtLeaders(ctx context.Context, targets []electTarget, wait time.Duration) {
	byLeader := map[int32][]int{}
	for i, et := range targets {
		if et.err == nil && et.leader >= 0 {
			byLeader[et.leader] = append(byLeader[et.leader], i)
		}
	}
	var wg sync.WaitGroup
	for leader, idx := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrElectLeadersRequest()
			req.ElectionType = electionPreferred
			req.TimeoutMillis = int32(wait / time.Millisecond)
			byTopic := map[string]int{}
			for _, i := range idx {
				et := targets[i]
				j, ok := byTopic[et.topic]
				if !ok {
					rt := kmsg.NewElectLeadersRequestTopic()
					rt.Topic = et.topic
					req.Topics = append(req.Topics, rt)
					j = len(req.Topics) - 1
					byTopic[et.topic] = j
				}
				req.Topics[j].Partitions = append(req.Topics[j].Partitions, et.partition)
			}
			var resp *kmsg.ElectLeadersResponse
			var err error
			if leader == b.cfg.NodeID {
				resp = b.transferToPreferred(ctx, req, wait)
			} else {
				rctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
				var kresp kmsg.Response
				kresp, err = b.cl.brokers.request(rctx, leader, req)
				cancel()
				if err == nil {
					resp = kresp.(*kmsg.ElectLeadersResponse)
				}
			}
			outcome := map[topicPartition]error{}
			if resp != nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						var perr error
						if rp.ErrorCode != 0 {
							msg := ""
							if rp.ErrorMessage != nil {
								msg = *rp.ErrorMessage
							}
							perr = kafkaErrorCode(rp.ErrorCode, msg)
						}
						outcome[topicPartition{rt.Topic, rp.Partition}] = perr
					}
				}
			}
			for _, i := range idx {
				et := &targets[i]
				perr, ok := outcome[topicPartition{et.topic, et.partition}]
				switch {
				case err != nil:
					et.err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d: the leader, broker %d, could not be asked to hand over: %v", et.topic, et.partition, leader, err)
				case !ok:
					et.err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d: the leader, broker %d, did not answer for it", et.topic, et.partition, leader)
				default:
					et.err = perr
				}
			}
		}()
	}
	wg.Wait()
}

// transferToPreferred is the leader's side: for each partition of req it
// leads, it transfers leadership to the preferred replica and waits (at
// most wait) until that replica leads.
func (b *Broker) transferToPreferred(ctx context.Context, req *kmsg.ElectLeadersRequest, wait time.Duration) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	type pending struct {
		rt, rp    int
		part      *replica.Partition
		preferred int32
	}
	var waiting []pending
	for _, rt := range req.Topics {
		out := kmsg.NewElectLeadersResponseTopic()
		out.Topic = rt.Topic
		t, known := b.meta.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			var err error
			part, held := b.partition(rt.Topic, p)
			switch {
			case !known || p < 0 || int(p) >= len(t.Assignments) || len(t.Assignments[p]) == 0:
				err = kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", rt.Topic, p)
			case !held || !part.IsLeader():
				err = kafkaErrorf(kerr.NotLeaderForPartition, "broker %d does not lead %s-%d", b.cfg.NodeID, rt.Topic, p)
			case t.Assignments[p][0] == b.cfg.NodeID:
				err = kafkaErrorf(kerr.ElectionNotNeeded, "Leader election not needed for topic partition %s-%d: its preferred replica %d leads", rt.Topic, p, b.cfg.NodeID)
			default:
				preferred := t.Assignments[p][0]
				if !slices.Contains(part.ISR(), uint64(preferred)) {
					err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "Failed to elect leader for partition %s-%d under strategy PreferredElection: the preferred replica %d is not in the ISR", rt.Topic, p, preferred)
				} else if terr := part.TransferLeadership(uint64(preferred)); terr != nil {
					err = kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d: %v", rt.Topic, p, terr)
				} else {
					waiting = append(waiting, pending{len(resp.Topics), len(out.Partitions), part, preferred})
				}
			}
			rp.ErrorCode, rp.ErrorMessage = kafkaCode(err), errMessage(err)
			out.Partitions = append(out.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, out)
	}
	deadline := time.Now().Add(wait)
	retransfer := time.Now().Add(time.Second)
	for len(waiting) > 0 {
		waiting = slices.DeleteFunc(waiting, func(w pending) bool {
			lead, _, ok := w.part.Leader()
			return ok && lead == uint64(w.preferred)
		})
		if len(waiting) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if time.Now().After(retransfer) {
			// etcd raft abandons a transfer the target did not complete
			// within an election timeout: ask again.
			for _, w := range waiting {
				if w.part.IsLeader() {
					w.part.TransferLeadership(uint64(w.preferred))
				}
			}
			retransfer = time.Now().Add(time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range waiting {
		rp := &resp.Topics[w.rt].Partitions[w.rp]
		err := kafkaErrorf(kerr.PreferredLeaderNotAvailable, "%s-%d: the preferred replica %d did not take the leadership within %v", resp.Topics[w.rt].Topic, rp.Partition, w.preferred, wait)
		rp.ErrorCode, rp.ErrorMessage = kafkaCode(err), errMessage(err)
	}
	return resp
}
