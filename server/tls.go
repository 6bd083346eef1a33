package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TLS. A listener whose security protocol (listener.security.protocol.map)
// is SSL serves TLS: Start builds its crypto/tls configuration from the
// listener's ssl.* keys (config.SSLConfig, with listener.name.<l>.ssl.*
// overrides), and each accepted connection's handshake runs in that
// connection's own goroutine, before anything else, within
// sluice.request.receive.timeout.ms: a stalled handshake, or a plaintext
// client on the TLS port, holds its own connection (and slot under
// max.connections) only, and is closed with a summarized log line
// (badConns). The handshake yields the connection's principal:
// User:<name>, name being the client certificate's subject mapped by
// ssl.principal.mapping.rules, or User:ANONYMOUS without a certificate
// (and on PLAINTEXT listeners), as Kafka names them. The principal is
// kept on the connection (clientConn.tlsPrincipal, read through
// clientConn.principal) for authorization, which
// does not exist yet; SASL, when it comes, authenticates after the TLS
// handshake and replaces it.
//
// The broker's own connections (peer and controller clients, the raft
// transport) dial with TLS when the listener they reach is SSL: a voter's
// controller listener (the first of controller.listener.names), else the
// inter-broker listener. They use that listener's ssl.* settings as a
// client: the truststore as roots, the keystore as client certificate,
// ssl.endpoint.identification.algorithm for the host name check.

// anonymous is the principal of a connection without a client identity.
const anonymous = "User:ANONYMOUS"

// listenerTLS is one TLS listener's server side.
type listenerTLS struct {
	cfg    *tls.Config
	mapper *config.PrincipalMapper
}

// buildListenerTLS reads the TLS configuration of each listener, in
// config order (nil for a plaintext listener).
func buildListenerTLS(cfg *config.Config) ([]*listenerTLS, error) {
	out := make([]*listenerTLS, len(cfg.Listeners))
	for i, l := range cfg.Listeners {
		if !config.UsesTLS(cfg.SecurityProtocol(l.Name)) {
			continue
		}
		s := cfg.ListenerSSL(l.Name)
		tc, err := s.ServerTLS()
		if err != nil {
			return nil, fmt.Errorf("server: listener %s: %w", l.Name, err)
		}
		m, err := config.ParsePrincipalRules(s.PrincipalMappingRules)
		if err != nil {
			return nil, fmt.Errorf("server: listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
		}
		out[i] = &listenerTLS{cfg: tc, mapper: m}
	}
	return out, nil
}

// handshake runs an accepted connection's TLS handshake within the
// receive timeout and returns the TLS connection and its principal.
func (b *Broker) handshake(c net.Conn, lt *listenerTLS) (net.Conn, string, error) {
	tc := tls.Server(c, lt.cfg)
	timeout := time.Duration(b.cfg.RequestReceiveTimeoutMs) * time.Millisecond
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, "", fmt.Errorf("TLS handshake: %w", err)
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return tc, anonymous, nil
	}
	name, err := lt.mapper.Name(certs[0].Subject.String())
	if err != nil {
		return nil, "", err
	}
	return tc, "User:" + name, nil
}

// peerTLS is the client TLS configuration for reaching other nodes'
// listeners: by the controller listener (voters' addresses) and the
// inter-broker listener. nil for a plaintext one.
type peerTLS struct {
	controller, interBroker *tls.Config
}

func buildPeerTLS(cfg *config.Config) (peerTLS, error) {
	var p peerTLS
	build := func(name string) (*tls.Config, error) {
		if name == "" || !config.UsesTLS(cfg.SecurityProtocol(name)) {
			return nil, nil
		}
		tc, err := cfg.ListenerSSL(name).ClientTLS("")
		if err != nil {
			return nil, fmt.Errorf("server: TLS client for listener %s: %w", name, err)
		}
		return tc, nil
	}
	var err error
	if len(cfg.ControllerListenerNames) > 0 {
		if p.controller, err = build(cfg.ControllerListenerNames[0]); err != nil {
			return p, err
		}
	}
	p.interBroker, err = build(cfg.InterBrokerListenerName)
	return p, err
}

// tlsFor is the client TLS configuration for dialling addr: a voter's
// address is its controller listener.
func (c *cluster) tlsFor(addr string) *tls.Config {
	if c.isVoterAddr(addr) {
		return c.peerTLS.controller
	}
	return c.peerTLS.interBroker
}

// isVoterAddr reports whether addr is a voter's (controller listener)
// address in controller.quorum.voters.
func (c *cluster) isVoterAddr(addr string) bool {
	for _, v := range c.voters {
		if v == addr {
			return true
		}
	}
	return false
}

// dialPeer connects to another node's listener at addr, with TLS when it
// is an SSL listener and logged in when it is a SASL one (sasl_peer.go):
// the raft transport's dialler.
func (c *cluster) dialPeer(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := c.dialPeerTLS(ctx, addr)
	if err != nil {
		return nil, err
	}
	if mech := c.saslFor(addr); mech != nil {
		if err := saslLoginConn(ctx, conn, addr, c.clientID(), mech); err != nil {
			conn.Close()
			if errors.Is(err, errPeerSasl) {
				c.b.peerLogins.note("addr", addr, "err", err.Error())
			}
			return nil, err
		}
	}
	return conn, nil
}

// dialPeerTLS connects to addr, with TLS when its listener is SSL.
func (c *cluster) dialPeerTLS(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := c.tlsFor(addr)
	if tc == nil {
		return conn, nil
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tc.ServerName = host
		}
	}
	tlsConn := tls.Client(conn, tc)
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tlsConn, nil
}

// clientOpts are the options of this node's kgo client of the node at
// addr (peer and controller clients).
func (c *cluster) clientOpts(addr string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ClientID(c.clientID()),
		kgo.DialTimeout(2 * time.Second),
		kgo.RetryTimeout(0),
	}
	if tc := c.tlsFor(addr); tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc.Clone()))
	}
	if mech := c.saslFor(addr); mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts
}

// clientID is the client id of this node's own clients.
func (c *cluster) clientID() string { return fmt.Sprintf("%s%d", brokerClientIDPrefix, c.self) }
