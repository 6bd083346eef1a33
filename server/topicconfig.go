package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
)

// Topic configs honoured, by Kafka name. Each entry validates a value and
// gives the broker-level default (the synonym Kafka reports).
type topicConfig struct {
	brokerKey string // the broker config it defaults to
	validate  func(v string) error
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < lo || n > hi {
			return fmt.Errorf("must be in [%d, %d]", lo, hi)
		}
		return nil
	}
}

func floatRange(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < lo || f > hi || f != f {
			return fmt.Errorf("must be a number in [%g, %g]", lo, hi)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

var topicConfigs = map[string]topicConfig{
	"retention.ms":              {"log.retention.ms", intRange(-1, math.MaxInt64)},
	"retention.bytes":           {"log.retention.bytes", intRange(-1, math.MaxInt64)},
	"segment.bytes":             {"log.segment.bytes", intRange(14, math.MaxInt32)},
	"segment.ms":                {"log.roll.ms", intRange(1, math.MaxInt64)},
	"segment.index.bytes":       {"log.index.size.max.bytes", intRange(4, math.MaxInt32)},
	"index.interval.bytes":      {"log.index.interval.bytes", intRange(0, math.MaxInt32)},
	"flush.messages":            {"log.flush.interval.messages", intRange(1, math.MaxInt64)},
	"flush.ms":                  {"log.flush.interval.ms", intRange(0, math.MaxInt64)},
	"file.delete.delay.ms":      {"log.segment.delete.delay.ms", intRange(0, math.MaxInt64)},
	"max.message.bytes":         {"message.max.bytes", intRange(0, math.MaxInt32)},
	"min.insync.replicas":       {"min.insync.replicas", intRange(1, math.MaxInt32)},
	"cleanup.policy":            {"log.cleanup.policy", oneOf("delete", "compact", "compact,delete", "delete,compact")},
	"delete.retention.ms":       {"log.cleaner.delete.retention.ms", intRange(0, math.MaxInt64)},
	"min.cleanable.dirty.ratio": {"log.cleaner.min.cleanable.ratio", floatRange(0, 1)},
	"min.compaction.lag.ms":     {"log.cleaner.min.compaction.lag.ms", intRange(0, math.MaxInt64)},
	"max.compaction.lag.ms":     {"log.cleaner.max.compaction.lag.ms", intRange(1, math.MaxInt64)},
	"message.timestamp.type":    {"log.message.timestamp.type", oneOf("CreateTime", "LogAppendTime")},
	"compression.type":          {"compression.type", oneOf("uncompressed", "producer", "gzip", "snappy", "lz4", "zstd")},
}

// validateTopicConfigs checks every key and value; the error names the
// first bad key (Kafka's INVALID_CONFIG message does the same).
func validateTopicConfigs(configs map[string]string) error {
	for k, v := range configs {
		tc, ok := topicConfigs[k]
		if !ok {
			return fmt.Errorf("unknown topic config %q", k)
		}
		if err := tc.validate(v); err != nil {
			return fmt.Errorf("invalid value %q for %s: %v", v, k, err)
		}
	}
	return nil
}

// topicConfigValue returns a topic config's effective value: the topic's
// own, else the broker's.
func (b *Broker) topicConfigValue(configs map[string]string, key string) string {
	if v, ok := configs[key]; ok {
		return v
	}
	v, _ := b.cfg.String(topicConfigs[key].brokerKey)
	return v
}

// logConfig turns a topic's configs into the partition log's settings.
func (b *Broker) logConfig(configs map[string]string) (segment.Config, error) {
	cfg := segment.DefaultConfig()
	for k := range topicConfigs {
		if err := cfg.Set(k, b.topicConfigValue(configs, k)); err != nil {
			continue // not a log setting (max.message.bytes, message.timestamp.type, ...)
		}
	}
	return cfg, cfg.Validate()
}

// topicConfig resolves a topic's configs (its overrides over the broker's
// values) into the typed configuration a partition runs with.
func (b *Broker) topicConfig(configs map[string]string) (replica.TopicConfig, error) {
	logCfg, err := b.logConfig(configs)
	if err != nil {
		return replica.TopicConfig{}, err
	}
	tc := replica.TopicConfig{Log: logCfg}
	tc.MaxMessageBytes, _ = strconv.Atoi(b.topicConfigValue(configs, "max.message.bytes"))
	tc.LogAppendTime = b.topicConfigValue(configs, "message.timestamp.type") == "LogAppendTime"
	tc.MinInsyncReplicas, _ = strconv.Atoi(b.topicConfigValue(configs, "min.insync.replicas"))
	codec, ok := codecs[b.topicConfigValue(configs, "compression.type")]
	tc.Compression, tc.KeepProducerCodec = codec, !ok
	return tc, nil
}
