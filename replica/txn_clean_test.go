package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// kvTxnBatch is a batch of producer pid (-1: none) at epoch and seq with
// key=value records, transactional or not.
func kvTxnBatch(pid int64, epoch int16, seq int32, txn bool, kvs ...string) []byte {
	o := batch.NewBuildOptions()
	if pid >= 0 {
		o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, epoch, seq, txn
	}
	var recs []batch.Record
	for i := 0; i < len(kvs); i += 2 {
		recs = append(recs, batch.Record{Timestamp: 1000, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	return batch.Build(o, recs)
}

// readCommitted reads p from offset 0 to its last stable offset as a
// read_committed Kafka consumer does (the Java client's CompletedFetch):
// each fetch's aborted transactions mark their producer aborted from
// their first offset on; that producer's transactional batches are
// skipped until its abort marker. It returns the records seen, "k=v" in
// offset order, one fetch per call.
func readCommitted(t *testing.T, p *Partition, maxBytes int) []string {
	t.Helper()
	var seen []string
	for offset := int64(0); offset < p.LastStableOffset(); {
		fr, err := p.FetchCommitted(offset, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		data, err := fr.Records.AppendTo(nil)
		next := fr.Records.NextOffset
		fr.Records.Release()
		if err != nil {
			t.Fatal(err)
		}
		if next <= offset {
			t.Fatalf("FetchCommitted(%d): no progress", offset)
		}
		queue := slices.Clone(fr.AbortedTransactions)
		sort.Slice(queue, func(i, j int) bool { return queue[i].FirstOffset < queue[j].FirstOffset })
		abortedPids := map[int64]bool{}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			b := data[:h.Size()]
			data = data[h.Size():]
			for len(queue) > 0 && queue[0].FirstOffset <= h.LastOffset() {
				abortedPids[queue[0].ProducerID] = true
				queue = queue[1:]
			}
			_, recs, err := batch.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Control() {
				if commit, _, ok := parseMarker(b); ok && !commit {
					delete(abortedPids, h.ProducerID)
				}
				continue
			}
			if h.Transactional() && abortedPids[h.ProducerID] {
				continue
			}
			for _, r := range recs {
				if r.Offset >= offset {
					seen = append(seen, fmt.Sprintf("%s=%s", r.Key, r.Value))
				}
			}
		}
		offset = next
	}
	return seen
}

// latest keeps the last value of each key of recs ("k=v"), in order of
// first appearance.
func latest(recs []string) []string {
	idx := map[string]int{}
	var out []string
	for _, r := range recs {
		k, _, _ := strings.Cut(r, "=")
		if i, ok := idx[k]; ok {
			out[i] = r
			continue
		}
		idx[k] = len(out)
		out = append(out, r)
	}
	return out
}

// Compaction of a transactional partition, through the cleaner's passes
// (the aborted and superseded records go; their markers get the delete
// horizon; past it they go): a read_committed consumer never sees an
// aborted record and always sees every committed one, also in one fetch
// spanning a removed abort marker and the producer's next, committed,
// transaction; producer state rebuilt from the cleaned log alone (the
// snapshots lost) has no transaction left open.
func TestTxnCleanReadCommitted(t *testing.T) {
	cfg := testConfig()
	cfg.Log.FlushMessages = 1
	cfg.Log.CleanupPolicy = segment.PolicyCompact
	// The first segment holds offsets 0-5 after the raft term's entry: the
	// batch at 4 is not the last of its group (the cleaner keeps each
	// group's last batch), so the marker at 5 can go.
	cfg.Log.SegmentBytes = 480
	cfg.Log.DeleteRetentionMs = 10_000
	mem := vfs.NewMem()
	var clock testClock
	clock.ms.Store(3000)
	opts := Options{}
	opts.Log.Now = clock.now
	p := openAt(t, mem, cfg, opts)
	ctx := context.Background()
	produce := func(b []byte) {
		t.Helper()
		pd, err := p.Produce(b)
		if err == nil {
			_, err = pd.Wait(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		if _, err := p.WriteTxnMarker(ctx, TxnMarker{ProducerID: pid, Commit: commit, CoordinatorEpoch: 5}); err != nil {
			t.Fatal(err)
		}
	}
	produce(kvTxnBatch(-1, 0, 0, false, "a", "a0"))                        // 0
	produce(kvTxnBatch(1, 0, 0, true, "a", "aborted-a", "b", "aborted-b")) // 1-2
	marker(1, false)                                                       // 3
	produce(kvTxnBatch(2, 0, 0, true, "c", "c1"))                          // 4
	marker(2, true)                                                        // 5
	produce(kvTxnBatch(-1, 0, 0, false, "c", "c2"))                        // 6
	produce(kvTxnBatch(1, 0, 2, true, "e", "e1"))                          // 7
	marker(1, true)                                                        // 8
	produce(kvTxnBatch(2, 0, 1, true, "d", "d1"))                          // 9
	marker(2, true)                                                        // 10
	for i := range 16 {
		produce(kvTxnBatch(-1, 0, 0, false, fmt.Sprint("f", i), fmt.Sprint("v", i))) // 11-26
	}
	want := []string{"a=a0", "c=c2", "e=e1", "d=d1"}
	for i := range 16 {
		want = append(want, fmt.Sprintf("f%d=v%d", i, i))
	}
	check := func(where string) {
		t.Helper()
		for _, maxBytes := range []int{1 << 20, 1} {
			got := readCommitted(t, p, maxBytes)
			for _, r := range got {
				if strings.Contains(r, "aborted") {
					t.Fatalf("%s: read_committed saw %s", where, r)
				}
			}
			if got := latest(got); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: read_committed (%d bytes a fetch) sees\n %v\nwant\n %v", where, maxBytes, got, want)
			}
		}
		if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
			t.Fatalf("%s: last stable offset %d, high watermark %d", where, lso, hw)
		}
	}
	clean := func(where string) segment.CleanStats {
		t.Helper()
		st, err := p.log.Clean(p.LastStableOffset())
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		check(where)
		return st
	}
	check("before cleaning")
	clean("pass 1: aborted and superseded records go")
	clock.ms.Add(1000)
	clean("pass 2: markers at 3 and 5 get the horizon")
	clock.ms.Add(cfg.Log.DeleteRetentionMs)
	if st := clean("pass 3: past the horizon"); st.MarkersRemoved != 2 {
		t.Fatalf("pass 3: %d markers removed, want 2", st.MarkersRemoved)
	}
	for _, off := range []int64{3, 5} {
		if gone, err := p.log.TxnMarkerGone(off); err != nil || !gone {
			t.Fatalf("the marker at %d: gone %v, %v", off, gone, err)
		}
	}
	for _, off := range []int64{8, 10} {
		if gone, err := p.log.TxnMarkerGone(off); err != nil || gone {
			t.Fatalf("the marker at %d: gone %v, %v", off, gone, err)
		}
	}
	wantProducers := func(where string) {
		t.Helper()
		type ps struct {
			id         int64
			epoch      int16
			seq, coord int32
			txnStart   int64
		}
		var got []ps
		for _, pi := range p.Producers() {
			got = append(got, ps{pi.ProducerID, pi.ProducerEpoch, pi.LastSequence, pi.CoordinatorEpoch, pi.CurrentTxnStartOffset})
		}
		if want := []ps{{1, 0, 2, 5, -1}, {2, 0, 1, 5, -1}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: producers %+v, want %+v", where, got, want)
		}
	}
	wantProducers("live")

	// Reopened, and then without the producer snapshots: the state is
	// rebuilt from the cleaned log alone.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openAt(t, mem, cfg, opts)
	check("reopened")
	wantProducers("reopened")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	offs, err := snapshots(mem, snapDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if err := mem.Remove(filepath.Join(snapDir, snapshotName(o))); err != nil {
			t.Fatal(err)
		}
	}
	p = openAt(t, mem, cfg, opts)
	defer p.Close()
	check("reopened without snapshots")
	wantProducers("reopened without snapshots")
}
