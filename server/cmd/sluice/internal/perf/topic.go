package perf

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createFlags are --create, --partitions and --replication-factor.
type createFlags struct {
	create     bool
	partitions int32
	rf         int16
}

// addCreateFlags adds --create, --partitions and --replication-factor.
func addCreateFlags(fs *pflag.FlagSet) *createFlags {
	c := &createFlags{}
	fs.BoolVar(&c.create, "create", false, "create the topic if it does not exist")
	fs.Int32Var(&c.partitions, "partitions", 1, "with --create: the topic's partitions (-1: the broker's default)")
	fs.Int16Var(&c.rf, "replication-factor", 1, "with --create: the topic's replication factor (-1: the broker's default)")
	return c
}

func (c *createFlags) check() error {
	if c.partitions < -1 || c.partitions == 0 {
		return usagef("--partitions must be positive (or -1, the broker's num.partitions), not %d", c.partitions)
	}
	if c.rf < -1 || c.rf == 0 {
		return usagef("--replication-factor must be positive (or -1, the broker's default.replication.factor), not %d", c.rf)
	}
	return nil
}

// errNoTopic is the error of a missing topic without --create.
var errNoTopic = errors.New("give --create to create it")

// ensureTopic checks topic exists; with create, it creates it if missing
// (CreateTopics, as kafka-topics.sh --create; TOPIC_ALREADY_EXISTS from a
// race is fine). A missing topic is UNKNOWN_TOPIC_OR_PARTITION.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, c createFlags) error {
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	td, ok := tds[topic]
	if ok && td.Err == nil {
		return nil
	}
	if ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	if !c.create {
		return fmt.Errorf("topic %s: %w (%w)", topic, kerr.UnknownTopicOrPartition, errNoTopic)
	}
	resp, err := adm.CreateTopic(ctx, c.partitions, c.rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// endOffsets are the topic's log end offsets, once every partition has a
// leader that answers (a topic just created may not yet).
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		los, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = los.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			los.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			if len(out) > 0 {
				return out, nil
			}
			err = fmt.Errorf("topic %s: no partitions", topic)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list end offsets: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
