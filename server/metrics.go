package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Prometheus metrics (metrics.listen; served by metrics_http.go). Each
// Broker has its own prometheus.Registry, never the global default one:
// tests run several brokers in one process.
//
// Two kinds of metrics:
//
//   - Events are counted where they happen, on metrics created once in
//     newBrokerMetrics: per API (by kmsg.NameForKey) a request counter and
//     a latency histogram held in a slice indexed by API key, so the hot
//     path does no label lookup; per topic two atomic byte counters found
//     through a sync.Map (no allocation per request); raft events and
//     fsyncs through the optional callbacks of replica.HostMetrics and
//     segment.Options.OnSync.
//   - State (partitions, leaders, under-replicated, offsets and sizes,
//     groups and lag, brokers, the controller) is read from the broker at
//     scrape time by stateCollector (metrics_state.go): no background loop,
//     nothing that can drift from the state it describes.
//
// With metrics.listen empty, Broker.metrics is nil: every method below is
// nil-safe and the callbacks are not installed, so metrics cost nothing.

// Histogram buckets, in seconds.
var (
	requestBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms to 16 s
	fsyncBuckets   = prometheus.ExponentialBuckets(0.0001, 2, 16) // 0.1 ms to 3.3 s
)

// brokerMetrics are a broker's event metrics and its registry.
type brokerMetrics struct {
	reg *prometheus.Registry

	// apis is indexed by API key: the registered APIs' metrics (nil for
	// keys no handler serves).
	apis      []*apiMetrics
	reqErrors *prometheus.CounterVec // api, error

	topics sync.Map // topic name -> *topicBytes

	accepted       prometheus.Counter
	throttles      prometheus.Counter // client quota throttles (quota_conn.go)
	throttleTime   prometheus.Counter
	leaderChanges  prometheus.Counter
	snapsSent      prometheus.Counter
	snapsReceived  prometheus.Counter
	commitDuration prometheus.Histogram
	fsyncDuration  prometheus.Histogram
	host           *replica.HostMetrics
	onSync         func(time.Duration)
}

// apiMetrics are one API's request counter and latency histogram.
type apiMetrics struct {
	name     string
	requests prometheus.Counter
	duration prometheus.Observer
}

// topicBytes are one topic's record bytes appended by Produce and sent by
// Fetch, and the offsets Fetch sent (fetchPartition.sentOffsets).
type topicBytes struct {
	in, out    atomic.Uint64
	offsetsOut atomic.Uint64
}

// newBrokerMetrics registers the broker's metrics, the state collector
// over b, and Go's and the process's collectors.
func newBrokerMetrics(b *Broker) *brokerMetrics {
	reg := prometheus.NewRegistry()
	m := &brokerMetrics{reg: reg}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_total",
		Help: "Kafka requests answered, by API (Kafka's RequestsPerSec).",
	}, []string{"api"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_request_duration_seconds",
		Help:    "Time from a request's arrival (its bytes read) to its response written, by API (Kafka's TotalTimeMs); a Fetch long poll's wait included.",
		Buckets: requestBuckets,
	}, []string{"api"})
	m.reqErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_request_errors_total",
		Help: "Error codes in Kafka responses, by API and Kafka error name; a response counts once per partition or group that carries an error (Kafka's ErrorsPerSec).",
	}, []string{"api", "error"})
	maxKey := int16(0)
	for k := range handlers {
		maxKey = max(maxKey, k)
	}
	m.apis = make([]*apiMetrics, maxKey+1)
	for k := range handlers {
		name := kmsg.NameForKey(k)
		m.apis[k] = &apiMetrics{name: name, requests: requests.WithLabelValues(name), duration: duration.WithLabelValues(name)}
	}
	m.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_connections_accepted_total",
		Help: "Client connections accepted on the Kafka listeners (raft connections included: they share them).",
	})
	m.throttles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_quota_throttles_total",
		Help: "Requests throttled by a client quota (their connection muted for throttle_time_ms). Not by entity: client ids are unbounded.",
	})
	m.throttleTime = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_quota_throttle_seconds_total",
		Help: "Throttle time client quotas imposed, summed over requests.",
	})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_raft_leader_changes_total",
		Help: "Leader changes seen by the raft groups this broker holds (partitions and the metadata log): each time a group learns of a new leader or of none.",
	})
	m.snapsSent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_raft_snapshots_sent_total",
		Help: "Raft snapshots this broker sent as a leader to followers behind its log start.",
	})
	m.snapsReceived = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_raft_snapshots_received_total",
		Help: "Raft snapshots this broker received as a follower.",
	})
	m.commitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_raft_commit_duration_seconds",
		Help:    "Time from an acks=all batch's proposal by this broker (its leader) to its commit by the raft quorum.",
		Buckets: requestBuckets,
	})
	m.fsyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_fsync_duration_seconds",
		Help:    "Time of one group sync of a partition log's files (the fsyncs that make appends durable).",
		Buckets: fsyncBuckets,
	})
	m.host = &replica.HostMetrics{
		LeaderChanged:    m.leaderChanges.Inc,
		SnapshotSent:     m.snapsSent.Inc,
		SnapshotReceived: m.snapsReceived.Inc,
		Committed:        func(d time.Duration) { m.commitDuration.Observe(d.Seconds()) },
	}
	m.onSync = func(d time.Duration) { m.fsyncDuration.Observe(d.Seconds()) }
	bi := Build()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_build_info",
		Help: "Always 1; its labels name the broker's build: version (as sluice --version prints it), VCS revision, Go version. Kafka: kafka.server:type=app-info (version, commit-id).",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	reg.MustRegister(build, requests, duration, m.reqErrors, m.accepted, m.throttles, m.throttleTime, m.leaderChanges, m.snapsSent,
		m.snapsReceived, m.commitDuration, m.fsyncDuration,
		newStateCollector(b, m),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// hostMetrics is the raft host's callbacks; nil without metrics.
func (m *brokerMetrics) hostMetrics() *replica.HostMetrics {
	if m == nil {
		return nil
	}
	return m.host
}

// syncObserver is the partition logs' segment.Options.OnSync; nil without
// metrics.
func (m *brokerMetrics) syncObserver() func(time.Duration) {
	if m == nil {
		return nil
	}
	return m.onSync
}

// connAccepted counts an accepted connection.
func (m *brokerMetrics) connAccepted() {
	if m != nil {
		m.accepted.Inc()
	}
}

// throttled counts a request throttled for ms milliseconds.
func (m *brokerMetrics) throttled(ms int64) {
	if m != nil {
		m.throttles.Inc()
		m.throttleTime.Add(float64(ms) / 1000)
	}
}

// now is the start time of a request to observe: zero without metrics.
func (m *brokerMetrics) now() time.Time {
	if m == nil {
		return time.Time{}
	}
	return time.Now()
}

// request counts an answered request of API key: its latency since start
// and the error codes in resp (nil: no response, acks=0).
func (m *brokerMetrics) request(key int16, resp kmsg.Response, start time.Time) {
	if m == nil {
		return
	}
	if key < 0 || int(key) >= len(m.apis) || m.apis[key] == nil {
		return // not served: serveOne closed the connection instead
	}
	api := m.apis[key]
	api.requests.Inc()
	api.duration.Observe(time.Since(start).Seconds())
	if resp != nil {
		responseErrors(resp, func(code int16) {
			name := "UNKNOWN_SERVER_ERROR"
			if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
				name = e.Message
			}
			m.reqErrors.WithLabelValues(api.name, name).Inc()
		})
	}
}

