package server

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeQuotaClock makes b's quota clock a manual one starting now and
// returns its advance.
func fakeQuotaClock(b *Broker) func(time.Duration) {
	var mu sync.Mutex
	now := time.Now()
	b.quotas.mu.Lock()
	b.quotas.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	b.quotas.mu.Unlock()
	return func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
}

// topicCodes maps a CreateTopics, DeleteTopics or CreatePartitions
// response's topics to their error codes.
func topicCodes(t *testing.T, resp kmsg.Response) map[string]int16 {
	t.Helper()
	out := map[string]int16{}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, st := range r.Topics {
			out[st.Topic] = st.ErrorCode
			if st.ErrorCode == kerr.ThrottlingQuotaExceeded.Code && (st.ErrorMessage == nil || *st.ErrorMessage != *errThrottled) {
				t.Errorf("%s: message %v", st.Topic, st.ErrorMessage)
			}
		}
	case *kmsg.DeleteTopicsResponse:
		for _, st := range r.Topics {
			if st.Topic != nil {
				out[*st.Topic] = st.ErrorCode
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, st := range r.Topics {
			out[st.Topic] = st.ErrorCode
		}
	}
	return out
}

// controller_mutation_rate (KIP-599) on CreateTopics, DeleteTopics and
// CreatePartitions, strict and permissive versions, on a manual clock: a
// bucket of 10 partitions (rate 5/s over 2 windows of 1 s) refilled only
// when the test advances it.
func TestQuotaControllerMutation(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "controller.quota.window.num=2", "controller.quota.window.size.seconds=1")
	advance := fakeQuotaClock(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alterQuotas(ctx, t, kadm.NewClient(newClient(t, addr)), setQuota(qent("user", "ANONYMOUS"), "controller_mutation_rate", 5))

	// Every request on a new connection: a throttled one is muted.
	roundTrip := func(req kmsg.Request, version int16) kmsg.Response {
		t.Helper()
		rc := dialRaw(t, addr)
		return rc.recv(rc.sendAt(req, version))
	}
	create := func(version int16, topics map[string]int32, order ...string) (map[string]int16, int32) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		for _, name := range order {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, topics[name], 1
			req.Topics = append(req.Topics, rt)
		}
		resp := roundTrip(req, version).(*kmsg.CreateTopicsResponse)
		return topicCodes(t, resp), resp.ThrottleMillis
	}
	want := func(what string, got map[string]int16, throttle, wantThrottle int32, codes map[string]int16) {
		t.Helper()
		for name, c := range codes {
			if g, ok := got[name]; !ok {
				t.Errorf("%s: %s not answered", what, name)
			} else if g != c {
				t.Errorf("%s: %s answered %v, want %v", what, name, kerr.ErrorForCode(g), kerr.ErrorForCode(c))
			}
		}
		if throttle != wantThrottle {
			t.Errorf("%s: throttle_time_ms %d, want %d", what, throttle, wantThrottle)
		}
	}
	const throttled = 89 // THROTTLING_QUOTA_EXCEEDED

	// The bucket's 10 tokens, all taken: no throttle (nothing refused).
	got, th := create(7, map[string]int32{"m1": 10}, "m1")
	want("m1", got, th, 0, map[string]int16{"m1": 0})
	// At 0 a topic is still admitted (taking the bucket to -1); the next
	// one is refused, and the throttle is the time back to 0: 1/5 s.
	got, th = create(7, map[string]int32{"m2": 1, "m3": 1}, "m2", "m3")
	want("m2, m3", got, th, 200, map[string]int16{"m2": 0, "m3": throttled})
	if _, ok := b.meta.Topic("m3"); ok {
		t.Fatal("m3 created over the quota")
	}

	// 1 s later: 4 tokens. A topic the broker refuses (an invalid
	// config) gives its tokens back, and one that exists costs none
	// (however many partitions it asks for), so m4 and m5 are both
	// admitted (4 -> 0 -> -1); without either rule m5 would be refused.
	advance(time.Second)
	bad := kmsg.NewPtrCreateTopicsRequest()
	bad.TimeoutMillis = 10000
	bt := kmsg.NewCreateTopicsRequestTopic()
	bt.Topic, bt.NumPartitions, bt.ReplicationFactor = "mx", 4, 1
	bt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("nope")}}
	bad.Topics = append(bad.Topics, bt)
	br := roundTrip(bad, 7).(*kmsg.CreateTopicsResponse)
	want("mx (invalid config)", topicCodes(t, br), br.ThrottleMillis, 0, map[string]int16{"mx": kerr.InvalidConfig.Code})
	got, th = create(7, map[string]int32{"m1": 500, "m4": 4, "m5": 1}, "m1", "m4", "m5")
	want("m1 again, m4, m5", got, th, 0, map[string]int16{"m1": kerr.TopicAlreadyExists.Code, "m4": 0, "m5": 0})

	// Below zero, a topic that would fail anyway costs nothing and gets
	// its own error, not THROTTLING_QUOTA_EXCEEDED.
	got, th = create(7, map[string]int32{"m1": 500}, "m1")
	want("m1 at -1", got, th, 0, map[string]int16{"m1": kerr.TopicAlreadyExists.Code})

	// Permissive below CreateTopics v6: admitted at -1, throttled for
	// the time back to 0 from -3.
	got, th = create(5, map[string]int32{"m6": 2}, "m6")
	want("m6 (v5)", got, th, 600, map[string]int16{"m6": 0})

	// DeleteTopics v6 (strict since v5), by name and by ID.
	del := func(version int16, names ...string) (map[string]int16, int32) {
		t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 10000
		for _, n := range names {
			if version < 6 {
				req.TopicNames = append(req.TopicNames, n)
				continue
			}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			if tp, ok := b.meta.Topic(n); ok && n == "m4" {
				rt.TopicID = tp.ID
			} else {
				rt.Topic = kmsg.StringPtr(n)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := roundTrip(req, version).(*kmsg.DeleteTopicsResponse)
		return topicCodes(t, resp), resp.ThrottleMillis
	}
	// m1 (10 partitions) named by ID and by name: INVALID_REQUEST, one
	// answer for both entries, whatever the bucket, and free: the entries
	// are refused for the request's shape before the quota (Kafka's
	// ControllerApis.deleteTopics), so the bucket's 7 tokens cannot admit
	// the ID's entry alone (which would delete m1) and refuse the name's.
	pair := func(what string) {
		t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 10000
		m1, _ := b.meta.Topic("m1")
		byID, byName := kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic()
		byID.TopicID, byName.Topic = m1.ID, kmsg.StringPtr("m1")
		req.Topics = append(req.Topics, byID, byName)
		resp := roundTrip(req, 6).(*kmsg.DeleteTopicsResponse)
		want(what, topicCodes(t, resp), resp.ThrottleMillis, 0, map[string]int16{"m1": kerr.InvalidRequest.Code})
		if len(resp.Topics) != 1 {
			t.Errorf("%s: %d answers, want 1", what, len(resp.Topics))
		}
		if _, ok := b.meta.Topic("m1"); !ok {
			t.Fatalf("%s: m1 deleted", what)
		}
	}
	got, th = del(6, "m6")
	want("delete m6 at -3", got, th, 600, map[string]int16{"m6": throttled})
	pair("delete m1 by ID and by name at -3")
	advance(2 * time.Second) // -3 + 10 = 7
	pair("delete m1 by ID and by name at 7")
	got, th = del(6, "m4") // 4 partitions: 7 -> 3
	want("delete m4 by ID", got, th, 0, map[string]int16{"m4": 0})
	got, th = del(4, "m2") // permissive: 3 -> 2
	want("delete m2 (v4)", got, th, 0, map[string]int16{"m2": 0})
	if _, ok := b.meta.Topic("m4"); ok {
		t.Error("m4 not deleted")
	}

	// CreatePartitions v3 (strict): m5 from 1 to 5 partitions takes 4
	// (2 -> -2); one more is refused, the time back to 0 being 2/5 s.
	grow := func(name string, count int32) (map[string]int16, int32) {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		req.Topics = append(req.Topics, rt)
		resp := roundTrip(req, 3).(*kmsg.CreatePartitionsResponse)
		return topicCodes(t, resp), resp.ThrottleMillis
	}
	got, th = grow("m5", 5)
	want("grow m5 to 5", got, th, 0, map[string]int16{"m5": 0})
	got, th = grow("m5", 6)
	want("grow m5 to 6", got, th, 400, map[string]int16{"m5": throttled})
	if tp, _ := b.meta.Topic("m5"); tp.Partitions != 5 {
		t.Errorf("m5 has %d partitions, want 5", tp.Partitions)
	}
}

// Another principal than the quota's is not held to it, nor is anyone
// once the quota is removed.
func TestQuotaControllerMutationOtherEntity(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "", "controller.quota.window.num=1", "controller.quota.window.size.seconds=1")
	fakeQuotaClock(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr))
	alterQuotas(ctx, t, adm, setQuota(qent("client-id", "limited"), "controller_mutation_rate", 1))
	// The admin's client id is not "limited": 5 topics of 3 partitions
	// each, far over a bucket of 1.
	for _, name := range []string{"o1", "o2", "o3", "o4", "o5"} {
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A "limited" client is held: a bucket of 1 token admits one topic
	// (1 -> -2) and refuses the next.
	limited := kadm.NewClient(newClient(t, addr, kgo.ClientID("limited")))
	res, err := limited.CreateTopics(ctx, 3, 1, nil, "l1", "l2")
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused int
	for _, r := range res {
		switch {
		case r.Err == nil:
			ok++
		case r.Err == kerr.ThrottlingQuotaExceeded:
			refused++
		default:
			t.Fatalf("%s: %v", r.Topic, r.Err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("limited client: %d created, %d refused; want 1 and 1", ok, refused)
	}
	alterQuotas(ctx, t, adm, kadm.AlterClientQuotaEntry{Entity: qent("client-id", "limited"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Remove: true}}})
	if _, err := limited.CreateTopic(ctx, 3, 1, nil, "l3"); err != nil {
		t.Fatalf("after the quota's removal: %v", err)
	}
}

// A bucket's throttle time is Kafka's (ControllerMutationQuotaManager
// throttleTimeMs): the time back to zero at the rate, rounded to the
// millisecond; a tiny rate's is capped at math.MaxInt32, where Kafka's
// long would be cut to an int's low 32 bits. A rate of 0 never reaches a
// bucket: AlterClientQuotas refuses it, as Kafka's
// ClientQuotaControlManager does ("must be greater than 0";
// TestClientQuotasAdmin's bad entries).
func TestBucketThrottleMs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tokens, rate float64
		want         int64
	}{
		{0, 10, 0},
		{5, 10, 0},
		{-5, 10, 500},
		{-1, 3, 333},
		{-1, 1e-6, 1e9},
		{-1, 1e-7, math.MaxInt32},
		{-1e300, 1, math.MaxInt32},
	} {
		if got := bucketThrottleMs(c.tokens, c.rate); got != c.want {
			t.Errorf("bucketThrottleMs(%v, %v) = %d, want %d", c.tokens, c.rate, got, c.want)
		}
	}
}
