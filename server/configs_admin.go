package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config admin: what DescribeConfigs (32), AlterConfigs (33) and
// IncrementalAlterConfigs (44) share.
//
// Topic configs are replica's table (replica.TopicConfigKeys). A topic's
// overrides live in the metadata (meta.Topic.Configs) as given; a key not
// overridden takes the value of its broker key (TopicConfigKey.BrokerKey)
// from the static broker config. DescribeConfigs shows each value in the
// table's canonical form (trimmed; a list joined with bare commas), as
// Kafka shows the parsed value. A change is validated as a whole
// (replica.ResolveTopicConfig over every resulting key and value) and
// written to the metadata in one record under b.topicsMu, so it cannot
// interleave with another change; the reconciler (reconcile.go) then
// applies it to every open partition of the topic (Partition.SetConfig),
// and the request waits for that. The partition's produce rules
// (max.message.bytes, message.timestamp.type, compression.type,
// cleanup.policy's key check) and flush.messages (whether acks wait for an
// fsync) follow from the next append. Which keys apply later is the
// table's Live (see replica's topicconfig.go): segment.index.bytes sizes
// index files from the next roll.
//
// Broker configs are static (server.properties and --set), reported
// read-only, and a change to one is refused with INVALID_REQUEST, Kafka's
// answer to a config that "cannot be updated dynamically", except the
// dynamic broker configs of configs_broker.go (the replication throttle
// rates), set per broker id or for the cluster default (the broker
// resource named "").

// configType is a topic config's type as DescribeConfigs v3+ reports it.
// replica's ConfigType has the protocol's values (TestConfigTypesMatchKmsg).
func configType(t replica.ConfigType) kmsg.ConfigType {
	return kmsg.ConfigType(t)
}

// configResource identifies a resource of a config request.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// checkBrokerResource accepts the broker resources this node describes:
// its node.id, or "" (the cluster-wide default). Errors are
// INVALID_REQUEST, with Kafka's messages. (A cluster changes any broker
// id's dynamic configs: checkBrokerAlterResource.)
func (b *Broker) checkBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return kafkaErrorf(kerr.InvalidRequest, "broker id must be an integer, but it is: %q", name)
	}
	if int32(id) != b.cfg.NodeID {
		return kafkaErrorf(kerr.InvalidRequest, "unexpected broker id, expected %d or empty string, but received %s", b.cfg.NodeID, name)
	}
	return nil
}

// wantConfig returns a filter for DescribeConfigs' config names: null or
// empty means every key (as Kafka reads it).
func wantConfig(names []string) func(string) bool {
	if len(names) == 0 {
		return func(string) bool { return true }
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return func(k string) bool { return set[k] }
}

// describeTopicConfigs describes every topic config of topic that want
// accepts, sorted by name. Errors are kafkaErrors.
func (b *Broker) describeTopicConfigs(topic string, want func(string) bool, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := meta.ValidateTopicName(topic); err != nil {
		return nil, kafkaErrorf(kerr.InvalidTopicException, "%v", err)
	}
	t, ok := b.meta.Topic(topic)
	if !ok {
		return nil, kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", topic)
	}
	defaults := config.Default()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range replica.TopicConfigKeys() {
		if !want(k.Name) {
			continue
		}
		var chain []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if v, ok := t.Configs[k.Name]; ok {
			if canon, err := k.Parse(v); err == nil {
				v = canon
			}
			chain = append(chain, configSynonym(k.Name, v, kmsg.ConfigSourceDynamicTopicConfig))
		}
		if k.BrokerKey == "" {
			// No broker synonym (the throttled replicas lists): as
			// Kafka, the topic's own value is the only synonym; without
			// it the value is the default and no synonym is listed.
			head := configSynonym(k.Name, k.Default, kmsg.ConfigSourceDefaultConfig)
			if len(chain) > 0 {
				head = chain[0]
			}
			c := describedConfig(k.Name, []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{head}, configType(k.Type), false, synonyms)
			if synonyms {
				c.ConfigSynonyms = chain
			}
			out = append(out, c)
			continue
		}
		chain = append(chain, b.brokerChain(k.BrokerKey, &defaults)...)
		out = append(out, describedConfig(k.Name, chain, configType(k.Type), false, synonyms))
	}
	return out, nil
}

// brokerChain is a broker key's synonym chain, highest precedence first:
// its static value when set (a synonym such as log.retention.hours counts
// as setting log.retention.ms, and is reported under the canonical name
// with the value it resolves to), then Sluice's default. The default of a
// key never set is its effective value: for most keys that is Default()'s,
// but a derived one (advertised.listeners follows listeners and the bound
// port) differs.
func (b *Broker) brokerChain(key string, defaults *config.Config) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var chain []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	v, _ := b.cfg.String(key)
	if src, _ := b.cfg.Source(key); src == config.SourceStatic {
		chain = append(chain, configSynonym(key, v, kmsg.ConfigSourceStaticBrokerConfig))
		v, _ = defaults.String(key)
	}
	return append(chain, configSynonym(key, v, kmsg.ConfigSourceDefaultConfig))
}

