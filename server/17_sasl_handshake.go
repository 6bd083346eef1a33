package server

// SaslHandshake, versions 0-1. v0: the SASL tokens that follow are raw,
// length-prefixed frames; v1 (KIP-152): they come in SaslAuthenticate
// requests. Before authentication on a SASL listener the handshake is
// served by sasl.go; here, on an authenticated connection, it starts a
// re-authentication when the session can have one (KIP-368), and is
// otherwise answered ILLEGAL_SASL_STATE, as on PLAINTEXT listeners
// (Kafka's KafkaApis).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 17, minVersion: 0, maxVersion: 1, serve: serveSaslHandshake})
}

func serveSaslHandshake(_ context.Context, b *Broker, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	if cc != nil {
		if resp, ok := cc.saslReauthenticate(req); ok {
			return resp, nil
		}
	}
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp, nil
}
