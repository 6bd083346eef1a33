package main

// sluice topic: create, list, describe, alter, delete and add-partitions,
// as Kafka's kafka-topics.sh (CreateTopics, Metadata, ListOffsets,
// DescribeLogDirs, DescribeConfigs, IncrementalAlterConfigs, DeleteTopics,
// CreatePartitions), against any Kafka-compatible cluster.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(newTopicCmd) }

func newTopicCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "topic COMMAND",
		Short: "Create, list, describe, alter and delete topics (as kafka-topics.sh)",
		Long: `Creates, lists, describes, alters and deletes topics, as Kafka's
kafka-topics.sh does, with Kafka's APIs.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: create, list, describe, alter, delete or add-partitions")
		},
	}
	c.AddCommand(newTopicCreateCmd(), newTopicListCmd(), newTopicDescribeCmd(), newTopicAlterCmd(), newTopicDeleteCmd(), newTopicAddPartitionsCmd())
	return c
}

// topicFlag reads a required --topic.
func topicFlag(topic string) error {
	if strings.TrimSpace(topic) == "" {
		return usageErrorf("--topic is required")
	}
	return nil
}

func newTopicCreateCmd() *cobra.Command {
	c := command("create --topic T [--partitions N] [--replication-factor R] [--config k=v]... [--replica-assignment 1:2,2:3]", `Creates a topic (CreateTopics). Without --partitions or
--replication-factor the cluster's defaults apply (num.partitions,
default.replication.factor). --replica-assignment places each partition
explicitly, as kafka-topics.sh takes it: partitions comma-separated, each
one's replicas colon-separated, preferred leader first; it gives the
partition count and replication factor itself.`)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic` to create")
	// Zero, not -1, as the flags' defaults: a flag left out sends -1 (the
	// cluster's default), and pflag prints no default of its own beside
	// the usage's (it leaves zero values out).
	parts := fs.Int32("partitions", 0, "`partitions` (default: the cluster's num.partitions)")
	rf := fs.Int16("replication-factor", 0, "`replicas` per partition (default: the cluster's default.replication.factor)")
	configs := fs.StringArray("config", nil, "a topic config `key=value` (repeatable)")
	assignment := fs.String("replica-assignment", "", "explicit `replicas`: partitions comma-separated, replicas colon-separated (1:2,2:3)")
	ifNotExists := fs.Bool("if-not-exists", false, "succeed if the topic exists already")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := topicFlag(*topic); err != nil {
			return err
		}
		cfg, order, err := parseConfigs("--config", *configs)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = *topic, -1, -1
		if fs.Changed("partitions") {
			if *parts < 1 {
				return usageErrorf("--partitions must be at least 1, not %d", *parts)
			}
			rt.NumPartitions = *parts
		}
		if fs.Changed("replication-factor") {
			if *rf < 1 {
				return usageErrorf("--replication-factor must be at least 1, not %d", *rf)
			}
			rt.ReplicationFactor = *rf
		}
		if *assignment != "" {
			if fs.Changed("partitions") || fs.Changed("replication-factor") {
				return usageErrorf("--replica-assignment gives the partitions and replication factor: leave out --partitions and --replication-factor")
			}
			as, err := parseReplicaAssignment("--replica-assignment", *assignment)
			if err != nil {
				return err
			}
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			for i, replicas := range as {
				ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				ra.Partition, ra.Replicas = int32(i), replicas
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
			}
		}
		for _, k := range order {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, cfg[k]
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			req.TimeoutMillis = a.timeoutMillis()
			resp, err := req.RequestWith(ctx, a.cl)
			if err != nil {
				return fmt.Errorf("CreateTopics: %w", err)
			}
			if len(resp.Topics) != 1 {
				return fmt.Errorf("CreateTopics: %d topics answered, want 1", len(resp.Topics))
			}
			st := resp.Topics[0]
			err = kafkaErr(st.ErrorCode, st.ErrorMessage)
			switch {
			case errors.Is(err, kerr.TopicAlreadyExists) && *ifNotExists:
				fmt.Fprintf(cmd.OutOrStdout(), "Topic %s exists already.\n", *topic)
				return nil
			case err != nil:
				return fmt.Errorf("topic %s: %w", *topic, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created topic %s.\n", *topic)
			return nil
		})
	}
	return c
}

