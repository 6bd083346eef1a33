package segment

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// TestCleanWhileReading: readers scanning the whole log while the cleaner
// swaps segments under them always see a consistent log: offsets strictly
// increase, every record read is exactly one that was written at that
// offset, and the latest version of every key written before the read
// began is there (at its offset or a later one).
func TestCleanWhileReading(t *testing.T) {
	cfg := DefaultConfig() // file.delete.delay.ms 60 s: handed-out ranges stay valid
	cfg.CleanupPolicy = PolicyCompact
	cfg.SegmentBytes = 1024
	cfg.MinCleanableDirtyRatio = 0
	l, err := Open(vfs.NewMem(), "/r/t-0", cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	var mu sync.Mutex
	written := map[int64]string{} // offset -> "key=value"
	latest := map[string]int64{}  // key -> offset of its latest synced write
	var published int64           // written has every offset below it
	snapshot := func() (map[string]int64, int64) {
		mu.Lock()
		defer mu.Unlock()
		m := make(map[string]int64, len(latest))
		for k, v := range latest {
			m[k] = v
		}
		return m, published
	}

	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	var reads [2]int
	for r := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				want, end := snapshot()
				seen := map[string]int64{}
				last := int64(-1)
				var buf []byte
				for off := l.LogStartOffset(); off < end; {
					var res ReadResult
					var err error
					buf, res, err = l.ReadBytes(buf[:0], off, 4096, end)
					if err != nil {
						errs <- fmt.Errorf("read at %d: %w", off, err)
						return
					}
					if res.NextOffset <= off {
						// No batch below end from off on. That is right
						// only if a clean (up to the log end, past this
						// read's stale end) removed every record in
						// [off, end): a read without the bound must then
						// find the next batch at end or later. A batch
						// below end that reads skip would stall a
						// consumer there for good.
						data, _, err := l.ReadBytes(nil, off, 1, NoUpperBound)
						first := int64(-1)
						if err == nil && len(data) > 0 {
							_, err = batch.Iterate(data, func(r *batch.Record) error {
								if first < 0 && r.Offset >= off {
									first = r.Offset
								}
								return nil
							})
						}
						if err == nil && first >= 0 && first < end {
							errs <- fmt.Errorf("read at %d (end %d) made no progress, but a record at %d is below the end", off, end, first)
							return
						}
						break
					}
					for rest := buf; len(rest) > 0; {
						h, err := batch.ParseHeader(rest)
						if err != nil {
							errs <- err
							return
						}
						_, recs, err := batch.Records(rest[:h.Size()])
						if err != nil {
							errs <- err
							return
						}
						rest = rest[h.Size():]
						for _, rec := range recs {
							if rec.Offset <= last {
								errs <- fmt.Errorf("offset %d after %d", rec.Offset, last)
								return
							}
							last = rec.Offset
							got := string(rec.Key) + "=" + string(rec.Value)
							mu.Lock()
							exp, ok := written[rec.Offset]
							mu.Unlock()
							if !ok || exp != got {
								errs <- fmt.Errorf("offset %d holds %q, %q was written there", rec.Offset, got, exp)
								return
							}
							seen[string(rec.Key)] = rec.Offset
						}
					}
					off = res.NextOffset
				}
				// A read from the start sees each key's latest synced
				// version as of the snapshot, unless a later synced
				// write of that key (possibly past the read's end) let a
				// clean remove it meanwhile.
				mu.Lock()
				for k, o := range want {
					if seen[k] < o && latest[k] == o {
						mu.Unlock()
						errs <- fmt.Errorf("key %s: latest write at %d, the read saw it last at %d", k, o, seen[k])
						return
					}
				}
				mu.Unlock()
				reads[r]++
			}
		}()
	}

	cleaned := 0
	type write struct {
		key string
		off int64
	}
	var unsynced []write
	for i := 0; i < 500; i++ {
		key := fmt.Sprintf("k%d", i%12)
		val := fmt.Sprintf("v%d", i)
		off := mustAppend(t, l, batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Key: []byte(key), Value: []byte(val)}}))
		mu.Lock()
		written[off] = key + "=" + val
		published = off + 1
		mu.Unlock()
		unsynced = append(unsynced, write{key, off})
		if i%25 == 24 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			for _, w := range unsynced {
				latest[w.key] = w.off
			}
			mu.Unlock()
			unsynced = unsynced[:0]
			st, err := l.Clean(l.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			if st.Segments > 0 {
				cleaned++
			}
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if cleaned < 5 || reads[0] == 0 || reads[1] == 0 {
		t.Fatalf("%d cleans, %v full reads: the test exercised too little", cleaned, reads)
	}
}

// TestCleanCommitOutsideLock: reads and appends go on while a clean's
// commit waits for its folder sync: no directory fsync runs under the
// log's lock.
func TestCleanCommitOutsideLock(t *testing.T) {
	cfg := smallCompactConfig()
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	fs := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSyncDir && armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	}))
	// No flusher: the first folder sync once armed is the clean's commit.
	l, err := Open(fs, "/p/topic-0", cfg, Options{Now: newClock().Now, Logger: quietLogger(), noFlusher: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fillKeyed(t, l, 40, 3, "v")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	leo, before := l.LogEndOffset(), len(readAll(t, l, 0))

	armed.Store(true)
	cleaned := make(chan error, 1)
	go func() {
		_, err := l.Clean(NoUpperBound)
		cleaned <- err
	}()
	select {
	case <-entered:
	case err := <-cleaned:
		t.Fatalf("clean returned before its folder sync: %v", err)
	}
	served := make(chan error, 1)
	go func() {
		if got := l.LogEndOffset(); got != leo {
			served <- fmt.Errorf("log end offset %d, want %d", got, leo)
			return
		}
		if _, _, err := l.ReadBytes(nil, 0, 1<<20, NoUpperBound); err != nil {
			served <- err
			return
		}
		_, err := l.AppendWith(mkBatch(1, 1, 10, "during"), AppendOptions{})
		served <- err
	}()
	select {
	case err := <-served:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Error("read, log end offset and append blocked behind the clean's folder sync")
		close(release)
		<-served
		<-cleaned
		return
	}
	close(release)
	if err := <-cleaned; err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, l, 0)); got >= before+1 {
		t.Errorf("after the clean and one append: %d batches, %d before", got, before)
	}
}
