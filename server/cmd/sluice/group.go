package main

// sluice group: list, describe, delete, reset-offsets and delete-offsets,
// as Kafka's kafka-consumer-groups.sh (ListGroups, DescribeGroups,
// OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups, OffsetDelete).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(newGroupCmd) }

func newGroupCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "group COMMAND",
		Short: "List, describe, delete consumer groups and reset their offsets (as kafka-consumer-groups.sh)",
		Long: `Lists, describes and deletes consumer groups, and resets or deletes their
committed offsets, as Kafka's kafka-consumer-groups.sh does, with Kafka's
APIs.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: list, describe, delete, reset-offsets or delete-offsets")
		},
	}
	c.AddCommand(newGroupListCmd(), newGroupDescribeCmd(), newGroupDeleteCmd(), newGroupResetOffsetsCmd(), newGroupDeleteOffsetsCmd())
	return c
}

// groupFlags are --group (repeatable) and --all-groups.
type groupFlags struct {
	groups []string
	all    bool
}

func addGroupFlags(fs *pflag.FlagSet, allowAll bool) *groupFlags {
	g := &groupFlags{}
	fs.StringArrayVar(&g.groups, "group", nil, "a consumer `group` (repeatable)")
	if allowAll {
		fs.BoolVar(&g.all, "all-groups", false, "every group of the cluster")
	}
	return g
}

func (g *groupFlags) check() error {
	switch {
	case g.all && len(g.groups) > 0:
		return usageErrorf("give --group or --all-groups, not both")
	case !g.all && len(g.groups) == 0:
		return usageErrorf("--group is required")
	}
	for _, n := range g.groups {
		if n == "" {
			return usageErrorf("--group: empty group name")
		}
	}
	return nil
}

// resolve lists the groups: the flags' (sorted, once each), or every
// group of the cluster.
func (g *groupFlags) resolve(ctx context.Context, a *admin) ([]string, error) {
	if !g.all {
		return slices.Compact(slices.Sorted(slices.Values(g.groups))), nil
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	ls, err := a.adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("ListGroups: %w", unwrapKadm(err))
	}
	return ls.Groups(), nil
}

func newGroupListCmd() *cobra.Command {
	c := command("list [--state S]... [--json]", `Lists the groups of the cluster (ListGroups). Sorted, with their state and
protocol type. --state keeps only groups in that state (Stable, Empty,
PreparingRebalance, CompletingRebalance, Dead; repeatable).`)
	states := c.Flags().StringArray("state", nil, "only groups in this `state` (repeatable)")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			ls, err := a.adm.ListGroups(ctx, *states...)
			if err != nil {
				return fmt.Errorf("ListGroups: %w", unwrapKadm(err))
			}
			type listed struct {
				Group        string `json:"group"`
				State        string `json:"state,omitempty"`
				ProtocolType string `json:"protocol_type"`
				Type         string `json:"type,omitempty"`
				Coordinator  int32  `json:"coordinator"`
			}
			out := []listed{}
			for _, g := range ls.Sorted() {
				out = append(out, listed{g.Group, g.State, g.ProtocolType, g.GroupType, g.Coordinator})
			}
			w := cmd.OutOrStdout()
			if *jsonOut {
				return writeJSON(w, out)
			}
			tw := newTable(w)
			fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE")
			for _, g := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, dash(g.State), dash(g.ProtocolType))
			}
			return tw.Flush()
		})
	}
	return c
}

// groupPartition is one row of sluice group describe.
type groupPartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"` // -1: no commit
	LogEndOffset  int64  `json:"log_end_offset"` // -1: unknown
	Lag           int64  `json:"lag"`            // -1: no commit, or no end offset
	ConsumerID    string `json:"consumer_id,omitempty"`
	Host          string `json:"host,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
	Error         string `json:"error,omitempty"`
}

// groupMember is one member of sluice group describe.
type groupMember struct {
	ConsumerID string             `json:"consumer_id"`
	InstanceID string             `json:"instance_id,omitempty"`
	Host       string             `json:"host"`
	ClientID   string             `json:"client_id"`
	Assignment map[string][]int32 `json:"assignment"`
}

// groupInfo is one group of sluice group describe.
type groupInfo struct {
	Group       string           `json:"group"`
	State       string           `json:"state"`
	Protocol    string           `json:"protocol"`
	Coordinator int32            `json:"coordinator"`
	Members     []groupMember    `json:"members"`
	Partitions  []groupPartition `json:"partitions"`
	Error       string           `json:"error,omitempty"`
	err         error
}

func newGroupDescribeCmd() *cobra.Command {
	c := command("describe --group G... | --all-groups [--members | --state] [--json]", `Describes groups: offsets, lag and members. As
