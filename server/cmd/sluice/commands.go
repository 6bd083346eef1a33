package main

// The command lines of the operator commands: each is a cobra command
// whose flags are checked here before typed options go to its function in
// reassign.go, elect.go or decommission.go.

import (
	"context"

	"github.com/spf13/cobra"
)

const clusterFlagsHelp = `Every command takes --bootstrap-server host:port[,host:port] (default ` + defaultBootstrap + `)
and --timeout DURATION (each request's bound, default 30s). --command-config FILE
is a Kafka client properties file: security.protocol (PLAINTEXT, SSL or
SASL_PLAINTEXT), ssl.* keys (PEM stores), sasl.mechanism and
sasl.jaas.config. For a TLS listener also --tls, --tls-ca FILE,
--tls-cert FILE --tls-key FILE (mutual TLS), --tls-server-name NAME.
`

func init() {
	register(newReassignCmd)
	register(newElectLeadersCmd)
	register(newDecommissionCmd)
}

func newReassignCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "reassign COMMAND",
		Short: "Move partitions between brokers (as kafka-reassign-partitions.sh, same APIs and JSON file)",
		Long: `Moves partitions between brokers, as Kafka's kafka-reassign-partitions.sh
does, with the same APIs (AlterPartitionReassignments,
ListPartitionReassignments) and the same reassignment JSON file.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: plan, execute, verify, cancel or list")
		},
	}
	c.AddCommand(newReassignPlanCmd(), newReassignExecuteCmd(), newReassignVerifyCmd(), newReassignCancelCmd(), newReassignListCmd())
	return c
}

// runAdmin connects to the cluster of cf and runs fn, stopping it on
// SIGINT or SIGTERM (the command's context is cancelled).
func runAdmin(cmd *cobra.Command, cf *clusterFlags, fn func(context.Context, *admin) error) error {
	a, err := cf.connect()
	if err != nil {
		return err
	}
	defer a.close()
	return fn(cmd.Context(), a)
}

func newReassignPlanCmd() *cobra.Command {
	c := command("plan --topics a,b --brokers 2,3,4 [--replication-factor N] [--out FILE]", `Prints the topics' current assignment and a proposed one, both in Kafka's
reassignment JSON: every topic's replicas, and all of them together, spread
evenly over the brokers; replicas already on a listed broker stay where the
spread allows; preferred leaders (first replicas) spread evenly too. It
changes nothing: give the proposal to sluice reassign execute.`)
	fs := c.Flags()
	topics := fs.String("topics", "", "the `topics` to place, comma-separated")
	brokers := fs.String("brokers", "", "the broker `ids` to spread them over, comma-separated")
	rf := fs.Int("replication-factor", 0, "`replicas` per partition (default: each partition's current count)")
	out := fs.String("out", "", "also write the proposal to `FILE`")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		o := planOptions{rf: *rf, out: *out}
		var err error
		if o.topics, err = parseNames("--topics", *topics); err != nil {
			return err
		}
		if o.brokers, err = parseIDs("--brokers", *brokers); err != nil {
			return err
		}
		if fs.Changed("replication-factor") && *rf < 1 {
			return usageErrorf("--replication-factor must be at least 1, not %d", *rf)
		}
		if *rf > len(o.brokers) {
			return usageErrorf("--replication-factor %d needs %d brokers, but --brokers lists %d", *rf, *rf, len(o.brokers))
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return reassignPlan(ctx, a, o, cmd.OutOrStdout())
		})
	}
	return c
}

// fileFlag reads --file, which is required.
func fileFlag(file string) ([]assignment, error) {
	if file == "" {
		return nil, usageErrorf("--file is required (a reassignment JSON file, as sluice reassign plan prints)")
	}
	return readReassignmentFile(file)
}

func newReassignExecuteCmd() *cobra.Command {
	c := command("execute --file FILE [--throttle BYTES_PER_SEC] [--additional]", `Starts moving every partition of FILE to its replicas there
(AlterPartitionReassignments), after printing the current assignment to
roll back with. With --throttle it first limits the replication the moves
cause, as Kafka's tool does: the topic configs
leader.replication.throttled.replicas and
follower.replication.throttled.replicas name the moving partitions' current
and new replicas, and leader.replication.throttled.rate and
follower.replication.throttled.rate are set on every broker involved.
sluice reassign verify removes them once the moves are complete.`)
	fs := c.Flags()
	file := fs.String("file", "", "the reassignment, a `file` of Kafka's JSON")
	throttle := fs.Int64("throttle", 0, "limit the moves' replication to this many `bytes/s` per broker (default: no throttle)")
	additional := fs.Bool("additional", false, "start even while other reassignments are in progress")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if fs.Changed("throttle") && *throttle <= 0 {
			return usageErrorf("--throttle must be a positive number of bytes per second, not %d", *throttle)
		}
		plan, err := fileFlag(*file)
		if err != nil {
			return err
		}
		o := executeOptions{file: *file, throttle: *throttle, additional: *additional}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return reassignExecute(ctx, a, plan, o, cmd.OutOrStdout())
		})
	}
	return c
}

func newReassignVerifyCmd() *cobra.Command {
	c := command("verify --file FILE [--wait DURATION] [--preserve-throttles]", `Reports each partition of FILE: complete (its replicas are the file's and it
is not moving), in progress (with the replicas being added and removed), or
a mismatch. Once all are complete it removes the replication throttle
(the topic configs of FILE's topics and every broker's rates, keeping
those of topics, or brokers, that other reassignments still use). Exits 0
only if all are complete.`)
	fs := c.Flags()
	file := fs.String("file", "", "the reassignment, a `file` of Kafka's JSON")
	wait := fs.Duration("wait", 0, "poll until every partition is complete, for at most this long (e.g. 10m)")
	preserve := fs.Bool("preserve-throttles", false, "leave the throttle configs in place")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if *wait < 0 {
			return usageErrorf("--wait must not be negative")
		}
		plan, err := fileFlag(*file)
		if err != nil {
			return err
		}
		o := verifyOptions{wait: *wait, preserveThrottles: *preserve}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return reassignVerify(ctx, a, plan, o, cmd.OutOrStdout())
		})
	}
	return c
}

func newReassignCancelCmd() *cobra.Command {
	c := command("cancel --file FILE | --topic T --partition P [--preserve-throttles]", `Cancels the reassignment of FILE's partitions, or of one partition
