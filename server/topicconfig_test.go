package server

import (
	"testing"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerDefaultsResolve: every topic key's broker synonym (when it
// has one: the throttled replicas lists do not) exists, and
// Sluice's broker defaults resolve under the topic table.
func TestBrokerDefaultsResolve(t *testing.T) {
	cfg := config.Default()
	for _, k := range replica.TopicConfigKeys() {
		if k.BrokerKey == "" {
			continue
		}
		if _, ok := cfg.String(k.BrokerKey); !ok {
			t.Errorf("%s: broker key %s is not a broker config", k.Name, k.BrokerKey)
		}
	}
	tc, err := replica.ResolveTopicConfig(nil, cfg.String)
	if err != nil {
		t.Fatal(err)
	}
	if tc.Log.FlushMessages != 1 || tc.MaxMessageBytes != int(cfg.MessageMaxBytes) || !tc.KeepProducerCodec {
		t.Errorf("resolved %+v", tc)
	}
}

// TestCreateTopicListWithSpaces: "compact, delete" is a valid
// cleanup.policy (Kafka trims list items), the partition log compacts and
// deletes, and DescribeConfigs shows the list as Kafka does.
func TestCreateTopicListWithSpaces(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "spaced", 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact, delete"), "segment.bytes": kadm.StringPtr(" 1048576 "),
	})
	lc := cfgLogConfigs(t, b, "spaced", 1)[0]
	if lc.CleanupPolicy != segment.PolicyCompactDelete || lc.SegmentBytes != 1048576 {
		t.Errorf("log config: policy %q segment.bytes %d", lc.CleanupPolicy, lc.SegmentBytes)
	}
	got := cfgDescribe(t, ctx, adm, "spaced")
	cfgWant(t, got["cleanup.policy"], "compact,delete", kmsg.ConfigSourceDynamicTopicConfig,
		"cleanup.policy=compact,delete/DYNAMIC_TOPIC_CONFIG", "log.cleanup.policy=delete/DEFAULT_CONFIG")
	cfgWant(t, got["segment.bytes"], "1048576", kmsg.ConfigSourceDynamicTopicConfig,
		"segment.bytes=1048576/DYNAMIC_TOPIC_CONFIG", "log.segment.bytes=1073741824/DEFAULT_CONFIG")

	// The broker's synonym takes the same spelling.
	b2, _ := startBroker(t, "", "log.cleanup.policy=compact, delete")
	if v, _ := b2.cfg.String("log.cleanup.policy"); v != "compact,delete" {
		t.Errorf("log.cleanup.policy = %q", v)
	}
}

// TestCreateTopicNamesFirstBadConfig: with several bad configs, the error
// names the alphabetically first bad key, every time, in Kafka's words.
func TestCreateTopicNamesFirstBadConfig(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	configs := map[string]*string{
		"segment.bytes": kadm.StringPtr("10"), "retention.ms": kadm.StringPtr("soon"),
		"zz.unknown": kadm.StringPtr("1"), "cleanup.policy": kadm.StringPtr("compact,,delete"),
		"max.message.bytes": kadm.StringPtr("-1"),
	}
	want := "Invalid value compact,,delete for configuration cleanup.policy: String must be one of: compact, delete"
	for i := 0; i < 20; i++ {
		for _, validate := range []bool{false, true} {
			create := adm.CreateTopics
			if validate {
				create = adm.ValidateCreateTopics
			}
			rs, err := create(ctx, 1, 1, configs, "bad-configs")
			if err != nil {
				t.Fatal(err)
			}
			res, err := rs.On("bad-configs", nil)
			if err != nil {
				t.Fatal(err)
			}
			// The server prefixes every error message with the code's
			// name (errMessage); the rest is Kafka's text.
			if res.Err == nil || res.ErrMessage != "INVALID_CONFIG: "+want {
				t.Fatalf("validate %v: %v %q, want %q", validate, res.Err, res.ErrMessage, want)
			}
		}
	}
	configs["a.unknown"] = kadm.StringPtr("1")
	rs, err := adm.CreateTopics(ctx, 1, 1, configs, "bad-configs")
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := rs.On("bad-configs", nil); res.ErrMessage != "INVALID_CONFIG: Unknown topic config name: a.unknown" {
		t.Fatalf("%q", res.ErrMessage)
	}
}
