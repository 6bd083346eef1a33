package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/replica"
)

// The sluice.raft.* defaults are replica.HostConfig's own.
func TestRaftHostConfigDefaults(t *testing.T) {
	c := Default()
	got := c.RaftHostConfig()
	want := replica.HostConfig{NodeID: 1}
	want.EnsureDefaults()
	want.Logger, want.Now = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for k, v := range map[string]string{
		"sluice.raft.tick.ms": "100", "sluice.raft.election.ticks": "10", "sluice.raft.heartbeat.ticks": "1",
		"sluice.raft.prevote.enable": "true", "sluice.raft.check.quorum.enable": "true", "sluice.raft.quiesce.enable": "true",
		"sluice.raft.quiesce.ticks": "2", "sluice.raft.liveness.interval.ms": "250", "sluice.raft.liveness.timeout.ms": "1000",
		"sluice.raft.workers": "2", "sluice.raft.max.batch.groups": "64",
	} {
		if s, _ := c.String(k); s != v {
			t.Errorf("%s = %q, want %q", k, s, v)
		}
	}
	for _, k := range []string{"controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms"} {
		if slices.Contains(Keys(), k) {
			t.Errorf("%s is a key (raft ticks cover it)", k)
		}
	}
}

func TestRaftHostConfig(t *testing.T) {
	c, err := Load("", node(3,
		"sluice.raft.tick.ms=50", "sluice.raft.election.ticks=20", "sluice.raft.heartbeat.ticks=2",
		"sluice.raft.prevote.enable=false", "sluice.raft.check.quorum.enable=TRUE", "sluice.raft.quiesce.enable=false",
		"sluice.raft.quiesce.ticks=5", "sluice.raft.liveness.interval.ms=100", "sluice.raft.liveness.timeout.ms=600",
		"sluice.raft.workers=8", "sluice.raft.max.batch.groups=16"))
	if err != nil {
		t.Fatal(err)
	}
	want := replica.HostConfig{
		NodeID: 3, Workers: 8, ElectionTicks: 20, HeartbeatTicks: 2, TickInterval: 50 * time.Millisecond,
		DisablePreVote: true, DisableQuiescence: true, QuiesceTicks: 5,
		LivenessInterval: 100 * time.Millisecond, LivenessTimeout: 600 * time.Millisecond, MaxBatch: 16,
	}
	if got := c.RaftHostConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// What the config accepts, the host accepts.
	h := c.RaftHostConfig()
	h.Transport, h.HardState = struct{ replica.Transport }{}, struct{ replica.HardStateStore }{}
	h.EnsureDefaults()
	if err := h.Validate(); err != nil {
		t.Error(err)
	}
}

func TestRaftValidation(t *testing.T) {
	for _, tc := range []struct {
		sets    []string
		key     string
		wantErr string
	}{
		{[]string{"sluice.raft.tick.ms=0"}, "sluice.raft.tick.ms", "must be >= 1"},
		{[]string{"sluice.raft.election.ticks=1"}, "sluice.raft.election.ticks", "must be >= 2"},
		{[]string{"sluice.raft.heartbeat.ticks=0"}, "sluice.raft.heartbeat.ticks", "must be >= 1"},
		{[]string{"sluice.raft.heartbeat.ticks=10"}, "sluice.raft.election.ticks", "must exceed sluice.raft.heartbeat.ticks (10)"},
		{[]string{"sluice.raft.election.ticks=3", "sluice.raft.heartbeat.ticks=4"}, "sluice.raft.election.ticks", "must exceed sluice.raft.heartbeat.ticks (4)"},
		{[]string{"sluice.raft.election.ticks=3", "sluice.raft.heartbeat.ticks=1"}, "sluice.raft.election.ticks", "leaves a leader no read lease"},
		{[]string{"sluice.raft.tick.ms=2000"}, "sluice.raft.election.ticks", "leaves a leader no read lease"},
		{[]string{"sluice.raft.check.quorum.enable=false", "sluice.raft.quiesce.enable=false", "node.id=1", "process.roles=broker,controller", "controller.quorum.voters=1@127.0.0.1:9093", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "sluice.raft.check.quorum.enable", "rests on CheckQuorum"},
		{[]string{"sluice.raft.quiesce.ticks=0"}, "sluice.raft.quiesce.ticks", "must be >= 1"},
		{[]string{"sluice.raft.liveness.interval.ms=0"}, "sluice.raft.liveness.interval.ms", "must be >= 1"},
		{[]string{"sluice.raft.liveness.timeout.ms=250"}, "sluice.raft.liveness.timeout.ms", "must exceed sluice.raft.liveness.interval.ms (250)"},
		{[]string{"sluice.raft.liveness.interval.ms=2000"}, "sluice.raft.liveness.timeout.ms", "must exceed sluice.raft.liveness.interval.ms (2000)"},
		{[]string{"sluice.raft.workers=0"}, "sluice.raft.workers", "must be in [1, 1024]"},
		{[]string{"sluice.raft.workers=1025"}, "sluice.raft.workers", "must be in [1, 1024]"},
		{[]string{"sluice.raft.max.batch.groups=0"}, "sluice.raft.max.batch.groups", "must be >= 1"},
		{[]string{"sluice.raft.prevote.enable=no"}, "sluice.raft.prevote.enable", "must be true or false"},
		{[]string{"sluice.raft.prevote.enable=false"}, "sluice.raft.quiesce.enable", "quiescence needs sluice.raft.prevote.enable and sluice.raft.check.quorum.enable"},
		{[]string{"sluice.raft.check.quorum.enable=false"}, "sluice.raft.quiesce.enable", "quiescence needs"},
		{[]string{"sluice.raft.tick.ms=2147483648"}, "sluice.raft.tick.ms", "must be an integer in [1, 2147483647]"},
	} {
		_, err := Load("", tc.sets)
		if err == nil {
			t.Errorf("%q accepted", tc.sets)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantErr) || !slices.Contains(problems(t, err), tc.key) {
			t.Errorf("%q: %v\nwant %s: %q", tc.sets, err, tc.key, tc.wantErr)
		}
	}
	// Quiescence off, PreVote and CheckQuorum may be off too.
	if _, err := Load("", []string{"sluice.raft.quiesce.enable=false", "sluice.raft.prevote.enable=false", "sluice.raft.check.quorum.enable=false"}); err != nil {
		t.Error(err)
	}
}
