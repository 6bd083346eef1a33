package index

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scenarios under testdata/. Each file starts with
// `new` and then drives one index over one in-memory file. Run with
// -rewrite to regenerate the expected outputs.
//
// Commands:
//
//	new kind=(offset|time) base=<offset> [max=<bytes>]
//	    fresh empty file, index opened writable
//	reopen [writable=false] [max=<bytes>]
//	    abandon the index without flushing (as a crash would) and open a new
//	    one on the file as it is
//	put-file [size=<bytes>]
//	    replace the file with the entries given as input, one per line, as
//	    raw fields ("rel pos" or "ts rel"), zero-padded to size
//	write-raw at=<byte>
//	    write the hex input into the file at a byte offset
//	append
//	    one entry per line: "offset position" or "timestamp offset"
//	lookup | lookup-position
//	    one target per line
//	truncate (offset=<n> | position=<n>) | reset
//	flush | sync | trim | close
//	entries
//	    the index as seen through its API
//	file
//	    the file's bytes, decoded by entry slot
//
// Every command's output ends with the file I/O it did ("io:" lines).
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(filepath.ToSlash(path), "testdata/fuzz/") {
			return // go test -fuzz's corpus, not a scenario
		}
		d := &driver{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var b strings.Builder
			d.run(t, td, &b)
			if d.f != nil {
				for _, op := range d.f.takeTrace() {
					fmt.Fprintf(&b, "io: %s\n", op)
				}
			}
			return b.String()
		})
	})
}

type driver struct {
	kind string
	base int64
	max  int
	f    *memFile
	off  *OffsetIndex
	tim  *TimeIndex
}

func (d *driver) entrySize() int {
	if d.kind == "time" {
		return TimeEntrySize
	}
	return OffsetEntrySize
}

func (d *driver) open(t *testing.T, writable bool) error {
	d.f.closed = false
	var err error
	if d.kind == "time" {
		d.tim, err = OpenTimeIndex(d.f, d.base, d.max, writable)
	} else {
		d.off, err = OpenOffsetIndex(d.f, d.base, d.max, writable)
	}
	return err
}

func (d *driver) run(t *testing.T, td *datadriven.TestData, b *strings.Builder) {
	switch td.Cmd {
	case "new":
		td.ScanArgs(t, "kind", &d.kind)
		td.ScanArgs(t, "base", &d.base)
		d.max = 0
		td.MaybeScanArgs(t, "max", &d.max)
		d.f = &memFile{}
		report(b, d.open(t, true))
	case "reopen":
		writable := true
		td.MaybeScanArgs(t, "writable", &writable)
		td.MaybeScanArgs(t, "max", &d.max)
		report(b, d.open(t, writable))
	case "put-file":
		d.f.data = nil
		for i, line := range lines(td.Input) {
			var a, c int64
			if _, err := fmt.Sscan(line, &a, &c); err != nil {
				td.Fatalf(t, "bad entry %q: %v", line, err)
			}
			d.f.writeRaw(d.encode(a, c), int64(i*d.entrySize()))
		}
		size := 0
		if td.MaybeScanArgs(t, "size", &size) && size > len(d.f.data) {
			d.f.resize(int64(size))
		}
		fmt.Fprintf(b, "size=%d\n", len(d.f.data))
	case "write-raw":
		var at int64
		td.ScanArgs(t, "at", &at)
		raw, err := hex.DecodeString(strings.Join(strings.Fields(td.Input), ""))
		if err != nil {
			td.Fatalf(t, "bad hex: %v", err)
		}
		d.f.writeRaw(raw, at)
		fmt.Fprintf(b, "size=%d\n", len(d.f.data))
	case "append":
		for _, line := range lines(td.Input) {
			var x, y int64
			if _, err := fmt.Sscan(line, &x, &y); err != nil {
				td.Fatalf(t, "bad append %q: %v", line, err)
			}
			if d.kind == "time" {
				n := d.tim.Len()
				err := d.tim.Append(x, y)
				if err == nil && d.tim.Len() == n {
					fmt.Fprintf(b, "%s: ignored\n", line)
					continue
				}
				fmt.Fprintf(b, "%s: %s\n", line, errString(err))
			} else {
				fmt.Fprintf(b, "%s: %s\n", line, errString(d.off.Append(x, uint32(y))))
			}
		}
	case "lookup", "lookup-position":
		for _, line := range lines(td.Input) {
			x, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				td.Fatalf(t, "bad target %q", line)
			}
			switch {
			case d.kind == "time":
				fmt.Fprintf(b, "%d -> %s\n", x, fmtTime(d.tim.Lookup(x)))
			case td.Cmd == "lookup":
				fmt.Fprintf(b, "%d -> %s\n", x, fmtOffset(d.off.Lookup(x)))
			default:
				fmt.Fprintf(b, "%d -> %s\n", x, fmtOffset(d.off.LookupPosition(uint32(x))))
			}
		}
	case "truncate":
		var x int64
		switch {
		case td.MaybeScanArgs(t, "offset", &x) && d.kind == "time":
			d.tim.TruncateTo(x)
		case td.HasArg("offset"):
			d.off.TruncateTo(x)
		case td.MaybeScanArgs(t, "position", &x):
			d.off.TruncateToPosition(uint32(x))
		default:
			td.Fatalf(t, "truncate needs offset= or position=")
		}
		d.printEntries(b)
	case "reset":
		if d.kind == "time" {
			d.tim.Reset()
		} else {
			d.off.Reset()
		}
		d.printEntries(b)
	case "flush", "sync", "trim", "close":
		report(b, d.call(td.Cmd))
	case "fail":
		td.ScanArgs(t, "op", &d.f.failOp)
		b.WriteString("ok\n")
	case "entries":
		d.printEntries(b)
	case "file":
		d.printFile(b)
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
}