func configSynonym(name, value string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name = name
	s.Value = &value
	s.Source = src
	return s
}

// describedConfig is one config entry: the value and source of the head
// of its synonym chain, which is included when asked for.
func describedConfig(name string, chain []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, typ kmsg.ConfigType, readOnly, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	c.Value = chain[0].Value
	c.Source = chain[0].Source
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig // v0 only
	c.ReadOnly = readOnly
	c.IsSensitive = false
	c.ConfigType = typ
	if config.Sensitive(name) { // a password or private key: never shown, as Kafka
		c.IsSensitive = true
		c.Value = nil
		chain = slices.Clone(chain)
		for i := range chain {
			chain[i].Value = nil
		}
	}
	if synonyms {
		c.ConfigSynonyms = chain
	}
	return c
}

// changeTopicConfigs replaces a topic's config overrides with what change
// makes of the current ones (a copy it may modify), after validating the
// result, and applies them to the topic's open partition logs. With
// validateOnly it stops after validating. Errors are kafkaErrors, except
// failures to write the metadata.
func (b *Broker) changeTopicConfigs(topic string, validateOnly bool, change func(old map[string]string) (map[string]string, error)) error {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	t, ok := b.meta.Topic(topic)
	if !ok {
		return kafkaErrorf(kerr.UnknownTopicOrPartition, "no topic %q", topic)
	}
	old := maps.Clone(t.Configs)
	if old == nil {
		old = map[string]string{}
	}
	configs, err := change(maps.Clone(old))
	if err != nil {
		return err
	}
	if _, err := b.topicConfig(configs); err != nil {
		return kafkaErrorf(kerr.InvalidConfig, "%v", err)
	}
	if validateOnly || maps.Equal(old, configs) {
		return nil
	}
	if err := b.meta.SetTopicConfigs(topic, configs); err != nil {
		return fmt.Errorf("server: alter configs of topic %q: %w", topic, err)
	}
	b.recon.changedSoon()
	b.logger.Info("sluice: topic configs changed", "topic", topic, "configs", configs)
	return nil
}

// checkTopicConfigKey refuses a key that is not a topic config.
func checkTopicConfigKey(k string) error {
	if _, ok := replica.LookupTopicConfig(k); !ok {
		return kafkaErrorf(kerr.InvalidConfig, "%v", &replica.TopicConfigError{Key: k})
	}
	return nil
}

// duplicateName returns a name that appears more than once.
func duplicateName(names []string) (string, bool) {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return n, true
		}
		seen[n] = true
	}
	return "", false
}

// splitList splits a list config's value ("a, b") into its items, as
// Kafka's ConfigDef does, without empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range replica.SplitConfigList(v) {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// appendList adds the items of add that list lacks, in order.
func appendList(list, add string) string {
	items := splitList(list)
	for _, s := range splitList(add) {
		if !slices.Contains(items, s) {
			items = append(items, s)
		}
	}
	return strings.Join(items, ",")
}

// subtractList removes the items of sub from list.
func subtractList(list, sub string) string {
	drop := splitList(sub)
	var items []string
	for _, s := range splitList(list) {
		if !slices.Contains(drop, s) {
			items = append(items, s)
		}
	}
	return strings.Join(items, ",")
}
