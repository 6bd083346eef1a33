package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/server/config"
)

// Listeners and connection limits. Start binds every listener and runs one
// accept loop per listener. An accept error other than the listener's
// closing (EMFILE: out of file descriptors; ECONNABORTED; ...) never ends
// the loop: it retries after a delay doubling from 5 ms to 1 s, as
// net/http's Server does, and logs one line per log interval. Each accepted
// connection first waits for a slot under max.connections (the loop
// accepts nothing more meanwhile, as Kafka's acceptor waits), then is
// closed at once if its address already has max.connections.per.ip (or
// its override) open.

// Accept retry delays (net/http's).
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
)

// defaultLogEvery is how often summarized log lines (bad connections,
// refused connections, accept errors) are written at most.
const defaultLogEvery = 10 * time.Second

// Start binds every listener (listeners; an advertised port 0 becomes the
// port its listener bound) and serves connections until Close. It fails,
// with nothing left bound, if a listener cannot be bound or an address in
// max.connections.per.ip.overrides cannot be resolved.
func (b *Broker) Start() error {
	overrides, err := resolveOverrides(b.cfg.MaxConnectionsPerIPOverrides)
	if err != nil {
		return err
	}
	b.limits = newConnLimits(int(b.cfg.MaxConnections), int(b.cfg.MaxConnectionsPerIP), overrides)
	b.reqMem = newRequestMemory(b.cfg.QueuedMaxRequestBytes, int64(b.cfg.SocketRequestMaxBytes))
	b.quotas = newQuotaManager(b.meta, b.cfg.QuotaWindowNum, b.cfg.QuotaWindowSizeSeconds, b.cfg.MaxConnectionCreationRate)
	b.quotas.mutBurstSeconds = float64(b.cfg.ControllerQuotaWindowNum) * float64(b.cfg.ControllerQuotaWindowSizeSeconds)
	if b.logEvery <= 0 {
		b.logEvery = defaultLogEvery
	}
	b.badConns = newLogSummary(b.logger, slog.LevelInfo, "server: bad connections closed", b.logEvery)
	b.refused = newLogSummary(b.logger, slog.LevelInfo, "server: connections refused: max.connections.per.ip", b.logEvery)
	b.acceptErrs = newLogSummary(b.logger, slog.LevelError, "sluice: accept failing; retrying", b.logEvery)
	b.produceErrs = newLogSummary(b.logger, slog.LevelError, "sluice: produce failed (KAFKA_STORAGE_ERROR)", b.logEvery)
	b.autoCreateFails = newLogSummary(b.logger, slog.LevelWarn, "sluice: metadata request: topics not auto-created (answered UNKNOWN_TOPIC_OR_PARTITION)", b.logEvery)
	b.peerLogins = newLogSummary(b.logger, slog.LevelWarn, "sluice: SASL login to another node refused; check its listener's JAAS username and password and the sasl.mechanism.* keys", b.logEvery)
	if b.lnTLS, err = buildListenerTLS(&b.cfg); err != nil {
		return err
	}
	metricsLn, err := b.listenMetrics()
	if err != nil {
		return err
	}
	for _, l := range b.cfg.Listeners {
		ln, err := net.Listen("tcp", l.Addr())
		if err != nil {
			for _, ln := range b.lns {
				ln.Close()
			}
			if metricsLn != nil {
				metricsLn.Close()
			}
			b.lns = nil
			return fmt.Errorf("server: listener %s: %w", l, err)
		}
		if b.wrapListener != nil {
			ln = b.wrapListener(ln)
		}
		b.lns = append(b.lns, ln)
		for i := range b.cfg.AdvertisedListeners {
			if adv := &b.cfg.AdvertisedListeners[i]; adv.Name == l.Name && adv.Port == 0 {
				// Listening on port 0 (tests): advertise the port we got.
				adv.Port = ln.Addr().(*net.TCPAddr).Port
			}
		}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.summariesDone = make(chan struct{})
	b.openStartGate()
	go b.flushSummaries(b.summariesDone)
	for i, ln := range b.lns {
		name, lt := b.cfg.Listeners[i].Name, b.lnTLS[i]
		b.logger.Info("sluice: listening", "listener", name, "addr", ln.Addr().String(), "security_protocol", b.cfg.SecurityProtocol(name), "log_dirs", b.cfg.LogDirs, "node_id", b.cfg.NodeID)
		if b.cfg.IsSaslListener(name) && slices.Contains(b.cfg.SaslEnabledMechanisms(name), config.MechOAuthBearer) {
			b.logger.Warn("sluice: listener " + name + " serves OAUTHBEARER with Kafka's unsecured validator: tokens are unsigned, so any client can log in as any principal (super users included); for development and tests only")
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.acceptLoop(ln, name, lt)
		}()
	}
	b.cl.start()
	b.warnStop, b.warnDone = make(chan struct{}), make(chan struct{})
	go b.warnDownLoop(b.warnStop, b.warnDone)
	if metricsLn != nil {
		b.serveMetrics(metricsLn)
	}
	return nil
}

// acceptLoop accepts connections on ln until it is closed; lt is the
// listener's TLS, nil for plaintext.
func (b *Broker) acceptLoop(ln net.Listener, listener string, lt *listenerTLS) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || b.ctx.Err() != nil {
				return
			}
			delay = min(max(2*delay, acceptDelayMin), acceptDelayMax)
			b.acceptErrs.note("listener", listener, "err", err.Error(), "retry_in", delay.String())
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-b.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		if !b.limits.waitSlot() {
			c.Close() // closing
			return
		}
		ip := remoteIP(c)
		if !b.admitConnection(c, ip, listener) {
			continue
		}
		if limit, ok := b.limits.add(ip); !ok {
			c.Close()
			b.refused.note("remote", c.RemoteAddr().String(), "limit", limit)
			continue
		}
		b.connMu.Lock()
		if b.closing {
			b.connMu.Unlock()
			b.limits.remove(ip)
			c.Close()
			continue
		}
		b.conns[c] = struct{}{}
		b.connMu.Unlock()
		b.metrics.connAccepted()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			conn, principal := net.Conn(c), anonymous
			if lt != nil {
				var err error
				if conn, principal, err = b.handshake(c, lt); err != nil {
					c.Close()
					b.badConns.note("remote", c.RemoteAddr().String(), "listener", listener, "err", err.Error())
					conn = nil
				}
			}
			if conn != nil {
				if b.onPrincipal != nil {
					b.onPrincipal(listener, principal)
				}
				b.serveConn(b.ctx, conn, listener, principal)
			}
			b.connMu.Lock()
			delete(b.conns, c)
			b.connMu.Unlock()
			b.limits.remove(ip)
		}()
	}
}

