package main

// sluice cluster describe: the cluster id, the controller and the brokers
// (DescribeCluster, KIP-700; Metadata where the cluster has no
// DescribeCluster). Fenced brokers are listed only by DescribeCluster v2+
// with IncludeFencedBrokers (KIP-1073); a cluster that answers an older
// version does not report them, and the command says so.

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
}

// clusterInfo is what sluice cluster describe prints.
type clusterInfo struct {
	ClusterID    string       `json:"cluster_id"`
	Controller   int32        `json:"controller"` // -1: none known
	Brokers      []brokerInfo `json:"brokers"`
	FencedKnown  bool         `json:"fenced_known"`   // the cluster reports fenced brokers (DescribeCluster v2+)
	Source       string       `json:"source"`         // DescribeCluster vN or Metadata vN
	FencedBroker []int32      `json:"fenced_brokers"` // null when not known
}

func newClusterDescribeCmd() *cobra.Command {
	c := command("describe [--json]", `Prints the cluster id, the controller and the brokers. Every broker with
its address, rack and whether it is fenced (DescribeCluster; Metadata where
the cluster has no DescribeCluster). Fenced brokers are reported only by
DescribeCluster v2+ (KIP-1073): otherwise the command prints
"fenced brokers: unknown (the cluster does not report them)".`)
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
			fmt.Fprintln(w)
			tw := newTable(w)
			fmt.Fprintln(tw, "ID\tHOST\tPORT\tRACK\tCONTROLLER\tFENCED")
			for _, b := range info.Brokers {
				fenced := "unknown"
				if b.Fenced != nil {
					fenced = yesNo(*b.Fenced)
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", b.ID, b.Host, b.Port, dash(b.Rack), yesNo(b.ID == info.Controller), fenced)
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
