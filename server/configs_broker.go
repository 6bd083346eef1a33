package server

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dynamic broker configs: the broker configs an admin client changes
// while the cluster runs (Kafka's DynamicBrokerConfig, kafka-configs
// --entity-type brokers). Sluice has two, the replication throttle rates
// of KIP-73 (dynamicBrokerTable); every other broker key stays static and
// a change to one is refused as before (INVALID_REQUEST).
//
// Each is set per broker (resource name "1": meta.AlterNodeConfigs, also
// for a broker id not registered yet, as Kafka allows) or as the cluster
// default (resource name "": meta.AlterBrokerConfigs), through
// AlterConfigs (the resource's whole dynamic set: keys left out are
// removed) or IncrementalAlterConfigs (SET, DELETE; APPEND and SUBTRACT
// are INVALID_CONFIG, these are not lists). Values are stored in canonical
// form (a trimmed decimal). In a cluster the change is made on the active
// controller (the handlers forward it) and every broker reads it from its
// copy of the metadata: a broker's value is its own, else the cluster
// default, else Kafka's default (effectiveBrokerConfig; cluster_throttle.go
// applies the rates). A single node stores them too, for its own id and
// "", and has nothing to throttle.
//
// DescribeConfigs of a broker lists them with the static keys: source
// DYNAMIC_BROKER_CONFIG (its own), DYNAMIC_DEFAULT_BROKER_CONFIG (the
// cluster default) or DEFAULT_CONFIG, with the synonym chain in that
// order, type LONG, not read-only; the resource "" lists the cluster
// defaults set, as Kafka does.

// dynamicBrokerKey is a dynamic broker config: a LONG at least min.
type dynamicBrokerKey struct {
	name string
	def  int64 // Kafka's default
	min  int64
}

// dynamicBrokerTable is sorted by name.
var dynamicBrokerTable = []dynamicBrokerKey{
	// Bytes per second of throttled replication this broker receives as a
	// follower (DESIGN.md, "Moving partitions"); Long.MAX_VALUE, Kafka's
	// default, is unlimited.
	{name: "follower.replication.throttled.rate", def: math.MaxInt64, min: 0},
	// Bytes per second of throttled replication this broker sends as a
	// leader.
	{name: "leader.replication.throttled.rate", def: math.MaxInt64, min: 0},
}

func lookupDynamicBrokerKey(name string) (dynamicBrokerKey, bool) {
	i, ok := slices.BinarySearchFunc(dynamicBrokerTable, name, func(k dynamicBrokerKey, n string) int { return strings.Compare(k.name, n) })
	if !ok {
		return dynamicBrokerKey{}, false
	}
	return dynamicBrokerTable[i], true
}

// parse checks a value as Kafka's ConfigDef reads a LONG and returns it in
// canonical form; the error is Kafka's INVALID_CONFIG text.
func (k dynamicBrokerKey) parse(v string) (string, error) {
	n, err := strconv.ParseInt(strings.TrimFunc(v, func(r rune) bool { return r <= ' ' }), 10, 64)
	switch {
	case err != nil:
		return "", fmt.Errorf("Invalid value %s for configuration %s: Not a number of type LONG", v, k.name)
	case n < k.min:
		return "", fmt.Errorf("Invalid value %s for configuration %s: Value must be at least %d", v, k.name, k.min)
	}
	return strconv.FormatInt(n, 10), nil
}