kafka-consumer-groups.sh --describe: for every
partition the group has committed offsets for or is assigned, its current
(committed) offset, log end offset and lag, and the member consuming it;
a member with no partitions gets a row of its own. --members prints the
members and their assignments instead; --state the group's state,
coordinator, assignor and member count. A group that does not exist is
a failure.`)
	fs := c.Flags()
	gf := addGroupFlags(fs, true)
	members := fs.Bool("members", false, "print the members and their assignments")
	state := fs.Bool("state", false, "print the groups' state")
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := gf.check(); err != nil {
			return err
		}
		if *members && *state {
			return usageErrorf("give --members or --state, not both")
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			groups, err := gf.resolve(ctx, a)
			if err != nil {
				return err
			}
			infos, err := describeGroups(ctx, a, groups)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case *jsonOut:
				if err := writeJSON(w, infos); err != nil {
					return err
				}
			case *members:
				printGroupMembers(w, infos)
			case *state:
				printGroupStates(w, infos)
			default:
				printGroupOffsets(w, infos)
			}
			var h hints
			failed := 0
			for _, g := range infos {
				if g.err != nil {
					failed++
					h.note(g.err)
					fmt.Fprintln(cmd.ErrOrStderr(), failure(cmd.CommandPath(), "group "+g.Group, g.err))
				}
			}
			if failed > 0 {
				h.print(cmd.ErrOrStderr())
				return errReported
			}
			return nil
		})
	}
	return c
}

// errNoSuchGroup is a group the coordinator does not know (Kafka answers
// DescribeGroups with state Dead before v6, GROUP_ID_NOT_FOUND since).
var errNoSuchGroup = kerr.GroupIDNotFound

// groupMeta is a group's state and members, from DescribeGroups (a
// classic group) or ConsumerGroupDescribe (a KIP-848 consumer group).
type groupMeta struct {
	state, protocol string
	coordinator     int32
	members         []groupMember
	exists          bool  // false: the coordinator knows no such group
	err             error // the group could not be described
}

// describeGroupMetas describes groups with DescribeGroups and, where the
// cluster offers it, ConsumerGroupDescribe, as Kafka's Admin does: a
// KIP-848 group is not a classic group (Kafka answers DescribeGroups with
// GROUP_ID_NOT_FOUND for it, and ConsumerGroupDescribe with
// GROUP_ID_NOT_FOUND for a classic group).
func describeGroupMetas(ctx context.Context, a *admin, groups []string) (map[string]groupMeta, error) {
	out := map[string]groupMeta{}
	if len(groups) == 0 {
		return out, nil
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	classic, err := retryDial(ctx, func() (kadm.DescribedGroups, error) { return a.adm.DescribeGroups(ctx, groups...) })
	var se *kadm.ShardErrors
	if err != nil && !(errors.As(err, &se) && !se.AllFailed) {
		return nil, fmt.Errorf("DescribeGroups: %w", unwrapKadm(err))
	}
	consumer := kadm.DescribedConsumerGroups{}
	if a.supports(ctx, kmsg.ConsumerGroupDescribe) == nil {
		// Errors leave a group to DescribeGroups' answer.
		consumer, _ = a.adm.DescribeConsumerGroups(ctx, groups...)
	}
	for _, g := range groups {
		d, dok := classic[g]
		c, cok := consumer[g]
		cok = cok && c.Err == nil
		dok = dok && d.Err == nil && d.State != "Dead"
		switch {
		case dok && (len(d.Members) > 0 || !cok || len(c.Members) == 0):
			m := groupMeta{state: d.State, protocol: d.Protocol, coordinator: d.Coordinator.NodeID, exists: true, members: []groupMember{}}
			for _, dm := range d.Members {
				gm := groupMember{ConsumerID: dm.MemberID, Host: dm.ClientHost, ClientID: dm.ClientID, Assignment: map[string][]int32{}}
				if dm.InstanceID != nil {
					gm.InstanceID = *dm.InstanceID
				}
				if ca, ok := dm.Assigned.AsConsumer(); ok {
					for _, t := range ca.Topics {
						gm.Assignment[t.Topic] = append(gm.Assignment[t.Topic], t.Partitions...)
					}
				}
				m.members = append(m.members, gm)
			}
			out[g] = m
		case cok:
			m := groupMeta{state: c.State, protocol: c.AssignorName, coordinator: c.Coordinator.NodeID, exists: true, members: []groupMember{}}
			for _, cm := range c.Members {
				gm := groupMember{ConsumerID: cm.MemberID, Host: cm.ClientHost, ClientID: cm.ClientID, Assignment: map[string][]int32{}}
				if cm.InstanceID != nil {
					gm.InstanceID = *cm.InstanceID
				}
				cm.Assignment.EachPartitions(func(t string, ps []int32) {
					if t != "" { // a topic answered by id alone (kfake)
						gm.Assignment[t] = append(gm.Assignment[t], ps...)
					}
				})
				m.members = append(m.members, gm)
			}
			out[g] = m
		case d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound):
			out[g] = groupMeta{err: brokerErr(d.Err, &d.ErrMessage)}
		case !slices.Contains(classic.Names(), g) && se != nil:
			out[g] = groupMeta{err: errors.New("DescribeGroups: not answered (its coordinator failed)")}
		default: // GROUP_ID_NOT_FOUND, or Dead: no such group
			out[g] = groupMeta{state: "Dead"}
		}
	}
	for _, m := range out {
		for _, gm := range m.members {
			for t, ps := range gm.Assignment {
				slices.Sort(ps)
				gm.Assignment[t] = slices.Compact(ps)
			}
		}
		slices.SortFunc(m.members, func(x, y groupMember) int { return strings.Compare(x.ConsumerID, y.ConsumerID) })
	}
	return out, nil
}

// describeGroups gathers what sluice group describe prints: the groups'
// members (describeGroupMetas), committed offsets (OffsetFetch) and the
// log end offsets of their partitions (ListOffsets).
func describeGroups(ctx context.Context, a *admin, groups []string) ([]groupInfo, error) {
	metas, err := describeGroupMetas(ctx, a, groups)
	if err != nil {
		return nil, err
	}
	cctx, cancel := a.ctx(ctx)
	defer cancel()
	fetched := a.adm.FetchManyOffsets(cctx, groups...)
	// Every partition a group is assigned or has committed, and their end
	// offsets.
	topics := map[string]bool{}
	for _, g := range groups {
		for _, m := range metas[g].members {
			for t := range m.Assignment {
				topics[t] = true
			}
		}
		if f, ok := fetched[g]; ok && f.Err == nil {
			for t := range f.Fetched {
				topics[t] = true
			}
		}
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		if ends, err = a.adm.ListEndOffsets(cctx, slices.Sorted(mapKeys(topics))...); err != nil {
			return nil, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
		}
	}
	var out []groupInfo
	for _, name := range groups {
		m := metas[name]
		g := groupInfo{Group: name, Coordinator: -1, Members: []groupMember{}, Partitions: []groupPartition{}}
		f, fok := fetched[name]
		var commits kadm.OffsetResponses
		switch {
		case m.err != nil:
			g.err = m.err
		case !fok:
			g.err = errors.New("OffsetFetch: not answered")
		case f.Err != nil && !(errors.Is(f.Err, kerr.GroupIDNotFound) && m.exists):
			if errors.Is(f.Err, kerr.GroupIDNotFound) {
				g.err = errNoSuchGroup
			} else {
				g.err = fmt.Errorf("OffsetFetch: %w", unwrapKadm(f.Err))
			}
		default:
			commits = f.Fetched
			if !m.exists && !hasCommits(commits) {
				g.err = errNoSuchGroup
			}
		}
		if g.err != nil {
			g.Error = g.err.Error()
			out = append(out, g)
			continue
		}
		g.State, g.Protocol, g.Coordinator, g.Members = m.state, m.protocol, m.coordinator, m.members
		if !m.exists {
			g.State = "Empty" // only commits: Kafka's Empty group
		}
		owner := map[tp]*groupMember{}
		rows := map[tp]bool{}
		for i := range g.Members {
			for t, ps := range g.Members[i].Assignment {
				for _, p := range ps {
					owner[tp{t, p}] = &g.Members[i]
					rows[tp{t, p}] = true
				}
			}
		}
		commits.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.At >= 0 {
				rows[tp{o.Topic, o.Partition}] = true
			}
		})
		for _, p := range sortedTPs(rows) {
			r := groupPartition{Topic: p.Topic, Partition: p.Partition, CurrentOffset: -1, LogEndOffset: -1, Lag: -1}
			if o, ok := commits.Lookup(p.Topic, p.Partition); ok {
				if o.Err != nil {
					r.Error = "OffsetFetch: " + o.Err.Error()
				} else if o.At >= 0 {
					r.CurrentOffset = o.At
				}
			}
			if e, ok := ends.Lookup(p.Topic, p.Partition); ok {
				if e.Err != nil {
					if r.Error == "" {
						r.Error = "ListOffsets: " + e.Err.Error()
					}
				} else {
					r.LogEndOffset = e.Offset
				}
			}
			if r.CurrentOffset >= 0 && r.LogEndOffset >= 0 {
				r.Lag = max(r.LogEndOffset-r.CurrentOffset, 0)
			}
			if m := owner[p]; m != nil {
				r.ConsumerID, r.Host, r.ClientID = m.ConsumerID, m.Host, m.ClientID
			}
			g.Partitions = append(g.Partitions, r)
		}
		seen := map[string]bool{}
		for _, m := range owner {
			seen[m.ConsumerID] = true
		}
		for _, m := range g.Members {
			if !seen[m.ConsumerID] {
				g.Partitions = append(g.Partitions, groupPartition{Partition: -1, CurrentOffset: -1, LogEndOffset: -1, Lag: -1, ConsumerID: m.ConsumerID, Host: m.Host, ClientID: m.ClientID})
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// hasCommits reports whether os holds a committed offset.
func hasCommits(os kadm.OffsetResponses) bool {
	found := false
	os.Each(func(o kadm.OffsetResponse) { found = found || (o.Err == nil && o.At >= 0) })
	return found
}

// printGroupOffsets prints as kafka-consumer-groups.sh --describe.
func printGroupOffsets(w io.Writer, infos []groupInfo) {
	for _, g := range infos {
		if g.err != nil {
			continue
		}
		fmt.Fprintln(w)
		if len(g.Members) == 0 {
			fmt.Fprintf(w, "Consumer group '%s' has no active members.\n\n", g.Group)
		}
		if len(g.Partitions) == 0 {
			fmt.Fprintf(w, "Consumer group '%s' has no committed offsets and no assigned partitions.\n", g.Group)
			continue
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
		for _, p := range g.Partitions {
			part := "-"
			if p.Partition >= 0 {
				part = fmt.Sprint(p.Partition)
			}
			lag := orUnknown(p.Lag)
			if p.Error != "" {
				lag = p.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Group, dash(p.Topic), part, orUnknown(p.CurrentOffset), orUnknown(p.LogEndOffset),
				lag, dash(p.ConsumerID), dash(p.Host), dash(p.ClientID))
		}
		tw.Flush()
	}
}

// printGroupMembers prints as kafka-consumer-groups.sh --describe
// --members --verbose.
func printGroupMembers(w io.Writer, infos []groupInfo) {
	for _, g := range infos {
		if g.err != nil {
			continue
		}
		fmt.Fprintln(w)
		if len(g.Members) == 0 {
			fmt.Fprintf(w, "Consumer group '%s' has no active members.\n", g.Group)
			continue
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS\tASSIGNMENT")
		for _, m := range g.Members {
			n := 0
			var parts []string
			for _, t := range slices.Sorted(mapKeys(m.Assignment)) {
				n += len(m.Assignment[t])
				parts = append(parts, fmt.Sprintf("%s(%s)", t, joinInts(m.Assignment[t], ",")))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", g.Group, m.ConsumerID, dash(m.Host), dash(m.ClientID), n, dash(strings.Join(parts, ",")))
		}
		tw.Flush()
	}
}

// printGroupStates prints as kafka-consumer-groups.sh --describe --state.
func printGroupStates(w io.Writer, infos []groupInfo) {
	tw := newTable(w)
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\t#MEMBERS")
	for _, g := range infos {
		if g.err != nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\n", g.Group, g.Coordinator, dash(g.Protocol), g.State, len(g.Members))
	}
	tw.Flush()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func newGroupDeleteCmd() *cobra.Command {
	c := command("delete --group G... | --all-groups", `Deletes groups and their committed offsets (DeleteGroups). Only a group