// closeListeners stops accepting (Close's first step).
func (b *Broker) closeListeners() {
	for _, ln := range b.lns {
		ln.Close()
	}
	if b.limits != nil {
		b.limits.close()
	}
	if b.reqMem != nil {
		b.reqMem.close()
	}
}

// Addr returns the address the first listener listens on.
func (b *Broker) Addr() net.Addr { return b.lns[0].Addr() }

// ListenerAddr returns the address the named listener listens on, or nil.
func (b *Broker) ListenerAddr(name string) net.Addr {
	for i, l := range b.cfg.Listeners {
		if l.Name == name && i < len(b.lns) {
			return b.lns[i].Addr()
		}
	}
	return nil
}

// connListener is the name of the listener cc came in on ("" for none).
func connListener(cc *clientConn) string {
	if cc == nil {
		return ""
	}
	return cc.listener
}

// remoteIP is a connection's client address, the key of its per-IP count.
func remoteIP(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	return ap.Addr().Unmap()
}

// resolveOverrides turns max.connections.per.ip.overrides into addresses:
// IPs as they are, host names resolved (every address they resolve to).
func resolveOverrides(hosts map[string]int32) (map[netip.Addr]int, error) {
	out := make(map[netip.Addr]int, len(hosts))
	for h, n := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			out[a.Unmap()] = int(n)
			continue
		}
		ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", h)
		if err != nil {
			return nil, fmt.Errorf("server: max.connections.per.ip.overrides: cannot resolve %s: %w", h, err)
		}
		for _, a := range ips {
			out[a.Unmap()] = int(n)
		}
	}
	return out, nil
}

