package server

// DeleteTopics, versions 0-6. v1 adds the throttle time; v4 is flexible;
// v5 adds error messages; v6 names topics by name or by topic ID (KIP-516)
// and answers with both.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 20, minVersion: 0, maxVersion: 6, serve: serveDeleteTopics})
}

func serveDeleteTopics(ctx context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	topics := req.Topics
	if req.Version < 6 {
		topics = nil
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			topics = append(topics, rt)
		}
	}
	settled := func(kresp kmsg.Response) bool {
		for _, st := range kresp.(*kmsg.DeleteTopicsResponse).Topics {
			if st.ErrorCode != 0 {
				continue
			}
			if _, ok := b.meta.TopicByID(st.TopicID); ok {
				return false
			}
			if st.Topic != nil {
				if t, ok := b.meta.Topic(*st.Topic); ok && (st.TopicID == [16]byte{} || t.ID == st.TopicID) {
					return false
				}
			}
		}
		return true
	}
	if fresp, ok, err := b.forward(ctx, cc, req, settled); ok {
		if err != nil {
			for _, rt := range topics {
				st := kmsg.NewDeleteTopicsResponseTopic()
				st.Topic, st.TopicID, st.ErrorCode, st.ErrorMessage = rt.Topic, rt.TopicID, kafkaCode(err), errMessage(err)
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil
		}
		return fresp, nil
	}
	shape := b.deleteTopicsShape(topics)
	for _, rt := range topics {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		answered, err := shape.refusal(rt, &st)
		switch {
		case answered:
			continue // answered by the entry naming it by name
		case err != nil:
		default:
			var name string
			if rt.Topic != nil {
				name = *rt.Topic
			}
			t, derr := b.deleteTopic(name, rt.TopicID, rt.Topic == nil)
			err = derr
			if derr == nil {
				st.Topic, st.TopicID = kmsg.StringPtr(t.Name), t.ID
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

// deleteTopicsShape is what the entries of a DeleteTopics request say
// about one another (Kafka's ControllerApis.deleteTopics): how often each
// name and each ID is named, and the names whose topic's ID another entry
// names.
type deleteTopicsShape struct {
	names     map[string]int
	ids       map[[16]byte]int
	pairs     map[string][16]byte // name -> its topic's ID, named too
	pairedIDs map[[16]byte]bool
}

func (b *Broker) deleteTopicsShape(topics []kmsg.DeleteTopicsRequestTopic) deleteTopicsShape {
	s := deleteTopicsShape{names: map[string]int{}, ids: map[[16]byte]int{}, pairs: map[string][16]byte{}, pairedIDs: map[[16]byte]bool{}}
	for _, rt := range topics {
		switch {
		case rt.Topic != nil && rt.TopicID == [16]byte{}:
			s.names[*rt.Topic]++
		case rt.Topic == nil && rt.TopicID != [16]byte{}:
			s.ids[rt.TopicID]++
		}
	}
	for name, n := range s.names {
		if t, ok := b.meta.Topic(name); ok && n == 1 && s.ids[t.ID] > 0 {
			s.pairs[name] = t.ID
			s.pairedIDs[t.ID] = true
		}
	}
	return s
}

// refusal returns the INVALID_REQUEST an entry gets for the request's
// shape, nil for an entry to serve; answered reports an ID entry that gets no
// answer of its own: a topic named once by ID and once by name is deleted
// by neither, the name's entry answering INVALID_REQUEST with the ID
// (set in st). An entry refused here changes nothing.
func (s deleteTopicsShape) refusal(rt kmsg.DeleteTopicsRequestTopic, st *kmsg.DeleteTopicsResponseTopic) (answered bool, err error) {
	noID := rt.TopicID == [16]byte{}
	switch {
	case rt.Topic != nil && !noID:
		return false, kafkaErrorf(kerr.InvalidRequest, "a topic is named by name or by id, not both")
	case rt.Topic == nil && noID:
		return false, kafkaErrorf(kerr.InvalidRequest, "neither a topic name nor a topic id")
	case rt.Topic != nil && s.names[*rt.Topic] > 1, rt.Topic == nil && s.ids[rt.TopicID] > 1:
		return false, kafkaErrorf(kerr.InvalidRequest, "topic appears more than once in the request")
	case rt.Topic == nil && s.pairedIDs[rt.TopicID]:
		return true, nil
	}
	if rt.Topic != nil {
		if id, ok := s.pairs[*rt.Topic]; ok {
			if st != nil {
				st.TopicID = id
			}
			return false, kafkaErrorf(kerr.InvalidRequest, "the topic name maps to a topic id the request also names")
		}
	}
	return false, nil
}
