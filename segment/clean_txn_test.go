package segment

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// txnRecords is a transactional batch of producer pid with key=value
// records.
func txnRecords(pid int64, kvs ...string) []byte {
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, 0, true
	var recs []batch.Record
	for i := 0; i < len(kvs); i += 2 {
		recs = append(recs, batch.Record{Timestamp: 1, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	return batch.Build(o, recs)
}

// txnMarker is producer pid's end-transaction marker (Kafka's control
// record: key version 0 + type, value version 0 + coordinator epoch).
func txnMarker(pid int64, commit bool) []byte {
	o := batch.NewBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.Control, o.Transactional = pid, 0, true, true
	typ := byte(0)
	if commit {
		typ = 1
	}
	return batch.Build(o, []batch.Record{{Timestamp: 1, Key: []byte{0, 0, 0, typ}, Value: []byte{0, 0, 0, 0, 0, 3}}})
}

// Compaction of transactions (Kafka's LogCleaner rules): an aborted
// transaction's records are removed and never supersede a committed
// record of the same key; committed transactional records compact like
// any; markers stay.
func TestCleanTransactions(t *testing.T) {
	cfg := smallCompactConfig()
	cfg.MinCleanableDirtyRatio = 0
	l := openTest(t, vfs.NewMem(), cfg, nil)
	defer l.Close()
	plain := func(k, v string) []byte {
		return batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Key: []byte(k), Value: []byte(v)}})
	}
	for _, b := range [][]byte{
		plain("a", "a0"),                        // 0
		txnRecords(7, "a", "aborted", "b", "x"), // 1-2, aborted
		txnRecords(8, "b", "b1"),                // 3, committed
		txnMarker(7, false),                     // 4
		txnRecords(8, "c", "c1"),                // 5
		txnMarker(8, true),                      // 6
	} {
		mustAppend(t, l, b)
	}
	fillKeyed(t, l, 12, 12, "f") // 7-18: distinct keys, rolling segments
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(NoUpperBound); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		off      int64
		kv       string
		ctrl     bool
		producer int64
	}
	var got []rec
	for _, h := range readAll(t, l, 0) {
		if h.BaseOffset > 6 {
			break
		}
		data, rr, err := l.ReadBytes(nil, h.BaseOffset, 1, NoUpperBound)
		rr.Release()
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := batch.Records(data[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		if h.Control() {
			got = append(got, rec{h.BaseOffset, "", true, h.ProducerID})
			continue
		}
		for _, r := range recs {
			got = append(got, rec{r.Offset, fmt.Sprintf("%s=%s", r.Key, r.Value), false, h.ProducerID})
		}
	}
	want := []rec{
		{0, "a=a0", false, -1}, // the aborted "a" did not supersede it
		{3, "b=b1", false, 8},
		{4, "", true, 7},
		{5, "c=c1", false, 8},
		{6, "", true, 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the clean:\n got %v\nwant %v", got, want)
	}
}

// txnView is one batch of a cleaned log as the marker tests see it.
type txnView struct {
	off     int64 // base offset
	pid     int64
	control bool
	records int
	horizon int64  // the delete horizon, -1 for none
	abort   bool   // a marker's type
	kvs     string // a data batch's records, "k=v " each
	txnal   bool
}

// txnViews returns every batch of l from its log start offset.
func txnViews(t *testing.T, l *Log) []txnView {
	t.Helper()
	var out []txnView
	for _, b := range readBatches(t, l) {
		h, err := batch.ParseHeader(b.data)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := batch.Records(b.data)
		if err != nil {
			t.Fatal(err)
		}
		v := txnView{off: h.BaseOffset, pid: h.ProducerID, control: h.Control(), records: len(recs), horizon: -1,
			txnal: h.Transactional()}
		if h.HasDeleteHorizon() {
			v.horizon = h.BaseTimestamp
		}
		if h.Control() {
			v.abort = markerType(b.data) == markerAbort
		}
		for _, r := range recs {
			if !h.Control() {
				v.kvs += fmt.Sprintf("%s=%s ", r.Key, r.Value)
			}
		}
		out = append(out, v)
	}
	return out
}

// at returns the batch at base offset off, if any.
func at(vs []txnView, off int64) (txnView, bool) {
	for _, v := range vs {
		if v.off == off {
			return v, true
		}
	}
	return txnView{}, false
}

// checkTxnSafe checks what a cleaned log must keep for read_committed
// consumers and for producer state rebuilt from the log, whatever the
// markers' horizons: every transactional data batch (an empty header
// included) is followed by a whole marker of its producer before that
// producer's next data batch of another transaction, and no record of an
// aborted transaction is there (the aborted ones, by value, in
// abortedVals).
func checkTxnSafe(t *testing.T, vs []txnView, abortedVals []string, where string) {
	t.Helper()
	for i, v := range vs {
		for _, a := range abortedVals {
			if strings.Contains(v.kvs, "="+a+" ") {
				t.Fatalf("%s: aborted record %s is in the log at %d", where, a, v.off)
			}
		}
		if v.control || !v.txnal || v.pid < 0 {
			continue
		}
		found := false
		for _, w := range vs[i+1:] {
			if w.pid == v.pid && w.control {
				if w.records == 0 {
					t.Fatalf("%s: producer %d's data batch at %d is followed by an emptied marker at %d", where, v.pid, v.off, w.off)
				}
				if w.abort && v.records > 0 {
					t.Fatalf("%s: producer %d's aborted batch at %d still has records", where, v.pid, v.off)
				}
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("%s: producer %d's transactional batch at %d has lost its marker", where, v.pid, v.off)
		}
	}
}

// markerLog appends the transactions the marker tests clean in one
// segment, then keyed records in another, rolls and syncs:
//
//	0-1  producer 8: a=a1 b=b1     committed at 2; superseded at 5, 6
//	3    producer 7: x=x0          aborted at 4
//	5, 6 a=a2, b=b2 (no producer)
//	7    producer 8: c=c1          committed at 8 (producer 8's last)
//	9    producer 7: y=y1          committed at 10 (producer 7's last)
//	11   producer 9: d=d1          committed at 12: its records stay
//	13   producer 9: e=e1          committed at 14
//	15   producer 6: z=z0          aborted at 16 (producer 6's last)
//	17-  keyed records k0..k11
func markerLog(t *testing.T, l *Log) {
	t.Helper()
	plain := func(k, v string) []byte {
		return batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Key: []byte(k), Value: []byte(v)}})
	}
	for _, b := range [][]byte{
		txnRecords(8, "a", "a1", "b", "b1"), txnMarker(8, true),
		txnRecords(7, "x", "x0"), txnMarker(7, false),
		plain("a", "a2"), plain("b", "b2"),
		txnRecords(8, "c", "c1"), txnMarker(8, true),
		txnRecords(7, "y", "y1"), txnMarker(7, true),
		txnRecords(9, "d", "d1"), txnMarker(9, true),
		txnRecords(9, "e", "e1"), txnMarker(9, true),
		txnRecords(6, "z", "z0"), txnMarker(6, false),
	} {
		mustAppend(t, l, b)
	}
	// A segment of its own, so no run of segments cleaned into one ends
	// inside it (a run's last batch stays as an empty header, which would
	// keep its transaction's marker a clean longer).
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	fillKeyed(t, l, 12, 12, "f")
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

var markerAbortedVals = []string{"x0", "z0"}

// Markers (Kafka's LogCleaner, CleanedTransactionMetadata, KIP-534): a
// marker stays whole while a clean reads a data batch of its
// transaction; the first clean that finds none gives it the delete
// horizon now + delete.retention.ms; a clean past the horizon removes it.
// A producer's last batch and last data batch stay.
func TestCleanTxnMarkerHorizon(t *testing.T) {
	cfg := smallCompactConfig()
	cfg.SegmentBytes = 4096
	cfg.DeleteRetentionMs = 10_000
	clock := newClock()
	l := openTest(t, vfs.NewMem(), cfg, clock)
	defer l.Close()
	markerLog(t, l)
	clean := func(pass string) CleanStats {
		t.Helper()
		st, err := l.Clean(NoUpperBound)
		if err != nil {
			t.Fatalf("%s: %v", pass, err)
		}
		checkTxnSafe(t, txnViews(t, l), markerAbortedVals, pass)
		return st
	}
	// wantMarker checks the marker at off: gone, or there with its
	// record and the horizon wanted (-1 for none).
	wantMarker := func(pass string, off int64, there bool, horizon int64) {
		t.Helper()
		v, ok := at(txnViews(t, l), off)
		switch {
		case !there && ok && v.records > 0:
			t.Fatalf("%s: the marker at %d is still there (horizon %d)", pass, off, v.horizon)
		case there && (!ok || !v.control || v.records != 1):
			t.Fatalf("%s: the marker at %d is gone: %+v", pass, off, v)
		case there && v.horizon != horizon:
			t.Fatalf("%s: the marker at %d has horizon %d, want %d", pass, off, v.horizon, horizon)
		}
	}

	// Pass 1 drops the superseded and the aborted records; their
	// transactions' markers stay as they are, for this clean read them.
	clean("pass 1")
	vs := txnViews(t, l)
	if v, ok := at(vs, 0); ok && v.records > 0 {
		t.Fatalf("pass 1: superseded records at 0 kept: %+v", v)
	}
	if v, ok := at(vs, 3); ok && v.records > 0 {
		t.Fatalf("pass 1: aborted records at 3 kept: %+v", v)
	}
	if v, ok := at(vs, 15); !ok || v.records != 0 {
		t.Fatalf("pass 1: producer 6's last data batch (aborted) should stay as an empty header: %+v, %v", v, ok)
	}
	for _, off := range []int64{2, 4, 8, 10, 12, 14, 16} {
		wantMarker("pass 1", off, true, -1)
	}

	// Pass 2: nothing of the transactions at 2 and 4 is left, so their
	// markers get the horizon; the others stay as they are.
	clock.Add(time.Second)
	horizon := clock.Now().UnixMilli() + cfg.DeleteRetentionMs
	clean("pass 2")
	wantMarker("pass 2", 2, true, horizon)
	wantMarker("pass 2", 4, true, horizon)
	for _, off := range []int64{8, 10, 12, 14, 16} {
		wantMarker("pass 2", off, true, -1)
	}
	if _, needed := l.CleanableRatio(NoUpperBound); needed {
		t.Fatal("pass 2: a clean is needed before the horizon")
	}

	// Before the horizon the markers stay, horizon unchanged.
	clock.Add(time.Duration(cfg.DeleteRetentionMs-1) * time.Millisecond)
	clean("pass 3")
	wantMarker("pass 3", 2, true, horizon)
	wantMarker("pass 3", 4, true, horizon)

	// At the horizon a clean is due (as for tombstones), and removes them.
	clock.Add(time.Millisecond)
	if _, needed := l.CleanableRatio(NoUpperBound); !needed {
		t.Fatal("the markers' horizon passed but no clean is needed")
	}
	st := clean("pass 4")
	if st.MarkersRemoved != 2 {
		t.Fatalf("pass 4: %d markers removed, want 2", st.MarkersRemoved)
	}
	wantMarker("pass 4", 2, false, -1)
	wantMarker("pass 4", 4, false, -1)
	// A marker whose transaction still has records, and each producer's
	// last marker, stay whole without a horizon, however long.
	clock.Add(time.Hour)
	clean("pass 5")
	for _, off := range []int64{8, 10, 12, 14, 16} {
		wantMarker("pass 5", off, true, -1)
	}
	checkMarkerLogDone(t, l, "pass 5")
}

// checkMarkerLogDone checks markerLog's log once its markers at 2 and 4
// are past their horizon and cleaned: they are gone, the others whole
// without a horizon, and the records are the committed latest ones.
func checkMarkerLogDone(t *testing.T, l *Log, where string) {
	t.Helper()
	vs := txnViews(t, l)
	checkTxnSafe(t, vs, markerAbortedVals, where)
	var got []string
	for _, v := range vs {
		if v.control && v.records > 0 && v.off < 17 {
			got = append(got, fmt.Sprintf("marker %d horizon %d", v.off, v.horizon))
		}
		if v.kvs != "" {
			got = append(got, strings.TrimSpace(v.kvs))
		}
	}
	want := []string{"a=a2", "b=b2", "c=c1", "marker 8 horizon -1", "y=y1", "marker 10 horizon -1",
		"d=d1", "marker 12 horizon -1", "e=e1", "marker 14 horizon -1", "marker 16 horizon -1"}
	for i := range 12 {
		want = append(want, fmt.Sprintf("k%d=f%d", i, i))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", where, got, want)
	}
}

// A crash at each mutating file operation of the cleans that give the
// markers their horizon and then remove them loses nothing: the
// recovered log is safe for read_committed consumers and producer state
// (checkTxnSafe) and keeps every committed record, and cleaning it on
// ends as an uninterrupted run does.
func TestCleanTxnMarkerCrashEveryOp(t *testing.T) {
	mutating := map[vfs.Op]bool{vfs.OpCreate: true, vfs.OpRemove: true, vfs.OpRename: true, vfs.OpSyncDir: true,
		vfs.OpWrite: true, vfs.OpTruncate: true, vfs.OpSync: true}
	cfg := smallCompactConfig()
	cfg.SegmentBytes = 4096
	cfg.DeleteRetentionMs = 10_000
	retention := time.Duration(cfg.DeleteRetentionMs) * time.Millisecond
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
		clock := newClock()
		l, err := openCompact(vfs.NewErrorFS(mem, inj), cfg, clock)
		if err != nil {
			t.Fatal(err)
		}
		markerLog(t, l)
		if _, err := l.Clean(NoUpperBound); err != nil {
			t.Fatal(err)
		}
		armed = true
		for _, step := range []time.Duration{time.Second, retention - time.Millisecond, time.Millisecond} {
			clock.Add(step)
			if _, err = l.Clean(NoUpperBound); err != nil {
				break
			}
		}
		armed = false
		l.Close()
		if crashed == nil {
			if err != nil {
				t.Fatalf("clean: %v", err)
			}
			t.Logf("the cleans have %d mutating operations", count)
			break
		}
		where := fmt.Sprintf("crash at op %d", crashAt)
		if l, err = openCompact(crashed, cfg, clock); err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		vs := txnViews(t, l)
		checkTxnSafe(t, vs, markerAbortedVals, where)
		for _, off := range []int64{8, 10, 12, 14, 16} {
			if v, ok := at(vs, off); !ok || v.records != 1 || v.horizon != -1 {
				t.Fatalf("%s: the marker at %d: %+v, %v", where, off, v, ok)
			}
		}
		// Clean on: a horizon given now, then past it.
		for _, step := range []time.Duration{0, retention} {
			clock.Add(step)
			if _, err := l.Clean(NoUpperBound); err != nil {
				t.Fatalf("%s: clean after recovery: %v", where, err)
			}
		}
		checkMarkerLogDone(t, l, where+", cleaned on")
		l.Close()
	}
}

