package server

// Controller mutation quotas (KIP-599, Kafka's
// ControllerMutationQuotaManager): controller_mutation_rate bounds the
// partitions a user and client id create or delete per second through
// CreateTopics, CreatePartitions and DeleteTopics. A token bucket
// (Kafka's TokenBucket) per entity measures it: it holds at most the rate
// × controller.quota.window.num × controller.quota.window.size.seconds
// tokens, refills at the rate, and each topic takes its partition count.
//
//   - Strict, from CreateTopics v6, DeleteTopics v5 and CreatePartitions
//     v3 (Kafka's ControllerApis strictSinceVersion): a topic met while
//     the bucket is below zero answers THROTTLING_QUOTA_EXCEEDED and is
//     not served; a topic met above zero is served and may take the
//     bucket below zero. throttle_time_ms is the time the bucket needs to
//     climb back to zero when a topic was refused, else 0 (Kafka's
//     StrictControllerMutationQuota).
//   - Permissive, older versions: nothing is refused; throttle_time_ms is
//     the time back to zero when the request left the bucket below it.
//
// Either way the connection is muted for the throttle time (conn.go,
// applyQuotas). Kafka takes the tokens after a topic passed validation;
// here they are taken before the topic is served and given back when it
// fails (already exists, invalid, unknown, ...), so a failed topic costs
// nothing either, but may refuse a later topic of the same request while
// it holds its tokens.
//
// Sluice applies the quota on the broker that received the request,
// before it forwards it to the controller (a forwarded request carries the
// broker's principal). Kafka's brokers forward in an Envelope with the
// client's principal and the active controller applies the quota, so
// there it is cluster-wide; here a client spreading its requests over n
// brokers gets up to n times the rate.

