package replica

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

func TestTopicConfigTableShape(t *testing.T) {
	keys := TopicConfigKeys()
	if !slices.IsSortedFunc(keys, func(a, b TopicConfigKey) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("table not sorted by name")
	}
	for i, k := range keys {
		if i > 0 && keys[i-1].Name == k.Name {
			t.Errorf("%s listed twice", k.Name)
		}
		noBrokerKey := k.Name == "leader.replication.throttled.replicas" || k.Name == "follower.replication.throttled.replicas"
		if (k.BrokerKey == "") != noBrokerKey || k.Type.String() == "UNKNOWN" || k.parse == nil {
			t.Errorf("%s: incomplete entry %+v", k.Name, k)
		}
		if got, ok := LookupTopicConfig(k.Name); !ok || got.Name != k.Name {
			t.Errorf("LookupTopicConfig(%s) = %v, %v", k.Name, got.Name, ok)
		}
		// Every default parses and is already canonical.
		if canon, err := k.Parse(k.Default); err != nil || canon != k.Default {
			t.Errorf("%s: default %q parses to %q, %v", k.Name, k.Default, canon, err)
		}
		if k.Live != (k.Name != "segment.index.bytes") {
			t.Errorf("%s: Live %v", k.Name, k.Live)
		}
	}
	if _, ok := LookupTopicConfig("no.such.key"); ok {
		t.Error("LookupTopicConfig found an unknown key")
	}
}

func TestDefaultTopicConfigIsKafkas(t *testing.T) {
	tc := DefaultTopicConfig()
	want := TopicConfig{Log: segment.DefaultConfig(), MaxMessageBytes: 1048588, KeepProducerCodec: true, MinInsyncReplicas: 1}
	if tc != want {
		t.Fatalf("defaults\n got %+v\nwant %+v", tc, want)
	}
}

