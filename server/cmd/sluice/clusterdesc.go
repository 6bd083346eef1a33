package main

// sluice cluster describe: the cluster id, the controller and the brokers
// (DescribeCluster, KIP-700; Metadata where the cluster has no
// DescribeCluster). Fenced brokers are listed only by DescribeCluster v2+
// with IncludeFencedBrokers (KIP-1073); a cluster that answers an older
// version does not report them, and the command says so.
//
// HEARTBEAT-AGE is how long ago the active controller last heard from each
// broker, from DescribeQuorum v1+ (KIP-836's LastFetchTimestamp of the
// metadata log's voters and observers; Sluice reports a broker's last
// heartbeat to the controller there, Kafka its last fetch of the metadata
// log): "0.4s", or "down 1m20s" for a fenced broker. The age is the
// client's clock minus the controller's timestamp. Where the cluster
// has no DescribeQuorum, or its answer names no time for a broker, it is
// "unknown" and the rest of the command is unchanged.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(newClusterCmd) }

func newClusterCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster COMMAND",
		Short: "Describe the cluster: id, controller, brokers",
		Long: `Describes the cluster.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: describe")
		},
	}
	c.AddCommand(newClusterDescribeCmd())
	return c
}

// brokerInfo is one broker of sluice cluster describe.
type brokerInfo struct {
	ID     int32  `json:"id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
	Fenced *bool  `json:"fenced,omitempty"` // nil: the cluster does not say
	// HeartbeatAgeMs is how long ago the controller last heard from the
	// broker (DescribeQuorum's LastFetchTimestamp), null when unknown;
	// HeartbeatAge says it for people ("0.4s", "down 1m20s", "unknown").
	HeartbeatAgeMs *int64 `json:"heartbeat_age_ms"`
	HeartbeatAge   string `json:"heartbeat_age"`
}

// clusterInfo is what sluice cluster describe prints.
type clusterInfo struct {
	ClusterID    string       `json:"cluster_id"`
	Controller   int32        `json:"controller"` // -1: none known
	Brokers      []brokerInfo `json:"brokers"`
	FencedKnown  bool         `json:"fenced_known"`   // the cluster reports fenced brokers (DescribeCluster v2+)
	Source       string       `json:"source"`         // DescribeCluster vN or Metadata vN
	FencedBroker []int32      `json:"fenced_brokers"` // null when not known
	// HeartbeatSource is where the heartbeat ages come from
	// ("DescribeQuorum vN"), or why they are unknown.
	HeartbeatSource string `json:"heartbeat_source"`
}

func newClusterDescribeCmd() *cobra.Command {
	c := command("describe [--json]", `Prints the cluster id, the controller and the brokers. Every broker with
its address, rack and whether it is fenced (DescribeCluster; Metadata where
the cluster has no DescribeCluster). Fenced brokers are reported only by
DescribeCluster v2+ (KIP-1073): otherwise the command prints
"fenced brokers: unknown (the cluster does not report them)".
HEARTBEAT-AGE is how long ago the active controller last heard from the
broker (DescribeQuorum's LastFetchTimestamp; on Sluice the broker's last
heartbeat, on Kafka its last fetch of the metadata log), "down" before it
for a fenced broker; "unknown" where the cluster does not say.`)
	jsonOut := addJSONFlag(c)
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			info, err := describeCluster(ctx, a)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if *jsonOut {
				return writeJSON(w, info)
			}
			fmt.Fprintf(w, "Cluster ID: %s\n", dash(info.ClusterID))
			fmt.Fprintf(w, "Controller: %s\n", orUnknown(int64(info.Controller)))
			fmt.Fprintf(w, "Brokers: %d\n", len(info.Brokers))
			if info.FencedKnown {
				fmt.Fprintf(w, "Fenced brokers: %s\n", brokerList(info.FencedBroker))
			} else {
				fmt.Fprintln(w, "Fenced brokers: unknown (the cluster does not report them)")
			}
			if strings.HasPrefix(info.HeartbeatSource, "unknown") {
				fmt.Fprintf(w, "Heartbeat ages: %s\n", info.HeartbeatSource)
			}
			fmt.Fprintln(w)
			tw := newTable(w)
			fmt.Fprintln(tw, "ID\tHOST\tPORT\tRACK\tCONTROLLER\tFENCED\tHEARTBEAT-AGE")
			for _, b := range info.Brokers {
				fenced := "unknown"
				if b.Fenced != nil {
					fenced = yesNo(*b.Fenced)
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", b.ID, b.Host, b.Port, dash(b.Rack), yesNo(b.ID == info.Controller), fenced, b.HeartbeatAge)
			}
			return tw.Flush()
		})
	}
	return c
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// describeCluster asks DescribeCluster (with fenced brokers, which only
// v2+ carries), or Metadata when the cluster does not offer it.
func describeCluster(ctx context.Context, a *admin) (*clusterInfo, error) {
	info, err := describeBrokers(ctx, a)
	if err != nil {
		return nil, err
	}
	addHeartbeats(ctx, a, info, time.Now())
	return info, nil
}

