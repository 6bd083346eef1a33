// Package config is the broker's static configuration: Kafka's
// server.properties key names, read from a properties file and from
// `--set key=value` overrides.
//
//	sluice serve [FILE | --config FILE] [--set key=value]...
//
// FILE uses java.util.Properties syntax (see ParseProperties). Every --set
// replaces the file's value for its key, and --set may repeat (the last one
// for a key wins). Unknown keys and bad values are errors that name the key
// and where it was given (the file's line, or --set); Load and Validate
// report every problem at once (errors.Join of *Error).
//
// # Keys
//
// One table in keys.go maps each Kafka key onto one typed field of Config;
// each field's comment gives its key, unit, allowed range, Sluice's default
// and Kafka's. A key that is the broker default of a topic config
// (log.segment.bytes for segment.bytes, log.cleanup.policy for
// cleanup.policy, ...) reads its values with the topic config table's
// parser (replica.TopicConfigKeys), so both accept the same values. Keys
// lists the names.
//
// Every other broker key of Kafka 4 (kafkakeys.go: num.io.threads,
// socket.send.buffer.bytes, transaction.state.log.*, ssl.*, ... and
// listener.name.<listener>.<key>) is accepted, its value checked by its
// Kafka type, and not acted on: Unacted lists them, and sluice serve names
// them in one line at start-up, so Kafka's own config/server.properties
// starts unchanged. A key in neither table is an error, with the closest
// known key as a "did you mean". Sluice differs from Kafka's defaults in:
//
//   - log.flush.interval.messages = 1 (Kafka: 9223372036854775807). Every
//     acknowledged write is fsynced before the ack; concurrent writers share
//     one fsync (group commit). Set it to 9223372036854775807 for Kafka's
//     behaviour: acks once the write is in the page cache, and durability
//     comes from replication and log.flush.interval.ms.
//   - node.id = 1 (Kafka: none, -1 means unset).
//   - process.roles = broker,controller and controller.listener.names =
//     CONTROLLER (Kafka: none, and KRaft requires both), so that with
//     controller.quorum.voters empty the node runs alone as before.
//   - socket.request.max.bytes at most 1000000000 (Kafka: 2147483647);
//     see SocketRequestMaxBytes.
//   - listeners = PLAINTEXT://127.0.0.1:9092 (Kafka: PLAINTEXT://:9092, all
//     interfaces).
//   - log.dirs = ./data (Kafka: log.dir = /tmp/kafka-logs).
//   - queued.max.request.bytes = 536870912 (Kafka: -1, unbounded), so what
//     clients declare cannot exhaust the broker's memory.
//
// sluice.request.receive.timeout.ms is Sluice's own key (Kafka has no
// broker-side limit on the time a request takes to arrive), and so are
// metrics.listen (Kafka exposes its metrics through JMX; Sluice serves
// Prometheus's text format, /healthz, /readyz and the web console on it,
// on 127.0.0.1:9644 by default; "none" or empty turns it off) and
// sluice.broker.down.warning.interval.ms.
//
// # Synonyms
//
// Like Kafka, some settings have several names, in units that differ; the
// more precise one wins whatever order they are given in:
//
//	log.dirs            > log.dir
//	log.roll.ms         > log.roll.hours
//	log.retention.ms    > log.retention.minutes > log.retention.hours
//
// Precedence is by name, not by source, as with Kafka's --override: a --set
// log.retention.hours does not beat log.retention.ms in the file. Synonyms
// are accepted by Set and Load, and reported by Source, but have no field
// of their own: String and Keys know only the canonical name.
//
// # Listeners
//
// Kafka's four security protocols are implemented: PLAINTEXT, SSL,
// SASL_PLAINTEXT and SASL_SSL (TLS first, then SASL over it). A listener is NAME://host:port; NAME maps to its
// protocol in listener.security.protocol.map. An SSL listener takes
// Kafka's ssl.* keys (SSLConfig: PEM keystores and truststores only),
// overridden per listener by listener.name.<lower-case name>.ssl.*
// (ListenerSSL). While advertised.listeners is not set,
// AdvertisedListeners follows listeners less the controller listeners, so
// the field always holds what clients are told; likewise the protocol map
// and inter.broker.listener.name follow the keys they derive from while
// not set.
//
// # Cluster
//
// Kafka's KRaft keys (process.roles, controller.listener.names,
// inter.broker.listener.name, controller.quorum.voters,
// controller.quorum.bootstrap.servers, broker.heartbeat.interval.ms,
// broker.session.timeout.ms, broker.rack, replica.lag.time.max.ms) and
// Sluice's sluice.raft.* keys (RaftHostConfig) describe a cluster. With
// controller.quorum.voters and controller.quorum.bootstrap.servers empty,
// the default, the node is a single node: a one-voter cluster (SoloQuorum;
// process.roles must stay broker,controller); with either set,
// Kafka's rules apply (cluster.go), and bootstrap servers form the voters
// by Sluice's rule (see QuorumBootstrapServers).
// controller.quorum.election.timeout.ms and controller.quorum.fetch.timeout.ms
// are not keys: raft's ticks (sluice.raft.election.ticks times
// sluice.raft.tick.ms) and the transport's liveness timeout cover them.
//
// Config holds slices and a map; Set replaces them and never writes through
// them, so copies of a Config may share them safely as long as callers do
// not modify them in place either.
package config

import (
	"math"
	"path/filepath"
)

