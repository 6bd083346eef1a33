package server

// The broker's own SASL logins (the client side): a node reaching another
// node's SASL inter-broker or controller listener authenticates as Kafka's
// brokers do, with sasl.mechanism.inter.broker.protocol or
// sasl.mechanism.controller.protocol and the username and password of
// that listener's JAAS config (config.SaslLogin). The kgo clients (peer
// and controller RPCs) get the mechanism as kgo.SASL; the raft
// transport's dialler (dialPeer, raft messages and snapshot file streams)
// runs the exchange itself before the raft magic: SaslHandshake v1, then
// SaslAuthenticate v1 until the mechanism is done. The listener then
// hands the connection to raft (conn.go, raftAllowed). Raft connections
// are not re-authenticated (connections.max.reauth.ms applies to Kafka
// requests only).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// peerSasl holds this node's logins to the controller listener (voters'
// addresses) and the inter-broker listener; nil where the listener is not
// a SASL one.
type peerSasl struct {
	controller, interBroker sasl.Mechanism
}

func buildPeerSasl(cfg *config.Config) (peerSasl, error) {
	var p peerSasl
	build := func(name, mech string) (sasl.Mechanism, error) {
		if name == "" || !cfg.IsSaslListener(name) {
			return nil, nil
		}
		user, pass, ok := cfg.SaslLogin(name, mech)
		if !ok {
			if cfg.SoloQuorum() {
				return nil, nil // dials nobody
			}
			return nil, fmt.Errorf("server: SASL login to listener %s: its %s JAAS config has no username and password", name, mech)
		}
		return config.ClientMechanism(mech, user, pass)
	}
	var err error
	if len(cfg.ControllerListenerNames) > 0 {
		if p.controller, err = build(cfg.ControllerListenerNames[0], cfg.SaslMechanismControllerProtocol()); err != nil {
			return p, err
		}
	}
	p.interBroker, err = build(cfg.InterBrokerListenerName, cfg.SaslMechanismInterBrokerProtocol())
	return p, err
}

// saslFor is the login for reaching addr: a voter's address is its
// controller listener.
func (c *cluster) saslFor(addr string) sasl.Mechanism {
	if c.isVoterAddr(addr) {
		return c.peerSasl.controller
	}
	return c.peerSasl.interBroker
}

// errPeerSasl: another node refused this node's SASL login.
var errPeerSasl = errors.New("server: SASL login to a peer failed")

// peerSaslMaxFrame bounds a SASL response read from a peer.
const peerSaslMaxFrame = 1 << 20

// saslLoginConn authenticates conn (to the node at addr) with mech, within
// ctx's deadline: SaslHandshake v1 and SaslAuthenticate v1 frames (kmsg),
// as a Kafka client does. A refusal is errPeerSasl with the peer's error.
func saslLoginConn(ctx context.Context, conn net.Conn, addr, clientID string, mech sasl.Mechanism) error {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	var corr int32
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		corr++
		if _, err := conn.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return nil, err
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return nil, err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 4 || n > peerSaslMaxFrame {
			return nil, fmt.Errorf("%w: %s response of %d bytes", errPeerSasl, kmsg.NameForKey(req.Key()), n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(conn, body); err != nil {
			return nil, err
		}
		rd := kbin.Reader{Src: body}
		if got := rd.Int32(); got != corr {
			return nil, fmt.Errorf("%w: correlation id %d, want %d", errPeerSasl, got, corr)
		}
		resp := req.ResponseKind()
		if resp.IsFlexible() {
			kmsg.SkipTags(&rd)
		}
		if err := resp.ReadFrom(rd.Src); err != nil {
			return nil, fmt.Errorf("%w: %s response: %v", errPeerSasl, kmsg.NameForKey(req.Key()), err)
		}
		return resp, nil
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	resp, err := roundTrip(hs)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("%w: %s at %s: %w", errPeerSasl, mech.Name(), addr, err)
	}
	session, token, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version, ar.SASLAuthBytes = 1, token
		resp, err := roundTrip(ar)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("%w: %s at %s: %w%s", errPeerSasl, mech.Name(), addr, err, msg)
		}
		done, next, err := session.Challenge(r.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("%w: %s at %s: %w", errPeerSasl, mech.Name(), addr, err)
		}
		if done {
			return nil
		}
		token = next
	}
}
