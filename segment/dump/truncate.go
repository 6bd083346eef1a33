package dump

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

const truncateUsage = `Usage: %s truncate --at OFFSET [--yes] DIR

Cuts the partition log in DIR (a partition folder, <log dir>/<topic>-<partition>)
so that it ends before OFFSET: the segment holding OFFSET is cut at the batch
holding it (or at the first damaged batch before it) and every later segment
is removed. This deletes data: it is the repair for a log the broker found
damaged (its log line names the file, position and offset; pass that offset),
once the data past the damage is given up. Without --yes it only prints what
it would do. The broker must be stopped: the log dir's .lock is taken.

Flags:
`

// truncateMain runs "truncate" (args after the subcommand name).
func truncateMain(prog string, args []string, stdout, stderr io.Writer, fsys vfs.FS) int {
	fl := flag.NewFlagSet("truncate", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	at := fl.Int64("at", -1, "the first `OFFSET` to remove (required)")
	yes := fl.Bool("yes", false, "apply the cut (without it, only print what it would do)")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, truncateUsage, prog)
			fl.SetOutput(stdout)
			fl.PrintDefaults()
			return ExitOK
		}
		fmt.Fprintf(stderr, "%s truncate: %v\n", prog, err)
		return ExitUsage
	}
	if fl.NArg() != 1 || *at < 0 {
		fmt.Fprintf(stderr, "%s truncate: need --at OFFSET (>= 0) and one partition folder; run %s truncate -h for usage\n", prog, prog)
		return ExitUsage
	}
	dir := fl.Arg(0)
	lock, err := fsys.Lock(filepath.Join(filepath.Dir(dir), ".lock"))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			fmt.Fprintf(stderr, "%s truncate: the log dir's .lock is held: is the broker running? stop it first: %v\n", prog, err)
		} else {
			fmt.Fprintf(stderr, "%s truncate: cannot take the log dir's .lock: %v\n", prog, err)
		}
		return ExitProblem
	}
	defer lock.Close()
	plan, err := segment.TruncateFolder(fsys, dir, *at, *yes)
	if err != nil {
		fmt.Fprintf(stderr, "%s truncate: %v\n", prog, err)
		return ExitProblem
	}
	say := func(format string, args ...any) {
		if *yes {
			fmt.Fprintf(stdout, format+"\n", args...)
		} else {
			fmt.Fprintf(stdout, "would "+format+"\n", args...)
		}
	}
	if plan.Damage != nil {
		fmt.Fprintf(stdout, "damaged batch at %s position %d (offset %d): %v\n", plan.Segment, plan.Position, plan.EndOffset, plan.Damage)
	}
	if plan.Bytes > 0 {
		say("cut %s at position %d (%d bytes)", plan.Segment, plan.Position, plan.Bytes)
	}
	for _, name := range plan.Removed {
		say("remove %s", name)
	}
	say("leave the log ending at offset %d", plan.EndOffset)
	if !*yes {
		fmt.Fprintf(stdout, "nothing changed; run again with --yes to apply\n")
	}
	return ExitOK
}
