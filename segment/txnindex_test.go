package segment

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/segment/vfs"
)

// txnLogConfig is a delete-policy log whose segments hold a few batches.
func txnLogConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 300
	return cfg
}

// abortTxn appends producer pid's transaction of n records and its abort
// marker, then the index entry, as the replica does; it returns the entry.
func abortTxn(t *testing.T, l *Log, pid int64, n int) AbortedTxn {
	t.Helper()
	kvs := make([]string, 0, 2*n)
	for i := 0; i < n; i++ {
		kvs = append(kvs, "k", "v")
	}
	first := mustAppend(t, l, txnRecords(pid, kvs...))
	last := mustAppend(t, l, txnMarker(pid, false))
	a := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last, LastStableOffset: last + 1}
	if err := l.AppendAbortedTxn(a); err != nil {
		t.Fatalf("AppendAbortedTxn(%+v): %v", a, err)
	}
	return a
}

// txnFiles returns the bases of the segments with a .txnindex file.
func txnFiles(t *testing.T, fs vfs.FS, dir string) []int64 {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, name := range names {
		if n, ok := ParseFileName(name); ok && n.Kind == KindTxnIndex && !n.Deleted {
			out = append(out, n.Base)
		}
	}
	return out
}

// Entries go to the segment of their marker, files only where there is
// one; AbortedTxns answers the overlapping ones across segments; a roll
// and a reopen keep them; an entry already there is not added twice.
func TestTxnIndexAppendCollect(t *testing.T) {
	mem := vfs.NewMem()
	l := openTest(t, mem, txnLogConfig(), nil)
	var all []AbortedTxn
	for i := 0; i < 6; i++ {
		mustAppend(t, l, mkBatch(3, 1, 20, "plain"))
		all = append(all, abortTxn(t, l, int64(10+i), 2))
	}
	// A transaction spanning segments: its first record here, its marker
	// after several rolls.
	spanFirst := mustAppend(t, l, txnRecords(99, "k", "v"))
	for i := 0; i < 4; i++ {
		mustAppend(t, l, mkBatch(3, 1, 40, "fill"))
	}
	spanLast := mustAppend(t, l, txnMarker(99, false))
	span := AbortedTxn{ProducerID: 99, FirstOffset: spanFirst, LastOffset: spanLast, LastStableOffset: spanLast + 1}
	if err := l.AppendAbortedTxn(span); err != nil {
		t.Fatal(err)
	}
	all = append(all, span)
	if l.NumSegments() < 4 {
		t.Fatalf("%d segments: the test needs rolls", l.NumSegments())
	}
	if err := l.AppendAbortedTxn(span); err != nil {
		t.Fatalf("the same entry again: %v", err)
	}
	if err := l.AppendAbortedTxn(all[0]); err != nil {
		t.Fatalf("an older entry already held: %v", err)
	}
	if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: l.LogEndOffset()}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("an entry past the log end: %v", err)
	}
	check := func(l *Log, where string) {
		t.Helper()
		if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, all) {
			t.Fatalf("%s: all:\n got %+v\nwant %+v", where, got, all)
		}
		if n := l.NumAbortedTxns(); n != len(all) {
			t.Fatalf("%s: %d entries held", where, n)
		}
		// From inside the third transaction to just past its marker.
		a := all[2]
		if got := l.AbortedTxns(a.FirstOffset+1, a.LastOffset+1); !reflect.DeepEqual(got, []AbortedTxn{a}) {
			t.Fatalf("%s: [%d, %d): %+v", where, a.FirstOffset+1, a.LastOffset+1, got)
		}
		// The spanning one, read from its first record only: its marker
		// is segments later.
		if got := l.AbortedTxns(spanFirst, spanFirst+1); !reflect.DeepEqual(got, []AbortedTxn{span}) {
			t.Fatalf("%s: [%d, %d): %+v", where, spanFirst, spanFirst+1, got)
		}
		if got := l.AbortedTxns(spanLast+1, spanLast+5); got != nil {
			t.Fatalf("%s: past every marker: %+v", where, got)
		}
	}
	check(l, "open")
	files := txnFiles(t, mem, l.Dir())
	slices.Sort(files)
	l.mu.RLock()
	var want []int64
	for _, s := range l.segs {
		if s.txn != nil {
			want = append(want, s.base)
		}
	}
	l.mu.RUnlock()
	if !reflect.DeepEqual(files, want) || len(files) == 0 || len(files) == l.NumSegments() {
		t.Fatalf(".txnindex files at %v, segments with entries %v (of %d segments)", files, want, l.NumSegments())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, mem, txnLogConfig(), nil)
	defer l.Close()
	check(l, "reopened")
	// Closed segments hold no descriptor for their index.
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.txnFile != nil {
			t.Fatalf("closed segment %d keeps its .txnindex open", s.base)
		}
	}
}

