package server

// Client quotas, as Kafka's ClientQuotaManager, ClientRequestQuotaManager
// and ConnectionQuotas. The values live in the replicated metadata
// (meta.ClientQuotaChanged, set by AlterClientQuotas); quotaManager keeps
// the rate sensors and decides throttle times:
//
//   - producer_byte_rate: a Produce request's size, recorded when it is
//     read (Kafka's request.sizeInBytes);
//   - consumer_byte_rate: a Fetch response's size, recorded before the
//     Fetch commits it to its session; a throttled Fetch is answered
//     empty and its bytes taken back (Kafka's KafkaApis); its MaxBytes is
//     first capped at the quota over samples-1 windows (Kafka's
//     getMaxValueInQuotaWindow);
//   - request_percentage: the time spent serving a request, in percent
//     of one thread per second (Kafka's nanosToPercentagePerSecond), the
//     throttle at most one window (Kafka's maxThrottleTimeMs);
//   - connection_creation_rate: connections accepted per second from one
//     address (ip entities; over it the connection is closed after the
//     throttle time), and max.connection.creation.rate over the broker
//     (over it the acceptor waits the throttle time).
//   - controller_mutation_rate: partitions created or deleted per second
//     by CreateTopics, CreatePartitions and DeleteTopics, a token bucket
//     (quota_mutation.go).
//
// The user, client-id quotas are looked up in Kafka's precedence, from
// /config/users/<user>/clients/<client-id> down to /config/clients/<default>
// (quotaFor); clients sharing the entity the quota comes from share its
// sensor, as Kafka's metric tags make them. The user is the connection's
// principal name (User:alice: alice; ANONYMOUS without authentication).
// Sensors not recorded for an hour are dropped (Kafka's inactive sensor
// expiration). At most quotaMaxSensors entities have a sensor of their
// own: a client may change its client id with every request, and with a
// default client-id quota each would get one for an hour; beyond the cap
// new entities share one overflow sensor per quota kind (so a client
// rotating its client id is measured, and throttled, with the others
// past the cap) until the sweep frees room. The cap also bounds the
// sweep's walk. A request's throttle is the largest of its byte and
// request throttles; the dispatch (conn.go, applyQuotas) sets it as the
// response's throttle_time_ms and mutes the connection: its next request
// is not read until the throttle time has passed (KIP-219), so a client
// that ignores throttle_time_ms is held to the quota as well.

import (
	"context"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/meta"
)

// quotaSensorExpiry is Kafka's InactiveSensorExpirationTimeSeconds;
// quotaMaxSensors bounds the sensors of their own (Sluice's: Kafka has no
// bound), beyond which entities share their kind's overflow sensor.
const (
	quotaSensorExpiry = time.Hour
	quotaMaxSensors   = 10000
)

// quotaKind is a client quota's key.
type quotaKind int

const (
	quotaProduce quotaKind = iota
	quotaFetch
	quotaRequest
	quotaConnIP
	quotaMutation // a token bucket (quota_mutation.go)
)

var quotaKindKeys = [...]string{
	quotaProduce:  meta.QuotaProducerByteRate,
	quotaFetch:    meta.QuotaConsumerByteRate,
	quotaRequest:  meta.QuotaRequestPercentage,
	quotaConnIP:   meta.QuotaConnectionCreationRate,
	quotaMutation: meta.QuotaControllerMutationRate,
}

// quotaEnt is a user, client-id entity; a has* false type is absent, an
// empty name with has* set the default entity. An ip entity is in user,
// with ip set.
type quotaEnt struct {
	user, client       string
	hasUser, hasClient bool
	ip                 bool
}

// sensorKey names one sensor: its kind and Kafka's metric tags (the
// user and client id the quota applies to, "" where it applies to all).
type sensorKey struct {
	kind         quotaKind
	user, client string
}

type quotaManager struct {
	meta     *meta.Store
	samples  int
	windowMs int64
	brokerMs float64 // max.connection.creation.rate
	// mutBurstSeconds is controller.quota.window.num ×
	// controller.quota.window.size.seconds: a controller_mutation_rate
	// bucket holds the rate × this many tokens.
	mutBurstSeconds float64

	// limits is the current quota values (a quotaLimits, replaced
	// whole), read without mu: a connection without quotas takes no lock.
	limits atomic.Pointer[quotaLimits]

	mu       sync.Mutex
	sensors  map[sensorKey]*rateSensor       // at most quotaMaxSensors
	overflow [len(quotaKindKeys)]*rateSensor // by kind: the entities past the cap
	swept    int64                           // unix ms of the latest expiry sweep
	broker   *rateSensor
	now      func() time.Time
}

