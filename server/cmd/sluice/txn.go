package main

// sluice txn: list, describe, describe-producers, find-hanging and abort,
// as Kafka's kafka-transactions.sh (ListTransactions,
// DescribeTransactions, DescribeProducers, WriteTxnMarkers, Metadata):
// the transactional ids the coordinators know, the open transactions the
// partition leaders know, and the hanging ones (open on a partition, but
// no longer in any transaction of the coordinator's), which abort closes
// with an abort marker (KIP-664).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(newTxnCmd)
	kafkaHints[kerr.TransactionalIDNotFound] = "the coordinator knows no such transactional id (sluice txn list lists them)"
	kafkaHints[kerr.NotLeaderForPartition] = "the broker asked does not hold the partition (its leadership moved, or --broker-id is not one of its replicas): try again"
	kafkaHints[kerr.TransactionCoordinatorFenced] = "the coordinator epoch is older than the partition's: take it from sluice txn describe-producers"
	kafkaHints[kerr.InvalidProducerEpoch] = "the producer epoch is older than the partition's: take it from sluice txn describe-producers"
}

// txnNow is the clock of the durations printed (tests set it).
var txnNow = time.Now

// txnBatch is how many partitions one DescribeProducers asks about, as
// Kafka's tool batches them.
const txnBatch = 500

func newTxnCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "txn COMMAND",
		Short: "List and describe transactions, find and abort hanging ones (as kafka-transactions.sh)",
		Long: `Lists and describes transactions and the producers writing them, finds
hanging transactions and aborts them, as Kafka's kafka-transactions.sh
does, with Kafka's APIs (ListTransactions, DescribeTransactions,
DescribeProducers, WriteTxnMarkers).

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: list, describe, describe-producers, find-hanging or abort")
		},
	}
	c.AddCommand(newTxnListCmd(), newTxnDescribeCmd(), newTxnDescribeProducersCmd(), newTxnFindHangingCmd(), newTxnAbortCmd())
	return c
}

// txnListed is one row of sluice txn list.
type txnListed struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
}

func newTxnListCmd() *cobra.Command {
	c := command("list [--duration-filter MS] [--json]", `Lists the transactions the coordinators know (ListTransactions). As