// Config is the broker's static configuration. Build one with Default or
// Load; a zero Config is not valid.
type Config struct {
	// NodeID is this broker's id in the cluster. Kafka's broker.id is
	// accepted as a synonym; when both are set they must be equal.
	// Key node.id; int >= 0. Default 1 (Kafka: -1, meaning unset).
	NodeID   int32
	brokerID int32 // broker.id as set, or -1

	// Listeners are the addresses the broker accepts connections on.
	// Key listeners; comma-separated NAME://host:port. Default
	// PLAINTEXT://127.0.0.1:9092 (Kafka: PLAINTEXT://:9092). An empty host
	// means all interfaces; port 0 asks the OS for a free port (tests).
	// Names are unique and upper case; non-zero ports are unique.
	Listeners []Listener

	// AdvertisedListeners are the addresses given to clients in metadata.
	// Key advertised.listeners; same syntax as listeners. Default (and
	// Kafka's): the listeners less the controller listeners (those named
	// in controller.listener.names), which clients are never told of
	// (Kafka's rule: clients send requests only to brokers); so it is
	// empty on a controller-only node. A controller may list its
	// controller listener in advertised.listeners (Kafka 4's stock file
	// does, KIP-853): it is accepted, and left out of this field; a
	// broker-only node may not, and a controller-only node may list only
	// controller listeners. When
	// derived from listeners, an empty host
	// becomes 127.0.0.1 (Kafka would advertise the machine's canonical host
	// name) and a 0.0.0.0 or :: listener is an error that asks for
	// advertised.listeners (Kafka refuses to advertise the meta-address
	// too); when given, an empty host becomes 127.0.0.1 and 0.0.0.0 or ::
	// is an error. Names must be among the
	// listeners' names. Port 0 stands for the port the listener of the same
	// name actually bound; the server fills it in.
	AdvertisedListeners []Listener
	advertisedGiven     []Listener // advertised.listeners as set, controller listeners included

	// ListenerSecurityProtocolMap maps listener names to security protocols.
	// Key listener.security.protocol.map; comma-separated NAME:PROTOCOL.
	// Default (Kafka's) PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,
	// SASL_SSL:SASL_SSL,SSL:SSL plus NAME:PLAINTEXT for each name in
	// controller.listener.names (so CONTROLLER:PLAINTEXT by default), as
	// Kafka's effective map adds them while the key is not set; once it is
	// set, a clustered node's controller listener names must be in it.
	// Every listener's name must map to PLAINTEXT or SSL, the protocols
	// Sluice implements; an SSL listener needs a keystore (see SSL).
	ListenerSecurityProtocolMap map[string]string

	// ProcessRoles are the roles this node plays. Key process.roles;
	// broker, controller, or both comma-separated (either order, no
	// duplicates). Default broker,controller (Kafka: none, and it is
	// required): with controller.quorum.voters empty that is Sluice's
	// single node, its own controller. broker alone or controller alone
	// requires controller.quorum.voters, as Kafka requires a quorum for
	// process.roles. See IsBroker, IsController.
	ProcessRoles ProcessRoles

	// ControllerListenerNames name the listeners the controller quorum
	// uses. Key controller.listener.names; comma-separated listener names,
	// upper-cased, no duplicates. Default CONTROLLER (Kafka: none, and
	// required in KRaft). A listener with one of these names is a
	// controller listener: never advertised, never the inter-broker
	// listener, and only allowed with controller.quorum.voters set. A
	// controller must listen on every name given; a broker-only node on
	// none, and it reaches the controllers by the first one (Kafka's
	// rules). See ControllerListener.
	ControllerListenerNames []string

	// InterBrokerListenerName is the listener other brokers use to reach
	// this one (and, in Sluice, raft's transport). Key
	// inter.broker.listener.name; a listener name. Default: PLAINTEXT if a
	// non-controller listener has that name (Kafka's default, through
	// security.inter.broker.protocol=PLAINTEXT), else the first
	// non-controller listener's name (where Kafka would refuse to start);
	// setting it to "" returns to the default. On a broker it must be an
	// advertised listener's name, so never a controller listener (Kafka's
	// rule). See InterBrokerListener.
	InterBrokerListenerName string

	// QuorumVoters are the controller quorum's voters. Key
	// controller.quorum.voters; comma-separated id@host:port (Kafka's
	// syntax), host:port being the voter's controller listener. Default
	// empty (Kafka's): a single node, whose quorum is itself alone
	// (SoloQuorum: node.id at its inter-broker listener), unless
	// controller.quorum.bootstrap.servers forms them (see
	// QuorumBootstrapServers). When set: 1, 3 or
	// 5 voters (Sluice's rule: a raft quorum is a majority, so an even
	// count tolerates no more failures than one voter less), ids unique
	// and >= 1 (raft reserves 0), ports in 1..65535, hosts routable; a
	// controller's node.id must be among them and a broker-only node's
	// must not (Kafka's rules).
	QuorumVoters []Voter
	soloQuorum   bool // QuorumVoters is the synthesized one-voter quorum (SoloQuorum)

	// QuorumBootstrapServers are the controllers' endpoints, as Kafka 4
	// lists them (KIP-853). Key controller.quorum.bootstrap.servers;
	// comma-separated host:port. Default empty (Kafka's). While
	// controller.quorum.voters is not set, QuorumVoters is formed from
	// them, Sluice's rule: the servers in the order listed are voters 1,
	// 2, 3, ... (Sluice can neither ask them their ids nor add a voter to
	// a running quorum, as Kafka's add-controller does). So there are 1, 3
	// or 5 of them, and a controller must find its own controller endpoint
	// (an advertised or bound controller listener) at the position of its
	// node.id; Kafka's stock single node (node.id=1,
	// controller.quorum.bootstrap.servers=localhost:9093, its own
	// CONTROLLER listener) is a quorum of one. With
	// controller.quorum.voters set they are not used.
	QuorumBootstrapServers []string

	// BrokerHeartbeatIntervalMs is the time between a broker's heartbeats
	// to the controller. Key broker.heartbeat.interval.ms; milliseconds,
	// int >= 1. Default 2000 (Kafka's, KRaftConfigs). Sluice's failure
	// detection is the raft transport's liveness (sluice.raft.liveness.*),
	// which sees a dead peer in about a second.
	BrokerHeartbeatIntervalMs int32

	// BrokerSessionTimeoutMs is how long a broker stays registered
	// (unfenced) without being heard from; the controller fences it after.
	// Key broker.session.timeout.ms; milliseconds, int >= 1, and it must
	// exceed broker.heartbeat.interval.ms. Default 9000 (Kafka's,
	// KRaftConfigs). A partition's failover does not wait for it: raft
	// elects a new leader once the liveness timeout passes.
	BrokerSessionTimeoutMs int32

	// BrokerRack is the rack (or zone) of this broker, for spreading a
	// partition's replicas. Key broker.rack; any string. Default empty
	// (Kafka: null), meaning no rack.
	BrokerRack string

	// ReplicaLagTimeMaxMs is how long a follower may lag the leader's log
	// end and still count as in sync (ISR, min.insync.replicas). Key
	// replica.lag.time.max.ms; milliseconds, long >= 1. Default 30000
	// (Kafka's). It feeds replica.RaftConfig.ReplicaLagTime; see
	// ReplicaLagTime.
	ReplicaLagTimeMaxMs int64

	// AutoLeaderRebalanceEnable turns on the controller's leader
	// rebalance: every LeaderImbalanceCheckIntervalSeconds, a broker
	// leading too few of the partitions it is the preferred leader of
	// (more than LeaderImbalancePerBrokerPercentage of them led
	// elsewhere) gets their leaderships back, by preferred leader
	// election (raft leadership transfer). Key
	// auto.leader.rebalance.enable; default true (Kafka's).
	AutoLeaderRebalanceEnable bool
	// LeaderImbalanceCheckIntervalSeconds is how often the controller
	// checks the leader balance. Key
	// leader.imbalance.check.interval.seconds; seconds, long >= 1.
	// Default 300 (Kafka's).
	LeaderImbalanceCheckIntervalSeconds int64
	// LeaderImbalancePerBrokerPercentage is the share of a broker's
	// preferred partitions that may be led elsewhere before the
	// rebalance moves them back. Key leader.imbalance.per.broker.percentage;
	// percent, int 0-100. Default 10 (Kafka's).
	LeaderImbalancePerBrokerPercentage int32
	// UncleanLeaderElectionEnable is Kafka's unclean.leader.election.enable
	// (also a topic config). Raft never elects a replica missing a
	// committed record, so there is no unclean election to enable: the key
	// is accepted and only changes the message an unclean ElectLeaders
	// gets. Default false (Kafka's).
	UncleanLeaderElectionEnable bool

	// MetadataLogSegmentBytes is the segment size of the metadata log
	// (__cluster_metadata-0) in cluster mode. Key
	// metadata.log.segment.bytes (KRaft's); bytes, int >= 1024 (Kafka
	// asks for 8 MiB outside its tests). Default 8388608 (8 MiB; Kafka's
	// is 1 GiB, too coarse for MetadataMaxRetentionBytes to bound the log
	// on a small machine).
	MetadataLogSegmentBytes int32

	// MetadataMaxRetentionBytes bounds the metadata log: whole segments
	// are removed (raft log compaction) while it is larger, and a node
	// behind the log start catches up by a snapshot of the metadata state
	// instead. Key metadata.max.retention.bytes (KRaft's); bytes, long,
	// -1 for no bound. Default 104857600 (100 MiB, Kafka's). There is no
	// time-based bound (Kafka's metadata.max.retention.ms): the metadata
	// log is small and only its size matters.
	MetadataMaxRetentionBytes int64

	// The sluice.raft.* keys configure the process's raft host (one for
	// every partition's group and the metadata group), Sluice's own keys;
	// RaftHostConfig maps them onto replica.HostConfig, whose defaults
	// they share. Kafka's controller.quorum.election.timeout.ms and
	// controller.quorum.fetch.timeout.ms are not keys: raft's ticks cover
	// them (a follower that hears nothing stands after election.ticks to
	// twice that many ticks) and the transport's liveness timeout detects
	// a dead leader sooner.

	// RaftTickMs is the raft tick, the unit of the tick counts below. Key
	// sluice.raft.tick.ms; milliseconds, int >= 1. Default 100.
	RaftTickMs int32

	// RaftElectionTicks is raft's election timeout, randomized by raft in
	// [ticks, 2*ticks). Key sluice.raft.election.ticks; ticks, int >= 2,
	// and it must exceed sluice.raft.heartbeat.ticks and leave a leader a
	// read lease (replica/raft_lease.go: at least 4 ticks, with a
	// liveness timeout over one tick). Default 10 (1 to 2 s with the
	// default tick).
	RaftElectionTicks int32

	// RaftHeartbeatTicks is how often an awake leader heartbeats its
	// followers. Key sluice.raft.heartbeat.ticks; ticks, int >= 1.
	// Default 1.
	RaftHeartbeatTicks int32

	// RaftPreVoteEnable turns on raft's PreVote: a replica asks whether it
	// could win before it raises its term. Key sluice.raft.prevote.enable;
	// bool. Default true.
	RaftPreVoteEnable bool

	// RaftCheckQuorumEnable turns on raft's CheckQuorum: a leader that has
	// not heard from a quorum for an election timeout steps down, and a
	// voter refuses votes while it hears from its leader, which the read
	// lease rests on: a cluster refuses false. Key
	// sluice.raft.check.quorum.enable; bool. Default true.
	RaftCheckQuorumEnable bool

	// RaftQuiesceEnable lets idle groups stop ticking until a proposal, a
	// message or a liveness change wakes them. Key
	// sluice.raft.quiesce.enable; bool. Default true; true requires
	// PreVote and CheckQuorum on (replica.HostConfig's contract).
	RaftQuiesceEnable bool

	// RaftQuiesceTicks is how long a leader's group must be idle, every
	// live follower caught up, before it quiesces. Key
	// sluice.raft.quiesce.ticks; ticks, int >= 1. Default 2.
	RaftQuiesceTicks int32

	// RaftLivenessIntervalMs is how often the raft transport sends each
	// peer a liveness heartbeat (one small frame per broker pair, whatever
	// the number of groups). Key sluice.raft.liveness.interval.ms;
	// milliseconds, int >= 1. Default 250.
	RaftLivenessIntervalMs int32

	// RaftLivenessTimeoutMs is how long a peer may stay silent before it
	// is reported down, waking the groups it led so they elect at once.
	// Key sluice.raft.liveness.timeout.ms; milliseconds, int >= 1, and it
	// must exceed sluice.raft.liveness.interval.ms; keep it under the
	// election timeout so failover stays under 2 s. Default 1000.
	RaftLivenessTimeoutMs int32

	// RaftWorkers is the number of raft worker goroutines. Key
	// sluice.raft.workers; goroutines, int in [1, 1024]. Default 2.
	RaftWorkers int32

	// RaftMaxBatchGroups is the most groups one worker handles together.
	// Key sluice.raft.max.batch.groups; groups, int >= 1. Default 64.
	RaftMaxBatchGroups int32

	// LogDirs are the directories holding partition logs.
	// Key log.dirs (synonym log.dir; log.dirs wins); comma-separated paths,
	// at least one. Default ./data (Kafka: /tmp/kafka-logs).
	LogDirs []string

	// MetadataLogDir is the directory holding the metadata log
	// (__cluster_metadata-0), as Kafka's: "" places it in the first of
	// LogDirs. A separate disk keeps the metadata log writable when a
	// data disk fills (Kafka halts the broker when its metadata log dir
	// fails, KIP-858). Key metadata.log.dir; a path. Default "".
	MetadataLogDir string

	// NumPartitions is the partition count of topics created without one.
	// Key num.partitions; int >= 1. Default 1 (Kafka's).
	NumPartitions int32

	// DefaultReplicationFactor is the replication factor of topics created
	// without one. Key default.replication.factor; >= 1, at most 32767 (the
	// protocol's int16; Kafka declares an int). Default 1 (Kafka's).
	DefaultReplicationFactor int16

	// AutoCreateTopicsEnable creates unknown topics on metadata requests.
	// Key auto.create.topics.enable; bool. Default true (Kafka's).
	AutoCreateTopicsEnable bool

	// AutoCreateTopicsMaxPerRequest bounds how many topics one Metadata
	// request may auto-create (Sluice's own key; Kafka creates them all).
	// The topics past the bound are answered THROTTLING_QUOTA_EXCEEDED, a
	// retriable error, and not created; the ones created share one
	// metadata commit. Key sluice.auto.create.topics.max.per.request; int >= 1.
	// Default 1000.
	AutoCreateTopicsMaxPerRequest int32

	// MaxPartitions bounds the partitions the broker holds, all topics
	// together, internal ones included: a CreateTopics, CreatePartitions
	// or auto-creation past it is refused with POLICY_VIOLATION (Sluice's
	// own key; Kafka has none, Redpanda bounds partitions per core with
	// topic_partitions_per_shard). Key sluice.max.partitions; int >= 0. Default 0:
	// derived from the open-file limit (RLIMIT_NOFILE, which the broker
	// raises to its hard limit at start-up): (limit - max(1024, limit/4) -
	// the closed-segment cache (sluice.log.segment.open.files.max)) / 3, since an
	// open partition holds 3 descriptors (the active segment's .log,
	// .index and .timeindex) whatever its segment count, max(1024,
	// limit/4) is left for connections and the metadata store, and closed
	// segments share the cache; at least 1. A 20,000 limit gives 4,166;
	// 1,048,576 gives 218,453.
	MaxPartitions int32

	// LogSegmentOpenFilesMax bounds the descriptors the broker keeps open
	// for closed segments' .log files, all partitions together: they are
	// opened on demand and the least recently read closed past it (a file
	// still being sent to a consumer closes when the send ends). Closed
	// segments' index files are held in memory and need none; each
	// partition's active segment keeps its 3 open outside this bound.
	// Sluice's own key (Kafka keeps every segment open). Key
	// sluice.log.segment.open.files.max; descriptors, int >= 0. Default 0:
	// derived from the open-file limit, limit/8 (at least 64; 4096 when
	// the limit is unknown): 2,500 at 20,000, 131,072 at 1,048,576.
	LogSegmentOpenFilesMax int32

	// LogSegmentBytes is the size at which a log segment rolls.
	// Key log.segment.bytes; bytes, int >= 14. Default 1073741824 (1 GiB,
	// Kafka's).
	LogSegmentBytes int32

	// LogRollMs is the age at which a log segment rolls even if not full.
	// Key log.roll.ms (synonym log.roll.hours, int >= 1; log.roll.ms wins);
	// milliseconds, long >= 1. Default 604800000 (168 hours, Kafka's).
	LogRollMs int64

	// LogRetentionMs is how long a closed segment is kept.
	// Key log.retention.ms (synonyms log.retention.minutes and
	// log.retention.hours, ints; ms > minutes > hours); milliseconds, long
	// >= -1; -1 keeps segments forever (a negative synonym means -1 too).
	// Default 604800000 (168 hours, Kafka's).
	LogRetentionMs int64

	// LogRetentionBytes is the partition size above which old segments are
	// deleted. Key log.retention.bytes; bytes, any long; a negative value
	// (-1) means no size limit. Default -1 (Kafka's).
	LogRetentionBytes int64

	// LogRetentionCheckIntervalMs is how often retention runs.
	// Key log.retention.check.interval.ms; milliseconds, long >= 1.
	// Default 300000 (5 minutes, Kafka's).
	LogRetentionCheckIntervalMs int64

	// LogFlushIntervalMessages is how many messages may be acknowledged
	// before the log is fsynced.
	// Key log.flush.interval.messages; messages, long >= 1.
	//
	// SLUICE DEFAULT 1: every acknowledged write is fsynced before its ack
	// (concurrent writes share one fsync: group commit), so an acked write
	// survives power loss on a single node. Kafka's default is
	// 9223372036854775807: ack once in the page cache and rely on
	// replication; set that value for Kafka's behaviour and throughput.
	LogFlushIntervalMessages int64

	// LogFlushIntervalMs is the longest a written message stays unsynced.
	// Key log.flush.interval.ms; milliseconds, long >= 0. Default
	// 9223372036854775807 (never; Kafka's, via log.flush.scheduler.interval.ms).
	LogFlushIntervalMs int64

	// MessageMaxBytes is the largest record batch accepted.
	// Key message.max.bytes; bytes, int >= 0. Default 1048588 (Kafka's).
	MessageMaxBytes int32

	// SocketRequestMaxBytes is the largest request accepted.
	// Key socket.request.max.bytes; bytes, int in [1, 1000000000]. Default
	// 104857600 (100 MiB, Kafka's). Kafka allows up to 2147483647; Sluice
	// caps it because raft connections share the inter-broker listener and
	// are told apart by their first four bytes, "SLRT" or "SLRF", which read
	// as a request size over 1.3 GB: a limit below that refuses them as
	// Kafka requests.
	SocketRequestMaxBytes int32

	// QueuedMaxRequestBytes bounds the memory held by requests read and
	// not yet answered, summed over every connection: a request's declared
	// size is reserved before its body is read, and while the pool is
	// exhausted the broker reads no further request (Kafka's network layer
	// mutes sockets the same way). Key queued.max.request.bytes; bytes,
	// long; 0 or negative means no bound (Kafka's meaning), otherwise it
	// must be at least socket.request.max.bytes (Kafka's rule).
	//
	// SLUICE DEFAULT 536870912 (512 MiB; Kafka: -1, unbounded). Unbounded,
	// a few hundred connections declaring 100 MiB requests exhaust a
	// machine's memory; 512 MiB admits five requests of the largest size
	// at once, and any number of ordinary ones.
	QueuedMaxRequestBytes int64

	// MaxConnections is the most client connections open at once, over
	// every listener. At the limit the broker stops accepting (connections
	// wait in the listen backlog) until one closes, as Kafka's acceptor
	// does. Key max.connections; int >= 0. Default 2147483647 (Kafka's).
	MaxConnections int32

	// MaxConnectionsPerIP is the most connections open at once from one
	// client address; a connection beyond it is closed as soon as it is
	// accepted, as in Kafka. Key max.connections.per.ip; int >= 0; 0
	// requires max.connections.per.ip.overrides (Kafka's rule). Default
	// 2147483647 (Kafka's).
	MaxConnectionsPerIP int32

	// MaxConnectionsPerIPOverrides are per-address exceptions to
	// MaxConnectionsPerIP, by IP address or host name (host names are
	// resolved when the broker starts, as Kafka does). Key
	// max.connections.per.ip.overrides; comma-separated host:count, count
	// >= 0. Default empty (Kafka's).
	MaxConnectionsPerIPOverrides map[string]int32

	// MaxConnectionCreationRate is the most connections per second the
	// broker accepts over every listener, measured as a client quota
	// (QuotaWindowNum windows of QuotaWindowSizeSeconds): past it the
	// acceptor waits the throttle time before accepting again, as Kafka's
	// ConnectionQuotas. Key max.connection.creation.rate; int >= 0.
	// Default 2147483647 (Kafka's).
	MaxConnectionCreationRate int32

	// QuotaWindowNum is the number of samples client quotas keep (their
	// rate is measured over this many windows). Key quota.window.num;
	// int >= 1. Default 11 (Kafka's).
	QuotaWindowNum int32

	// QuotaWindowSizeSeconds is the length of one client quota sample.
	// Key quota.window.size.seconds; seconds, int >= 1. Default 1
	// (Kafka's).
	QuotaWindowSizeSeconds int32

	// ControllerQuotaWindowNum and ControllerQuotaWindowSizeSeconds size
	// the controller_mutation_rate token bucket (KIP-599): it holds at
	// most the quota × num × size seconds of partition mutations. Keys
	// controller.quota.window.num (int >= 1, default 11) and
	// controller.quota.window.size.seconds (seconds, int >= 1, default
	// 1), Kafka's.
	ControllerQuotaWindowNum         int32
	ControllerQuotaWindowSizeSeconds int32

	// ConnectionsMaxIdleMs closes a connection that has neither a request
	// being read or served nor a response being written for this long.
	// Key connections.max.idle.ms; milliseconds, long; negative never
	// closes idle connections (as in Kafka). Default 600000 (10 minutes,
	// Kafka's).
	ConnectionsMaxIdleMs int64

	// RequestReceiveTimeoutMs bounds how long a request's bytes may take to
	// arrive once its first byte has: a connection that sends part of a
	// request and stalls (a slowloris client, a half-sent request) is
	// closed after it. Time the broker itself makes the request wait (for
	// queued.max.request.bytes memory) does not count. Key
	// sluice.request.receive.timeout.ms; milliseconds, int >= 1. Default
	// 30000 (30 s, the default request.timeout.ms of Kafka's clients: a
	// default client has given up on a request by then). Kafka has no such
	// broker setting (Sluice's key).
	RequestReceiveTimeoutMs int32

	// MetricsListen is the host:port of the broker's HTTP listener:
	// /metrics (Prometheus's text format), /healthz, /readyz and the web
	// console under /ui/. Key metrics.listen; host:port (port 0 picks a
	// free one), or empty or "none" for no listener (read back as empty:
	// no metrics are collected at all). Default DefaultMetricsListen
	// (127.0.0.1:9644, this machine only); when the default cannot be
	// bound (another broker on this machine has it) the broker logs a
	// warning and runs without it, while an address given explicitly
	// that cannot be bound stops start-up. Kafka has no such key (it
	// exposes JMX); Sluice's.
	MetricsListen string

	// MetricsSSLEnabled serves the metrics listener (metrics, health
	// checks and the console) over TLS, with the ssl.* keys (overridden by
	// listener.name.metrics.ssl.*): the keystore is the server
	// certificate; client certificates are asked for only with
	// listener.name.metrics.ssl.client.auth (health probes hold none). Key sluice.metrics.ssl.enabled; bool. Default false.
	// Sluice's key.
	MetricsSSLEnabled bool

	// BrokerDownWarningIntervalMs is how often every broker logs a
	// warning for each registered broker that has been fenced (down) for
	// at least that long, naming it and the partitions it leaves
	// under-replicated; the web console's alerts wait as long. Key
	// sluice.broker.down.warning.interval.ms; milliseconds, long >= 1.
	// Default 60000 (1 minute). Sluice's key.
	BrokerDownWarningIntervalMs int64

	// FetchMaxBytes caps the record bytes of one Fetch response, whatever
	// the request's MaxBytes (0 or negative asks for the least: one batch).
	// As KIP-74 requires, the first batch of the first partition with
	// records is returned even when it is larger. Key fetch.max.bytes;
	// bytes, int >= 1024. Default 57671680 (55 MiB, Kafka's).
	FetchMaxBytes int32

	// MinInsyncReplicas is the number of in-sync replicas an acks=all write
	// needs. Key min.insync.replicas; int >= 1. Default 1 (Kafka's).
	MinInsyncReplicas int32

	// LogMessageTimestampType is which timestamp records keep.
	// Key log.message.timestamp.type; CreateTime or LogAppendTime (case
	// matters, as in Kafka). Default CreateTime (Kafka's).
	LogMessageTimestampType string

	// CompressionType is the compression of stored batches: producer keeps
	// what the producer sent. Key compression.type; one of uncompressed,
	// producer, gzip, snappy, lz4, zstd. Default producer (Kafka's).
	CompressionType string

	// OffsetsTopicNumPartitions is the partition count of __consumer_offsets.
	// Key offsets.topic.num.partitions; int >= 1. Default 50 (Kafka's).
	OffsetsTopicNumPartitions int32

	// OffsetsTopicReplicationFactor is the replication factor of
	// __consumer_offsets. Key offsets.topic.replication.factor; short >= 1.
	// Default 3 (Kafka's). Like Kafka, the config does not compare it with
	// the number of brokers: capping it by the brokers there are when the
	// topic is created is the server's job.
	OffsetsTopicReplicationFactor int16

	// TransactionStateLogNumPartitions is the partition count of
	// __transaction_state. Key transaction.state.log.num.partitions; int
	// >= 1. Default 50 (Kafka's).
	TransactionStateLogNumPartitions int32

	// TransactionStateLogReplicationFactor is the replication factor of
	// __transaction_state, capped by the cluster's size when the topic is
	// created (as offsets.topic.replication.factor). Key
	// transaction.state.log.replication.factor; short >= 1. Default 3
	// (Kafka's).
	TransactionStateLogReplicationFactor int16

	// TransactionStateLogMinISR is __transaction_state's
	// min.insync.replicas, capped by its replication factor. Key
	// transaction.state.log.min.isr; int >= 1. Default 2 (Kafka's).
	TransactionStateLogMinISR int32

	// TransactionStateLogSegmentBytes is __transaction_state's
	// segment.bytes. Key transaction.state.log.segment.bytes; bytes, int
	// >= 1. Default 104857600 (Kafka's).
	TransactionStateLogSegmentBytes int32

	// TransactionMaxTimeoutMs is the largest transaction.timeout.ms a
	// producer may ask for (INVALID_TRANSACTION_TIMEOUT above it). Key
	// transaction.max.timeout.ms; milliseconds, int >= 1. Default 900000
	// (Kafka's).
	TransactionMaxTimeoutMs int32

	// TransactionPartitionVerificationEnable makes a partition leader
	// verify a transaction's first batch with the transaction coordinator
	// before appending it, and refuse it if the transaction ended in
	// between (KIP-890 part 1). Key
	// transaction.partition.verification.enable; bool. Default true
	// (Kafka's).
	TransactionPartitionVerificationEnable bool

	// TransactionAbortTimedOutTransactionCleanupIntervalMs is how often
	// the transaction coordinator aborts transactions past their timeout.
	// Key transaction.abort.timed.out.transaction.cleanup.interval.ms;
	// milliseconds, int >= 1. Default 10000 (Kafka's).
	TransactionAbortTimedOutTransactionCleanupIntervalMs int32

	// TransactionalIDExpirationMs is how long a transactional id may stay
	// idle before the coordinator forgets it. Key
	// transactional.id.expiration.ms; milliseconds, int >= 1. Default
	// 604800000 (7 days, Kafka's).
	TransactionalIDExpirationMs int32

	// TransactionRemoveExpiredTransactionCleanupIntervalMs is how often
	// expired transactional ids are removed. Key
	// transaction.remove.expired.transaction.cleanup.interval.ms;
	// milliseconds, int >= 1. Default 3600000 (Kafka's).
	TransactionRemoveExpiredTransactionCleanupIntervalMs int32

	// GroupInitialRebalanceDelayMs is how long a new group waits for more
	// members before its first rebalance. Key
	// group.initial.rebalance.delay.ms; milliseconds, int >= 0. Default 3000
	// (Kafka's).
	GroupInitialRebalanceDelayMs int32

	// LogIndexIntervalBytes is the log bytes between offset index entries.
	// Key log.index.interval.bytes; bytes, int >= 0. Default 4096 (Kafka's).
	LogIndexIntervalBytes int32

	// LogIndexSizeMaxBytes is the largest offset index; a full index rolls
	// the segment. Key log.index.size.max.bytes; bytes, int >= 4. Default
	// 10485760 (10 MiB, Kafka's).
	LogIndexSizeMaxBytes int32

	// LogCleanupPolicy is what happens to old segments.
	// Key log.cleanup.policy; delete, compact, or both comma-separated.
	// Default delete (Kafka's).
	LogCleanupPolicy CleanupPolicy

	// LogSegmentDeleteDelayMs is how long a deleted segment's files linger
	// (renamed .deleted) before removal. Key log.segment.delete.delay.ms;
	// milliseconds, long >= 0. Default 60000 (Kafka's; the topic-level name
	// is file.delete.delay.ms).
	LogSegmentDeleteDelayMs int64

	// LogCleanerEnable runs the log cleaner (compaction of topics whose
	// cleanup.policy includes compact; __consumer_offsets is one). Key
	// log.cleaner.enable; bool. Default true (Kafka's).
	LogCleanerEnable bool

	// LogCleanerBackoffMs is how long the cleaner sleeps when no log needs
	// cleaning. Key log.cleaner.backoff.ms; milliseconds, long >= 0.
	// Default 15000 (Kafka's).
	LogCleanerBackoffMs int64

	// LogCleanerThreads is how many logs are cleaned at once. Key
	// log.cleaner.threads; int >= 0. Default 1 (Kafka's).
	LogCleanerThreads int32

	// LogCleanerDedupeBufferSize is the memory the cleaner's key maps may
	// use, shared by the cleaner threads: a clean maps dirty segments until
	// its share is full and cleans that far. Key
	// log.cleaner.dedupe.buffer.size; bytes, long >= 0. Default 134217728
	// (128 MiB, Kafka's).
	LogCleanerDedupeBufferSize int64

	// LogCleanerDeleteRetentionMs is how long tombstones are kept after
	// their segment is cleaned (the topic key is delete.retention.ms). Key
	// log.cleaner.delete.retention.ms; milliseconds, long >= 0. Default
	// 86400000 (one day, Kafka's).
	LogCleanerDeleteRetentionMs int64

	// LogCleanerMinCleanableRatio is the smallest share of dirty (never
	// cleaned) bytes for which a log is cleaned (topic key
	// min.cleanable.dirty.ratio). Key log.cleaner.min.cleanable.ratio;
	// double in [0, 1]. Default 0.5 (Kafka's).
	LogCleanerMinCleanableRatio float64

	// LogCleanerMinCompactionLagMs is how long a record stays uncompacted
	// (topic key min.compaction.lag.ms). Key
	// log.cleaner.min.compaction.lag.ms; milliseconds, long >= 0. Default 0
	// (Kafka's).
	LogCleanerMinCompactionLagMs int64

	// LogCleanerMaxCompactionLagMs is the longest a record stays
	// uncompacted, whatever the dirty ratio (topic key
	// max.compaction.lag.ms). Key log.cleaner.max.compaction.lag.ms;
	// milliseconds, long >= 1. Default 9223372036854775807 (Kafka's).
	LogCleanerMaxCompactionLagMs int64

	// GroupMinSessionTimeoutMs and GroupMaxSessionTimeoutMs bound the
	// session timeout a classic group member may ask for (outside:
	// INVALID_SESSION_TIMEOUT). Keys group.min.session.timeout.ms and
	// group.max.session.timeout.ms; milliseconds, int >= 0. Defaults 6000
	// and 1800000 (Kafka's).
	GroupMinSessionTimeoutMs int32
	GroupMaxSessionTimeoutMs int32

	// GroupMaxSize is the most members a classic group admits (GROUP_MAX_SIZE_REACHED
	// beyond). Key group.max.size; int >= 1. Default 2147483647 (Kafka's).
	GroupMaxSize int32

	// OffsetsRetentionMinutes is how long an empty group's committed
	// offsets are kept (KIP-211). Key offsets.retention.minutes; minutes,
	// int >= 1. Default 10080 (7 days, Kafka's).
	OffsetsRetentionMinutes int32

	// OffsetsRetentionCheckIntervalMs is how often expired offsets are
	// removed. Key offsets.retention.check.interval.ms; milliseconds, long
	// >= 1. Default 600000 (Kafka's).
	OffsetsRetentionCheckIntervalMs int64

	// DecompressionMemoryBytes bounds the memory that checking compressed
	// batches may use together beyond 8 MiB each: a batch may decompress
	// to 256 MiB, and only this many bytes' worth of such large
	// decompressions run at once (the others wait). Sluice's own key
	// sluice.decompression.memory.bytes; bytes, long >= 1. Default
	// 536870912 (512 MiB: two at a time).
	DecompressionMemoryBytes int64

	// ProducerIDExpirationMs is how long a partition keeps an idempotent
	// producer's state after the timestamp of its newest batch; then the
	// producer is forgotten and may start again at any sequence. Key
	// producer.id.expiration.ms; milliseconds, int >= 1. Default 86400000
	// (1 day, Kafka's, KIP-854).
	ProducerIDExpirationMs int32

	// ProducerIDExpirationCheckIntervalMs is how often expired producers
	// are removed. Key producer.id.expiration.check.interval.ms;
	// milliseconds, int >= 1. Default 600000 (Kafka's).
	ProducerIDExpirationCheckIntervalMs int32

	// OffsetsCommitTimeoutMs bounds how long an offset commit waits for its
	// write. Key offsets.commit.timeout.ms; milliseconds, int >= 1. Default
	// 5000 (Kafka's).
	OffsetsCommitTimeoutMs int32

	// OffsetMetadataMaxBytes is the longest metadata string an offset
	// commit may carry (OFFSET_METADATA_TOO_LARGE beyond). Key
	// offset.metadata.max.bytes; bytes, int >= 0. Default 4096 (Kafka's).
	OffsetMetadataMaxBytes int32

	// GroupConsumerHeartbeatIntervalMs is the heartbeat interval the broker
	// gives KIP-848 consumer group members. Key
	// group.consumer.heartbeat.interval.ms; milliseconds, int >= 1. Default
	// 5000 (Kafka's).
	GroupConsumerHeartbeatIntervalMs int32

	// GroupConsumerSessionTimeoutMs is how long a KIP-848 member may go
	// without a heartbeat before it is removed. Key
	// group.consumer.session.timeout.ms; milliseconds, int >= 1. Default
	// 45000 (Kafka's).
	GroupConsumerSessionTimeoutMs int32

	// GroupConsumerMaxSize is the most members a KIP-848 consumer group
	// admits. Key group.consumer.max.size; int >= 1. Default 2147483647
	// (Kafka's).
	GroupConsumerMaxSize int32

	// SSL is the ssl.* keys (Kafka's names and defaults; see SSLConfig):
	// the TLS settings of every listener whose protocol is SSL, and of the
	// broker's own connections to such listeners. ListenerSSL applies a
	// listener's listener.name.<listener>.ssl.* overrides.
	SSL         SSLConfig
	listenerSSL map[string]map[string]string // lower-case listener name: ssl key: value

	// set has bit i on when the key with index i (see entries) was given to
	// Set; Source reports it.
	set keyBits

	// unacted holds the Kafka keys set that Sluice accepts but does not
	// act on (kafkaKeys), by name; see Unacted.
	unacted map[string]string
}

