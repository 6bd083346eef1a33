package server

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// admitConnection applies the connection creation quotas to a connection
// just accepted on listener (controller listeners are exempt, as Kafka
// exempts its inter-broker listener): over its address's
// connection_creation_rate it is closed after the throttle time and
// false returned (Kafka's ConnectionThrottledException); over
// max.connection.creation.rate the acceptor waits the throttle time
// before going on, as Kafka's acceptor does.
func (b *Broker) admitConnection(c net.Conn, ip netip.Addr, listener string) bool {
	if b.quotas == nil || b.isControllerListener(listener) {
		return true
	}
	ipMs, brokerMs := b.quotas.connectionThrottle(ip)
	if ipMs > 0 {
		b.refused.note("remote", c.RemoteAddr().String(), "connection_creation_rate_throttle_ms", ipMs)
		time.AfterFunc(time.Duration(ipMs)*time.Millisecond, func() { c.Close() })
		return false
	}
	if brokerMs > 0 {
		t := time.NewTimer(time.Duration(brokerMs) * time.Millisecond)
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
		}
	}
	return true
}

// quotaExempt: requests other brokers send (forwarding, metadata;
// fromBroker: with an authorizer, only a principal with CLUSTER_ACTION
// passes for one, as Kafka exempts cluster actions) and those on
// controller listeners are not held to client quotas, nor are
// ApiVersions and the SASL handshake and authentication, which a client
// needs before anything else.
func (cc *clientConn) quotaExempt(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return cc.b.fromBroker(cc) || cc.b.isControllerListener(cc.listener)
}

// applyQuotas records a request on the connection's client quotas: a
// Produce's size (reqSize) on producer_byte_rate, a Fetch response's size
// on consumer_byte_rate, the time spent serving it (served, less a Fetch
// long poll's wait) on request_percentage. It returns the throttle time,
// the largest of the quotas' and of the controller mutation quota's
// (serveMutating; Kafka's KafkaApis and RequestHandlerHelper), and mutes the
// connection for it: the reader reads nothing more until it has passed.
func (cc *clientConn) applyQuotas(key int16, reqSize int32, resp kmsg.Response, served time.Duration) int32 {
	waited := cc.fetchWaited
	cc.fetchWaited = 0
	t := cc.mutationThrottle
	cc.mutationThrottle = 0
	q := cc.b.quotas
	if q == nil || cc.quotaExempt(key) {
		return 0
	}
	l := q.current()
	if len(l.by[quotaProduce])+len(l.by[quotaFetch])+len(l.by[quotaRequest]) > 0 {
		user, client := quotaUser(cc.principal()), cc.clientID
		switch kmsg.Key(key) {
		case kmsg.Produce:
			t = max(t, q.record(l, quotaProduce, user, client, float64(reqSize)))
		case kmsg.Fetch:
			if resp != nil {
				t = max(t, q.record(l, quotaFetch, user, client, float64(fetchResponseBytes(resp, cc.splices))))
			}
		}
		busy := max(served-waited, 0)
		t = max(t, q.record(l, quotaRequest, user, client, float64(busy.Nanoseconds())*100/float64(time.Second)))
	}
	if t <= 0 {
		return 0
	}
	t = min(t, int64(1<<31-1))
	cc.mutedUntil = time.Now().Add(time.Duration(t) * time.Millisecond)
	cc.b.metrics.throttled(t)
	return int32(t)
}

// boundFetch caps a Fetch's MaxBytes (and MinBytes) at what the
// client's consumer_byte_rate allows over the quota window, as Kafka's
// KafkaApis does, so that one response cannot carry many windows' worth.
func (cc *clientConn) boundFetch(req kmsg.Request) {
	fr, ok := req.(*kmsg.FetchRequest)
	if !ok || cc.b.quotas == nil || cc.quotaExempt(fr.Key()) {
		return
	}
	if n, ok := cc.b.quotas.maxWindowBytes(quotaUser(cc.principal()), cc.clientID); ok && n < fr.MaxBytes {
		fr.MaxBytes = n
		fr.MinBytes = min(fr.MinBytes, n)
	}
}

// fetchThrottled applies the quotas to a Fetch response before the Fetch
// commits it to its session. Throttled, the response loses its records
// and partitions (their bytes taken back from consumer_byte_rate) and
// carries the throttle, and true is returned: the Fetch answers so and
// leaves its session as it was (Kafka's KafkaApis and
// FetchContext.getThrottledResponse).
func (cc *clientConn) fetchThrottled(resp *kmsg.FetchResponse) bool {
	t := cc.applyQuotas(kmsg.Fetch.Int16(), 0, resp, time.Since(cc.serveStart))
	cc.fetchQuotaDone = true
	if t <= 0 {
		return false
	}
	if q := cc.b.quotas; q != nil {
		q.unrecord(q.current(), quotaFetch, quotaUser(cc.principal()), cc.clientID, float64(fetchResponseBytes(resp, cc.splices)))
	}
	releaseSplices(cc.splices)
	cc.splices = cc.splices[:0]
	resp.Topics = nil
	setThrottle(resp, t)
	return true
}

// fetchResponseBytes is a Fetch response's size for consumer_byte_rate:
// its estimate plus the records sent from files.
func fetchResponseBytes(resp kmsg.Response, splices []splice) int64 {
	n := int64(responseSizeHint(resp))
	for _, s := range splices {
		n += s.size
	}
	return n
}

// setThrottle sets a response's throttle_time_ms to at least ms.
func setThrottle(resp kmsg.Response, ms int32) {
	if ms <= 0 || resp == nil {
		return
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		if cur, _ := tr.Throttle(); cur >= ms {
			return
		}
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(ms)
	}
}

// throttled wraps a staged request's finish so that its response carries
// the throttle time.
func throttled(finish func() (kmsg.Response, error), ms int32) func() (kmsg.Response, error) {
	if ms <= 0 {
		return finish
	}
	return func() (kmsg.Response, error) {
		resp, err := finish()
		setThrottle(resp, ms)
		return resp, err
	}
}

// waitMuted waits until a throttled connection's mute has ended (KIP-219:
// the response went out at once; the next request waits).
func (cc *clientConn) waitMuted(ctx context.Context) error {
	d := time.Until(cc.mutedUntil)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
