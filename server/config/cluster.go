package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// This file holds the KRaft keys (process.roles, controller.listener.names,
// inter.broker.listener.name, controller.quorum.voters,
// controller.quorum.bootstrap.servers) and the rules between them. Kafka's
// KafkaConfig, KRaftConfigs and QuorumConfig are the spec for names,
// defaults and messages; where Sluice differs, the field's doc says so.
//
// Every node is one of a cluster, run by the same code whatever its size:
//
//   - A single node (controller.quorum.voters and
//     controller.quorum.bootstrap.servers empty, the default) is a
//     one-voter cluster, as etcd's single member and KRaft's combined
//     mode: derive synthesizes the quorum, this node alone
//     (SoloQuorum), its voter address its inter-broker listener (raft
//     rides the broker's listeners; a lone voter never dials it).
//     process.roles must be the default broker,controller and no listener
//     may be a controller listener.
//   - A configured quorum (controller.quorum.voters set, or formed from
//     controller.quorum.bootstrap.servers by bootstrapVoters): Kafka's
//     KRaft rules for the roles the node plays.

// ProcessRoles is process.roles: a set of RoleBroker and RoleController.
type ProcessRoles uint8

const (
	RoleBroker     ProcessRoles = 1 << iota // serves clients and hosts partitions
	RoleController                          // a voter of the controller quorum
)

// String is the roles as Kafka lists them: "broker", "controller" or
// "broker,controller".
func (r ProcessRoles) String() string {
	var out []string
	if r&RoleBroker != 0 {
		out = append(out, "broker")
	}
	if r&RoleController != 0 {
		out = append(out, "controller")
	}
	return strings.Join(out, ",")
}

func parseProcessRoles(v string) (ProcessRoles, error) {
	items, err := parseList(v)
	if err != nil {
		return 0, err
	}
	var r ProcessRoles
	for _, it := range items {
		var role ProcessRoles
		switch it {
		case "broker":
			role = RoleBroker
		case "controller":
			role = RoleController
		default:
			return 0, fmt.Errorf("unknown process role '%s' (only 'broker' and 'controller' are allowed roles)", it)
		}
		if r&role != 0 {
			return 0, fmt.Errorf("duplicate role names found in process.roles: %s", strings.Join(items, ","))
		}
		r |= role
	}
	return r, nil
}

func checkProcessRoles(c *Config) error {
	if c.ProcessRoles == 0 || c.ProcessRoles&^(RoleBroker|RoleController) != 0 {
		return errors.New("must be broker, controller or broker,controller")
	}
	return nil
}

// IsBroker reports whether process.roles includes broker.
func (c *Config) IsBroker() bool { return c.ProcessRoles&RoleBroker != 0 }

// IsController reports whether process.roles includes controller.
func (c *Config) IsController() bool { return c.ProcessRoles&RoleController != 0 }

// SoloQuorum reports whether the controller quorum is this node alone,
// synthesized because neither controller.quorum.voters nor
// controller.quorum.bootstrap.servers is set (Sluice's default: a single
// node). The node runs the cluster's code either way; this tells only how
// the quorum came about (config checks, the cluster id, the banner).
func (c *Config) SoloQuorum() bool { return c.soloQuorum }

// soloVoter is the one-voter quorum of a single node: node.id at its
// advertised inter-broker listener (its port 0 until the server binds it;
// nothing dials a lone voter).
func (c *Config) soloVoter() []Voter {
	l, _ := c.InterBrokerListener()
	return []Voter{{ID: c.NodeID, Host: l.Host, Port: int32(l.Port)}}
}

// isControllerName reports whether name is in controller.listener.names.
func (c *Config) isControllerName(name string) bool {
	return slices.Contains(c.ControllerListenerNames, name)
}

// ControllerListener returns the first listener whose name is in
// controller.listener.names: where this node serves the controller quorum.
// ok is false when the node has none (a broker-only node; a single node's
// synthesized quorum uses its inter-broker listener).
func (c *Config) ControllerListener() (l Listener, ok bool) {
	for _, l := range c.Listeners {
		if c.isControllerName(l.Name) {
			return l, true
		}
	}
	return Listener{}, false
}

