package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Sentinel errors; every *Error wraps one of them.
var (
	ErrUnknownKey   = errors.New("config: unknown key")
	ErrInvalidValue = errors.New("config: invalid value")
	ErrSyntax       = errors.New("config: syntax error")
)

// Error is one configuration problem. Load and Validate return several
// joined with errors.Join; find them with errors.As or by unwrapping.
type Error struct {
	Origin string // where the value came from: the file's path or "--set"; "" from Set or Validate
	Line   int    // line in Origin (a file) of the key or the syntax error, else 0
	Key    string // Kafka key name; "" for a syntax error
	Value  string // the offending value as given
	Reason string // what is wrong, e.g. "must be >= 1"
	Err    error  // ErrUnknownKey, ErrInvalidValue or ErrSyntax
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Origin != "" {
		b.WriteString(e.Origin)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	switch {
	case errors.Is(e.Err, ErrUnknownKey):
		fmt.Fprintf(&b, "unknown key %q", e.Key)
		if e.Reason != "" {
			b.WriteString(": " + e.Reason)
		}
	case e.Key != "":
		fmt.Fprintf(&b, "%s=%q: %s", e.Key, e.Value, e.Reason)
	default:
		b.WriteString(e.Reason)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load builds a Config from Default, the properties file (skipped when file
// is ""), then sets, each "key=value" (a later set wins over an earlier one
// and over the file). Synonyms follow Kafka's precedence whatever their
// source (see the package doc). It then runs Validate. Every problem is
// reported, joined; each names where its key was given (the file and its
// line, or --set). On error the Config is the zero value.
func Load(file string, sets []string) (Config, error) {
	var errs []error
	props := map[string]string{}
	origin := map[string]string{}
	var lines map[string]int
	if file != "" {
		m, ls, err := readFile(file)
		if err != nil {
			errs = append(errs, err)
		}
		for k, v := range m {
			props[k], origin[k] = v, file
		}
		lines = ls
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			errs = append(errs, &Error{Origin: "--set", Reason: fmt.Sprintf("%q is not key=value", s), Err: ErrSyntax})
			continue
		}
		props[k], origin[k] = v, "--set"
	}
	// where says where key, or the synonym of it that was given, came from.
	where := func(ce *Error) {
		names := []string{ce.Key}
		if e, ok := entries[ce.Key]; ok && e.spec == e.canon {
			names = append(names, Synonyms(ce.Key)...)
		}
		for _, k := range names {
			if o, ok := origin[k]; ok {
				ce.Origin = o
				if o == file {
					ce.Line = lines[k]
				}
				return
			}
		}
	}
	c := Default()
	for _, k := range applyOrder(props) {
		if err := c.Set(k, props[k]); err != nil {
			var ce *Error
			if errors.As(err, &ce) {
				where(ce)
			}
			errs = append(errs, err)
		}
	}
	for _, err := range c.validate() {
		var ce *Error
		if errors.As(err, &ce) {
			where(ce)
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

func readFile(file string) (map[string]string, map[string]int, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	m, lines, err := parseProperties(f)
	if err != nil {
		for _, e := range flatten(err) {
			var ce *Error
			if errors.As(e, &ce) {
				ce.Origin = file
			}
		}
	}
	return m, lines, err
}

// flatten undoes errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// applyOrder sorts keys so that lower-precedence synonyms are set first and
// overwritten by higher ones; unknown keys and the rest go by name.
func applyOrder(props map[string]string) []string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	stage := func(k string) int {
		if e, ok := entries[k]; ok {
			return e.stage
		}
		return 0
	}
	sort.Slice(keys, func(i, j int) bool {
		if si, sj := stage(keys[i]), stage(keys[j]); si != sj {
			return si < sj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// Validate reports every problem with c at once (errors.Join of *Error,
// each naming its key): each field's range, and the checks that span
// keys — every listener's name maps to PLAINTEXT or SSL in
// listener.security.protocol.map (with usable ssl.* keys for SSL), advertised listener names are
// listener names, the KRaft rules between process.roles,
// controller.quorum.voters, node.id and the listeners (cluster.go), and
// the broker and raft timing rules.
func (c *Config) Validate() error {
	return errors.Join(c.validate()...)
}

func (c *Config) validate() []error {
	var errs []error
	bad := func(key string, reason error) {
		v, _ := c.String(key)
		errs = append(errs, &Error{Key: key, Value: v, Reason: reason.Error(), Err: ErrInvalidValue})
	}
	for _, s := range keyTable {
		if s.check != nil {
			if err := s.check(c); err != nil {
				bad(s.name, err)
			}
		}
	}
	if c.brokerID >= 0 && c.brokerID != c.NodeID {
		bad("node.id", fmt.Errorf("node.id=%d and broker.id=%d differ; when both are set they must be equal", c.NodeID, c.brokerID))
	}
	names := map[string]bool{}
	for _, l := range c.Listeners {
		names[l.Name] = true
	}
	c.validateSecurity(bad)
	if q := c.QueuedMaxRequestBytes; q > 0 && q < int64(c.SocketRequestMaxBytes) {
		bad("queued.max.request.bytes", fmt.Errorf("must be at least socket.request.max.bytes (%d), or 0 or negative for no bound", c.SocketRequestMaxBytes))
	}
	if c.MaxConnectionsPerIP == 0 && len(c.MaxConnectionsPerIPOverrides) == 0 {
		bad("max.connections.per.ip", errors.New("0 refuses every client unless max.connections.per.ip.overrides names the addresses allowed; set it"))
	}
	for _, l := range c.advertisedAll() {
		if !names[l.Name] {
			bad("advertised.listeners", fmt.Errorf("listener name %s is not among the listeners", l.Name))
		}
	}
	c.validateCluster(bad)
	c.validateRaft(bad)
	c.validateSasl(bad)
	c.validateAuthz(bad)
	if c.BrokerSessionTimeoutMs <= c.BrokerHeartbeatIntervalMs {
		bad("broker.session.timeout.ms", fmt.Errorf("must exceed broker.heartbeat.interval.ms (%d): a broker's session must outlast the time between two of its heartbeats", c.BrokerHeartbeatIntervalMs))
	}
	return errs
}