func newQuotaManager(m *meta.Store, samples, windowSeconds, maxConnRate int32) *quotaManager {
	return &quotaManager{meta: m, samples: int(samples), windowMs: int64(windowSeconds) * 1000,
		brokerMs: float64(maxConnRate), sensors: map[sensorKey]*rateSensor{}, now: time.Now}
}

// quotaLimits are the quota values of one metadata generation, by kind
// and entity.
type quotaLimits struct {
	gen uint64
	by  map[quotaKind]map[quotaEnt]float64

	ipOnce sync.Once
	ips    map[string]float64 // connection_creation_rate by address ("" the default)
}

// ipQuotas returns the connection_creation_rate quotas by the address
// their entity names, resolved once per generation, on the accept path
// only (ipEntityAddr may ask DNS).
func (l *quotaLimits) ipQuotas() map[string]float64 {
	l.ipOnce.Do(func() {
		l.ips = map[string]float64{}
		for e, v := range l.by[quotaConnIP] {
			l.ips[ipEntityAddr(e.user)] = v
		}
	})
	return l.ips
}

// current returns the quota values, reloaded when the metadata's have
// changed (a concurrent reload is harmless: both store the same values).
func (q *quotaManager) current() *quotaLimits {
	l := q.limits.Load()
	if q.meta == nil {
		if l == nil {
			l = &quotaLimits{}
		}
		return l
	}
	if l != nil && q.meta.QuotaGeneration() == l.gen {
		return l
	}
	all, gen := q.meta.ClientQuotas()
	l = &quotaLimits{gen: gen, by: map[quotaKind]map[quotaEnt]float64{}}
	for _, c := range all {
		var e quotaEnt
		if ip, ok := c.Entity[meta.QuotaIP]; ok {
			e = quotaEnt{user: ip, ip: true}
		} else {
			e.user, e.hasUser = c.Entity[meta.QuotaUser]
			e.client, e.hasClient = c.Entity[meta.QuotaClientID]
		}
		for kind, key := range quotaKindKeys {
			if v, ok := c.Values[key]; ok {
				m := l.by[quotaKind(kind)]
				if m == nil {
					m = map[quotaEnt]float64{}
					l.by[quotaKind(kind)] = m
				}
				m[e] = v
			}
		}
	}
	q.limits.Store(l)
	return l
}

// quotaFor returns the quota of kind for user and client id and the
// sensor it is measured by, in Kafka's precedence (DefaultQuotaCallback):
// user and client id, the user's default client, the user, the default
// user's client id, the default user's default client, the default user,
// the client id, the default client. ok is false without a quota.
func (l *quotaLimits) quotaFor(kind quotaKind, user, client string) (limit float64, key sensorKey, ok bool) {
	m := l.by[kind]
	if len(m) == 0 {
		return 0, sensorKey{}, false
	}
	type step struct {
		e                quotaEnt
		tagUser, tagClnt bool
	}
	var steps []step
	if client != "" {
		steps = []step{
			{quotaEnt{user: user, client: client, hasUser: true, hasClient: true}, true, true},
			{quotaEnt{user: user, hasUser: true, hasClient: true}, true, true},
			{quotaEnt{user: user, hasUser: true}, true, false},
			{quotaEnt{client: client, hasUser: true, hasClient: true}, true, true},
			{quotaEnt{hasUser: true, hasClient: true}, true, true},
			{quotaEnt{hasUser: true}, true, false},
			{quotaEnt{client: client, hasClient: true}, false, true},
			{quotaEnt{hasClient: true}, false, true},
		}
	} else {
		// An empty client id matches no client-id entity (names are
		// never empty): the user's quotas only.
		steps = []step{{quotaEnt{user: user, hasUser: true}, true, false}, {quotaEnt{hasUser: true}, true, false}}
	}
	for _, s := range steps {
		if v, found := m[s.e]; found {
			key = sensorKey{kind: kind}
			if s.tagUser {
				key.user = user
			}
			if s.tagClnt {
				key.client = client
			}
			return v, key, true
		}
	}
	return 0, sensorKey{}, false
}