// Kafka's walk stops at an entry whose last stable offset reaches the
// upper bound: later segments are not read.
func TestTxnIndexCollectStops(t *testing.T) {
	l := openTest(t, vfs.NewMem(), txnLogConfig(), nil)
	defer l.Close()
	a := abortTxn(t, l, 1, 1)
	for l.NumSegments() < 3 {
		mustAppend(t, l, mkBatch(3, 1, 40, "fill"))
	}
	// A made-up entry overlapping [0, 2) in a later segment: the walk
	// never reaches it, since a's last stable offset is past 2.
	b := AbortedTxn{ProducerID: 2, FirstOffset: 0, LastOffset: l.LogEndOffset() - 1, LastStableOffset: l.LogEndOffset()}
	if err := l.AppendAbortedTxn(b); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTxns(0, a.LastStableOffset); !reflect.DeepEqual(got, []AbortedTxn{a}) {
		t.Fatalf("[0, %d): %+v", a.LastStableOffset, got)
	}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
		t.Fatalf("everything: %+v", got)
	}
}

// A tail truncation drops the entries whose marker it removed, and the
// files of the segments it deleted; TruncateAbortedTxns drops entries
// across segments, and a replay adds them back.
func TestTxnIndexTruncate(t *testing.T) {
	mem := vfs.NewMem()
	l := openTest(t, mem, txnLogConfig(), nil)
	defer l.Close()
	var all []AbortedTxn
	for i := 0; i < 8; i++ {
		all = append(all, abortTxn(t, l, int64(i), 2))
		mustAppend(t, l, mkBatch(2, 1, 30, "plain"))
	}
	if err := l.TruncateAbortedTxns(all[5].LastOffset); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, all[:5]) {
		t.Fatalf("after TruncateAbortedTxns(%d): %+v", all[5].LastOffset, got)
	}
	for _, a := range all[5:] {
		if err := l.AppendAbortedTxn(a); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, all) {
		t.Fatalf("replayed: %+v", got)
	}
	cut := all[3].LastOffset // the marker goes, its records stay
	if _, err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, all[:3]) {
		t.Fatalf("after TruncateTo(%d): %+v", cut, got)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, base := range txnFiles(t, mem, l.Dir()) {
		if base > l.LogEndOffset() {
			t.Fatalf("a .txnindex at %d past the log end %d", base, l.LogEndOffset())
		}
	}
	// What was truncated is durable: a crash brings none of it back.
	c := openTest(t, mem.CrashClone(vfs.CrashOptions{}), txnLogConfig(), nil)
	defer c.Close()
	if got := c.AbortedTxns(0, c.LogEndOffset()); !reflect.DeepEqual(got, all[:3]) {
		t.Fatalf("after a crash: %+v", got)
	}
}

// Retention and DeleteRecords take a segment's entries with it: neither
// memory nor the folder keeps them, and what is left answers right.
func TestTxnIndexRetention(t *testing.T) {
	mem := vfs.NewMem()
	cfg := txnLogConfig()
	l := openTest(t, mem, cfg, nil)
	defer l.Close()
	var all []AbortedTxn
	for i := 0; i < 40; i++ {
		all = append(all, abortTxn(t, l, int64(i), 1))
	}
	segs := l.NumSegments()
	cfg.RetentionBytes = l.Size() / 4
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	n, err := l.DeleteOldSegments()
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d of %d segments: %v", n, segs, err)
	}
	start := l.LogStartOffset()
	var kept []AbortedTxn
	for _, a := range all {
		if a.LastOffset >= start {
			kept = append(kept, a)
		}
	}
	if got := l.AbortedTxns(start, l.LogEndOffset()); !reflect.DeepEqual(got, kept) {
		t.Fatalf("after retention from %d:\n got %+v\nwant %+v", start, got, kept)
	}
	if l.NumAbortedTxns() != len(kept) {
		t.Fatalf("%d entries held, %d kept", l.NumAbortedTxns(), len(kept))
	}
	for _, base := range txnFiles(t, mem, l.Dir()) {
		if base < start {
			t.Fatalf("the .txnindex of deleted segment %d is still there", base)
		}
	}
	// Below the log start offset: nothing to add.
	if err := l.AppendAbortedTxn(all[0]); err != nil {
		t.Fatalf("an entry below the log start: %v", err)
	}
	if l.NumAbortedTxns() != len(kept) {
		t.Fatal("an entry below the log start was kept")
	}
}

// A crash at any point: the recovered index holds every entry a Sync
// covered whose marker survived, exactly, then whole entries only (an
// unsynced one may be torn into garbage that passes the checks: the
// index has no checksum, and its owner rebuilds the entries above its
// producer snapshot, which those always are), none past the log end;
// appends go on after it.
func TestTxnIndexCrash(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		mem := vfs.NewMem()
		l := openTest(t, mem, txnLogConfig(), nil)
		rng := rand.New(rand.NewPCG(seed, 7))
		var synced []AbortedTxn
		var all []AbortedTxn
		for i := 0; i < 12; i++ {
			all = append(all, abortTxn(t, l, int64(i), 1+rng.IntN(3)))
			if rng.IntN(3) == 0 {
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = append(synced[:0], all...)
			}
		}
		c := openTest(t, mem.CrashClone(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, 8))}), txnLogConfig(), nil)
		got := c.AbortedTxns(0, c.LogEndOffset())
		k := 0
		for k < len(synced) && synced[k].LastOffset < c.LogEndOffset() {
			k++
		}
		if len(got) < k || !reflect.DeepEqual(got[:k], synced[:k]) {
			t.Fatalf("seed %d: synced entries %+v (log end %d), recovered %+v", seed, synced[:k], c.LogEndOffset(), got)
		}
		for _, a := range got {
			if a.LastOffset >= c.LogEndOffset() {
				t.Fatalf("seed %d: entry %+v past the log end %d", seed, a, c.LogEndOffset())
			}
		}
		// Appends go on after whatever recovery kept.
		next := abortTxn(t, c, 100, 1)
		if got := c.AbortedTxns(next.FirstOffset, next.LastOffset+1); !reflect.DeepEqual(got, []AbortedTxn{next}) {
			t.Fatalf("seed %d: after recovery: %+v", seed, got)
		}
		c.Close()
		l.Close()
	}
}

