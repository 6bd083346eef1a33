package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// kv is one keyed record of the compaction model.
type kv struct {
	off int64
	key string
	val []byte // nil: a tombstone
	at  int64  // the clock (ms) when it was appended
}

// compactModel is what the compaction crash tests know the log must hold.
type compactModel struct {
	recs      []kv // the log's records in offset order, as appended or recovered
	ever      map[int64]kv
	syncedEnd int64 // every record below it was synced
}

const compactRetentionMs = 5000

func compactConfig(rng *rand.Rand) Config {
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.RetentionMs = -1
	cfg.SegmentBytes = int64(250 + rng.IntN(600))
	cfg.IndexIntervalBytes = rng.IntN(300)
	cfg.SegmentIndexBytes = 12 * (4 + rng.IntN(40))
	cfg.CleanupPolicy = PolicyCompact
	cfg.DeleteRetentionMs = compactRetentionMs
	cfg.MinCleanableDirtyRatio = 0
	return cfg
}

// compactWorkload runs steps random operations: keyed appends (some
// tombstones, some compressed), syncs, rolls, cleans and clock advances.
// It stops early, returning false, once an operation fails.
func compactWorkload(t *testing.T, rng *rand.Rand, l *Log, m *compactModel, clock *testClock, steps int) bool {
	for step := 0; step < steps; step++ {
		var err error
		switch op := rng.IntN(100); {
		case op < 55:
			n := 1 + rng.IntN(3)
			recs := make([]batch.Record, n)
			now := clock.Now().UnixMilli()
			leo := l.LogEndOffset()
			for i := range recs {
				recs[i] = batch.Record{Timestamp: now, Key: []byte(fmt.Sprintf("k%d", rng.IntN(12)))}
				if rng.IntN(7) != 0 {
					recs[i].Value = []byte(fmt.Sprintf("v%d-%d", leo+int64(i), rng.IntN(1000)))
				}
			}
			opts := batch.NewBuildOptions()
			if rng.IntN(4) == 0 {
				opts.Codec = batch.CodecGzip
			}
			var off int64
			if off, err = l.Append(batch.Build(opts, recs)); err == nil {
				for i, r := range recs {
					k := kv{off + int64(i), string(r.Key), r.Value, now}
					m.recs = append(m.recs, k)
					m.ever[k.off] = k
				}
			}
		case op < 70:
			leo := l.LogEndOffset()
			if err = l.Sync(); err == nil {
				m.syncedEnd = leo
			}
		case op < 75:
			err = l.Roll()
		case op < 90:
			_, err = l.Clean(NoUpperBound)
		default:
			clock.Add(1500 * 1e6)
		}
		if err != nil {
			if !errors.Is(err, vfs.ErrInjected) && !errors.Is(err, ErrFailed) {
				t.Fatalf("step %d: %v", step, err)
			}
			return false
		}
	}
	return true
}

// readRecords returns every record of the log, checking that offsets
// strictly increase.
func readRecords(t *testing.T, l *Log) []kv {
	t.Helper()
	var out []kv
	for _, b := range readBatches(t, l) {
		_, recs, _ := batch.Records(b.data) // checked by readBatches
		for _, r := range recs {
			if len(out) > 0 && r.Offset <= out[len(out)-1].off {
				t.Fatalf("offset %d after %d", r.Offset, out[len(out)-1].off)
			}
			out = append(out, kv{off: r.Offset, key: string(r.Key), val: r.Value})
		}
	}
	return out
}

// checkCompacted verifies a recovered (or live) log against the model and
// returns its records.
func checkCompacted(t *testing.T, l *Log, m *compactModel, nowMs int64, where string) []kv {
	t.Helper()
	got := readRecords(t, l)
	for i, g := range got {
		want, ok := m.ever[g.off]
		if !ok || want.key != g.key || !bytes.Equal(want.val, g.val) || (want.val == nil) != (g.val == nil) {
			t.Fatalf("%s: record at offset %d (%s=%q) was never appended there", where, g.off, g.key, g.val)
		}
		got[i].at = want.at
	}
	// The latest synced record of each key is there, and nothing older
	// than it of that key shows through (a tombstone may go once
	// delete.retention.ms has passed since it was appended).
	latest := map[string]kv{}
	for _, r := range m.recs {
		if r.off < m.syncedEnd {
			latest[r.key] = r
		}
	}
	for key, want := range latest {
		var last *kv
		for i := range got {
			if got[i].key == key && got[i].off <= want.off {
				last = &got[i]
			}
		}
		switch {
		case want.val != nil && (last == nil || last.off != want.off):
			t.Fatalf("%s: key %s: latest synced value at offset %d lost (found %v)", where, key, want.off, last)
		case want.val == nil && last != nil && last.off != want.off:
			t.Fatalf("%s: key %s: an older value at %d shows through the tombstone at %d", where, key, last.off, want.off)
		case want.val == nil && last == nil && nowMs-want.at < compactRetentionMs:
			t.Fatalf("%s: key %s: tombstone at %d dropped before delete.retention.ms", where, key, want.off)
		}
	}
	// Below the cleaner offset no key appears twice.
	l.mu.RLock()
	fd := l.firstDirty
	l.mu.RUnlock()
	seen := map[string]int64{}
	for _, g := range got {
		if g.off >= fd {
			break
		}
		if prev, ok := seen[g.key]; ok {
			t.Fatalf("%s: key %s at %d and %d, both below the cleaner offset %d", where, g.key, prev, g.off, fd)
		}
		seen[g.key] = g.off
	}
	return got
}

