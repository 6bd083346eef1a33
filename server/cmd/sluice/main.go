// Command sluice is the Sluice broker, and its operator's tool.
//
//	sluice serve [FILE | --config FILE] [--set key=value]...   run a broker
//	sluice topic|group|produce|consume|cluster ...     Kafka's everyday tools, against any Kafka cluster
//	sluice perf produce|consume|e2e [flags]             load tests (as Kafka's perf-test tools)
//	sluice dump-log [flags] PATH...                     inspect segment files (as sluice-dump)
//	sluice reassign plan|execute|verify|cancel|list     move partitions (as kafka-reassign-partitions.sh)
//	sluice elect-leaders [flags]                        elect leaders (as kafka-leader-election.sh)
//	sluice decommission --broker N [--wait DURATION]    move a broker's replicas away and retire it
//	sluice user scram add|delete|describe               SCRAM credentials (as kafka-configs.sh --entity-type users)
//	sluice completion bash|zsh|fish|powershell          shell completion
//
// FILE uses Kafka's server.properties syntax and key names; --set
// overrides any key and may repeat. With no flags the broker is one node
// listening on 127.0.0.1:9092 with its data in ./data.
//
// The operator commands talk to any Kafka-compatible cluster with Kafka's
// APIs (--bootstrap-server host:port[,host:port], default
// 127.0.0.1:9092, and --command-config FILE for a SASL listener); they
// read and write Kafka's reassignment JSON, so
// Kafka's own tools and these can be mixed. The command tree is built with
// cobra (root.go); every command file registers its commands in init.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/segment/dump"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// version is the broker's version (server.Version) and what else the
// build recorded: the commit, its time, the Go toolchain.
func version() string {
	bi := server.Build()
	var more []string
	if bi.Revision != "" {
		r := "revision " + bi.Revision
		if bi.Modified {
			r += " with uncommitted changes"
		}
		more = append(more, r)
	}
	if bi.Time != "" {
		more = append(more, "committed "+bi.Time)
	}
	if bi.GoVersion != "" {
		more = append(more, bi.GoVersion)
	}
	if len(more) == 0 {
		return "sluice " + bi.Version
	}
	return "sluice " + bi.Version + " (" + strings.Join(more, ", ") + ")"
}

// keysHelp lists every config key with its default (units are in the
// names, as in Kafka: .ms, .bytes, .minutes).
func keysHelp(w io.Writer) {
	fmt.Fprintln(w, "\nConfig keys and their defaults (docs/configuration.md says what each does):")
	d := config.Default()
	for _, k := range config.Keys() {
		v, _ := d.String(k)
		if syn := config.Synonyms(k); len(syn) > 0 {
			fmt.Fprintf(w, "  %s=%s   (also %s)\n", k, v, strings.Join(syn, ", "))
			continue
		}
		fmt.Fprintf(w, "  %s=%s\n", k, v)
	}
}

func init() {
	register(newServeCmd)
	register(newDumpLogCmd)
}

func newServeCmd() *cobra.Command {
	c := command("serve [FILE | --config FILE] [--set key=value]...", `Runs a broker. With no FILE and no --set it is one node listening on
127.0.0.1:9092 with its data in ./data, its web console on
http://127.0.0.1:9644/ui/ and its metrics on /metrics there. It runs until
SIGTERM or SIGINT (Ctrl-C), then finishes the requests in flight, syncs and
closes; a restart finds everything.`)
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageErrorf("one config FILE at most, got %d arguments: %s", len(args), strings.Join(args, " "))
		}
		return nil
	}
	c.DisableFlagsInUseLine = true
	file := c.Flags().String("config", "", "read the config from `FILE`, the same as giving FILE as the argument (not both, unless the same file)")
	sets := c.Flags().StringArray("set", nil, "set one config `key=value`, over FILE's value and the default; repeat it for more keys (the last --set of a key wins)")
	c.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "%s\n\nusage:\n  %s\n\n%s\nflags:\n%s%s", cmd.Long, cmd.UseLine(), serveArgsHelp, cmd.Flags().FlagUsages(), serveKeysNote)
		keysHelp(w)
	})
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			if *file != "" && *file != args[0] {
				return usageErrorf("two config files: %s and --config %s", args[0], *file)
			}
			*file = args[0]
		}
		for _, s := range *sets {
			if !strings.Contains(s, "=") {
				return usageErrorf("--set: want key=value, got %q", s)
			}
		}
		return serve(*file, *sets, cmd.ErrOrStderr())
	}
	return c
}

// newDumpLogCmd hands its arguments to segment/dump's own command line,
// which parses its flags. It takes no cmd.Context(), so SIGINT ends it as
// any process. (The fault runner is not part of this binary: it is
// tools/cmd/sluice-chaos, which runs this binary as its brokers.)
func newDumpLogCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "dump-log [flags] PATH...",
		Short:              "Print segment, index and snapshot files (as sluice-dump; dump-log -h for its flags)",
		DisableFlagParsing: true,
		Annotations:        map[string]string{noSignalContext: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitCode(dump.MainAs("sluice dump-log", args, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
}

// serveArgsHelp and serveKeysNote are sluice serve -h's words on its
// argument and on the keys, around cobra's list of flags.
const (
	serveArgsHelp = `arguments:
  FILE              a server.properties file: Kafka's syntax (java.util.Properties)
                    and key names, as kafka-server-start.sh takes it; Kafka 4's own
                    config/server.properties starts unchanged
`
	serveKeysNote = `
Every broker key Kafka 4 documents is accepted: the keys below are honoured,
and the others are named in one line at start-up, accepted and not acted on.
An unknown key or a bad value stops start-up, naming the key and where it was
given (the file's line, or --set). Of a key's synonyms the more precise name
wins, whatever the source (log.retention.ms over log.retention.minutes over
log.retention.hours).
`
)

// serve runs a broker until SIGTERM or SIGINT, or until it fails.
func serve(file string, sets []string, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := config.Load(file, sets)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if keys := cfg.Unacted(); len(keys) > 0 {
		logger.Info("sluice: accepted Kafka config keys that Sluice does not act on", "keys", strings.Join(keys, ","))
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
		return err
	}
	if err := b.Start(); err != nil {
		b.Close()
		return err
	}
	io.WriteString(stderr, b.Banner(configSource(file, sets)))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		logger.Info("sluice: shutting down", "signal", s.String())
	case err := <-b.Fatal():
		logger.Error("sluice: stopping", "err", err)
		b.Close()
		return errReported
	}
	if err := b.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		logger.Error("sluice: shutdown", "err", err)
		return errReported
	}
	logger.Info("sluice: stopped")
	return nil
}

// configSource says where serve's configuration came from, for the
// banner.
func configSource(file string, sets []string) string {
	var src []string
	if file != "" {
		src = append(src, file)
	}
	switch len(sets) {
	case 0:
	case 1:
		src = append(src, "1 --set")
	default:
		src = append(src, fmt.Sprintf("%d --set", len(sets)))
	}
	if len(src) == 0 {
		return "defaults (no --config or --set; sluice serve -h lists every key)"
	}
	return strings.Join(src, " + ") + ", over the defaults"
}