kafka-transactions.sh list: TransactionalId, Coordinator, ProducerId,
TransactionState. --duration-filter keeps the transactions
running for longer than that many milliseconds (ListTransactions v1,
KIP-994; negative: all).`)
	fs := c.Flags()
	duration := fs.Int64("duration-filter", -1, "only transactions running longer than this many `ms`")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			rows, failures, err := listTransactions(ctx, a, *duration)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if *jsonOut {
				if err := writeJSON(w, rows); err != nil {
					return err
				}
			} else {
				printTxnList(w, rows)
			}
			return reportFailures(cmd, failures)
		})
	}
	return c
}

// txnFailure is something a command could not do, printed on stderr
// after its output.
type txnFailure struct {
	what string
	err  error
}

// reportFailures prints failures and their hints; errReported if any.
func reportFailures(cmd *cobra.Command, failures []txnFailure) error {
	if len(failures) == 0 {
		return nil
	}
	var h hints
	for _, f := range failures {
		h.note(f.err)
		fmt.Fprintln(cmd.ErrOrStderr(), failure(cmd.CommandPath(), f.what, f.err))
	}
	h.print(cmd.ErrOrStderr())
	return errReported
}

// listTransactions asks every broker for the transactions it
// coordinates (ListTransactions, as kadm does, with the duration filter
// kadm lacks). A broker that fails is a failure; the others' answers
// are kept.
func listTransactions(ctx context.Context, a *admin, durationMs int64) ([]txnListed, []txnFailure, error) {
	if err := a.supports(ctx, kmsg.ListTransactions); err != nil {
		return nil, nil, err
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	req := kmsg.NewPtrListTransactionsRequest()
	req.DurationFilterMillis = durationMs
	rows := []txnListed{}
	var failures []txnFailure
	shards := a.cl.RequestSharded(ctx, req)
	for _, s := range shards {
		what := fmt.Sprintf("broker %d", s.Meta.NodeID)
		if s.Err != nil {
			failures = append(failures, txnFailure{what, fmt.Errorf("ListTransactions: %w", s.Err)})
			continue
		}
		resp := s.Resp.(*kmsg.ListTransactionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			failures = append(failures, txnFailure{what, fmt.Errorf("ListTransactions: %w", err)})
			continue
		}
		if durationMs >= 0 && resp.Version < 1 {
			failures = append(failures, txnFailure{what, fmt.Errorf("%w: ListTransactions v%d has no duration filter (v1 has)", errUnsupportedAPI, resp.Version)})
			continue
		}
		for _, t := range resp.TransactionStates {
			rows = append(rows, txnListed{t.TransactionalID, s.Meta.NodeID, t.ProducerID, t.TransactionState})
		}
	}
	if len(shards) > 0 && len(failures) == len(shards) {
		return nil, nil, failures[0].err // no answer at all: the command failed
	}
	slices.SortFunc(rows, func(x, y txnListed) int { return strings.Compare(x.TransactionalID, y.TransactionalID) })
	slices.SortFunc(failures, func(x, y txnFailure) int { return strings.Compare(x.what, y.what) })
	return rows, failures, nil
}

// printTxnList prints as kafka-transactions.sh list.
func printTxnList(w io.Writer, rows []txnListed) {
	tw := newTable(w)
	fmt.Fprintln(tw, "TransactionalId\tCoordinator\tProducerId\tTransactionState")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", r.TransactionalID, r.Coordinator, r.ProducerID, r.State)
	}
	tw.Flush()
}

// txnPartition is a partition in a transaction.
type txnPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// txnDescribed is sluice txn describe's answer.
type txnDescribed struct {
	Coordinator     int32          `json:"coordinator"`
	TransactionalID string         `json:"transactional_id"`
	ProducerID      int64          `json:"producer_id"`
	ProducerEpoch   int16          `json:"producer_epoch"`
	State           string         `json:"state"`
	TimeoutMs       int32          `json:"transaction_timeout_ms"`
	StartTimeMs     int64          `json:"start_time_ms"` // -1: no transaction
	DurationMs      int64          `json:"duration_ms"`   // -1: no transaction
	Partitions      []txnPartition `json:"topic_partitions"`
}

// describedTxn turns kadm's answer into the row printed, its duration
// taken at now.
func describedTxn(d kadm.DescribedTransaction, now time.Time) txnDescribed {
	r := txnDescribed{Coordinator: d.Coordinator, TransactionalID: d.TxnID, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		State: d.State, TimeoutMs: d.TimeoutMillis, StartTimeMs: -1, DurationMs: -1, Partitions: []txnPartition{}}
	if d.StartTimestamp >= 0 {
		r.StartTimeMs = d.StartTimestamp
		r.DurationMs = now.UnixMilli() - d.StartTimestamp
	}
	for _, t := range d.Topics.Sorted() {
		for _, p := range t.Partitions {
			r.Partitions = append(r.Partitions, txnPartition{t.Topic, p})
		}
	}
	return r
}

// noneIfNegative is n, or Kafka's "None" for a value the broker does not
// have (-1).
func noneIfNegative(n int64) string {
	if n < 0 {
		return "None"
	}
	return fmt.Sprint(n)
}

// printTxnDescribe prints as kafka-transactions.sh describe.
func printTxnDescribe(w io.Writer, r txnDescribed) {
	var parts []string
	for _, p := range r.Partitions {
		parts = append(parts, tp(p).String())
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions")
	fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Coordinator, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.State, r.TimeoutMs,
		noneIfNegative(r.StartTimeMs), noneIfNegative(r.DurationMs), strings.Join(parts, ","))
	tw.Flush()
}

func newTxnDescribeCmd() *cobra.Command {
	c := command("describe --transactional-id ID [--json]", `Describes a transactional id and its transaction (DescribeTransactions). As