// TestCleanTxnRandom interleaves transactional and plain appends,
// commits and aborts of three producers, rolls, syncs, cleans below the
// last stable offset and clock advances. After each clean every
// transactional batch still has its marker (or belongs to an open
// transaction) and no aborted record is left below the cleaner offset;
// at the end, with every transaction decided and the horizons passed, a
// read of the log as read_committed (by its markers alone) gives the
// latest committed value of each key, and every marker left is its
// producer's last batch or has a data batch of its transaction before it.
func TestCleanTxnRandom(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0x7a11))
			cfg := smallCompactConfig()
			cfg.SegmentBytes = int64(200 + rng.IntN(800))
			cfg.DeleteRetentionMs = 3000
			clock := newClock()
			l := openTest(t, vfs.NewMem(), cfg, clock)
			defer l.Close()
			type rec struct {
				off      int64
				key, val string
				pid      int64 // -1: plain
			}
			var recs []rec
			openFirst := map[int64]int64{} // producer -> its open transaction's first offset
			committed := map[string]bool{} // values of committed transactional records
			var aborted []string
			pendingVals := map[int64][]string{}
			appendRecs := func(pid int64) {
				n := 1 + rng.IntN(2)
				leo := l.LogEndOffset()
				var kvs []string
				for i := 0; i < n; i++ {
					kvs = append(kvs, fmt.Sprint("k", rng.IntN(8)), fmt.Sprint("v", leo+int64(i)))
				}
				var b []byte
				if pid < 0 {
					o := batch.NewBuildOptions()
					var rs []batch.Record
					for i := 0; i < len(kvs); i += 2 {
						rs = append(rs, batch.Record{Timestamp: 1, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
					}
					b = batch.Build(o, rs)
				} else {
					b = txnRecords(pid, kvs...)
				}
				off := mustAppend(t, l, b)
				if _, ok := openFirst[pid]; pid >= 0 && !ok {
					openFirst[pid] = off
				}
				for i := 0; i < len(kvs); i += 2 {
					recs = append(recs, rec{off + int64(i/2), kvs[i], kvs[i+1], pid})
					if pid >= 0 {
						pendingVals[pid] = append(pendingVals[pid], kvs[i+1])
					}
				}
			}
			end := func(pid int64, commit bool) {
				mustAppend(t, l, txnMarker(pid, commit))
				for _, v := range pendingVals[pid] {
					if commit {
						committed[v] = true
					} else {
						aborted = append(aborted, v)
					}
				}
				delete(pendingVals, pid)
				delete(openFirst, pid)
			}
			lso := func() int64 {
				s := l.LogEndOffset()
				for _, f := range openFirst {
					s = min(s, f)
				}
				return s
			}
			check := func(where string) {
				t.Helper()
				vs := txnViews(t, l)
				l.mu.RLock()
				fd := l.firstDirty
				l.mu.RUnlock()
				for i, v := range vs {
					if v.control || !v.txnal || v.pid < 0 {
						continue
					}
					var next *txnView
					for j := range vs[i+1:] {
						if w := &vs[i+1+j]; w.pid == v.pid && w.control {
							next = w
							break
						}
					}
					if f, open := openFirst[v.pid]; next == nil && !(open && v.off >= f) {
						t.Fatalf("%s: producer %d's transactional batch at %d has lost its marker", where, v.pid, v.off)
					}
					if next != nil && next.records == 0 {
						t.Fatalf("%s: producer %d's batch at %d is followed by an emptied marker at %d", where, v.pid, v.off, next.off)
					}
					if next != nil && next.abort && v.records > 0 && v.off < fd {
						t.Fatalf("%s: producer %d's aborted batch at %d kept below the cleaner offset %d", where, v.pid, v.off, fd)
					}
				}
			}
			for step := 0; step < 250; step++ {
				switch op := rng.IntN(100); {
				case op < 25:
					appendRecs(-1)
				case op < 55:
					appendRecs(1 + int64(rng.IntN(3)))
				case op < 70:
					pid := 1 + int64(rng.IntN(3))
					if _, ok := openFirst[pid]; ok {
						end(pid, rng.IntN(2) == 0)
					}
				case op < 75:
					if err := l.Roll(); err != nil {
						t.Fatal(err)
					}
				case op < 82:
					if err := l.Sync(); err != nil {
						t.Fatal(err)
					}
				case op < 94:
					if _, err := l.Clean(lso()); err != nil {
						t.Fatal(err)
					}
					check(fmt.Sprint("step ", step))
				default:
					clock.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
				}
			}
			for pid := range openFirst {
				end(pid, rng.IntN(2) == 0)
			}
			appendRecs(-1) // no producer's batch is a run's last
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			// Records, then horizons, then markers, the clock past the
			// horizons before each clean, until a clean changes nothing
			// (a run's last batch, kept as an empty header, holds its
			// transaction's marker until the runs change: with these
			// small segments, many cleans).
			for pass := 0; ; pass++ {
				if pass == 200 {
					t.Fatal("the cleans do not settle")
				}
				clock.Add(time.Duration(cfg.DeleteRetentionMs) * time.Millisecond)
				st, err := l.Clean(lso())
				if err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprint("final clean ", pass))
				if st.Segments == 0 {
					break
				}
			}
			vs := txnViews(t, l)
			checkTxnSafe(t, vs, aborted, "final")

			// read_committed by the markers: the latest value of each key.
			want, got := map[string]string{}, map[string]string{}
			for _, r := range recs {
				if r.pid < 0 || committed[r.val] {
					want[r.key] = r.val
				}
			}
			for i, v := range vs {
				if v.control || v.kvs == "" {
					continue
				}
				if v.txnal {
					visible := false
					for _, w := range vs[i+1:] {
						if w.pid == v.pid && w.control {
							visible = !w.abort
							break
						}
					}
					if !visible {
						t.Fatalf("producer %d's records at %d are not committed: %s", v.pid, v.off, v.kvs)
					}
				}
				for _, kv := range strings.Fields(v.kvs) {
					k, val, _ := strings.Cut(kv, "=")
					got[k] = val
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("latest values:\n got %v\nwant %v", got, want)
			}
			// Every marker left is its producer's last batch or ends a
			// transaction with a batch (maybe an empty header) still there
			// (a run's last batch may be an emptied marker).
			for i, v := range vs {
				if !v.control || v.records == 0 {
					continue
				}
				last, hasData := true, false
				for _, w := range vs[i+1:] {
					if w.pid == v.pid {
						last = false
						break
					}
				}
				for j := i - 1; j >= 0 && !(vs[j].pid == v.pid && vs[j].control); j-- {
					hasData = hasData || (vs[j].pid == v.pid && vs[j].txnal)
				}
				if !last && !hasData {
					t.Fatalf("the marker at %d (producer %d, horizon %d) outlived its transaction and its horizon", v.off, v.pid, v.horizon)
				}
			}
		})
	}
}
