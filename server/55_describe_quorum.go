package server

// DescribeQuorum, versions 0-2 (KIP-595; kafka-metadata-quorum.sh
// describe --status and --replication): the metadata log's raft quorum as
// its leader, the active controller, sees it. v1 adds each replica's
// LastFetchTimestamp and LastCaughtUpTimestamp (KIP-836); v2 (KIP-853) the
// top-level and partition ErrorMessage, each replica's directory id (zero:
// Sluice has none) and Nodes, the voters with their controller listeners.
//
// As in Kafka, the active controller answers (KafkaRaftClient's
// handleDescribeQuorumRequest, LeaderState.describeQuorum) and a broker
// forwards the request to it (KafkaApis: forwardToController). The only
// partition is __cluster_metadata-0; any other is INVALID_REQUEST, and a
// node that lost the leadership meanwhile answers NOT_LEADER_OR_FOLLOWER
// for it. A single node has no quorum: UNSUPPORTED_VERSION, as a Kafka
// broker that cannot forward.
//
// The fields, from the metadata group's raft state on the leader:
// LeaderID and LeaderEpoch are its leader and term, HighWatermark its
// commit point as an offset. CurrentVoters are the group's voters and
// Observers its learners (the brokers that are not voters). LogEndOffset
// is the offset after the replica's raft Match (-1 while the leader knows
// none); LastCaughtUpTimestamp the last time its Match reached the
// leader's log end (-1: not since this leader was elected). Kafka's
// LastFetchTimestamp is a replica's last fetch of the metadata log; Sluice
// has no fetches there (the leader pushes raft messages), so for a broker
// it is the broker's last heartbeat (or registration) to the active
// controller (controller.Controller.LastBeats; -1 if this process never heard one),
// which is what fences a silent broker; a voter that is no broker sends
// none, and its last catch-up stands for it. The leader's own are now, as
// in Kafka. Timestamps are the leader's wall clock (ms since the epoch).

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 55, minVersion: 0, maxVersion: 2, serve: serveDescribeQuorum})
}

func serveDescribeQuorum(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	fail := func(err error) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = kafkaCode(err), errMessage(err)
		return resp, nil
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != metaTopic || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		// Kafka: "Until we support multi-raft, we treat topic partition
		// mismatches as invalid requests."
		return fail(kafkaErrorf(kerr.InvalidRequest, "DescribeQuorum describes %s partition 0 only", metaTopic))
	}
	if fresp, ok, err := b.forward(ctx, cc, req, nil); ok {
		if err != nil {
			return fail(err)
		}
		return fresp, nil
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metaTopic
	rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{b.cl.describeQuorum()}
	resp.Topics = append(resp.Topics, rt)
	if req.Version >= 2 {
		resp.Nodes = b.cl.quorumNodes()
	}
	return resp, nil
}

// describeQuorum is the metadata partition's DescribeQuorum answer on
// this node (NOT_LEADER_OR_FOLLOWER unless it leads the metadata group).
func (c *cluster) describeQuorum() kmsg.DescribeQuorumResponseTopicPartition {
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.Partition = 0
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = -1, -1, -1
	leader, term, ok := c.metaPart.Leader()
	prog, err := c.metaPart.Progress()
	if !ok || int32(leader) != c.self || err != nil {
		perr := kafkaErrorf(kerr.NotLeaderForPartition, "node %d does not lead the metadata log (the active controller is %d)", c.self, c.controllerID())
		rp.ErrorCode, rp.ErrorMessage = kafkaCode(perr), errMessage(perr)
		return rp
	}
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = c.self, term, c.metaPart.HighWatermark()
	wall := c.b.now() // the leader's wall clock
	mono := time.Now()
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return -1
		}
		return wall.Add(-mono.Sub(t)).UnixMilli()
	}
	beats := c.act.LastBeats()
	for _, pr := range prog {
		id := int32(pr.ID)
		rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		rs.ReplicaID = id
		if id == c.self {
			rs.LogEndOffset = c.metaPart.LogEndOffset()
		} else if pr.Match > 0 {
			if off, err := c.metaPart.OffsetAfterIndex(pr.Match); err == nil {
				rs.LogEndOffset = off
			} else {
				rs.LogEndOffset = -1
			}
		} else {
			rs.LogEndOffset = -1
		}
		rs.LastCaughtUpTimestamp = ms(pr.CaughtUp)
		beat, isBroker := beats[id]
		switch {
		case isBroker:
			rs.LastFetchTimestamp = ms(beat)
		case id == c.self:
			rs.LastFetchTimestamp = wall.UnixMilli()
		default:
			rs.LastFetchTimestamp = rs.LastCaughtUpTimestamp
		}
		if id == c.self {
			rs.LastCaughtUpTimestamp = wall.UnixMilli()
		}
		if pr.Learner {
			rp.Observers = append(rp.Observers, rs)
		} else {
			rp.CurrentVoters = append(rp.CurrentVoters, rs)
		}
	}
	return rp
}

// quorumNodes are DescribeQuorum v2's Nodes: each voter with its
// controller listener (controller.quorum.voters' address, under the first
// of controller.listener.names), as Kafka 4 lists its voters' endpoints.
func (c *cluster) quorumNodes() []kmsg.DescribeQuorumResponseNode {
	name := "CONTROLLER"
	if names := c.b.cfg.ControllerListenerNames; len(names) > 0 {
		name = names[0]
	}
	var out []kmsg.DescribeQuorumResponseNode
	for _, id := range c.voterIDs() {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = int32(id)
		host, port, err := net.SplitHostPort(c.voters[int32(id)])
		if p, perr := strconv.ParseUint(port, 10, 16); err == nil && perr == nil {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = name, host, uint16(p)
			n.Listeners = append(n.Listeners, l)
		}
		out = append(out, n)
	}
	return out
}
