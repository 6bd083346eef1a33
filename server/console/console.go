package console

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Alert is one condition the console shows in its banner.
type Alert struct {
	Severity string `json:"severity"` // "warning" or "critical"
	Title    string `json:"title"`    // one line, e.g. "broker 2 is down"
	Detail   string `json:"detail"`   // e.g. the partitions it leaves under-replicated
}

// Config configures the console.
type Config struct {
	// Bootstrap is the broker listeners the console queries
	// (host:port), usually the serving broker's own.
	Bootstrap []string
	// TLS, if set, is how to dial Bootstrap (an SSL listener).
	TLS *tls.Config
	// SASL, if set, is the login on Bootstrap (a SASL listener).
	SASL sasl.Mechanism
	// Alerts, if set, returns the broker's current alerts.
	Alerts func() []Alert
	// Logger logs the console's errors; nil is slog.Default().
	Logger *slog.Logger
	// SampleInterval is how often the throughput sampler reads every
	// topic's log end offsets and every group's committed offsets; zero
	// is 2 s. The sampler keeps SampleWindow of history.
	SampleInterval time.Duration
	// SampleWindow is how much throughput history the charts show;
	// zero is 5 minutes.
	SampleWindow time.Duration
	// NowWindow is the span the charts' current rates ("now") average
	// over; zero is 10 s, and less is raised to 10 s.
	NowWindow time.Duration
	// Fetched, if set, returns per topic the records the broker's Fetch
	// responses have sent (a counter since it started): the consume
	// rate. Without it (the console against another Kafka) the consume
	// rate is that of the groups' committed offsets.
	Fetched func() map[string]int64
	// RequestTimeout bounds the Kafka requests of one console request;
	// zero is 10 s.
	RequestTimeout time.Duration
}

// Bounds on what one request may ask for or return.
const (
	maxBrowseRecords    = 100      // records per message-browser request
	defBrowseRecords    = 50       // records when the request names no limit
	maxShownBytes       = 16 << 10 // bytes of one key, value or header shown
	maxBrowseFetch      = 4 << 20  // bytes one browse fetch may return
	maxConcurrentBrowse = 4        // message-browser requests served at once
	maxURLBytes         = 2048     // path + query of any request
	browseWait          = 3 * time.Second
	idleStopAfter       = 5 * time.Minute  // the sampler stops after this long without a request
	minNowWindow        = 10 * time.Second // the least span a current rate averages over
)

//go:embed static
var staticFS embed.FS

// New returns the console's handler, to be mounted at "/ui/" (it serves
// every path under /ui/ itself). It connects to nothing until its first
// request. Close stops its background sampling.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 2 * time.Second
	}
	if cfg.SampleWindow <= 0 {
		cfg.SampleWindow = 5 * time.Minute
	}
	cfg.NowWindow = max(cfg.NowWindow, minNowWindow)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic("console: embedded static files: " + err.Error())
	}
	c := &Console{cfg: cfg, static: static, index: parseIndex(static), browse: make(chan struct{}, maxConcurrentBrowse)}
	c.samp = newSampler(c)
	return c
}

// Console is the web console's http.Handler. Every method is safe for
// concurrent use.
type Console struct {
	cfg    Config
	static fs.FS
	index  *template.Template // static/index.html (page.go)
	browse chan struct{}      // semaphore of message-browser requests
	samp   *sampler

	mu     sync.Mutex // guards cl, adm, closed, seen
	cl     *kgo.Client
	adm    *kadm.Client
	closed bool
	// seen is each broker's address when Metadata last listed it, so a
	// down broker's overview row keeps it.
	seen map[int32]kadm.BrokerDetail
}

var errClosed = errors.New("console: closed")

