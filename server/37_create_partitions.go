package server

// CreatePartitions, versions 0-3. v1 adds the throttle time; v2 is
// flexible; v3 changes nothing. Partitions only grow. Manual assignment
// is refused (INVALID_REQUEST): a single node places every partition on
// itself, so only a null assignment is accepted.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 37, minVersion: 0, maxVersion: 3, serve: serveCreatePartitions})
}

func serveCreatePartitions(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	settled := func(kresp kmsg.Response) bool {
		failed := map[string]bool{}
		for _, st := range kresp.(*kmsg.CreatePartitionsResponse).Topics {
			failed[st.Topic] = st.ErrorCode != 0
		}
		for _, rt := range req.Topics {
			if t, ok := b.meta.Topic(rt.Topic); ok && t.Partitions < rt.Count && !failed[rt.Topic] && !req.ValidateOnly {
				return false
			}
		}
		return true
	}
	if fresp, ok, err := b.forward(ctx, cc, req, settled); ok {
		if err != nil {
			for _, rt := range req.Topics {
				st := kmsg.NewCreatePartitionsResponseTopic()
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
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = kafkaErrorf(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		default:
			var assignment [][]int32
			if rt.Assignment != nil {
				assignment = make([][]int32, 0, len(rt.Assignment))
				for _, a := range rt.Assignment {
					assignment = append(assignment, append([]int32{}, a.Replicas...))
				}
			}
			err = b.addPartitions(rt.Topic, rt.Count, assignment, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode = kafkaCode(err)
			st.ErrorMessage = errMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
