package replica

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func openRaftTestLog(t *testing.T, fs vfs.FS) *segment.Log {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 2000
	cfg.FileDeleteDelayMs = 0
	l, err := segment.Open(fs, "/r/t-0", cfg, segment.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sameStoredEntry compares an entry read back from the log with the one
// raft gave: a data entry's batch was stamped (base offset, leader epoch:
// bytes outside the CRC), the rest is identical.
func sameStoredEntry(got, want raftpb.Entry) bool {
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type {
		return false
	}
	if got.Type == raftpb.EntryNormal && len(want.Data) > 0 {
		return len(got.Data) == len(want.Data) && bytes.Equal(got.Data[batch.OffMagic:], want.Data[batch.OffMagic:])
	}
	return bytes.Equal(got.Data, want.Data)
}

// TestLogStorageMatchesMemoryStorage drives logStorage and raft's
// MemoryStorage with the same random appends (raft's shape: a term starts
// with its leader's empty entry, a new leader's entries may replace a
// divergent tail) and snapshots, and compares every answer of
// raft.Storage, errors included.
func TestLogStorageMatchesMemoryStorage(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			l := openRaftTestLog(t, vfs.NewMem())
			defer l.Close()
			ours := newLogStorage(l, raftpb.HardState{}, raftpb.ConfState{Voters: []uint64{1}})
			mem := raft.NewMemoryStorage()
			term := uint64(0)
			for step := 0; step < 300; step++ {
				first, _ := mem.FirstIndex()
				last, _ := mem.LastIndex()
				if rng.IntN(40) == 0 {
					// A snapshot of a delete topic.
					idx := last + uint64(rng.IntN(3))
					term++
					snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: idx, Term: term, ConfState: raftpb.ConfState{Voters: []uint64{1, 2}}}}
					// What a delete topic's snapshot does to the log
					// (partitionStorage.ApplySnapshot).
					if err := l.ResetAt(idx, term, int64(1000+step)); err != nil {
						t.Fatal(err)
					}
					ours.SetConfState(snap.Metadata.ConfState)
					ours.forgetAll()
					if err := mem.ApplySnapshot(snap); err != nil {
						t.Fatal(err)
					}
					if _, cs, _ := ours.InitialState(); len(cs.Voters) != 2 {
						t.Fatalf("conf state %v after a snapshot", cs)
					}
					if leo := l.LogEndOffset(); leo != int64(1000+step) {
						t.Fatalf("log end offset %d after a snapshot", leo)
					}
					continue
				}
				at := last + 1
				if rng.IntN(5) == 0 && last >= first {
					at = first + uint64(rng.IntN(int(last-first+1)))
				}
				prevTerm, _ := mem.Term(at - 1)
				var ents []raftpb.Entry
				cur := prevTerm
				if at <= last || rng.IntN(6) == 0 {
					term++ // a new leader
					cur = term
				}
				for i := 0; i < 1+rng.IntN(4); i++ {
					e := raftpb.Entry{Index: at + uint64(i), Term: cur}
					switch {
					case i == 0 && cur != prevTerm:
						// The new leader's empty entry.
					case rng.IntN(8) == 0:
						cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: uint64(step)}}}
						e.Type, e.Data = raftpb.EntryConfChangeV2, mustMarshal(t, &cc)
					case rng.IntN(8) == 0:
						cc := raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: uint64(step)}
						e.Type, e.Data = raftpb.EntryConfChange, mustMarshal(t, &cc)
					default:
						e.Data = batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: int64(step), Value: []byte(fmt.Sprintf("v%d-%d", step, i))}})
					}
					ents = append(ents, e)
				}
				orig := make([]raftpb.Entry, len(ents))
				for i, e := range ents {
					orig[i] = e
					orig[i].Data = append([]byte(nil), e.Data...)
				}
				res, err := ours.appendEntries(ents)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				for i, e := range ents {
					if !bytes.Equal(e.Data, orig[i].Data) {
						t.Fatalf("step %d: Append changed raft's entry data", step)
					}
					if res[i].Index != e.Index || (i == 0 && at <= last) != (res[i].Result.TruncatedTo >= 0) {
						t.Fatalf("step %d: result %+v for entry %d (tail from %d)", step, res[i], e.Index, at)
					}
				}
				if err := mem.Append(ents); err != nil {
					t.Fatal(err)
				}
				compareStorage(t, step, ours, mem, rng)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustMarshal(t *testing.T, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compareStorage(t *testing.T, step int, ours *logStorage, mem *raft.MemoryStorage, rng *rand.Rand) {
	t.Helper()
	f1, _ := ours.FirstIndex()
	f2, _ := mem.FirstIndex()
	l1, _ := ours.LastIndex()
	l2, _ := mem.LastIndex()
	if f1 != f2 || l1 != l2 {
		t.Fatalf("step %d: [%d, %d], memory storage [%d, %d]", step, f1, l1, f2, l2)
	}
	for i := f2 - min(f2, 2); i <= l2+1; i++ {
		t1, e1 := ours.Term(i)
		t2, e2 := mem.Term(i)
		if t1 != t2 || e1 != e2 {
			t.Fatalf("step %d: Term(%d) = %d, %v; memory storage %d, %v", step, i, t1, e1, t2, e2)
		}
	}
	if l2 >= f2 {
		got, err := ours.Entries(f2, l2+1, math.MaxUint64)
		want, _ := mem.Entries(f2, l2+1, math.MaxUint64)
		if err != nil || len(got) != len(want) {
			t.Fatalf("step %d: %d entries %v, memory storage %d", step, len(got), err, len(want))
		}
		for i := range got {
			if !sameStoredEntry(got[i], want[i]) {
				t.Fatalf("step %d: entry %d: %+v, memory storage %+v", step, want[i].Index, got[i], want[i])
			}
		}
		// maxSize: at least one entry, never more than raft allows.
		lo := f2 + uint64(rng.IntN(int(l2-f2+1)))
		max := uint64(rng.IntN(400))
		part, err := ours.Entries(lo, l2+1, max)
		if err != nil || len(part) == 0 || part[0].Index != lo {
			t.Fatalf("step %d: Entries(%d, %d, %d): %d entries, %v", step, lo, l2+1, max, len(part), err)
		}
		if memPart, _ := mem.Entries(lo, l2+1, max); len(part) > len(memPart) {
			t.Fatalf("step %d: Entries(%d, %d, %d): %d entries, raft's limit allows %d", step, lo, l2+1, max, len(part), len(memPart))
		}
	}
	if _, err := ours.Entries(f2-1, l2+1, math.MaxUint64); f2 > 1 && err != raft.ErrCompacted {
		t.Fatalf("step %d: Entries below the first index: %v", step, err)
	}
	if _, err := ours.Entries(f2, l2+2, math.MaxUint64); err != raft.ErrUnavailable {
		t.Fatalf("step %d: Entries past the last index: %v", step, err)
	}
}

// noSnapshots is a logStorage as a raft.Storage that serves no snapshot
// (partitionStorage serves them: raft_snapshot.go).
type noSnapshots struct{ *logStorage }

func (noSnapshots) Snapshot() (raftpb.Snapshot, error) {
	return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
}

// A single-voter group runs on a logStorage with a RawNode: the leader's
// empty entries take no offset, proposals are the log's batches, and the
// group restarts from the same log (a new leader, a new term).
func TestLogStorageRawNode(t *testing.T) {
	fs := vfs.NewMem()
	l := openRaftTestLog(t, fs)
	var hs raftpb.HardState
	var appended []appendedEntry
	run := func(l *segment.Log, proposals int, tag string) {
		t.Helper()
		s := newLogStorage(l, hs, raftpb.ConfState{Voters: []uint64{1}})
		rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: noSnapshots{s},
			MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Applied: hs.Commit, Logger: discardRaftLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := rn.Campaign(); err != nil {
			t.Fatal(err)
		}
		proposed := 0
		for i := 0; i < 1000; i++ {
			if rn.Status().RaftState == raft.StateLeader && proposed < proposals {
				b := batch.Build(batch.NewBuildOptions(), []batch.Record{{Timestamp: 1, Value: []byte(fmt.Sprintf("%s-%d", tag, proposed))}, {Timestamp: 2, Value: []byte("x")}})
				if err := rn.Propose(b); err != nil {
					t.Fatal(err)
				}
				proposed++
			}
			if !rn.HasReady() {
				if proposed == proposals {
					break
				}
				continue
			}
			rd := rn.Ready()
			r, err := s.appendEntries(rd.Entries)
			if err != nil {
				t.Fatal(err)
			}
			appended = append(appended, r...)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if !raft.IsEmptyHardState(rd.HardState) {
				hs = rd.HardState
				s.SetState(GroupState{HardState: hs, ConfState: raftpb.ConfState{Voters: []uint64{1}}})
			}
			rn.Advance(rd)
		}
		if hs.Commit != l.LastIndex() {
			t.Fatalf("commit %d, last index %d", hs.Commit, l.LastIndex())
		}
	}
	run(l, 5, "a")
	if l.LogEndOffset() != 10 {
		t.Fatalf("log end offset %d after 5 batches of 2", l.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openRaftTestLog(t, fs)
	defer l.Close()
	run(l, 3, "b")
	if l.LogEndOffset() != 16 || l.LastIndex() != 10 {
		t.Fatalf("log end offset %d, last index %d", l.LogEndOffset(), l.LastIndex())
	}
	// Entries 1 and 7: the two leaders' empty entries, internal batches.
	ents, err := l.Entries(1, 11, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		internal := e.Index == 1 || e.Index == 7
		if (e.Kind == segment.EntryEmpty) != internal || (e.Index >= 7) != (e.Term == 2) {
			t.Fatalf("entry %d: kind %s term %d", e.Index, e.Kind, e.Term)
		}
	}
	var next int64
	for _, a := range appended {
		if a.Kind == segment.EntryData {
			if a.Result.BaseOffset != next || a.Result.LastOffset != next+1 {
				t.Fatalf("appended %+v, want base offset %d", a, next)
			}
			next += 2
		}
	}
	data, _, err := l.ReadBytes(nil, 0, 1<<20, segment.NoUpperBound)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil || h.Internal() || h.BaseOffset != int64(2*n) {
			t.Fatalf("read batch %d: %+v %v", n, h, err)
		}
		data = data[h.Size():]
		n++
	}
	if n != 8 {
		t.Fatalf("read %d batches, want 8", n)
	}
}

// discardRaftLogger silences etcd raft.
type discardRaftLogger struct{}

func (discardRaftLogger) Debug(...any)              {}
func (discardRaftLogger) Debugf(string, ...any)     {}
func (discardRaftLogger) Error(...any)              {}
func (discardRaftLogger) Errorf(string, ...any)     {}
func (discardRaftLogger) Info(...any)               {}
func (discardRaftLogger) Infof(string, ...any)      {}
func (discardRaftLogger) Warning(...any)            {}
func (discardRaftLogger) Warningf(string, ...any)   {}
func (discardRaftLogger) Fatal(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardRaftLogger) Fatalf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
func (discardRaftLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardRaftLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
