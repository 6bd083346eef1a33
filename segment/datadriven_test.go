package segment

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// TestScenarios runs the log scenarios in testdata/ (rewrite the expected
// output with: go test -run TestScenarios -rewrite).
//
// Commands:
//
//	open [key=value ...]        open the log (Kafka topic config keys)
//	append n=N ts=T [size=S]    append a batch of N records, timestamps T, T+1, ...
//	read offset=O max=B [upper=U]
//	lookup-ts ts=T              OffsetForTimestamp
//	max-ts                      MaxTimestamp
//	segments                    base, end offset and size of each segment
//	retention [advance-ms=D] [key=value ...]  set config keys, advance the clock D ms, DeleteOldSegments
//	delete-records offset=O
//	truncate offset=O
//	sync
//	crash                       drop everything unsynced and reopen
//	reopen                      close and open again
//	put ts=T [pid=P [txn]] k=v ...  append one batch of keyed records (v "null": a tombstone), transactional with txn
//	marker pid=P commit|abort   append producer P's transaction marker
//	roll                        roll a new active segment
//	ratio [upper=U]             CleanableRatio
//	clean [upper=U] [advance-ms=D] [key=value ...]  set config keys, advance the clock, Clean
//	dump                        every batch and record from the log start offset
//	entry index=I term=T kind=data|empty|confchange|confchangev2 [n=N ts=T]
//	                            AppendEntry (a data entry is a batch of N records)
//	raft                        FirstIndex, LastIndex and every entry from FirstIndex-1
//	truncate-index index=I      TruncateIndex
//	reset index=I term=T offset=O  ResetAt
//	retain index=I              SetRaftRetainFrom
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			fs    *vfs.MemFS
			l     *Log
			cfg   Config
			clock *testClock
		)
		open := func() {
			var err error
			l, err = Open(fs, "/d/t-0", cfg, Options{Now: clock.Now, Logger: quietLogger(), noFlusher: true})
			if err != nil {
				t.Fatal(err)
			}
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			num := func(k string, def int64) int64 {
				v, ok := args[k]
				if !ok {
					return def
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", k, err)
				}
				return n
			}
			setKeys := func() string {
				for k, v := range args {
					if strings.Contains(k, ".") {
						if err := cfg.Set(k, v); err != nil {
							return err.Error()
						}
					}
				}
				return ""
			}
			switch d.Cmd {
			case "open":
				fs, cfg, clock = vfs.NewMem(), DefaultConfig(), newClock()
				cfg.FileDeleteDelayMs = 0
				if msg := setKeys(); msg != "" {
					return msg
				}
				open()
				return "ok"
			case "append":
				b := mkBatch(int(num("n", 1)), num("ts", 0), int(num("size", 10)), "v")
				r, err := l.AppendWith(b, AppendOptions{})
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("offsets [%d, %d]", r.BaseOffset, r.LastOffset)
			case "read":
				data, res, err := l.ReadBytes(nil, num("offset", 0), int(num("max", 1<<20)), num("upper", NoUpperBound))
				if err != nil {
					return err.Error()
				}
				var sb strings.Builder
				for _, h := range headersOf(t, data) {
					fmt.Fprintf(&sb, "batch [%d, %d] %d bytes\n", h.BaseOffset, h.LastOffset(), h.Size())
				}
				fmt.Fprintf(&sb, "next %d, %d bytes in %d ranges", res.NextOffset, res.Bytes, len(res.Ranges))
				return sb.String()
			case "lookup-ts":
				off, ts, ok, err := l.OffsetForTimestamp(num("ts", 0))
				if err != nil {
					return err.Error()
				}
				if !ok {
					return "none"
				}
				return fmt.Sprintf("offset %d timestamp %d", off, ts)
			case "max-ts":
				ts, off, ok, err := l.MaxTimestamp()
				if err != nil || !ok {
					return fmt.Sprintf("none %v", err)
				}
				return fmt.Sprintf("timestamp %d at offset %d", ts, off)
			case "segments":
				return segmentsString(l)
			case "retention":
				if msg := setKeys(); msg != "" {
					return msg
				}
				if err := l.SetConfig(cfg); err != nil {
					return err.Error()
				}
				clock.Add(time.Duration(num("advance-ms", 0)) * time.Millisecond)
				n, err := l.DeleteOldSegments()
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("deleted %d\n%s", n, segmentsString(l))
			case "delete-records":
				lso, err := l.DeleteRecordsBefore(num("offset", 0))
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("log start offset %d", lso)
			case "truncate":
				leo, err := l.TruncateTo(num("offset", 0))
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("log end offset %d", leo)
			case "sync":
				if err := l.Sync(); err != nil {
					return err.Error()
				}
				return "ok"
			case "crash":
				crashed := fs.CrashClone(vfs.CrashOptions{})
				l.Close()
				fs = crashed
				open()
				return segmentsString(l)
			case "put":
				_, txn := args["txn"]
				return putKeys(t, l, d, num("ts", 0), num("pid", -1), txn)
			case "marker":
				_, commit := args["commit"]
				if _, abort := args["abort"]; abort == commit {
					d.Fatalf(t, "marker: commit or abort")
				}
				r, err := l.AppendWith(txnMarker(num("pid", -1), commit), AppendOptions{})
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("offset %d", r.BaseOffset)
			case "roll":
				if err := l.Roll(); err != nil {
					return err.Error()
				}
				return segmentsString(l)
			case "ratio":
				r, need := l.CleanableRatio(num("upper", NoUpperBound))
				return fmt.Sprintf("ratio %.3f needed %v", r, need)
			case "clean":
				if msg := setKeys(); msg != "" {
					return msg
				}
				if err := l.SetConfig(cfg); err != nil {
					return err.Error()
				}
				clock.Add(time.Duration(num("advance-ms", 0)) * time.Millisecond)
				st, err := l.Clean(num("upper", NoUpperBound))
				if err != nil {
					return err.Error()
				}
				markers := ""
				if st.MarkersRemoved > 0 {
					markers = fmt.Sprintf(" (%d markers)", st.MarkersRemoved)
				}
				return fmt.Sprintf("dirty [%d, %d) rewrote %d segments, removed %d records, %d batches%s\n%s",
					st.FirstDirty, st.End, st.Segments, st.RecordsRemoved, st.BatchesRemoved, markers, segmentsString(l))
			case "dump":
				return dumpLog(t, l)
			case "entry":
				kinds := map[string]EntryKind{"data": EntryData, "empty": EntryEmpty, "confchange": EntryConfChange, "confchangev2": EntryConfChangeV2}
				kind, ok := kinds[args["kind"]]
				if !ok {
					d.Fatalf(t, "kind %q", args["kind"])
				}
				var data []byte
				if kind == EntryData {
					data = mkBatch(int(num("n", 1)), num("ts", 0), int(num("size", 10)), "v")
				} else if v, ok := args["data"]; ok {
					data = []byte(v)
				}
				r, err := l.AppendEntry(uint64(num("index", 0)), uint64(num("term", 0)), kind, data, AppendOptions{})
				if err != nil {
					return err.Error()
				}
				out := fmt.Sprintf("index %d offsets [%d, %d]", r.Index, r.BaseOffset, r.LastOffset)
				if r.TruncatedTo >= 0 {
					out += fmt.Sprintf(" (truncated to %d first)", r.TruncatedTo)
				}
				return out
			case "raft":
				return raftString(t, l)
			case "truncate-index":
				leo, err := l.TruncateIndex(uint64(num("index", 0)))
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("log end offset %d", leo)
			case "reset":
				if err := l.ResetAt(uint64(num("index", 0)), uint64(num("term", 0)), num("offset", 0)); err != nil {
					return err.Error()
				}
				return raftString(t, l)
			case "retain":
				l.SetRaftRetainFrom(uint64(num("index", 0)))
				return "ok"
			case "reopen":
				if err := l.Close(); err != nil {
					return err.Error()
				}
				open()
				return segmentsString(l)
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
		if l != nil {
			l.Close()
		}
	})
}