// topic returns topic's byte counters, creating them on first use.
func (m *brokerMetrics) topic(name string) *topicBytes {
	if v, ok := m.topics.Load(name); ok {
		return v.(*topicBytes)
	}
	v, _ := m.topics.LoadOrStore(name, &topicBytes{})
	return v.(*topicBytes)
}

// bytesIn counts n record bytes appended to topic by a Produce.
func (m *brokerMetrics) bytesIn(topic string, n int) {
	if m != nil && n > 0 {
		m.topic(topic).in.Add(uint64(n))
	}
}

// fetched counts the record bytes of a sent Fetch response per topic
// (parts are grouped by topic, fetchPartition.sentBytes set by the pass
// that was sent).
func (m *brokerMetrics) fetched(parts []*fetchPartition) {
	if m == nil {
		return
	}
	for i := 0; i < len(parts); {
		topic, n, offs := parts[i].topic, int64(0), int64(0)
		for ; i < len(parts) && parts[i].topic == topic; i++ {
			n += parts[i].sentBytes
			offs += parts[i].sentOffsets
		}
		if n > 0 && topic != "" {
			tb := m.topic(topic)
			tb.out.Add(uint64(n))
			tb.offsetsOut.Add(uint64(offs))
		}
	}
}

// fetchedOffsets are, per topic, the offsets this broker's Fetch
// responses sent since it started (the console's consume rate); nil
// without metrics.
func (m *brokerMetrics) fetchedOffsets() map[string]int64 {
	if m == nil {
		return nil
	}
	out := map[string]int64{}
	m.topics.Range(func(k, v any) bool {
		out[k.(string)] = int64(v.(*topicBytes).offsetsOut.Load())
		return true
	})
	return out
}

// responseErrors calls note for every non-zero error code of resp: the
// top-level one and those of the partitions, topics or groups of the
// responses that carry them per item (the data path and the group APIs);
// other responses are read by topLevelErr.
func responseErrors(resp kmsg.Response, note func(int16)) {
	code := func(c int16) {
		if c != 0 {
			note(c)
		}
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		code(r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for i := range r.Topics {
			code(r.Topics[i].ErrorCode)
		}
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		code(r.ErrorCode)
		for i := range r.Groups {
			code(r.Groups[i].ErrorCode)
		}
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			code(r.Topics[i].ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			code(r.Topics[i].ErrorCode)
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				code(r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	default:
		code(topLevelErr(resp))
	}
}

// topLevelErr is the top-level error code of the responses that have one
// (0 for the others).
func topLevelErr(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.FindCoordinatorResponse:
		if r.Version >= 4 {
			for i := range r.Coordinators {
				if c := r.Coordinators[i].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return r.ErrorCode
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.ListGroupsResponse:
		return r.ErrorCode
	case *kmsg.ApiVersionsResponse:
		return r.ErrorCode
	case *kmsg.InitProducerIDResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.DescribeClusterResponse:
		return r.ErrorCode
	}
	return topLevelCode(resp)
}
