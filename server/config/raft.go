package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/replica"
)

// ReplicaLagTime is replica.lag.time.max.ms as a duration, for
// replica.RaftConfig.ReplicaLagTime.
func (c *Config) ReplicaLagTime() time.Duration {
	return time.Duration(c.ReplicaLagTimeMaxMs) * time.Millisecond
}

// RaftHostConfig is the raft host configuration the sluice.raft.* keys
// and node.id describe: NodeID, Workers, TickInterval, ElectionTicks,
// HeartbeatTicks, DisablePreVote, DisableCheckQuorum, DisableQuiescence,
// QuiesceTicks, LivenessInterval, LivenessTimeout and MaxBatch. The
// caller fills Transport, HardState and Logger (and Now, for tests).
func (c *Config) RaftHostConfig() replica.HostConfig {
	ms := func(n int32) time.Duration { return time.Duration(n) * time.Millisecond }
	return replica.HostConfig{
		NodeID:             uint64(c.NodeID),
		Workers:            int(c.RaftWorkers),
		ElectionTicks:      int(c.RaftElectionTicks),
		HeartbeatTicks:     int(c.RaftHeartbeatTicks),
		TickInterval:       ms(c.RaftTickMs),
		DisablePreVote:     !c.RaftPreVoteEnable,
		DisableCheckQuorum: !c.RaftCheckQuorumEnable,
		DisableQuiescence:  !c.RaftQuiesceEnable,
		QuiesceTicks:       int(c.RaftQuiesceTicks),
		LivenessInterval:   ms(c.RaftLivenessIntervalMs),
		LivenessTimeout:    ms(c.RaftLivenessTimeoutMs),
		MaxBatch:           int(c.RaftMaxBatchGroups),
	}
}

// validateRaft reports the rules between the sluice.raft.* keys (those of
// replica.HostConfig.Validate, and quiescence's reliance on PreVote and
// CheckQuorum) through bad.
func (c *Config) validateRaft(bad func(key string, reason error)) {
	if c.RaftHeartbeatTicks >= c.RaftElectionTicks {
		bad("sluice.raft.election.ticks", fmt.Errorf("must exceed sluice.raft.heartbeat.ticks (%d): a leader must be heard from several times within a follower's election timeout", c.RaftHeartbeatTicks))
	}
	if c.RaftHeartbeatTicks < c.RaftElectionTicks && c.RaftTickMs > 0 && c.RaftLivenessTimeoutMs > 0 {
		h := c.RaftHostConfig()
		h.DisableCheckQuorum = false // its own rule, below
		if h.ReadLease() <= 0 {
			bad("sluice.raft.election.ticks", fmt.Errorf("leaves a leader no read lease (replica/raft_lease.go: min((ticks-2) * sluice.raft.tick.ms, sluice.raft.liveness.timeout.ms) must exceed one tick); use at least 4 ticks and a liveness timeout over one tick"))
		}
	}
	if c.RaftLivenessTimeoutMs <= c.RaftLivenessIntervalMs {
		bad("sluice.raft.liveness.timeout.ms", fmt.Errorf("must exceed sluice.raft.liveness.interval.ms (%d): a peer is reported down when silent this long, and it sends a liveness heartbeat every interval", c.RaftLivenessIntervalMs))
	}
	if !c.RaftCheckQuorumEnable && !c.SoloQuorum() {
		bad("sluice.raft.check.quorum.enable", errors.New("a replicated leader serves reads only on its read lease, which rests on CheckQuorum (replica/raft_lease.go: voters refuse votes while they heard from their leader): without it no read would be served"))
	}
	if c.RaftQuiesceEnable && (!c.RaftPreVoteEnable || !c.RaftCheckQuorumEnable) {
		bad("sluice.raft.quiesce.enable", errors.New("quiescence needs sluice.raft.prevote.enable and sluice.raft.check.quorum.enable: a replica that missed its group's quiesce message and stands for election must not disrupt a group whose leader is alive; turn those on or set this false"))
	}
}
