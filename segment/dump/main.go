package dump

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/segment/vfs"
)

// Exit statuses returned by Main.
const (
	ExitOK      = 0 // everything read (and with --verify, checked) cleanly
	ExitProblem = 1 // a problem was found in the files, or one could not be read
	ExitUsage   = 2 // bad flags or arguments
)

// config holds the parsed flags.
type config struct {
	records       bool
	json          bool
	verify        bool
	maxValueBytes int // -1: no limit
	demo          string
	prog          string // the name the tool was invoked by, for -h
}

const usageText = `Usage: sluice-dump [flags] PATH...
       sluice-dump truncate --at OFFSET [--yes] DIR   (repair a damaged log; -h for more)

Prints the record batches of a Sluice (or Kafka) partition log, like Kafka's
kafka-dump-log.sh. PATH is a partition folder (its log.checkpoint, then every
.log file in offset order), a segment .log file, an .index, .timeindex or
.txnindex file, or a log.checkpoint file. Files are only read, never changed. Problems
and warnings go to stderr as they are found; the dump goes on after a problem.

Flags:
`

const usageTail = `
--verify prints no batches: it wins over --records, which is then ignored,
and --json only turns its final "verified" lines into JSON objects. Problems
and warnings are always text on stderr, one per line.

Exit status: 0 no problem found (warnings allowed), 1 a problem was found
(--verify stops at the first one), 2 usage error.

Examples:
  sluice-dump --demo ./data/demo-0        write a demo log there and dump it
  sluice-dump --records ./data/demo-0     every batch and record
  sluice-dump --json --records ./data/demo-0/00000000000000000000.log
  sluice-dump --verify ./data/demo-0      CRCs, offsets, indexes, checkpoint
  sluice-dump -h | less

Without installing, from the root of a Sluice checkout:
  go run ./tools/cmd/sluice-dump --demo /tmp/demo-0
  go run ./tools/cmd/sluice-dump --verify /tmp/demo-0
  go run ./tools/cmd/sluice-dump --records /tmp/demo-0/00000000000000000000.log
`

const usageHint = "Run sluice-dump -h for usage.\n"

// Main runs sluice-dump with args (without the program name), writing the
// dump (and the usage, for -h) to stdout and problems, warnings and usage
// errors to stderr. It returns the exit status: ExitOK, ExitProblem or
// ExitUsage.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainAs("sluice-dump", args, stdout, stderr)
}

// MainAs is Main for a program that embeds the tool under another name
// (the broker's "sluice dump-log"): -h says so.
func MainAs(prog string, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "truncate" {
		return truncateMain(prog, args[1:], stdout, stderr, vfs.Default)
	}
	cfg, paths, code, ok := parseArgs(prog, args, stdout, stderr)
	if !ok {
		return code
	}
	d := newDumper(cfg, vfs.Default, stdout, stderr)
	defer d.out.Flush()
	if cfg.demo != "" {
		wrote, err := writeDemo(d.fs, cfg.demo, stderr)
		if err != nil {
			d.out.Flush()
			fmt.Fprintf(stderr, "sluice-dump: demo: %v\n", err)
			return ExitProblem
		}
		if !wrote {
			fmt.Fprintf(stderr, "sluice-dump: %s already holds a log; dumping it as it is\n", cfg.demo)
		}
		if !cfg.verify {
			d.cfg.records = true
		}
		paths = []string{cfg.demo}
	}
	for _, p := range paths {
		if d.stop {
			break
		}
		d.path(p)
	}
	if cfg.verify && d.problems == 0 {
		d.printVerified()
	}
	if d.problems > 0 {
		return ExitProblem
	}
	return ExitOK
}

// printVerified prints --verify's last lines: one per index or checkpoint
// PATH, then one totalling the segments read (if any).
func (d *dumper) printVerified() {
	for _, v := range d.verified {
		if d.cfg.json {
			d.emit(v.json)
		} else {
			fmt.Fprintf(d.out, "verified: %s\n", v.text)
		}
	}
	if d.segments == 0 {
		return
	}
	if d.cfg.json {
		d.emit(&jsonVerified{Type: "verified", Batches: d.batches, Records: d.records, Segments: d.segments})
	} else {
		raft := ""
		if d.raftEntries > 0 {
			raft = " (" + plural(d.raftEntries, "raft entry", "raft entries") + ")"
		}
		fmt.Fprintf(d.out, "verified: %s%s, %s, %s\n", plural(d.batches, "batch", "batches"), raft,
			plural(d.records, "record", "records"), plural(d.segments, "segment", "segments"))
	}
}

