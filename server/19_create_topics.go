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

func serveCreateTopics(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
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
		case len(rt.ReplicaAssignment) > 0:
			err = kafkaErrorf(kerr.InvalidRequest, "manual replica assignment is not supported")
		default:
			topic, cerr := b.createTopic(rt.Topic, rt.NumPartitions, rt.ReplicationFactor, configs, req.ValidateOnly)
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
