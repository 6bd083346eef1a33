package segment

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
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