kafka-transactions.sh describe: its coordinator, producer id and epoch,
state, timeout, when its transaction started and for how long it has run
(None without one), and the partitions in it. An id the coordinator does
not know is a failure.`)
	fs := c.Flags()
	id := fs.String("transactional-id", "", "the transactional `id`")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if *id == "" {
			return usageErrorf("--transactional-id is required")
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			if err := a.supports(ctx, kmsg.DescribeTransactions); err != nil {
				return err
			}
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			ds, err := a.adm.DescribeTransactions(ctx, *id)
			if err != nil {
				return fmt.Errorf("DescribeTransactions: %w", unwrapKadm(shardErr(err)))
			}
			d, err := ds.On(*id, nil)
			if err == nil {
				err = d.Err
			}
			if err != nil {
				return fmt.Errorf("transactional id %s: %w", *id, err)
			}
			r := describedTxn(d, txnNow())
			w := cmd.OutOrStdout()
			if *jsonOut {
				return writeJSON(w, r)
			}
			printTxnDescribe(w, r)
			return nil
		})
	}
	return c
}

// txnProducer is one producer of a partition, as DescribeProducers
// describes it (and one row of find-hanging).
type txnProducer struct {
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	ProducerID            int64  `json:"producer_id"`
	ProducerEpoch         int16  `json:"producer_epoch"`
	CoordinatorEpoch      int32  `json:"coordinator_epoch"` // -1: none yet
	LastSequence          int32  `json:"last_sequence"`
	LastTimestamp         int64  `json:"last_timestamp"`
	CurrentTxnStartOffset int64  `json:"current_transaction_start_offset"` // -1: no open transaction
	DurationMin           *int64 `json:"duration_min,omitempty"`           // find-hanging: minutes since LastTimestamp
}

func producerRow(d kadm.DescribedProducer) txnProducer {
	return txnProducer{Topic: d.Topic, Partition: d.Partition, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		CoordinatorEpoch: d.CoordinatorEpoch, LastSequence: d.LastSequence, LastTimestamp: d.LastTimestamp, CurrentTxnStartOffset: d.CurrentTxnStartOffset}
}

// partitionProducers is one partition's DescribeProducers answer: its
// producers, sorted by producer id, or why it has none.
type partitionProducers struct {
	producers []kadm.DescribedProducer
	err       error
}

// describeProducers asks DescribeProducers about parts: of each
// partition's leader (broker < 0), or of one broker (a replica: Kafka
// answers on followers too).
func describeProducers(ctx context.Context, a *admin, parts []tp, broker int32) (map[tp]partitionProducers, error) {
	if err := a.supports(ctx, kmsg.DescribeProducers); err != nil {
		return nil, err
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	out := map[tp]partitionProducers{}
	add := func(p kadm.DescribedProducersPartition) {
		ps := slices.Collect(func(yield func(kadm.DescribedProducer) bool) {
			for _, d := range p.ActiveProducers {
				if !yield(d) {
					return
				}
			}
		})
		slices.SortFunc(ps, func(x, y kadm.DescribedProducer) int { return cmp.Compare(x.ProducerID, y.ProducerID) })
		out[tp{p.Topic, p.Partition}] = partitionProducers{producers: ps, err: withMessage(p.Err, &p.ErrMessage)}
	}
	if broker < 0 {
		set := kadm.TopicsSet{}
		for _, p := range parts {
			set.Add(p.Topic, p.Partition)
		}
		dts, err := a.adm.DescribeProducers(ctx, set)
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) {
			return nil, fmt.Errorf("DescribeProducers: %w", unwrapKadm(err))
		}
		dts.EachPartition(add)
		// A partition no broker answered for gets its shard's error.
		if se != nil {
			for _, e := range se.Errs {
				req, ok := e.Req.(*kmsg.DescribeProducersRequest)
				if !ok {
					continue
				}
				for _, t := range req.Topics {
					for _, p := range t.Partitions {
						if _, ok := out[tp{t.Topic, p}]; !ok {
							out[tp{t.Topic, p}] = partitionProducers{err: fmt.Errorf("DescribeProducers: %w", unwrapKadm(e.Err))}
						}
					}
				}
			}
		}
	} else {
		req := kmsg.NewPtrDescribeProducersRequest()
		byTopic := map[string][]int32{}
		for _, p := range parts {
			byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
		}
		for _, t := range slices.Sorted(mapKeys(byTopic)) {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = t, byTopic[t]
			req.Topics = append(req.Topics, rt)
		}
		kr, err := a.cl.Broker(int(broker)).RetriableRequest(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("DescribeProducers to broker %d: %w", broker, err)
		}
		resp := kr.(*kmsg.DescribeProducersResponse)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				p := kadm.DescribedProducersPartition{Leader: broker, Topic: rt.Topic, Partition: rp.Partition, ActiveProducers: kadm.DescribedProducers{},
					Err: kerr.ErrorForCode(rp.ErrorCode)}
				if rp.ErrorMessage != nil {
					p.ErrMessage = *rp.ErrorMessage
				}
				for _, ap := range rp.ActiveProducers {
					p.ActiveProducers[ap.ProducerID] = kadm.DescribedProducer{Leader: broker, Topic: rt.Topic, Partition: rp.Partition,
						ProducerID: ap.ProducerID, ProducerEpoch: int16(ap.ProducerEpoch), LastSequence: ap.LastSequence, LastTimestamp: ap.LastTimestamp,
						CoordinatorEpoch: ap.CoordinatorEpoch, CurrentTxnStartOffset: ap.CurrentTxnStartOffset}
				}
				add(p)
			}
		}
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			out[p] = partitionProducers{err: errors.New("DescribeProducers: not answered")}
		}
	}
	return out, nil
}

// printTxnProducers prints as kafka-transactions.sh describe-producers.
func printTxnProducers(w io.Writer, rows []txnProducer) {
	tw := newTable(w)
	fmt.Fprintln(tw, "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\n", r.ProducerID, r.ProducerEpoch, r.CoordinatorEpoch, r.LastSequence, r.LastTimestamp, noneIfNegative(r.CurrentTxnStartOffset))
	}
	tw.Flush()
}

// partitionFlags checks --topic and --partition, both required.
func partitionFlags(c *cobra.Command, topic string, partition int) (tp, error) {
	if topic == "" {
		return tp{}, usageErrorf("--topic is required")
	}
	if !c.Flags().Changed("partition") {
		return tp{}, usageErrorf("--partition is required")
	}
	if partition < 0 || partition > 1<<31-1 {
		return tp{}, usageErrorf("--partition must be a partition number (0 or more), not %d", partition)
	}
	return tp{topic, int32(partition)}, nil
}

// brokerFlag is --broker-id's value, or -1 when it is not given.
func brokerFlag(c *cobra.Command, broker int) (int32, error) {
	if !c.Flags().Changed("broker-id") {
		return -1, nil
	}
	if broker < 0 || broker > 1<<31-1 {
		return 0, usageErrorf("--broker-id %d is not a broker id", broker)
	}
	return int32(broker), nil
}

func newTxnDescribeProducersCmd() *cobra.Command {
	c := command("describe-producers --topic T --partition P [--broker-id B] [--json]", `Describes the producers of a partition (DescribeProducers). As
