package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

func testConfig() TopicConfig {
	return TopicConfig{Log: segment.DefaultConfig(), MaxMessageBytes: 1 << 20, KeepProducerCodec: true, MinInsyncReplicas: 1}
}

// openTest opens a partition as a one-voter raft group (openVoter) on a
// new MemFS, closed when the test ends.
func openTest(t *testing.T, cfg TopicConfig, opts Options) *Partition {
	t.Helper()
	p, err := openVoter(t, vfs.NewMem(), "/p-0", cfg, opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func build(recs ...batch.Record) []byte { return batch.Build(batch.NewBuildOptions(), recs) }

func produce(t *testing.T, p *Partition, b []byte) (segment.AppendResult, error) {
	t.Helper()
	pd, err := p.Produce(b)
	if err != nil {
		return segment.AppendResult{}, err
	}
	return pd.Wait(context.Background())
}

// Every LogValidator rule the partition applies refuses with its error and
// stores nothing.
func TestProduceValidation(t *testing.T) {
	compact := testConfig()
	compact.Log.CleanupPolicy = segment.PolicyCompact
	small := testConfig()
	small.MaxMessageBytes = 100
	two := append(build(batch.Record{Value: []byte("a")}), build(batch.Record{Value: []byte("b")})...)
	copts := batch.NewBuildOptions()
	copts.Control = true
	control := batch.Build(copts, []batch.Record{{Value: []byte("a")}})
	horizon := build(batch.Record{Value: []byte("a")})
	horizon[22] |= batch.DeleteHorizonBit
	magic1 := build(batch.Record{Value: []byte("a")})
	magic1[16] = 1
	baseOffset5 := build(batch.Record{Value: []byte("a")})
	binary.BigEndian.PutUint64(baseOffset5[batch.OffBaseOffset:], 5) // not covered by the CRC
	withCount := func(n uint32) []byte {
		b := build(batch.Record{Value: []byte("a")})
		binary.BigEndian.PutUint32(b[batch.OffRecordCount:], n)
		binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.Checksum(b))
		return b
	}
	for _, tc := range []struct {
		name string
		cfg  TopicConfig
		b    []byte
		want error
	}{
		{"short", testConfig(), []byte{1, 2, 3}, segment.ErrCorrupt},
		{"magic 1", testConfig(), magic1, ErrInvalidRecord},
		{"empty", testConfig(), []byte{}, ErrInvalidRecord},
		{"base offset 5", testConfig(), baseOffset5, ErrInvalidRecord},
		{"record count 0", testConfig(), withCount(0), ErrInvalidRecord},
		{"count disagrees with lastOffsetDelta", testConfig(), withCount(5), ErrInvalidRecord},
		{"two batches", testConfig(), two, ErrInvalidRecord},
		{"control", testConfig(), control, ErrInvalidRecord},
		{"delete horizon", testConfig(), horizon, ErrInvalidRecord},
		{"too large", small, build(batch.Record{Value: make([]byte, 200)}), ErrRecordTooLarge},
		{"no key on compacted", compact, build(batch.Record{Key: []byte("k"), Value: []byte("a")}, batch.Record{Value: []byte("b")}), ErrInvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := openTest(t, tc.cfg, Options{})
			if _, err := produce(t, p, tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if p.LogEndOffset() != 0 || p.HighWatermark() != 0 {
				t.Fatalf("stored: LEO %d HW %d", p.LogEndOffset(), p.HighWatermark())
			}
		})
	}
}

// compression.type naming a codec stores batches with it; a config change
// applies to the next Produce.
func TestProduceRecompressesAndFollowsConfig(t *testing.T) {
	cfg := testConfig()
	cfg.KeepProducerCodec, cfg.Compression = false, batch.CodecZstd
	p := openTest(t, cfg, Options{})
	if _, err := produce(t, p, build(batch.Record{Value: []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")})); err != nil {
		t.Fatal(err)
	}
	cfg.KeepProducerCodec = true
	cfg.LogAppendTime = true
	if err := p.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	res, err := produce(t, p, build(batch.Record{Timestamp: 5, Value: []byte("b")}))
	if err != nil || res.BaseOffset != 1 || res.LogAppendTime < 0 {
		t.Fatalf("%+v %v", res, err)
	}
	data, _, err := p.ReadBytes(nil, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h0, _ := batch.ParseHeader(data)
	h1, _ := batch.ParseHeader(data[h0.Size():])
	if h0.Codec() != batch.CodecZstd || h1.Codec() != batch.CodecNone || !h1.LogAppendTime() {
		t.Fatalf("codecs %d %d, LogAppendTime %v", h0.Codec(), h1.Codec(), h1.LogAppendTime())
	}
}

// An internal topic's partition takes the broker's own appends only.
func TestInternalPartition(t *testing.T) {
	p := openTest(t, testConfig(), Options{Internal: true})
	if _, err := produce(t, p, build(batch.Record{Key: []byte("k")})); !errors.Is(err, ErrInternalTopic) {
		t.Fatalf("produce: %v", err)
	}
	if _, err := p.Append(context.Background(), build(batch.Record{Key: []byte("k")}), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(1); !errors.Is(err, ErrInternalTopic) {
		t.Fatalf("delete records: %v", err)
	}
}

// DeleteRecords is bounded by the high watermark.
func TestDeleteRecords(t *testing.T) {
	p := openTest(t, testConfig(), Options{})
	for range 3 {
		if _, err := produce(t, p, build(batch.Record{Value: []byte("v")})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.DeleteRecords(4); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the high watermark: %v", err)
	}
	if lso, err := p.DeleteRecords(2); err != nil || lso != 2 {
		t.Fatalf("lso %d %v", lso, err)
	}
	if lso, err := p.DeleteRecords(-1); err != nil || lso != 3 {
		t.Fatalf("lso %d %v", lso, err)
	}
}

// max.message.bytes holds for the batch as stored: a batch that fits as
// sent but not once recompressed to the topic's compression.type is
// refused (Kafka re-checks the size after recompression, UnifiedLog's
// messageSizeMaybeChanged), and nothing is stored.
func TestProduceTooLargeAfterRecompression(t *testing.T) {
	cfg := testConfig()
	cfg.KeepProducerCodec, cfg.Compression = false, batch.CodecNone
	cfg.MaxMessageBytes = 1000
	opts := batch.NewBuildOptions()
	opts.Codec = batch.CodecGzip
	b := batch.Build(opts, []batch.Record{{Value: make([]byte, 4000)}})
	if len(b) > cfg.MaxMessageBytes {
		t.Fatalf("the gzip batch is %d bytes: the test needs it under %d", len(b), cfg.MaxMessageBytes)
	}
	p := openTest(t, cfg, Options{})
	if _, err := produce(t, p, b); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("err %v, want %v", err, ErrRecordTooLarge)
	}
	if p.LogEndOffset() != 0 {
		t.Fatalf("stored: LEO %d", p.LogEndOffset())
	}
}

// DeleteRecords on a compact-only topic is POLICY_VIOLATION; compact,delete
// allows it (Kafka's Partition.deleteRecordsOnLeader).
func TestDeleteRecordsCompactOnly(t *testing.T) {
	cfg := testConfig()
	cfg.Log.CleanupPolicy = segment.PolicyCompact
	p := openTest(t, cfg, Options{})
	if _, err := produce(t, p, build(batch.Record{Key: []byte("k"), Value: []byte("v")})); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(1); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("compact: %v", err)
	}
	cfg.Log.CleanupPolicy = segment.PolicyCompactDelete
	if err := p.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if lso, err := p.DeleteRecords(1); err != nil || lso != 1 {
		t.Fatalf("compact,delete: %d %v", lso, err)
	}
}

// A producer the partition has no state for may start at any sequence
// (KIP-360); from there its sequences must follow on.
func TestUnknownProducerAnySequence(t *testing.T) {
	p := openTest(t, testConfig(), Options{})
	idem := func(seq int32) []byte {
		o := batch.NewBuildOptions()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence = 9, 0, seq
		return batch.Build(o, []batch.Record{{Value: []byte("v")}})
	}
	if _, err := produce(t, p, idem(42)); err != nil {
		t.Fatalf("first batch at sequence 42: %v", err)
	}
	if _, err := produce(t, p, idem(44)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a gap after it: %v", err)
	}
	if _, err := produce(t, p, idem(43)); err != nil {
		t.Fatalf("the next sequence: %v", err)
	}
}

// KIP-320: a newer current leader epoch is unknown, an older one fenced,
// -1 is not checked. The partition's epoch is its leader's raft term.
func TestCheckLeaderEpoch(t *testing.T) {
	p, err := openVoter(t, vfs.NewMem(), "/p-0", testConfig(), Options{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if e := p.LeaderEpoch(); e != 3 {
		t.Fatalf("leader epoch %d, want 3", e)
	}
	for _, tc := range []struct {
		current int32
		want    error
	}{{-1, nil}, {3, nil}, {4, ErrUnknownLeaderEpoch}, {2, ErrFencedLeaderEpoch}} {
		if err := p.CheckLeaderEpoch(tc.current); !errors.Is(err, tc.want) {
			t.Errorf("current %d: %v, want %v", tc.current, err, tc.want)
		}
	}
}
