package server

import (
	"fmt"
	"net"
	"strings"
)

// Banner is the block `sluice serve` prints once Start returned: the
// version, the node, where its configuration came from (configSource,
// as the caller knows it), its data dirs, its listeners (bound, and as
// advertised), and the console's and metrics' URLs, or why there are
// none. Every line ends in "\n".
func (b *Broker) Banner(configSource string) string {
	var s strings.Builder
	mode := fmt.Sprintf("cluster of %d controller voters", len(b.cfg.QuorumVoters))
	if b.cfg.SoloQuorum() {
		mode = "single node (a one-voter cluster)"
	}
	fmt.Fprintf(&s, "Sluice %s started: node %d (%s), %s\n", Version(), b.cfg.NodeID, b.cfg.ProcessRoles, mode)
	line := func(k, v string) { fmt.Fprintf(&s, "  %-10s %s\n", k, v) }
	line("config", configSource)
	line("data", strings.Join(b.cfg.LogDirs, ", "))
	for i, l := range b.cfg.Listeners {
		addr := l.Addr()
		if i < len(b.lns) {
			addr = b.lns[i].Addr().String()
		}
		v := l.Name + "://" + addr
		for _, adv := range b.cfg.AdvertisedListeners {
			if adv.Name == l.Name {
				v += ", advertised to clients as " + adv.Addr()
			}
		}
		if b.isControllerListener(l.Name) {
			v += " (controller quorum)"
		}
		line("listener", v)
	}
	switch ma := b.MetricsAddr(); {
	case ma != nil:
		scheme := "http://"
		if b.cfg.MetricsSSLEnabled {
			scheme = "https://"
		}
		base := scheme + urlHost(ma)
		line("console", base+"/ui/")
		line("metrics", base+"/metrics  (health: "+base+"/healthz, "+base+"/readyz)")
	case b.cfg.MetricsListen == "":
		line("console", "off (metrics.listen=none): no console, metrics or health checks")
	default:
		line("console", "off: "+b.cfg.MetricsListen+" (the default metrics.listen) is taken; set metrics.listen to a free host:port")
	}
	return s.String()
}

// urlHost is addr as a URL's host: an unspecified address (every
// interface) as localhost.
func urlHost(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