// afterRecovery makes the recovered log the model's truth and syncs it.
func afterRecovery(t *testing.T, l *Log, m *compactModel, got []kv) {
	t.Helper()
	m.recs = got
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	m.syncedEnd = l.LogEndOffset()
}

func openCompact(fs vfs.FS, cfg Config, clock *testClock) (*Log, error) {
	return Open(fs, "/data/c-0", cfg, Options{Now: clock.Now, Logger: quietLogger(), noFlusher: true})
}

// TestCleanCrashRandom interleaves appends, syncs, rolls and cleans, and
// crashes (with torn tails) at random points, sometimes after an injected
// IO error.
func TestCleanCrashRandom(t *testing.T) {
	seeds := 80
	if testing.Short() {
		seeds = 20
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0xc1ea))
			mem, clock := vfs.NewMem(), newClock()
			cfg := compactConfig(rng)
			var fs vfs.FS = mem
			if rng.IntN(3) == 0 {
				ops := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpCreate, vfs.OpRemove}
				fs = vfs.NewErrorFS(mem, vfs.OnOp(ops[rng.IntN(len(ops))], "", 5+rng.IntN(300)))
			}
			m := &compactModel{ever: map[int64]kv{}}
			l, err := openCompact(fs, cfg, clock)
			if err != nil {
				t.Fatal(err)
			}
			for crash := 0; crash < 3; crash++ {
				if compactWorkload(t, rng, l, m, clock, 30+rng.IntN(120)) {
					checkCompacted(t, l, m, clock.Now().UnixMilli(), "live")
				}
				crashed := mem.CrashClone(vfs.CrashOptions{Rand: rng})
				l.Close()
				mem, fs = crashed, crashed
				if l, err = openCompact(fs, cfg, clock); err != nil {
					t.Fatalf("reopen after crash %d: %v", crash, err)
				}
				afterRecovery(t, l, m, checkCompacted(t, l, m, clock.Now().UnixMilli(), fmt.Sprintf("crash %d", crash)))
			}
			l.Close()
		})
	}
}

// TestCleanCrashEveryOp crashes at each mutating file operation of a
// clean in turn (replaying the same workload each time) and checks the
// recovered log, then cleans it again.
func TestCleanCrashEveryOp(t *testing.T) {
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	mutating := map[vfs.Op]bool{vfs.OpCreate: true, vfs.OpRemove: true, vfs.OpRename: true, vfs.OpSyncDir: true,
		vfs.OpWrite: true, vfs.OpTruncate: true, vfs.OpSync: true}
	for seed := 1; seed <= seeds; seed++ {
		for crashAt := 1; ; crashAt++ {
			var (
				armed   bool
				count   int
				crashed *vfs.MemFS
				mem     = vfs.NewMem()
			)
			inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
				if !armed || !mutating[op] {
					return nil
				}
				if count++; count == crashAt {
					crashed = mem.CrashClone(vfs.CrashOptions{})
					return fmt.Errorf("%w: crash here", vfs.ErrInjected)
				}
				return nil
			})
			rng := rand.New(rand.NewPCG(uint64(seed), 0xe7e7))
			clock := newClock()
			cfg := compactConfig(rng)
			m := &compactModel{ever: map[int64]kv{}}
			l, err := openCompact(vfs.NewErrorFS(mem, inj), cfg, clock)
			if err != nil {
				t.Fatal(err)
			}
			if !compactWorkload(t, rng, l, m, clock, 150) {
				t.Fatalf("seed %d: workload failed without injection", seed)
			}
			// Make the last segments cleanable, then clean with a crash.
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			leo := l.LogEndOffset()
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			m.syncedEnd = leo
			clock.Add(compactRetentionMs * 1e6)
			armed = true
			st, err := l.Clean(NoUpperBound)
			armed = false
			l.Close()
			if crashed == nil {
				if err != nil {
					t.Fatalf("seed %d: clean: %v", seed, err)
				}
				t.Logf("seed %d: a clean of %d segments has %d mutating operations", seed, st.Segments, count)
				break
			}
			where := fmt.Sprintf("seed %d crash at op %d", seed, crashAt)
			if crashAt%3 == 1 {
				// The same crash with log.checkpoint lost (every third
				// point, to stay cheap): recovery rescans everything and
				// keeps the cleaned segments.
				noCkpt := crashed.CrashClone(vfs.CrashOptions{})
				if err := noCkpt.Remove("/data/c-0/" + CheckpointName); err != nil {
					t.Fatal(err)
				}
				if l, err = openCompact(noCkpt, cfg, clock); err != nil {
					t.Fatalf("%s, no checkpoint: reopen: %v", where, err)
				}
				checkCompacted(t, l, m, clock.Now().UnixMilli(), where+", no checkpoint")
				if l.LogEndOffset() != leo {
					t.Fatalf("%s, no checkpoint: log end offset %d, want %d", where, l.LogEndOffset(), leo)
				}
				l.Close()
			}
			l, err = openCompact(crashed, cfg, clock)
			if err != nil {
				t.Fatalf("%s: reopen: %v", where, err)
			}
			afterRecovery(t, l, m, checkCompacted(t, l, m, clock.Now().UnixMilli(), where))
			if _, err := l.Clean(NoUpperBound); err != nil {
				t.Fatalf("%s: clean after recovery: %v", where, err)
			}
			checkCompacted(t, l, m, clock.Now().UnixMilli(), where+", cleaned again")
			l.Close()
		}
	}
}
