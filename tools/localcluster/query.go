package localcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Poll calls f every PollInterval until it returns nil or d passes (or
// ctx ends), and then returns f's last error; each call gets 5 s.
func Poll(ctx context.Context, d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %v: %w", time.Since(start).Round(time.Millisecond), err)
		case <-time.After(PollInterval):
		}
	}
}

// FreshMetadata is one Metadata request of topics (every topic when
// none) answered by a broker now (any of a client's, or the one broker of
// a kgo.Broker), in kadm's shape. kadm's own Metadata answers from the
// client's cache while it is younger than MetadataMinAge (5 s), which
// would let a poll see a partition as it was seconds ago.
func FreshMetadata(ctx context.Context, r kmsg.Requestor, topics ...string) (kadm.Metadata, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return kadm.Metadata{}, err
	}
	md := kadm.Metadata{Controller: resp.ControllerID, Topics: kadm.TopicDetails{}}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		td := kadm.TopicDetail{Topic: *t.Topic, ID: t.TopicID, IsInternal: t.IsInternal,
			Partitions: kadm.PartitionDetails{}, Err: kerr.ErrorForCode(t.ErrorCode)}
		for _, p := range t.Partitions {
			td.Partitions[p.Partition] = kadm.PartitionDetail{Topic: td.Topic, Partition: p.Partition,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				OfflineReplicas: p.OfflineReplicas, Err: kerr.ErrorForCode(p.ErrorCode)}
		}
		md.Topics[td.Topic] = td
	}
	for _, b := range resp.Brokers {
		md.Brokers = append(md.Brokers, kgo.BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	return md, nil
}

// Metadata is one fresh Metadata answer of topics (all when none) from
// node id (any node when 0): a test asks the nodes on the majority's
// side, since an isolated, paused or stopping node may answer from a
// stale view.
func (c *Cluster) Metadata(ctx context.Context, id int, topics ...string) (kadm.Metadata, error) {
	var r kmsg.Requestor = c.cl
	if id != 0 {
		n, err := c.Node(id)
		if err != nil {
			return kadm.Metadata{}, err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0))
		if err != nil {
			return kadm.Metadata{}, err
		}
		defer cl.Close()
		r = cl
	}
	return FreshMetadata(ctx, r, topics...)
}

// Partitions is topic's partitions in one fresh Metadata answer of node
// id (any node when 0).
func (c *Cluster) Partitions(ctx context.Context, id int, topic string) (kadm.PartitionDetails, error) {
	md, err := c.Metadata(ctx, id, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("metadata has no topic %q", topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, td.Err)
	}
	return td.Partitions, nil
}

// ControllerOf is the active controller one DescribeCluster names, asked
// of any of a client's brokers or of one kgo.Broker.
func ControllerOf(ctx context.Context, r kmsg.Requestor) (int32, error) {
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, r)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
		return -1, err
	}
	if resp.ControllerID < 0 {
		return -1, errors.New("no active controller")
	}
	return resp.ControllerID, nil
}

// Controller is the active controller DescribeCluster names.
func (c *Cluster) Controller(ctx context.Context) (int, error) {
	id, err := ControllerOf(ctx, c.cl)
	return int(id), err
}

// WaitReady waits until every running node's own Metadata lists every
// node as a registered, unfenced broker (Sluice lists only unfenced
// ones, as Kafka) and names an active controller.
func (c *Cluster) WaitReady(ctx context.Context, d time.Duration) error {
	return Poll(ctx, d, func(ctx context.Context) error {
		for _, n := range c.nodes {
			if !c.Running(n.ID) {
				continue
			}
			md, err := c.Metadata(ctx, n.ID)
			if err != nil {
				return fmt.Errorf("node %d: %w", n.ID, err)
			}
			if len(md.Brokers) < len(c.nodes) {
				return fmt.Errorf("node %d: %d of %d brokers registered and unfenced", n.ID, len(md.Brokers), len(c.nodes))
			}
			if md.Controller < 0 {
				return fmt.Errorf("node %d: no controller", n.ID)
			}
		}
		return nil
	})
}

// WaitInSync waits until every partition of topic has a leader and
// every replica in its ISR: no under-replicated partition, which is what
// an operator waits for between two brokers of a rolling restart.
func (c *Cluster) WaitInSync(ctx context.Context, topic string, d time.Duration) error {
	return Poll(ctx, d, func(ctx context.Context) error {
		ps, err := c.Partitions(ctx, 0, topic)
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			return fmt.Errorf("no partitions of %s", topic)
		}
		for _, p := range ps.Sorted() {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				return fmt.Errorf("%s/%d: leader %d, replicas %v, ISR %v, %v", topic, p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
			}
		}
		return nil
	})
}

// CreateTopic creates topic (an earlier try that got through counts),
// trying for up to 30 s.
func (c *Cluster) CreateTopic(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	return Poll(ctx, 30*time.Second, func(ctx context.Context) error {
		resp, err := c.adm.CreateTopic(ctx, partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
}

// WaitWritable waits, for up to d, until every partition of topic has a
// leader that accepts an acks=all produce of one probe record, whose
// value starts with "probe-" (a workload's values must not).
func (c *Cluster) WaitWritable(ctx context.Context, topic string, d time.Duration) error {
	probe, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RecordDeliveryTimeout(4*time.Second), kgo.RetryTimeout(4*time.Second))
	if err != nil {
		return err
	}
	defer probe.Close()
	done := map[int32]bool{}
	return Poll(ctx, d, func(ctx context.Context) error {
		ps, err := c.Partitions(ctx, 0, topic)
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			return errors.New("no partitions")
		}
		var errs []error
		for _, p := range ps.Numbers() {
			if done[p] {
				continue
			}
			if pd := ps[p]; pd.Err != nil || pd.Leader < 0 {
				errs = append(errs, fmt.Errorf("partition %d: leader %d, %v", p, pd.Leader, pd.Err))
				continue
			}
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "probe-%d", time.Now().UnixNano())}
			if err := probe.ProduceSync(ctx, r).FirstErr(); err != nil {
				errs = append(errs, fmt.Errorf("partition %d: produce: %w", p, err))
				continue
			}
			done[p] = true
		}
		return errors.Join(errs...)
	})
}