// raftString prints the raft view of the log: its bounds and every entry.
func raftString(t *testing.T, l *Log) string {
	var sb strings.Builder
	first, last := l.FirstIndex(), l.LastIndex()
	fmt.Fprintf(&sb, "first %d last %d log end offset %d\n", first, last, l.LogEndOffset())
	term, err := l.Term(first - 1)
	after, err2 := l.OffsetAfter(first - 1)
	fmt.Fprintf(&sb, "before first: term %d next offset %d %v %v\n", term, after, err, err2)
	if last >= first {
		ents, err := l.Entries(first, last+1, math.MaxUint64)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			tm, err := l.Term(e.Index)
			next, err2 := l.OffsetAfter(e.Index)
			if err != nil || err2 != nil || tm != e.Term || next != e.NextOffset {
				t.Fatalf("entry %d: Term %d %v, OffsetAfter %d %v, entry %+v", e.Index, tm, err, next, err2, e)
			}
			fmt.Fprintf(&sb, "%d term %d %s offsets [%d, %d)", e.Index, e.Term, e.Kind, e.BaseOffset, e.NextOffset)
			if e.Kind != EntryData && len(e.Data) > 0 {
				fmt.Fprintf(&sb, " data %q", e.Data)
			}
			sb.WriteString("\n")
		}
	}
	if _, err := l.Term(last + 1); err != nil {
		fmt.Fprintf(&sb, "past last: %v\n", err)
	}
	if first > 1 {
		if _, err := l.Term(first - 2); err != nil {
			fmt.Fprintf(&sb, "below first: %v\n", err)
		}
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

func segmentsString(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "log start %d, end %d\n", l.logStartOffset, l.active().next)
	for _, s := range l.segs {
		fmt.Fprintf(&sb, "segment %s: offsets [%d, %d) %d bytes\n", MakeFileName(s.base, KindLog), s.base, s.next, s.size)
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// putKeys appends one batch whose records are the command's arguments other
// than ts, pid and txn, in order: key=value, value "null" for a tombstone.
func putKeys(t *testing.T, l *Log, d *datadriven.TestData, ts, pid int64, txn bool) string {
	var recs []batch.Record
	for _, a := range d.CmdArgs {
		if a.Key == "ts" || a.Key == "pid" || a.Key == "txn" {
			continue
		}
		r := batch.Record{Timestamp: ts, Key: []byte(a.Key)}
		if v := strings.Join(a.Vals, ","); v != "null" {
			r.Value = []byte(v)
		}
		recs = append(recs, r)
	}
	opts := batch.NewBuildOptions()
	if pid >= 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, 0
	}
	opts.Transactional = txn
	r, err := l.AppendWith(batch.Build(opts, recs), AppendOptions{})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("offsets [%d, %d]", r.BaseOffset, r.LastOffset)
}

// dumpLog prints every batch and record from the log start offset.
func dumpLog(t *testing.T, l *Log) string {
	var sb strings.Builder
	offset := l.LogStartOffset()
	for {
		data, res, err := l.ReadBytes(nil, offset, 1<<20, NoUpperBound)
		if err != nil {
			return err.Error()
		}
		if res.Bytes == 0 {
			break
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			_, recs, err := batch.Records(data[:h.Size()])
			if err != nil {
				t.Fatalf("batch at %d: %v", h.BaseOffset, err)
			}
			fmt.Fprintf(&sb, "batch [%d, %d]", h.BaseOffset, h.LastOffset())
			if h.HasDeleteHorizon() {
				fmt.Fprintf(&sb, " horizon %d", h.BaseTimestamp)
			}
			if h.ProducerID >= 0 {
				fmt.Fprintf(&sb, " pid %d", h.ProducerID)
			}
			if h.Transactional() && !h.Control() {
				sb.WriteString(" txn")
			}
			sb.WriteString(":")
			if h.Control() {
				switch {
				case len(recs) == 0:
					sb.WriteString(" empty marker")
				case markerType(data[:h.Size()]) == markerAbort:
					fmt.Fprintf(&sb, " %d:abort", recs[0].Offset)
				default:
					fmt.Fprintf(&sb, " %d:commit", recs[0].Offset)
				}
				recs = nil
			}
			for _, r := range recs {
				v := string(r.Value)
				if r.Value == nil {
					v = "null"
				}
				fmt.Fprintf(&sb, " %d:%s=%s", r.Offset, r.Key, v)
			}
			sb.WriteString("\n")
			data = data[h.Size():]
		}
		offset = res.NextOffset
	}
	fmt.Fprintf(&sb, "end %d", l.LogEndOffset())
	return sb.String()
}
