package server

// AlterPartitionReassignments (v0-1) and ListPartitionReassignments (v0),
// KIP-455: move a partition's replicas to a new set online, cancel a move
// (null replicas), and list the moves in progress. Both are served by the
// active controller (forwarded from any broker). v1 of
// AlterPartitionReassignments adds AllowReplicationFactorChange (KIP-860):
// false refuses a target whose size differs from the current replicas'.
//
// The controller records the reassignment (meta.Store.Reassign: the
// replicas become Kafka's union, the target first, with adding and removing
// replicas); the partition's leader then drives its raft group there one
// change at a time (cluster_move.go), and the controller completes the
// reassignment once the leader reports an ISR holding the whole target and
// none of the removed replicas (the controller module).

import (
	"context"
	"errors"
	"slices"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 45, minVersion: 0, maxVersion: 1, serve: serveAlterPartitionReassignments})
	register(handler{key: 46, minVersion: 0, maxVersion: 0, serve: serveListPartitionReassignments})
}

func serveAlterPartitionReassignments(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	settled := func(kresp kmsg.Response) bool {
		r := kresp.(*kmsg.AlterPartitionAssignmentsResponse)
		for i, rt := range r.Topics {
			if i >= len(req.Topics) {
				break
			}
			t, ok := b.meta.Topic(rt.Topic)
			for j, rp := range rt.Partitions {
				if rp.ErrorCode != 0 || j >= len(req.Topics[i].Partitions) {
					continue
				}
				if !ok || !reassignmentShows(t, rp.Partition, req.Topics[i].Partitions[j].Replicas) {
					return false
				}
			}
		}
		return true
	}
	if fresp, ok, err := b.forward(ctx, cc, req, settled); ok {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = kafkaCode(err), errMessage(err)
			return resp, nil
		}
		return fresp, nil
	}
	type slot struct{ t, p int }
	var reqs []meta.ReassignRequest
	var slots []slot
	for i, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.meta.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case !known || rp.Partition < 0 || rp.Partition >= t.Partitions:
				err = kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", rt.Topic, rp.Partition)
			case req.Version >= 1 && !req.AllowReplicationFactorChange && rp.Replicas != nil &&
				len(rp.Replicas) != len(t.TargetReplicas(rp.Partition)):
				// KIP-860: against the replication factor the partition has
				// or, while it moves, is moving to.
				err = kafkaErrorf(kerr.InvalidReplicationFactor, "the replication factor of %s-%d would change from %d to %d, and allowReplicationFactorChange is false",
					rt.Topic, rp.Partition, len(t.TargetReplicas(rp.Partition)), len(rp.Replicas))
			default:
				target := rp.Replicas
				if target != nil {
					target = slices.Clone(target)
				}
				reqs = append(reqs, meta.ReassignRequest{TopicID: t.ID, Partition: rp.Partition, Target: target})
				slots = append(slots, slot{i, len(st.Partitions)})
			}
			sp.ErrorCode, sp.ErrorMessage = kafkaCode(err), errMessage(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(reqs) > 0 {
		errs, err := b.meta.Reassign(reqs)
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = controllerCode(err), errMessage(err)
			return resp, nil
		}
		for k, s := range slots {
			if errs[k] != nil {
				sp := &resp.Topics[s.t].Partitions[s.p]
				sp.ErrorCode, sp.ErrorMessage = reassignCode(errs[k]), errMessage(errs[k])
			}
		}
		b.cl.act.Kick()
	}
	return resp, nil
}

// reassignmentShows reports whether t shows the reassignment of partition
// p to target as accepted (nil target: a cancel).
func reassignmentShows(t meta.Topic, p int32, target []int32) bool {
	if int(p) >= len(t.Assignments) {
		return false
	}
	_, _, moving := t.Reassigning(p)
	if target == nil {
		return !moving
	}
	got := t.TargetReplicas(p)
	return len(got) == len(target) && !slices.ContainsFunc(target, func(id int32) bool { return !slices.Contains(got, id) })
}

// reassignCode maps meta.Store.Reassign's per-partition errors to Kafka's
// codes.
func reassignCode(err error) int16 {
	switch {
	case errors.Is(err, meta.ErrNoReassignmentInProgress):
		return kerr.NoReassignmentInProgress.Code
	case errors.Is(err, meta.ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, meta.ErrUnknownTopicID), errors.Is(err, meta.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, meta.ErrNotController):
		return kerr.NotController.Code
	}
	return kerr.UnknownServerError.Code
}

func serveListPartitionReassignments(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	// The active controller answers, as Kafka's brokers forward it: this
	// broker's copy of the metadata may be behind (a client takes any
	// broker that names itself the controller for it).
	if fresp, ok, err := b.forward(ctx, cc, req, nil); ok {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = kafkaCode(err), errMessage(err)
			return resp, nil
		}
		return fresp, nil
	}
	var want map[string][]int32 // nil: every partition
	if req.Topics != nil {
		want = map[string][]int32{}
		for _, rt := range req.Topics {
			want[rt.Topic] = append(want[rt.Topic], rt.Partitions...)
		}
	}
	byTopic := map[string]int{}
	for _, r := range b.meta.Reassignments() {
		if want != nil {
			ps, ok := want[r.Topic]
			if !ok || !slices.Contains(ps, r.Partition) {
				continue
			}
		}
		i, ok := byTopic[r.Topic]
		if !ok {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = r.Topic
			resp.Topics = append(resp.Topics, st)
			i = len(resp.Topics) - 1
			byTopic[r.Topic] = i
		}
		sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		sp.Partition = r.Partition
		sp.Replicas = orEmpty(r.Replicas)
		sp.AddingReplicas = orEmpty(r.Adding)
		sp.RemovingReplicas = orEmpty(r.Removing)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	return resp, nil
}

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return slices.Clone(ids)
}
