package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/replica"
)

// keyTable maps every Kafka key onto Config: the one table of names. Each
// field's doc comment in config.go gives its unit and defaults.
var keyTable = []spec{
	withSynonyms(intKey("node.id", func(c *Config) *int32 { return &c.NodeID }, 0, math.MaxInt32),
		// Kafka's older name: accepted, and it must equal node.id when
		// both are set (Validate).
		spec{name: "broker.id", set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("must be an integer in [0, %d]", math.MaxInt32)
			}
			c.NodeID, c.brokerID = int32(n), int32(n)
			return nil
		}}),
	{
		name: "listeners",
		set: func(c *Config, v string) error {
			ls, err := ParseListeners(v)
			if err != nil {
				return err
			}
			c.Listeners = ls
			return nil
		},
		get: func(c *Config) string { return formatListeners(c.Listeners) },
		check: func(c *Config) error {
			if e := entries["advertised.listeners"]; !c.set.intersects(e.bit) {
				for _, l := range c.brokerListeners() { // controller listeners are never advertised
					if l.Host == "0.0.0.0" || l.Host == "::" {
						// Kafka refuses to advertise the
						// non-routable meta-address too.
						return fmt.Errorf("%s binds every interface, and clients cannot connect to %s: set advertised.listeners to an address they reach (for example %s://<this host's name>:%d)", l, l.Host, l.Name, l.Port)
					}
				}
			}
			return checkListeners(c.Listeners, true)
		},
	},
	{
		name: "advertised.listeners",
		set: func(c *Config, v string) error {
			ls, err := ParseListeners(v)
			if err != nil {
				return err
			}
			if len(ls) == 0 { // unset: follow listeners again (derive)
				c.set = c.set.andNot(entries["advertised.listeners"].bit)
				return nil
			}
			for i := range ls {
				if ls[i].Host == "" {
					ls[i].Host = loopback
				}
			}
			c.advertisedGiven = ls
			return nil
		},
		get:   func(c *Config) string { return formatListeners(c.advertisedAll()) },
		check: func(c *Config) error { return checkAdvertised(c.advertisedAll()) },
	},
	{
		name: "listener.security.protocol.map",
		set: func(c *Config, v string) (err error) {
			c.ListenerSecurityProtocolMap, err = parseProtocolMap(v)
			return err
		},
		get: func(c *Config) string { return formatProtocolMap(c.ListenerSecurityProtocolMap) },
	},
	{
		name: "process.roles",
		set: func(c *Config, v string) (err error) {
			c.ProcessRoles, err = parseProcessRoles(v)
			return err
		},
		get:   func(c *Config) string { return c.ProcessRoles.String() },
		check: checkProcessRoles,
	},
	{
		name: "controller.listener.names",
		set:  setControllerListenerNames,
		get:  func(c *Config) string { return strings.Join(c.ControllerListenerNames, ",") },
	},
	{
		name: "inter.broker.listener.name",
		set:  setInterBrokerListenerName,
		get:  func(c *Config) string { return c.InterBrokerListenerName },
	},
	{
		name: "controller.quorum.voters",
		set: func(c *Config, v string) (err error) {
			c.QuorumVoters, err = parseVoters(v)
			return err
		},
		get: func(c *Config) string {
			if c.soloQuorum && slices.Equal(c.QuorumVoters, c.soloVoter()) {
				return "" // synthesized, not set
			}
			return formatVoters(c.QuorumVoters)
		},
		check: func(c *Config) error {
			if !c.set.intersects(entries["controller.quorum.voters"].bit) {
				return nil // derived from controller.quorum.bootstrap.servers: validateCluster
			}
			return checkVoters(c)
		},
	},
	{
		name: "controller.quorum.bootstrap.servers",
		set: func(c *Config, v string) (err error) {
			c.QuorumBootstrapServers, err = parseBootstrapServers(v)
			return err
		},
		get: func(c *Config) string { return strings.Join(c.QuorumBootstrapServers, ",") },
	},
	intKey("broker.heartbeat.interval.ms", func(c *Config) *int32 { return &c.BrokerHeartbeatIntervalMs }, 1, math.MaxInt32),
	intKey("broker.session.timeout.ms", func(c *Config) *int32 { return &c.BrokerSessionTimeoutMs }, 1, math.MaxInt32),
	{
		name: "broker.rack",
		set: func(c *Config, v string) error {
			c.BrokerRack = strings.TrimSpace(v)
			return nil
		},
		get: func(c *Config) string { return c.BrokerRack },
	},
	intKey("replica.lag.time.max.ms", func(c *Config) *int64 { return &c.ReplicaLagTimeMaxMs }, 1, math.MaxInt64),
	boolKey("auto.leader.rebalance.enable", func(c *Config) *bool { return &c.AutoLeaderRebalanceEnable }),
	boolKey("sluice.metrics.ssl.enabled", func(c *Config) *bool { return &c.MetricsSSLEnabled }),
	intKey("leader.imbalance.check.interval.seconds", func(c *Config) *int64 { return &c.LeaderImbalanceCheckIntervalSeconds }, 1, math.MaxInt64),
	intKey("leader.imbalance.per.broker.percentage", func(c *Config) *int32 { return &c.LeaderImbalancePerBrokerPercentage }, 0, 100),
	boolKey("unclean.leader.election.enable", func(c *Config) *bool { return &c.UncleanLeaderElectionEnable }),
	intKey("metadata.log.segment.bytes", func(c *Config) *int32 { return &c.MetadataLogSegmentBytes }, 1024, math.MaxInt32),
	intKey("metadata.max.retention.bytes", func(c *Config) *int64 { return &c.MetadataMaxRetentionBytes }, -1, math.MaxInt64),
	intKey("sluice.raft.tick.ms", func(c *Config) *int32 { return &c.RaftTickMs }, 1, math.MaxInt32),
	intKey("sluice.raft.election.ticks", func(c *Config) *int32 { return &c.RaftElectionTicks }, 2, math.MaxInt32),
	intKey("sluice.raft.heartbeat.ticks", func(c *Config) *int32 { return &c.RaftHeartbeatTicks }, 1, math.MaxInt32),
	boolKey("sluice.raft.prevote.enable", func(c *Config) *bool { return &c.RaftPreVoteEnable }),
	boolKey("sluice.raft.check.quorum.enable", func(c *Config) *bool { return &c.RaftCheckQuorumEnable }),
	boolKey("sluice.raft.quiesce.enable", func(c *Config) *bool { return &c.RaftQuiesceEnable }),
	intKey("sluice.raft.quiesce.ticks", func(c *Config) *int32 { return &c.RaftQuiesceTicks }, 1, math.MaxInt32),
	intKey("sluice.raft.liveness.interval.ms", func(c *Config) *int32 { return &c.RaftLivenessIntervalMs }, 1, math.MaxInt32),
	intKey("sluice.raft.liveness.timeout.ms", func(c *Config) *int32 { return &c.RaftLivenessTimeoutMs }, 1, math.MaxInt32),
	intKey("sluice.raft.workers", func(c *Config) *int32 { return &c.RaftWorkers }, 1, 1024),
	intKey("sluice.raft.max.batch.groups", func(c *Config) *int32 { return &c.RaftMaxBatchGroups }, 1, math.MaxInt32),
	{
		name: "metadata.log.dir",
		set:  func(c *Config, v string) error { c.MetadataLogDir = strings.TrimSpace(v); return nil },
		get:  func(c *Config) string { return c.MetadataLogDir },
	},
	{
		name:     "log.dirs",
		set:      setDirs,
		get:      func(c *Config) string { return strings.Join(c.LogDirs, ",") },
		check:    checkDirs,
		synonyms: []spec{{name: "log.dir", set: setDirs}},
	},
	intKey("num.partitions", func(c *Config) *int32 { return &c.NumPartitions }, 1, math.MaxInt32),
	intKey("default.replication.factor", func(c *Config) *int16 { return &c.DefaultReplicationFactor }, 1, math.MaxInt16),
	boolKey("auto.create.topics.enable", func(c *Config) *bool { return &c.AutoCreateTopicsEnable }),
	intKey("sluice.auto.create.topics.max.per.request", func(c *Config) *int32 { return &c.AutoCreateTopicsMaxPerRequest }, 1, math.MaxInt32),
	intKey("sluice.max.partitions", func(c *Config) *int32 { return &c.MaxPartitions }, 0, math.MaxInt32),
	intKey("sluice.log.segment.open.files.max", func(c *Config) *int32 { return &c.LogSegmentOpenFilesMax }, 0, math.MaxInt32),
	topicSynonym(intKey("log.segment.bytes", func(c *Config) *int32 { return &c.LogSegmentBytes }, 14, math.MaxInt32)),
	topicSynonym(withSynonyms(intKey("log.roll.ms", func(c *Config) *int64 { return &c.LogRollMs }, 1, math.MaxInt64),
		scaledKey("log.roll.hours", func(c *Config) *int64 { return &c.LogRollMs }, hourMs, 1))),
	topicSynonym(withSynonyms(intKey("log.retention.ms", func(c *Config) *int64 { return &c.LogRetentionMs }, -1, math.MaxInt64),
		scaledKey("log.retention.minutes", func(c *Config) *int64 { return &c.LogRetentionMs }, minuteMs, math.MinInt32),
		scaledKey("log.retention.hours", func(c *Config) *int64 { return &c.LogRetentionMs }, hourMs, math.MinInt32))),
	topicSynonym(intKey("log.retention.bytes", func(c *Config) *int64 { return &c.LogRetentionBytes }, math.MinInt64, math.MaxInt64)), // any long, as in Kafka: negative means no limit
	intKey("log.retention.check.interval.ms", func(c *Config) *int64 { return &c.LogRetentionCheckIntervalMs }, 1, math.MaxInt64),
	topicSynonym(intKey("log.flush.interval.messages", func(c *Config) *int64 { return &c.LogFlushIntervalMessages }, 1, math.MaxInt64)),
	topicSynonym(intKey("log.flush.interval.ms", func(c *Config) *int64 { return &c.LogFlushIntervalMs }, 0, math.MaxInt64)),
	topicSynonym(intKey("message.max.bytes", func(c *Config) *int32 { return &c.MessageMaxBytes }, 0, math.MaxInt32)),
	socketRequestMaxBytes(),
	intKey("queued.max.request.bytes", func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }, math.MinInt64, math.MaxInt64),
	intKey("max.connections", func(c *Config) *int32 { return &c.MaxConnections }, 0, math.MaxInt32),
	intKey("max.connections.per.ip", func(c *Config) *int32 { return &c.MaxConnectionsPerIP }, 0, math.MaxInt32),
	{
		name: "max.connections.per.ip.overrides",
		set: func(c *Config, v string) (err error) {
			c.MaxConnectionsPerIPOverrides, err = parseConnOverrides(v)
			return err
		},
		get: func(c *Config) string { return formatConnOverrides(c.MaxConnectionsPerIPOverrides) },
	},
	intKey("max.connection.creation.rate", func(c *Config) *int32 { return &c.MaxConnectionCreationRate }, 0, math.MaxInt32),
	intKey("quota.window.num", func(c *Config) *int32 { return &c.QuotaWindowNum }, 1, math.MaxInt32),
	intKey("quota.window.size.seconds", func(c *Config) *int32 { return &c.QuotaWindowSizeSeconds }, 1, math.MaxInt32),
	intKey("controller.quota.window.num", func(c *Config) *int32 { return &c.ControllerQuotaWindowNum }, 1, math.MaxInt32),
	intKey("controller.quota.window.size.seconds", func(c *Config) *int32 { return &c.ControllerQuotaWindowSizeSeconds }, 1, math.MaxInt32),
	intKey("connections.max.idle.ms", func(c *Config) *int64 { return &c.ConnectionsMaxIdleMs }, math.MinInt64, math.MaxInt64),
	intKey("sluice.request.receive.timeout.ms", func(c *Config) *int32 { return &c.RequestReceiveTimeoutMs }, 1, math.MaxInt32),
	{
		name: "metrics.listen",
		set: func(c *Config, v string) error {
			c.MetricsListen = strings.TrimSpace(v)
			if strings.EqualFold(c.MetricsListen, "none") {
				c.MetricsListen = "" // off
			}
			return nil
		},
		get:   func(c *Config) string { return c.MetricsListen },
		check: checkMetricsListen,
	},
	intKey("sluice.broker.down.warning.interval.ms", func(c *Config) *int64 { return &c.BrokerDownWarningIntervalMs }, 1, math.MaxInt64),
	intKey("fetch.max.bytes", func(c *Config) *int32 { return &c.FetchMaxBytes }, 1024, math.MaxInt32),
	topicSynonym(intKey("min.insync.replicas", func(c *Config) *int32 { return &c.MinInsyncReplicas }, 1, math.MaxInt32)),
	topicSynonym(enumKey("log.message.timestamp.type", func(c *Config) *string { return &c.LogMessageTimestampType }, "CreateTime", "LogAppendTime")),
	topicSynonym(enumKey("compression.type", func(c *Config) *string { return &c.CompressionType }, "uncompressed", "producer", "gzip", "snappy", "lz4", "zstd")),
	intKey("offsets.topic.num.partitions", func(c *Config) *int32 { return &c.OffsetsTopicNumPartitions }, 1, math.MaxInt32),
	intKey("offsets.topic.replication.factor", func(c *Config) *int16 { return &c.OffsetsTopicReplicationFactor }, 1, math.MaxInt16),
	intKey("transaction.state.log.num.partitions", func(c *Config) *int32 { return &c.TransactionStateLogNumPartitions }, 1, math.MaxInt32),
	intKey("transaction.state.log.replication.factor", func(c *Config) *int16 { return &c.TransactionStateLogReplicationFactor }, 1, math.MaxInt16),
	intKey("transaction.state.log.min.isr", func(c *Config) *int32 { return &c.TransactionStateLogMinISR }, 1, math.MaxInt32),
	intKey("transaction.state.log.segment.bytes", func(c *Config) *int32 { return &c.TransactionStateLogSegmentBytes }, 1, math.MaxInt32),
	boolKey("transaction.partition.verification.enable", func(c *Config) *bool { return &c.TransactionPartitionVerificationEnable }),
	intKey("transaction.max.timeout.ms", func(c *Config) *int32 { return &c.TransactionMaxTimeoutMs }, 1, math.MaxInt32),
	intKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", func(c *Config) *int32 { return &c.TransactionAbortTimedOutTransactionCleanupIntervalMs }, 1, math.MaxInt32),
	intKey("transactional.id.expiration.ms", func(c *Config) *int32 { return &c.TransactionalIDExpirationMs }, 1, math.MaxInt32),
	intKey("transaction.remove.expired.transaction.cleanup.interval.ms", func(c *Config) *int32 { return &c.TransactionRemoveExpiredTransactionCleanupIntervalMs }, 1, math.MaxInt32),
	intKey("group.initial.rebalance.delay.ms", func(c *Config) *int32 { return &c.GroupInitialRebalanceDelayMs }, 0, math.MaxInt32),
	topicSynonym(intKey("log.index.interval.bytes", func(c *Config) *int32 { return &c.LogIndexIntervalBytes }, 0, math.MaxInt32)),
	topicSynonym(intKey("log.index.size.max.bytes", func(c *Config) *int32 { return &c.LogIndexSizeMaxBytes }, 4, math.MaxInt32)),
	topicSynonym(spec{
		name:  "log.cleanup.policy",
		set:   setCleanupPolicy,
		get:   func(c *Config) string { return c.LogCleanupPolicy.String() },
		check: checkCleanupPolicy,
	}),
	topicSynonym(intKey("log.segment.delete.delay.ms", func(c *Config) *int64 { return &c.LogSegmentDeleteDelayMs }, 0, math.MaxInt64)),
	boolKey("log.cleaner.enable", func(c *Config) *bool { return &c.LogCleanerEnable }),
	intKey("log.cleaner.backoff.ms", func(c *Config) *int64 { return &c.LogCleanerBackoffMs }, 0, math.MaxInt64),
	intKey("log.cleaner.threads", func(c *Config) *int32 { return &c.LogCleanerThreads }, 0, math.MaxInt32),
	intKey("log.cleaner.dedupe.buffer.size", func(c *Config) *int64 { return &c.LogCleanerDedupeBufferSize }, 0, math.MaxInt64),
	topicSynonym(intKey("log.cleaner.delete.retention.ms", func(c *Config) *int64 { return &c.LogCleanerDeleteRetentionMs }, 0, math.MaxInt64)),
	topicSynonym(floatKey("log.cleaner.min.cleanable.ratio", func(c *Config) *float64 { return &c.LogCleanerMinCleanableRatio }, 0, 1)),
	topicSynonym(intKey("log.cleaner.min.compaction.lag.ms", func(c *Config) *int64 { return &c.LogCleanerMinCompactionLagMs }, 0, math.MaxInt64)),
	topicSynonym(intKey("log.cleaner.max.compaction.lag.ms", func(c *Config) *int64 { return &c.LogCleanerMaxCompactionLagMs }, 1, math.MaxInt64)),
	intKey("group.min.session.timeout.ms", func(c *Config) *int32 { return &c.GroupMinSessionTimeoutMs }, 0, math.MaxInt32),
	intKey("group.max.session.timeout.ms", func(c *Config) *int32 { return &c.GroupMaxSessionTimeoutMs }, 0, math.MaxInt32),
	intKey("group.max.size", func(c *Config) *int32 { return &c.GroupMaxSize }, 1, math.MaxInt32),
	intKey("offsets.retention.minutes", func(c *Config) *int32 { return &c.OffsetsRetentionMinutes }, 1, math.MaxInt32),
	intKey("offsets.retention.check.interval.ms", func(c *Config) *int64 { return &c.OffsetsRetentionCheckIntervalMs }, 1, math.MaxInt64),
	intKey("sluice.decompression.memory.bytes", func(c *Config) *int64 { return &c.DecompressionMemoryBytes }, 1, math.MaxInt64),
	intKey("producer.id.expiration.ms", func(c *Config) *int32 { return &c.ProducerIDExpirationMs }, 1, math.MaxInt32),
	intKey("producer.id.expiration.check.interval.ms", func(c *Config) *int32 { return &c.ProducerIDExpirationCheckIntervalMs }, 1, math.MaxInt32),
	intKey("offsets.commit.timeout.ms", func(c *Config) *int32 { return &c.OffsetsCommitTimeoutMs }, 1, math.MaxInt32),
	intKey("offset.metadata.max.bytes", func(c *Config) *int32 { return &c.OffsetMetadataMaxBytes }, 0, math.MaxInt32),
	intKey("group.consumer.heartbeat.interval.ms", func(c *Config) *int32 { return &c.GroupConsumerHeartbeatIntervalMs }, 1, math.MaxInt32),
	intKey("group.consumer.session.timeout.ms", func(c *Config) *int32 { return &c.GroupConsumerSessionTimeoutMs }, 1, math.MaxInt32),
	intKey("group.consumer.max.size", func(c *Config) *int32 { return &c.GroupConsumerMaxSize }, 1, math.MaxInt32),
	// TLS (ssl.go): each may be overridden per listener as
	// listener.name.<listener>.<key>.
	sslString("ssl.keystore.type", func(c *Config) *string { return &c.SSL.KeystoreType }, true),
	sslString("ssl.keystore.location", func(c *Config) *string { return &c.SSL.KeystoreLocation }, false),
	sslString("ssl.keystore.certificate.chain", func(c *Config) *string { return &c.SSL.KeystoreCertificateChain }, false),
	sslString("ssl.keystore.key", func(c *Config) *string { return &c.SSL.KeystoreKey }, false),
	sslString("ssl.key.password", func(c *Config) *string { return &c.SSL.KeyPassword }, false),
	sslString("ssl.truststore.type", func(c *Config) *string { return &c.SSL.TruststoreType }, true),
	sslString("ssl.truststore.location", func(c *Config) *string { return &c.SSL.TruststoreLocation }, false),
	sslString("ssl.truststore.certificates", func(c *Config) *string { return &c.SSL.TruststoreCertificates }, false),
	enumKey("ssl.client.auth", func(c *Config) *string { return &c.SSL.ClientAuth }, "none", "requested", "required"),
	sslList("ssl.enabled.protocols", func(c *Config) *[]string { return &c.SSL.EnabledProtocols }, func(c *Config) error {
		_, err := c.SSL.versions()
		return err
	}),
	enumKey("ssl.protocol", func(c *Config) *string { return &c.SSL.Protocol }, "TLSv1.3", "TLSv1.2", "TLS"),
	sslList("ssl.cipher.suites", func(c *Config) *[]string { return &c.SSL.CipherSuites }, func(c *Config) error {
		_, err := cipherSuites(c.SSL.CipherSuites)
		return err
	}),
	{
		name: "ssl.principal.mapping.rules",
		set: func(c *Config, v string) error {
			c.SSL.PrincipalMappingRules = strings.TrimSpace(v)
			return nil
		},
		get: func(c *Config) string { return c.SSL.PrincipalMappingRules },
		check: func(c *Config) error {
			_, err := ParsePrincipalRules(c.SSL.PrincipalMappingRules)
			return err
		},
	},
	enumKey("ssl.endpoint.identification.algorithm", func(c *Config) *string { return &c.SSL.EndpointIdentificationAlgorithm }, "https", ""),
}