func (d *driver) call(op string) error {
	type ops interface {
		Flush() error
		Sync() error
		Trim() error
		Close() error
	}
	var ix ops = d.off
	if d.kind == "time" {
		ix = d.tim
	}
	switch op {
	case "flush":
		return ix.Flush()
	case "sync":
		return ix.Sync()
	case "trim":
		return ix.Trim()
	}
	return ix.Close()
}

func (d *driver) encode(a, c int64) []byte {
	if d.kind == "time" {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(a)), uint32(c))
	}
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(a)), uint32(c))
}

func (d *driver) printEntries(b *strings.Builder) {
	if d.kind == "time" {
		ix := d.tim
		for i := range ix.Len() {
			fmt.Fprintf(b, "%s\n", fmtTime(ix.Entry(i)))
		}
		fmt.Fprintf(b, "len=%d size=%d full=%t last=%s\n", ix.Len(), ix.SizeBytes(), ix.IsFull(), fmtTime(ix.Last()))
		return
	}
	ix := d.off
	for i := range ix.Len() {
		fmt.Fprintf(b, "%s\n", fmtOffset(ix.Entry(i)))
	}
	fmt.Fprintf(b, "len=%d size=%d full=%t last=%s\n", ix.Len(), ix.SizeBytes(), ix.IsFull(), fmtOffset(ix.Last()))
}

// printFile prints the file's raw entry slots, folding runs of zero slots.
func (d *driver) printFile(b *strings.Builder) {
	es := d.entrySize()
	data := d.f.data
	fmt.Fprintf(b, "size=%d\n", len(data))
	zero := make([]byte, es)
	for i := 0; i+es <= len(data); {
		slot := data[i : i+es]
		if bytes.Equal(slot, zero) {
			j := i
			for j+es <= len(data) && bytes.Equal(data[j:j+es], zero) {
				j += es
			}
			fmt.Fprintf(b, "[%d..%d) zero\n", i, j)
			i = j
			continue
		}
		if d.kind == "time" {
			fmt.Fprintf(b, "[%d] ts=%d rel=%d\n", i, int64(binary.BigEndian.Uint64(slot)), binary.BigEndian.Uint32(slot[8:]))
		} else {
			fmt.Fprintf(b, "[%d] rel=%d pos=%d\n", i, binary.BigEndian.Uint32(slot), binary.BigEndian.Uint32(slot[4:]))
		}
		i += es
	}
	if r := len(data) % es; r != 0 {
		fmt.Fprintf(b, "partial tail: %d bytes\n", r)
	}
}

func fmtOffset(e OffsetEntry) string { return fmt.Sprintf("{offset=%d pos=%d}", e.Offset, e.Position) }
func fmtTime(e TimeEntry) string     { return fmt.Sprintf("{ts=%d offset=%d}", e.Timestamp, e.Offset) }

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return "error: " + err.Error()
}

func report(b *strings.Builder, err error) { b.WriteString(errString(err) + "\n") }

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