// record adds v to the sensor of kind for user and client id under the
// quota values l and returns the throttle time in milliseconds (0
// without a quota or within it). Request time throttles are capped at
// one window.
func (q *quotaManager) record(l *quotaLimits, kind quotaKind, user, client string, v float64) int64 {
	limit, key, ok := l.quotaFor(kind, user, client)
	if !ok {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	_, t := q.recordLocked(key, v, limit)
	if kind == quotaRequest {
		t = min(t, q.windowMs)
	}
	return t
}

// maxWindowBytes is the most bytes a consumer_byte_rate quota lets the
// user and client id fetch in one response: the quota over samples-1
// windows (Kafka's getMaxValueInQuotaWindow); ok is false without one.
func (q *quotaManager) maxWindowBytes(user, client string) (n int32, ok bool) {
	limit, _, ok := q.current().quotaFor(quotaFetch, user, client)
	if !ok {
		return 0, false
	}
	w := limit * float64(q.samples-1) * float64(q.windowMs) / 1000
	return int32(max(1, min(w, math.MaxInt32))), true
}

// unrecord takes v back from the sensor of kind (a throttled Fetch's
// bytes, which its empty answer did not send).
func (q *quotaManager) unrecord(l *quotaLimits, kind quotaKind, user, client string, v float64) {
	if _, key, ok := l.quotaFor(kind, user, client); ok {
		q.mu.Lock()
		defer q.mu.Unlock()
		now := q.now().UnixMilli()
		if s := q.sensorLocked(key, now, false); s != nil {
			s.record(-v, now, q.windowMs)
		}
	}
}

// recordLocked records v on key's sensor and returns the sensor and the
// throttle time.
func (q *quotaManager) recordLocked(key sensorKey, v, limit float64) (*rateSensor, int64) {
	now := q.now().UnixMilli()
	q.sweepLocked(now)
	s := q.sensorLocked(key, now, true)
	s.record(v, now, q.windowMs)
	rate, span := s.rate(now, q.windowMs)
	return s, throttleMs(rate, limit, span)
}

// sensorLocked returns key's sensor: its own, else with create a new one
// while fewer than quotaMaxSensors exist, else its kind's overflow sensor
// (created with create; nil without a sensor).
func (q *quotaManager) sensorLocked(key sensorKey, now int64, create bool) *rateSensor {
	if s := q.sensors[key]; s != nil {
		return s
	}
	if create && len(q.sensors) < quotaMaxSensors {
		s := newRateSensor(q.samples, now)
		q.sensors[key] = s
		return s
	}
	if create && q.overflow[key.kind] == nil {
		q.overflow[key.kind] = newRateSensor(q.samples, now)
	}
	return q.overflow[key.kind]
}

// sweepLocked drops sensors not recorded within quotaSensorExpiry, at
// most once a minute (a walk of at most quotaMaxSensors).
func (q *quotaManager) sweepLocked(now int64) {
	if now-q.swept < time.Minute.Milliseconds() {
		return
	}
	q.swept = now
	for k, s := range q.sensors {
		if now-s.last >= quotaSensorExpiry.Milliseconds() {
			delete(q.sensors, k)
		}
	}
	for i, s := range q.overflow {
		if s != nil && now-s.last >= quotaSensorExpiry.Milliseconds() {
			q.overflow[i] = nil
		}
	}
}

// sensorCount is the number of live sensors of their own, the overflow
// ones not counted (tests).
func (q *quotaManager) sensorCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.sensors)
}

// connectionThrottle records a new connection from ip: the throttle time
// of the address's connection_creation_rate (the address's own quota,
// else the default ip's; Kafka's ConnectionQuotas.connectionRateForIp),
// the connection not counted when it is over; and the broker-wide
// max.connection.creation.rate's throttle time.
func (q *quotaManager) connectionThrottle(ip netip.Addr) (ipMs, brokerMs int64) {
	m := q.current().ipQuotas()
	q.mu.Lock()
	defer q.mu.Unlock()
	name := ip.Unmap().String()
	limit, found := m[name]
	if !found {
		limit, found = m[""]
	}
	if found {
		key := sensorKey{kind: quotaConnIP, user: name}
		var s *rateSensor
		if s, ipMs = q.recordLocked(key, 1, limit); ipMs > 0 {
			s.record(-1, q.now().UnixMilli(), q.windowMs)
			return ipMs, 0
		}
	}
	if q.brokerMs < math.MaxInt32 {
		now := q.now().UnixMilli()
		if q.broker == nil {
			q.broker = newRateSensor(q.samples, now)
		}
		q.broker.record(1, now, q.windowMs)
		rate, span := q.broker.rate(now, q.windowMs)
		brokerMs = throttleMs(rate, q.brokerMs, span)
	}
	return 0, brokerMs
}

// ipEntityAddr is the address an ip entity names, as connections are
// looked up by it: an IP as it is (IPv4-mapped unmapped), a host name
// resolved to its first address, as Kafka's InetAddress.getByName (a name
// that does not resolve matches no connection). "" is the default ip.
func ipEntityAddr(name string) string {
	if name == "" {
		return ""
	}
	if a, err := netip.ParseAddr(name); err == nil {
		return a.Unmap().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err != nil || len(addrs) == 0 {
		return "unresolved:" + name
	}
	return addrs[0].Unmap().String()
}

// quotaUser is the user name client quotas know a principal by:
// User:alice is alice.
func quotaUser(principal string) string {
	if name, ok := strings.CutPrefix(principal, "User:"); ok {
		return name
	}
	return principal
}
