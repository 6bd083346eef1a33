package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests to the active controller. Brokers speak Kafka's own protocol to
// the controller quorum's listeners (every Sluice listener serves every
// API): BrokerRegistration, BrokerHeartbeat, AlterPartition (a leader's
// report of its leadership and ISR) and AllocateProducerIds, as KRaft
// brokers do, plus the admin requests a client sent to this broker
// (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs), forwarded as they came once authorized on
// this broker as the client's principal (admin_authz.go; Kafka wraps them
// in an Envelope carrying the principal instead) and answered with the
// controller's response. One franz-go client per voter, each talking to
// that voter only.

// errNoController is a request to the controller while none is known (an
// election in the metadata group).
var errNoController = errors.New("server: no active controller is known (the controller quorum is electing)")

type controllerClients struct {
	c   *cluster
	mu  sync.Mutex
	cls map[clientKey]*kgo.Client
}

// clientKey names one client: a voter, and the lane. Registration and
// heartbeats have a connection of their own (lane 1), so a slow request
// (a topic creation waiting for its partitions) never delays a heartbeat
// past the session (the controller serves a connection's requests in
// order).
type clientKey struct {
	id   int32
	lane int
}

func newControllerClients(c *cluster) *controllerClients {
	return &controllerClients{c: c, cls: map[clientKey]*kgo.Client{}}
}

// laneOf is the lane of a request (see clientKey).
func laneOf(req kmsg.Request) int {
	switch req.Key() {
	case 62, 63: // BrokerRegistration, BrokerHeartbeat
		return 1
	}
	return 0
}

// client returns the client of voter id for lane.
func (cc *controllerClients) client(id int32, lane int) (*kgo.Client, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cl := cc.cls[clientKey{id, lane}]; cl != nil {
		return cl, nil
	}
	addr, ok := cc.c.voters[id]
	if !ok {
		return nil, fmt.Errorf("server: the active controller %d is not in controller.quorum.voters", id)
	}
	cl, err := kgo.NewClient(cc.c.clientOpts(addr)...)
	if err != nil {
		return nil, err
	}
	cc.cls[clientKey{id, lane}] = cl
	return cl, nil
}

// request sends req to the active controller and returns its response.
// The controller changing meanwhile is retried until ctx ends.
func (cc *controllerClients) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	for try := 0; ; try++ {
		resp, err := cc.requestOnce(ctx, req, try)
		if err == nil {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-cc.c.stopping():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requestOnce sends req to the active controller as this node knows it;
// a node that knows none (a learner not yet added to the metadata group),
// and every retry after the first, asks the voters in turn: one that is
// not the controller answers NOT_CONTROLLER.
func (cc *controllerClients) requestOnce(ctx context.Context, req kmsg.Request, try int) (kmsg.Response, error) {
	id := cc.c.controllerID()
	if id < 0 || try > 0 {
		ids := cc.c.voterIDs()
		id = int32(ids[try%len(ids)])
	}
	if id == cc.c.self {
		// Never through its own listener (a lone voter's client
		// listener waits at the start-up gate for the very
		// registration it would carry): served here once this node
		// leads the metadata group.
		return cc.c.serveHere(ctx, req)
	}
	cl, err := cc.client(id, laneOf(req))
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errNoController
	}
	rctx, cancel := context.WithTimeout(ctx, cc.tryTimeout(req))
	defer cancel()
	resp, err := seeds[0].Request(rctx, req)
	if err != nil {
		return nil, err
	}
	if carriesNotController(resp) {
		return nil, fmt.Errorf("server: node %d answered NOT_CONTROLLER", id)
	}
	return resp, nil
}

// tryTimeout bounds one try of req at one voter. Registration and
// heartbeats get a broker heartbeat interval (at least 250 ms): a paused
// or cut-off controller must not hold a heartbeat past the session a new
// controller gives every broker when it takes over (it would fence them
// all), so the next try asks the next voter. Other requests: 10 s.
func (cc *controllerClients) tryTimeout(req kmsg.Request) time.Duration {
	if laneOf(req) == 1 {
		return max(time.Duration(cc.c.b.cfg.BrokerHeartbeatIntervalMs)*time.Millisecond, 250*time.Millisecond)
	}
	return 10 * time.Second
}

// serveHere serves a request to the active controller on this node, which
// must be it (else errNoController, and the caller retries). A client's
// admin request is served here as it would be from another broker: its
// handler's forward serves it locally (servingHere).
func (c *cluster) serveHere(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if !c.isController() {
		return nil, errNoController
	}
	if p, ok := req.(pinnedRequest); ok {
		req = p.Request // forwarded: the caller sets the client's version on the answer
	}
	resp, err := handlers[req.Key()].serve(context.WithValue(ctx, servingHereKey{}, true), c.b, nil, req)
	if err != nil {
		return nil, err
	}
	if carriesNotController(resp) {
		return nil, errNoController
	}
	return resp, nil
}

// topLevelCode is a response's top-level error code, for the responses
// to the controller's broker APIs (0 otherwise).
func topLevelCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode
	}
	return 0
}

// servingHereKey marks the context of a request serveHere serves: the
// handler's forward serves it on this node.
type servingHereKey struct{}

