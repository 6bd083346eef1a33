package replica

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// Topic configs: one table (topicConfigTable below), one entry per key
// Sluice honours, giving its Kafka name, its type as DescribeConfigs v3+
// reports it, the broker key it defaults to (Kafka's synonym), Kafka's
// default, whether a change applies to open partitions, and the one parser
// of its values. CreateTopics validation, DescribeConfigs,
// AlterConfigs/IncrementalAlterConfigs, the partition log's settings, the
// produce path and the broker's own parser of each synonym all go through
// it, so they accept the same values.
//
// Values are read as Kafka's ConfigDef reads them: the value is trimmed;
// INT is a 32-bit and LONG a 64-bit decimal integer; DOUBLE a number; a
// LIST is split on commas with the white space around each item dropped
// (so "compact, delete" is the list compact, delete); STRING and LIST
// items are case-sensitive. Ranges are Kafka's (LogConfig's validators).
//
// Every key applies live: a change reaches the open partitions of the
// topic at once, except segment.index.bytes, which sizes index files from
// the next segment roll.
//
// Two keys have no broker synonym and set nothing in TopicConfig:
// leader.replication.throttled.replicas and
// follower.replication.throttled.replicas (Kafka's replication quotas,
// KIP-73) do not change how a partition behaves; the broker reads them
// from the topic's configs (ParseThrottledReplicas) to choose the
// replicas its replication throttle paces (raft_throttle.go). Whether acks wait for an fsync (flush.messages=1)
// is decided at each append from the config in force, so it follows a
// change at once too.

// TopicConfig is a topic's configuration resolved once (when the topic is opened or its configs change), typed.
type TopicConfig struct {
	Log               segment.Config // the partition log's settings (segment.bytes, retention.*, flush.*, cleanup.policy, ...)
	MaxMessageBytes   int            // max.message.bytes: the largest record batch accepted, in bytes
	LogAppendTime     bool           // message.timestamp.type=LogAppendTime
	Compression       batch.Codec    // compression.type when it names a codec
	KeepProducerCodec bool           // compression.type=producer: batches are stored as sent
	MinInsyncReplicas int            // min.insync.replicas
}

// ConfigType is a config's type as DescribeConfigs v3+ reports it; the
// values are the protocol's (kmsg.ConfigType).
type ConfigType int8

// Config types (the ones topic configs use).
const (
	ConfigBoolean ConfigType = 1
	ConfigString  ConfigType = 2
	ConfigInt     ConfigType = 3
	ConfigShort   ConfigType = 4
	ConfigLong    ConfigType = 5
	ConfigDouble  ConfigType = 6
	ConfigList    ConfigType = 7
)

// String is Kafka's name of the type (ConfigDef.Type).
func (t ConfigType) String() string {
	switch t {
	case ConfigBoolean:
		return "BOOLEAN"
	case ConfigString:
		return "STRING"
	case ConfigInt:
		return "INT"
	case ConfigShort:
		return "SHORT"
	case ConfigLong:
		return "LONG"
	case ConfigDouble:
		return "DOUBLE"
	case ConfigList:
		return "LIST"
	}
	return "UNKNOWN"
}

// TopicConfigKey is one topic config: one row of the table.
type TopicConfigKey struct {
	Name      string     // Kafka's topic config name
	Type      ConfigType // as DescribeConfigs v3+ reports it
	BrokerKey string     // the broker config a topic without an override takes its value from; "" for none
	Default   string     // Kafka's default, used when the broker has no value for BrokerKey (or there is none)
	Live      bool       // a change applies to open partitions at once (else from the next roll)

	// parse reads a value (untrimmed), checks it against the key's range
	// and sets its field of tc; it returns the reason a value is invalid
	// and, when canon is set, the value in canonical form (as
	// DescribeConfigs shows it).
	parse func(v string, tc *TopicConfig, canon bool) (string, error)
}

// Parse checks a value for the key (syntax and range) and returns it in
// canonical form: trimmed, a number as it parses, a list joined with bare
// commas. The error is the reason only, without the key.
func (k TopicConfigKey) Parse(value string) (canonical string, err error) {
	var scratch TopicConfig
	return k.parse(value, &scratch, true)
}