with no members can be deleted (Kafka answers NON_EMPTY_GROUP otherwise).
Each group is reported; the command fails if any was not deleted.`)
	gf := addGroupFlags(c.Flags(), true)
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := gf.check(); err != nil {
			return err
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			groups, err := gf.resolve(ctx, a)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(groups) == 0 {
				fmt.Fprintln(w, "No groups to delete.")
				return nil
			}
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			rs, err := a.adm.DeleteGroups(ctx, groups...)
			if err != nil {
				return fmt.Errorf("DeleteGroups: %w", unwrapKadm(err))
			}
			var h hints
			failed := 0
			for _, g := range groups {
				r, ok := rs[g]
				err := brokerErr(r.Err, &r.ErrMessage)
				if !ok {
					err = errors.New("not answered")
				}
				if err != nil {
					failed++
					h.note(err)
					fmt.Fprintf(w, "Group %s: %v\n", g, err)
					continue
				}
				fmt.Fprintf(w, "Deleted group %s.\n", g)
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

// resolvePartitions lists the partitions of specs (every partition of a
// topic given alone); a topic or partition the cluster does not have is
// an error.
func resolvePartitions(ctx context.Context, a *admin, specs []topicSpec) ([]tp, error) {
	var topics []string
	for _, s := range specs {
		topics = append(topics, s.topic)
	}
	st, err := a.describeTopics(ctx, slices.Compact(slices.Sorted(slices.Values(topics))))
	if err != nil {
		return nil, err
	}
	set := map[tp]bool{}
	for _, s := range specs {
		have := st.partitionsOf(s.topic)
		ps := s.partitions
		if ps == nil {
			ps = have
		}
		for _, p := range ps {
			if !slices.Contains(have, p) {
				return nil, fmt.Errorf("%s-%d: %w", s.topic, p, kerr.UnknownTopicOrPartition)
			}
			set[tp{s.topic, p}] = true
		}
	}
	return sortedTPs(set), nil
}

func newGroupDeleteOffsetsCmd() *cobra.Command {
	c := command("delete-offsets --group G --topic T[:P,P]...", `Deletes a group's committed offsets of topics or partitions