(AlterPartitionReassignments with null replicas): each goes back to the
replicas it had. A partition not moving is reported, not a failure. Then
it removes the throttle as verify does.`)
	fs := c.Flags()
	file := fs.String("file", "", "cancel every partition of this `file` (Kafka's JSON)")
	topic := fs.String("topic", "", "cancel one partition: its `topic`")
	partition := fs.Int("partition", 0, "and its `partition` number")
	preserve := fs.Bool("preserve-throttles", false, "leave the throttle configs in place")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		var parts []tp
		switch {
		case *file != "" && (*topic != "" || fs.Changed("partition")):
			return usageErrorf("give --file, or --topic and --partition, not both")
		case *file != "":
			plan, err := readReassignmentFile(*file)
			if err != nil {
				return err
			}
			for _, p := range plan {
				parts = append(parts, p.tp())
			}
		case *topic == "" && !fs.Changed("partition"):
			return usageErrorf("give --file FILE, or --topic T --partition P")
		case *topic == "" || !fs.Changed("partition") || *partition < 0:
			return usageErrorf("--topic and --partition go together (partition 0 or more)")
		default:
			parts = []tp{{*topic, int32(*partition)}}
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return reassignCancel(ctx, a, parts, *preserve, cmd.OutOrStdout())
		})
	}
	return c
}

func newReassignListCmd() *cobra.Command {
	c := command("list", `Prints every partition reassignment in progress (ListPartitionReassignments):
topic, partition, replicas, and the replicas being added and removed.`)
	fs := c.Flags()
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return reassignList(ctx, a, cmd.OutOrStdout())
		})
	}
	return c
}

func newElectLeadersCmd() *cobra.Command {
	c := command("elect-leaders [--topic T [--partition P]] [--type preferred|unclean]", `Elects leaders (ElectLeaders), as Kafka's kafka-leader-election.sh: of every
partition of the cluster, of a topic's, or of one partition. preferred
moves leadership to each partition's first replica when it is in the ISR;
unclean elects any live replica for a partition that has no leader, at the
price of what the ISR had and it lacks. "No election needed" is not a
failure.`)
	fs := c.Flags()
	topic := fs.String("topic", "", "only this `topic`'s partitions")
	partition := fs.Int("partition", 0, "only this `partition` of --topic")
	typ := fs.String("type", "preferred", "the election: `preferred|unclean`")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		o := electOptions{topic: *topic, partition: -1}
		if fs.Changed("partition") {
			o.partition = int32(*partition)
		}
		switch *typ {
		case "preferred":
		case "unclean":
			o.unclean = true
		default:
			return usageErrorf("--type must be preferred or unclean, not %q", *typ)
		}
		if fs.Changed("partition") && (*topic == "" || *partition < 0) {
			return usageErrorf("--partition needs --topic, and is 0 or more")
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return electLeaders(ctx, a, o, cmd.OutOrStdout())
		})
	}
	return c
}

func newDecommissionCmd() *cobra.Command {
	c := command("decommission --broker N [--wait DURATION]", `Sends UnregisterBroker for broker N and prints its answer. In Sluice, a broker
that holds replicas is decommissioned: its replicas move to the other
brokers, then it is fenced, and it is unregistered once stopped. --wait
polls Metadata until no partition names N and N is no longer listed.`)
	fs := c.Flags()
	broker := fs.Int("broker", 0, "the broker's `id`")
	wait := fs.Duration("wait", 0, "poll until the broker is gone, for at most this long (e.g. 10m)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if !fs.Changed("broker") {
			return usageErrorf("--broker is required")
		}
		if *broker < 0 || *broker > 1<<31-1 {
			return usageErrorf("--broker %d is not a broker id", *broker)
		}
		if *wait < 0 {
			return usageErrorf("--wait must not be negative")
		}
		o := decommissionOptions{broker: int32(*broker), wait: *wait}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return decommission(ctx, a, o, cmd.OutOrStdout())
		})
	}
	return c
}
