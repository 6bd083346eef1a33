package server

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The configs of replication throttles (KIP-73): the topic configs
// leader.replication.throttled.replicas and
// follower.replication.throttled.replicas.

const (
	leaderReplicas   = "leader.replication.throttled.replicas"
	followerReplicas = "follower.replication.throttled.replicas"
)

func throttledListReason(key string) string {
	return key + " must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
}

// The throttled replicas lists are topic configs: validated as Kafka
// does at creation and on every alter (APPEND and SUBTRACT included),
// described in canonical form with no broker synonym, and without effect
// on the partition's own settings.
func TestThrottledReplicasTopicConfigs(t *testing.T) {
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
