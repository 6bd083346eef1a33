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
	seenNames, seenIDs := map[string]int{}, map[[16]byte]int{}
	for _, rt := range topics {
		if rt.Topic != nil {
			seenNames[*rt.Topic]++
		} else {
			seenIDs[rt.TopicID]++
		}
	}
	// A topic named once by ID and once, in another entry, by name is
	// deleted by neither: the name's entry answers INVALID_REQUEST with
	// the ID, and the ID's entry gets no answer of its own (Kafka's
	// ControllerApis.deleteTopics).
	pairs := map[string][16]byte{} // name -> its ID, both named
	for _, rt := range topics {
		if rt.Topic == nil || rt.TopicID != [16]byte{} || seenNames[*rt.Topic] > 1 {
			continue
		}
		if t, ok := b.meta.Topic(*rt.Topic); ok && seenIDs[t.ID] == 1 {
			pairs[*rt.Topic] = t.ID
		}
	}
	pairedIDs := map[[16]byte]bool{}
	for _, id := range pairs {
		pairedIDs[id] = true
	}
	for _, rt := range topics {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var pairID [16]byte
		var paired bool
		if rt.Topic != nil && rt.TopicID == [16]byte{} {
			pairID, paired = pairs[*rt.Topic]
		}
		var err error
		switch {
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			err = kafkaErrorf(kerr.InvalidRequest, "a topic is named by name or by id, not both")
		case rt.Topic != nil && seenNames[*rt.Topic] > 1, rt.Topic == nil && seenIDs[rt.TopicID] > 1:
			err = kafkaErrorf(kerr.InvalidRequest, "topic appears more than once in the request")
		case rt.Topic == nil && pairedIDs[rt.TopicID]:
			continue // answered by the entry naming it by name
		case paired:
			st.TopicID = pairID
			err = kafkaErrorf(kerr.InvalidRequest, "the topic name maps to a topic id the request also names")
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
