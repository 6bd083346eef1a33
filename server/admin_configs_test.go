package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Tests of DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
// DescribeCluster and DescribeLogDirs. Helpers are prefixed cfg.

func cfgCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func cfgAdmin(t *testing.T, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr, opts...))
}

func cfgCreate(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	res, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, res.Err)
	}
}

// cfgDescribe returns a topic's described configs by name.
func cfgDescribe(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[string]*kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	out := map[string]*kadm.Config{}
	for i := range rc.Configs {
		out[rc.Configs[i].Key] = &rc.Configs[i]
	}
	return out
}

// cfgAlterErr returns the one resource's error of an alter.
func cfgAlterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	if len(rs) != 1 {
		return fmt.Errorf("%d responses", len(rs))
	}
	if rs[0].Err != nil {
		return &kafkaError{code: rs[0].Err.(*kerr.Error), msg: rs[0].ErrMessage}
	}
	return nil
}

// cfgLogConfigs returns the live segment config of each open partition.
func cfgLogConfigs(t *testing.T, b *Broker, topic string, partitions int32) []segment.Config {
	t.Helper()
	var out []segment.Config
	for p := int32(0); p < partitions; p++ {
		part, ok := b.partition(topic, p)
		if !ok {
			t.Fatalf("%s-%d not open", topic, p)
		}
		out = append(out, part.Config().Log)
	}
	return out
}

func cfgWant(t *testing.T, c *kadm.Config, value string, src kmsg.ConfigSource, synonyms ...string) {
	t.Helper()
	if c == nil {
		t.Fatalf("config not described")
	}
	if c.MaybeValue() != value || c.Source != src || c.Sensitive {
		t.Errorf("%s = %q source %v sensitive %v, want %q source %v", c.Key, c.MaybeValue(), c.Source, c.Sensitive, value, src)
	}
	var got []string
	for _, s := range c.Synonyms {
		v := "<nil>"
		if s.Value != nil {
			v = *s.Value
		}
		got = append(got, s.Key+"="+v+"/"+s.Source.String())
	}
	if !slices.Equal(got, synonyms) {
		t.Errorf("%s synonyms %q, want %q", c.Key, got, synonyms)
	}
}

func TestConfigTypesMatchKmsg(t *testing.T) {
	for typ, want := range map[replica.ConfigType]kmsg.ConfigType{
		replica.ConfigBoolean: kmsg.ConfigTypeBoolean, replica.ConfigString: kmsg.ConfigTypeString,
		replica.ConfigInt: kmsg.ConfigTypeInt, replica.ConfigShort: kmsg.ConfigTypeShort,
		replica.ConfigLong: kmsg.ConfigTypeLong, replica.ConfigDouble: kmsg.ConfigTypeDouble,
		replica.ConfigList: kmsg.ConfigTypeList,
	} {
		if configType(typ) != want {
			t.Errorf("%s maps to %v, want %v", typ, configType(typ), want)
		}
	}
}

