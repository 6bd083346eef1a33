package server

// CreateTopics, versions 0-7. v1 adds validate-only and error messages;
// v4 lets partitions and replication factor be -1 (broker defaults); v5 is
// flexible and returns the topic's configs, partition count and
// replication factor; v7 returns the topic ID.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 19, minVersion: 0, maxVersion: 7, serve: serveCreateTopics})
}

func serveCreateTopics(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	settled := func(kresp kmsg.Response) bool {
		for _, st := range kresp.(*kmsg.CreateTopicsResponse).Topics {
			if _, ok := b.meta.Topic(st.Topic); !ok && st.ErrorCode == 0 && !req.ValidateOnly {
				return false
			}
		}
		return true
	}
	if fresp, ok, err := b.forward(ctx, cc, req, settled); ok {
		if err != nil {
			for _, rt := range req.Topics {
				st := kmsg.NewCreateTopicsResponseTopic()
				st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kafkaCode(err), errMessage(err)
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil
		}
		return fresp, nil
	}
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		configs := map[string]string{}
		var err error
		for _, c := range rt.Configs {
			if c.Value == nil {
				err = kafkaErrorf(kerr.InvalidConfig, "null value for %s", c.Name)
				break
			}
			configs[c.Name] = *c.Value
		}
		switch {
		case err != nil:
		case seen[rt.Topic] > 1:
			err = kafkaErrorf(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		case isInternalTopic(rt.Topic):
			err = checkClientCreate(rt.Topic)
		default:
			var assignment [][]int32
			if len(rt.ReplicaAssignment) > 0 {
				if assignment, err = manualAssignment(rt.ReplicaAssignment); err != nil {
					break
				}
			}
			ts, cerrs := b.createTopics([]topicRequest{{name: rt.Topic, partitions: rt.NumPartitions, rf: rt.ReplicationFactor, configs: configs, assignment: assignment}}, req.ValidateOnly)
			topic, cerr := ts[0], cerrs[0]
			err = cerr
			if cerr == nil {
				st.TopicID = topic.ID
				st.NumPartitions = topic.Partitions
				st.ReplicationFactor = topic.ReplicationFactor
			}
		}
		if err != nil {
			st.ErrorCode = kafkaCode(err)
			st.ErrorMessage = errMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// manualAssignment orders CreateTopics' replica assignment by partition;
// the partitions must be 0 to n-1, each once (Kafka's rule), else
// INVALID_REPLICA_ASSIGNMENT.
func manualAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, error) {
	out := make([][]int32, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || out[a.Partition] != nil {
			return nil, kafkaErrorf(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence; partition %d is out of it or given twice", a.Partition)
		}
		out[a.Partition] = append([]int32{}, a.Replicas...)
	}
	return out, nil
}