// sslString is a string ssl.* key; upper, for the store types, upper-cases
// the value (Kafka reads them case-insensitively).
func sslString(name string, field func(*Config) *string, upper bool) spec {
	return spec{
		name: name,
		set: func(c *Config, v string) error {
			if !strings.Contains(name, "certificate") && !strings.HasSuffix(name, ".key") {
				v = strings.TrimSpace(v) // PEM text stays as given
			}
			if upper {
				v = strings.ToUpper(v)
			}
			*field(c) = v
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}

// sslList is a list ssl.* key with its own check.
func sslList(name string, field func(*Config) *[]string, check func(*Config) error) spec {
	return spec{
		name: name,
		set: func(c *Config, v string) (err error) {
			*field(c), err = parseList(v)
			return err
		},
		get:   func(c *Config) string { return strings.Join(*field(c), ",") },
		check: check,
	}
}

// maxSocketRequestBytes caps socket.request.max.bytes (Sluice's rule):
// raft connections share the inter-broker listener and are told apart by
// their first four bytes, "SLRT" or "SLRF", which read as a Kafka request
// size of 1397510726 or more. Any limit below that refuses such a "size",
// so a raft frame can never pass for a Kafka request; 1,000,000,000 keeps
// a round margin (Kafka allows up to 2147483647).
const maxSocketRequestBytes = 1_000_000_000

func socketRequestMaxBytes() spec {
	s := intKey("socket.request.max.bytes", func(c *Config) *int32 { return &c.SocketRequestMaxBytes }, 1, maxSocketRequestBytes)
	check := s.check
	s.check = func(c *Config) error {
		if err := check(c); err != nil {
			if c.SocketRequestMaxBytes > maxSocketRequestBytes {
				return fmt.Errorf("%w: raft connections share the inter-broker listener and are told apart by their first four bytes, \"SLRT\" or \"SLRF\", which read as a request size over 1.3 GB; a limit that high would take a raft connection for a Kafka request", err)
			}
			return err
		}
		return nil
	}
	return s
}

// spec is one row of keyTable.
type spec struct {
	name     string
	set      func(c *Config, v string) error // parse v (syntax, type range) and assign
	get      func(c *Config) string          // the value as Kafka shows it; nil for synonyms
	check    func(c *Config) error           // the field's own constraints; nil if none
	synonyms []spec                          // other names for the field, highest precedence first
}

// entry indexes a key name, canonical or synonym.
type entry struct {
	spec   *spec
	canon  *spec
	bit    keyBits // this name's bit in Config.set
	family keyBits // for a canonical key, its bit and its synonyms' bits
	stage  int     // Load applies lower stages first: synonyms -n..-1, canonical 0
}

var (
	entries   = map[string]*entry{}
	canonKeys []string // sorted
)

func init() {
	i := 0
	for t := range keyTable {
		s := &keyTable[t]
		e := &entry{spec: s, canon: s, bit: bitOf(i)}
		i++
		entries[s.name] = e
		canonKeys = append(canonKeys, s.name)
		e.family = e.bit
		for j := range s.synonyms {
			syn := &entry{spec: &s.synonyms[j], canon: s, bit: bitOf(i), stage: -(j + 1)}
			i++
			entries[syn.spec.name] = syn
			e.family = e.family.or(syn.bit)
		}
	}
	if i > len(keyBits{})*64 {
		panic("config: more keys than keyBits holds; widen it")
	}
	sort.Strings(canonKeys)
}

// Keys returns the canonical key names, sorted. Synonyms (log.dir,
// log.roll.hours, log.retention.minutes, log.retention.hours) are not
// listed; see Synonyms.
func Keys() []string {
	return append([]string(nil), canonKeys...)
}

// Synonyms returns the other names of a canonical key, highest precedence
// first (for log.retention.ms: log.retention.minutes, log.retention.hours),
// or nil.
func Synonyms(key string) []string {
	e, ok := entries[key]
	if !ok || e.spec != e.canon {
		return nil
	}
	var out []string
	for _, s := range e.spec.synonyms {
		out = append(out, s.name)
	}
	return out
}

// Set sets one key, by Kafka name (a canonical key or a synonym), from its
// text. It parses the value, checks the key's own range, and leaves c
// unchanged on error. Checks that span keys are Validate's. An empty
// advertised.listeners means "the listeners", as if never set.
func (c *Config) Set(key, value string) error {
	e, ok := entries[key]
	if !ok {
		return c.setUnacted(key, value)
	}
	tmp := *c
	tmp.set = tmp.set.or(e.bit)
	err := e.spec.set(&tmp, value)
	tmp.derive()
	if err == nil && e.canon.check != nil {
		err = e.canon.check(&tmp)
	}
	if err != nil {
		return &Error{Key: key, Value: value, Reason: err.Error(), Err: ErrInvalidValue}
	}
	*c = tmp
	return nil
}

// setUnacted sets a Kafka key Sluice does not act on (kafkaKeys), after
// checking its value against its Kafka type; any other key is unknown.
func (c *Config) setUnacted(key, value string) error {
	if ok, err := c.setListenerSSL(key, value); ok {
		return err
	}
	k, ok := unactedKey(key)
	if !ok {
		e := &Error{Key: key, Value: value, Err: ErrUnknownKey}
		switch s := suggest(key); {
		case strings.HasPrefix(key, "zookeeper."):
			e.Reason = "a ZooKeeper setting; Kafka 4 has no ZooKeeper mode, and Sluice needs none: remove it"
		case s != "":
			e.Reason = fmt.Sprintf("did you mean %q?", s)
		}
		return e
	}
	if err := k.check(value); err != nil {
		return &Error{Key: key, Value: value, Reason: err.Error(), Err: ErrInvalidValue}
	}
	m := make(map[string]string, len(c.unacted)+1)
	maps.Copy(m, c.unacted)
	m[key] = value
	c.unacted = m
	return nil
}

// Unacted returns the Kafka keys that were set but that Sluice accepts
// without acting on (see kafkaKeys), sorted.
func (c *Config) Unacted() []string {
	var out []string
	for k := range c.unacted {
		if !saslActed(k) && !authzActed(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// String returns a canonical key's current value as Kafka shows it (for
// DescribeConfigs); Set(key, value) with it changes nothing. ok is false
// for unknown keys and for synonyms.
func (c *Config) String(key string) (value string, ok bool) {
	e, ok := entries[key]
	if !ok || e.spec.get == nil {
		return "", false
	}
	return e.spec.get(c), true
}

// Source says where a key's value came from.
type Source uint8

const (
	// SourceDefault: the key was never set; the value is Sluice's default
	// (Kafka's DEFAULT_CONFIG).
	SourceDefault Source = iota
	// SourceStatic: the key, or for a canonical key one of its synonyms,
	// was set by the config file, --set or Set (Kafka's
	// STATIC_BROKER_CONFIG).
	SourceStatic
)

func (s Source) String() string {
	if s == SourceStatic {
		return "static"
	}
	return "default"
}

// Source reports where key's value came from; ok is false for an unknown
// key.
func (c *Config) Source(key string) (src Source, ok bool) {
	e, ok := entries[key]
	if !ok {
		return SourceDefault, false
	}
	mask := e.bit
	if e.spec == e.canon {
		mask = e.family
	}
	if c.set.intersects(mask) {
		return SourceStatic, true
	}
	return SourceDefault, true
}

// topicSynonym marks s as the broker default of a topic config (the one
// whose TopicConfigKey.BrokerKey is s.name): its values are read by the
// topic config table's parser, so the broker key accepts exactly what a
// topic override accepts (Kafka's ConfigDef reading: trimmed, lists split
// on commas with white space dropped, Kafka's ranges), and s.set then
// takes the canonical form.
func topicSynonym(s spec) spec {
	var key replica.TopicConfigKey
	for _, k := range replica.TopicConfigKeys() {
		if k.BrokerKey == s.name {
			key = k
		}
	}
	if key.Name == "" {
		panic("config: " + s.name + " is the broker key of no topic config")
	}
	set := s.set
	s.set = func(c *Config, v string) error {
		canon, err := key.Parse(v)
		if err != nil {
			return err
		}
		return set(c, canon)
	}
	return s
}

// withSynonyms adds lower-precedence names to s, highest first.
func withSynonyms(s spec, syn ...spec) spec {
	s.synonyms = syn
	return s
}

type integer interface{ int16 | int32 | int64 }

func typeRange[T integer]() (lo, hi int64, bits int) {
	var z T
	switch any(z).(type) {
	case int16:
		return math.MinInt16, math.MaxInt16, 16
	case int32:
		return math.MinInt32, math.MaxInt32, 32
	}
	return math.MinInt64, math.MaxInt64, 64
}

// intKey is a decimal integer key in [lo, hi].
func intKey[T integer](name string, field func(*Config) *T, lo, hi T) spec {
	tlo, thi, bits := typeRange[T]()
	return spec{
		name: name,
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
			if err != nil {
				return fmt.Errorf("must be an integer in [%d, %d]", lo, hi)
			}
			*field(c) = T(n)
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(int64(*field(c)), 10) },
		check: func(c *Config) error {
			n := *field(c)
			switch {
			case n >= lo && n <= hi:
				return nil
			case int64(hi) == thi && int64(lo) != tlo:
				return fmt.Errorf("must be >= %d", lo)
			}
			return fmt.Errorf("must be in [%d, %d]", lo, hi)
		},
	}
}

// scaledKey is a synonym in a coarser unit (Kafka int) for a long field:
// field = v*unit. v must be >= lo; a negative v sets -1 (unlimited).
func scaledKey(name string, field func(*Config) *int64, unit int64, lo int32) spec {
	return spec{
		name: name,
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return fmt.Errorf("must be an integer in [%d, %d]", lo, math.MaxInt32)
			}
			if n < int64(lo) {
				return fmt.Errorf("must be >= %d", lo)
			}
			if n < 0 {
				*field(c) = -1
			} else {
				*field(c) = n * unit
			}
			return nil
		},
	}
}

// boolKey is true or false, in any case, as in Kafka.
func boolKey(name string, field func(*Config) *bool) spec {
	return spec{
		name: name,
		set: func(c *Config, v string) error {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true":
				*field(c) = true
			case "false":
				*field(c) = false
			default:
				return errors.New("must be true or false")
			}
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

// enumKey is one of allowed, case-sensitive as in Kafka.
func enumKey(name string, field func(*Config) *string, allowed ...string) spec {
	return spec{
		name: name,
		set: func(c *Config, v string) error {
			*field(c) = strings.TrimSpace(v)
			return nil
		},
		get: func(c *Config) string { return *field(c) },
		check: func(c *Config) error {
			for _, a := range allowed {
				if *field(c) == a {
					return nil
				}
			}
			return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
		},
	}
}

// floatKey is a Kafka double in [lo, hi].
func floatKey(name string, field func(*Config) *float64, lo, hi float64) spec {
	return spec{
		name: name,
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) {
				return fmt.Errorf("must be a number in [%g, %g]", lo, hi)
			}
			*field(c) = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(*field(c), 'f', -1, 64) },
		check: func(c *Config) error {
			if f := *field(c); f < lo || f > hi {
				return fmt.Errorf("must be a number in [%g, %g]", lo, hi)
			}
			return nil
		},
	}
}

// parseConnOverrides parses max.connections.per.ip.overrides:
// host:count,... The count follows the last colon, so an IPv6 address
// needs no brackets (Kafka's syntax); brackets are accepted too.
func parseConnOverrides(v string) (map[string]int32, error) {
	items, err := parseList(v)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	m := make(map[string]int32, len(items))
	for _, it := range items {
		i := strings.LastIndexByte(it, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q is not host:count", it)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(it[:i]), "["), "]")
		n, err := strconv.ParseInt(strings.TrimSpace(it[i+1:]), 10, 32)
		if err != nil || n < 0 || host == "" {
			return nil, fmt.Errorf("%q: want host:count with count in [0, %d]", it, math.MaxInt32)
		}
		if _, dup := m[host]; dup {
			return nil, fmt.Errorf("host %s is given twice", host)
		}
		m[host] = int32(n)
	}
	return m, nil
}

func formatConnOverrides(m map[string]int32) string {
	hosts := make([]string, 0, len(m))
	for h := range m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for i, h := range hosts {
		hosts[i] = h + ":" + strconv.Itoa(int(m[h]))
	}
	return strings.Join(hosts, ",")
}

func setDirs(c *Config, v string) (err error) {
	c.LogDirs, err = parseList(v)
	return err
}

func checkDirs(c *Config) error {
	if len(c.LogDirs) == 0 {
		return errors.New("must name at least one directory")
	}
	return nil
}

func setCleanupPolicy(c *Config, v string) error {
	items, err := parseList(v)
	if err != nil {
		return err
	}
	var p CleanupPolicy
	for _, it := range items {
		switch it {
		case "delete":
			p |= CleanupDelete
		case "compact":
			p |= CleanupCompact
		default:
			return fmt.Errorf("unknown policy %q (want delete, compact or both)", it)
		}
	}
	c.LogCleanupPolicy = p
	return nil
}

func checkCleanupPolicy(c *Config) error {
	if p := c.LogCleanupPolicy; p == 0 || p&^(CleanupDelete|CleanupCompact) != 0 {
		return errors.New("must be delete, compact or compact,delete")
	}
	return nil
}

// keyBits is a set of key indexes (see entries), a bit each.
type keyBits [4]uint64

func bitOf(i int) keyBits {
	var b keyBits
	b[i/64] = 1 << (i % 64)
	return b
}

func (a keyBits) or(b keyBits) keyBits {
	for i := range a {
		a[i] |= b[i]
	}
	return a
}

func (a keyBits) andNot(b keyBits) keyBits {
	for i := range a {
		a[i] &^= b[i]
	}
	return a
}

func (a keyBits) intersects(b keyBits) bool {
	for i := range a {
		if a[i]&b[i] != 0 {
			return true
		}
	}
	return false
}

// checkMetricsListen: metrics.listen is empty or host:port with a port in
// [0, 65535] (the host may be empty: every interface).
func checkMetricsListen(c *Config) error {
	if c.MetricsListen == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(c.MetricsListen)
	if err != nil {
		return fmt.Errorf("must be host:port (for example 127.0.0.1:9644), or none (or empty) for no listener: %v", err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("port %q must be an integer in [0, 65535]", port)
	}
	return nil
}