func TestDescribeTopicConfigs(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "", "log.segment.bytes=104857600")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "described", 2, map[string]*string{"retention.ms": kadm.StringPtr("60000")})

	got := cfgDescribe(t, ctx, adm, "described")
	if n := len(replica.TopicConfigKeys()); len(got) != n {
		t.Errorf("%d configs described, want every one of %d", len(got), n)
	}
	cfgWant(t, got["retention.ms"], "60000", kmsg.ConfigSourceDynamicTopicConfig,
		"retention.ms=60000/DYNAMIC_TOPIC_CONFIG", "log.retention.ms=604800000/DEFAULT_CONFIG")
	cfgWant(t, got["segment.bytes"], "104857600", kmsg.ConfigSourceStaticBrokerConfig,
		"log.segment.bytes=104857600/STATIC_BROKER_CONFIG", "log.segment.bytes=1073741824/DEFAULT_CONFIG")
	cfgWant(t, got["cleanup.policy"], "delete", kmsg.ConfigSourceDefaultConfig, "log.cleanup.policy=delete/DEFAULT_CONFIG")
	cfgWant(t, got["flush.messages"], "1", kmsg.ConfigSourceDefaultConfig, "log.flush.interval.messages=1/DEFAULT_CONFIG")

	rcs, err := adm.DescribeTopicConfigs(ctx, "no-such-topic")
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("no-such-topic", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", rc.Err)
	}

	// A filter by name, without synonyms, and v0's is-default flag.
	for _, max := range []*kversion.Versions{nil, kversion.V0_11_0()} {
		var opts []kgo.Opt
		if max != nil {
			opts = append(opts, kgo.MaxVersions(max))
		}
		cl := newClient(t, addr, opts...)
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = "described"
		rr.ConfigNames = []string{"retention.ms", "flush.ms", "no.such.config"}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if wantV := int16(4); max != nil && resp.Version != 0 || max == nil && resp.Version != wantV {
			t.Errorf("DescribeConfigs v%d", resp.Version)
		}
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", resp.Version, resp.Resources)
		}
		cs := resp.Resources[0].Configs
		if len(cs) != 2 || cs[0].Name != "flush.ms" || cs[1].Name != "retention.ms" {
			t.Fatalf("v%d filtered configs: %+v", resp.Version, cs)
		}
		if len(cs[1].ConfigSynonyms) != 0 || cs[1].ReadOnly || cs[1].IsSensitive {
			t.Errorf("v%d retention.ms: %+v", resp.Version, cs[1])
		}
		if resp.Version == 0 && (!cs[0].IsDefault || cs[1].IsDefault) {
			t.Errorf("v0 is-default: flush.ms %v retention.ms %v", cs[0].IsDefault, cs[1].IsDefault)
		}
		if resp.Version >= 3 && cs[1].ConfigType != kmsg.ConfigTypeLong {
			t.Errorf("v%d retention.ms type %v", resp.Version, cs[1].ConfigType)
		}
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	t.Parallel()
	_, addr := startBroker(t, "", "num.partitions=3", "log.retention.hours=48")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("1", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker 1: %v %v", err, rc.Err)
	}
	got := map[string]*kadm.Config{}
	for i := range rc.Configs {
		got[rc.Configs[i].Key] = &rc.Configs[i]
	}
	// The static keys and the dynamic ones (configs_broker.go).
	wantKeys := slices.Sorted(slices.Values(append(config.Keys(), "leader.replication.throttled.rate", "follower.replication.throttled.rate")))
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, wantKeys) {
		t.Errorf("broker keys %v, want %v", keys, wantKeys)
	}
	if !slices.IsSortedFunc(rc.Configs, func(a, b kadm.Config) int { return strings.Compare(a.Key, b.Key) }) {
		t.Error("broker configs not sorted by name")
	}
	cfgWant(t, got["leader.replication.throttled.rate"], "9223372036854775807", kmsg.ConfigSourceDefaultConfig,
		"leader.replication.throttled.rate=9223372036854775807/DEFAULT_CONFIG")
	cfgWant(t, got["num.partitions"], "3", kmsg.ConfigSourceStaticBrokerConfig,
		"num.partitions=3/STATIC_BROKER_CONFIG", "num.partitions=1/DEFAULT_CONFIG")
	cfgWant(t, got["log.retention.ms"], strconv.Itoa(48*3600*1000), kmsg.ConfigSourceStaticBrokerConfig,
		"log.retention.ms=172800000/STATIC_BROKER_CONFIG", "log.retention.ms=604800000/DEFAULT_CONFIG")
	cfgWant(t, got["message.max.bytes"], "1048588", kmsg.ConfigSourceDefaultConfig, "message.max.bytes=1048588/DEFAULT_CONFIG")
	// Never set, but derived from listeners and the port bound: the
	// effective value, not Default()'s.
	adv := "PLAINTEXT://" + addr
	cfgWant(t, got["advertised.listeners"], adv, kmsg.ConfigSourceDefaultConfig, "advertised.listeners="+adv+"/DEFAULT_CONFIG")

	// "" is the cluster-wide dynamic default: none set.
	rcs, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("", nil); rc.Err != nil || len(rc.Configs) != 0 {
		t.Errorf("default broker resource: %v, %d configs", rc.Err, len(rc.Configs))
	}
	for _, name := range []string{"7", "one"} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeBroker
		rr.ResourceName = name
		req.Resources = append(req.Resources, rr)
		// Straight to the broker: kgo would route by the resource name.
		kresp, err := newClient(t, addr).Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.DescribeConfigsResponse)
		if r := resp.Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code || len(r.Configs) != 0 {
			t.Errorf("broker %q: code %d, %d configs", name, r.ErrorCode, len(r.Configs))
		}
	}
}