// brokerListeners are the listeners that are not controller listeners:
// the ones clients and other brokers may be told about.
func (c *Config) brokerListeners() []Listener {
	var out []Listener
	for _, l := range c.Listeners {
		if !c.isControllerName(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// InterBrokerListener returns the advertised listener named by
// inter.broker.listener.name: where other brokers reach this one. ok is
// false when there is none (a controller-only node, or an invalid config).
func (c *Config) InterBrokerListener() (l Listener, ok bool) {
	for _, l := range c.AdvertisedListeners {
		if l.Name == c.InterBrokerListenerName {
			return l, true
		}
	}
	return Listener{}, false
}

// defaultInterBrokerListenerName is inter.broker.listener.name when not
// set: PLAINTEXT if a non-controller listener has that name (Kafka's
// default, through security.inter.broker.protocol=PLAINTEXT), else the
// first non-controller listener's name (where Kafka would refuse to
// start), else "".
func (c *Config) defaultInterBrokerListenerName() string {
	ls := c.brokerListeners()
	for _, l := range ls {
		if l.Name == "PLAINTEXT" {
			return l.Name
		}
	}
	if len(ls) > 0 {
		return ls[0].Name
	}
	return ""
}

func setControllerListenerNames(c *Config, v string) error {
	items, err := parseList(v)
	if err != nil {
		return err
	}
	for i, it := range items {
		items[i] = strings.ToUpper(it)
		if slices.Contains(items[:i], items[i]) {
			return fmt.Errorf("listener name %s is given twice", items[i])
		}
	}
	c.ControllerListenerNames = items
	return nil
}

func setInterBrokerListenerName(c *Config, v string) error {
	v = strings.ToUpper(strings.TrimSpace(v))
	if v == "" { // unset: follow the listeners again
		c.set = c.set.andNot(entries["inter.broker.listener.name"].bit)
		return nil
	}
	if strings.ContainsAny(v, ",: \t") {
		return fmt.Errorf("%q is not one listener name", v)
	}
	c.InterBrokerListenerName = v
	return nil
}

// Voter is one entry of controller.quorum.voters: id@host:port.
type Voter struct {
	ID   int32  // the voter's node.id, >= 1
	Host string // host name or IP, without brackets
	Port int32  // its controller listener's port, 1..65535
}

// Addr is host:port, for net.Dial.
func (v Voter) Addr() string {
	return net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port)))
}

// String is the voter as written in a config: id@host:port, with an IPv6
// host in brackets.
func (v Voter) String() string {
	return strconv.Itoa(int(v.ID)) + "@" + v.Addr()
}

const voterForm = "each entry should be in the form `{id}@{host}:{port}`"

// parseVoters parses controller.quorum.voters: id@host:port,... (Kafka's
// syntax). Ranges and counts are checkVoters'.
func parseVoters(v string) ([]Voter, error) {
	items, err := parseList(v)
	if err != nil {
		return nil, err
	}
	var out []Voter
	for _, it := range items {
		id, addr, ok := strings.Cut(it, "@")
		if !ok || strings.Contains(addr, "@") {
			return nil, fmt.Errorf("%q: %s", it, voterForm)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: failed to parse voter ID as an integer from %q", it, id)
		}
		host, port, err := parseHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q: %v; %s", it, err, voterForm)
		}
		out = append(out, Voter{ID: int32(n), Host: host, Port: port})
	}
	return out, nil
}