import (
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errThrottled is Kafka's message for THROTTLING_QUOTA_EXCEEDED.
var errThrottled = kmsg.StringPtr("The throttling quota has been exceeded.")

// mutationStrictSince is the first strict version of each mutating API
// (Kafka's ControllerApis).
var mutationStrictSince = map[kmsg.Key]int16{
	kmsg.CreateTopics:     6,
	kmsg.DeleteTopics:     5,
	kmsg.CreatePartitions: 3,
}

// refill brings the token bucket kept in s (Kafka's TokenBucket) to nowMs:
// rate tokens a second, at most burst. A new bucket starts full.
func (s *rateSensor) refill(rate, burst float64, nowMs int64) {
	if !s.bucket {
		s.bucket, s.tokens = true, burst
	} else if d := nowMs - s.tokensMs; d > 0 {
		s.tokens += rate * float64(d) / 1000
	}
	s.tokens = min(s.tokens, burst)
	s.tokensMs = nowMs
}

// mutationQuota is one request's controller_mutation_rate quota.
type mutationQuota struct {
	q      *quotaManager
	key    sensorKey
	rate   float64 // partitions per second
	strict bool
	// throttle is the throttle time decided so far, in ms.
	throttle int64
}

// mutationQuotaFor returns the quota of a request of API key at version
// on cc, nil without one (no quota for its user and client id, or a
// request exempt from client quotas).
func (cc *clientConn) mutationQuotaFor(key kmsg.Key, version int16) *mutationQuota {
	since, ok := mutationStrictSince[key]
	q := cc.b.quotas
	if !ok || q == nil || cc.quotaExempt(int16(key)) {
		return nil
	}
	rate, sk, ok := q.current().quotaFor(quotaMutation, quotaUser(cc.principal()), cc.clientID)
	if !ok {
		return nil
	}
	return &mutationQuota{q: q, key: sk, rate: rate, strict: version >= since}
}

// take takes n tokens for a topic. It reports false, taking none, when
// the quota is strict, n is positive and the bucket is below zero (the
// topic answers THROTTLING_QUOTA_EXCEEDED).
func (m *mutationQuota) take(n float64) bool {
	if n <= 0 {
		return true // a topic that mutates nothing (it will fail) is not held
	}
	q := m.q
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now().UnixMilli()
	q.sweepLocked(now)
	s := q.sensorLocked(m.key, now, true)
	s.last = now
	s.refill(m.rate, m.rate*q.mutBurstSeconds, now)
	if m.strict && s.tokens < 0 {
		m.throttle = bucketThrottleMs(s.tokens, m.rate)
		return false
	}
	s.tokens -= n
	if !m.strict {
		m.throttle = bucketThrottleMs(s.tokens, m.rate)
	}
	return true
}

// giveBack returns n tokens taken for a topic that failed.
func (m *mutationQuota) giveBack(n float64) {
	if n <= 0 {
		return
	}
	q := m.q
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now().UnixMilli()
	if s := q.sensorLocked(m.key, now, false); s != nil && s.bucket {
		s.refill(m.rate, m.rate*q.mutBurstSeconds, now)
		s.tokens = min(s.tokens+n, m.rate*q.mutBurstSeconds)
		if !m.strict || m.throttle > 0 {
			// A refusal's throttle is the time back to zero from
			// the bucket as the request leaves it.
			m.throttle = bucketThrottleMs(s.tokens, m.rate)
		}
	}
}

// bucketThrottleMs is Kafka's ControllerMutationQuotaManager.throttleTimeMs:
// the time a bucket at tokens (below zero) needs to refill to zero at
// rate, in ms; 0 at zero or above. At most math.MaxInt32 (a tiny rate;
// Kafka's long is cut to an int there). A rate of 0 answers 0, but never
// reaches a bucket: AlterClientQuotas refuses it, as Kafka's
// ClientQuotaControlManager does (meta.ValidateQuotaValue).
func bucketThrottleMs(tokens, rate float64) int64 {
	if tokens >= 0 || rate <= 0 {
		return 0
	}
	t := math.Round(-tokens / rate * 1000)
	if !(t < math.MaxInt32) {
		return math.MaxInt32
	}
	return int64(t)
}

// serveMutating serves a CreateTopics, DeleteTopics or CreatePartitions
// under its connection's controller_mutation_rate quota (any other
// request as it is): the topics the quota refuses are answered
// THROTTLING_QUOTA_EXCEEDED, the others served, and the throttle time is
// left in cc.mutationThrottle for applyQuotas.
func (b *Broker) serveMutating(ctx context.Context, h handler, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	if cc == nil {
		return h.serve(ctx, b, cc, kreq)
	}
	m := cc.mutationQuotaFor(kmsg.Key(h.key), kreq.GetVersion())
	if m == nil {
		return h.serve(ctx, b, cc, kreq)
	}
	defer func() { cc.mutationThrottle = max(cc.mutationThrottle, m.throttle) }()
	switch req := kreq.(type) {
	case *kmsg.CreateTopicsRequest:
		seen := map[string]int{}
		for _, rt := range req.Topics {
			seen[rt.Topic]++
		}
		return serveQuotaTopics(ctx, b, cc, h, req, m, &req.Topics,
			func(rt kmsg.CreateTopicsRequestTopic) quotaEntry {
				e := quotaEntry{name: rt.Topic, byName: true}
				if _, exists := b.meta.Topic(rt.Topic); exists || isInternalTopic(rt.Topic) || seen[rt.Topic] > 1 {
					return e // fails: TOPIC_ALREADY_EXISTS, INVALID_REQUEST, ...
				}
				n := rt.NumPartitions
				switch {
				case len(rt.ReplicaAssignment) > 0:
					n = int32(len(rt.ReplicaAssignment))
				case n == -1:
					n = b.cfg.NumPartitions
				}
				e.n = float64(max(n, 0)) // 0 or below -1: INVALID_PARTITIONS
				return e
			},
			func(resp *kmsg.CreateTopicsResponse) []topicResult {
				out := make([]topicResult, len(resp.Topics))
				for i, st := range resp.Topics {
					out[i] = topicResult{name: &st.Topic, code: st.ErrorCode}
				}
				return out
			},
			func(resp *kmsg.CreateTopicsResponse, rt kmsg.CreateTopicsRequestTopic) {
				st := kmsg.NewCreateTopicsResponseTopic()
				st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.ThrottlingQuotaExceeded.Code, errThrottled
				resp.Topics = append(resp.Topics, st)
			})
	case *kmsg.CreatePartitionsRequest:
		return serveQuotaTopics(ctx, b, cc, h, req, m, &req.Topics,
			func(rt kmsg.CreatePartitionsRequestTopic) quotaEntry {
				t, ok := b.meta.Topic(rt.Topic)
				if !ok || rt.Count <= t.Partitions {
					return quotaEntry{name: rt.Topic, byName: true} // fails
				}
				return quotaEntry{name: rt.Topic, byName: true, n: float64(rt.Count - t.Partitions)}
			},
			func(resp *kmsg.CreatePartitionsResponse) []topicResult {
				out := make([]topicResult, len(resp.Topics))
				for i, st := range resp.Topics {
					out[i] = topicResult{name: &st.Topic, code: st.ErrorCode}
				}
				return out
			},
			func(resp *kmsg.CreatePartitionsResponse, rt kmsg.CreatePartitionsRequestTopic) {
				st := kmsg.NewCreatePartitionsResponseTopic()
				st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.ThrottlingQuotaExceeded.Code, errThrottled
				resp.Topics = append(resp.Topics, st)
			})
	case *kmsg.DeleteTopicsRequest:
		if req.Version < 6 {
			seen := map[string]int{}
			for _, name := range req.TopicNames {
				seen[name]++
			}
			return serveQuotaTopics(ctx, b, cc, h, req, m, &req.TopicNames,
				func(name string) quotaEntry {
					e := quotaEntry{name: name, byName: true}
					if seen[name] == 1 {
						e.n = b.deletedPartitions(name)
					} // else INVALID_REQUEST (named twice): free
					return e
				},
				deleteResults,
				func(resp *kmsg.DeleteTopicsResponse, name string) {
					st := kmsg.NewDeleteTopicsResponseTopic()
					st.Topic, st.ErrorCode, st.ErrorMessage = kmsg.StringPtr(name), kerr.ThrottlingQuotaExceeded.Code, errThrottled
					resp.Topics = append(resp.Topics, st)
				})
		}
		shape := b.deleteTopicsShape(req.Topics)
		return serveQuotaTopics(ctx, b, cc, h, req, m, &req.Topics,
			func(rt kmsg.DeleteTopicsRequestTopic) quotaEntry {
				name := b.deleteTopicName(rt.Topic, rt.TopicID)
				e := quotaEntry{name: name, byName: rt.Topic != nil, id: rt.TopicID}
				if answered, err := shape.refusal(rt, nil); !answered && err == nil {
					e.n = b.deletedPartitions(name)
				} // else refused for the request's shape, whatever the bucket: free
				return e
			},
			deleteResults,
			func(resp *kmsg.DeleteTopicsResponse, rt kmsg.DeleteTopicsRequestTopic) {
				st := kmsg.NewDeleteTopicsResponseTopic()
				st.Topic, st.TopicID, st.ErrorCode, st.ErrorMessage = rt.Topic, rt.TopicID, kerr.ThrottlingQuotaExceeded.Code, errThrottled
				if name := b.deleteTopicName(rt.Topic, rt.TopicID); st.Topic == nil && name != "" {
					st.Topic = kmsg.StringPtr(name)
				}
				resp.Topics = append(resp.Topics, st)
			})
	}
	return h.serve(ctx, b, cc, kreq)
}

// quotaEntry is one topic entry of a mutating request: its name (a
// DeleteTopics entry given by ID: the topic's name, "" if unknown),
// whether the entry gave the name (not the ID), its ID (DeleteTopics v6),
// and the tokens it costs (0: it will fail).
type quotaEntry struct {
	name   string
	byName bool
	id     [16]byte
	n      float64
}

// topicResult is a served topic's name (nil: none), ID and error code.
type topicResult struct {
	name *string
	id   [16]byte
	code int16
}

func deleteResults(resp *kmsg.DeleteTopicsResponse) []topicResult {
	out := make([]topicResult, len(resp.Topics))
	for i, st := range resp.Topics {
		out[i] = topicResult{st.Topic, st.TopicID, st.ErrorCode}
	}
	return out
}

// deleteTopicName is the name of a DeleteTopics topic given by name or
// ID, "" for an unknown ID.
func (b *Broker) deleteTopicName(name *string, id [16]byte) string {
	if name != nil {
		return *name
	}
	if t, ok := b.meta.TopicByID(id); ok {
		return t.Name
	}
	return ""
}

// deletedPartitions is the partition count deleting topic name removes
// (0 for an unknown topic).
func (b *Broker) deletedPartitions(name string) float64 {
	if t, ok := b.meta.Topic(name); ok {
		return float64(t.Partitions)
	}
	return 0
}

// serveQuotaTopics takes m's tokens for each topic entry of *topics in
// order (cost gives its name and tokens), serves the request with the
// entries admitted, answers the refused ones with refuse, and gives back
// the tokens of each admitted entry that failed (results reads the served
// response's topics; a failed result naming a topic gives back one entry
// that gave that name, one naming none an entry that gave its ID).
func serveQuotaTopics[Req kmsg.Request, Resp kmsg.Response, T any](ctx context.Context, b *Broker, cc *clientConn, h handler, req Req, m *mutationQuota, topics *[]T,
	cost func(T) quotaEntry, results func(Resp) []topicResult, refuse func(Resp, T)) (kmsg.Response, error) {
	all := *topics
	var (
		admitted, refused []T
		taken             []quotaEntry // admitted's, n 0 once given back
	)
	for _, t := range all {
		e := cost(t)
		if m.take(e.n) {
			admitted = append(admitted, t)
			taken = append(taken, e)
		} else {
			refused = append(refused, t)
		}
	}
	resp := req.ResponseKind().(Resp)
	if len(admitted) > 0 || len(refused) == 0 {
		*topics = admitted
		served, err := h.serve(ctx, b, cc, req)
		*topics = all
		if err != nil {
			for _, e := range taken {
				m.giveBack(e.n)
			}
			return nil, err
		}
		resp = served.(Resp)
		for _, r := range results(resp) {
			if r.code == 0 {
				continue
			}
			i := slices.IndexFunc(taken, func(e quotaEntry) bool {
				if e.n == 0 {
					return false
				}
				if r.name != nil {
					return e.byName && e.name == *r.name
				}
				return !e.byName && r.id != [16]byte{} && e.id == r.id
			})
			if i >= 0 {
				m.giveBack(taken[i].n)
				taken[i].n = 0
			}
		}
	}
	for _, t := range refused {
		refuse(resp, t)
	}
	return resp, nil
}
