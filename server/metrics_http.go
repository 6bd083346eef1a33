package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/console"
	"github.com/twmb/franz-go/pkg/sasl"
)

// The metrics listener (metrics.listen): one HTTP server per broker,
// bound by Start before the Kafka listeners and closed by Close once the
// connections are drained (before the logs and the metadata close, which
// a scrape reads). Routes:
//
//	/metrics  Prometheus's text format, from the broker's own registry
//	/healthz  200 "ok" while the process serves HTTP at all
//	/readyz   200 "ready", or 503 with the reason (readiness)
//	/ui/      the web console (package console), / redirects there
//
// Its goroutine is net/http's Serve; it holds no broker lock itself.

// metricsServer is the running metrics listener.
type metricsServer struct {
	ln      net.Listener
	srv     *http.Server
	console *console.Console
	done    chan struct{} // closed when Serve returned
}

// listenMetrics binds metrics.listen; nil when it is empty. An address
// given explicitly that cannot be bound is an error; the default one
// (config.DefaultMetricsListen, which another broker on this machine may
// hold) is a warning, and the broker runs without it.
func (b *Broker) listenMetrics() (net.Listener, error) {
	if b.cfg.MetricsListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", b.cfg.MetricsListen)
	if err != nil {
		if src, _ := b.cfg.Source("metrics.listen"); src == config.SourceDefault {
			b.logger.Warn("sluice: no metrics, health checks or web console: the default metrics.listen cannot be bound (another broker on this machine?); set metrics.listen to a free host:port, or to none",
				"addr", b.cfg.MetricsListen, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("server: metrics.listen %s: cannot listen: %w", b.cfg.MetricsListen, err)
	}
	return ln, nil
}

// serveMetrics starts the HTTP server on ln (Start, once the Kafka
// listeners are bound: the console's bootstrap is their addresses).
func (b *Broker) serveMetrics(ln net.Listener) {
	ms := &metricsServer{ln: ln, done: make(chan struct{})}
	bootstrap, consoleTLS, consoleSasl := b.consoleBootstrap()
	ms.console = console.New(console.Config{Bootstrap: bootstrap, TLS: consoleTLS, SASL: consoleSasl, Alerts: b.Alerts, Fetched: b.metrics.fetchedOffsets, Logger: b.logger})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{b},
		Registry:          b.metrics.reg, // promhttp_metric_handler_* of its own
		EnableOpenMetrics: false,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if reason := b.notReady(); reason != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", reason)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("/ui/", ms.console)
	mux.Handle("/{$}", http.RedirectHandler("/ui/", http.StatusFound))
	ms.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	b.httpSrv = ms
	b.logger.Info("sluice: metrics listening", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz /ui/")
	go func() {
		defer close(ms.done)
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.logger.Error("sluice: metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// closeMetrics stops the HTTP server (open requests are cut) and the
// console.
func (b *Broker) closeMetrics() {
	ms := b.httpSrv
	if ms == nil {
		return
	}
	b.httpSrv = nil
	ms.srv.Close()
	<-ms.done
	ms.console.Close()
}

// MetricsAddr is the address the metrics listener listens on, or nil when
// metrics.listen is empty, its default could not be bound, or before
// Start.
func (b *Broker) MetricsAddr() net.Addr {
	if b.httpSrv == nil {
		return nil
	}
	return b.httpSrv.ln.Addr()
}

// consoleBootstrap is where the console reaches this broker: its
// advertised broker listeners (their ports once bound), else its first
// listener (a controller-only node).
//
// It prefers plaintext listeners; with only secured ones, it dials the
// first, an SSL one before a SASL one, with that listener's ssl.*
// settings as a client (tls, else nil) and on a SASL listener this
// node's own login there (consoleLogin; mech, else nil).
func (b *Broker) consoleBootstrap() (out []string, tc *tls.Config, mech sasl.Mechanism) {
	var tlsOnly, saslLns []config.Listener
	for _, l := range b.cfg.AdvertisedListeners {
		switch {
		case b.isControllerListener(l.Name):
		case b.cfg.IsSaslListener(l.Name):
			saslLns = append(saslLns, l)
		case config.UsesTLS(b.cfg.SecurityProtocol(l.Name)):
			tlsOnly = append(tlsOnly, l)
		default:
			out = append(out, l.Addr())
		}
	}
	if secure := append(tlsOnly, saslLns...); len(out) == 0 && len(secure) > 0 {
		l := secure[0]
		if config.UsesTLS(b.cfg.SecurityProtocol(l.Name)) {
			var err error
			if tc, err = b.cfg.ListenerSSL(l.Name).ClientTLS(""); err != nil {
				b.logger.Warn("sluice: console: no TLS client for listener "+l.Name, "err", err)
			}
		}
		if b.cfg.IsSaslListener(l.Name) {
			mech = b.consoleLogin(l.Name)
		}
		return []string{l.Addr()}, tc, mech
	}
	if len(out) == 0 && len(b.lns) > 0 {
		out = append(out, b.lns[0].Addr().String())
	}
	return out, nil, nil
}

// consoleLogin is the console's SASL login on listener: this node's own
// (the listener JAAS config's username and password, as between
// brokers), with sasl.mechanism.inter.broker.protocol on the inter-broker
// listener, else PLAIN. nil, with a warning, when the listener has none.
func (b *Broker) consoleLogin(listener string) sasl.Mechanism {
	m := config.MechPlain
	if listener == b.cfg.InterBrokerListenerName {
		m = b.cfg.SaslMechanismInterBrokerProtocol()
	}
	if user, pass, ok := b.cfg.SaslLogin(listener, m); ok {
		if mech, err := saslMechanism(m, user, pass); err == nil {
			return mech
		}
	}
	b.logger.Warn("sluice: console: listener " + listener + " is SASL and its " + m + " JAAS config has no username and password: the console cannot log in")
	return nil
}

// notReady is why the broker does not serve yet, or "" when it does:
// Start has bound its listeners (the metadata was loaded by New), Close
// has not begun, and in a cluster a broker is registered and unfenced in
// the metadata it applies (a controller-only node: the metadata log has a
// leader).
func (b *Broker) notReady() string {
	b.connMu.Lock()
	closing := b.closing
	b.connMu.Unlock()
	switch {
	case closing || b.stopping.Load():
		return "shutting down"
	case b.lns == nil:
		return "listeners not open"
	case !b.cfg.IsBroker():
		if b.cl.controllerID() < 0 {
			return "the metadata log has no leader (no controller quorum)"
		}
		return ""
	}
	return b.unfencedReason()
}

// slogPrinter is promhttp's error log on the broker's logger.
type slogPrinter struct{ b *Broker }

func (p slogPrinter) Println(v ...any) {
	p.b.logger.Error("sluice: metrics: " + fmt.Sprint(v...))
}