kafka-transactions.sh describe-producers: each one's producer id and epoch,
the coordinator epoch of its last transaction marker, its last sequence
number and timestamp, and where its open transaction starts (None
without one). The partition's leader answers, or with --broker-id that
broker (one of its replicas).`)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic`")
	partition := fs.Int("partition", 0, "the `partition` number")
	broker := fs.Int("broker-id", 0, "ask this `broker` (a replica) instead of the leader")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		p, err := partitionFlags(cmd, *topic, *partition)
		if err != nil {
			return err
		}
		b, err := brokerFlag(cmd, *broker)
		if err != nil {
			return err
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			got, err := describeProducers(ctx, a, []tp{p}, b)
			if err != nil {
				return err
			}
			pp := got[p]
			if pp.err != nil {
				return fmt.Errorf("%s: %w", p, pp.err)
			}
			rows := []txnProducer{}
			for _, d := range pp.producers {
				rows = append(rows, producerRow(d))
			}
			w := cmd.OutOrStdout()
			if *jsonOut {
				return writeJSON(w, rows)
			}
			printTxnProducers(w, rows)
			return nil
		})
	}
	return c
}

// openTransactions are the candidates of find-hanging, as Kafka's
// FindHangingTransactionsCommand picks them: producers with an open
// transaction (a start offset) that wrote nothing for longer than
// maxTimeout before now (no transaction of the coordinator's may run for
// longer, so a live one would have been aborted by then).
func openTransactions(producers []kadm.DescribedProducer, now time.Time, maxTimeout time.Duration) []kadm.DescribedProducer {
	var out []kadm.DescribedProducer
	for _, d := range producers {
		if d.CurrentTxnStartOffset >= 0 && now.UnixMilli()-d.LastTimestamp > maxTimeout.Milliseconds() {
			out = append(out, d)
		}
	}
	return out
}