func TestTopicConfigValues(t *testing.T) {
	for _, c := range []struct {
		key, value string
		canon      string // "" when invalid
		reason     string // the reason, when invalid
	}{
		{"segment.bytes", "14", "14", ""},
		{"segment.bytes", " 2147483647\t", "2147483647", ""},
		{"segment.bytes", "13", "", "Value must be at least 14"},
		{"segment.bytes", "2147483648", "", "Not a number of type INT"},
		{"segment.bytes", "1e6", "", "Not a number of type INT"},
		{"segment.ms", "0", "", "Value must be at least 1"},
		{"segment.ms", "9223372036854775807", "9223372036854775807", ""},
		{"segment.ms", "9223372036854775808", "", "Not a number of type LONG"},
		{"segment.index.bytes", "3", "", "Value must be at least 4"},
		{"index.interval.bytes", "0", "0", ""},
		{"index.interval.bytes", "-1", "", "Value must be at least 0"},
		{"retention.ms", "-1", "-1", ""},
		{"retention.ms", "-2", "", "Value must be at least -1"},
		{"retention.bytes", "-2", "-2", ""}, // Kafka: no lower bound
		{"retention.bytes", "x", "", "Not a number of type LONG"},
		{"flush.messages", "0", "", "Value must be at least 1"},
		{"flush.ms", "0", "0", ""},
		{"file.delete.delay.ms", "-1", "", "Value must be at least 0"},
		{"max.message.bytes", "0", "0", ""},
		{"min.insync.replicas", "0", "", "Value must be at least 1"},
		{"delete.retention.ms", "0", "0", ""},
		{"min.compaction.lag.ms", "-1", "", "Value must be at least 0"},
		{"max.compaction.lag.ms", "0", "", "Value must be at least 1"},
		{"min.cleanable.dirty.ratio", "0", "0", ""},
		{"min.cleanable.dirty.ratio", " 1.0 ", "1", ""},
		{"min.cleanable.dirty.ratio", "1.01", "", "Value must be no more than 1.0"},
		{"min.cleanable.dirty.ratio", "-0.1", "", "Value must be at least 0.0"},
		{"min.cleanable.dirty.ratio", "NaN", "", "Not a number of type DOUBLE"},
		{"cleanup.policy", "compact, delete", "compact,delete", ""},
		{"cleanup.policy", " delete ,compact ", "delete,compact", ""},
		{"cleanup.policy", "compact", "compact", ""},
		{"cleanup.policy", "compact,,delete", "", "String must be one of: compact, delete"},
		{"cleanup.policy", "delete,", "", "String must be one of: compact, delete"},
		{"cleanup.policy", "Compact", "", "String must be one of: compact, delete"},
		{"cleanup.policy", " ", "", "List must not be empty; its items must be among: compact, delete"},
		{"message.timestamp.type", " LogAppendTime", "LogAppendTime", ""},
		{"message.timestamp.type", "logappendtime", "", "String must be one of: CreateTime, LogAppendTime"},
		{"compression.type", "zstd ", "zstd", ""},
		{"compression.type", "none", "", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		// Kafka's ThrottledReplicaListValidator: *, or partition:broker
		// items (empty ones allowed), white space around items dropped.
		{"leader.replication.throttled.replicas", "*", "*", ""},
		{"leader.replication.throttled.replicas", " * ", "*", ""},
		{"leader.replication.throttled.replicas", "0:1,0:2", "0:1,0:2", ""},
		{"leader.replication.throttled.replicas", " 0:1 , 1:2 ", "0:1,1:2", ""},
		{"leader.replication.throttled.replicas", "0:1,,0:2", "0:1,,0:2", ""},
		{"leader.replication.throttled.replicas", "*,", "*,", ""},
		{"follower.replication.throttled.replicas", "12:4", "12:4", ""},
		{"follower.replication.throttled.replicas", "2147483647:2147483647", "2147483647:2147483647", ""},
		{"leader.replication.throttled.replicas", "*,0:1", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "0:1:2", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "0", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "0:", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", ":1", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "-1:1", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "+1:1", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "0 :1", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "a:b", "", throttledReason("leader")},
		{"leader.replication.throttled.replicas", "**", "", throttledReason("leader")},
		{"follower.replication.throttled.replicas", "0:2147483648", "", throttledReason("follower")},
		{"follower.replication.throttled.replicas", "all", "", throttledReason("follower")},
	} {
		k, ok := LookupTopicConfig(c.key)
		if !ok {
			t.Fatalf("no key %s", c.key)
		}
		canon, err := k.Parse(c.value)
		switch {
		case c.canon != "" && (err != nil || canon != c.canon):
			t.Errorf("%s=%q: %q, %v; want %q", c.key, c.value, canon, err, c.canon)
		case c.canon == "" && (err == nil || err.Error() != c.reason):
			t.Errorf("%s=%q: error %v; want %q", c.key, c.value, err, c.reason)
		}
		// The same through ResolveTopicConfig, with Kafka's message.
		_, err = ResolveTopicConfig(map[string]string{c.key: c.value}, nil)
		if c.canon == "" {
			want := "Invalid value " + c.value + " for configuration " + c.key + ": " + c.reason
			var te *TopicConfigError
			if !errors.As(err, &te) || err.Error() != want || !errors.Is(err, ErrInvalidTopicConfig) {
				t.Errorf("%s=%q: resolve error %v; want %q", c.key, c.value, err, want)
			}
		} else if err != nil {
			t.Errorf("%s=%q: resolve error %v", c.key, c.value, err)
		}
	}
}

func throttledReason(side string) string {
	return side + ".replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
}

// The throttled replicas keys parse to what the broker matches against:
// "" throttles nothing, * everything, a list its pairs.
func TestTopicConfigThrottledReplicas(t *testing.T) {
	for _, c := range []struct {
		value      string
		none, all  bool
		has, lacks [][2]int32
	}{
		{value: "", none: true, lacks: [][2]int32{{0, 1}}},
		{value: " ", none: true},
		{value: ",", none: true},
		{value: "*", all: true, has: [][2]int32{{0, 1}, {7, 9}}},
		{value: "0:1, 0:2,3:1", has: [][2]int32{{0, 1}, {0, 2}, {3, 1}}, lacks: [][2]int32{{1, 0}, {3, 2}, {0, 3}}},
	} {
		r, err := ParseThrottledReplicas(c.value)
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		if r.None() != c.none || r.All() != c.all {
			t.Errorf("%q: none %v all %v", c.value, r.None(), r.All())
		}
		for _, pb := range c.has {
			if !r.Has(pb[0], pb[1]) {
				t.Errorf("%q lacks %d:%d", c.value, pb[0], pb[1])
			}
		}
		for _, pb := range c.lacks {
			if r.Has(pb[0], pb[1]) {
				t.Errorf("%q has %d:%d", c.value, pb[0], pb[1])
			}
		}
	}
	if _, err := ParseThrottledReplicas("*,1:1"); err == nil {
		t.Error("*,1:1 parsed")
	}
	// Not a partition setting: the resolved config is the default one.
	tc, err := ResolveTopicConfig(map[string]string{"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "0:1"}, nil)
	if err != nil || tc != DefaultTopicConfig() {
		t.Errorf("resolved %+v, %v", tc, err)
	}
	// No broker synonym: the broker lookup is never asked for "".
	if _, err := ResolveTopicConfig(nil, func(k string) (string, bool) {
		if k == "" {
			t.Error("broker lookup of an empty key")
		}
		return "", false
	}); err != nil {
		t.Fatal(err)
	}
}

func TestResolveTopicConfigFields(t *testing.T) {
	tc, err := ResolveTopicConfig(map[string]string{
		"cleanup.policy": "delete, compact", "compression.type": "lz4", "message.timestamp.type": "LogAppendTime",
		"max.message.bytes": "100", "min.insync.replicas": "2", "segment.bytes": "1000", "segment.index.bytes": "400",
		"retention.bytes": "-5", "min.cleanable.dirty.ratio": "0.25",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tc.Log.CleanupPolicy != segment.PolicyCompactDelete || tc.Compression != batch.CodecLZ4 || tc.KeepProducerCodec ||
		!tc.LogAppendTime || tc.MaxMessageBytes != 100 || tc.MinInsyncReplicas != 2 || tc.Log.SegmentBytes != 1000 ||
		tc.Log.SegmentIndexBytes != 400 || tc.Log.RetentionBytes != -5 || tc.Log.MinCleanableDirtyRatio != 0.25 {
		t.Fatalf("%+v", tc)
	}
	tc, err = ResolveTopicConfig(map[string]string{"compression.type": "uncompressed"}, nil)
	if err != nil || tc.Compression != batch.CodecNone || tc.KeepProducerCodec {
		t.Fatalf("uncompressed: %+v %v", tc, err)
	}
}

func TestResolveTopicConfigBrokerValues(t *testing.T) {
	broker := map[string]string{"log.segment.bytes": "2048", "log.cleanup.policy": "compact", "message.max.bytes": "77"}
	lookup := func(k string) (string, bool) { v, ok := broker[k]; return v, ok }
	tc, err := ResolveTopicConfig(map[string]string{"segment.bytes": "4096"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	// The override wins; keys not overridden take the broker's value,
	// then Kafka's default.
	if tc.Log.SegmentBytes != 4096 || tc.Log.CleanupPolicy != segment.PolicyCompact || tc.MaxMessageBytes != 77 || tc.Log.SegmentMs != 7*24*3600*1000 {
		t.Fatalf("%+v", tc)
	}
	// A bad broker value is named by its broker key.
	broker["log.roll.ms"] = "0"
	_, err = ResolveTopicConfig(nil, lookup)
	if want := "Invalid value 0 for configuration log.roll.ms: Value must be at least 1"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestTopicConfigErrorNamesFirstKey: with several problems, the error
// names the alphabetically first bad key, every time (map order does not
// leak).
func TestTopicConfigErrorNamesFirstKey(t *testing.T) {
	for _, c := range []struct {
		configs map[string]string
		want    string
	}{
		{map[string]string{"segment.bytes": "1", "retention.ms": "x", "zz.unknown": "1", "flush.ms": "-1", "segment.ms": "0"},
			"Invalid value -1 for configuration flush.ms: Value must be at least 0"},
		{map[string]string{"segment.bytes": "1", "retention.ms": "x", "a.unknown": "1", "cleanup.policy": "x"},
			"Unknown topic config name: a.unknown"},
		{map[string]string{"segment.bytes": "1", "retention.ms": "x", "b.unknown": "1", "c.unknown": "1", "cleanup.policy": "x"},
			"Unknown topic config name: b.unknown"},
		{map[string]string{"segment.bytes": "1", "retention.ms": "x", "retention.bytes": "y"},
			"Invalid value y for configuration retention.bytes: Not a number of type LONG"},
	} {
		for range 50 {
			err := ValidateTopicConfigs(c.configs)
			if err == nil || err.Error() != c.want {
				t.Fatalf("%v: error %v, want %q", c.configs, err, c.want)
			}
		}
	}
}

func TestTopicConfigCompactionLagConflict(t *testing.T) {
	err := ValidateTopicConfigs(map[string]string{"min.compaction.lag.ms": "60000", "max.compaction.lag.ms": "1"})
	if want := "conflict topic config setting min.compaction.lag.ms (60000) > max.compaction.lag.ms (1)"; err == nil || err.Error() != want || !errors.Is(err, ErrInvalidTopicConfig) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if err := ValidateTopicConfigs(map[string]string{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentSetAgrees: segment.Config.Set (kept for code that uses a log
// on its own) accepts, with segment.Config.Validate, exactly the values
// the table accepts for the log's keys, and sets the same fields.
func TestSegmentSetAgrees(t *testing.T) {
	values := []string{"-9223372036854775808", "-2", "-1", "0", "1", "3", "4", "13", "14", " 100 ", "0.5", "1.5", "x", "",
		"2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
		"delete", "compact", "compact,delete", "compact, delete", " delete , compact ", "Compact", "compact,,delete", "delete,"}
	logKeys := segment.Keys()
	if len(logKeys) == 0 {
		t.Fatal("segment.Keys is empty")
	}
	for _, key := range logKeys {
		k, ok := LookupTopicConfig(key)
		if !ok {
			t.Errorf("segment key %s is not in the table", key)
			continue
		}
		for _, v := range values {
			tc, terr := ResolveTopicConfig(map[string]string{key: v}, nil)
			c := segment.DefaultConfig()
			serr := c.Set(key, v)
			if serr == nil {
				serr = c.Validate()
			}
			if (terr == nil) != (serr == nil) {
				t.Errorf("%s=%q: table %v, segment %v", k.Name, v, terr, serr)
				continue
			}
			if terr == nil && tc.Log.Validate() != nil {
				t.Errorf("%s=%q: resolved log config invalid: %v", k.Name, v, tc.Log.Validate())
			}
			if terr == nil && tc.Log != c {
				t.Errorf("%s=%q: table sets %+v, segment %+v", k.Name, v, tc.Log, c)
			}
		}
	}
}

func TestConfigTypeValues(t *testing.T) {
	// The protocol's values (DescribeConfigs v3+).
	for typ, want := range map[ConfigType]int8{ConfigBoolean: 1, ConfigString: 2, ConfigInt: 3, ConfigShort: 4, ConfigLong: 5, ConfigDouble: 6, ConfigList: 7} {
		if int8(typ) != want {
			t.Errorf("%s = %d, want %d", typ, typ, want)
		}
	}
	if k, _ := LookupTopicConfig("cleanup.policy"); k.Type != ConfigList {
		t.Error("cleanup.policy is not a LIST")
	}
}

func TestSplitConfigList(t *testing.T) {
	for v, want := range map[string][]string{
		"": nil, "  ": nil, "a": {"a"}, " a , b ": {"a", "b"}, "a,,b": {"a", "", "b"}, "a,": {"a", ""}, "a b,c": {"a b", "c"},
	} {
		if got := SplitConfigList(v); !slices.Equal(got, want) {
			t.Errorf("SplitConfigList(%q) = %q, want %q", v, got, want)
		}
	}
}

func BenchmarkResolveTopicConfig(b *testing.B) {
	overrides := map[string]string{"cleanup.policy": "compact", "retention.ms": "1000", "max.message.bytes": "100000"}
	broker := func(string) (string, bool) { return "", false }
	for b.Loop() {
		if _, err := ResolveTopicConfig(overrides, broker); err != nil {
			b.Fatal(err)
		}
	}
}
