package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/sluicemq/sluice/server/cmd/sluice/internal/clienttls"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBootstrap is --bootstrap-server's default: the single node
// `sluice serve` runs with no flags.
const DefaultBootstrap = "127.0.0.1:9092"

// UsageError is a bad command line found after flag parsing; the sluice
// binary exits 2 on it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{fmt.Sprintf(format, args...)}
}

// NewCommand is the `perf` command and its subcommands produce, consume
// and e2e. Each writes its result to the command's stdout and its
// progress line to its stderr (when that is a terminal), and stops early,
// reporting what it did, when cmd.Context() is cancelled.
func NewCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "perf COMMAND",
		Short: "Load tests: produce, consume, end-to-end latency (as Kafka's perf-test tools)",
		Long: `Load generators for any Kafka-compatible cluster, as Kafka's
kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh and EndToEndLatency:
records/s, MB/s (MiB) and latency percentiles (p50, p95, p99, p99.9, max)
from an HDR histogram; a fixed rate (open loop: latency counts from when a
record was due) or the maximum rate; a progress line on a terminal; --json
prints one JSON object instead of the summary line.

  produce  send records; latency is until each is acknowledged
  consume  read records; latency is from each record's timestamp to its
           receipt (meaningful when the producers' clocks are this machine's)
  e2e      send and receive in one process; latency is from send to receipt

Every command takes --bootstrap-server host:port[,host:port] (default ` + DefaultBootstrap + `).`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("a command is required: produce, consume or e2e")
		},
	}
	c.AddCommand(newProduceCmd(), newConsumeCmd(), newE2ECmd())
	return c
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usagef("unknown command %q", args[0])
		}
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// common are the flags of every perf command.
type common struct {
	bootstrap string
	topic     string
	n         int64
	duration  time.Duration
	json      bool
	sec       *clienttls.Flags
	dial      []kgo.Opt // from sec, set by check
}

func addCommon(fs *pflag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.bootstrap, "bootstrap-server", DefaultBootstrap, "the cluster: any of its brokers, comma-separated `host:port`s")
	fs.StringVar(&c.topic, "topic", "", "the `topic` (required)")
	fs.Int64Var(&c.n, "num-records", 0, "stop after this many `records`")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (e.g. 30s); with --num-records, whichever comes first (at a fixed --throughput: send the records due within it, however long that takes)")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	c.sec = clienttls.Add(fs)
	return c
}

// check validates the common flags and returns the seed brokers.
func (c *common) check() ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(c.bootstrap, ",") {
		s = strings.TrimSpace(s)
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			return nil, usagef("--bootstrap-server: %q is not host:port", s)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, usagef("--bootstrap-server: %q: bad port", s)
		}
		seeds = append(seeds, s)
	}
	switch {
	case c.topic == "":
		return nil, usagef("--topic is required")
	case c.n < 0:
		return nil, usagef("--num-records must not be negative, not %d", c.n)
	case c.duration < 0:
		return nil, usagef("--duration must not be negative, not %v", c.duration)
	case c.n == 0 && c.duration == 0:
		return nil, usagef("give --num-records N or --duration D (or both)")
	}
	dial, err := c.sec.Opts()
	if err != nil {
		return nil, err
	}
	c.dial = dial
	return seeds, nil
}

// baseOpts are every client's options: the seeds, the client id, TLS if
// asked.
func baseOpts(seeds []string, dial []kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("sluice-perf")}, dial...)
}

// progressWriter is stderr when it is a terminal, else nil (no progress
// line).
func progressWriter(cmd *cobra.Command) io.Writer {
	w := cmd.ErrOrStderr()
	if f, ok := w.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return f
	}
	return nil
}

// finish prints the result and turns its failures into the command's
// error.
func finish(cmd *cobra.Command, c *common, r Result, st *stats, err error) error {
	if !r.started {
		return err
	}
	if werr := r.write(cmd.OutOrStdout(), c.json); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	st.mu.Lock()
	first := st.firstErr
	st.mu.Unlock()
	if r.Errors > 0 {
		return fmt.Errorf("%d records failed; the first: %w", r.Errors, first)
	}
	return nil
}

// errorText is err as the result reports it: a Kafka error starts with
// Kafka's name (UNKNOWN_TOPIC_OR_PARTITION: ...).
func errorText(err error) string { return err.Error() }

// interrupted reports whether err is the run's own cancellation.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed))
}
