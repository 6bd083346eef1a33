package server

import (
	"context"
	crand "crypto/rand"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker side of the cluster (Kafka's BrokerLifecycleManager): it
// registers with the active controller (node id, advertised listeners,
// rack; the answer is its broker epoch), heartbeats every
// broker.heartbeat.interval.ms with the metadata offset it applied, starts
// fenced and is unfenced by the controller once caught up; a registration
// the controller no longer knows (STALE_BROKER_EPOCH) is made again. The
// leadership loop reports the partitions this broker leads (leader epoch,
// ISR) to the controller when they differ from the metadata, and loads the
// group coordinator of each __consumer_offsets partition it leads (unloads
// those it stopped leading).

// leadershipCheckEvery is how often the leadership loop looks at the held
// partitions besides the kicks of leadership changes.
const leadershipCheckEvery = 500 * time.Millisecond

// heartbeatLoop registers and heartbeats until the cluster stops.
func (c *cluster) heartbeatLoop() {
	defer c.wg.Done()
	b := c.b
	var incarnation [16]byte
	crand.Read(incarnation[:])
	every := time.Duration(b.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
	logged := ""
	for {
		wait := every
		var err error
		if c.heartbeatsOff.Load() {
			// tests: the controller hears nothing
		} else if c.epoch.Load() < 0 {
			err = c.register(incarnation)
			if err != nil {
				wait = min(every, 250*time.Millisecond)
			}
		} else {
			_, err = c.heartbeatOK(false, 5*time.Second)
		}
		if err != nil && err.Error() != logged {
			b.logger.Info("sluice: broker: controller unreachable; retrying", "err", err)
			logged = err.Error()
		} else if err == nil {
			logged = ""
		}
		select {
		case <-c.stopping():
			return
		case <-time.After(wait):
		}
	}
}

// register asks the active controller to register this broker.
func (c *cluster) register(incarnation [16]byte) error {
	b := c.b
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = c.self
	req.ClusterID = clusterIDFor(&b.cfg)
	req.IncarnationID = incarnation
	for _, l := range b.cfg.AdvertisedListeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name, rl.Host, rl.Port = l.Name, l.Host, uint16(l.Port)
		if rl.Host == "" {
			rl.Host = "127.0.0.1"
		}
		req.Listeners = append(req.Listeners, rl)
	}
	if b.cfg.BrokerRack != "" {
		rack := b.cfg.BrokerRack
		req.Rack = &rack
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	kresp, err := c.toController(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	c.epoch.Store(resp.BrokerEpoch)
	b.logger.Info("sluice: broker: registered with the controller", "broker_epoch", resp.BrokerEpoch)
	_, err = c.heartbeatOK(false, 5*time.Second)
	return err
}

// heartbeatOK sends one heartbeat, waiting at most wait; shutdown asks to
// leave (controlled shutdown: the controller fences the broker). It
// returns whether the controller answered ShouldShutdown.
func (c *cluster) heartbeatOK(shutdown bool, wait time.Duration) (shouldShutdown bool, err error) {
	b := c.b
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID = c.self
	req.BrokerEpoch = c.epoch.Load()
	req.CurrentMetadataOffset = b.meta.ReplicatedOffset() - 1
	req.WantShutdown = shutdown || c.shuttingDown.Load()
	ctx, cancel := context.WithTimeout(c.ctx, wait)
	defer cancel()
	kresp, err := c.toController(ctx, req)
	if err != nil {
		return false, err
	}
	resp := kresp.(*kmsg.BrokerHeartbeatResponse)
	if resp.ErrorCode == kerr.StaleBrokerEpoch.Code {
		c.epoch.Store(-1) // register again
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, err
	}
	return resp.ShouldShutdown, nil
}

// kickLeadership asks the leadership loops to look now (a held
// partition's raft leadership changed). It never blocks (raft's worker
// calls it).
func (c *cluster) kickLeadership() {
	for _, ch := range []chan struct{}{c.leadCh, c.reportCh} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// reportLoop reports this broker's leaderships to the controller, drives
// the moves of the partitions it leads and updates the replication
// throttle; it has a goroutine of its own, so a controller slow to answer
// never delays the coordinator's loads (coordinatorLoop).
func (c *cluster) reportLoop() {
	defer c.wg.Done()
	t := time.NewTicker(leadershipCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stopping():
			return
		case <-t.C:
		case <-c.reportCh:
		case <-c.throttleCh:
			c.updateThrottles() // the metadata moved
			continue
		}
		c.driveMoves()
		// After the moves: a replica just added is paced from its first
		// append (its throttle follows the metadata's target).
		c.updateThrottles()
		c.reportLeadership()
		c.leaveIfFenced()
	}
}

// leaveIfFenced moves this broker's partition leaderships to other
// replicas while the controller has it fenced and it is not shutting down
// (its heartbeats do not reach the controller, say): clients no longer
// see it in Metadata, so what it leads would be unreachable to them.
// Kafka's controller moves leadership off a fenced broker; here the
// broker hands it over itself (raft leadership transfer).
func (c *cluster) leaveIfFenced() {
	b := c.b
	epoch := c.epoch.Load()
	if epoch < 0 || c.shuttingDown.Load() {
		return
	}
	if br, ok := b.meta.Broker(c.self); !ok || !br.Fenced || br.Epoch != epoch {
		return
	}
	b.mu.RLock()
	parts := make([]*replica.Partition, 0, len(b.parts))
	for _, part := range b.parts {
		parts = append(parts, part)
	}
	b.mu.RUnlock()
	moved := 0
	for _, part := range parts {
		if part.IsLeader() {
			if _, err := part.TransferLeadershipAway(); err == nil {
				moved++
			}
		}
	}
	if moved > 0 {
		b.logger.Warn("sluice: broker: fenced by the controller while running; moving its leaderships to other replicas", "partitions", moved)
	}
}

// coordinatorLoop loads and unloads the group and transaction
// coordinators' partitions as leaderships move.
func (c *cluster) coordinatorLoop() {
	defer c.wg.Done()
	t := time.NewTicker(leadershipCheckEvery)
	defer t.Stop()
	b := c.b
	shards := []*coordinatorShards{
		{topic: offsetsTopic, name: "group coordinator", loaded: map[int32]loadedShard{},
			load: func(p, epoch int32, part *replica.Partition) error {
				return b.coord.Load(p, offsetsLog{part, b.now, epoch})
			},
			unload: b.coord.Unload},
		{topic: txnTopic, name: "transaction coordinator", loaded: map[int32]loadedShard{},
			load: func(p, epoch int32, part *replica.Partition) error {
				return b.txn.Load(p, epoch, offsetsLog{part, b.now, epoch})
			},
			unload: b.txn.Unload},
	}
	for {
		select {
		case <-c.stopping():
			return
		case <-t.C:
		case <-c.leadCh:
		}
		for _, s := range shards {
			c.coordinatorLeadership(s)
		}
	}
}

// coordinatorShards are the partitions of an internal topic loaded into
// its coordinator.
type coordinatorShards struct {
	topic, name string
	loaded      map[int32]loadedShard
	// load replays partition p (led in epoch) into the coordinator;
	// unload drops it.
	load   func(p, epoch int32, part *replica.Partition) error
	unload func(p int32)
}

// loadedShard is a partition loaded into a coordinator: the replica, the
// leader epoch it was loaded in, and whether the load failed (then it is
// tried again).
type loadedShard struct {
	part   *replica.Partition
	epoch  int32
	failed *atomic.Bool
}

// coordinatorLeadership loads the coordinator state of the partitions of
// s's topic this broker leads and unloads those it no longer leads, or
// leads in a later epoch than it loaded them (another leader may have
// written in between). A new leader loads once its high watermark reached
// its log end (raft committed everything of the earlier terms), so no
// committed record is missed.
func (c *cluster) coordinatorLeadership(s *coordinatorShards) {
	b := c.b
	b.mu.RLock()
	held := map[int32]*replica.Partition{}
	for tp, part := range b.parts {
		if tp.topic == s.topic {
			held[tp.partition] = part
		}
	}
	b.mu.RUnlock()
	for p, l := range s.loaded {
		_, epoch, _ := l.part.Leader()
		if held[p] != l.part || !l.part.IsLeader() || epoch != l.epoch || l.failed.Load() {
			s.unload(p)
			delete(s.loaded, p)
			b.logger.Debug("sluice: "+s.name+": unloaded a partition", "topic", s.topic, "partition", p, "leader", l.part.IsLeader(), "load_failed", l.failed.Load())
		}
	}
	for p, part := range held {
		if _, ok := s.loaded[p]; ok || !part.IsLeader() || part.HighWatermark() < part.LogEndOffset() {
			continue
		}
		_, epoch, _ := part.Leader()
		l := loadedShard{part: part, epoch: epoch, failed: &atomic.Bool{}}
		s.loaded[p] = l
		b.logger.Debug("sluice: "+s.name+": loading a partition (its leader now)", "topic", s.topic, "partition", p, "leader_epoch", epoch)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := s.load(p, epoch, part); err != nil {
				b.logger.Warn("sluice: "+s.name+": loading a partition failed; retried", "topic", s.topic, "partition", p, "err", err)
				l.failed.Store(true)
				c.kickLeadership()
			}
		}()
	}
}

// reportLeadership tells the controller about the partitions this broker
// leads whose leader, epoch or ISR differ from the metadata's.
func (c *cluster) reportLeadership() {
	b := c.b
	if c.epoch.Load() < 0 || c.holdReports.Load() {
		return // not registered; or a reconciler pass reports at its end
	}
	b.mu.RLock()
	parts := make(map[topicPartition]*replica.Partition, len(b.parts))
	for tp, part := range b.parts {
		parts[tp] = part
	}
	b.mu.RUnlock()
	byTopic := map[[16]byte][]kmsg.AlterPartitionRequestTopicPartition{}
	for tp, part := range parts {
		if !part.IsLeader() {
			continue
		}
		t, ok := b.meta.Topic(tp.topic)
		if !ok || int(tp.partition) >= len(t.Leaders) {
			continue
		}
		_, epoch, _ := part.Leader()
		isr := raftIDs(part.ISR())
		if isMoving(t, tp.partition) {
			isr = withLeaving(isr, part, t.TargetReplicas(tp.partition))
		}
		cur := t.Leaders[tp.partition]
		if cur.Leader == c.self && cur.LeaderEpoch == epoch && slices.Equal(cur.ISR, isr) {
			continue
		}
		if cur.LeaderEpoch > epoch {
			continue // an older view than the metadata's
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.NewISR = tp.partition, epoch, isr
		rp.PartitionEpoch = t.Moves[tp.partition].Epoch // as of this broker's metadata
		byTopic[t.ID] = append(byTopic[t.ID], rp)
	}
	if len(byTopic) == 0 {
		return
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch = c.self, c.epoch.Load()
	for id, ps := range byTopic {
		rt := kmsg.NewAlterPartitionRequestTopic()
		rt.TopicID, rt.Partitions = id, ps
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	if _, err := c.toController(ctx, req); err != nil {
		b.logger.Debug("sluice: broker: leadership report not delivered; retried", "err", err)
	}
}

// raftIDs converts raft replica ids to Kafka broker ids, ascending after
// the first (the leader).
func raftIDs(ids []uint64) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	if len(out) > 1 {
		slices.Sort(out[1:])
	}
	return out
}

// controlledShutdownWait bounds how long a shutting-down broker waits for
// its leaderships to move away.
const controlledShutdownWait = 10 * time.Second

// controlledShutdown moves every leadership this broker holds (its
// partitions' and the metadata log's) to another in-sync replica, waits
// until none is left or the bound passes, then tells the controller it
// leaves (it is fenced: out of Metadata and placement). Kafka's controlled
// shutdown, with raft leadership transfer doing the controller's leader
// election.
func (c *cluster) controlledShutdown() {
	b := c.b
	c.shuttingDown.Store(true)
	deadline := time.Now().Add(controlledShutdownWait)
	start := time.Now()
	for time.Now().Before(deadline) {
		b.mu.RLock()
		parts := make([]*replica.Partition, 0, len(b.parts))
		for _, part := range b.parts {
			parts = append(parts, part)
		}
		b.mu.RUnlock()
		leading := 0
		for _, part := range append(parts, c.metaPart) {
			if !part.IsLeader() {
				continue
			}
			// A partition with nobody to take over (one replica, or
			// none in sync) stays led by this broker until it stops.
			if _, err := part.TransferLeadershipAway(); err == nil {
				leading++
			}
		}
		if leading == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.logger.Info("sluice: controlled shutdown: leaderships moved", "elapsed", time.Since(start).Round(time.Millisecond).String())
	if c.epoch.Load() >= 0 {
		// Bounded short: the controller may be stopping too.
		if _, err := c.heartbeatOK(true, 2*time.Second); err != nil {
			b.logger.Info("sluice: controlled shutdown: the controller did not answer; stopping anyway", "err", err)
		}
	}
}