// connLimits counts open connections against max.connections and
// max.connections.per.ip. Its lock is a leaf.
type connLimits struct {
	max, perIP int
	overrides  map[netip.Addr]int

	mu      sync.Mutex
	freed   sync.Cond // a connection closed, or closing
	total   int
	byIP    map[netip.Addr]int
	waiting int // acceptors waiting for a slot
	closed  bool
}

func newConnLimits(max, perIP int, overrides map[netip.Addr]int) *connLimits {
	l := &connLimits{max: max, perIP: perIP, overrides: overrides, byIP: map[netip.Addr]int{}}
	l.freed.L = &l.mu
	return l
}

// waitSlot waits until fewer than max.connections are open; false once
// the broker is closing.
func (l *connLimits) waitSlot() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.total >= l.max && !l.closed {
		l.waiting++
		l.freed.Wait()
		l.waiting--
	}
	return !l.closed
}

// add counts a connection from ip; ok is false, and nothing counted, when
// ip already has its limit open.
func (l *connLimits) add(ip netip.Addr) (limit int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit = l.perIP
	if n, ok := l.overrides[ip]; ok {
		limit = n
	}
	if l.byIP[ip] >= limit {
		return limit, false
	}
	l.byIP[ip]++
	l.total++
	return limit, true
}

// remove uncounts a connection from ip.
func (l *connLimits) remove(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.total--
	l.freed.Broadcast()
}

func (l *connLimits) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.freed.Broadcast()
}

// acceptBlocked reports whether an acceptor waits for a connection slot
// (tests).
func (b *Broker) acceptBlocked() bool {
	b.limits.mu.Lock()
	defer b.limits.mu.Unlock()
	return b.limits.waiting > 0
}

// logSummary logs one kind of event that clients can cause in bulk (bad
// frames, refused connections) or that repeats fast (accept errors): each
// at DEBUG, and at its level at most one line per interval, with the
// count since the last such line and the latest event's attributes. The
// first event after a quiet interval is logged at once; flush writes the
// rest.
type logSummary struct {
	logger *slog.Logger
	level  slog.Level
	msg    string
	every  time.Duration

	mu     sync.Mutex
	count  int
	last   time.Time // when the last summary line was written
	latest []any
}

func newLogSummary(logger *slog.Logger, level slog.Level, msg string, every time.Duration) *logSummary {
	return &logSummary{logger: logger, level: level, msg: msg, every: every}
}

// note records one event (attrs are slog key-value pairs).
func (s *logSummary) note(attrs ...any) {
	if s == nil { // a broker not started (tests)
		return
	}
	s.logger.Debug(s.msg, attrs...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	s.latest = attrs
	if time.Since(s.last) >= s.every {
		s.flushLocked()
	}
}

// flush writes the summary line if events are pending.
func (s *logSummary) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count > 0 {
		s.flushLocked()
	}
}

func (s *logSummary) flushLocked() {
	attrs := append([]any{"count", s.count, "interval", s.every.String()}, s.latest...)
	s.logger.Log(context.Background(), s.level, s.msg, attrs...)
	s.count, s.latest, s.last = 0, nil, time.Now()
}

// flushSummaries writes pending summary lines every interval until done
// is closed, and once more then.
func (b *Broker) flushSummaries(done chan struct{}) {
	t := time.NewTicker(b.logEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-done:
		}
		for _, s := range []*logSummary{b.badConns, b.refused, b.acceptErrs, b.produceErrs, b.autoCreateFails, b.peerLogins} {
			s.flush()
		}
		select {
		case <-done:
			return
		default:
		}
	}
}