func newTopicListCmd() *cobra.Command {
	c := command("list [--exclude-internal] [--json]", `Lists the topics (Metadata). One a line, sorted, internal topics
(__consumer_offsets) too unless --exclude-internal, as kafka-topics.sh
--list. --json adds each topic's
partition count, replication factor and id.`)
	exclude := c.Flags().Bool("exclude-internal", false, "leave out internal topics")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			md, err := a.adm.Metadata(ctx)
			if err != nil {
				return fmt.Errorf("Metadata: %w", err)
			}
			type listed struct {
				Name              string `json:"name"`
				ID                string `json:"id,omitempty"`
				Partitions        int    `json:"partitions"`
				ReplicationFactor int    `json:"replication_factor"`
				Internal          bool   `json:"internal"`
			}
			out := []listed{}
			for _, name := range md.Topics.Names() {
				t := md.Topics[name]
				if t.IsInternal && *exclude {
					continue
				}
				out = append(out, listed{Name: name, ID: topicID(t.ID), Partitions: len(t.Partitions), ReplicationFactor: replicationFactor(t), Internal: t.IsInternal})
			}
			w := cmd.OutOrStdout()
			if *jsonOut {
				return writeJSON(w, out)
			}
			for _, t := range out {
				fmt.Fprintln(w, t.Name)
			}
			return nil
		})
	}
	return c
}

// topicID prints a topic id as Kafka's tools do (Uuid.toString: URL-safe
// base64 without padding), "" for none (the zero id).
func topicID(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// replicationFactor is the largest replica count of t's partitions.
func replicationFactor(t kadm.TopicDetail) int {
	n := 0
	for _, p := range t.Partitions {
		n = max(n, len(p.Replicas))
	}
	return n
}

// topicPartitionInfo is one partition of sluice topic describe.
type topicPartitionInfo struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	Offline        []int32 `json:"offline_replicas,omitempty"`
	LogStartOffset int64   `json:"log_start_offset"`
	LogEndOffset   int64   `json:"log_end_offset"`
	Size           int64   `json:"size_bytes"` // the leader's replica; -1 unknown
	Error          string  `json:"error,omitempty"`
}

// topicInfo is one topic of sluice topic describe.
type topicInfo struct {
	Name              string               `json:"name"`
	ID                string               `json:"id,omitempty"`
	Internal          bool                 `json:"internal,omitempty"`
	ReplicationFactor int                  `json:"replication_factor"`
	Configs           map[string]string    `json:"configs"` // the ones set on the topic (differing from the defaults)
	Partitions        []topicPartitionInfo `json:"partitions"`
	Error             string               `json:"error,omitempty"`
}

func newTopicDescribeCmd() *cobra.Command {
	c := command("describe [--topic T]... [--exclude-internal] [--json]", `Describes topics: partitions, offsets, sizes and configs. Every topic
without --topic (internal ones too unless --exclude-internal): id, partition count,
replication factor, the configs set on the topic (those that differ from
the cluster's defaults: source TOPIC_CONFIG), and each partition's leader,
leader epoch, replicas, ISR, offline replicas, log start and end offsets
(ListOffsets) and size in bytes on its leader (DescribeLogDirs; "-" when
the cluster does not say). It fails if a topic does not exist.`)
	topics := c.Flags().StringArray("topic", nil, "a `topic` to describe (repeatable; default: every topic)")
	exclude := c.Flags().Bool("exclude-internal", false, "leave out internal topics")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			infos, err := describeTopics(ctx, a, *topics)
			if err != nil {
				return err
			}
			if *exclude {
				infos = slices.DeleteFunc(infos, func(t topicInfo) bool { return t.Internal })
			}
			w := cmd.OutOrStdout()
			if *jsonOut {
				if err := writeJSON(w, infos); err != nil {
					return err
				}
			} else if err := printTopics(w, infos); err != nil {
				return err
			}
			var failed []string
			for _, t := range infos {
				if t.Error != "" {
					failed = append(failed, t.Name)
				}
			}
			if len(failed) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "sluice topic describe: %d of %d topics could not be described: %s\n", len(failed), len(infos), strings.Join(failed, ", "))
				return errReported
			}
			return nil
		})
	}
	return c
}

