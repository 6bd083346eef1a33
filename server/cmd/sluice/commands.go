package main

// The command lines of the operator commands: each parses its flags (one
// flag.FlagSet per command, as serve does), checks them, and hands typed
// options to its function in reassign.go, elect.go or decommission.go.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const clusterFlagsHelp = `Every command takes --bootstrap-server host:port[,host:port] (default ` + defaultBootstrap + `)
and --timeout DURATION (each request's bound, default 30s).
`

const reassignUsage = `usage: sluice reassign COMMAND [flags]   (Kafka's kafka-reassign-partitions.sh, same APIs and file)

  plan     --topics a,b --brokers 2,3,4 [--replication-factor N] [--out FILE]
           print the topics' current assignment and a proposal spreading them over the brokers
  execute  --file FILE [--throttle BYTES_PER_SEC] [--additional]
           start moving every partition of FILE (Kafka's reassignment JSON)
  verify   --file FILE [--wait DURATION] [--preserve-throttles]
           report each partition; once all are complete, remove the throttle
  cancel   --file FILE | --topic T --partition P [--preserve-throttles]
           cancel reassignments: each partition goes back to the replicas it had
  list     print every reassignment in progress

` + clusterFlagsHelp + `sluice reassign COMMAND -h lists a command's flags.
`

func reassignCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, reassignUsage)
		return 2
	}
	switch args[0] {
	case "plan":
		return reassignPlanCmd(args[1:], stdout, stderr)
	case "execute":
		return reassignExecuteCmd(args[1:], stdout, stderr)
	case "verify":
		return reassignVerifyCmd(args[1:], stdout, stderr)
	case "cancel":
		return reassignCancelCmd(args[1:], stdout, stderr)
	case "list":
		return reassignListCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, reassignUsage)
		return 0
	}
	fmt.Fprintf(stderr, "sluice reassign: unknown command %q\n%s", args[0], reassignUsage)
	return 2
}

// newFlagSet is a command's flag set; -h prints synopsis, then what it
// does, then the flags.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\n%s\n\nflags:\n", synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// isSet reports whether the command line gave flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// withAdmin connects to the cluster and runs fn, stopping it on SIGINT or
// SIGTERM, and returns the exit code.
func withAdmin(name string, cf *clusterFlags, stderr io.Writer, fn func(context.Context, *admin) error) int {
	a, err := cf.connect()
	if err != nil {
		return finish(name, err, stderr)
	}
	defer a.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return finish(name, fn(ctx, a), stderr)
}

func reassignPlanCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice reassign plan"
	fs := newFlagSet(name, name+" --topics a,b --brokers 2,3,4 [--replication-factor N] [--out FILE]",
		`Prints the topics' current assignment and a proposed one, both in Kafka's
reassignment JSON: every topic's replicas, and all of them together, spread
evenly over the brokers; replicas already on a listed broker stay where the
spread allows; preferred leaders (first replicas) spread evenly too. It
changes nothing: give the proposal to sluice reassign execute.`, stderr)
	topics := fs.String("topics", "", "the `topics` to place, comma-separated")
	brokers := fs.String("brokers", "", "the broker `ids` to spread them over, comma-separated")
	rf := fs.Int("replication-factor", 0, "`replicas` per partition (default: each partition's current count)")
	out := fs.String("out", "", "also write the proposal to `FILE`")
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	o := planOptions{rf: *rf, out: *out}
	var err error
	if o.topics, err = parseNames("--topics", *topics); err != nil {
		return finish(name, err, stderr)
	}
	if o.brokers, err = parseIDs("--brokers", *brokers); err != nil {
		return finish(name, err, stderr)
	}
	if isSet(fs, "replication-factor") && *rf < 1 {
		return finish(name, usageErrorf("--replication-factor must be at least 1, not %d", *rf), stderr)
	}
	if *rf > len(o.brokers) {
		return finish(name, usageErrorf("--replication-factor %d needs %d brokers, but --brokers lists %d", *rf, *rf, len(o.brokers)), stderr)
	}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return reassignPlan(ctx, a, o, stdout)
	})
}

// fileFlag reads --file, which is required.
func fileFlag(file string) ([]assignment, error) {
	if file == "" {
		return nil, usageErrorf("--file is required (a reassignment JSON file, as sluice reassign plan prints)")
	}
	return readReassignmentFile(file)
}

func reassignExecuteCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice reassign execute"
	fs := newFlagSet(name, name+" --file FILE [--throttle BYTES_PER_SEC] [--additional]",
		`Starts moving every partition of FILE to its replicas there
(AlterPartitionReassignments), after printing the current assignment to
roll back with. With --throttle it first limits the replication the moves
cause, as Kafka's tool does: the topic configs
leader.replication.throttled.replicas and
follower.replication.throttled.replicas name the moving partitions' current
and new replicas, and leader.replication.throttled.rate and
follower.replication.throttled.rate are set on every broker involved.
sluice reassign verify removes them once the moves are complete.`, stderr)
	file := fs.String("file", "", "the reassignment, a `file` of Kafka's JSON")
	throttle := fs.Int64("throttle", 0, "limit the moves' replication to this many `bytes/s` per broker (default: no throttle)")
	additional := fs.Bool("additional", false, "start even while other reassignments are in progress")
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	if isSet(fs, "throttle") && *throttle <= 0 {
		return finish(name, usageErrorf("--throttle must be a positive number of bytes per second, not %d", *throttle), stderr)
	}
	plan, err := fileFlag(*file)
	if err != nil {
		return finish(name, err, stderr)
	}
	o := executeOptions{file: *file, throttle: *throttle, additional: *additional}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return reassignExecute(ctx, a, plan, o, stdout)
	})
}

func reassignVerifyCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice reassign verify"
	fs := newFlagSet(name, name+" --file FILE [--wait DURATION] [--preserve-throttles]",
		`Reports each partition of FILE: complete (its replicas are the file's and it
is not moving), in progress (with the replicas being added and removed), or
a mismatch. Once all are complete it removes the replication throttle
(the topic configs of FILE's topics and every broker's rates, keeping
those of topics, or brokers, that other reassignments still use). Exits 0
only if all are complete.`, stderr)
	file := fs.String("file", "", "the reassignment, a `file` of Kafka's JSON")
	wait := fs.Duration("wait", 0, "poll until every partition is complete, for at most this long (e.g. 10m)")
	preserve := fs.Bool("preserve-throttles", false, "leave the throttle configs in place")
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	if *wait < 0 {
		return finish(name, usageErrorf("--wait must not be negative"), stderr)
	}
	plan, err := fileFlag(*file)
	if err != nil {
		return finish(name, err, stderr)
	}
	o := verifyOptions{wait: *wait, preserveThrottles: *preserve}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return reassignVerify(ctx, a, plan, o, stdout)
	})
}

func reassignCancelCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice reassign cancel"
	fs := newFlagSet(name, name+" --file FILE | --topic T --partition P [--preserve-throttles]",
		`Cancels the reassignment of FILE's partitions, or of one partition
(AlterPartitionReassignments with null replicas): each goes back to the
replicas it had. A partition not moving is reported, not a failure. Then
it removes the throttle as verify does.`, stderr)
	file := fs.String("file", "", "cancel every partition of this `file` (Kafka's JSON)")
	topic := fs.String("topic", "", "cancel one partition: its `topic`")
	partition := fs.Int("partition", 0, "and its `partition` number")
	preserve := fs.Bool("preserve-throttles", false, "leave the throttle configs in place")
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	var parts []tp
	switch {
	case *file != "" && (*topic != "" || isSet(fs, "partition")):
		return finish(name, usageErrorf("give --file, or --topic and --partition, not both"), stderr)
	case *file != "":
		plan, err := readReassignmentFile(*file)
		if err != nil {
			return finish(name, err, stderr)
		}
		for _, p := range plan {
			parts = append(parts, p.tp())
		}
	case *topic == "" && !isSet(fs, "partition"):
		return finish(name, usageErrorf("give --file FILE, or --topic T --partition P"), stderr)
	case *topic == "" || !isSet(fs, "partition") || *partition < 0:
		return finish(name, usageErrorf("--topic and --partition go together (partition 0 or more)"), stderr)
	default:
		parts = []tp{{*topic, int32(*partition)}}
	}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return reassignCancel(ctx, a, parts, *preserve, stdout)
	})
}

func reassignListCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice reassign list"
	fs := newFlagSet(name, name, `Prints every partition reassignment in progress (ListPartitionReassignments):
topic, partition, replicas, and the replicas being added and removed.`, stderr)
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return reassignList(ctx, a, stdout)
	})
}

func electLeadersCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice elect-leaders"
	fs := newFlagSet(name, name+" [--topic T [--partition P]] [--type preferred|unclean]",
		`Elects leaders (ElectLeaders), as Kafka's kafka-leader-election.sh: of every
partition of the cluster, of a topic's, or of one partition. preferred
moves leadership to each partition's first replica when it is in the ISR;
unclean elects any live replica for a partition that has no leader, at the
price of what the ISR had and it lacks. "No election needed" is not a
failure.`, stderr)
	topic := fs.String("topic", "", "only this `topic`'s partitions")
	partition := fs.Int("partition", 0, "only this `partition` of --topic")
	typ := fs.String("type", "preferred", "the election: `preferred|unclean`")
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	o := electOptions{topic: *topic, partition: -1}
	if isSet(fs, "partition") {
		o.partition = int32(*partition)
	}
	switch *typ {
	case "preferred":
	case "unclean":
		o.unclean = true
	default:
		return finish(name, usageErrorf("--type must be preferred or unclean, not %q", *typ), stderr)
	}
	if isSet(fs, "partition") && (*topic == "" || *partition < 0) {
		return finish(name, usageErrorf("--partition needs --topic, and is 0 or more"), stderr)
	}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return electLeaders(ctx, a, o, stdout)
	})
}

func decommissionCmd(args []string, stdout, stderr io.Writer) int {
	const name = "sluice decommission"
	fs := newFlagSet(name, name+" --broker N [--wait DURATION]",
		`Sends UnregisterBroker for broker N and prints its answer. In Sluice, a broker
that holds replicas is decommissioned: its replicas move to the other
brokers, then it is fenced, and it is unregistered once stopped. --wait
polls Metadata until no partition names N and N is no longer listed.`, stderr)
	broker := fs.Int("broker", 0, "the broker's `id`")
	wait := fs.Duration("wait", 0, "poll until the broker is gone, for at most this long (e.g. 10m)")
	cf := addClusterFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	if !isSet(fs, "broker") {
		return finish(name, usageErrorf("--broker is required"), stderr)
	}
	if *broker < 0 || *broker > 1<<31-1 {
		return finish(name, usageErrorf("--broker %d is not a broker id", *broker), stderr)
	}
	if *wait < 0 {
		return finish(name, usageErrorf("--wait must not be negative"), stderr)
	}
	o := decommissionOptions{broker: int32(*broker), wait: *wait}
	return withAdmin(name, cf, stderr, func(ctx context.Context, a *admin) error {
		return decommission(ctx, a, o, stdout)
	})
}