// hangingTransactions keeps the open transactions the coordinators do not
// know, as Kafka's FindHangingTransactionsCommand decides: listed is the
// ListTransactions answer for their producer ids, described the
// DescribeTransactions answer for the transactional ids listed. An open
// transaction hangs when no transactional id has its producer id, when
// the coordinator no longer knows that id (TRANSACTIONAL_ID_NOT_FOUND, or
// not in described), or when the id's transaction does not include its
// partition (DescribeTransactions lists the partitions of an ongoing
// transaction, and those still without a marker of one being completed).
// Stricter than Kafka in one case: an id that now has another producer id
// does not cover the open transaction of the old one. An id described
// with another error is returned as an error: nothing can be decided.
func hangingTransactions(open []kadm.DescribedProducer, listed kadm.ListedTransactions, described kadm.DescribedTransactions) ([]kadm.DescribedProducer, error) {
	wanted := map[int64]bool{}
	for _, d := range open {
		wanted[d.ProducerID] = true
	}
	idOf := map[int64]string{}
	for _, l := range listed.Sorted() {
		if wanted[l.ProducerID] {
			idOf[l.ProducerID] = l.TxnID
		}
	}
	var out []kadm.DescribedProducer
	for _, d := range open {
		id, ok := idOf[d.ProducerID]
		if !ok {
			out = append(out, d)
			continue
		}
		desc, ok := described[id]
		_, inTxn := desc.Topics[d.Topic][d.Partition]
		switch {
		case !ok, errors.Is(desc.Err, kerr.TransactionalIDNotFound):
			out = append(out, d)
		case desc.Err != nil:
			return nil, fmt.Errorf("transactional id %s: %w", id, desc.Err)
		case desc.ProducerID != d.ProducerID, !inTxn:
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(x, y kadm.DescribedProducer) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.ProducerID, y.ProducerID))
	})
	return out, nil
}