// DefaultMetricsListen is metrics.listen's default: the console at
// http://127.0.0.1:9644/ui/ (the port tools/cluster.sh gives node 1, as
// 9092 is its client port).
const DefaultMetricsListen = "127.0.0.1:9644"

// Default returns Sluice's defaults; see each field. It is valid.
func Default() Config {
	c := Config{
		NodeID:                                 1,
		brokerID:                               -1,
		SSL:                                    defaultSSL(),
		Listeners:                              []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		ProcessRoles:                           RoleBroker | RoleController,
		ControllerListenerNames:                []string{"CONTROLLER"},
		BrokerHeartbeatIntervalMs:              2000,
		BrokerSessionTimeoutMs:                 9000,
		ReplicaLagTimeMaxMs:                    30000,
		AutoLeaderRebalanceEnable:              true,
		LeaderImbalanceCheckIntervalSeconds:    300,
		LeaderImbalancePerBrokerPercentage:     10,
		MetadataLogSegmentBytes:                8 << 20,
		MetadataMaxRetentionBytes:              100 << 20,
		RaftTickMs:                             100,
		RaftElectionTicks:                      10,
		RaftHeartbeatTicks:                     1,
		RaftPreVoteEnable:                      true,
		RaftCheckQuorumEnable:                  true,
		RaftQuiesceEnable:                      true,
		RaftQuiesceTicks:                       2,
		RaftLivenessIntervalMs:                 250,
		RaftLivenessTimeoutMs:                  1000,
		RaftWorkers:                            2,
		RaftMaxBatchGroups:                     64,
		LogDirs:                                []string{"./data"},
		NumPartitions:                          1,
		DefaultReplicationFactor:               1,
		AutoCreateTopicsEnable:                 true,
		AutoCreateTopicsMaxPerRequest:          1000,
		LogSegmentBytes:                        1 << 30,
		LogRollMs:                              168 * hourMs,
		LogRetentionMs:                         168 * hourMs,
		LogRetentionBytes:                      -1,
		LogRetentionCheckIntervalMs:            300000,
		LogFlushIntervalMessages:               1,
		LogFlushIntervalMs:                     math.MaxInt64,
		MessageMaxBytes:                        1048588,
		SocketRequestMaxBytes:                  100 << 20,
		QueuedMaxRequestBytes:                  512 << 20,
		MaxConnections:                         math.MaxInt32,
		MaxConnectionsPerIP:                    math.MaxInt32,
		MaxConnectionCreationRate:              math.MaxInt32,
		QuotaWindowNum:                         11,
		QuotaWindowSizeSeconds:                 1,
		ControllerQuotaWindowNum:               11,
		ControllerQuotaWindowSizeSeconds:       1,
		ConnectionsMaxIdleMs:                   600000,
		RequestReceiveTimeoutMs:                30000,
		MetricsListen:                          DefaultMetricsListen,
		BrokerDownWarningIntervalMs:            60000,
		FetchMaxBytes:                          55 << 20,
		MinInsyncReplicas:                      1,
		LogMessageTimestampType:                "CreateTime",
		CompressionType:                        "producer",
		OffsetsTopicNumPartitions:              50,
		OffsetsTopicReplicationFactor:          3,
		TransactionStateLogNumPartitions:       50,
		TransactionStateLogReplicationFactor:   3,
		TransactionStateLogMinISR:              2,
		TransactionStateLogSegmentBytes:        104857600,
		TransactionMaxTimeoutMs:                900000,
		TransactionPartitionVerificationEnable: true,
		TransactionAbortTimedOutTransactionCleanupIntervalMs: 10000,
		TransactionalIDExpirationMs:                          604800000,
		TransactionRemoveExpiredTransactionCleanupIntervalMs: 3600000,
		GroupInitialRebalanceDelayMs:                         3000,
		LogIndexIntervalBytes:                                4096,
		LogIndexSizeMaxBytes:                                 10 << 20,
		LogCleanupPolicy:                                     CleanupDelete,
		LogSegmentDeleteDelayMs:                              60000,

		LogCleanerEnable:                    true,
		LogCleanerBackoffMs:                 15000,
		LogCleanerThreads:                   1,
		LogCleanerDedupeBufferSize:          128 << 20,
		LogCleanerDeleteRetentionMs:         86400000,
		LogCleanerMinCleanableRatio:         0.5,
		LogCleanerMinCompactionLagMs:        0,
		LogCleanerMaxCompactionLagMs:        math.MaxInt64,
		GroupMinSessionTimeoutMs:            6000,
		GroupMaxSessionTimeoutMs:            1800000,
		GroupMaxSize:                        math.MaxInt32,
		OffsetsRetentionMinutes:             10080,
		OffsetsRetentionCheckIntervalMs:     600000,
		ProducerIDExpirationMs:              86400000,
		DecompressionMemoryBytes:            512 << 20, // batch.DefaultDecompressionMemory
		ProducerIDExpirationCheckIntervalMs: 600000,
		OffsetsCommitTimeoutMs:              5000,
		OffsetMetadataMaxBytes:              4096,
		GroupConsumerHeartbeatIntervalMs:    5000,
		GroupConsumerSessionTimeoutMs:       45000,
		GroupConsumerMaxSize:                math.MaxInt32,
	}
	c.derive() // advertised.listeners, listener.security.protocol.map, inter.broker.listener.name
	return c
}