// ErrInvalidTopicConfig marks every TopicConfigError.
var ErrInvalidTopicConfig = errors.New("replica: invalid topic config")

// TopicConfigError is an unknown topic config or a bad value. Its message
// is Kafka's INVALID_CONFIG text.
type TopicConfigError struct {
	Key    string // the key at fault (a broker key when a broker value is bad)
	Value  string // the value, as given
	Reason string // why the value is invalid; "" for an unknown key
}

func (e *TopicConfigError) Error() string {
	if e.Reason == "" {
		return "Unknown topic config name: " + e.Key
	}
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Key, e.Reason)
}

func (e *TopicConfigError) Unwrap() error { return ErrInvalidTopicConfig }

// conflictError is a combination of valid values Kafka refuses.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }
func (e *conflictError) Unwrap() error { return ErrInvalidTopicConfig }

// topicConfigTable is sorted by name (TopicConfigKeys returns it so).
var topicConfigTable = []TopicConfigKey{
	list("cleanup.policy", "log.cleanup.policy", "delete", []string{"compact", "delete"}, func(tc *TopicConfig, items []string) {
		comp, del := slices.Contains(items, "compact"), slices.Contains(items, "delete")
		switch {
		case comp && del:
			tc.Log.CleanupPolicy = segment.PolicyCompactDelete
		case comp:
			tc.Log.CleanupPolicy = segment.PolicyCompact
		default:
			tc.Log.CleanupPolicy = segment.PolicyDelete
		}
	}),
	oneOf("compression.type", "compression.type", "producer", []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}, func(tc *TopicConfig, v string) {
		tc.KeepProducerCodec = v == "producer"
		tc.Compression = compressionCodecs[v]
	}),
	long("delete.retention.ms", "log.cleaner.delete.retention.ms", 86400000, 0, func(tc *TopicConfig, n int64) { tc.Log.DeleteRetentionMs = n }),
	long("file.delete.delay.ms", "log.segment.delete.delay.ms", 60000, 0, func(tc *TopicConfig, n int64) { tc.Log.FileDeleteDelayMs = n }),
	long("flush.messages", "log.flush.interval.messages", math.MaxInt64, 1, func(tc *TopicConfig, n int64) { tc.Log.FlushMessages = n }),
	long("flush.ms", "log.flush.interval.ms", math.MaxInt64, 0, func(tc *TopicConfig, n int64) { tc.Log.FlushMs = n }),
	throttledReplicas("follower.replication.throttled.replicas"),
	integer("index.interval.bytes", "log.index.interval.bytes", 4096, 0, func(tc *TopicConfig, n int) { tc.Log.IndexIntervalBytes = n }),
	throttledReplicas("leader.replication.throttled.replicas"),
	long("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", math.MaxInt64, 1, func(tc *TopicConfig, n int64) { tc.Log.MaxCompactionLagMs = n }),
	integer("max.message.bytes", "message.max.bytes", 1048588, 0, func(tc *TopicConfig, n int) { tc.MaxMessageBytes = n }),
	oneOf("message.timestamp.type", "log.message.timestamp.type", "CreateTime", []string{"CreateTime", "LogAppendTime"}, func(tc *TopicConfig, v string) {
		tc.LogAppendTime = v == "LogAppendTime"
	}),
	double("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", 0.5, 0, 1, func(tc *TopicConfig, f float64) { tc.Log.MinCleanableDirtyRatio = f }),
	long("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", 0, 0, func(tc *TopicConfig, n int64) { tc.Log.MinCompactionLagMs = n }),
	integer("min.insync.replicas", "min.insync.replicas", 1, 1, func(tc *TopicConfig, n int) { tc.MinInsyncReplicas = n }),
	// Any long: a negative retention.bytes means no size limit (Kafka
	// has no validator here).
	long("retention.bytes", "log.retention.bytes", -1, math.MinInt64, func(tc *TopicConfig, n int64) { tc.Log.RetentionBytes = n }),
	long("retention.ms", "log.retention.ms", 7*24*60*60*1000, -1, func(tc *TopicConfig, n int64) { tc.Log.RetentionMs = n }),
	integer("segment.bytes", "log.segment.bytes", 1<<30, 14, func(tc *TopicConfig, n int) { tc.Log.SegmentBytes = int64(n) }),
	notLive(integer("segment.index.bytes", "log.index.size.max.bytes", 10<<20, 4, func(tc *TopicConfig, n int) { tc.Log.SegmentIndexBytes = n })),
	long("segment.ms", "log.roll.ms", 7*24*60*60*1000, 1, func(tc *TopicConfig, n int64) { tc.Log.SegmentMs = n }),
}