func newTxnFindHangingCmd() *cobra.Command {
	c := command("find-hanging --broker-id B | --topic T [--partition P] [--max-transaction-timeout MINUTES] [--json]", `Finds hanging transactions, as kafka-transactions.sh find-hanging. Of the
partitions asked (a topic's, one partition, or those with a replica on
--broker-id, which is then the broker asked), the producers with an open
transaction (DescribeProducers) that wrote nothing for longer than
--max-transaction-timeout (minutes, default 15: the longest transaction
timeout the producers use, transaction.max.timeout.ms) and whose
transaction the coordinator does not know (ListTransactions by producer
id, DescribeTransactions): no transactional id has the producer id, or
its transaction does not include the partition. Such a transaction holds
back the partition's last stable offset, and read_committed consumers,
until sluice txn abort closes it. Prints Topic, Partition, ProducerId,
ProducerEpoch, CoordinatorEpoch, StartOffset, LastTimestamp and
Duration(min), as Kafka's tool.`)
	fs := c.Flags()
	broker := fs.Int("broker-id", 0, "search the partitions with a replica on this `broker`, and ask it")
	topic := fs.String("topic", "", "search this `topic`'s partitions")
	partition := fs.Int("partition", 0, "only this `partition` of --topic")
	maxTimeout := fs.Int("max-transaction-timeout", 15, "the longest transaction timeout, in `minutes`")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		b, err := brokerFlag(cmd, *broker)
		if err != nil {
			return err
		}
		switch {
		case *topic == "" && b < 0:
			return usageErrorf("give --topic or --broker-id to limit the search")
		case fs.Changed("partition") && *topic == "":
			return usageErrorf("--partition needs --topic")
		case *partition < 0 || *partition > 1<<31-1:
			return usageErrorf("--partition must be a partition number (0 or more), not %d", *partition)
		case *maxTimeout < 0:
			return usageErrorf("--max-transaction-timeout must not be negative, not %d", *maxTimeout)
		}
		o := findHangingOptions{topic: *topic, partition: -1, broker: b, maxTimeout: time.Duration(*maxTimeout) * time.Minute, json: *jsonOut}
		if fs.Changed("partition") {
			o.partition = int32(*partition)
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return findHanging(ctx, a, o, cmd)
		})
	}
	return c
}

type findHangingOptions struct {
	topic      string
	partition  int32 // -1: every partition of topic
	broker     int32 // -1: none given
	maxTimeout time.Duration
	json       bool
}

