package server

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one Kafka API. Each API lives in its own file, named by
// key and name (00_produce.go, ...), and registers itself in init, so
// ApiVersions advertises exactly what exists.
type handler struct {
	key        int16
	minVersion int16 // the oldest version served; older ones close the connection
	maxVersion int16
	// listedFromV0 makes ApiVersions list the API from v0 although
	// versions below minVersion still close the connection: Kafka 4 does
	// so for Produce (ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION,
	// KAFKA-18659), as librdkafka turns compression off against a broker
	// whose Produce versions start above 0.
	listedFromV0 bool
	// serve answers a decoded request. Returning an error closes the
	// connection (Kafka's answer to a request it cannot make sense of).
	serve func(ctx context.Context, b *Broker, cc *clientConn, req kmsg.Request) (kmsg.Response, error)
	// stage, when set instead of serve, serves a request in two phases
	// so that a connection can read and start its next requests while
	// this one waits (Produce: append, then wait for the fsync). It runs
	// the first phase and returns; finish runs the second, may block
	// and returns what serve would. Stages of one connection run one
	// after the other, in request order; finishes overlap (conn.go).
	stage func(ctx context.Context, b *Broker, cc *clientConn, req kmsg.Request) (finish func() (kmsg.Response, error), err error)
	// controllerOnly APIs (the brokers' requests to the controller
	// quorum) exist only on controller listeners of a cluster, as in
	// Kafka: elsewhere ApiVersions leaves them out and a request for one
	// closes the connection, as for an unknown key.
	controllerOnly bool
}

// served reports whether h is served on connection cc (nil: a call from
// inside the broker).
func (h handler) served(b *Broker, cc *clientConn) bool {
	if !h.controllerOnly || cc == nil {
		return true
	}
	return b.isControllerListener(cc.listener)
}

// isControllerListener reports whether the named listener is one of
// controller.listener.names.
func (b *Broker) isControllerListener(name string) bool {
	for _, n := range b.cfg.ControllerListenerNames {
		if n == name {
			return true
		}
	}
	return false
}

var handlers = map[int16]handler{}

func register(h handler) {
	if _, dup := handlers[h.key]; dup {
		panic("server: API registered twice")
	}
	handlers[h.key] = h
}

// sortedHandlers returns the handlers by key.
func sortedHandlers() []handler {
	out := make([]handler, 0, len(handlers))
	for _, h := range handlers {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