// describeTopics gathers what sluice topic describe prints.
func describeTopics(ctx context.Context, a *admin, topics []string) ([]topicInfo, error) {
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("Metadata: %w", err)
	}
	names := topics
	if len(names) == 0 {
		names = md.Topics.Names()
	}
	sort.Strings(names)
	names = slices.Compact(names)
	// A topic missing is an error for the whole command, as kafka-topics.sh
	// fails on it.
	var present []string
	for _, n := range names {
		t, ok := md.Topics[n]
		if !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("topic %s: %w", n, kerr.UnknownTopicOrPartition)
		}
		if t.Err == nil {
			present = append(present, n)
		}
	}
	var starts, ends kadm.ListedOffsets
	var listErr error // a shard of ListOffsets failed
	var sizes kadm.DescribedAllLogDirs
	var configs kadm.ResourceConfigs
	if len(present) > 0 {
		// A partition without a leader fails its shard of ListOffsets:
		// it is shown with its error, the others with their offsets.
		if starts, err = a.adm.ListStartOffsets(ctx, present...); partialOK(err) != nil {
			return nil, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
		}
		startsErr := err
		if ends, err = a.adm.ListEndOffsets(ctx, present...); partialOK(err) != nil {
			return nil, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
		}
		listErr = firstErr(startsErr, err)
		set := kadm.TopicsSet{}
		for _, n := range present {
			set.Add(n, md.Topics[n].Partitions.Numbers()...)
		}
		// Sizes are extra: a cluster without DescribeLogDirs, or a broker
		// that does not answer, leaves them unknown.
		if a.supports(ctx, kmsg.DescribeLogDirs) == nil {
			sizes, _ = a.adm.DescribeAllLogDirs(ctx, set)
		}
		if configs, err = a.adm.DescribeTopicConfigs(ctx, present...); err != nil {
			return nil, fmt.Errorf("DescribeConfigs: %w", unwrapKadm(err))
		}
	}
	var out []topicInfo
	for _, n := range names {
		t := md.Topics[n]
		info := topicInfo{Name: n, ID: topicID(t.ID), Internal: t.IsInternal, ReplicationFactor: replicationFactor(t), Configs: map[string]string{}, Partitions: []topicPartitionInfo{}}
		if t.Err != nil {
			info.Error = t.Err.Error()
			out = append(out, info)
			continue
		}
		for _, rc := range configs {
			if rc.Name != n {
				continue
			}
			if rc.Err != nil {
				info.Error = "DescribeConfigs: " + brokerErr(rc.Err, &rc.ErrMessage).Error()
			}
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					v := "(sensitive)"
					if !c.Sensitive && c.Value != nil {
						v = *c.Value
					}
					info.Configs[c.Key] = v
				}
			}
		}
		for _, p := range t.Partitions.Sorted() {
			pi := topicPartitionInfo{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR), Offline: p.OfflineReplicas,
				LogStartOffset: -1, LogEndOffset: -1, Size: -1,
			}
			var perr error
			if p.Err != nil {
				perr = p.Err
			}
			for _, l := range []struct {
				offsets kadm.ListedOffsets
				into    *int64
			}{{starts, &pi.LogStartOffset}, {ends, &pi.LogEndOffset}} {
				switch o, ok := l.offsets.Lookup(n, p.Partition); {
				case !ok && listErr != nil:
					perr = firstErr(perr, shardErr(listErr))
				case ok && o.Err != nil:
					perr = firstErr(perr, o.Err)
				case ok:
					*l.into = o.Offset
				}
			}
			if dirs, ok := sizes[p.Leader]; ok {
				if d, ok := dirs.LookupPartition(n, p.Partition); ok {
					pi.Size = d.Size
				}
			}
			if perr != nil {
				pi.Error = perr.Error()
			}
			info.Partitions = append(info.Partitions, pi)
		}
		out = append(out, info)
	}
	return out, nil
}

// partialOK is err unless it is kadm's *ShardErrors: requests to some
// brokers failed, and the answers are partial (nil is returned; the
// partitions missing get the shard's error).
func partialOK(err error) error {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		return nil
	}
	return err
}