// An entry past its segment's end (garbage that passes the checks, or an
// entry whose marker a crash lost) is dropped at open, from the file too.
func TestTxnIndexPastEnd(t *testing.T) {
	mem := vfs.NewMem()
	l := openTest(t, mem, txnLogConfig(), nil)
	a := abortTxn(t, l, 1, 1)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), MakeFileName(0, KindTxnIndex))
	f, err := mem.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	var e [34]byte // version 0, producer 9, [leo, leo+5], lso leo+6
	binary.BigEndian.PutUint64(e[2:], 9)
	binary.BigEndian.PutUint64(e[10:], uint64(leo))
	binary.BigEndian.PutUint64(e[18:], uint64(leo+5))
	binary.BigEndian.PutUint64(e[26:], uint64(leo+6))
	if _, err := f.WriteAt(e[:], 34); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openTest(t, mem, txnLogConfig(), nil)
	defer l.Close()
	if got := l.AbortedTxns(0, leo+10); !reflect.DeepEqual(got, []AbortedTxn{a}) {
		t.Fatalf("an entry past the end kept: %+v", got)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if fi, err := mem.Stat(path); err != nil || fi.Size() != 34 {
		t.Fatalf("the file: %v, %v", fi, err)
	}
}

// A torn or garbage tail of a .txnindex is dropped at open, and the next
// change cuts it from the file.
func TestTxnIndexTornTail(t *testing.T) {
	mem := vfs.NewMem()
	l := openTest(t, mem, txnLogConfig(), nil)
	a := abortTxn(t, l, 1, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), MakeFileName(0, KindTxnIndex))
	f, err := mem.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 50)
	for i := range garbage {
		garbage[i] = byte(i + 1)
	}
	if _, err := f.WriteAt(garbage, 34); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openTest(t, mem, txnLogConfig(), nil)
	defer l.Close()
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, []AbortedTxn{a}) {
		t.Fatalf("after a garbage tail: %+v", got)
	}
	b := abortTxn(t, l, 2, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	fi, err := mem.Stat(path)
	if err != nil || fi.Size() != 2*34 {
		t.Fatalf("the file after an append: %v, %v", fi, err)
	}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, []AbortedTxn{a, b}) {
		t.Fatalf("after an append: %+v", got)
	}
}

// The cleaner carries the entries of the markers it keeps into the
// cleaned segment, through a reopen and a crash after the clean.
func TestTxnIndexClean(t *testing.T) {
	cfg := smallCompactConfig()
	cfg.MinCleanableDirtyRatio = 0
	mem := vfs.NewMem()
	l := openTest(t, mem, cfg, nil)
	mustAppend(t, l, txnRecords(7, "a", "aborted", "b", "x")) // 0-1
	mustAppend(t, l, txnRecords(8, "b", "b1"))                // 2
	m := mustAppend(t, l, txnMarker(7, false))                // 3
	mustAppend(t, l, txnMarker(8, true))                      // 4
	a := AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: m, LastStableOffset: 2}
	if err := l.AppendAbortedTxn(a); err != nil {
		t.Fatal(err)
	}
	var more []AbortedTxn
	for i := 0; i < 4; i++ {
		fillKeyed(t, l, 3, 2, "f")
		more = append(more, abortTxn(t, l, int64(20+i), 1))
	}
	fillKeyed(t, l, 12, 12, "g")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := l.Clean(NoUpperBound)
	if err != nil || st.Segments == 0 {
		t.Fatalf("clean: %+v, %v", st, err)
	}
	want := append([]AbortedTxn{a}, more...)
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the clean:\n got %+v\nwant %+v", got, want)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, fs := range map[string]*vfs.MemFS{"reopened": mem, "crashed": crashed} {
		r := openTest(t, fs, cfg, nil)
		if got := r.AbortedTxns(0, r.LogEndOffset()); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after the clean:\n got %+v\nwant %+v", name, got, want)
		}
		for _, base := range txnFiles(t, fs, r.Dir()) {
			found := false
			r.mu.RLock()
			for _, s := range r.segs {
				found = found || s.base == base
			}
			r.mu.RUnlock()
			if !found {
				t.Fatalf("%s: a .txnindex at %d without its segment", name, base)
			}
		}
		r.Close()
	}
}
