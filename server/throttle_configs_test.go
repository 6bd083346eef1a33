package server

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The configs of replication throttles (KIP-73): the topic configs
// leader.replication.throttled.replicas and
// follower.replication.throttled.replicas, and the dynamic broker configs
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (configs_broker.go). The throttled move itself is in
// cluster_throttle_test.go.

const (
	leaderReplicas   = "leader.replication.throttled.replicas"
	followerReplicas = "follower.replication.throttled.replicas"
	leaderRate       = "leader.replication.throttled.rate"
	followerRate     = "follower.replication.throttled.rate"
	unlimitedRate    = "9223372036854775807"
)

func throttledListReason(key string) string {
	return key + " must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
}

// cfgDescribeBroker returns broker resource name's described configs by
// key, asked of broker br ("" is the cluster default).
func cfgDescribeBroker(t *testing.T, ctx context.Context, br *kgo.Broker, name string) map[string]*kadm.Config {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
	req.Resources = append(req.Resources, rr)
	kresp, err := br.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe broker %q: %+v", name, resp.Resources)
	}
	out := map[string]*kadm.Config{}
	for _, c := range resp.Resources[0].Configs {
		kc := &kadm.Config{Key: c.Name, Value: c.Value, Source: c.Source, Sensitive: c.IsSensitive}
		for _, s := range c.ConfigSynonyms {
			kc.Synonyms = append(kc.Synonyms, kadm.ConfigSynonym{Key: s.Name, Value: s.Value, Source: s.Source})
		}
		if c.ConfigType != kmsg.ConfigTypeUnknown && c.ConfigType != kmsg.ConfigTypeLong {
			t.Errorf("%s: type %v", c.Name, c.ConfigType)
		}
		if (c.Name == leaderRate || c.Name == followerRate) && (c.ReadOnly || c.ConfigType != kmsg.ConfigTypeLong) {
			t.Errorf("%s: read-only %v type %v, want a writable LONG", c.Name, c.ReadOnly, c.ConfigType)
		}
		out[c.Name] = kc
	}
	return out
}

// brokerAlter sends one broker resource's change straight to broker br
// (kgo would route a broker id to that broker, and know no id that is not
// registered): incremental with ops, else the legacy AlterConfigs of the
// whole set.
func brokerAlter(ctx context.Context, cl *kgo.Broker, name string, incremental bool, configs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	if incremental {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeBroker, name, configs
		req.Resources = append(req.Resources, rr)
		kresp, err := cl.Request(ctx, req)
		if err != nil {
			return err
		}
		r := kresp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return &kafkaError{code: err.(*kerr.Error), msg: deref(r.ErrorMessage)}
		}
		return nil
	}
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
	for _, c := range configs {
		ac := kmsg.NewAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = c.Name, c.Value
		rr.Configs = append(rr.Configs, ac)
	}
	req.Resources = append(req.Resources, rr)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return err
	}
	r := kresp.(*kmsg.AlterConfigsResponse).Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return &kafkaError{code: err.(*kerr.Error), msg: deref(r.ErrorMessage)}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func setOp(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	return c
}

func opOf(op kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Op, c.Name, c.Value = op, name, value
	return c
}

