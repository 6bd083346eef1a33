package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// kafkaKeys is every broker config key of Apache Kafka 4: the names of
// Kafka's broker config definitions (KafkaConfig's ConfigDef, merged from
// ServerConfigs, KRaftConfigs, SocketServerConfigs, ReplicationConfigs,
// GroupCoordinatorConfig, ShareGroupConfig, ShareCoordinatorConfig,
// CleanerConfig, LogConfig's server keys, TransactionLogConfig,
// TransactionStateManagerConfig, QuorumConfig, RemoteLogManagerConfig,
// MetricConfigs, QuotaConfig, BrokerSecurityConfigs,
// DelegationTokenManagerConfigs and PasswordEncoderConfigs), as of Kafka's
// trunk of 2024-10-25 (4.0 in development), less ZooKeeper's keys, which
// Kafka 4 removed, and less the internal keys Kafka does not document;
// plus StandardAuthorizer's two keys, which Kafka passes to its
// authorizer with the broker's configs.
//
// A key keyTable also holds is honoured: it sets a Config field, and its
// row gives Kafka's default ("" for none), which
// TestKafkaKeysDefaults compares with Sluice's. Any other key is
// accepted, its value checked against its Kafka type, and not acted on:
// Config.Unacted lists them and the broker names them in one line at
// start-up. A key in neither table is an error.
var kafkaKeys = []kafkaKey{
	{"advertised.listeners", kString, ""},
	{"allow.everyone.if.no.acl.found", kBool, ""}, // StandardAuthorizer's (authz.go)
	{"alter.config.policy.class.name", kClass, ""},
	{"alter.log.dirs.replication.quota.window.num", kInt, ""},
	{"alter.log.dirs.replication.quota.window.size.seconds", kInt, ""},
	{"authorizer.class.name", kString, ""},
	{"auto.create.topics.enable", kBool, "true"},
	{"auto.leader.rebalance.enable", kBool, "true"},
	{"background.threads", kInt, ""},
	{"broker.heartbeat.interval.ms", kInt, "2000"},
	{"broker.id", kInt, "-1"},
	{"broker.id.generation.enable", kBool, ""},
	{"broker.rack", kString, ""},
	{"broker.session.timeout.ms", kInt, "9000"},
	{"client.quota.callback.class", kClass, ""},
	{"compression.gzip.level", kInt, ""},
	{"compression.lz4.level", kInt, ""},
	{"compression.type", kString, "producer"},
	{"compression.zstd.level", kInt, ""},
	{"connection.failed.authentication.delay.ms", kInt, ""},
	{"connections.max.idle.ms", kLong, "600000"},
	{"connections.max.reauth.ms", kLong, ""},
	{"control.plane.listener.name", kString, ""},
	{"controlled.shutdown.enable", kBool, ""},
	{"controlled.shutdown.max.retries", kInt, ""},
	{"controlled.shutdown.retry.backoff.ms", kLong, ""},
	{"controller.listener.names", kString, ""},
	{"controller.quorum.append.linger.ms", kInt, ""},
	{"controller.quorum.bootstrap.servers", kList, ""},
	{"controller.quorum.election.backoff.max.ms", kInt, ""},
	{"controller.quorum.election.timeout.ms", kInt, ""},
	{"controller.quorum.fetch.timeout.ms", kInt, ""},
	{"controller.quorum.request.timeout.ms", kInt, ""},
	{"controller.quorum.retry.backoff.ms", kInt, ""},
	{"controller.quorum.voters", kList, ""},
	{"controller.quota.window.num", kInt, "11"},
	{"controller.quota.window.size.seconds", kInt, "1"},
	{"controller.socket.timeout.ms", kInt, ""},
	{"create.topic.policy.class.name", kClass, ""},
	{"default.replication.factor", kInt, "1"},
	{"delegation.token.expiry.check.interval.ms", kLong, ""},
	{"delegation.token.expiry.time.ms", kLong, ""},
	{"delegation.token.max.lifetime.ms", kLong, ""},
	{"delegation.token.secret.key", kPassword, ""},
	{"delete.records.purgatory.purge.interval.requests", kInt, ""},
	{"delete.topic.enable", kBool, ""},
	{"early.start.listeners", kString, ""},
	{"eligible.leader.replicas.enable", kBool, ""},
	{"fetch.max.bytes", kInt, "57671680"},
	{"fetch.purgatory.purge.interval.requests", kInt, ""},
	{"group.consumer.assignors", kList, ""},
	{"group.consumer.heartbeat.interval.ms", kInt, "5000"},
	{"group.consumer.max.heartbeat.interval.ms", kInt, ""},
	{"group.consumer.max.session.timeout.ms", kInt, ""},
	{"group.consumer.max.size", kInt, "2147483647"},
	{"group.consumer.min.heartbeat.interval.ms", kInt, ""},
	{"group.consumer.min.session.timeout.ms", kInt, ""},
	{"group.consumer.session.timeout.ms", kInt, "45000"},
	{"group.coordinator.append.linger.ms", kInt, ""},
	{"group.coordinator.rebalance.protocols", kList, ""},
	{"group.coordinator.threads", kInt, ""},
	{"group.initial.rebalance.delay.ms", kInt, "3000"},
	{"group.max.session.timeout.ms", kInt, "1800000"},
	{"group.max.size", kInt, "2147483647"},
	{"group.min.session.timeout.ms", kInt, "6000"},
	{"group.share.delivery.count.limit", kInt, ""},
	{"group.share.heartbeat.interval.ms", kInt, ""},
	{"group.share.max.groups", kShort, ""},
	{"group.share.max.heartbeat.interval.ms", kInt, ""},
	{"group.share.max.record.lock.duration.ms", kInt, ""},
	{"group.share.max.session.timeout.ms", kInt, ""},
	{"group.share.max.size", kInt, ""},
	{"group.share.min.heartbeat.interval.ms", kInt, ""},
	{"group.share.min.record.lock.duration.ms", kInt, ""},
	{"group.share.min.session.timeout.ms", kInt, ""},
	{"group.share.partition.max.record.locks", kInt, ""},
	{"group.share.record.lock.duration.ms", kInt, ""},
	{"group.share.session.timeout.ms", kInt, ""},
	{"initial.broker.registration.timeout.ms", kInt, ""},
	{"inter.broker.listener.name", kString, ""},
	{"inter.broker.protocol.version", kString, ""},
	{"kafka.metrics.polling.interval.secs", kInt, ""},
	{"kafka.metrics.reporters", kList, ""},
	{"leader.imbalance.check.interval.seconds", kLong, "300"},
	{"leader.imbalance.per.broker.percentage", kInt, "10"},
	{"listener.security.protocol.map", kString, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"},
	{"listeners", kString, "PLAINTEXT://:9092"},
	{"log.cleaner.backoff.ms", kLong, "15000"},
	{"log.cleaner.dedupe.buffer.size", kLong, "134217728"},
	{"log.cleaner.delete.retention.ms", kLong, "86400000"},
	{"log.cleaner.enable", kBool, "true"},
	{"log.cleaner.io.buffer.load.factor", kDouble, ""},
	{"log.cleaner.io.buffer.size", kInt, ""},
	{"log.cleaner.io.max.bytes.per.second", kDouble, ""},
	{"log.cleaner.max.compaction.lag.ms", kLong, "9223372036854775807"},
	{"log.cleaner.min.cleanable.ratio", kDouble, "0.5"},
	{"log.cleaner.min.compaction.lag.ms", kLong, "0"},
	{"log.cleaner.threads", kInt, "1"},
	{"log.cleanup.policy", kList, "delete"},
	{"log.dir", kString, "/tmp/kafka-logs"},
	{"log.dir.failure.timeout.ms", kLong, ""},
	{"log.dirs", kString, ""},
	{"log.flush.interval.messages", kLong, "9223372036854775807"},
	{"log.flush.interval.ms", kLong, ""},
	{"log.flush.offset.checkpoint.interval.ms", kInt, ""},
	{"log.flush.scheduler.interval.ms", kLong, ""},
	{"log.flush.start.offset.checkpoint.interval.ms", kInt, ""},
	{"log.index.interval.bytes", kInt, "4096"},
	{"log.index.size.max.bytes", kInt, "10485760"},
	{"log.local.retention.bytes", kLong, ""},
	{"log.local.retention.ms", kLong, ""},
	{"log.message.downconversion.enable", kBool, ""},
	{"log.message.format.version", kString, ""},
	{"log.message.timestamp.after.max.ms", kLong, ""},
	{"log.message.timestamp.before.max.ms", kLong, ""},
	{"log.message.timestamp.difference.max.ms", kLong, ""},
	{"log.message.timestamp.type", kString, "CreateTime"},
	{"log.preallocate", kBool, ""},
	{"log.retention.bytes", kLong, "-1"},
	{"log.retention.check.interval.ms", kLong, "300000"},
	{"log.retention.hours", kInt, "168"},
	{"log.retention.minutes", kInt, ""},
	{"log.retention.ms", kLong, ""},
	{"log.roll.hours", kInt, "168"},
	{"log.roll.jitter.hours", kInt, ""},
	{"log.roll.jitter.ms", kLong, ""},
	{"log.roll.ms", kLong, ""},
	{"log.segment.bytes", kInt, "1073741824"},
	{"log.segment.delete.delay.ms", kLong, "60000"},
	{"max.connection.creation.rate", kInt, "2147483647"},
	{"max.connections", kInt, "2147483647"},
	{"max.connections.per.ip", kInt, "2147483647"},
	{"max.connections.per.ip.overrides", kString, ""},
	{"max.incremental.fetch.session.cache.slots", kInt, ""},
	{"max.request.partition.size.limit", kInt, ""},
	{"message.max.bytes", kInt, "1048588"},
	{"metadata.log.dir", kString, ""},
	{"metadata.log.max.record.bytes.between.snapshots", kLong, ""},
	{"metadata.log.max.snapshot.interval.ms", kLong, ""},
	{"metadata.log.segment.bytes", kInt, "1073741824"},
	{"metadata.log.segment.ms", kLong, ""},
	{"metadata.max.idle.interval.ms", kInt, ""},
	{"metadata.max.retention.bytes", kLong, "104857600"},
	{"metadata.max.retention.ms", kLong, ""},
	{"metric.reporters", kList, ""},
	{"metrics.num.samples", kInt, ""},
	{"metrics.recording.level", kString, ""},
	{"metrics.sample.window.ms", kLong, ""},
	{"min.insync.replicas", kInt, "1"},
	{"node.id", kInt, "-1"},
	{"num.io.threads", kInt, ""},
	{"num.network.threads", kInt, ""},
	{"num.partitions", kInt, "1"},
	{"num.recovery.threads.per.data.dir", kInt, ""},
	{"num.replica.alter.log.dirs.threads", kInt, ""},
	{"num.replica.fetchers", kInt, ""},
	{"offset.metadata.max.bytes", kInt, "4096"},
	{"offsets.commit.timeout.ms", kInt, "5000"},
	{"offsets.load.buffer.size", kInt, ""},
	{"offsets.retention.check.interval.ms", kLong, "600000"},
	{"offsets.retention.minutes", kInt, "10080"},
	{"offsets.topic.compression.codec", kInt, ""},
	{"offsets.topic.num.partitions", kInt, "50"},
	{"offsets.topic.replication.factor", kShort, "3"},
	{"offsets.topic.segment.bytes", kInt, ""},
	{"password.encoder.cipher.algorithm", kString, ""},
	{"password.encoder.iterations", kInt, ""},
	{"password.encoder.key.length", kInt, ""},
	{"password.encoder.keyfactory.algorithm", kString, ""},
	{"password.encoder.old.secret", kPassword, ""},
	{"password.encoder.secret", kPassword, ""},
	{"principal.builder.class", kClass, ""},
	{"process.roles", kList, ""},
	{"producer.id.expiration.ms", kInt, "86400000"},
	{"producer.purgatory.purge.interval.requests", kInt, ""},
	{"queued.max.request.bytes", kLong, "-1"},
	{"queued.max.requests", kInt, ""},
	{"quota.window.num", kInt, "11"},
	{"quota.window.size.seconds", kInt, "1"},
	{"remote.fetch.max.wait.ms", kInt, ""},
	{"remote.list.offsets.request.timeout.ms", kLong, ""},
	{"remote.log.index.file.cache.total.size.bytes", kLong, ""},
	{"remote.log.manager.copier.thread.pool.size", kInt, ""},
	{"remote.log.manager.copy.max.bytes.per.second", kLong, ""},
	{"remote.log.manager.copy.quota.window.num", kInt, ""},
	{"remote.log.manager.copy.quota.window.size.seconds", kInt, ""},
	{"remote.log.manager.expiration.thread.pool.size", kInt, ""},
	{"remote.log.manager.fetch.max.bytes.per.second", kLong, ""},
	{"remote.log.manager.fetch.quota.window.num", kInt, ""},
	{"remote.log.manager.fetch.quota.window.size.seconds", kInt, ""},
	{"remote.log.manager.task.interval.ms", kLong, ""},
	{"remote.log.manager.thread.pool.size", kInt, ""},
	{"remote.log.metadata.custom.metadata.max.bytes", kInt, ""},
	{"remote.log.metadata.manager.class.name", kString, ""},
	{"remote.log.metadata.manager.class.path", kString, ""},
	{"remote.log.metadata.manager.impl.prefix", kString, ""},
	{"remote.log.metadata.manager.listener.name", kString, ""},
	{"remote.log.reader.max.pending.tasks", kInt, ""},
	{"remote.log.reader.threads", kInt, ""},
	{"remote.log.storage.manager.class.name", kString, ""},
	{"remote.log.storage.manager.class.path", kString, ""},
	{"remote.log.storage.manager.impl.prefix", kString, ""},
	{"remote.log.storage.system.enable", kBool, ""},
	{"replica.fetch.backoff.ms", kInt, ""},
	{"replica.fetch.max.bytes", kInt, ""},
	{"replica.fetch.min.bytes", kInt, ""},
	{"replica.fetch.response.max.bytes", kInt, ""},
	{"replica.fetch.wait.max.ms", kInt, ""},
	{"replica.high.watermark.checkpoint.interval.ms", kLong, ""},
	{"replica.lag.time.max.ms", kLong, "30000"},
	{"replica.selector.class", kString, ""},
	{"replica.socket.receive.buffer.bytes", kInt, ""},
	{"replica.socket.timeout.ms", kInt, ""},
	{"replication.quota.window.num", kInt, ""},
	{"replication.quota.window.size.seconds", kInt, ""},
	{"request.timeout.ms", kInt, ""},
	{"reserved.broker.max.id", kInt, ""},
	{"sasl.client.callback.handler.class", kClass, ""},
	{"sasl.enabled.mechanisms", kList, ""},
	{"sasl.jaas.config", kPassword, ""},
	{"sasl.kerberos.kinit.cmd", kString, ""},
	{"sasl.kerberos.min.time.before.relogin", kLong, ""},
	{"sasl.kerberos.principal.to.local.rules", kList, ""},
	{"sasl.kerberos.service.name", kString, ""},
	{"sasl.kerberos.ticket.renew.jitter", kDouble, ""},
	{"sasl.kerberos.ticket.renew.window.factor", kDouble, ""},
	{"sasl.login.callback.handler.class", kClass, ""},
	{"sasl.login.class", kClass, ""},
	{"sasl.login.connect.timeout.ms", kInt, ""},
	{"sasl.login.read.timeout.ms", kInt, ""},
	{"sasl.login.refresh.buffer.seconds", kShort, ""},
	{"sasl.login.refresh.min.period.seconds", kShort, ""},
	{"sasl.login.refresh.window.factor", kDouble, ""},
	{"sasl.login.refresh.window.jitter", kDouble, ""},
	{"sasl.login.retry.backoff.max.ms", kLong, ""},
	{"sasl.login.retry.backoff.ms", kLong, ""},
	{"sasl.mechanism.controller.protocol", kString, ""},
	{"sasl.mechanism.inter.broker.protocol", kString, ""},
	{"sasl.oauthbearer.clock.skew.seconds", kInt, ""},
	{"sasl.oauthbearer.expected.audience", kList, ""},
	{"sasl.oauthbearer.expected.issuer", kString, ""},
	{"sasl.oauthbearer.jwks.endpoint.refresh.ms", kLong, ""},
	{"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", kLong, ""},
	{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", kLong, ""},
	{"sasl.oauthbearer.jwks.endpoint.url", kString, ""},
	{"sasl.oauthbearer.scope.claim.name", kString, ""},
	{"sasl.oauthbearer.sub.claim.name", kString, ""},
	{"sasl.oauthbearer.token.endpoint.url", kString, ""},
	{"sasl.server.callback.handler.class", kClass, ""},
	{"sasl.server.max.receive.size", kInt, ""},
	{"security.inter.broker.protocol", kString, ""},
	{"security.providers", kString, ""},
	{"share.coordinator.append.linger.ms", kInt, ""},
	{"share.coordinator.load.buffer.size", kInt, ""},
	{"share.coordinator.snapshot.update.records.per.snapshot", kInt, ""},
	{"share.coordinator.state.topic.compression.codec", kInt, ""},
	{"share.coordinator.state.topic.min.isr", kShort, ""},
	{"share.coordinator.state.topic.num.partitions", kInt, ""},
	{"share.coordinator.state.topic.replication.factor", kShort, ""},
	{"share.coordinator.state.topic.segment.bytes", kInt, ""},
	{"share.coordinator.threads", kInt, ""},
	{"share.coordinator.write.timeout.ms", kInt, ""},
	{"share.fetch.purgatory.purge.interval.requests", kInt, ""},
	{"socket.connection.setup.timeout.max.ms", kLong, ""},
	{"socket.connection.setup.timeout.ms", kLong, ""},
	{"socket.listen.backlog.size", kInt, ""},
	{"socket.receive.buffer.bytes", kInt, ""},
	{"socket.request.max.bytes", kInt, "104857600"},
	{"socket.send.buffer.bytes", kInt, ""},
	{"ssl.allow.dn.changes", kBool, ""},
	{"ssl.allow.san.changes", kBool, ""},
	{"ssl.cipher.suites", kList, ""},
	{"ssl.client.auth", kString, "none"},
	{"ssl.enabled.protocols", kList, "TLSv1.2,TLSv1.3"},
	{"ssl.endpoint.identification.algorithm", kString, "https"},
	{"ssl.engine.factory.class", kClass, ""},
	{"ssl.key.password", kPassword, ""},
	{"ssl.keymanager.algorithm", kString, ""},
	{"ssl.keystore.certificate.chain", kPassword, ""},
	{"ssl.keystore.key", kPassword, ""},
	{"ssl.keystore.location", kString, ""},
	{"ssl.keystore.password", kPassword, ""},
	{"ssl.keystore.type", kString, "JKS"},
	{"ssl.principal.mapping.rules", kString, "DEFAULT"},
	{"ssl.protocol", kString, "TLSv1.3"},
	{"ssl.provider", kString, ""},
	{"ssl.secure.random.implementation", kString, ""},
	{"ssl.trustmanager.algorithm", kString, ""},
	{"ssl.truststore.certificates", kPassword, ""},
	{"ssl.truststore.location", kString, ""},
	{"ssl.truststore.password", kPassword, ""},
	{"ssl.truststore.type", kString, "JKS"},
	{"super.users", kString, ""}, // StandardAuthorizer's (authz.go)
	{"telemetry.max.bytes", kInt, ""},
	{"transaction.abort.timed.out.transaction.cleanup.interval.ms", kInt, "10000"},
	{"transaction.max.timeout.ms", kInt, "900000"},
	{"transaction.partition.verification.enable", kBool, "true"},
	{"transaction.remove.expired.transaction.cleanup.interval.ms", kInt, "3600000"},
	{"transaction.state.log.load.buffer.size", kInt, ""},
	{"transaction.state.log.min.isr", kInt, "2"},
	{"transaction.state.log.num.partitions", kInt, "50"},
	{"transaction.state.log.replication.factor", kShort, "3"},
	{"transaction.state.log.segment.bytes", kInt, "104857600"},
	{"transactional.id.expiration.ms", kInt, "604800000"},
	{"unclean.leader.election.enable", kBool, "false"},
}

// kafkaKey is a row of kafkaKeys.
type kafkaKey struct {
	name string
	typ  kafkaType
	def  string // Kafka's default, for the keys Sluice honours; "" otherwise
}

// kafkaType is a Kafka ConfigDef type: how a value not acted on is still
// checked.
type kafkaType uint8

const (
	kString kafkaType = iota
	kList
	kClass
	kPassword
	kBool
	kShort
	kInt
	kLong
	kDouble
)

var kafkaByName = func() map[string]*kafkaKey {
	m := make(map[string]*kafkaKey, len(kafkaKeys))
	for i := range kafkaKeys {
		m[kafkaKeys[i].name] = &kafkaKeys[i]
	}
	return m
}()

// Sensitive reports whether a key is a Kafka PASSWORD (ssl.key.password,
// ssl.keystore.key, ...): its value is never shown (DescribeConfigs
// answers null, as Kafka does).
func Sensitive(key string) bool {
	k, ok := kafkaByName[key]
	return ok && k.typ == kPassword
}

// listenerPrefix starts Kafka's per-listener overrides,
// listener.name.<listener name>.<key> (SSL, SASL and connection keys).
const listenerPrefix = "listener.name."

// unactedKey returns the Kafka key a name not in keyTable stands for: the
// name itself, or for listener.name.<listener>.<key> the key. ok is false
// when it is not a Kafka broker key.
func unactedKey(name string) (k *kafkaKey, ok bool) {
	if k, ok := kafkaByName[name]; ok {
		return k, true
	}
	if rest, found := strings.CutPrefix(name, listenerPrefix); found {
		if _, key, found := strings.Cut(rest, "."); found {
			if k, ok := kafkaByName[key]; ok {
				return k, true
			}
			// listener.name.<listener>.<mechanism>.sasl.* (Kafka's
			// per-mechanism SASL keys, e.g. plain.sasl.jaas.config).
			if _, key, found := strings.Cut(key, "."); found && strings.HasPrefix(key, "sasl.") {
				k, ok := kafkaByName[key]
				return k, ok
			}
		}
	}
	return nil, false
}

// check checks v as Kafka's ConfigDef parses the key's type: numbers in
// their Java type's range, booleans true or false in any case.
func (k *kafkaKey) check(v string) error {
	v = strings.TrimSpace(v)
	bits := 0
	switch k.typ {
	case kBool:
		if l := strings.ToLower(v); l != "true" && l != "false" {
			return errors.New("must be true or false")
		}
	case kShort:
		bits = 16
	case kInt:
		bits = 32
	case kLong:
		bits = 64
	case kDouble:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return errors.New("must be a number")
		}
	}
	if bits > 0 {
		if _, err := strconv.ParseInt(v, 10, bits); err != nil {
			return fmt.Errorf("must be an integer in [%d, %d]", int64(-1)<<(bits-1), uint64(1)<<(bits-1)-1)
		}
	}
	return nil
}

// suggest returns the known key (Sluice's or Kafka's) closest to an
// unknown name by edit distance, or "" when none is close: within a
// third of the name's length, and at most 4 edits.
func suggest(name string) string {
	best, bestD := "", min(4, len(name)/3)+1
	try := func(k string) {
		// With limit bestD+1, a result of bestD is exact (editDistance
		// caps only at its limit): ties go to the smaller key.
		if d := editDistance(name, k, bestD+1); d < bestD || d == bestD && best != "" && k < best {
			best, bestD = k, d
		}
	}
	for k := range entries {
		try(k)
	}
	for _, k := range kafkaKeys {
		try(k.name)
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, or any value
// >= limit once it is known to be at least limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