(OffsetDelete). As kafka-consumer-groups.sh --delete-offsets. Kafka
refuses (GROUP_SUBSCRIBED_TO_TOPIC) while a member of the group is
subscribed to the topic. Prints each partition's status.`)
	fs := c.Flags()
	group := fs.String("group", "", "the consumer `group`")
	topics := fs.StringArray("topic", nil, "a `topic`, or topic:0,1 for some of its partitions (repeatable)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if *group == "" {
			return usageErrorf("--group is required")
		}
		if len(*topics) == 0 {
			return usageErrorf("--topic is required")
		}
		var specs []topicSpec
		for _, t := range *topics {
			s, err := parseTopicSpec("--topic", t)
			if err != nil {
				return err
			}
			specs = append(specs, s)
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			parts, err := resolvePartitions(ctx, a, specs)
			if err != nil {
				return err
			}
			set := kadm.TopicsSet{}
			for _, p := range parts {
				set.Add(p.Topic, p.Partition)
			}
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			rs, err := a.adm.DeleteOffsets(ctx, *group, set)
			if err != nil {
				return fmt.Errorf("OffsetDelete: group %s: %w", *group, unwrapKadm(err))
			}
			w := cmd.OutOrStdout()
			tw := newTable(w)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATUS")
			var h hints
			failed := 0
			for _, p := range parts {
				err, ok := rs.Lookup(p.Topic, p.Partition)
				status := "Successful"
				switch {
				case !ok:
					status, err = "not answered", errors.New("not answered")
				case err != nil:
					status = err.Error()
				}
				if err != nil {
					failed++
					h.note(err)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\n", p.Topic, p.Partition, status)
			}
			tw.Flush()
			if failed > 0 {
				h.print(w)
				return errReported
			}
			return nil
		})
	}
	return c
}