func TestIncrementalAlterTopicConfigs(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "inc", 3, nil)

	set := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("1048576")},
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("65536")},
	}
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, set, "inc")); err != nil {
		t.Fatal(err)
	}
	got := cfgDescribe(t, ctx, adm, "inc")
	cfgWant(t, got["retention.bytes"], "1048576", kmsg.ConfigSourceDynamicTopicConfig,
		"retention.bytes=1048576/DYNAMIC_TOPIC_CONFIG", "log.retention.bytes=-1/DEFAULT_CONFIG")
	cfgWant(t, got["segment.bytes"], "65536", kmsg.ConfigSourceDynamicTopicConfig,
		"segment.bytes=65536/DYNAMIC_TOPIC_CONFIG", "log.segment.bytes=1073741824/DEFAULT_CONFIG")
	for p, c := range cfgLogConfigs(t, b, "inc", 3) {
		if c.RetentionBytes != 1048576 || c.SegmentBytes != 65536 {
			t.Errorf("partition %d log config after SET: %+v", p, c)
		}
	}

	del := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.bytes"}}
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, del, "inc")); err != nil {
		t.Fatal(err)
	}
	got = cfgDescribe(t, ctx, adm, "inc")
	cfgWant(t, got["retention.bytes"], "-1", kmsg.ConfigSourceDefaultConfig, "log.retention.bytes=-1/DEFAULT_CONFIG")
	if got["segment.bytes"].MaybeValue() != "65536" {
		t.Errorf("DELETE of retention.bytes touched segment.bytes: %q", got["segment.bytes"].MaybeValue())
	}
	for p, c := range cfgLogConfigs(t, b, "inc", 3) {
		if c.RetentionBytes != -1 || c.SegmentBytes != 65536 {
			t.Errorf("partition %d log config after DELETE: %+v", p, c)
		}
	}

	// APPEND and SUBTRACT work on the list config, from its effective value.
	app := []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, app, "inc")); err != nil {
		t.Fatal(err)
	}
	if v := cfgDescribe(t, ctx, adm, "inc")["cleanup.policy"].MaybeValue(); v != "delete,compact" {
		t.Errorf("cleanup.policy after APPEND compact: %q", v)
	}
	sub := []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")}}
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, sub, "inc")); err != nil {
		t.Fatal(err)
	}
	if v := cfgDescribe(t, ctx, adm, "inc")["cleanup.policy"].MaybeValue(); v != "compact" {
		t.Errorf("cleanup.policy after SUBTRACT delete: %q", v)
	}
	for _, op := range []kadm.IncrementalOp{kadm.AppendConfig, kadm.SubtractConfig} {
		bad := []kadm.AlterConfig{{Op: op, Name: "retention.ms", Value: kadm.StringPtr("1")}}
		err := cfgAlterErr(adm.AlterTopicConfigs(ctx, bad, "inc"))
		if !errIs(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "retention.ms") {
			t.Errorf("op %d on a non-list config: %v", op, err)
		}
	}
}

func TestAlterTopicConfigsReplacesAll(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "whole", 1, map[string]*string{
		"retention.ms": kadm.StringPtr("60000"),
		"segment.ms":   kadm.StringPtr("3600000"),
	})
	state := []kadm.AlterConfig{
		{Name: "retention.bytes", Value: kadm.StringPtr("4096")},
		{Name: "segment.ms", Value: kadm.StringPtr("7200000")},
	}
	if err := cfgAlterErr(adm.AlterTopicConfigsState(ctx, state, "whole")); err != nil {
		t.Fatal(err)
	}
	got := cfgDescribe(t, ctx, adm, "whole")
	cfgWant(t, got["retention.ms"], "604800000", kmsg.ConfigSourceDefaultConfig, "log.retention.ms=604800000/DEFAULT_CONFIG")
	if got["retention.bytes"].MaybeValue() != "4096" || got["segment.ms"].MaybeValue() != "7200000" {
		t.Errorf("after replace: retention.bytes %q segment.ms %q", got["retention.bytes"].MaybeValue(), got["segment.ms"].MaybeValue())
	}
	c := cfgLogConfigs(t, b, "whole", 1)[0]
	if c.RetentionMs != 604800000 || c.RetentionBytes != 4096 || c.SegmentMs != 7200000 {
		t.Errorf("log config after replace: %+v", c)
	}
	// An empty set clears every override.
	if err := cfgAlterErr(adm.AlterTopicConfigsState(ctx, nil, "whole")); err != nil {
		t.Fatal(err)
	}
	for k, c := range cfgDescribe(t, ctx, adm, "whole") {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s still set on the topic after an empty replace", k)
		}
	}
	if c := cfgLogConfigs(t, b, "whole", 1)[0]; c.RetentionBytes != -1 || c.SegmentMs != 604800000 {
		t.Errorf("log config after empty replace: %+v", c)
	}
}

