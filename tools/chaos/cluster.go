package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicemq/sluice/tools/localcluster"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster is tools/localcluster's, shared with tools/clustertest and
// bench; the runner adds only its configuration.
type (
	Cluster    = localcluster.Cluster
	Node       = localcluster.Node
	NodeFaults = localcluster.NodeFaults
)

// The cluster's timings: Kafka's heartbeat and session shortened (2,000
// and 9,000 ms in Kafka) so that faults are noticed within a short run,
// as tools/clustertest does.
const (
	HeartbeatMs = localcluster.HeartbeatMs
	SessionMs   = localcluster.SessionMs
)

// Poll calls f until it returns nil or d passes (localcluster.Poll).
func Poll(ctx context.Context, d time.Duration, f func(ctx context.Context) error) error {
	return localcluster.Poll(ctx, d, f)
}

// ClusterConfig describes a local cluster of voters (every node is a
// broker and a controller voter, ids 1..Nodes).
type ClusterConfig struct {
	Binary string // the sluice binary (built with -tags faults for disk and clock faults)
	Dir    string // each node's data folder, log and fault-control file go under it
	Nodes  int    // 3 or 5
	Sets   []string
	Logger *slog.Logger
}

// StartCluster starts every node and waits until each listens. The
// nodes reach each other's controller listeners only through faultproxy
// proxies, so the network between any two can be cut in either
// direction; each reads its SLUICE_FAULTS control file (SetFaults).
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		return nil, fmt.Errorf("chaos: %d nodes; a quorum here has 3 or 5", cfg.Nodes)
	}
	sets := append(localcluster.FastFailover(min(3, cfg.Nodes)),
		// Kafka's 3 s delay of a new group's first rebalance (extended
		// by each wave of joins) would leave a short run's consumers
		// mostly idle while the workload churns members.
		"group.initial.rebalance.delay.ms=0",
		// KIP-848 members heartbeat at the broker's interval (5 s by
		// default; kgo's HeartbeatInterval is ignored), and a member
		// waiting for partitions another one releases gets them only at
		// its next heartbeat: the queue's kgo interval instead.
		"group.consumer.heartbeat.interval.ms=500",
		// A transaction left open (its producer abandoned, none fencing
		// it) is aborted within a second of its timeout, not ten: the
		// final read of the txn topic waits for every one to be decided.
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
	)
	return localcluster.Start(ctx, localcluster.Config{
		Binary:     cfg.Binary,
		Dir:        cfg.Dir,
		Voters:     cfg.Nodes,
		Sets:       append(sets, cfg.Sets...),
		FaultsEnv:  "SLUICE_FAULTS",
		Tag:        "chaos",
		ClientOpts: []kgo.Opt{kgo.RequestTimeoutOverhead(3 * time.Second)},
	})
}