// The throttled replicas lists are topic configs: validated as Kafka
// does at creation and on every alter (APPEND and SUBTRACT included),
// described in canonical form with no broker synonym, and without effect
// on the partition's own settings.
func TestThrottledReplicasTopicConfigs(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cfgCreate(t, ctx, adm, "thr", 2, map[string]*string{
		leaderReplicas: kadm.StringPtr(" * "), followerReplicas: kadm.StringPtr("0:1, 1:1"),
	})
	cfgCreate(t, ctx, adm, "plain", 1, nil)
	if a, b := cfgLogConfigs(t, b, "thr", 1)[0], cfgLogConfigs(t, b, "plain", 1)[0]; a != b {
		t.Errorf("the lists changed the log's settings: %+v, plain %+v", a, b)
	}
	got := cfgDescribe(t, ctx, adm, "thr")
	cfgWant(t, got[leaderReplicas], "*", kmsg.ConfigSourceDynamicTopicConfig, leaderReplicas+"=*/DYNAMIC_TOPIC_CONFIG")
	cfgWant(t, got[followerReplicas], "0:1,1:1", kmsg.ConfigSourceDynamicTopicConfig, followerReplicas+"=0:1,1:1/DYNAMIC_TOPIC_CONFIG")
	// Not set: Kafka's default, the empty list, with no synonym.
	plain := cfgDescribe(t, ctx, adm, "plain")
	cfgWant(t, plain[leaderReplicas], "", kmsg.ConfigSourceDefaultConfig)
	cfgWant(t, plain[followerReplicas], "", kmsg.ConfigSourceDefaultConfig)

	// Bad values at creation, in Kafka's words.
	for _, v := range []string{"0:x", "*,0:1", "0:1:2", "-1:1", "all", "0:2147483648"} {
		rs, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{followerReplicas: kadm.StringPtr(v)}, "bad")
		if err != nil {
			t.Fatal(err)
		}
		res, _ := rs.On("bad", nil)
		want := "INVALID_CONFIG: Invalid value " + v + " for configuration " + followerReplicas + ": " + throttledListReason(followerReplicas)
		if res.Err == nil || res.ErrMessage != want {
			t.Errorf("create with %q: %v %q, want %q", v, res.Err, res.ErrMessage, want)
		}
	}

	// APPEND and SUBTRACT, from the effective value (the empty default
	// for a list not set).
	steps := []struct {
		ops        []kadm.AlterConfig
		lead, foll string
		bad        bool
	}{
		{ops: []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: followerReplicas, Value: kadm.StringPtr("2:1, 0:1")}}, lead: "*", foll: "0:1,1:1,2:1"},
		{ops: []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: followerReplicas, Value: kadm.StringPtr("0:1")}}, lead: "*", foll: "1:1,2:1"},
		{ops: []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: followerReplicas, Value: kadm.StringPtr("*")}}, bad: true},
		{ops: []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: leaderReplicas, Value: kadm.StringPtr("0:1")}}, bad: true}, // "*,0:1"
		{ops: []kadm.AlterConfig{{Op: kadm.SetConfig, Name: leaderReplicas, Value: kadm.StringPtr("0:")}}, bad: true},
		{ops: []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderReplicas}}, lead: "", foll: "1:1,2:1"},
		{ops: []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: leaderReplicas, Value: kadm.StringPtr("1:2")}}, lead: "1:2", foll: "1:1,2:1"},
		{ops: []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: followerReplicas, Value: kadm.StringPtr("1:1,2:1")}}, lead: "1:2", foll: ""},
		{ops: []kadm.AlterConfig{{Op: kadm.SetConfig, Name: followerReplicas, Value: kadm.StringPtr("*")}, {Op: kadm.DeleteConfig, Name: leaderReplicas}}, lead: "", foll: "*"},
	}
	for i, st := range steps {
		err := cfgAlterErr(adm.AlterTopicConfigs(ctx, st.ops, "thr"))
		if st.bad {
			if !errIs(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "must be the literal '*'") {
				t.Errorf("step %d: %v, want INVALID_CONFIG", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := cfgDescribe(t, ctx, adm, "thr")
		if got[leaderReplicas].MaybeValue() != st.lead || got[followerReplicas].MaybeValue() != st.foll {
			t.Errorf("step %d: leader %q follower %q, want %q %q", i, got[leaderReplicas].MaybeValue(), got[followerReplicas].MaybeValue(), st.lead, st.foll)
		}
	}

	// The legacy AlterConfigs: the whole set, validated the same way.
	if err := cfgAlterErr(adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: leaderReplicas, Value: kadm.StringPtr("0:1,,0:2")}}, "thr")); err != nil {
		t.Fatal(err)
	}
	got = cfgDescribe(t, ctx, adm, "thr")
	cfgWant(t, got[leaderReplicas], "0:1,,0:2", kmsg.ConfigSourceDynamicTopicConfig, leaderReplicas+"=0:1,,0:2/DYNAMIC_TOPIC_CONFIG")
	cfgWant(t, got[followerReplicas], "", kmsg.ConfigSourceDefaultConfig)
	err := cfgAlterErr(adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: leaderReplicas, Value: kadm.StringPtr("**")}}, "thr"))
	if !errIs(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), throttledListReason(leaderReplicas)) {
		t.Errorf("legacy alter with **: %v", err)
	}
}

