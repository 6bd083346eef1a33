package server

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reads a replicated leader serves need its read lease (replica's
// raft_lease.go: a quorum acknowledged it as leader less than a lease
// length ago, checked on the monotonic clock): a leader cut off from its
// quorum or paused (SIGSTOP, a frozen VM) stops serving reads before
// another broker can be elected and accept writes, instead of answering
// from state a newer leader has superseded. Fetch, ListOffsets and
// OffsetForLeaderEpoch of a partition this broker leads, and the group
// coordinator's requests for a group whose __consumer_offsets partition
// it leads:
//
//  1. before reading, wait (at most leaseWait, within the request's
//     time) for a lease renewal where there is none: steady reads find
//     one, renewed in the background at half its length; a quiesced
//     partition's first read waits one heartbeat round trip;
//  2. check it again after taking the state the answer carries (the high
//     watermark, the records, the committed offset), right before
//     answering: a pause in between shows as an expired lease.
//
// Without a lease Fetch, ListOffsets and OffsetForLeaderEpoch answer
// NOT_LEADER_OR_FOLLOWER (no leader hint), the coordinator
// NOT_COORDINATOR: retriable errors after which clients refresh their
// metadata or find the coordinator again. A group of one voter always
// holds one. Writes need none: a leader that lost its
// quorum cannot commit.

// leaseWait bounds how long a read waits for a lease renewal
// (Broker.leaseWait; tests shorten it).
const leaseWait = 300 * time.Millisecond

// needsLease reports whether a read of p must wait for a lease renewal: a
// partition this broker leads without a lease (the check asks for the
// renewal).
func needsLease(p *replica.Partition) bool {
	return p.IsLeader() && p.CheckReadLease() != nil
}

// awaitReadLeases waits, at most leaseWait (less when ctx ends sooner),
// until every partition of wait (those needsLease found) holds a read
// lease; the renewals run together. The answers check each lease again
// (notLeader, CheckReadLease).
func (b *Broker) awaitReadLeases(ctx context.Context, wait []*replica.Partition) {
	if len(wait) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, b.leaseWait)
	defer cancel()
	for _, p := range wait {
		p.AwaitReadLease(ctx)
	}
}

// coordinatorSuspect is the coordinator's Suspect: the broker holds
// __consumer_offsets partition p without a read lease (as a follower, or
// a leader without one). It never waits.
func (b *Broker) coordinatorSuspect(p int32) bool {
	part, ok := b.partition(offsetsTopic, p)
	// Not IsLeader first: a replica that stepped down serves from its
	// shard until the coordinator loop unloads it, and CheckReadLease
	// refuses a follower.
	return ok && part.CheckReadLease() != nil
}

// groupPartitions returns the __consumer_offsets partitions of the groups
// a coordinator request names that need a lease renewal (needsLease; none
// for ListGroups, which covers them all and answers from what each lease
// allows).
func (b *Broker) groupPartitions(req kmsg.Request) []*replica.Partition {
	var groups []string
	switch r := req.(type) {
	case *kmsg.OffsetFetchRequest:
		groups = append(groups, r.Group)
		for _, g := range r.Groups {
			groups = append(groups, g.Group)
		}
	case *kmsg.OffsetCommitRequest:
		groups = append(groups, r.Group)
	case *kmsg.JoinGroupRequest:
		groups = append(groups, r.Group)
	case *kmsg.SyncGroupRequest:
		groups = append(groups, r.Group)
	case *kmsg.HeartbeatRequest:
		groups = append(groups, r.Group)
	case *kmsg.LeaveGroupRequest:
		groups = append(groups, r.Group)
	case *kmsg.DescribeGroupsRequest:
		groups = append(groups, r.Groups...)
	case *kmsg.DeleteGroupsRequest:
		groups = append(groups, r.Groups...)
	case *kmsg.OffsetDeleteRequest:
		groups = append(groups, r.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		groups = append(groups, r.Group)
	case *kmsg.ConsumerGroupDescribeRequest:
		groups = append(groups, r.Groups...)
	}
	var parts []*replica.Partition
	seen := map[int32]bool{}
	for _, g := range groups {
		if g == "" {
			continue
		}
		p := b.coord.Partition(g)
		if seen[p] {
			continue
		}
		seen[p] = true
		if part, ok := b.partition(offsetsTopic, p); ok && needsLease(part) {
			parts = append(parts, part)
		}
	}
	return parts
}

// recheckOffsetFetch turns an OffsetFetch answer into NOT_COORDINATOR for
// every group whose partition lost its lease while the answer was taken
// (the check right before answering).
func (b *Broker) recheckOffsetFetch(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	code := kerr.NotCoordinator.Code
	if req.Version <= 7 {
		if req.Group != "" && b.coordinatorSuspect(b.coord.Partition(req.Group)) {
			resp.ErrorCode = code
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					p := &resp.Topics[i].Partitions[j]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, code
				}
			}
		}
		return
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode != 0 || !b.coordinatorSuspect(b.coord.Partition(g.Group)) {
			continue
		}
		g.ErrorCode = code
		for j := range g.Topics {
			for k := range g.Topics[j].Partitions {
				p := &g.Topics[j].Partitions[k]
				p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, code
			}
		}
	}
}

// awaitFetchLeases is awaitReadLeases for a fetch's partitions.
func (b *Broker) awaitFetchLeases(ctx context.Context, fps []*fetchPartition) {
	var wait []*replica.Partition // allocated only when a lease is missing
	for _, fp := range fps {
		if part, ok := b.partition(fp.topic, fp.partition); ok && needsLease(part) {
			wait = append(wait, part)
		}
	}
	b.awaitReadLeases(ctx, wait)
}

// awaitTopicLeases is awaitReadLeases for the partitions of a request's
// topics (ListOffsets, OffsetForLeaderEpoch).
func awaitTopicLeases[T any](ctx context.Context, b *Broker, topics []T, each func(T) (string, []int32)) {
	var wait []*replica.Partition
	for _, t := range topics {
		name, ps := each(t)
		for _, p := range ps {
			if part, ok := b.partition(name, p); ok && needsLease(part) {
				wait = append(wait, part)
			}
		}
	}
	b.awaitReadLeases(ctx, wait)
}