// resetKind is how reset-offsets picks new offsets (the
// kafka-consumer-groups.sh options of the same names).
type resetKind int

const (
	resetEarliest resetKind = iota // the log start offset
	resetLatest                    // the log end offset
	resetCurrent                   // the committed offset (the log end without one)
	resetToOffset                  // a given offset
	resetDatetime                  // the first offset at or after a time (the log end if none)
	resetShiftBy                   // the committed offset plus n
	resetDuration                  // resetDatetime of now minus a duration
)

type resetSpec struct {
	kind   resetKind
	offset int64 // resetToOffset; resetShiftBy's shift
	millis int64 // resetDatetime, resetDuration: ms since the epoch
}

// resetRow is one line of the plan: GROUP TOPIC PARTITION NEW-OFFSET.
type resetRow struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"new_offset"`
	Error     string `json:"error,omitempty"`
	// clamped says why Offset is not the offset asked for: it was outside
	// the log ("" when it was not).
	clamped string
}

// errGroupActive is a group with members: Kafka resets only an inactive
// group (kafka-consumer-groups.sh checks the state is Empty or Dead, and
// the coordinator refuses a commit from outside a live generation).
type errGroupActive struct{ group, state string }

func (e *errGroupActive) Error() string {
	return fmt.Sprintf("assignments can only be reset if the group '%s' is inactive, but the current state is %s", e.group, e.state)
}

// isoDuration is java.time.Duration's text, which kafka-consumer-groups.sh
// --by-duration takes (PnDTnHnMnS).
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDuration parses a Go duration (90m, 1h30m) or an ISO-8601 one
// (PT1H30M, P1DT2H).
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	m := isoDuration.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, fmt.Errorf("%q is not a duration (e.g. 1h30m, or ISO-8601 PT1H30M)", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, _ := strconv.ParseInt(m[i+1], 10, 64)
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		f, _ := strconv.ParseFloat(m[4], 64)
		d += time.Duration(f * float64(time.Second))
	}
	return d, nil
}

func newGroupResetOffsetsCmd() *cobra.Command {
	c := command("reset-offsets --group G... | --all-groups --topic T[:P,P]... | --all-topics --to-earliest|--to-latest|--to-current|--to-offset N|--to-datetime T|--shift-by N|--by-duration D [--dry-run | --execute]", `Resets groups' committed offsets (a dry run without --execute). As