// compressionCodecs maps compression.type values that name a codec.
var compressionCodecs = map[string]batch.Codec{
	"uncompressed": batch.CodecNone, "gzip": batch.CodecGzip, "snappy": batch.CodecSnappy,
	"lz4": batch.CodecLZ4, "zstd": batch.CodecZstd,
}

// TopicConfigKeys returns the topic configs, sorted by name.
func TopicConfigKeys() []TopicConfigKey {
	return slices.Clone(topicConfigTable)
}

// LookupTopicConfig returns the topic config named name.
func LookupTopicConfig(name string) (TopicConfigKey, bool) {
	i, ok := slices.BinarySearchFunc(topicConfigTable, name, func(k TopicConfigKey, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return TopicConfigKey{}, false
	}
	return topicConfigTable[i], true
}

// ResolveTopicConfig resolves a topic's configuration: each key takes the
// topic's override, else broker(BrokerKey) when the key has a broker key
// and broker is not nil and has a value, else Kafka's default. Every key of overrides must be a topic
// config. An error is a *TopicConfigError for the alphabetically first bad
// key (unknown, or a value that does not parse or is out of range; a
// broker value is named by its broker key), else Kafka's message for a
// conflict between valid values (min.compaction.lag.ms above
// max.compaction.lag.ms); it wraps ErrInvalidTopicConfig.
func ResolveTopicConfig(overrides map[string]string, broker func(brokerKey string) (string, bool)) (TopicConfig, error) {
	var bad *TopicConfigError
	note := func(e *TopicConfigError) {
		if bad == nil || e.Key < bad.Key {
			bad = e
		}
	}
	for k := range overrides {
		if _, ok := LookupTopicConfig(k); !ok {
			note(&TopicConfigError{Key: k, Value: overrides[k]})
		}
	}
	tc := TopicConfig{Log: segment.DefaultConfig()}
	for i := range topicConfigTable {
		k := &topicConfigTable[i]
		name := k.Name
		v, ok := overrides[k.Name]
		if !ok && broker != nil && k.BrokerKey != "" {
			v, ok = broker(k.BrokerKey)
			name = k.BrokerKey
		}
		if !ok {
			v, name = k.Default, k.Name
		}
		if _, err := k.parse(v, &tc, false); err != nil {
			note(&TopicConfigError{Key: name, Value: v, Reason: err.Error()})
		}
	}
	if bad != nil {
		return TopicConfig{}, bad
	}
	if lo, hi := tc.Log.MinCompactionLagMs, tc.Log.MaxCompactionLagMs; lo > hi {
		return TopicConfig{}, &conflictError{fmt.Sprintf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", lo, hi)}
	}
	// tc.Log passes segment.Config.Validate (the table's ranges are at
	// least its; TestSegmentSetAgrees), which segment.Open and SetConfig
	// run again.
	return tc, nil
}

// ValidateTopicConfigs checks a topic's overrides against the table (with
// Kafka's defaults for the keys not given); the error is
// ResolveTopicConfig's.
func ValidateTopicConfigs(overrides map[string]string) error {
	_, err := ResolveTopicConfig(overrides, nil)
	return err
}

// DefaultTopicConfig is the configuration of a topic with no overrides on
// a broker with Kafka's defaults.
func DefaultTopicConfig() TopicConfig {
	tc, err := ResolveTopicConfig(nil, nil)
	if err != nil {
		panic("replica: the topic config table's defaults do not resolve: " + err.Error())
	}
	return tc
}

func notLive(k TopicConfigKey) TopicConfigKey {
	k.Live = false
	return k
}

// javaTrim is Java's String.trim: it drops characters <= U+0020 at both
// ends (ConfigDef trims every value so).
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// parseInteger reads a Kafka INT (bits 32) or LONG (64) at least min
// (math.MinInt64: no lower bound), with Kafka's reasons.
func parseInteger(v string, typ ConfigType, bits int, min int64, canon bool) (int64, string, error) {
	n, err := strconv.ParseInt(javaTrim(v), 10, bits)
	if err != nil {
		return 0, "", fmt.Errorf("Not a number of type %s", typ)
	}
	if n < min {
		return 0, "", fmt.Errorf("Value must be at least %d", min)
	}
	if !canon {
		return n, "", nil
	}
	return n, strconv.FormatInt(n, 10), nil
}

// integer is an INT key at least min.
func integer(name, brokerKey string, def, min int64, set func(*TopicConfig, int)) TopicConfigKey {
	return whole(name, ConfigInt, brokerKey, def, min, func(tc *TopicConfig, n int64) { set(tc, int(n)) })
}

// long is a LONG key at least min.
func long(name, brokerKey string, def, min int64, set func(*TopicConfig, int64)) TopicConfigKey {
	return whole(name, ConfigLong, brokerKey, def, min, set)
}

// whole is an INT (32-bit) or LONG key at least min.
func whole(name string, typ ConfigType, brokerKey string, def, min int64, set func(*TopicConfig, int64)) TopicConfigKey {
	bits := 64
	if typ == ConfigInt {
		bits = 32
	}
	return TopicConfigKey{
		Name: name, Type: typ, BrokerKey: brokerKey, Default: strconv.FormatInt(def, 10), Live: true,
		parse: func(v string, tc *TopicConfig, canon bool) (string, error) {
			n, text, err := parseInteger(v, typ, bits, min, canon)
			if err == nil {
				set(tc, n)
			}
			return text, err
		},
	}
}

// javaDouble formats a bound as Java prints a double (1.0, 0.5).
func javaDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// double is a DOUBLE key in [lo, hi].
func double(name, brokerKey string, def, lo, hi float64, set func(*TopicConfig, float64)) TopicConfigKey {
	return TopicConfigKey{
		Name: name, Type: ConfigDouble, BrokerKey: brokerKey, Default: strconv.FormatFloat(def, 'f', -1, 64), Live: true,
		parse: func(v string, tc *TopicConfig, canon bool) (string, error) {
			f, err := strconv.ParseFloat(javaTrim(v), 64)
			switch {
			case err != nil || math.IsNaN(f):
				return "", errors.New("Not a number of type DOUBLE")
			case f < lo:
				return "", fmt.Errorf("Value must be at least %s", javaDouble(lo))
			case f > hi:
				return "", fmt.Errorf("Value must be no more than %s", javaDouble(hi))
			}
			set(tc, f)
			if !canon {
				return "", nil
			}
			return strconv.FormatFloat(f, 'f', -1, 64), nil
		},
	}
}

// oneOf is a STRING key whose value is one of allowed.
func oneOf(name, brokerKey, def string, allowed []string, set func(*TopicConfig, string)) TopicConfigKey {
	return TopicConfigKey{
		Name: name, Type: ConfigString, BrokerKey: brokerKey, Default: def, Live: true,
		parse: func(v string, tc *TopicConfig, canon bool) (string, error) {
			t := javaTrim(v)
			if !slices.Contains(allowed, t) {
				return "", fmt.Errorf("String must be one of: %s", strings.Join(allowed, ", "))
			}
			set(tc, t)
			return t, nil
		},
	}
}

// list is a LIST key: a non-empty list of items from allowed.
func list(name, brokerKey, def string, allowed []string, set func(*TopicConfig, []string)) TopicConfigKey {
	return TopicConfigKey{
		Name: name, Type: ConfigList, BrokerKey: brokerKey, Default: def, Live: true,
		parse: func(v string, tc *TopicConfig, canon bool) (string, error) {
			items := SplitConfigList(v)
			if len(items) == 0 {
				return "", fmt.Errorf("List must not be empty; its items must be among: %s", strings.Join(allowed, ", "))
			}
			for _, it := range items {
				if !slices.Contains(allowed, it) {
					return "", fmt.Errorf("String must be one of: %s", strings.Join(allowed, ", "))
				}
			}
			set(tc, items)
			if !canon {
				return "", nil
			}
			return strings.Join(items, ","), nil
		},
	}
}

// throttledReplicas is a LIST key naming the replicas a replication
// throttle applies to (Kafka's ThrottledReplicaListValidator): empty (none,
// the default), the literal * (every replica), or items
// partitionId:brokerId. As in Kafka, empty items are allowed ("0:1,,0:2"),
// and * may only stand alone (with empty items at most). Sluice also
// requires both numbers to be INT32s (partition and broker ids are), which
// Kafka's [0-9]+:[0-9]+ does not check; such an entry could never match a
// replica. It sets nothing in TopicConfig.
func throttledReplicas(name string) TopicConfigKey {
	return TopicConfigKey{
		Name: name, Type: ConfigList, Default: "", Live: true,
		parse: func(v string, _ *TopicConfig, canon bool) (string, error) {
			items := SplitConfigList(v)
			if _, err := parseThrottledItems(items); err != nil {
				return "", fmt.Errorf("%s must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...", name)
			}
			if !canon {
				return "", nil
			}
			return strings.Join(items, ","), nil
		},
	}
}

// ThrottledReplicas is a parsed value of leader.replication.throttled.replicas
// or follower.replication.throttled.replicas: every replica (*), or a set
// of (partition, broker) pairs. The zero value throttles nothing.
type ThrottledReplicas struct {
	all   bool
	pairs map[[2]int32]struct{} // {partition, broker}
}

// ParseThrottledReplicas reads a throttled replicas list as the topic
// config table validates it ("" is none).
func ParseThrottledReplicas(v string) (ThrottledReplicas, error) {
	return parseThrottledItems(SplitConfigList(v))
}

var errThrottledReplicas = errors.New("replica: not a throttled replicas list")

func parseThrottledItems(items []string) (ThrottledReplicas, error) {
	var r ThrottledReplicas
	if strings.Join(items, "") == "*" {
		r.all = true
		return r, nil
	}
	for _, it := range items {
		if it == "" {
			continue
		}
		p, b, ok := strings.Cut(it, ":")
		pn, perr := parseDigits(p)
		bn, berr := parseDigits(b)
		if !ok || perr != nil || berr != nil {
			return ThrottledReplicas{}, errThrottledReplicas
		}
		if r.pairs == nil {
			r.pairs = map[[2]int32]struct{}{}
		}
		r.pairs[[2]int32{pn, bn}] = struct{}{}
	}
	return r, nil
}

// parseDigits reads a non-negative INT32 written with digits only.
func parseDigits(s string) (int32, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errThrottledReplicas
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, errThrottledReplicas
	}
	return int32(n), nil
}

// All reports whether the list is *.
func (r ThrottledReplicas) All() bool { return r.all }

// None reports whether the list throttles nothing.
func (r ThrottledReplicas) None() bool { return !r.all && len(r.pairs) == 0 }

// Has reports whether the list names the replica of partition on broker
// (or is *).
func (r ThrottledReplicas) Has(partition, broker int32) bool {
	if r.all {
		return true
	}
	_, ok := r.pairs[[2]int32{partition, broker}]
	return ok
}

// SplitConfigList splits a LIST value as Kafka's ConfigDef does: the
// value is trimmed, an empty value is the empty list, and otherwise it is
// split on commas with the white space around each item dropped; empty
// items are kept ("a,,b" has three items), so a list validator refuses
// them.
func SplitConfigList(v string) []string {
	t := javaTrim(v)
	if t == "" {
		return nil
	}
	items := strings.Split(t, ",")
	for i, it := range items {
		items[i] = javaTrim(it)
	}
	return items
}