// The throttle rates are dynamic broker configs on a single node too:
// set, replaced and deleted for its own id and for the cluster default,
// described with their sources and synonyms, kept across a restart;
// other broker keys, other broker ids and bad values are refused.
func TestThrottleRateBrokerConfigsSingleNode(t *testing.T) {
	dir := t.TempDir()
	b1, addr := startBroker(t, dir)
	ctx := cfgCtx(t)
	adm := cfgAdmin(t, addr)
	cl := newClient(t, addr).Broker(1)

	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: leaderRate, Value: kadm.StringPtr(" 1048576 ")}}, 1)); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Name: leaderRate, Value: kadm.StringPtr("2000000")}, {Name: followerRate, Value: kadm.StringPtr("3000000")},
	})); err != nil { // no broker: the cluster default
		t.Fatal(err)
	}
	got := cfgDescribeBroker(t, ctx, cl, "1")
	cfgWant(t, got[leaderRate], "1048576", kmsg.ConfigSourceDynamicBrokerConfig,
		leaderRate+"=1048576/DYNAMIC_BROKER_CONFIG", leaderRate+"=2000000/DYNAMIC_DEFAULT_BROKER_CONFIG", leaderRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	cfgWant(t, got[followerRate], "3000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		followerRate+"=3000000/DYNAMIC_DEFAULT_BROKER_CONFIG", followerRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	if c := got["log.retention.ms"]; c == nil || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("static keys still described: %+v", c)
	}
	def := cfgDescribeBroker(t, ctx, cl, "")
	if len(def) != 2 {
		t.Errorf("the cluster default lists %d configs, want the 2 set", len(def))
	}
	cfgWant(t, def[leaderRate], "2000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		leaderRate+"=2000000/DYNAMIC_DEFAULT_BROKER_CONFIG", leaderRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	// Through kadm too (the default resource, answered by any broker).
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("", nil); rc.Err != nil || len(rc.Configs) != 2 {
		t.Errorf("kadm, the default resource: %v, %d configs", rc.Err, len(rc.Configs))
	}

	// Refused, changing nothing: a static key (alone or with a dynamic
	// one), a bad value, APPEND, another broker id.
	for _, c := range []struct {
		name        string
		incremental bool
		ops         []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code        *kerr.Error
		msg         string
	}{
		{"1", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp("log.retention.ms", "1000")}, kerr.InvalidRequest, "cannot update these configs dynamically: log.retention.ms"},
		{"1", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp(leaderRate, "5"), setOp("num.partitions", "3")}, kerr.InvalidRequest, "cannot update these configs dynamically: num.partitions"},
		{"", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp(leaderRate, "5"), setOp("message.max.bytes", "3")}, kerr.InvalidRequest, "message.max.bytes"},
		{"1", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp(leaderRate, "-1")}, kerr.InvalidConfig, "Invalid value -1 for configuration " + leaderRate + ": Value must be at least 0"},
		{"", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp(followerRate, "1MiB")}, kerr.InvalidConfig, "Invalid value 1MiB for configuration " + followerRate + ": Not a number of type LONG"},
		{"1", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{opOf(kmsg.IncrementalAlterConfigOpAppend, leaderRate, kmsg.StringPtr("1"))}, kerr.InvalidConfig, "Config value append is not allowed for config key: " + leaderRate},
		{"1", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{opOf(kmsg.IncrementalAlterConfigOpSubtract, leaderRate, kmsg.StringPtr("1"))}, kerr.InvalidConfig, "Config value subtract is not allowed for config key: " + leaderRate},
		// Another broker's id is accepted: a single node is the active
		// controller of a one-voter cluster, which takes any id
		// (TestClusterThrottleRateConfigs).
		{"one", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp(leaderRate, "5")}, kerr.InvalidRequest, "broker id must be an integer"},
	} {
		err := brokerAlter(ctx, cl, c.name, c.incremental, c.ops...)
		if !errIs(err, c.code) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("broker %q %v: %v, want %v with %q", c.name, c.ops, err, c.code, c.msg)
		}
	}
	got = cfgDescribeBroker(t, ctx, cl, "1")
	if got[leaderRate].MaybeValue() != "1048576" || got[followerRate].MaybeValue() != "3000000" {
		t.Errorf("a refused change changed the rates: %q %q", got[leaderRate].MaybeValue(), got[followerRate].MaybeValue())
	}

	// Validate-only changes nothing.
	if err := cfgAlterErr(adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: leaderRate, Value: kadm.StringPtr("7")}}, 1)); err != nil {
		t.Fatal(err)
	}
	if v := cfgDescribeBroker(t, ctx, cl, "1")[leaderRate].MaybeValue(); v != "1048576" {
		t.Errorf("validate-only set the rate to %s", v)
	}

	// The legacy AlterConfigs replaces the resource's whole set.
	if err := cfgAlterErr(adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: followerRate, Value: kadm.StringPtr("0")}}, 1)); err != nil {
		t.Fatal(err)
	}
	got = cfgDescribeBroker(t, ctx, cl, "1")
	cfgWant(t, got[leaderRate], "2000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		leaderRate+"=2000000/DYNAMIC_DEFAULT_BROKER_CONFIG", leaderRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	cfgWant(t, got[followerRate], "0", kmsg.ConfigSourceDynamicBrokerConfig,
		followerRate+"=0/DYNAMIC_BROKER_CONFIG", followerRate+"=3000000/DYNAMIC_DEFAULT_BROKER_CONFIG", followerRate+"="+unlimitedRate+"/DEFAULT_CONFIG")

	// Kept across a restart.
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := startBroker(t, dir)
	b2kcl := newClient(t, b.Addr().String())
	b2cl, b2adm := b2kcl.Broker(1), kadm.NewClient(b2kcl)
	if v := cfgDescribeBroker(t, ctx, b2cl, "1")[followerRate].MaybeValue(); v != "0" {
		t.Errorf("after a restart: follower rate %q", v)
	}

	// DELETE, incrementally; deleting what is not set is no error.
	if err := cfgAlterErr(b2adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: followerRate}, {Op: kadm.DeleteConfig, Name: leaderRate}}, 1)); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(b2adm.AlterBrokerConfigsState(ctx, nil)); err != nil { // the default's whole set: none
		t.Fatal(err)
	}
	got = cfgDescribeBroker(t, ctx, b2cl, "1")
	cfgWant(t, got[followerRate], unlimitedRate, kmsg.ConfigSourceDefaultConfig, followerRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	cfgWant(t, got[leaderRate], unlimitedRate, kmsg.ConfigSourceDefaultConfig, leaderRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	if def := cfgDescribeBroker(t, ctx, b2cl, ""); len(def) != 0 {
		t.Errorf("the cluster default still lists %d configs", len(def))
	}
}

func TestThrottleRateResolution(t *testing.T) {
	lk, _ := lookupDynamicBrokerKey(leaderRate)
	for _, c := range []struct {
		own, def map[string]string
		want     int64
	}{
		{nil, nil, math.MaxInt64},
		{nil, map[string]string{leaderRate: "10"}, 10},
		{map[string]string{leaderRate: "5"}, map[string]string{leaderRate: "10"}, 5},
		{map[string]string{followerRate: "5"}, map[string]string{leaderRate: "10"}, 10},
		{map[string]string{leaderRate: "0"}, nil, 0},
	} {
		if got := effectiveBrokerConfig(lk, c.own, c.def); got != c.want {
			t.Errorf("own %v default %v: %d, want %d", c.own, c.def, got, c.want)
		}
	}
	// Kafka's unlimited is the throttle's 0; Kafka's 0 (stop) its least.
	for in, want := range map[int64]int64{math.MaxInt64: 0, 0: 1, 1: 1, 1 << 20: 1 << 20} {
		if got := throttleRate(in); got != want {
			t.Errorf("throttleRate(%d) = %d, want %d", in, got, want)
		}
	}
}

// In a cluster the rates are set for any broker id, registered or not,
// and for the cluster default, on the active controller through any
// broker; every broker describes its own and applies its effective rates
// to its throttle.
func TestClusterThrottleRateConfigs(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	tc.waitBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tc.client())

	// Broker 2's own rate (kadm routes it to broker 2, which forwards it
	// and answers once its metadata shows it), the cluster default, and
	// broker 7, not registered, through broker 1.
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: leaderRate, Value: kadm.StringPtr("1000000")}}, 2)); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: followerRate, Value: kadm.StringPtr("2000000")}})); err != nil {
		t.Fatal(err)
	}
	direct1 := tc.direct(0).Broker(1)
	if err := brokerAlter(ctx, direct1, "7", true, setOp(leaderRate, "7000")); err != nil {
		t.Fatal(err)
	}
	got := cfgDescribeBroker(t, ctx, tc.direct(1).Broker(2), "2")
	cfgWant(t, got[leaderRate], "1000000", kmsg.ConfigSourceDynamicBrokerConfig,
		leaderRate+"=1000000/DYNAMIC_BROKER_CONFIG", leaderRate+"="+unlimitedRate+"/DEFAULT_CONFIG")
	for i := range 3 {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d's rates", i+1), func() error {
			b := tc.broker(i)
			if n := b.meta.NodeConfigs(7)[leaderRate]; n != "7000" {
				return fmt.Errorf("broker 7's rate %q", n)
			}
			wantLeader := int64(0)
			if i == 1 {
				wantLeader = 1000000
			}
			if l, f := b.cl.throttleRates(); l != wantLeader || f != 2000000 {
				return fmt.Errorf("throttle rates %d %d, want %d 2000000", l, f, wantLeader)
			}
			return nil
		})
		def := cfgDescribeBroker(t, ctx, tc.direct(i).Broker(i+1), "")
		if def[followerRate].MaybeValue() != "2000000" || len(def) != 1 {
			t.Errorf("broker %d: the cluster default %+v", i+1, def)
		}
		own := cfgDescribeBroker(t, ctx, tc.direct(i).Broker(i+1), strconv.Itoa(i+1))
		if c := own[followerRate]; c.MaybeValue() != "2000000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Errorf("broker %d: follower rate %q from %v", i+1, c.MaybeValue(), c.Source)
		}
	}

	// Still refused: static keys, bad ids and values, describing
	// another broker.
	for _, c := range []struct {
		name string
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		code *kerr.Error
	}{
		{"2", setOp("log.retention.ms", "1000"), kerr.InvalidRequest},
		{"-1", setOp(leaderRate, "1"), kerr.InvalidRequest},
		{"x", setOp(leaderRate, "1"), kerr.InvalidRequest},
		{"3", setOp(leaderRate, "-5"), kerr.InvalidConfig},
	} {
		for _, incremental := range []bool{true, false} {
			if err := brokerAlter(ctx, direct1, c.name, incremental, c.op); !errIs(err, c.code) {
				t.Errorf("broker %q %s=%s (incremental %v): %v, want %v", c.name, c.op.Name, *c.op.Value, incremental, err, c.code)
			}
		}
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	req.Resources = append(req.Resources, rr)
	if kresp, err := direct1.Request(ctx, req); err != nil || kresp.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("broker 1 described broker 2: %v %+v", err, kresp)
	}

	// Deleted: unlimited again everywhere.
	if err := cfgAlterErr(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderRate}}, 2)); err != nil {
		t.Fatal(err)
	}
	if err := cfgAlterErr(adm.AlterBrokerConfigsState(ctx, nil)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d unlimited", i+1), func() error {
			b := tc.broker(i)
			if own, def := b.meta.NodeConfigs(2), b.meta.BrokerConfigs(); len(own) != 0 || len(def) != 0 {
				return fmt.Errorf("broker 2's configs %v, the default's %v", own, def)
			}
			if l, f := b.cl.throttleRates(); l != 0 || f != 0 {
				return fmt.Errorf("throttle rates %d %d", l, f)
			}
			return nil
		})
	}
}
