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

// crashModel is what the test knows the log must hold.
type crashModel struct {
	batches []modelBatch // the log now, in offset order
	synced  []modelBatch // the log as of the last successful Sync
	ever    map[int64][][]byte
	maxLSO  int64 // the largest log start offset the log ever had
	lsoDur  int64 // the log start offset last persisted by DeleteRecords
}

type modelBatch struct {
	base, next int64
	data       []byte
}

func (m *crashModel) add(b modelBatch) {
	m.batches = append(m.batches, b)
	m.ever[b.base] = append(m.ever[b.base], b.data)
}

// truncate drops the batches at and after leo; the synced ones there are no
// longer required (what a crash then shows of them is either version).
func (m *crashModel) truncate(leo int64) {
	cut := func(bs []modelBatch) []modelBatch {
		i := 0
		for i < len(bs) && bs[i].next <= leo {
			i++
		}
		return bs[:i]
	}
	m.batches = cut(m.batches)
	m.synced = cut(m.synced)
}

// readBatches returns every batch in the log with its bytes.
func readBatches(t *testing.T, l *Log) []modelBatch {
	t.Helper()
	var out []modelBatch
	offset := l.LogStartOffset()
	for {
		data, res, err := l.ReadBytes(nil, offset, 4096, NoUpperBound)
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		if res.Bytes == 0 {
			return out
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatalf("parse at %d: %v", offset, err)
			}
			b := data[:h.Size()]
			if _, _, err := batch.Records(b); err != nil { // well formed, compacted or not
				t.Fatalf("corrupt batch served at offset %d: %v", h.BaseOffset, err)
			}
			out = append(out, modelBatch{h.BaseOffset, h.NextOffset(), append([]byte(nil), b...)})
			data = data[h.Size():]
		}
		offset = res.NextOffset
	}
}

// checkRecovered verifies the recovered log against the model and returns
// the recovered batches.
func checkRecovered(t *testing.T, l *Log, m *crashModel, where string) []modelBatch {
	t.Helper()
	got := readBatches(t, l)
	lso := l.LogStartOffset()
	if lso > m.maxLSO {
		t.Fatalf("%s: log start offset %d above any it had (%d)", where, lso, m.maxLSO)
	}
	if lso < m.lsoDur {
		t.Fatalf("%s: log start offset %d below the persisted %d", where, lso, m.lsoDur)
	}
	// Offsets are contiguous from the first batch on.
	for i := 1; i < len(got); i++ {
		if got[i].base != got[i-1].next {
			t.Fatalf("%s: gap between batches: %d then %d", where, got[i-1].next, got[i].base)
		}
	}
	if len(got) > 0 && l.LogEndOffset() != got[len(got)-1].next {
		t.Fatalf("%s: log end offset %d, last batch ends at %d", where, l.LogEndOffset(), got[len(got)-1].next)
	}
	// Every synced batch at or above the log start offset is there, intact.
	j := 0
	for _, s := range m.synced {
		if s.next <= lso {
			continue
		}
		for j < len(got) && got[j].base < s.base {
			j++
		}
		if j >= len(got) || got[j].base != s.base || !bytes.Equal(got[j].data, s.data) {
			t.Fatalf("%s: synced batch at offset %d lost or changed (log start %d, end %d)", where, s.base, lso, l.LogEndOffset())
		}
	}
	// Anything else was really appended at that offset at some point.
	for _, g := range got {
		found := false
		for _, d := range m.ever[g.base] {
			if bytes.Equal(d, g.data) {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("%s: batch at offset %d was never appended", where, g.base)
		}
	}
	return got
}

func TestCrashRecovery(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCrashWorkload(t, uint64(seed)) })
	}
}

