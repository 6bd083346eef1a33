package server

// SaslAuthenticate, versions 0-2 (KIP-152). v1 adds the session lifetime
// (KIP-368); v2 is flexible. Before authentication on a SASL listener it
// carries the mechanism's tokens and is served by sasl.go; once
// authenticated (or on a PLAINTEXT listener) it is answered
// ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 36, minVersion: 0, maxVersion: 2, serve: serveSaslAuthenticate})
}

func serveSaslAuthenticate(_ context.Context, _ *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate after successful authentication, or on a listener without SASL"
	resp.ErrorMessage = &msg
	return resp, nil
}
