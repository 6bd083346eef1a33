package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testConfig is DefaultConfig for a test: no initial rebalance delay.
func testConfig(partitions int32, topics Topics, clk Clock) Config {
	c := DefaultConfig()
	c.Partitions, c.Topics, c.InitialRebalanceDelay = partitions, topics, 0
	if clk != nil {
		c.Clock = clk
	}
	return c
}

func withRebalanceDelay(c Config, d time.Duration) Config {
	c.InitialRebalanceDelay = d
	return c
}

// TestZeroMeansZero: the options where Kafka allows zero keep it.
func TestZeroMeansZero(t *testing.T) {
	c := Config{}
	c.EnsureDefaults()
	if c.InitialRebalanceDelay != 0 || c.MinSessionTimeout != 0 || c.MaxSessionTimeout != 0 || c.OffsetMetadataMaxBytes != 0 {
		t.Errorf("zero options changed: %+v", c)
	}
	d := DefaultConfig()
	if c.Partitions != d.Partitions || c.GroupMaxSize != d.GroupMaxSize || c.OffsetsRetention != d.OffsetsRetention ||
		c.ConsumerSessionTimeout != d.ConsumerSessionTimeout || c.Clock == nil || c.Logger == nil {
		t.Errorf("options that must be at least 1 not filled: %+v", c)
	}
}

// TestOffsetMetadataMaxBytesZero: offset.metadata.max.bytes=0 refuses any
// non-empty metadata with OFFSET_METADATA_TOO_LARGE, and takes empty.
func TestOffsetMetadataMaxBytesZero(t *testing.T) {
	clk := newManualClock()
	cfg := testConfig(1, testTopics, clk)
	cfg.OffsetMetadataMaxBytes = 0
	c := New(cfg)
	defer c.Close()
	if err := c.Load(0, &memLog{}); err != nil {
		t.Fatal(err)
	}
	for meta, want := range map[string]int16{"x": kerr.OffsetMetadataTooLarge.Code, "": 0} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.Metadata = 1, &meta
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.OffsetCommit(context.Background(), req)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("metadata %q: error %d, want %d", meta, got, want)
		}
	}
}

// TestSessionTimeoutBoundsZero: group.min.session.timeout.ms=0 admits a
// session timeout below Kafka's default minimum (6 s), and
// group.max.session.timeout.ms=0 refuses every positive one.
func TestSessionTimeoutBoundsZero(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		min, max time.Duration
		session  int32
		want     int16
	}{
		{0, 30 * time.Minute, 1000, 0},
		{0, 30 * time.Minute, 0, 0},
		{6 * time.Second, 30 * time.Minute, 1000, kerr.InvalidSessionTimeout.Code},
		{0, 0, 1000, kerr.InvalidSessionTimeout.Code},
	} {
		cfg := testConfig(1, testTopics, newManualClock())
		cfg.MinSessionTimeout, cfg.MaxSessionTimeout = c.min, c.max
		co := New(cfg)
		if err := co.Load(0, &memLog{}); err != nil {
			t.Fatal(err)
		}
		req := classicJoinReq(3, "")
		req.SessionTimeoutMillis = c.session
		if jr := co.JoinGroup(ctx, req); jr.ErrorCode != c.want {
			t.Errorf("min %v max %v session %d ms: error %v, want %v", c.min, c.max, c.session,
				kerr.ErrorForCode(jr.ErrorCode), kerr.ErrorForCode(c.want))
		}
		co.Close()
	}
}
