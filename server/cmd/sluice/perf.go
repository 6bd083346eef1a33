package main

// sluice perf produce|consume|e2e: the load generators of internal/perf (as
// Kafka's kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh and
// EndToEndLatency), with this binary's exit codes: a bad command line
// (perf.UsageError) exits 2, a failed run 1.

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/server/cmd/sluice/internal/perf"
)

func init() { register(newPerfCmd) }

func newPerfCmd() *cobra.Command {
	c := perf.NewCommand()
	mapPerfErrors(c)
	return c
}

// mapPerfErrors makes c's and its subcommands' usage errors this
// binary's.
func mapPerfErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return perfError(run(cmd, args)) }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return perfError(check(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		mapPerfErrors(sub)
	}
}

func perfError(err error) error {
	var ue *perf.UsageError
	if errors.As(err, &ue) {
		return &usageError{ue.Msg}
	}
	return err
}
