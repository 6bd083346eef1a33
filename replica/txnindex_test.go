package replica

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
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

// A follower that gets a compacted topic's segments by a raft snapshot
// (the leader cleaned them out of the raft log) gets their aborted
// transactions too: the snapshot's producer state lists them (version
// 2), and the follower writes them to the installed segments' .txnindex.
func TestTxnIndexCompactedJoin(t *testing.T) {
	c := newPCluster(t, 3, 1, 1)
	c.cfg.Log.SegmentBytes = 1024
	c.cfg.Log.CleanupPolicy = segment.PolicyCompact
	c.cfg.Log.MinCleanableDirtyRatio = 0
	c.startAll()
	g := c.groups[0]
	ticks := 0
	c.drive("node 1 to lead", func() bool {
		if ticks%20 == 0 {
			c.nodes[1].host.Campaign(g)
		}
		ticks++
		return c.leads(1)
	})
	produceKeyed(t, c, 20, 10, 0)
	c.settle()
	c.stop(3)
	lead := c.nodes[1].parts[g]
	r := raftRunner(c)
	var first int64
	var err error
	r.do(func() {
		var pd *Pending
		if pd, err = lead.Produce(txnBatch(50, 0, 0, 2, true, time.Now().UnixMilli())); err == nil {
			var res segment.AppendResult
			res, err = pd.Wait(context.Background())
			first = res.BaseOffset
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r.do(func() {
		_, err = lead.WriteTxnMarker(context.Background(), TxnMarker{ProducerID: 50, CoordinatorEpoch: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	produceKeyed(t, c, 100, 4, 20)
	c.settle()
	for _, n := range c.up() {
		p := n.parts[g]
		if _, err := p.log.Clean(p.HighWatermark()); err != nil {
			t.Fatal(err)
		}
	}
	snapIndex := lead.log.FirstIndex() - 1
	want := []AbortedTxn{{ProducerID: 50, FirstOffset: first}}
	if got := fetchAborted(t, lead, first); !reflect.DeepEqual(got, want) {
		t.Fatalf("the leader's aborted transactions from %d: %v", first, got)
	}
	c.start(3)
	c.drive("node 3 to install the snapshot", func() bool { return c.nodes[3].parts[g].log.FirstIndex() > snapIndex })
	c.settle()
	p3 := c.nodes[3].parts[g]
	if p3.log.FirstIndex() <= 1 || p3.LogStartOffset() > first {
		t.Fatalf("node 3 starts at index %d, offset %d: the test needs the transaction in the installed segments", p3.log.FirstIndex(), p3.LogStartOffset())
	}
	if got := fetchAborted(t, p3, first); !reflect.DeepEqual(got, want) {
		t.Fatalf("node 3's aborted transactions from %d: %v", first, got)
	}
	// And after a restart (the producer snapshot at the install trusts them).
	c.crash(3, 1)
	c.start(3)
	c.settle()
	if got := fetchAborted(t, c.nodes[3].parts[g], first); !reflect.DeepEqual(got, want) {
		t.Fatalf("node 3's aborted transactions after a restart: %v", got)
	}
}