// admin returns the console's shared client, creating it on first use.
func (c *Console) admin() (*kadm.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.adm != nil {
		return c.adm, nil
	}
	cl, err := kgo.NewClient(
		append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Bootstrap...),
			kgo.MetadataMinAge(500 * time.Millisecond),
			kgo.ClientID("sluice-console"),
			kgo.RetryTimeout(c.cfg.RequestTimeout),
		}, c.dialOpts()...)...,
	)
	if err != nil {
		return nil, err
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	return c.adm, nil
}

// dialOpts are the options that reach Bootstrap: TLS if it is an SSL
// listener, a login if it is a SASL one.
func (c *Console) dialOpts() []kgo.Opt {
	var opts []kgo.Opt
	if c.cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.cfg.TLS.Clone()))
	}
	if c.cfg.SASL != nil {
		opts = append(opts, kgo.SASL(c.cfg.SASL))
	}
	return opts
}

// ServeHTTP serves the console: the page and its files under /ui/, the
// JSON API under /ui/api/. Only GET and HEAD are allowed (405 otherwise):
// the console is read-only.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
		return
	}
	if len(r.URL.RawPath)+len(r.URL.Path)+len(r.URL.RawQuery) > maxURLBytes {
		http.Error(w, "request URL too long", http.StatusRequestURITooLong)
		return
	}
	path := r.URL.Path
	i := strings.Index(path, "/ui/")
	if i < 0 {
		if strings.HasSuffix(path, "/ui") {
			http.Redirect(w, r, path+"/", http.StatusMovedPermanently)
			return
		}
		http.NotFound(w, r)
		return
	}
	rest := path[i+len("/ui/"):]
	if api, ok := strings.CutPrefix(rest, "api/"); ok {
		c.samp.touch()
		c.serveAPI(w, r, api)
		return
	}
	c.serveStatic(w, r, rest)
}

var contentTypes = map[string]string{
	"index.html":  "text/html; charset=utf-8",
	"console.css": "text/css; charset=utf-8",
	"console.js":  "text/javascript; charset=utf-8",
}

func (c *Console) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" || name == "index.html" {
		c.serveIndex(w, r)
		return
	}
	ct, ok := contentTypes[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(c.static, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// apiError is an API failure: its status and a message for the page.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &apiError{http.StatusNotFound, fmt.Sprintf(format, a...)}
}

func (c *Console) serveAPI(w http.ResponseWriter, r *http.Request, route string) {
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	var (
		v   any
		err error
	)
	topicPath, isTopic := strings.CutPrefix(route, "topics/")
	groupID, isGroup := strings.CutPrefix(route, "groups/")
	switch {
	case route == "overview":
		v, err = c.overview(ctx)
	case route == "alerts":
		v, err = c.alertsResponse(ctx)
	case route == "topics":
		v, err = c.topics(ctx)
	case isTopic && !strings.Contains(topicPath, "/"):
		v, err = c.topic(ctx, topicPath)
	case isTopic && strings.HasSuffix(topicPath, "/messages") && strings.Count(topicPath, "/") == 1:
		v, err = c.messages(ctx, strings.TrimSuffix(topicPath, "/messages"), r.URL.Query())
	case route == "groups":
		v, err = c.groups(ctx)
	case isGroup: // a group id may hold any character, "/" too
		v, err = c.group(ctx, groupID)
	case route == "rates":
		v, err = c.samp.rates(), nil
	default:
		err = notFound("no such API: %s", route)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if err != nil {
		status := http.StatusBadGateway // the cluster did not answer
		var ae *apiError
		if errors.As(err, &ae) {
			status = ae.status
		} else if errors.Is(err, errClosed) {
			status = http.StatusServiceUnavailable
		} else {
			c.cfg.Logger.Warn("console: request failed", "route", route, "err", err)
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// Close stops the console's background sampling and closes its client;
// it returns nil. Requests after Close answer 503.
func (c *Console) Close() error {
	c.samp.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cl != nil {
		c.cl.Close()
		c.cl, c.adm = nil, nil
	}
	return nil
}
