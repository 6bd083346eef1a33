package replica

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
)

// abortMany writes n transactions of one record, producer base+i each,
// all aborted but every third committed, and returns the aborted ones.
func abortMany(t *testing.T, p *Partition, base int64, n int) []AbortedTxn {
	t.Helper()
	ctx := context.Background()
	var aborted []AbortedTxn
	for i := 0; i < n; i++ {
		pid := base + int64(i)
		pd, err := p.Produce(txnBatch(pid, 0, 0, 1, true, 1000))
		if err != nil {
			t.Fatal(err)
		}
		res, err := pd.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		commit := i%3 == 2
		if _, err := p.WriteTxnMarker(ctx, TxnMarker{ProducerID: pid, Commit: commit, CoordinatorEpoch: 1}); err != nil {
			t.Fatal(err)
		}
		if !commit {
			aborted = append(aborted, AbortedTxn{ProducerID: pid, FirstOffset: res.BaseOffset})
		}
	}
	return aborted
}

// fetchAborted reads p at read_committed from offset to the last stable
// offset, KIP-74 style, and returns the aborted transactions of each
// fetch, in order, deduplicated as a consumer keeps them.
func fetchAborted(t *testing.T, p *Partition, offset int64) []AbortedTxn {
	t.Helper()
	var out []AbortedTxn
	seen := map[AbortedTxn]bool{}
	for {
		fr, err := p.FetchCommitted(offset, 4096)
		if err != nil {
			t.Fatalf("FetchCommitted(%d): %v", offset, err)
		}
		next := fr.Records.NextOffset
		fr.Records.Release()
		for _, a := range fr.AbortedTransactions {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
		if fr.Records.Bytes == 0 || next >= fr.LastStableOffset {
			return out
		}
		offset = next
	}
}

// removeFiles removes the partition's files whose name ends with ext.
func removeFiles(t *testing.T, fs vfs.FS, dir, ext string) int {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, ext) {
			if err := fs.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// The aborted transactions come from the segments' .txnindex files: they
// survive a crash; lost files are rebuilt from the log above the newest
// producer snapshot, and from the log start without one; a version 2
// producer snapshot's list (a log from before the .txnindex) seeds them.
func TestTxnIndexRebuilt(t *testing.T) {
	cfg := smallSegments()
	cfg.Log.FlushMessages = 1
	mem := vfs.NewMem()
	p := openAt(t, mem, cfg, Options{})
	want := abortMany(t, p, 100, 30)
	if p.log.NumSegments() < 4 {
		t.Fatalf("%d segments: the test needs rolls", p.log.NumSegments())
	}
	if got := fetchAborted(t, p, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("before:\n got %v\nwant %v", got, want)
	}
	dir := p.log.Dir()
	crashed := mem.CrashClone(vfs.CrashOptions{})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = openAt(t, crashed, cfg, Options{})
	if got := fetchAborted(t, p, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a crash:\n got %v\nwant %v", got, want)
	}
	p.Close()

	// The newest snapshot is at the log end (Close): its entries are
	// trusted; without the files, and every snapshot, a full replay.
	lost := mem.CrashClone(vfs.CrashOptions{})
	if removeFiles(t, lost, dir, ".txnindex") == 0 {
		t.Fatal("no .txnindex file")
	}
	removeFiles(t, lost, dir, ".snapshot")
	p = openAt(t, lost, cfg, Options{})
	if got := fetchAborted(t, p, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt from the log start:\n got %v\nwant %v", got, want)
	}
	p.Close()

	// A version 2 snapshot at the log end with its aborted list, and no
	// .txnindex (the previous release's folder): the list seeds them.
	old := mem.CrashClone(vfs.CrashOptions{})
	removeFiles(t, old, dir, ".txnindex")
	ps, _, snap, err := loadSnapshot(old, dir, 1<<62, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || snap < 0 {
		t.Fatalf("snapshot: %d, %v", snap, err)
	}
	var listed []abortedTxn
	q := openAt(t, crashed, cfg, Options{}) // the crashed copy still has every entry
	for _, a := range q.log.AbortedTxns(0, snap) {
		if a.LastOffset < snap {
			listed = append(listed, abortedTxn{pid: a.ProducerID, first: a.FirstOffset, last: a.LastOffset, lso: a.LastStableOffset})
		}
	}
	q.Close()
	removeFiles(t, old, dir, ".snapshot")
	if err := writeSnapshot(old, dir, snap, encodeSnapshotTxn(ps, listed), 0); err != nil {
		t.Fatal(err)
	}
	p = openAt(t, old, cfg, Options{})
	defer p.Close()
	if got := fetchAborted(t, p, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("from a version 2 snapshot:\n got %v\nwant %v", got, want)
	}
}

// Many aborted transactions in small segments, then retention: the
// entries go with their segments (the partition holds no list of its
// own), and read_committed fetches from the new log start still answer
// the aborted transactions of what they read.
func TestTxnIndexRetention(t *testing.T) {
	cfg := smallSegments()
	mem := vfs.NewMem()
	p := openAt(t, mem, cfg, Options{})
	defer p.Close()
	all := abortMany(t, p, 100, 150)
	if n := p.log.NumAbortedTxns(); n != len(all) {
		t.Fatalf("%d entries in the index, %d aborted", n, len(all))
	}
	cfg.Log.RetentionBytes = p.log.Size() / 10
	if err := p.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := p.DeleteOldSegments(); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	start := p.LogStartOffset()
	var want []AbortedTxn
	for _, a := range all {
		// A transaction of one record: its marker is the next offset.
		if a.FirstOffset+1 >= start {
			want = append(want, a)
		}
	}
	if n := p.log.NumAbortedTxns(); n != len(want) || n >= len(all)/5 {
		t.Fatalf("%d entries held after retention (%d of %d above the log start %d)", n, len(want), len(all), start)
	}
	if got := fetchAborted(t, p, start); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the log start %d:\n got %v\nwant %v", start, got, want)
	}
	// One more abort after retention, and a reopen.
	more := abortMany(t, p, 1000, 1)
	want = append(want, more...)
	if got := fetchAborted(t, p, start); !reflect.DeepEqual(got, want) {
		t.Fatalf("after one more:\n got %v\nwant %v", got, want)
	}
}
