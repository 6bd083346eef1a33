package main

// The command tree (cobra): every command file registers its top-level
// commands in init with register; run builds the tree, runs the command
// the arguments name, and turns its error into the exit code:
//
//	0  success
//	1  the command failed (printed as "sluice CMD: error", with Kafka's
//	   error name and a one-line hint when there is one)
//	2  a bad command line (unknown command or flag, a bad value)
//
// Commands write to cmd.OutOrStdout() and cmd.ErrOrStderr() (tests run
// the tree in-process), and take cmd.Context(), which SIGINT and SIGTERM
// cancel; a command that takes no context says so (noSignalContext), and
// those signals end it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// builders are the top-level commands, in registration order.
var builders []func() *cobra.Command

// register adds a top-level command; call it from init.
func register(build func() *cobra.Command) { builders = append(builders, build) }

// newRoot builds the command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Sluice, a Kafka-compatible streaming broker, and its operator's tools",
		Long: `Sluice is a Kafka-compatible streaming broker (sluice serve), and the tools
to operate any Kafka-compatible cluster: topics, groups, produce, consume,
load tests, partition moves. Every cluster command takes
--bootstrap-server host:port[,host:port] (default ` + defaultBootstrap + `).`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required")
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	for _, b := range builders {
		root.AddCommand(b())
	}
	// cobra's completion command has no Run, so cobra would answer
	// "completion" and "completion bsh" with its help and exit 0 (and
	// `source <(sluice completion bsh)` would source the help); and its
	// help command looks its topic up with Find, which (every command
	// here checking its own arguments) takes "help nosuch" for the root
	// and prints the root's help, exit 0. A missing or unknown shell or
	// topic is a bad command line, as for every other command.
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			c.Args = noArgs
			c.RunE = func(*cobra.Command, []string) error {
				return usageErrorf("a shell is required: bash, zsh, fish or powershell")
			}
		case "help":
			help := c.Run
			c.Run = nil
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if _, rest, err := cmd.Root().Find(args); err != nil || len(rest) > 0 {
					return usageErrorf("no help topic %q", strings.Join(args, " "))
				}
				help(cmd, args)
				return nil
			}
		}
	}
	root.AddCommand(&cobra.Command{
		Use:    "version",
		Short:  "Print the version",
		Args:   noArgs,
		Hidden: true,
		Run:    func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version()) },
	})
	return root
}

// noSignalContext, as a command's annotation, marks a command that never
// looks at cmd.Context(): run leaves SIGINT and SIGTERM to end it as they
// end any process (caught for it, they would be ignored: Ctrl-C would not
// stop it).
const noSignalContext = "sluice/no-signal-context"

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	ctx := context.Background()
	if c, _, err := root.Find(args); err != nil || c.Annotations[noSignalContext] == "" {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := "sluice"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var ec exitError
	switch {
	case errors.As(err, &ec):
		return int(ec)
	case strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	return finish(name, err, stderr)
}

// command is a command with no positional arguments: use is its name and
// synopsis, long what it does (its first sentence is the short help).
func command(use, long string) *cobra.Command {
	short := long
	if i := strings.Index(short, ". "); i >= 0 {
		short = short[:i]
	}
	short = strings.TrimSuffix(strings.Join(strings.Fields(short), " "), ".")
	return &cobra.Command{Use: use, Short: short, Long: long, Args: noArgs}
}

// noArgs refuses positional arguments as a bad command line (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usageErrorf("unknown command %q", args[0])
		}
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}

// exitError is an exit code a command chose itself (it printed why).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitCode turns a code from a command line parsed elsewhere (dump-log)
// into run's error.
func exitCode(code int) error {
	if code == 0 {
		return nil
	}
	return exitError(code)
}