kafka-consumer-groups.sh --reset-offsets, it prints the plan (GROUP TOPIC PARTITION NEW-OFFSET),
and with --execute commits it (OffsetCommit); without --execute it is a
dry run. Only an inactive group (state Empty, or no group yet) is reset:
Kafka refuses while members are active. --topic T resets every partition
of T, T:0,1 some; --all-topics every partition the group has committed
offsets for. New offsets are kept within the log start and end offsets
(a line on stderr names each partition where that changed one).
--to-datetime takes RFC 3339 (2026-12-01T10:00:00Z) or Kafka's
YYYY-MM-DDTHH:mm:SS[.sss] in local time; --by-duration a Go duration
(1h30m) or ISO-8601 (PT1H30M), back from now; --shift-by moves the
committed offset (negative: back) and needs one.`)
	fs := c.Flags()
	gf := addGroupFlags(fs, true)
	topics := fs.StringArray("topic", nil, "a `topic`, or topic:0,1 for some of its partitions (repeatable)")
	allTopics := fs.Bool("all-topics", false, "every partition the group has committed offsets for")
	toEarliest := fs.Bool("to-earliest", false, "reset to the log start offsets")
	toLatest := fs.Bool("to-latest", false, "reset to the log end offsets")
	toCurrent := fs.Bool("to-current", false, "reset to the committed offsets (the log end offset where there is none)")
	toOffset := fs.Int64("to-offset", 0, "reset to this `offset`")
	toDatetime := fs.String("to-datetime", "", "reset to the first offset at or after this `time`")
	shiftBy := fs.Int64("shift-by", 0, "move the committed offsets by `n` (negative: back)")
	byDuration := fs.String("by-duration", "", "reset to the first offset at or after now minus this `duration`")
	dryRun := fs.Bool("dry-run", false, "print the plan only (the default)")
	execute := fs.Bool("execute", false, "commit the new offsets")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := gf.check(); err != nil {
			return err
		}
		switch {
		case *allTopics && len(*topics) > 0:
			return usageErrorf("give --topic or --all-topics, not both")
		case !*allTopics && len(*topics) == 0:
			return usageErrorf("--topic or --all-topics is required")
		case *dryRun && *execute:
			return usageErrorf("give --dry-run or --execute, not both")
		}
		var specs []topicSpec
		for _, t := range *topics {
			s, err := parseTopicSpec("--topic", t)
			if err != nil {
				return err
			}
			specs = append(specs, s)
		}
		var spec resetSpec
		var given []string
		for _, f := range []struct {
			name string
			set  bool
			kind resetKind
		}{
			{"to-earliest", *toEarliest, resetEarliest}, {"to-latest", *toLatest, resetLatest},
			{"to-current", *toCurrent, resetCurrent}, {"to-offset", fs.Changed("to-offset"), resetToOffset},
			{"to-datetime", fs.Changed("to-datetime"), resetDatetime}, {"shift-by", fs.Changed("shift-by"), resetShiftBy},
			{"by-duration", fs.Changed("by-duration"), resetDuration},
		} {
			if f.set {
				given = append(given, "--"+f.name)
				spec.kind = f.kind
			}
		}
		if len(given) != 1 {
			return usageErrorf("give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, --to-datetime, --shift-by, --by-duration (got %s)", dash(strings.Join(given, " ")))
		}
		switch spec.kind {
		case resetToOffset:
			if *toOffset < 0 {
				return usageErrorf("--to-offset must not be negative, not %d", *toOffset)
			}
			spec.offset = *toOffset
		case resetShiftBy:
			spec.offset = *shiftBy
		case resetDatetime:
			t, err := parseTime(*toDatetime)
			if err != nil {
				return usageErrorf("--to-datetime: %v", err)
			}
			spec.millis = t.UnixMilli()
		case resetDuration:
			d, err := parseDuration(*byDuration)
			if err != nil || d < 0 {
				return usageErrorf("--by-duration: %v", cmpErr(err, "must not be negative"))
			}
			spec.millis = time.Now().Add(-d).UnixMilli()
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return resetOffsets(ctx, a, gf, specs, spec, *execute, cmd.CommandPath(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	}
	return c
}

func cmpErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// offsetLists caches ListOffsets answers across groups.
type offsetLists struct {
	a     *admin
	lists map[string]kadm.ListedOffsets // "start", "end", "ms"
}

func (o *offsetLists) lookup(ctx context.Context, which string, millis int64, p tp) (int64, error) {
	if o.lists == nil {
		o.lists = map[string]kadm.ListedOffsets{}
	}
	l := o.lists[which]
	if _, ok := l[p.Topic]; !ok {
		ctx, cancel := o.a.ctx(ctx)
		defer cancel()
		var got kadm.ListedOffsets
		var err error
		switch which {
		case "start":
			got, err = o.a.adm.ListStartOffsets(ctx, p.Topic)
		case "end":
			got, err = o.a.adm.ListEndOffsets(ctx, p.Topic)
		default:
			got, err = o.a.adm.ListOffsetsAfterMilli(ctx, millis, p.Topic)
		}
		if err != nil {
			return 0, fmt.Errorf("ListOffsets: %w", unwrapKadm(err))
		}
		if l == nil {
			l = kadm.ListedOffsets{}
			o.lists[which] = l
		}
		l[p.Topic] = got[p.Topic]
	}
	lo, ok := l.Lookup(p.Topic, p.Partition)
	if !ok {
		return 0, fmt.Errorf("%s-%d: ListOffsets: %w", p.Topic, p.Partition, kerr.UnknownTopicOrPartition)
	}
	if lo.Err != nil {
		return 0, fmt.Errorf("%s-%d: ListOffsets: %w", p.Topic, p.Partition, lo.Err)
	}
	return lo.Offset, nil
}

// resetOffsets plans, prints and (with execute) commits the reset of
// every group of gf.
func resetOffsets(ctx context.Context, a *admin, gf *groupFlags, specs []topicSpec, spec resetSpec, execute bool, cmdPath string, w, stderr io.Writer) error {
	groups, err := gf.resolve(ctx, a)
	if err != nil {
		return err
	}
	var parts []tp
	if specs != nil {
		if parts, err = resolvePartitions(ctx, a, specs); err != nil {
			return err
		}
	}
	lists := &offsetLists{a: a}
	m := newMeter(stderr)
	var rows []resetRow
	var h hints
	var failures []string
	active := false
	for i, g := range groups {
		m.show("reset-offsets: group %d of %d (%s)", i+1, len(groups), g)
		gr, err := planGroupReset(ctx, a, lists, g, parts, spec)
		if err == nil && execute && len(gr) > 0 {
			err = commitReset(ctx, a, g, gr)
		}
		if err != nil {
			h.note(err)
			var ga *errGroupActive
			if errors.As(err, &ga) && !active {
				active = true
				defer fmt.Fprintln(stderr, "hint: stop the group's consumers first (sluice group describe --members lists them)")
			}
			failures = append(failures, failure(cmdPath, "group "+g, err))
			continue
		}
		if len(gr) == 0 {
			fmt.Fprintf(stderr, "Group %s: no partitions to reset (it has no committed offsets).\n", g)
		}
		rows = append(rows, gr...)
	}
	m.done()
	if len(rows) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Group, r.Topic, r.Partition, r.Offset)
		}
		tw.Flush()
	}
	for _, r := range rows {
		if r.clamped != "" {
			fmt.Fprintf(stderr, "Group %s, %s-%d: %s.\n", r.Group, r.Topic, r.Partition, r.clamped)
		}
	}
	for _, f := range failures {
		fmt.Fprintln(stderr, f)
	}
	h.print(stderr)
	if !execute {
		fmt.Fprintln(stderr, "Dry run: no offsets were changed (add --execute to commit them).")
	}
	if len(failures) > 0 {
		return errReported
	}
	return nil
}

// planGroupReset computes one group's new offsets.
func planGroupReset(ctx context.Context, a *admin, lists *offsetLists, group string, parts []tp, spec resetSpec) ([]resetRow, error) {
	metas, err := describeGroupMetas(ctx, a, []string{group})
	if err != nil {
		return nil, err
	}
	switch m := metas[group]; {
	case m.err != nil:
		return nil, m.err
	case m.state != "Empty" && m.state != "Dead" && m.state != "":
		return nil, &errGroupActive{group, m.state}
	}
	cctx, cancel := a.ctx(ctx)
	defer cancel()
	committed, err := a.adm.FetchOffsets(cctx, group)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound): // no group yet: no commits
		committed = nil
	case err != nil:
		return nil, fmt.Errorf("OffsetFetch: %w", unwrapKadm(err))
	}
	if parts == nil { // --all-topics
		set := map[tp]bool{}
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				set[tp{o.Topic, o.Partition}] = true
			}
		})
		parts = sortedTPs(set)
	}
	var rows []resetRow
	for _, p := range parts {
		cur := int64(-1)
		if o, ok := committed.Lookup(p.Topic, p.Partition); ok && o.Err == nil {
			cur = o.At
		}
		var off int64
		var err error
		switch spec.kind {
		case resetEarliest:
			off, err = lists.lookup(ctx, "start", 0, p)
		case resetLatest:
			off, err = lists.lookup(ctx, "end", 0, p)
		case resetCurrent:
			off = cur
			if cur < 0 {
				off, err = lists.lookup(ctx, "end", 0, p)
			}
		case resetToOffset:
			off = spec.offset
		case resetShiftBy:
			if cur < 0 {
				return nil, fmt.Errorf("%s-%d has no committed offset to shift", p.Topic, p.Partition)
			}
			off = cur + spec.offset
		case resetDatetime, resetDuration:
			off, err = lists.lookup(ctx, "ms", spec.millis, p)
			if err == nil && off < 0 { // no record at or after: the end
				off, err = lists.lookup(ctx, "end", 0, p)
			}
		}
		if err != nil {
			return nil, err
		}
		// Kafka's checkOffsetsRange: within [log start, log end].
		start, err := lists.lookup(ctx, "start", 0, p)
		if err != nil {
			return nil, err
		}
		end, err := lists.lookup(ctx, "end", 0, p)
		if err != nil {
			return nil, err
		}
		row := resetRow{Group: group, Topic: p.Topic, Partition: p.Partition, Offset: min(max(off, start), end)}
		switch {
		case off > end:
			row.clamped = fmt.Sprintf("offset %d is past the log end offset: set to %d", off, end)
		case off < start:
			row.clamped = fmt.Sprintf("offset %d is below the log start offset: set to %d", off, start)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// commitReset commits a group's new offsets (OffsetCommit outside any
// generation, as kafka-consumer-groups.sh does).
func commitReset(ctx context.Context, a *admin, group string, rows []resetRow) error {
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	os := kadm.Offsets{}
	for _, r := range rows {
		os.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.Offset, LeaderEpoch: -1})
	}
	rs, err := a.adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return fmt.Errorf("OffsetCommit: %w", unwrapKadm(err))
	}
	var errs []string
	var first error
	rs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			first = firstErr(first, o.Err)
			errs = append(errs, fmt.Sprintf("%s-%d: %v", o.Topic, o.Partition, o.Err))
		}
	})
	if first != nil {
		sort.Strings(errs)
		return fmt.Errorf("OffsetCommit: %w (%s)", first, strings.Join(errs, "; "))
	}
	return nil
}

// retryDial calls do again, within ctx, while it fails only because a
// broker could not be dialed: kgo sends a group request's FindCoordinator
// to any broker it knows, a dead seed or a broker not yet fenced among
// them, and does not try another one; the next call picks again.
func retryDial[T any](ctx context.Context, do func() (T, error)) (T, error) {
	for {
		v, err := do()
		if err == nil || !isDialError(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// isDialError reports whether err, or every shard error of it, is a
// failure to reach a broker.
func isDialError(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !isDialError(e.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