func runCrashWorkload(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	mem := vfs.NewMem()
	clock := newClock()
	cfg := DefaultConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.SegmentBytes = int64(200 + rng.IntN(2000))
	cfg.IndexIntervalBytes = rng.IntN(400)
	cfg.SegmentIndexBytes = 12 * (2 + rng.IntN(20))
	cfg.RetentionMs = -1
	if rng.IntN(3) == 0 {
		cfg.FlushMessages = int64(1 + rng.IntN(10))
	}
	var fs vfs.FS = mem
	injected := false
	if rng.IntN(4) == 0 {
		ops := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpTruncate, vfs.OpRename, vfs.OpCreate}
		fs = vfs.NewErrorFS(mem, vfs.OnOp(ops[rng.IntN(len(ops))], "", 5+rng.IntN(200)))
		injected = true
	}
	m := &crashModel{ever: map[int64][][]byte{}}
	open := func(fs vfs.FS) (*Log, error) {
		return Open(fs, "/data/t-0", cfg, Options{Now: clock.Now, Logger: quietLogger()})
	}
	l, err := open(fs)
	if err != nil {
		if injected {
			return
		}
		t.Fatal(err)
	}
	crashes := 1 + rng.IntN(3)
	for crash := 0; crash < crashes; crash++ {
		steps := 20 + rng.IntN(150)
		failed := false
		for step := 0; step < steps && !failed; step++ {
			var err error
			op := rng.IntN(100)
			switch {
			case op < 60:
				n := 1 + rng.IntN(5)
				ts := clock.Now().UnixMilli() - int64(rng.IntN(1000))
				b := mkBatch(n, ts, rng.IntN(120), fmt.Sprintf("s%d-%d", crash, step))
				var off int64
				off, err = l.Append(b)
				if err != nil && off >= 0 {
					// Written, but the flush.messages sync failed: it may
					// or may not survive a crash.
					m.ever[off] = append(m.ever[off], b)
				}
				if err == nil {
					m.add(modelBatch{off, off + int64(n), b})
					if cfg.FlushMessages == 1 {
						m.synced = append([]modelBatch(nil), m.batches...)
					}
				}
			case op < 72:
				want := append([]modelBatch(nil), m.batches...)
				if err = l.Sync(); err == nil {
					m.synced = want
				}
			case op < 76:
				err = l.Roll()
			case op < 82:
				cfg2 := l.Config()
				cfg2.RetentionBytes = int64(rng.IntN(3000))
				l.SetConfig(cfg2)
				_, err = l.DeleteOldSegments()
				m.maxLSO = max(m.maxLSO, l.LogStartOffset())
			case op < 86:
				lso, leo := l.LogStartOffset(), l.LogEndOffset()
				target := lso + rng.Int64N(leo-lso+1)
				var got int64
				got, err = l.DeleteRecordsBefore(target)
				m.maxLSO = max(m.maxLSO, target) // even a failed one may have moved it
				if err == nil {
					m.maxLSO = max(m.maxLSO, got)
					m.lsoDur = max(m.lsoDur, got)
				}
			case op < 92:
				lso, leo := l.LogStartOffset(), l.LogEndOffset()
				target := lso + rng.Int64N(leo-lso+1)
				var leo2 int64
				leo2, err = l.TruncateTo(target)
				if err == nil {
					m.truncate(leo2)
					m.lsoDur = min(m.lsoDur, l.LogStartOffset())
				}
			case op < 95:
				if err = l.Close(); err == nil {
					m.synced = append([]modelBatch(nil), m.batches...)
					if l, err = open(fs); err != nil {
						l = nil
					} else {
						checkRecovered(t, l, m, "clean reopen")
					}
				}
			default:
				clock.Add(100 * 1e6)
			}
			if l != nil {
				t.Logf("crash %d step %d: op %d done, LSO %d LEO %d segs %d err %v", crash, step, op, l.LogStartOffset(), l.LogEndOffset(), l.NumSegments(), err)
			}
			if err != nil {
				if !injected || !errors.Is(err, vfs.ErrInjected) && !errors.Is(err, ErrFailed) {
					t.Fatalf("step %d: %v", step, err)
				}
				failed = true
			}
		}
		// Crash: the machine loses everything unsynced (with torn tails).
		crashed := mem.CrashClone(vfs.CrashOptions{Rand: rng})
		if l != nil {
			l.Close()
		}
		mem = crashed
		fs = mem // no more injected errors after the first crash
		logDir(t, mem, "/data/t-0")
		injected = false
		l, err = open(fs)
		if err != nil {
			t.Fatalf("reopen after crash %d: %v", crash, err)
		}
		for _, sg := range l.segs {
			t.Logf("  recovered segment base %d next %d size %d maxTs %d", sg.base, sg.next, sg.size, sg.maxTs)
		}
		got := checkRecovered(t, l, m, fmt.Sprintf("crash %d", crash))
		// The recovered log is the new truth.
		m.batches = got
		m.synced = nil
		m.maxLSO = l.LogStartOffset()
		if len(got) > 0 {
			// Recovery may leave data unsynced (rebuilt tails); what it
			// serves must be durable once synced.
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			m.synced = append([]modelBatch(nil), got...)
		}
		m.lsoDur = l.LogStartOffset()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// logDir logs a folder's files, sizes and checkpoint (shown on failure).
func logDir(t *testing.T, fs vfs.FS, dir string) {
	names, _ := fs.List(dir)
	for _, n := range names {
		fi, err := fs.Stat(dir + "/" + n)
		if err == nil {
			t.Logf("  %s %d", n, fi.Size())
		}
	}
	if c, ok, _ := ReadCheckpoint(fs, dir); ok {
		t.Logf("  checkpoint %+v", c)
	}
}
