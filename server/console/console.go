// Package console is Sluice's web console: a read-only view of a Kafka
// cluster (brokers, controller, topics, partitions, messages, consumer
// groups, alerts), served by the broker at /ui on its metrics listener
// and embedded in the binary.
//
// It reads the cluster through Kafka's own APIs (franz-go kgo/kadm
// against Config.Bootstrap), so it shows what any client would see;
// Config.Alerts adds what only the broker knows (a registered broker that
// stays down).
package console

import (
	"log/slog"
	"net/http"
)

// Alert is one condition the console shows in its banner.
type Alert struct {
	Severity string // "warning" or "critical"
	Title    string // one line, e.g. "broker 2 is down"
	Detail   string // e.g. the partitions it leaves under-replicated
}

// Config configures the console.
type Config struct {
	// Bootstrap is the broker listeners the console queries
	// (host:port), usually the serving broker's own.
	Bootstrap []string
	// Alerts, if set, returns the broker's current alerts.
	Alerts func() []Alert
	// Logger logs the console's errors; nil is slog.Default().
	Logger *slog.Logger
}

// New returns the console's handler, to be mounted at "/ui/" (it serves
// every path under /ui/ itself). Close stops its background sampling.
func New(cfg Config) *Console {
	return &Console{cfg: cfg}
}

// Console is the web console's http.Handler.
type Console struct {
	cfg Config
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "the Sluice console is not built yet", http.StatusNotImplemented)
}

// Close stops the console's background work; it returns nil.
func (c *Console) Close() error { return nil }
