package config

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Listener is one entry of listeners or advertised.listeners:
// NAME://host:port.
type Listener struct {
	Name string // listener name, upper case, e.g. PLAINTEXT
	Host string // host name or IP, without brackets; "" means all interfaces
	Port int    // 0..65535; 0 picks a free port when listening
}

// String is the listener as written in a config: NAME://host:port, with an
// IPv6 host in brackets.
func (l Listener) String() string {
	return l.Name + "://" + l.Addr()
}

// Addr is host:port, for net.Listen or net.Dial.
func (l Listener) Addr() string {
	return net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

// ParseListeners parses a comma-separated list of NAME://host:port (Kafka's
// listeners syntax). Names are upper-cased. An empty string is no
// listeners. It checks syntax only: not security protocols, nor that names
// or ports are unique.
func ParseListeners(s string) ([]Listener, error) {
	items, err := parseList(s)
	if err != nil {
		return nil, err
	}
	var ls []Listener
	for _, item := range items {
		l, err := parseListener(item)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func parseListener(s string) (Listener, error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok || name == "" {
		return Listener{}, fmt.Errorf("%q is not NAME://host:port", s)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Listener{}, fmt.Errorf("%q: want host:port (an IPv6 host in brackets)", s)
	}
	for _, c := range host {
		if !validHostChar(c) {
			return Listener{}, fmt.Errorf("%q: bad host %q", s, host)
		}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return Listener{}, fmt.Errorf("%q: port must be in [0, 65535]", s)
	}
	return Listener{Name: strings.ToUpper(name), Host: host, Port: int(p)}, nil
}

// validHostChar is Kafka's listener host alphabet ([0-9a-zA-Z\-%._:]).
func validHostChar(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
		strings.ContainsRune("-%._:", c)
}

func formatListeners(ls []Listener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// derive recomputes the values that follow other keys while their own
// key is not set: advertised.listeners (the listeners less the controller
// listeners, as Kafka derives it), listener.security.protocol.map (Kafka's
// default map, with each controller listener name mapped to PLAINTEXT as
// Kafka's effectiveListenerSecurityProtocolMap adds them) and
// inter.broker.listener.name.
func (c *Config) derive() {
	if !c.set.intersects(entries["advertised.listeners"].bit) {
		c.AdvertisedListeners = advertise(c.brokerListeners())
	} else {
		c.AdvertisedListeners = nil
		for _, l := range c.advertisedGiven {
			if !c.isControllerName(l.Name) {
				c.AdvertisedListeners = append(c.AdvertisedListeners, l)
			}
		}
	}
	if !c.set.intersects(entries["controller.quorum.voters"].bit) {
		c.QuorumVoters = bootstrapVoters(c.QuorumBootstrapServers)
	}
	if !c.set.intersects(entries["listener.security.protocol.map"].bit) {
		c.ListenerSecurityProtocolMap = defaultProtocolMap(c.ControllerListenerNames)
	}
	if !c.set.intersects(entries["inter.broker.listener.name"].bit) {
		c.InterBrokerListenerName = c.defaultInterBrokerListenerName()
	}
	c.soloQuorum = len(c.QuorumVoters) == 0
	if c.soloQuorum {
		c.QuorumVoters = c.soloVoter()
	}
}

// advertisedAll is advertised.listeners as given, controller listeners
// included, or when not set the derived AdvertisedListeners.
func (c *Config) advertisedAll() []Listener {
	if c.set.intersects(entries["advertised.listeners"].bit) {
		return c.advertisedGiven
	}
	return c.AdvertisedListeners
}

// advertise derives advertised listeners from listeners: a copy, with
// wildcard hosts replaced by the loopback address.
func advertise(ls []Listener) []Listener {
	out := make([]Listener, len(ls))
	for i, l := range ls {
		if isWildcard(l.Host) {
			l.Host = loopback
		}
		out[i] = l
	}
	return out
}

// loopback is what an empty listener host is advertised as.
const loopback = "127.0.0.1"

func isWildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}

// checkListeners checks what a listener list must satisfy on its own.
func checkListeners(ls []Listener, uniquePorts bool) error {
	if len(ls) == 0 {
		return errors.New("must name at least one listener")
	}
	names := map[string]bool{}
	ports := map[int]bool{}
	var errs []string
	for _, l := range ls {
		if names[l.Name] {
			errs = append(errs, "listener name "+l.Name+" is used twice")
		}
		names[l.Name] = true
		if uniquePorts && l.Port != 0 && ports[l.Port] {
			errs = append(errs, "port "+strconv.Itoa(l.Port)+" is used twice")
		}
		ports[l.Port] = true
	}
	if errs != nil {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// checkAdvertised checks advertised.listeners on its own. It may be empty
// (a controller-only node advertises nothing); Validate requires one for a
// broker.
func checkAdvertised(ls []Listener) error {
	if len(ls) == 0 {
		return nil
	}
	if err := checkListeners(ls, false); err != nil {
		return err
	}
	for _, l := range ls {
		if isWildcard(l.Host) {
			return fmt.Errorf("%s: cannot advertise the wildcard address %q", l, l.Host)
		}
	}
	return nil
}

// Security protocols Kafka knows, all four served.
var securityProtocols = []string{"PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"}

// defaultProtocolMap is Kafka's default listener.security.protocol.map
// (each protocol's name maps to itself) with each controller listener
// name, CONTROLLER by default, mapped to PLAINTEXT unless it is already a
// protocol's name.
func defaultProtocolMap(controllerNames []string) map[string]string {
	m := make(map[string]string, len(securityProtocols)+len(controllerNames))
	for _, p := range securityProtocols {
		m[p] = p
	}
	for _, n := range controllerNames {
		if _, ok := m[n]; !ok {
			m[n] = "PLAINTEXT"
		}
	}
	return m
}

// parseProtocolMap parses NAME:PROTOCOL,... (upper-casing both).
func parseProtocolMap(s string) (map[string]string, error) {
	items, err := parseList(s)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(items))
	for _, item := range items {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME:PROTOCOL", item)
		}
		found := false
		for _, p := range securityProtocols {
			found = found || p == proto
		}
		if !found {
			return nil, fmt.Errorf("%q: unknown security protocol %q (want one of %s)", item, proto, strings.Join(securityProtocols, ", "))
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener name %s is mapped twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

func formatProtocolMap(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = n + ":" + m[n]
	}
	return strings.Join(names, ",")
}

// parseList splits a Kafka list value: comma-separated, each element
// trimmed; an empty value is an empty list; empty elements are errors.
func parseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if parts[i] = strings.TrimSpace(p); parts[i] == "" {
			return nil, errors.New("empty element in comma-separated list")
		}
	}
	return parts, nil
}
