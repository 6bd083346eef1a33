package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicemq/sluice/server/config"
	"github.com/sluicemq/sluice/server/console"
)

// The metrics listener (metrics.listen): one HTTP server per broker,
// bound by Start before the Kafka listeners and closed by Close once the
// connections are drained (before the logs and the metadata close, which
// a scrape reads). Routes:
//
//	/metrics  Prometheus's text format, from the broker's own registry
//	/healthz  200 "ok" while the process serves HTTP at all
//	/readyz   200 "ready", or 503 with the reason (readiness)
//	/ui/      the web console (package console), / redirects there;
//	          behind HTTP Basic authentication when a client listener
//	          is SASL; 403 with an authorizer and no SASL client
//	          listener (console_auth.go)
//
// Its goroutine is net/http's Serve; it holds no broker lock itself.

// metricsServer is the running metrics listener.
type metricsServer struct {
	ln      net.Listener
	srv     *http.Server
	console *console.Console // nil when the console is refused
	done    chan struct{}    // closed when Serve returned
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
	if b.cfg.MetricsSSLEnabled {
		s := b.cfg.ListenerSSL(metricsSSLListener)
		if !b.cfg.ListenerSSLSet(metricsSSLListener, "ssl.client.auth") {
			// Health probes and scrapers rarely hold client
			// certificates: the Kafka listeners' ssl.client.auth
			// applies here only when set for this listener.
			s.ClientAuth = "none"
		}
		tc, err := s.ServerTLS()
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("server: sluice.metrics.ssl.enabled: the ssl.* keys (or listener.name.%s.ssl.*): %w", metricsSSLListener, err)
		}
		tc.NextProtos = []string{"http/1.1"} // Serve on a TLS listener speaks HTTP/1.1 only
		ln = tls.NewListener(ln, tc)
	}
	return ln, nil
}

// metricsSSLListener is the listener name whose listener.name.<name>.ssl.*
// keys override the ssl.* keys for the metrics listener's TLS.
const metricsSSLListener = "metrics"

// serveMetrics starts the HTTP server on ln (Start, once the Kafka
// listeners are bound: the console's bootstrap is their addresses).
func (b *Broker) serveMetrics(ln net.Listener) {
	ms := &metricsServer{ln: ln, done: make(chan struct{})}
	bootstrap, consoleTLS, saslListener := b.consoleBootstrap()
	var ui http.Handler
	if saslListener == "" && b.authz != nil {
		ui = b.consoleRefused()
	} else {
		ms.console = console.New(console.Config{Bootstrap: bootstrap, TLS: consoleTLS, Alerts: b.Alerts, Fetched: b.metrics.fetchedOffsets, Logger: b.logger})
		ui = ms.console
		if saslListener != "" {
			ui = newConsoleAuth(b, saslListener).wrap(ui)
		}
	}
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
	mux.Handle("/ui/", ui)
	mux.Handle("/{$}", http.RedirectHandler("/ui/", http.StatusFound))
	// The server's own errors (a failed TLS handshake: a plaintext
	// request on an HTTPS port, a scanner) at debug level.
	ms.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(b.logger.Handler(), slog.LevelDebug)}
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
	if ms.console != nil {
		ms.console.Close()
	}
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
// When a client listener is SASL, the console dials the first SASL one
// (SASL_PLAINTEXT before SASL_SSL), named by saslListener, as each HTTP
// user (console_auth.go). Otherwise it prefers plaintext listeners; with
// only TLS ones, it dials the first. For a TLS listener tc is that
// listener's ssl.* settings as a client (else nil).
func (b *Broker) consoleBootstrap() (out []string, tc *tls.Config, saslListener string) {
	var secure, sasl []config.Listener
	for _, l := range b.cfg.AdvertisedListeners {
		switch {
		case b.isControllerListener(l.Name):
		case b.cfg.IsSaslListener(l.Name):
			if b.cfg.SecurityProtocol(l.Name) == "SASL_PLAINTEXT" {
				sasl = append([]config.Listener{l}, sasl...)
			} else {
				sasl = append(sasl, l)
			}
		case config.UsesTLS(b.cfg.SecurityProtocol(l.Name)):
			secure = append(secure, l)
		default:
			out = append(out, l.Addr())
		}
	}
	switch {
	case len(sasl) > 0:
		return []string{sasl[0].Addr()}, b.consoleTLS(sasl[0].Name), sasl[0].Name
	case len(out) == 0 && len(secure) > 0:
		return []string{secure[0].Addr()}, b.consoleTLS(secure[0].Name), ""
	case len(out) == 0 && len(b.lns) > 0:
		out = append(out, b.lns[0].Addr().String())
	}
	return out, nil, ""
}

// consoleTLS is the client TLS config for a listener, nil when it does
// not use TLS (or its settings cannot be read, which is logged).
func (b *Broker) consoleTLS(listener string) *tls.Config {
	if !config.UsesTLS(b.cfg.SecurityProtocol(listener)) {
		return nil
	}
	tc, err := b.cfg.ListenerSSL(listener).ClientTLS("")
	if err != nil {
		b.logger.Warn("sluice: console: no TLS client for listener "+listener, "err", err)
	}
	return tc
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