// parseHostPort parses host:port (an IPv6 host in brackets) with a
// routable host and a port in 1..65535.
func parseHostPort(s string) (string, int32, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil {
		return "", 0, errors.New("want host:port (an IPv6 host in brackets)")
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	for _, c := range host {
		if !validHostChar(c) {
			return "", 0, fmt.Errorf("bad host %q", host)
		}
	}
	if host == "0.0.0.0" || host == "::" {
		return "", 0, fmt.Errorf("host %s is not routable", host) // Kafka: "Host string (0.0.0.0) is not routeable"
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil || p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("port %q must be in [1, 65535]", port)
	}
	return host, int32(p), nil
}

func formatVoters(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// checkVoters checks controller.quorum.voters on its own: empty (single
// node), or 1, 3 or 5 voters with unique ids >= 1 and ports in 1..65535.
func checkVoters(c *Config) error {
	vs := c.QuorumVoters
	if len(vs) == 0 {
		return nil
	}
	var errs []string
	switch n := len(vs); {
	case n%2 == 0:
		errs = append(errs, fmt.Sprintf("names %d voters; want 1, 3 or 5: a raft quorum is a majority, so %d voters tolerate %d failed, no more than %d do, and one more voter must agree on every metadata change", n, n, (n-1)/2, n-1))
	case n > 5:
		errs = append(errs, fmt.Sprintf("names %d voters; want 1, 3 or 5: every metadata change waits for a majority of the voters, and 5 already tolerate 2 failed", n))
	}
	seen := map[int32]bool{}
	for _, v := range vs {
		if v.ID < 1 {
			errs = append(errs, fmt.Sprintf("voter id %d must be >= 1 (raft reserves 0)", v.ID))
		}
		if seen[v.ID] {
			errs = append(errs, fmt.Sprintf("voter id %d is given twice", v.ID))
		}
		seen[v.ID] = true
		if v.Port < 1 || v.Port > 65535 {
			errs = append(errs, fmt.Sprintf("voter %d: port %d must be in [1, 65535]", v.ID, v.Port))
		}
	}
	if errs != nil {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func (c *Config) voterIDs() []int32 {
	ids := make([]int32, len(c.QuorumVoters))
	for i, v := range c.QuorumVoters {
		ids[i] = v.ID
	}
	return ids
}

func (c *Config) isVoter(id int32) bool {
	return slices.Contains(c.voterIDs(), id)
}

// parseBootstrapServers parses controller.quorum.bootstrap.servers:
// host:port,... (KIP-853), into canonical host:port strings.
func parseBootstrapServers(v string) ([]string, error) {
	items, err := parseList(v)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		host, port, err := parseHostPort(it)
		if err != nil {
			return nil, fmt.Errorf("%q: %v; each entry should be in the form \"{host}:{port}\"", it, err)
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	return out, nil
}

// bootstrapVoters is the controller quorum Sluice forms from
// controller.quorum.bootstrap.servers when controller.quorum.voters is not
// set: the servers in the order listed are the voters with ids 1, 2, 3, ...
// (Sluice's rule). Kafka (KIP-853) keeps the voter set in the metadata
// log, formats the first controller as the only voter (kafka-storage
// format --standalone) or with --initial-controllers, and adds the others
// with AddRaftVoter; Sluice cannot add voters to a running quorum yet, so
// every controller must be listed from the start, and cannot ask the
// servers their ids, so their order gives them.
func bootstrapVoters(servers []string) []Voter {
	var vs []Voter
	for i, s := range servers {
		host, port, err := net.SplitHostPort(s)
		p, _ := strconv.Atoi(port)
		if err != nil {
			continue // parseBootstrapServers let nothing else through
		}
		vs = append(vs, Voter{ID: int32(i + 1), Host: host, Port: int32(p)})
	}
	return vs
}

// votersFromBootstrap reports whether QuorumVoters was derived from
// controller.quorum.bootstrap.servers.
func (c *Config) votersFromBootstrap() bool {
	return !c.set.intersects(entries["controller.quorum.voters"].bit) && len(c.QuorumBootstrapServers) > 0
}

// isOwnControllerAddr reports whether host:port is where this node serves
// the controller quorum: one of its advertised controller listeners, or a
// controller listener bound to that very host.
func (c *Config) isOwnControllerAddr(host string, port int32) bool {
	for _, ls := range [][]Listener{c.advertisedAll(), c.Listeners} {
		for _, l := range ls {
			if c.isControllerName(l.Name) && int32(l.Port) == port && strings.EqualFold(l.Host, host) {
				return true
			}
		}
	}
	return false
}

// checkBootstrapVoters checks the quorum bootstrapVoters formed: its size,
// and that a controller finds its own controller endpoint in the list at
// the position of its node.id.
func (c *Config) checkBootstrapVoters() error {
	if err := checkVoters(c); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "voter id", "server"))
	}
	if !c.IsController() {
		return nil
	}
	own := -1
	for i, v := range c.QuorumVoters {
		if c.isOwnControllerAddr(v.Host, v.Port) {
			own = i
			break
		}
	}
	switch {
	case own < 0:
		return fmt.Errorf("does not list this controller's own endpoint (its controller listener in advertised.listeners or listeners): a controller joining a running quorum (KIP-853's add-controller) is not supported; Sluice forms the quorum from every controller listed at start, so list this one too, or set controller.quorum.voters")
	case int32(own+1) != c.NodeID:
		return fmt.Errorf("lists this controller's endpoint %s at position %d, and Sluice numbers the bootstrap controllers 1, 2, 3, ... in the order listed (it cannot ask them their ids), so node.id must be %d, not %d: reorder the list, change node.id, or set controller.quorum.voters=id@host:port,...", c.QuorumVoters[own].Addr(), own+1, own+1, c.NodeID)
	}
	return nil
}

// validateCluster reports the rules between the KRaft keys, and those
// between the listeners that depend on them, through bad.
func (c *Config) validateCluster(bad func(key string, reason error)) {
	ids := fmt.Sprint(c.voterIDs())
	if c.votersFromBootstrap() {
		if err := c.checkBootstrapVoters(); err != nil {
			bad("controller.quorum.bootstrap.servers", err)
		}
	}
	if c.SoloQuorum() {
		if c.NodeID < 1 {
			bad("node.id", fmt.Errorf("must be >= 1: a single node is a one-voter controller quorum (KRaft's combined mode) and node.id is its raft id, which raft reserves 0 from; leave node.id unset (1) or set it >= 1"))
		}
		if c.ProcessRoles != RoleBroker|RoleController && checkProcessRoles(c) == nil {
			// Kafka: "If using process.roles, controller.quorum.voters
			// must contain a parseable set of voters."
			bad("process.roles", fmt.Errorf("process.roles=%s needs controller.quorum.voters, the controller quorum's id@host:port list; only broker,controller (the default) runs without one, as a single node", c.ProcessRoles))
		}
		if l, ok := c.ControllerListener(); ok {
			bad("listeners", fmt.Errorf("%s is a controller listener (controller.listener.names=%s), which only a member of a controller quorum has: set controller.quorum.voters, or leave it out of listeners", l, strings.Join(c.ControllerListenerNames, ",")))
		}
	} else {
		if c.NodeID < 1 {
			bad("node.id", fmt.Errorf("must be >= 1 when controller.quorum.voters is set: it is this node's raft id, and raft reserves 0"))
		}
		if len(c.ControllerListenerNames) == 0 {
			bad("controller.listener.names", errors.New("must name at least one listener when controller.quorum.voters is set"))
		}
		for _, n := range c.ControllerListenerNames {
			if _, ok := c.ListenerSecurityProtocolMap[n]; !ok {
				bad("listener.security.protocol.map", fmt.Errorf("controller listener with name %s defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is set)", n))
			}
		}
		if c.IsController() {
			if !c.isVoter(c.NodeID) && !c.votersFromBootstrap() {
				bad("controller.quorum.voters", fmt.Errorf("if process.roles contains the 'controller' role, the node id %d must be included in the set of voters controller.quorum.voters=%s", c.NodeID, ids))
			}
			if _, ok := c.ControllerListener(); !ok && len(c.ControllerListenerNames) > 0 {
				bad("listeners", fmt.Errorf("controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role (add %s://host:port)", c.ControllerListenerNames[0]))
			} else {
				for _, n := range c.ControllerListenerNames {
					if !slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Name == n }) {
						bad("controller.listener.names", fmt.Errorf("controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role; %s is not a listener", n))
					}
				}
			}
		} else { // broker only
			if c.isVoter(c.NodeID) && !c.votersFromBootstrap() {
				bad("controller.quorum.voters", fmt.Errorf("if process.roles contains just the 'broker' role, the node id %d must not be included in the set of voters controller.quorum.voters=%s", c.NodeID, ids))
			}
			if l, ok := c.ControllerListener(); ok {
				bad("listeners", fmt.Errorf("controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role (%s)", l))
			}
		}
		if !c.IsBroker() {
			for _, l := range c.advertisedAll() {
				if !c.isControllerName(l.Name) {
					bad("advertised.listeners", fmt.Errorf("the advertised.listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller; %s is not one", l))
				}
			}
			for _, l := range c.Listeners {
				if !c.isControllerName(l.Name) {
					bad("listeners", fmt.Errorf("the listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller; %s is not one", l))
				}
			}
		}
	}
	if !c.IsBroker() {
		return
	}
	if len(c.AdvertisedListeners) == 0 {
		bad("advertised.listeners", errors.New("there must be at least one advertised listener. Perhaps all listeners appear in controller.listener.names?"))
	}
	// A combined node may advertise its controller listener too (Kafka 4,
	// KIP-853: controllers advertise their endpoints); clients are never
	// told of it (AdvertisedListeners leaves it out). A broker-only node
	// has none to advertise.
	for _, l := range c.advertisedAll() {
		if c.isControllerName(l.Name) && !c.IsController() {
			bad("advertised.listeners", fmt.Errorf("the advertised.listeners config must not contain KRaft controller listeners from controller.listener.names when process.roles contains just the broker role (%s)", l))
		}
	}
	if len(c.AdvertisedListeners) > 0 {
		if _, ok := c.InterBrokerListener(); !ok {
			var names []string
			for _, l := range c.AdvertisedListeners {
				if !c.isControllerName(l.Name) {
					names = append(names, l.Name)
				}
			}
			bad("inter.broker.listener.name", fmt.Errorf("inter.broker.listener.name must be a listener name defined in advertised.listeners, and not a controller listener. The valid options based on currently configured listeners are %s", strings.Join(names, ",")))
		}
	}
}
