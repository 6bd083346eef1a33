package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Cleans running against appends, syncs, retention, DeleteRecordsBefore
// and truncations either succeed or return ErrCleanAborted, never a raw
// read error that looks like on-disk damage; the log reopens (and
// recovers from a crash) with what it held. Run with -race: it also
// covers the pending-delete timer (file.delete.delay.ms > 0).
func TestCleanConcurrentWithLogChanges(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := 1; seed <= seeds; seed++ {
		cfg := testConfig()
		cfg.CleanupPolicy = PolicyCompact + "," + PolicyDelete
		cfg.SegmentBytes = 300
		cfg.RetentionMs = -1
		cfg.RetentionBytes = 6000
		cfg.MinCleanableDirtyRatio = 0
		if seed%2 == 0 {
			cfg.FileDeleteDelayMs = 20
		}
		mem := vfs.NewMem()
		clock := newClock()
		l, err := Open(mem, "/p/c-0", cfg, Options{Now: clock.Now, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		var aborted atomic.Int64
		check := func(what string, err error) {
			if errors.Is(err, ErrCleanAborted) {
				aborted.Add(1)
				return
			}
			if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Errorf("seed %d %s: %v", seed, what, err)
			}
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := l.Clean(NoUpperBound)
				check("clean", err)
			}
		}()
		go func() {
			defer wg.Done()
			defer stop.Store(true)
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			for i := 0; i < 1000; i++ {
				switch op := rng.IntN(100); {
				case op < 70:
					rec := batch.Record{Timestamp: clock.Now().UnixMilli(), Key: []byte(fmt.Sprintf("k%d", rng.IntN(10))), Value: []byte(fmt.Sprintf("v%d", i))}
					if rng.IntN(8) == 0 {
						rec.Value = nil
					}
					_, err := l.Append(batch.Build(batch.NewBuildOptions(), []batch.Record{rec}))
					check("append", err)
				case op < 85:
					check("sync", l.Sync())
				case op < 90:
					_, err := l.DeleteOldSegments()
					check("retention", err)
				case op < 95:
					if lso, leo := l.LogStartOffset(), l.LogEndOffset(); leo > lso {
						_, err := l.DeleteRecordsBefore(lso + rng.Int64N(leo-lso))
						check("delete records", err)
					}
				case op < 97:
					if lso, leo := l.LogStartOffset(), l.LogEndOffset(); leo > lso {
						_, err := l.TruncateTo(lso + rng.Int64N(leo-lso))
						check("truncate", err)
					}
				default:
					clock.Add(1e9)
				}
			}
		}()
		wg.Wait()
		if _, err := l.Clean(NoUpperBound); err != nil {
			t.Errorf("seed %d final clean: %v", seed, err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		leo, n := l.LogEndOffset(), len(readAll(t, l, l.LogStartOffset()))
		crash := mem.CrashClone(vfs.CrashOptions{})
		if err := l.Close(); err != nil {
			t.Errorf("seed %d close: %v", seed, err)
		}
		for _, fs := range []*vfs.MemFS{mem, crash} {
			l2, err := Open(fs, "/p/c-0", cfg, Options{Now: clock.Now, Logger: quietLogger()})
			if err != nil {
				t.Fatalf("seed %d reopen: %v", seed, err)
			}
			if got := len(readAll(t, l2, l2.LogStartOffset())); l2.LogEndOffset() != leo || got != n {
				t.Errorf("seed %d reopen: log end offset %d (want %d), %d batches (want %d)", seed, l2.LogEndOffset(), leo, got, n)
			}
			l2.Close()
		}
		t.Logf("seed %d: %d cleans aborted", seed, aborted.Load())
	}
}