// describeBrokers is describeCluster without the heartbeat ages.
func describeBrokers(ctx context.Context, a *admin) (*clusterInfo, error) {
	if err := a.supports(ctx, kmsg.DescribeCluster); err != nil {
		if !errors.Is(err, errUnsupportedAPI) {
			return nil, err
		}
		return describeClusterMetadata(ctx, a)
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, fmt.Errorf("DescribeCluster: %w", err)
	}
	if err := kafkaErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("DescribeCluster: %w", err)
	}
	info := &clusterInfo{
		ClusterID: resp.ClusterID, Controller: resp.ControllerID,
		FencedKnown: resp.Version >= 2, Source: fmt.Sprintf("DescribeCluster v%d", resp.Version),
		Brokers: []brokerInfo{},
	}
	if info.FencedKnown {
		info.FencedBroker = []int32{}
	}
	for _, b := range resp.Brokers {
		bi := brokerInfo{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		if info.FencedKnown {
			fenced := b.IsFenced
			bi.Fenced = &fenced
			if fenced {
				info.FencedBroker = append(info.FencedBroker, b.NodeID)
			}
		}
		info.Brokers = append(info.Brokers, bi)
	}
	slices.SortFunc(info.Brokers, func(x, y brokerInfo) int { return int(x.ID) - int(y.ID) })
	slices.Sort(info.FencedBroker)
	return info, nil
}

func describeClusterMetadata(ctx context.Context, a *admin) (*clusterInfo, error) {
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, fmt.Errorf("Metadata: %w", err)
	}
	info := &clusterInfo{Controller: resp.ControllerID, Source: fmt.Sprintf("Metadata v%d", resp.Version), Brokers: []brokerInfo{}}
	if resp.ClusterID != nil {
		info.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		bi := brokerInfo{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		info.Brokers = append(info.Brokers, bi)
	}
	slices.SortFunc(info.Brokers, func(x, y brokerInfo) int { return int(x.ID) - int(y.ID) })
	return info, nil
}

// quorumHeartbeats asks DescribeQuorum (v1+: its timestamps) for the
// metadata log's replicas' LastFetchTimestamp, by broker id (-1 entries
// left out). src names the answer's version, or why there is none.
func quorumHeartbeats(ctx context.Context, a *admin) (last map[int32]int64, src string, err error) {
	if err := a.supports(ctx, kmsg.DescribeQuorum); err != nil {
		return nil, "unknown: the cluster does not offer DescribeQuorum", err
	}
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, "unknown: DescribeQuorum failed", fmt.Errorf("DescribeQuorum: %w", err)
	}
	if err := kafkaErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, "unknown: DescribeQuorum failed", fmt.Errorf("DescribeQuorum: %w", err)
	}
	if resp.Version < 1 {
		return nil, fmt.Sprintf("unknown: DescribeQuorum v%d has no timestamps", resp.Version), nil
	}
	last = map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kafkaErr(p.ErrorCode, p.ErrorMessage); err != nil {
				return nil, "unknown: DescribeQuorum failed", fmt.Errorf("DescribeQuorum: %s partition %d: %w", t.Topic, p.Partition, err)
			}
			for _, r := range append(slices.Clone(p.CurrentVoters), p.Observers...) {
				if r.LastFetchTimestamp >= 0 {
					last[r.ReplicaID] = r.LastFetchTimestamp
				}
			}
		}
	}
	return last, fmt.Sprintf("DescribeQuorum v%d", resp.Version), nil
}

// addHeartbeats fills the brokers' heartbeat ages as of now; a cluster
// without DescribeQuorum, or whose answer fails, leaves them "unknown".
func addHeartbeats(ctx context.Context, a *admin, info *clusterInfo, now time.Time) {
	last, src, err := quorumHeartbeats(ctx, a)
	info.HeartbeatSource = src
	if err != nil && !errors.Is(err, errUnsupportedAPI) {
		info.HeartbeatSource = "unknown: " + err.Error()
	}
	for i := range info.Brokers {
		b := &info.Brokers[i]
		b.HeartbeatAge = "unknown"
		ts, ok := last[b.ID]
		if !ok {
			continue
		}
		age := max(now.UnixMilli()-ts, 0) // clocks apart: never negative
		b.HeartbeatAgeMs = &age
		b.HeartbeatAge = heartbeatAge(time.Duration(age)*time.Millisecond, b.Fenced != nil && *b.Fenced)
	}
}

// heartbeatAge says an age: tenths of a second below 10 s ("0.4s"), whole
// seconds above ("1m20s"), "down " first for a fenced broker.
func heartbeatAge(d time.Duration, fenced bool) string {
	var s string
	if d < 10*time.Second {
		s = fmt.Sprintf("%.1fs", d.Seconds())
	} else {
		s = d.Round(time.Second).String()
	}
	if fenced {
		return "down " + s
	}
	return s
}
