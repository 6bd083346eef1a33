package replica

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

const snapDir = "/p-0"

// idemBatch is one record from idempotent producer pid at epoch and seq,
// with record timestamp ts (ms).
func idemBatch(pid int64, epoch int16, seq int32, ts int64) []byte {
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, epoch, seq
	return batch.Build(o, []batch.Record{{Timestamp: ts, Value: make([]byte, 200)}})
}

// smallSegments is a topic config whose segments hold about two batches.
func smallSegments() TopicConfig {
	cfg := testConfig()
	cfg.Log.SegmentBytes = 600
	return cfg
}

type testClock struct{ ms atomic.Int64 }

func (c *testClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

// openAt opens the partition in snapDir on fs as a one-voter raft group
// (openVoter; its group state kept on fs, so a reopen, or a reopen of a
// crash clone of fs, resumes it).
func openAt(t *testing.T, fs vfs.FS, cfg TopicConfig, opts Options) *Partition {
	t.Helper()
	p, err := openVoter(t, fs, snapDir, cfg, opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func snapshotFiles(t *testing.T, fs vfs.FS) []int64 {
	t.Helper()
	offs, err := snapshots(fs, snapDir)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// removeProducer writes five batches of producer 7, then enough plain
// batches that its batches leave for closed segments, and removes those
// segments with remove. It returns the offset of producer 7's last batch.
func removeProducer(t *testing.T, p *Partition, remove func(p *Partition)) int64 {
	t.Helper()
	var last int64
	for seq := int32(0); seq < 5; seq++ {
		res, err := produce(t, p, idemBatch(7, 2, seq, 1000))
		if err != nil {
			t.Fatal(err)
		}
		last = res.BaseOffset
	}
	for i := 0; i < 6; i++ {
		if _, err := produce(t, p, idemBatch(-1, -1, -1, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	remove(p)
	if lso := p.LogStartOffset(); lso <= last {
		t.Fatalf("log start offset %d still holds producer 7's batch at %d", lso, last)
	}
	return last
}

// An idempotent producer whose batches DeleteRecords or retention removed
// is still known after a restart: a retry of its last batch is answered
// with the original offset and not written twice, an older epoch is
// fenced, a gap is refused and its next sequence accepted (Kafka keeps
// producer snapshots for this; without them the restarted partition took
// the retry as a new batch).
func TestProducerStateSurvivesRemovedBatches(t *testing.T) {
	for name, remove := range map[string]func(p *Partition){
		"DeleteRecords": func(p *Partition) {
			if _, err := p.DeleteRecords(-1); err != nil {
				t.Fatal(err)
			}
		},
		"retention": func(p *Partition) {
			cfg := p.Config()
			cfg.Log.RetentionBytes = 1
			if err := p.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := p.DeleteOldSegments(); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			p := openAt(t, fs, smallSegments(), Options{})
			last := removeProducer(t, p, remove)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			p = openAt(t, fs, smallSegments(), Options{})
			defer p.Close()
			leo := p.LogEndOffset()
			res, err := produce(t, p, idemBatch(7, 2, 4, 1000))
			if err != nil || res.BaseOffset != last {
				t.Fatalf("retry of the last batch: offset %d, %v; want the original %d", res.BaseOffset, err, last)
			}
			if got := p.LogEndOffset(); got != leo {
				t.Fatalf("the retry was written again: log end offset %d, was %d", got, leo)
			}
			if _, err := produce(t, p, idemBatch(7, 1, 5, 1000)); !errors.Is(err, ErrInvalidProducerEpoch) {
				t.Fatalf("an older epoch: %v, want ErrInvalidProducerEpoch", err)
			}
			if _, err := produce(t, p, idemBatch(7, 2, 7, 1000)); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("a gap: %v, want ErrOutOfOrderSequence", err)
			}
			if _, err := produce(t, p, idemBatch(7, 2, 5, 1000)); err != nil {
				t.Fatalf("the next sequence: %v", err)
			}
		})
	}
}

// The same after a crash: the snapshot written at the last roll carries
// the state, and one past what survived of the log is dropped.
func TestProducerStateAfterCrash(t *testing.T) {
	mem := vfs.NewMem()
	cfg := smallSegments()
	cfg.Log.FlushMessages = 1
	p := openAt(t, mem, cfg, Options{})
	last := removeProducer(t, p, func(p *Partition) {
		if _, err := p.DeleteRecords(-1); err != nil {
			t.Fatal(err)
		}
	})
	crashed := mem.CrashClone(vfs.CrashOptions{})
	p.Close()
	p = openAt(t, crashed, cfg, Options{})
	defer p.Close()
	res, err := produce(t, p, idemBatch(7, 2, 4, 1000))
	if err != nil || res.BaseOffset != last {
		t.Fatalf("retry after a crash: offset %d, %v; want the original %d", res.BaseOffset, err, last)
	}
}

// A snapshot above the log end offset (the log lost its unsynced tail) and
// one that fails its CRC are removed; Open falls back to older state.
func TestBadSnapshotsAreRemoved(t *testing.T) {
	fs := vfs.NewMem()
	p := openAt(t, fs, smallSegments(), Options{})
	for seq := int32(0); seq < 6; seq++ {
		if _, err := produce(t, p, idemBatch(3, 0, seq, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	offs := snapshotFiles(t, fs)
	if len(offs) < 2 {
		t.Fatalf("snapshots %v: want one per roll and one at close", offs)
	}
	newest := offs[len(offs)-1]
	// Corrupt the newest, and plant one past the end.
	f, err := fs.OpenReadWrite(filepath.Join(snapDir, snapshotName(newest)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := writeSnapshot(fs, snapDir, newest+1000, encodeSnapshot(producerState{}), 0); err != nil {
		t.Fatal(err)
	}
	p = openAt(t, fs, smallSegments(), Options{})
	defer p.Close()
	got := snapshotFiles(t, fs)
	for _, off := range got {
		if off >= newest {
			t.Fatalf("snapshots after open %v: the corrupt one at %d or the one past the end survived", got, newest)
		}
	}
	if _, err := produce(t, p, idemBatch(3, 0, 5, 1000)); err != nil {
		t.Fatalf("retry after falling back: %v", err)
	}
	if _, err := produce(t, p, idemBatch(3, 0, 9, 1000)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a gap after falling back: %v, want ErrOutOfOrderSequence (state rebuilt)", err)
	}
}

// Snapshots do not pile up: older ones than the log needs are removed.
func TestSnapshotsArePruned(t *testing.T) {
	fs := vfs.NewMem()
	p := openAt(t, fs, smallSegments(), Options{})
	defer p.Close()
	for i := 0; i < 40; i++ {
		if _, err := produce(t, p, idemBatch(5, 0, int32(i), 1000)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if _, err := p.DeleteRecords(-1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, segs := len(snapshotFiles(t, fs)), p.NumSegments(); n > segs+1 {
		t.Fatalf("%d snapshots for %d segments", n, segs)
	}
}

// producer.id.expiration.ms: a producer idle longer is forgotten, by
// ExpireProducers and by Open; forgotten, it may start at any sequence.
func TestProducerExpiration(t *testing.T) {
	var clock testClock
	clock.ms.Store(10_000)
	opts := Options{ProducerIDExpiration: time.Hour, Log: segment.Options{Now: clock.now}}
	fs := vfs.NewMem()
	p := openAt(t, fs, smallSegments(), opts)
	if _, err := produce(t, p, idemBatch(11, 0, 0, 10_000)); err != nil {
		t.Fatal(err)
	}
	if _, err := produce(t, p, idemBatch(12, 0, 0, 10_000+time.Hour.Milliseconds())); err != nil {
		t.Fatal(err)
	}
	clock.ms.Add(time.Hour.Milliseconds() - 1)
	if n := p.ExpireProducers(); n != 0 {
		t.Fatalf("expired %d producers a millisecond early", n)
	}
	clock.ms.Add(1)
	if n := p.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d producers, want producer 11", n)
	}
	if _, err := produce(t, p, idemBatch(11, 0, 40, clock.ms.Load())); err != nil {
		t.Fatalf("an expired producer at any sequence: %v", err)
	}
	if _, err := produce(t, p, idemBatch(12, 0, 40, clock.ms.Load())); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a live producer's gap: %v", err)
	}
	p.Close()
	clock.ms.Add(2 * time.Hour.Milliseconds())
	p = openAt(t, fs, smallSegments(), opts)
	defer p.Close()
	if _, err := produce(t, p, idemBatch(12, 0, 40, clock.ms.Load())); err != nil {
		t.Fatalf("producer 12, expired while the partition was closed: %v", err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	ps := producerState{}
	for i := 0; i < 7; i++ {
		h := batch.Header{ProducerID: 100, ProducerEpoch: 3, BaseSequence: int32(i * 2), LastOffsetDelta: 1, BaseOffset: int64(i * 2), MaxTimestamp: int64(i)}
		ps.record(&h, -1)
	}
	h := batch.Header{ProducerID: -5 + 10, ProducerEpoch: 0, BaseSequence: 0, BaseOffset: 99, MaxTimestamp: 7}
	ps.record(&h, 1234)
	got, err := decodeSnapshot(encodeSnapshot(ps))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ps) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, ps)
	}
	b := encodeSnapshot(ps)
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if _, err := decodeSnapshot(c); !errors.Is(err, errBadSnapshot) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := decodeSnapshot(b[:len(b)-1]); !errors.Is(err, errBadSnapshot) {
		t.Fatalf("cut short: %v", err)
	}
}

// FuzzDecodeSnapshot: decoding never panics; whatever decodes re-encodes
// to the same bytes.
func FuzzDecodeSnapshot(f *testing.F) {
	ps := producerState{}
	h := batch.Header{ProducerID: 1, BaseSequence: 0, MaxTimestamp: 5}
	ps.record(&h, -1)
	f.Add(encodeSnapshot(ps))
	f.Add(encodeSnapshot(producerState{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, aborted, err := decodeSnapshotTxn(b)
		if err != nil || binary.BigEndian.Uint16(b[4:]) == 1 {
			return // a version 1 snapshot re-encodes as a later version
		}
		if got := encodeSnapshotVersion(ps, aborted, binary.BigEndian.Uint16(b[4:])); !reflect.DeepEqual(got, b) {
			t.Fatalf("re-encoded differently")
		}
	})
}