// shardErr is the error of the first failed shard of err (kadm's
// *ShardErrors), or err.
func shardErr(err error) error {
	var se *kadm.ShardErrors
	if errors.As(err, &se) && len(se.Errs) > 0 {
		return se.Errs[0].Err
	}
	return err
}

// firstErr keeps the first error.
func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// printTopics prints topics as sluice topic describe does:
//
//	Topic: orders  TopicId: …  PartitionCount: 3  ReplicationFactor: 1
//	Configs: retention.ms=1000
//	PARTITION  LEADER  LEADER-EPOCH  REPLICAS  ISR  OFFLINE  LOG-START-OFFSET  LOG-END-OFFSET  SIZE
//	0          1       0             1         1    -        0                 5               355
//
// (and an ERROR column when a partition has an error).
func printTopics(w io.Writer, infos []topicInfo) error {
	for i, t := range infos {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Topic: %s  TopicId: %s  PartitionCount: %d  ReplicationFactor: %d", t.Name, dash(t.ID), len(t.Partitions), t.ReplicationFactor)
		if t.Internal {
			fmt.Fprint(w, "  Internal: true")
		}
		fmt.Fprintln(w)
		if t.Error != "" {
			fmt.Fprintf(w, "Error: %s\n", t.Error)
		}
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for j, k := range keys {
			keys[j] = k + "=" + t.Configs[k]
		}
		fmt.Fprintf(w, "Configs: %s\n", dash(strings.Join(keys, ",")))
		if len(t.Partitions) == 0 {
			continue
		}
		// The ERROR column is there only when a partition has one.
		errCol := slices.ContainsFunc(t.Partitions, func(p topicPartitionInfo) bool { return p.Error != "" })
		tw := newTable(w)
		fmt.Fprint(tw, "PARTITION\tLEADER\tLEADER-EPOCH\tREPLICAS\tISR\tOFFLINE\tLOG-START-OFFSET\tLOG-END-OFFSET\tSIZE")
		if errCol {
			fmt.Fprint(tw, "\tERROR")
		}
		fmt.Fprintln(tw)
		for _, p := range t.Partitions {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", p.Partition, orUnknown(int64(p.Leader)), orUnknown(int64(p.LeaderEpoch)),
				ints(p.Replicas), ints(p.ISR), ints(p.Offline), orUnknown(p.LogStartOffset), orUnknown(p.LogEndOffset), orUnknown(p.Size))
			if errCol {
				fmt.Fprintf(tw, "\t%s", dash(p.Error))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// orUnknown prints n, or "-" for -1 (unknown, or none).
func orUnknown(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func newTopicAlterCmd() *cobra.Command {
	c := command("alter --topic T [--config k=v]... [--delete-config k]...", `Sets and removes topic configs (IncrementalAlterConfigs). As
kafka-configs.sh --alter --entity-type topics does; a removed config falls
back to the cluster's default. To add partitions, see sluice topic
add-partitions.`)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic` to alter")
	configs := fs.StringArray("config", nil, "set a topic config `key=value` (repeatable)")
	deletes := fs.StringArray("delete-config", nil, "remove a topic config `key` (repeatable)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := topicFlag(*topic); err != nil {
			return err
		}
		cfg, order, err := parseConfigs("--config", *configs)
		if err != nil {
			return err
		}
		if len(order) == 0 && len(*deletes) == 0 {
			return usageErrorf("nothing to alter: give --config key=value or --delete-config key")
		}
		var alters []kadm.AlterConfig
		for _, k := range order {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: cfg[k]})
		}
		for _, k := range *deletes {
			if _, ok := cfg[k]; ok {
				return usageErrorf("%s is both set and deleted", k)
			}
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			// IncrementalAlterConfigs on a topic that does not exist is
			// UNKNOWN_TOPIC_OR_PARTITION on Kafka; ask first so every
			// cluster says so.
			if _, err := a.describeTopics(ctx, []string{*topic}); err != nil {
				return err
			}
			rs, err := a.adm.AlterTopicConfigs(ctx, alters, *topic)
			if err != nil {
				return fmt.Errorf("IncrementalAlterConfigs: %w", unwrapKadm(err))
			}
			for _, r := range rs {
				if r.Err != nil {
					return fmt.Errorf("topic %s: %w", *topic, brokerErr(r.Err, &r.ErrMessage))
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Altered the configs of topic %s: %s.\n", *topic, describeAlters(alters))
			return nil
		})
	}
	return c
}

// describeAlters prints alters as "k=v, deleted k".
func describeAlters(alters []kadm.AlterConfig) string {
	var parts []string
	for _, a := range alters {
		if a.Op == kadm.DeleteConfig {
			parts = append(parts, "deleted "+a.Name)
		} else {
			parts = append(parts, a.Name+"="+*a.Value)
		}
	}
	return strings.Join(parts, ", ")
}

func newTopicDeleteCmd() *cobra.Command {
	c := command("delete --topic T... [--if-exists]", `Deletes topics (DeleteTopics), with their data. --topic repeats; each
topic is reported, and the command fails if any was not deleted.`)
	topics := c.Flags().StringArray("topic", nil, "a `topic` to delete (repeatable)")
	ifExists := c.Flags().Bool("if-exists", false, "a topic that does not exist is not a failure")
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(*topics) == 0 {
			return usageErrorf("--topic is required")
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			rs, err := a.adm.DeleteTopics(ctx, *topics...)
			if err != nil {
				return fmt.Errorf("DeleteTopics: %w", unwrapKadm(err))
			}
			w := cmd.OutOrStdout()
			var h hints
			failed := 0
			for _, t := range slices.Compact(slices.Sorted(slices.Values(*topics))) {
				r, ok := rs[t]
				err := brokerErr(r.Err, &r.ErrMessage)
				switch {
				case !ok:
					err = errors.New("not answered")
				case errors.Is(err, kerr.UnknownTopicOrPartition) && *ifExists:
					fmt.Fprintf(w, "Topic %s does not exist.\n", t)
					continue
				}
				if err != nil {
					failed++
					h.note(err)
					fmt.Fprintf(w, "Topic %s: %v\n", t, err)
					continue
				}
				fmt.Fprintf(w, "Deleted topic %s.\n", t)
			}
			if failed > 0 {
				h.print(w)
				return errReported
			}
			return nil
		})
	}
	return c
}

func newTopicAddPartitionsCmd() *cobra.Command {
	c := command("add-partitions --topic T --partitions N [--replica-assignment 1:2,2:3]", `Grows a topic to N partitions in all (CreatePartitions). As
kafka-topics.sh --alter --partitions does; partitions never shrink.
--replica-assignment places the new partitions only (N minus the current
count of them), in kafka-topics.sh's syntax: partitions comma-separated,
replicas colon-separated, preferred leader first.`)
	fs := c.Flags()
	topic := fs.String("topic", "", "the `topic` to grow")
	total := fs.Int32("partitions", 0, "the partition `count` after the change")
	assignment := fs.String("replica-assignment", "", "the new partitions' `replicas`: partitions comma-separated, replicas colon-separated")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := topicFlag(*topic); err != nil {
			return err
		}
		if !fs.Changed("partitions") || *total < 1 {
			return usageErrorf("--partitions N is required: the partition count after the change (at least 1)")
		}
		var as [][]int32
		if *assignment != "" {
			var err error
			if as, err = parseReplicaAssignment("--replica-assignment", *assignment); err != nil {
				return err
			}
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			st, err := a.describeTopics(ctx, []string{*topic})
			if err != nil {
				return err
			}
			current := int32(len(st.partitionsOf(*topic)))
			if as != nil && int32(len(as)) != *total-current {
				return usageErrorf("--replica-assignment lists %d partitions, but growing %s from %d to %d adds %d", len(as), *topic, current, *total, *total-current)
			}
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.TimeoutMillis = a.timeoutMillis()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = *topic, *total
			for _, replicas := range as {
				ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
				ra.Replicas = replicas
				rt.Assignment = append(rt.Assignment, ra)
			}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, a.cl)
			if err != nil {
				return fmt.Errorf("CreatePartitions: %w", err)
			}
			for _, t := range resp.Topics {
				if err := kafkaErr(t.ErrorCode, t.ErrorMessage); err != nil {
					return fmt.Errorf("topic %s: %w", t.Topic, err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Topic %s has %s now (was %d).\n", *topic, partitions(int(*total)), current)
			return nil
		})
	}
	return c
}