// plural returns "1 batch", "2 batches", "0 batches".
func plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// parseArgs parses flags, which may be mixed with paths; everything after
// "--" is a path.
func parseArgs(prog string, args []string, stdout, stderr io.Writer) (cfg config, paths []string, code int, ok bool) {
	fs := flag.NewFlagSet("sluice-dump", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed below; the usage only for -h
	fs.Usage = func() {}
	cfg.prog = prog
	fs.BoolVar(&cfg.records, "records", false, "also print every record: offset, timestamp, key, value, headers")
	fs.IntVar(&cfg.maxValueBytes, "max-value-bytes", 64, "show at most this many bytes of each key, value and header value (-1: all)")
	fs.BoolVar(&cfg.json, "json", false, "print JSON lines (one object per batch, and per record with --records)")
	fs.BoolVar(&cfg.verify, "verify", false, "check CRCs, record structure, offsets, indexes and the checkpoint instead of printing; stop with exit status 1 at the first problem")
	fs.StringVar(&cfg.demo, "demo", "", "write a small demo partition log into `DIR` (unless it holds one), then dump it with --records")
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if cfg.prog != "" && cfg.prog != "sluice-dump" {
					fmt.Fprintf(stdout, "%s is sluice-dump built into the broker binary: the flags and output are the same.\n\n", cfg.prog)
				}
				fmt.Fprint(stdout, usageText)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				fmt.Fprint(stdout, usageTail)
				return cfg, nil, ExitOK, false
			}
			fmt.Fprintf(stderr, "sluice-dump: %v\n%s", err, usageHint)
			return cfg, nil, ExitUsage, false
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		paths = append(paths, args[0])
		args = args[1:]
	}
	paths = append(paths, tail...)
	switch {
	case cfg.demo != "" && len(paths) > 0:
		fmt.Fprint(stderr, "sluice-dump: --demo DIR takes no other PATH\n"+usageHint)
	case cfg.demo == "" && len(paths) == 0:
		fmt.Fprint(stderr, "sluice-dump: no PATH given\n"+usageHint)
	default:
		if cfg.maxValueBytes < 0 {
			cfg.maxValueBytes = -1
		}
		return cfg, paths, ExitOK, true
	}
	return cfg, nil, ExitUsage, false
}

// dumper holds one run's state.
type dumper struct {
	cfg  config
	fs   vfs.FS
	out  *bufio.Writer
	errw io.Writer
	enc  *json.Encoder

	problems int
	stop     bool // --verify found a problem: do nothing more

	batches, records, segments int64
	raftEntries                int64          // internal batches (raft's own entries)
	verified                   []verifiedItem // --verify's lines for index and checkpoint PATHs
	raft                       *raftIndex     // the current segment's .raftindex, or nil
}

// verifiedItem is one "verified" line, as text (after "verified: ") and
// as a JSON object.
type verifiedItem struct {
	text string
	json any
}

func newDumper(cfg config, fs vfs.FS, stdout, stderr io.Writer) *dumper {
	d := &dumper{cfg: cfg, fs: fs, out: bufio.NewWriterSize(stdout, 64<<10), errw: stderr}
	d.enc = json.NewEncoder(d.out)
	d.enc.SetEscapeHTML(false)
	return d
}

// emit writes v as one JSON line.
func (d *dumper) emit(v any) {
	if err := d.enc.Encode(v); err != nil {
		d.errorf("json: %v", err) // unreachable: every value is encodable
	}
}

// problemf reports a problem at a byte position of a file (pos < 0: the
// file as a whole). With --verify it stops the run.
func (d *dumper) problemf(file string, pos int64, format string, args ...any) {
	d.report("", file, pos, fmt.Sprintf(format, args...))
	d.problems++
	if d.cfg.verify {
		d.stop = true
	}
}

// warnf reports something worth knowing that is not a problem.
func (d *dumper) warnf(file string, pos int64, format string, args ...any) {
	d.report("warning: ", file, pos, fmt.Sprintf(format, args...))
}

// notef reports something worth knowing that is not a problem.
func (d *dumper) notef(file string, format string, args ...any) {
	d.report("note: ", file, -1, fmt.Sprintf(format, args...))
}

// errorf reports a problem not tied to a file position.
func (d *dumper) errorf(format string, args ...any) {
	d.problemf("", -1, format, args...)
}

func (d *dumper) report(kind, file string, pos int64, msg string) {
	d.out.Flush() // keep stdout and stderr in order on a terminal
	var b strings.Builder
	b.WriteString("sluice-dump: ")
	b.WriteString(kind)
	if file != "" {
		b.WriteString(file)
		b.WriteString(": ")
	}
	if pos >= 0 {
		fmt.Fprintf(&b, "position %d: ", pos)
	}
	b.WriteString(msg)
	fmt.Fprintln(d.errw, b.String())
}