// value reads a stored value (canonical), else the default.
func (k dynamicBrokerKey) value(configs map[string]string) (int64, bool) {
	v, ok := configs[k.name]
	if !ok {
		return k.def, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < k.min {
		return k.def, false // never stored so (parse checks first)
	}
	return n, true
}

// effectiveBrokerConfig is broker key k's value from a broker's own
// dynamic configs, else the cluster default's, else Kafka's default.
func effectiveBrokerConfig(k dynamicBrokerKey, own, clusterDefault map[string]string) int64 {
	if n, ok := k.value(own); ok {
		return n
	}
	n, _ := k.value(clusterDefault)
	return n
}

// brokerResourceID reads a broker resource name: -1 for "" (the cluster
// default).
func brokerResourceID(name string) (int32, error) {
	if name == "" {
		return -1, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return 0, kafkaErrorf(kerr.InvalidRequest, "broker id must be an integer, but it is: %q", name)
	}
	if id < 0 {
		return 0, kafkaErrorf(kerr.InvalidRequest, "broker id must not be negative, but it is: %d", id)
	}
	return int32(id), nil
}

// checkBrokerAlterResource accepts the broker resources whose dynamic
// configs this node changes (on the active controller, which changes them
// for everyone): any broker id, registered or not, and "".
func (b *Broker) checkBrokerAlterResource(name string) (int32, error) {
	return brokerResourceID(name)
}

// dynamicBrokerConfigs returns the stored dynamic configs of broker id, or
// of the cluster default for -1 (a copy).
func (b *Broker) dynamicBrokerConfigs(id int32) map[string]string {
	if id < 0 {
		return b.meta.BrokerConfigs()
	}
	return b.meta.NodeConfigs(id)
}

// changeBrokerConfigs changes the dynamic configs of broker resource name
// to what change makes of the current ones (a copy it may modify), after
// refusing every key of keys (the request's) that is not a dynamic broker
// config (INVALID_REQUEST, Kafka's answer for a config that cannot be
// updated dynamically) and validating the values (INVALID_CONFIG). With
// validateOnly it stops after validating. Errors are kafkaErrors, except
// failures to write the metadata.
func (b *Broker) changeBrokerConfigs(name string, keys []string, validateOnly bool, change func(old map[string]string) (map[string]string, error)) error {
	id, err := b.checkBrokerAlterResource(name)
	if err != nil {
		return err
	}
	var static []string
	for _, k := range keys {
		if _, ok := lookupDynamicBrokerKey(k); !ok {
			static = append(static, k)
		}
	}
	if len(static) > 0 {
		return kafkaErrorf(kerr.InvalidRequest, "cannot update these configs dynamically: %s (Sluice's dynamic broker configs are %s; set the others in server.properties or with --set and restart)",
			strings.Join(static, ", "), strings.Join(dynamicBrokerKeyNames(), " and "))
	}
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	old := b.dynamicBrokerConfigs(id)
	configs, err := change(maps.Clone(old))
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		key, ok := lookupDynamicBrokerKey(k)
		if !ok {
			continue // stored by a Sluice that knew it: left as it is
		}
		canon, err := key.parse(configs[k])
		if err != nil {
			return kafkaErrorf(kerr.InvalidConfig, "%v", err)
		}
		configs[k] = canon
	}
	if validateOnly {
		return nil
	}
	set := map[string]string{}
	var del []string
	for k, v := range configs {
		if ov, ok := old[k]; !ok || ov != v {
			set[k] = v
		}
	}
	for k := range old {
		if _, ok := configs[k]; !ok {
			del = append(del, k)
		}
	}
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	slices.Sort(del)
	if id < 0 {
		err = b.meta.AlterBrokerConfigs(set, del)
	} else {
		err = b.meta.AlterNodeConfigs(id, set, del)
	}
	if err != nil {
		return fmt.Errorf("server: alter dynamic configs of broker %q: %w", name, err)
	}
	b.logger.Info("sluice: dynamic broker configs changed", "broker", name, "set", set, "deleted", del)
	return nil
}

func dynamicBrokerKeyNames() []string {
	var out []string
	for _, k := range dynamicBrokerTable {
		out = append(out, k.name)
	}
	return out
}

// brokerConfigsSettled reports whether this broker's copy of the metadata
// shows broker resource name's dynamic configs as want says: each key
// with a value set to it (canonical), each nil one absent. A forwarded
// change waits for it (forward's settled).
func (b *Broker) brokerConfigsSettled(name string, want map[string]*string) bool {
	id, err := brokerResourceID(name)
	if err != nil {
		return true
	}
	have := b.dynamicBrokerConfigs(id)
	for k, v := range want {
		got, ok := have[k]
		if v == nil {
			if ok {
				return false
			}
			continue
		}
		key, known := lookupDynamicBrokerKey(k)
		if !known {
			continue
		}
		canon, err := key.parse(*v)
		if err != nil {
			continue // refused: nothing to wait for
		}
		if !ok || got != canon {
			return false
		}
	}
	return true
}

// describeDynamicBrokerConfigs describes the dynamic broker configs that
// want accepts: for broker id every one (its own value, else the cluster
// default, else the default), for the cluster default (-1) those set.
func (b *Broker) describeDynamicBrokerConfigs(id int32, want func(string) bool, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var own map[string]string
	if id >= 0 {
		own = b.meta.NodeConfigs(id)
	}
	defaults := b.meta.BrokerConfigs()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range dynamicBrokerTable {
		if !want(k.name) {
			continue
		}
		var chain []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if v, ok := own[k.name]; ok {
			chain = append(chain, configSynonym(k.name, v, kmsg.ConfigSourceDynamicBrokerConfig))
		}
		v, ok := defaults[k.name]
		if ok {
			chain = append(chain, configSynonym(k.name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig))
		} else if id < 0 {
			continue // the resource "" lists the defaults set
		}
		chain = append(chain, configSynonym(k.name, strconv.FormatInt(k.def, 10), kmsg.ConfigSourceDefaultConfig))
		out = append(out, describedConfig(k.name, chain, kmsg.ConfigTypeLong, false, synonyms))
	}
	return out
}

// describeBrokerConfigs describes broker resource name: for this broker's
// id every static broker config (read-only) and every dynamic one, sorted
// by name; for "" the cluster-wide dynamic defaults set. want filters by
// name.
func (b *Broker) describeBrokerConfigs(name string, want func(string) bool, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := b.checkBrokerResource(name); err != nil {
		return nil, err
	}
	id, err := brokerResourceID(name)
	if err != nil {
		return nil, err
	}
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	if id < 0 {
		return append(out, b.describeDynamicBrokerConfigs(id, want, synonyms)...), nil
	}
	defaults := config.Default()
	for _, k := range config.Keys() {
		if !want(k) {
			continue
		}
		out = append(out, describedConfig(k, b.brokerChain(k, &defaults), kmsg.ConfigTypeUnknown, true, synonyms))
	}
	out = append(out, b.describeDynamicBrokerConfigs(id, want, synonyms)...)
	slices.SortFunc(out, func(a, b kmsg.DescribeConfigsResponseResourceConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
