// Package controller holds the active controller's duties: the rules by
// which the node leading the metadata group changes the cluster's
// metadata, driven over meta's Pebble store (whose records the metadata
// log replicates: meta.Store is the metadata log's state machine; every
// change the controller makes is a record proposed through it).
//
// # Duties, and the Kafka source of each rule
//
//   - Registration and broker epochs (ClusterControlManager
//     registerBroker): a registration is a record whose offset is the
//     broker's new epoch; a request naming another epoch is refused
//     (ErrStaleBrokerEpoch, Kafka's STALE_BROKER_EPOCH).
//   - Sessions and fencing (BrokerHeartbeatManager,
//     ReplicationControlManager.processBrokerHeartbeat): a broker's
//     session is its last heartbeat or registration, kept in memory; a
//     new controller term starts every session afresh. A broker silent
//     for longer than broker.session.timeout.ms is fenced. A fenced
//     broker is unfenced by a heartbeat once it caught up with the
//     metadata log up to its own registration; a broker that asks to shut
//     down (controlled shutdown) or to be fenced is fenced, and stays so
//     in that epoch.
//   - Leader and ISR changes (ReplicationControlManager.alterPartition):
//     a leader's report of its leadership and ISR, refused when its broker
//     epoch is stale or when it was computed before the partition's latest
//     reassignment record (partition epoch: INVALID_UPDATE_VERSION).
//   - Fenced brokers leave every ISR and every leadership as Metadata
//     reports them (ReplicationControlManager.handleBrokerFenced;
//     FenceOut).
//   - Reassignment completion (ReplicationControlManager, KIP-455): a
//     reassignment ends once the reported ISR holds every replica it adds
//     and none it removes.
//   - Decommission and unregistration (ClusterControlManager
//     unregisterBroker, KIP-500/631; Sluice drains first): a broker still
//     holding replicas is marked decommissioning and its replicas are
//     reassigned, a few partitions at a time, to the least loaded usable
//     broker; once it holds none it is fenced, and unregistered once its
//     session expired (so a running process does not register again).
//   - Preferred leader election and auto.leader.rebalance.enable
//     (KafkaController checkAndTriggerAutoLeaderRebalance, QuorumController
//     maybeBalancePartitionLeaders): every
//     leader.imbalance.check.interval.seconds, a broker whose preferred
//     partitions are led elsewhere for more than
//     leader.imbalance.per.broker.percentage of them gets back those whose
//     preferred replica is in the ISR and not being reassigned.
//   - Metadata learners: a broker that is not a controller voter is added
//     to the metadata group as a raft learner, once per term.
//   - Producer-id blocks (ProducerIdControlManager).
//
// Raft, not the controller, elects partition leaders: fencing only takes a
// broker out of Metadata, out of every ISR and out of placement.
//
// # What it needs from the broker
//
// The controller never imports the server: it is given a Store (the
// *meta.Store: reads, and changes proposed through the metadata log), a
// Host (the raft host's view: the metadata group's term and whether this
// node leads it, the controller voters, adding a metadata learner, which
// peers the transport sees down, a partition's leader and ISR, and asking
// leaders to hand their leadership to preferred replicas), a clock (Now)
// and a logger. Tests give it a fake Host, a manual clock and a store on
// an in-memory file system; no test waits on real time.
//
// # Goroutines and locks
//
// Run is one goroutine: it calls Check every CheckEvery and when kicked
// (Kick: a registration, a metadata change, a leadership change). A leader
// rebalance's elections run in one more goroutine at a time (they wait on
// leaders' transfers); Run waits for it before returning. The request
// methods (Register, Heartbeat, AlterPartition, Unregister, ...) run on
// the callers' goroutines. Controller.mu guards the in-memory session
// state; it is never held across a Store or Host call.
package controller
