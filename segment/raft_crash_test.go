package segment

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// raftModel is what a test expects the raft log to hold.
type raftModel struct {
	first    uint64 // FirstIndex
	prevTerm uint64 // Term(first-1)
	start    int64  // OffsetAfter(first-1)
	ents     []modelEntry
	records  int64 // log end offset
}

type modelEntry struct {
	term uint64
	kind EntryKind
	data []byte // the stored batch for data entries, else the entry's data
	next int64  // OffsetAfter the entry
}

func (m *raftModel) clone() raftModel {
	c := *m
	c.ents = append([]modelEntry(nil), m.ents...)
	return c
}

func (m *raftModel) last() uint64 { return m.first + uint64(len(m.ents)) - 1 }

func (m *raftModel) entry(i uint64) (modelEntry, bool) {
	if i < m.first || i > m.last() {
		return modelEntry{}, false
	}
	return m.ents[i-m.first], true
}

func sameEntry(e Entry, m modelEntry) bool {
	return e.Term == m.term && e.Kind == m.kind && bytes.Equal(e.Data, m.data)
}

// checkRaftLog checks l's raft API against its own files and returns its
// entries: Entries over the whole log, Term and OffsetAfter of each,
// offsets contiguous, and every index naming the batch at its position in
// the .log files (read back with Read for data entries).
func checkRaftLog(t *testing.T, l *Log) []Entry {
	t.Helper()
	first, last := l.FirstIndex(), l.LastIndex()
	if last+1 < first {
		t.Fatalf("first %d last %d", first, last)
	}
	var ents []Entry
	if last >= first {
		var err error
		if ents, err = l.Entries(first, last+1, math.MaxUint64); err != nil {
			t.Fatalf("entries [%d, %d]: %v", first, last, err)
		}
	}
	if uint64(len(ents)) != last+1-first {
		t.Fatalf("%d entries for [%d, %d]", len(ents), first, last)
	}
	next, err := l.OffsetAfter(first - 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Term(first - 1); err != nil {
		t.Fatal(err)
	}
	var data [][]byte
	for i, e := range ents {
		if e.Index != first+uint64(i) || e.BaseOffset != next {
			t.Fatalf("entry %d: %+v, want index %d base offset %d", i, e, first+uint64(i), next)
		}
		if tm, err := l.Term(e.Index); err != nil || tm != e.Term {
			t.Fatalf("term of %d: %d %v, entry says %d", e.Index, tm, err, e.Term)
		}
		if after, err := l.OffsetAfter(e.Index); err != nil || after != e.NextOffset {
			t.Fatalf("offset after %d: %d %v, entry says %d", e.Index, after, err, e.NextOffset)
		}
		if e.Kind == EntryData {
			data = append(data, e.Data)
			for _, off := range []int64{e.BaseOffset, e.NextOffset - 1} {
				if i, err := l.IndexAtOffset(off); err != nil || i != e.Index {
					t.Fatalf("IndexAtOffset(%d) = %d, %v; entry %d holds it", off, i, err, e.Index)
				}
			}
		}
		next = e.NextOffset
	}
	if leo := l.LogEndOffset(); leo != next {
		t.Fatalf("log end offset %d, entries end at %d", leo, next)
	}
	// Every data entry is what a read of the log returns, in order, and
	// a read never returns anything else.
	if len(ents) > 0 {
		var got []byte
		off := ents[0].BaseOffset
		for off < next {
			b, res, err := l.ReadBytes(nil, off, 1<<10, NoUpperBound)
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			if res.Bytes == 0 {
				break
			}
			for _, h := range headersOf(t, b) {
				if h.Internal() {
					t.Fatalf("read at %d returned an internal batch", off)
				}
			}
			got = append(got, b...)
			off = res.NextOffset
		}
		if want := bytes.Join(data, nil); !bytes.Equal(got, want) {
			t.Fatalf("reads return %d bytes, the data entries hold %d", len(got), len(want))
		}
	}
	return ents
}

// checkAgainst checks that the reopened log's entries are what a crash
// may leave: those of the last synced state, then those of one state the
// log was in since (an unsynced truncation may be undone by a crash, and
// the tail it removed come back torn).
func checkAgainst(t *testing.T, ents []Entry, synced *raftModel, history ...*raftModel) {
	t.Helper()
	var from []*raftModel // the versions the suffix may come from
	for _, e := range ents {
		if from == nil {
			if s, ok := synced.entry(e.Index); ok && sameEntry(e, s) {
				continue
			}
			from = history
		}
		var still []*raftModel
		for _, v := range from {
			if c, ok := v.entry(e.Index); ok && sameEntry(e, c) {
				still = append(still, v)
			}
		}
		if len(still) == 0 {
			t.Fatalf("entry %d (term %d %s, %d bytes) is neither the synced one nor one of a later state", e.Index, e.Term, e.Kind, len(e.Data))
		}
		from = still
	}
}

// TestRaftCrash runs random raft operations (appends of data and internal
// entries, divergent tails, truncations, rolls, retention under a retain
// bound, resets, syncs) and after each one checks a crash of the
// filesystem at that instant: the reopened log is self-consistent (every
// index maps to its batch, Term and offsets agree with the files, reads
// return the data entries only) and holds what was synced, then possibly
// some of what came after; after a Sync, exactly the current state.
func TestRaftCrash(t *testing.T) {
	seeds, steps := raftCrashSeeds, 150
	if testing.Short() {
		seeds, steps = 2, 80
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { raftCrashRun(t, seed, steps) })
	}
}

