// Command sluice is the Sluice broker, and its operator's tool.
//
//	sluice serve [--config FILE] [--set key=value]...   run a broker
//	sluice dump-log [flags] PATH...                     inspect segment files (as sluice-dump)
//	sluice reassign plan|execute|verify|cancel|list     move partitions (as kafka-reassign-partitions.sh)
//	sluice elect-leaders [flags]                        elect leaders (as kafka-leader-election.sh)
//	sluice decommission --broker N [--wait DURATION]    move a broker's replicas away and retire it
//
// FILE uses Kafka's server.properties syntax and key names; --set
// overrides any key and may repeat. With no flags the broker is one node
// listening on 127.0.0.1:9092 with its data in ./data.
//
// The operator commands talk to any Kafka-compatible cluster with Kafka's
// APIs (--bootstrap-server host:port[,host:port], default
// 127.0.0.1:9092); they read and write Kafka's reassignment JSON, so
// Kafka's own tools and these can be mixed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/tools/dump"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  sluice serve [--config FILE] [--set key=value]...   (sluice serve -h lists every key)
  sluice dump-log [flags] PATH...   (sluice dump-log -h for its flags)
  sluice reassign plan|execute|verify|cancel|list [flags]   move partitions (sluice reassign -h)
  sluice elect-leaders [--topic T [--partition P]] [--type preferred|unclean]
  sluice decommission --broker N [--wait DURATION]
  sluice chaos [--seed N] [--time-limit D] [--faults K,...]   the fault runner on a local cluster (sluice chaos -h)
  sluice --version

The cluster commands (reassign, elect-leaders, decommission) take
--bootstrap-server host:port[,host:port] (default ` + defaultBootstrap + `); COMMAND -h lists a command's flags.
`

// version is the module version and VCS revision the binary was built
// from, as Go records them.
func version() string {
	v, rev, dirty := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
	}
	if rev != "" {
		return fmt.Sprintf("sluice %s (revision %s%s)", v, rev, dirty)
	}
	return "sluice " + v
}

// keysHelp lists every config key with its default (units are in the
// names, as in Kafka: .ms, .bytes, .minutes).
func keysHelp(w io.Writer) {
	fmt.Fprintln(w, "\nConfig keys (Kafka's names) and their defaults:")
	d := config.Default()
	for _, k := range config.Keys() {
		v, _ := d.String(k)
		fmt.Fprintf(w, "  %s=%s\n", k, v)
	}
}

// setFlags collects repeated --set key=value flags.
type setFlags []string

func (s *setFlags) String() string { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want key=value, got %q", v)
	}
	*s = append(*s, v)
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "dump-log":
		return dump.MainAs("sluice dump-log", args[1:], stdout, stderr)
	case "reassign":
		return reassignCmd(args[1:], stdout, stderr)
	case "elect-leaders":
		return electLeadersCmd(args[1:], stdout, stderr)
	case "decommission":
		return decommissionCmd(args[1:], stdout, stderr)
	case "chaos":
		return chaosCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "--version", "version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n%s", args[0], usage)
	return 2
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "a server.properties `FILE` (Kafka syntax and key names)")
	var sets setFlags
	fs.Var(&sets, "set", "override one config `key=value` (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice serve [--config FILE] [--set key=value]...")
		fs.PrintDefaults()
		keysHelp(stderr)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := config.Load(*file, sets)
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	if before, after, err := server.RaiseOpenFileLimit(); err != nil {
		logger.Warn("sluice: cannot raise the open-file limit (RLIMIT_NOFILE)", "soft", before, "err", err)
	} else if after != before {
		logger.Info("sluice: raised the open-file limit (RLIMIT_NOFILE) to the hard limit", "from", before, "to", after)
	}
	opts := server.Options{Logger: logger}
	installFaults(&opts) // the faults build only (faults_on.go)
	b, err := server.NewWithOptions(cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 1
	}
	if err := b.Start(); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		b.Close()
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		logger.Info("sluice: shutting down", "signal", s.String())
	case err := <-b.Fatal():
		logger.Error("sluice: stopping", "err", err)
		b.Close()
		return 1
	}
	if err := b.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		logger.Error("sluice: shutdown", "err", err)
		return 1
	}
	logger.Info("sluice: stopped")
	return 0
}
