package server

import (
	"github.com/sluicemq/sluice/replica"
)

// Topic configs are replica's table (replica.TopicConfigKeys): this file
// adapts it to the broker, whose static config (b.cfg) supplies the value
// of each key a topic does not override, by the key's broker synonym.

// topicConfig resolves a topic's overrides against the broker's config.
// The error (a *replica.TopicConfigError or a conflict) carries Kafka's
// INVALID_CONFIG message.
func (b *Broker) topicConfig(overrides map[string]string) (replica.TopicConfig, error) {
	return replica.ResolveTopicConfig(overrides, b.cfg.String)
}

// topicConfigValue returns a topic config's effective value as text: the
// topic's own, else the broker's, else (a key without a broker synonym)
// Kafka's default.
func (b *Broker) topicConfigValue(configs map[string]string, key string) string {
	if v, ok := configs[key]; ok {
		return v
	}
	k, _ := replica.LookupTopicConfig(key)
	if v, ok := b.cfg.String(k.BrokerKey); ok && k.BrokerKey != "" {
		return v
	}
	return k.Default
}