func raftCrashRun(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 600
	clock := newClock()
	opts := Options{Now: clock.Now, Logger: quietLogger(), noFlusher: true}
	l, err := Open(mem, "/p/topic-0", cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	cur := raftModel{first: 1}
	synced := cur.clone()
	term := uint64(1)
	// As raft does: a new term starts with its leader's empty entry.
	newTerm := false
	appendAt := func(index uint64) {
		if rng.IntN(6) == 0 {
			term++
			newTerm = true
		}
		kind := EntryData
		var data []byte
		switch rng.IntN(5) {
		case 0:
			kind = EntryEmpty
		case 1:
			kind = EntryConfChange
			data = []byte(fmt.Sprintf("cc-%d", rng.IntN(100)))
		default:
			data = mkBatch(1+rng.IntN(4), clock.Now().UnixMilli(), 10+rng.IntN(40), fmt.Sprint(index))
		}
		prev := cur.prevTerm
		if e, ok := cur.entry(index - 1); ok {
			prev = e.term
		}
		if newTerm || term != prev {
			kind, data, newTerm = EntryEmpty, nil, false
		}
		r, err := l.AppendEntry(index, term, kind, data, AppendOptions{})
		if err != nil {
			t.Fatalf("append %d: %v", index, err)
		}
		cur.ents = cur.ents[:index-cur.first]
		if r.TruncatedTo >= 0 {
			cur.records = r.TruncatedTo
		}
		if kind == EntryData {
			h, _ := batch.ParseHeader(data)
			cur.records += int64(h.NumRecords)
		}
		if kind == EntryEmpty {
			data = []byte{}
		}
		cur.ents = append(cur.ents, modelEntry{term: term, kind: kind, data: data, next: cur.records})
		if r.Index != index {
			t.Fatalf("append %d got index %d", index, r.Index)
		}
	}
	var history []*raftModel // the states since the last sync
	for step := 0; step < steps; step++ {
		op := rng.IntN(20)
		var what string
		switch {
		case op < 11:
			what = "append"
			appendAt(cur.last() + 1)
		case op < 13 && len(cur.ents) > 0:
			// A new leader's entries over a divergent tail.
			i := cur.first + uint64(rng.IntN(len(cur.ents)))
			what = fmt.Sprintf("append over %d", i)
			term++
			newTerm = true
			appendAt(i)
		case op < 14 && len(cur.ents) > 0:
			i := cur.first + uint64(rng.IntN(len(cur.ents)))
			what = fmt.Sprintf("truncate %d", i)
			var held ReadResult
			var heldBytes []byte
			if rng.IntN(2) == 0 {
				held, err = l.Read(l.LogStartOffset(), 1<<20, NoUpperBound)
				if err != nil {
					t.Fatal(err)
				}
				heldBytes, _ = held.AppendTo(nil)
			}
			leo, err := l.TruncateIndex(i)
			if err != nil {
				t.Fatalf("truncate %d: %v", i, err)
			}
			cur.ents = cur.ents[:i-cur.first]
			cur.records = cur.start
			if len(cur.ents) > 0 {
				cur.records = cur.ents[len(cur.ents)-1].next
			}
			if leo != cur.records {
				t.Fatalf("truncate %d: log end offset %d, want %d", i, leo, cur.records)
			}
			if held.Ranges != nil {
				appendAt(cur.last() + 1)
				appendAt(cur.last() + 1)
				got, err := held.AppendTo(nil)
				held.Release()
				if err != nil || !bytes.Equal(got, heldBytes) {
					t.Fatalf("a held read changed under a truncation: %v", err)
				}
			}
		case op < 15:
			what = "roll"
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		case op < 16:
			bound := cur.first + uint64(rng.IntN(len(cur.ents)+1))
			what = fmt.Sprintf("retention below %d", bound)
			l.SetRaftRetainFrom(bound)
			c := l.Config()
			c.RetentionBytes = 0
			l.SetConfig(c)
			if _, err := l.DeleteOldSegments(); err != nil {
				t.Fatal(err)
			}
			c.RetentionBytes = -1
			l.SetConfig(c)
			l.SetRaftRetainFrom(math.MaxUint64)
			if f := l.FirstIndex(); f > bound || f < cur.first {
				t.Fatalf("retention below %d: first index %d (was %d)", bound, f, cur.first)
			} else if f > cur.first {
				cur.prevTerm = cur.ents[f-1-cur.first].term
				cur.start = cur.ents[f-1-cur.first].next
				cur.ents = cur.ents[f-cur.first:]
				cur.first = f
			}
		case op < 17 && rng.IntN(3) == 0:
			idx := cur.last() + uint64(rng.IntN(5))
			off := cur.records + int64(rng.IntN(10))
			what = fmt.Sprintf("reset at %d", idx)
			if err := l.ResetAt(idx, term, off); err != nil {
				t.Fatal(err)
			}
			cur = raftModel{first: idx + 1, prevTerm: term, records: off, start: off}
			newTerm = false
			synced = cur.clone() // durable on return
		default:
			what = "sync"
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			synced = cur.clone()
		}
		if what == "sync" || strings.HasPrefix(what, "reset") {
			history = nil
		}
		c := cur.clone()
		history = append(history, &c)
		if got := l.LogEndOffset(); got != cur.records {
			t.Fatalf("step %d (%s): log end offset %d, want %d", step, what, got, cur.records)
		}
		if l.FirstIndex() != cur.first || l.LastIndex() != cur.last() {
			t.Fatalf("step %d (%s): [%d, %d], want [%d, %d]", step, what, l.FirstIndex(), l.LastIndex(), cur.first, cur.last())
		}
		checkAgainst(t, checkRaftLog(t, l), &cur)

		// A crash now, with torn unsynced tails.
		crashed := mem.CrashClone(vfs.CrashOptions{Rand: rng})
		cl, err := Open(crashed, "/p/topic-0", cfg, opts)
		if err != nil {
			t.Fatalf("step %d (%s): open after a crash: %v", step, what, err)
		}
		ents := checkRaftLog(t, cl)
		if testing.Verbose() {
			t.Logf("step %d (%s): current [%d, %d] synced [%d, %d] crashed [%d, %d]", step, what, cur.first, cur.last(), synced.first, synced.last(), cl.FirstIndex(), cl.LastIndex())
		}
		checkAgainst(t, ents, &synced, history...)
		if f := cl.FirstIndex(); f < synced.first || f > cur.first {
			t.Fatalf("step %d (%s): first index %d after a crash, synced %d current %d", step, what, f, synced.first, cur.first)
		}
		cl.Close()
		if what == "sync" {
			exact := mem.CrashClone(vfs.CrashOptions{})
			el, err := Open(exact, "/p/topic-0", cfg, opts)
			if err != nil {
				t.Fatal(err)
			}
			ents := checkRaftLog(t, el)
			if el.FirstIndex() != cur.first || el.LastIndex() != cur.last() {
				t.Fatalf("step %d: after a sync and a crash [%d, %d], want [%d, %d]", step, el.FirstIndex(), el.LastIndex(), cur.first, cur.last())
			}
			checkAgainst(t, ents, &cur)
			// Reopened once more, from the files it just wrote.
			el.Close()
			el, err = Open(exact, "/p/topic-0", cfg, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, checkRaftLog(t, el), &cur)
			el.Close()
		}
	}
}

// raftCrashSeeds is how many random runs TestRaftCrash makes.
var raftCrashSeeds = uint64(6)