// carriesNotController reports whether a response says the controller
// that served it applied none of it for lack of leadership: NOT_CONTROLLER
// at the top level, or in every topic, partition or resource that has an
// error code (and at least one). Such an answer goes to the next
// controller, as Kafka's NodeToControllerRequestThread sends a forwarded
// request whose answer holds NOT_CONTROLLER (RequestChannel's
// buildResponseSend) again. Kafka's controller applies a request as one
// write, all or nothing; Sluice's applies an admin request's entries one
// by one (one metadata write each), so an answer where some entries
// succeeded or failed otherwise is the client's: sent again, the entries
// applied would answer TOPIC_ALREADY_EXISTS and the like, and the entries
// that carry NOT_CONTROLLER are retriable for the client. Every ErrorCode
// field of the kmsg response is looked at.
func carriesNotController(resp kmsg.Response) bool {
	v := reflect.ValueOf(resp)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	var nc, other int
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		if t.Field(i).Name == "ErrorCode" && f.Kind() == reflect.Int16 {
			if f.Int() == int64(kerr.NotController.Code) {
				return true
			}
			continue
		}
		countErrorCodes(f, kerr.NotController.Code, &nc, &other)
	}
	return nc > 0 && other == 0
}

// countErrorCodes counts the int16 fields named ErrorCode in v, a part of
// a kmsg message, at any depth: those equal to code in *match, the others
// in *other.
func countErrorCodes(v reflect.Value, code int16, match, other *int) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			countErrorCodes(v.Elem(), code, match, other)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			countErrorCodes(v.Index(i), code, match, other)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := v.Field(i)
			if t.Field(i).Name == "ErrorCode" && f.Kind() == reflect.Int16 {
				if f.Int() == int64(code) {
					*match++
				} else {
					*other++
				}
				continue
			}
			countErrorCodes(f, code, match, other)
		}
	}
}

func (cc *controllerClients) close() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for k, cl := range cc.cls {
		cl.Close()
		delete(cc.cls, k)
	}
}

// forwardTimeout bounds a forwarded admin request.
const forwardTimeout = 30 * time.Second

// forward sends a client's admin request to the active controller and
// returns the controller's answer at the client's version. ok is false
// where the caller serves the request itself: in serveHere, and on the
// active controller for a request another broker forwarded. A client's
// request on the active controller goes through serveHere like any other,
// so that an answer saying nothing was applied for lack of leadership
// (carriesNotController: the controller moved under the change) is sent
// to the next controller rather than to the client, as a Kafka broker's forwarding does (it forwards every admin
// request, and retries its forwarded requests on NOT_CONTROLLER:
// NodeToControllerRequestThread). A controller that cannot be reached
// within forwardTimeout (or before ctx's deadline) is REQUEST_TIMED_OUT
// (retriable), as Kafka's ForwardingManager answers a request its
// NodeToControllerChannelManager timed out (onTimeout); a forward cut
// short otherwise (this broker stopping) is NOT_CONTROLLER (retriable),
// as is a request another broker forwarded to this node while it is not
// the active controller (Kafka's controller answers so). settled, when
// set, says whether this broker's own copy of the metadata shows the
// change: forward waits (bounded) for it and for a reconciler pass over
// it, so the client's next request here sees it.
func (b *Broker) forward(ctx context.Context, cc *clientConn, kreq kmsg.Request, settled func(resp kmsg.Response) bool) (resp kmsg.Response, ok bool, err error) {
	c := b.cl
	if ctx.Value(servingHereKey{}) != nil {
		return nil, false, nil
	}
	if cc != nil && strings.HasPrefix(cc.clientID, brokerClientIDPrefix) {
		if c.isController() {
			return nil, false, nil
		}
		// Forwarded already, by a broker that took this node for the
		// controller: answer so rather than forward again (a loop
		// during an election).
		return nil, true, kafkaErrorf(kerr.NotController, "node %d is not the active controller", c.self)
	}
	version := kreq.GetVersion()
	fctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	// Sent at the client's version: franz-go sends a request at the
	// highest version both ends support, and fields differ between
	// versions (DeleteTopics v6 names topics in another field).
	resp, err = c.ctrl.request(fctx, pinnedRequest{kreq, version})
	kreq.SetVersion(version)
	if err != nil {
		if errors.Is(fctx.Err(), context.DeadlineExceeded) {
			return nil, true, kafkaErrorf(kerr.RequestTimedOut, "no active controller answered in time (at most %v): %v", forwardTimeout, err)
		}
		return nil, true, kafkaErrorf(kerr.NotController, "%v", err)
	}
	resp.SetVersion(version)
	if settled != nil {
		b.awaitLocalMetadata(fctx, func() bool { return settled(resp) })
	}
	return resp, true, nil
}

// pinnedRequest is a request franz-go sends at exactly version v: its
// MaxVersion is v.
type pinnedRequest struct {
	kmsg.Request
	v int16
}

func (r pinnedRequest) MaxVersion() int16 { return r.v }

// brokerClientIDPrefix starts the client id of a broker's requests to the
// controller.
const brokerClientIDPrefix = "sluice-broker-"

// localMetadataWait bounds how long a forwarded change waits for this
// broker's copy of the metadata.
const localMetadataWait = 5 * time.Second

// awaitLocalMetadata waits until settled holds, each time the metadata
// applies a record, at most localMetadataWait, then for a reconciler pass.
func (b *Broker) awaitLocalMetadata(ctx context.Context, settled func() bool) {
	ctx, cancel := context.WithTimeout(ctx, localMetadataWait)
	defer cancel()
	for !settled() {
		if err := b.meta.WaitReplicated(ctx, b.meta.ReplicatedOffset()); err != nil {
			return
		}
	}
	b.recon.changed(ctx)
}