func TestAlterConfigsRejects(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "strict", 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")})
	before := cfgLogConfigs(t, b, "strict", 1)[0]

	bad := []struct {
		name, key, value string
	}{
		{"unknown key", "retention.weeks", "2"},
		{"bad value", "retention.ms", "soon"},
		{"out of range", "segment.bytes", "10"},
		{"bad enum", "cleanup.policy", "archive"},
	}
	for _, tc := range bad {
		ac := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.key, Value: kadm.StringPtr(tc.value)}}
		for what, alter := range map[string]func(context.Context, []kadm.AlterConfig, ...string) (kadm.AlterConfigsResponses, error){
			"incremental":              adm.AlterTopicConfigs,
			"incremental validate":     adm.ValidateAlterTopicConfigs,
			"non-incremental":          adm.AlterTopicConfigsState,
			"non-incremental validate": adm.ValidateAlterTopicConfigsState,
		} {
			err := cfgAlterErr(alter(ctx, ac, "strict"))
			if !errIs(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("%s, %s: %v (want INVALID_CONFIG naming %s)", tc.name, what, err, tc.key)
			}
		}
	}

	// Validate-only accepts a good change and makes none.
	good := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("1000")}}
	if err := cfgAlterErr(adm.ValidateAlterTopicConfigs(ctx, good, "strict")); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.ValidateAlterTopicConfigsState(ctx, good, "strict")); err != nil {
		t.Fatal(err)
	}
	got := cfgDescribe(t, ctx, adm, "strict")
	if got["retention.bytes"].Source != kmsg.ConfigSourceDefaultConfig || got["retention.ms"].MaybeValue() != "60000" {
		t.Errorf("validate-only changed configs: retention.bytes %+v retention.ms %+v", got["retention.bytes"], got["retention.ms"])
	}
	if after := cfgLogConfigs(t, b, "strict", 1)[0]; after != before {
		t.Errorf("validate-only or rejected changes reached the log: %+v, was %+v", after, before)
	}

	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, good, "no-such-topic")); !errIs(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", err)
	}
	// Broker configs are static.
	for _, id := range []int32{1} {
		err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("1000")}}, id))
		if !errIs(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), "log.retention.ms") {
			t.Errorf("broker alter: %v", err)
		}
		err = cfgAlterErr(adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: kadm.StringPtr("3")}}, id))
		if !errIs(err, kerr.InvalidRequest) {
			t.Errorf("broker alter state: %v", err)
		}
	}

	// A key twice, a resource twice and a null value are INVALID_REQUEST.
	cl := newClient(t, addr)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, name := range []string{"strict", "strict"} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = name
		req.Resources = append(req.Resources, rr)
	}
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = "dupkey"
	for range 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kadm.StringPtr("1000")
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	rr = kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = "nullvalue"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name = "retention.ms"
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 4 {
		t.Fatalf("%d resources answered", len(resp.Resources))
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s: code %d (%v)", r.ResourceName, r.ErrorCode, r.ErrorMessage)
		}
	}
}

func TestAlteredConfigsTakeEffectAndSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, addr := startBroker(t, dir)
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "live", 1, nil)
	set := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1024")},
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("4096")},
	}
	if err := cfgAlterErr(adm.AlterTopicConfigs(ctx, set, "live")); err != nil {
		t.Fatal(err)
	}
	// segment.bytes applies to the next append: 1 KiB batches roll a
	// segment each.
	producer := newClient(t, addr, kgo.DefaultProduceTopic("live"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 8; i++ {
		r := &kgo.Record{Value: []byte(strings.Repeat("x", 900))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	part, _ := b.partition("live", 0)
	if n := part.NumSegments(); n < 4 {
		t.Errorf("%d segments after 8 batches of ~1 KiB with segment.bytes=1024", n)
	}
	// retention.bytes applies on the next retention pass.
	if n, err := part.DeleteOldSegments(); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	if size := part.Size(); size > 4096+1024 {
		t.Errorf("log is %d bytes after retention with retention.bytes=4096", size)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b, addr = startBroker(t, dir)
	adm = cfgAdmin(t, addr)
	got := cfgDescribe(t, ctx, adm, "live")
	cfgWant(t, got["segment.bytes"], "1024", kmsg.ConfigSourceDynamicTopicConfig,
		"segment.bytes=1024/DYNAMIC_TOPIC_CONFIG", "log.segment.bytes=1073741824/DEFAULT_CONFIG")
	if got["retention.bytes"].MaybeValue() != "4096" {
		t.Errorf("retention.bytes after restart: %+v", got["retention.bytes"])
	}
	if c := cfgLogConfigs(t, b, "live", 1)[0]; c.SegmentBytes != 1024 || c.RetentionBytes != 4096 {
		t.Errorf("log config after restart: %+v", c)
	}
}

func TestDescribeCluster(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "node.id=4")
	ctx := cfgCtx(t)
	cl := newClient(t, addr)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	adv := b.cfg.AdvertisedListeners[0]
	if resp.ErrorCode != 0 || resp.ClusterID != clusterID || resp.ControllerID != 4 || len(resp.Brokers) != 1 {
		t.Fatalf("describe cluster: %+v", resp)
	}
	if br := resp.Brokers[0]; br.NodeID != 4 || br.Host != adv.Host || br.Port != int32(adv.Port) || br.Port == 0 {
		t.Errorf("broker %+v, advertised %+v", br, adv)
	}
	if resp.ClusterAuthorizedOperations&(1<<10) == 0 {
		t.Errorf("authorized operations %b lack DESCRIBE_CONFIGS", resp.ClusterAuthorizedOperations)
	}
	if resp.Version >= 1 {
		req.EndpointType = 2 // controllers
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
			t.Errorf("controller endpoints: code %d", resp.ErrorCode)
		}
	}
	// kadm's view, through Metadata, agrees.
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != resp.ClusterID || md.Controller != 4 {
		t.Errorf("metadata cluster %q controller %d", md.Cluster, md.Controller)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, addr := startBroker(t, dir)
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "sized", 2, nil)
	cfgCreate(t, ctx, adm, "other", 1, nil)

	sizes := func(s kadm.TopicsSet) map[string]int64 {
		t.Helper()
		all, err := adm.DescribeAllLogDirs(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		dirs, ok := all[1]
		if !ok || len(dirs) != 1 {
			t.Fatalf("log dirs: %+v", all)
		}
		out := map[string]int64{}
		for _, d := range dirs {
			if d.Err != nil || d.Dir != filepath.Clean(dir) {
				t.Fatalf("dir %q (want %q): %v", d.Dir, dir, d.Err)
			}
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if p.OffsetLag != 0 || p.IsFuture {
					t.Errorf("%s-%d: lag %d future %v", p.Topic, p.Partition, p.OffsetLag, p.IsFuture)
				}
				out[p.Topic+"-"+strconv.Itoa(int(p.Partition))] = p.Size
			})
		}
		return out
	}
	// A new partition holds no record, only raft's entry of its first
	// leader (an internal batch), which counts in its size on disk.
	empty := sizes(nil)
	base := empty["sized-0"]
	if len(empty) != 3 || base > 128 || empty["sized-1"] != base || empty["other-0"] != base {
		t.Fatalf("sizes before producing: %v", empty)
	}

	producer := newClient(t, addr, kgo.DefaultProduceTopic("sized"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 5; i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("some bytes")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	after := sizes(nil)
	if after["sized-1"] <= base || after["sized-0"] != base || after["other-0"] != base {
		t.Errorf("sizes after producing to sized-1: %v", after)
	}
	// Only what was asked for.
	var s kadm.TopicsSet
	s.Add("sized", 1)
	if asked := sizes(s); len(asked) != 1 || asked["sized-1"] != after["sized-1"] {
		t.Errorf("sizes of sized-1: %v", asked)
	}

	// Partitions and topics that do not exist are left out (straight to
	// the broker: kgo would refuse to route them), and v4 has disk space.
	req := kmsg.NewPtrDescribeLogDirsRequest()
	for _, rt := range []struct {
		topic string
		parts []int32
	}{{"sized", []int32{0, 7}}, {"no-such-topic", []int32{0}}} {
		tr := kmsg.NewDescribeLogDirsRequestTopic()
		tr.Topic, tr.Partitions = rt.topic, rt.parts
		req.Topics = append(req.Topics, tr)
	}
	kresp, err := newClient(t, addr).Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) != 1 || resp.Dirs[0].Topics[0].Topic != "sized" ||
		len(resp.Dirs[0].Topics[0].Partitions) != 1 || resp.Dirs[0].Topics[0].Partitions[0].Partition != 0 {
		t.Errorf("sized-0, sized-7 and no-such-topic-0 described as %+v", resp.Dirs)
	}
	if resp.Version >= 4 {
		d := resp.Dirs[0]
		if d.TotalBytes != -1 && (d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes) {
			t.Errorf("total %d usable %d", d.TotalBytes, d.UsableBytes)
		}
	}
}