const (
	minuteMs = 60 * 1000
	hourMs   = 60 * minuteMs
)

// CleanupPolicy is log.cleanup.policy: a set of CleanupDelete and
// CleanupCompact.
type CleanupPolicy uint8

const (
	CleanupDelete  CleanupPolicy = 1 << iota // delete segments past retention
	CleanupCompact                           // keep the last record per key
)

// String is Kafka's spelling: "delete", "compact" or "compact,delete".
func (p CleanupPolicy) String() string {
	switch p {
	case CleanupDelete:
		return "delete"
	case CleanupCompact:
		return "compact"
	case CleanupDelete | CleanupCompact:
		return "compact,delete"
	}
	return ""
}

// MetadataLogDirOrFirst is the directory of the metadata log:
// metadata.log.dir, else the first of log.dirs (Kafka's rule).
func (c *Config) MetadataLogDirOrFirst() string {
	if c.MetadataLogDir != "" {
		return c.MetadataLogDir
	}
	return c.LogDirs[0]
}

// AllLogDirs is log.dirs and, when it is not one of them,
// metadata.log.dir: the directories the broker locks.
func (c *Config) AllLogDirs() []string {
	dirs := append([]string(nil), c.LogDirs...)
	if c.MetadataLogDir == "" {
		return dirs
	}
	for _, d := range dirs {
		if filepath.Clean(d) == filepath.Clean(c.MetadataLogDir) {
			return dirs
		}
	}
	return append(dirs, c.MetadataLogDir)
}