// searchPartitions lists the partitions find-hanging looks at, as Kafka's
// tool: the one given, or the topic's (every topic's without one), those
// with a replica on the broker if one is given.
func searchPartitions(ctx context.Context, a *admin, o findHangingOptions) ([]tp, error) {
	if o.topic != "" && o.partition >= 0 {
		return []tp{{o.topic, o.partition}}, nil
	}
	var st *clusterState
	var err error
	if o.topic != "" {
		st, err = a.describeTopics(ctx, []string{o.topic})
	} else {
		st, err = a.describe(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	set := map[tp]bool{}
	for p, s := range st.parts {
		if (o.topic == "" || p.Topic == o.topic) && (o.broker < 0 || slices.Contains(s.replicas, o.broker)) {
			set[p] = true
		}
	}
	return sortedTPs(set), nil
}

// findHanging is sluice txn find-hanging.
func findHanging(ctx context.Context, a *admin, o findHangingOptions, cmd *cobra.Command) error {
	parts, err := searchPartitions(ctx, a, o)
	if err != nil {
		return err
	}
	var failures []txnFailure
	var producers []kadm.DescribedProducer
	m := newMeter(cmd.ErrOrStderr())
	for i := 0; i < len(parts); i += txnBatch {
		m.show("find-hanging: partition %d of %d", i+1, len(parts))
		batch := parts[i:min(i+txnBatch, len(parts))]
		got, err := describeProducers(ctx, a, batch, o.broker)
		if err != nil {
			m.done()
			return err
		}
		for _, p := range batch {
			if e := got[p].err; e != nil {
				failures = append(failures, txnFailure{p.String(), e})
				continue
			}
			producers = append(producers, got[p].producers...)
		}
	}
	m.done()
	now := txnNow()
	open := openTransactions(producers, now, o.maxTimeout)
	var hanging []kadm.DescribedProducer
	if len(open) > 0 {
		listed, described, err := coordinatorView(ctx, a, open)
		if err != nil {
			return err
		}
		if hanging, err = hangingTransactions(open, listed, described); err != nil {
			return err
		}
	}
	rows := []txnProducer{}
	for _, d := range hanging {
		r := producerRow(d)
		mins := (now.UnixMilli() - d.LastTimestamp) / time.Minute.Milliseconds()
		r.DurationMin = &mins
		rows = append(rows, r)
	}
	w := cmd.OutOrStdout()
	if o.json {
		if err := writeJSON(w, rows); err != nil {
			return err
		}
	} else {
		printHanging(w, rows)
	}
	if len(rows) > 0 {
		r := rows[0]
		fmt.Fprintf(cmd.ErrOrStderr(), "hint: sluice txn abort --topic %s --partition %d --start-offset %d aborts one (it writes an abort marker)\n", r.Topic, r.Partition, r.CurrentTxnStartOffset)
	}
	return reportFailures(cmd, failures)
}

// coordinatorView asks the coordinators about the producer ids of open:
// which transactional ids have them (ListTransactions), and those ids'
// transactions (DescribeTransactions).
func coordinatorView(ctx context.Context, a *admin, open []kadm.DescribedProducer) (kadm.ListedTransactions, kadm.DescribedTransactions, error) {
	for _, k := range []kmsg.Key{kmsg.ListTransactions, kmsg.DescribeTransactions} {
		if err := a.supports(ctx, k); err != nil {
			return nil, nil, err
		}
	}
	var pids []int64
	for _, d := range open {
		pids = append(pids, d.ProducerID)
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	listed, err := a.adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		// A coordinator that did not answer could hold the id: nothing
		// can be decided.
		return nil, nil, fmt.Errorf("ListTransactions: %w", unwrapKadm(shardErr(err)))
	}
	described := kadm.DescribedTransactions{}
	if ids := listed.TransactionalIDs(); len(ids) > 0 {
		if described, err = a.adm.DescribeTransactions(ctx, ids...); err != nil {
			return nil, nil, fmt.Errorf("DescribeTransactions: %w", unwrapKadm(shardErr(err)))
		}
	}
	return listed, described, nil
}

// printHanging prints as kafka-transactions.sh find-hanging.
func printHanging(w io.Writer, rows []txnProducer) {
	tw := newTable(w)
	fmt.Fprintln(tw, "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Topic, r.Partition, r.ProducerID, r.ProducerEpoch, r.CoordinatorEpoch,
			r.CurrentTxnStartOffset, r.LastTimestamp, *r.DurationMin)
	}
	tw.Flush()
}

// abortSpec is the transaction sluice txn abort closes: the marker's
// producer id and epoch and coordinator epoch, on one partition.
type abortSpec struct {
	part             tp
	producerID       int64
	producerEpoch    int16
	coordinatorEpoch int32
}

// abortSpecAt finds the producer whose open transaction on the partition
// starts at offset, as kafka-transactions.sh abort --start-offset does.
// A coordinator epoch of -1 (the producer's first transaction, no marker
// written yet) is 0, which no partition's can be below.
func abortSpecAt(p tp, producers []kadm.DescribedProducer, offset int64) (abortSpec, error) {
	for _, d := range producers {
		if d.CurrentTxnStartOffset >= 0 && d.CurrentTxnStartOffset == offset {
			return abortSpec{part: p, producerID: d.ProducerID, producerEpoch: d.ProducerEpoch, coordinatorEpoch: max(d.CoordinatorEpoch, 0)}, nil
		}
	}
	return abortSpec{}, fmt.Errorf("could not find any open transaction starting at offset %d on partition %s (sluice txn describe-producers lists them)", offset, p)
}

func newTxnAbortCmd() *cobra.Command {
	c := command("abort --topic T --partition P (--start-offset O | --producer-id ID --producer-epoch E --coordinator-epoch C)", `Aborts a hanging transaction on a partition (WriteTxnMarkers). As
kafka-transactions.sh abort, it writes an abort marker for its producer. The
transaction is the one starting at --start-offset (DescribeProducers
finds its producer, as sluice txn describe-producers prints it), or the
one of --producer-id, --producer-epoch and --coordinator-epoch (a
negative coordinator epoch is 0, as Kafka's tool takes it). Abort only
a transaction sluice txn find-hanging reports: aborting a live one drops
the records it wrote to the partition so far, while the rest of it may
still commit.`)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic`")
	partition := fs.Int("partition", 0, "the `partition` number")
	start := fs.Int64("start-offset", 0, "the `offset` the transaction starts at")
	pid := fs.Int64("producer-id", 0, "the transaction's producer `id`")
	epoch := fs.Int("producer-epoch", 0, "its producer `epoch`")
	coordEpoch := fs.Int("coordinator-epoch", 0, "its coordinator `epoch`")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		p, err := partitionFlags(cmd, *topic, *partition)
		if err != nil {
			return err
		}
		byStart := fs.Changed("start-offset")
		byProducer := fs.Changed("producer-id") || fs.Changed("producer-epoch") || fs.Changed("coordinator-epoch")
		switch {
		case byStart && byProducer:
			return usageErrorf("give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch, not both")
		case !byStart && !byProducer:
			return usageErrorf("the transaction to abort must be identified either with --start-offset or with --producer-id, --producer-epoch and --coordinator-epoch")
		case byStart && *start < 0:
			return usageErrorf("--start-offset must not be negative, not %d", *start)
		case byProducer && !fs.Changed("producer-id"):
			return usageErrorf("--producer-id is required with --producer-epoch and --coordinator-epoch")
		case byProducer && !fs.Changed("producer-epoch"):
			return usageErrorf("--producer-epoch is required with --producer-id")
		case byProducer && !fs.Changed("coordinator-epoch"):
			return usageErrorf("--coordinator-epoch is required with --producer-id")
		case byProducer && *pid < 0:
			return usageErrorf("--producer-id must not be negative, not %d", *pid)
		case byProducer && (*epoch < 0 || *epoch > 1<<15-1):
			return usageErrorf("--producer-epoch must be 0 to 32767, not %d", *epoch)
		case byProducer && (*coordEpoch < -1<<31 || *coordEpoch > 1<<31-1):
			return usageErrorf("--coordinator-epoch %d is out of range", *coordEpoch)
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			spec := abortSpec{part: p, producerID: *pid, producerEpoch: int16(*epoch), coordinatorEpoch: int32(max(*coordEpoch, 0))}
			if byStart {
				got, err := describeProducers(ctx, a, []tp{p}, -1)
				if err != nil {
					return err
				}
				if e := got[p].err; e != nil {
					return fmt.Errorf("%s: %w", p, e)
				}
				if spec, err = abortSpecAt(p, got[p].producers, *start); err != nil {
					return err
				}
			}
			if err := abortTxn(ctx, a, spec); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Aborted the transaction of producer %d (epoch %d, coordinator epoch %d) on %s.\n",
				spec.producerID, spec.producerEpoch, spec.coordinatorEpoch, p)
			return nil
		})
	}
	return c
}

// abortTxn writes the abort marker of spec (WriteTxnMarkers to the
// partition's leader, as Kafka's Admin.abortTransaction).
func abortTxn(ctx context.Context, a *admin, spec abortSpec) error {
	if err := a.supports(ctx, kmsg.WriteTxnMarkers); err != nil {
		return err
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	rs, err := a.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID:       spec.producerID,
		ProducerEpoch:    spec.producerEpoch,
		Commit:           false,
		CoordinatorEpoch: spec.coordinatorEpoch,
		Topics:           kadm.TopicsSet{spec.part.Topic: {spec.part.Partition: {}}},
	})
	if err != nil {
		return fmt.Errorf("WriteTxnMarkers: %s: %w", spec.part, unwrapKadm(shardErr(err)))
	}
	r, ok := rs[spec.producerID].Topics[spec.part.Topic].Partitions[spec.part.Partition]
	if !ok {
		return fmt.Errorf("WriteTxnMarkers: %s: not answered", spec.part)
	}
	if r.Err != nil {
		return fmt.Errorf("WriteTxnMarkers: %s: %w", spec.part, r.Err)
	}
	return nil
}
