package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/replica"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection has two goroutines. The reader (serveConn's) reads,
// decodes and serves requests in order; the writer (writeLoop) writes
// their responses in the same order, Kafka's per-connection guarantee.
// Between them, answers (a channel) carries each request's answer, and
// unanswered counts the requests read but not yet answered.
//
// A Produce is served in two phases (handler.stage): the reader appends
// its batches and goes on to read the next request while the writer waits
// for the produce's fsyncs, so a producer's in-flight requests append
// back to back and their fsyncs group. Any other request first waits until
// every earlier one is answered, then is served on the reader (a Fetch long
// poll blocks reading, as before), and its response goes through the
// writer too. (Kafka itself mutes a connection from a request to its
// response; the pipelining is Sluice's, the ordering Kafka's.)
//
// Memory: a request's declared size is reserved from the broker-wide
// requestMemory (queued.max.request.bytes, reqmem.go) before its body is
// read, and returned by the writer once the request is answered; while the
// pool is exhausted the reader waits and reads nothing. The body is
// allocated as its bytes arrive. Per connection, at most maxInFlight
// requests of at most socket.request.max.bytes each and their responses.
//
// Time: while no request is being read, the reader waits at most
// connections.max.idle.ms for the next one's first byte, unless requests
// are still unanswered or the writer wrote within that time; once a first
// byte has come, the rest of the request must arrive within
// sluice.request.receive.timeout.ms (time spent waiting for request memory
// excluded). Both are read deadlines on the socket.
//
// Locks: clientConn.mu only, a leaf.

// maxInFlight bounds the requests a connection has read and not yet
// answered; past it the reader stops reading the socket until the writer
// has answered one. Five is what idempotent producers keep in flight per
// broker (max.in.flight.requests.per.connection; brokers remember each
// producer's last five batches per partition, so retries of up to five
// in-flight requests are recognized).
const maxInFlight = 5

// clientConn is one client connection.
type clientConn struct {
	b        *Broker
	conn     net.Conn
	listener string // the name of the listener it came in on
	// tlsPrincipal is who the TLS handshake says the client is:
	// User:<mapped certificate subject> on a TLS listener with a client
	// certificate, else User:ANONYMOUS (tls.go). principal() (sasl.go)
	// is the connection's, the one the authorizer decides by (authorize.go).
	tlsPrincipal string
	clientID     string // the reader's: the latest request header's
	logger       *slog.Logger
	// splices are the records of the Fetch response being served to send
	// from files (zerocopy.go). The reader owns them until it hands them
	// to the response's answer.
	splices []splice
	// sasl is the SASL state on SASL listeners, nil elsewhere (sasl.go);
	// the reader's.
	sasl *saslSession
	// gated is set once the connection passed the start gate (its
	// requests may be served); the reader's.
	gated bool
	// mutedUntil is when a throttled connection's next request may be
	// read (quota_conn.go); fetchWaited is the current Fetch's long-poll
	// wait, not counted as request time; serveStart is when the current
	// request's serving began; fetchQuotaDone is set once
	// fetchThrottled applied the quotas to the current Fetch. All the
	// reader's.
	mutedUntil time.Time
	// mutationThrottle is the controller_mutation_rate throttle of the
	// request being served, in ms (serveMutating; applyQuotas takes it).
	mutationThrottle int64
	fetchWaited      time.Duration
	serveStart       time.Time
	fetchQuotaDone   bool

	answers chan *answer // reader to writer, in request order; never full

	lastWrite atomic.Int64 // unix nanos of the writer's latest answer (idle check)

	// mu guards the fields below; no lock is taken and no IO done while
	// it is held.
	mu         sync.Mutex
	answered   sync.Cond // signalled when unanswered drops or werr is set
	unanswered int       // requests read and not yet answered, at most maxInFlight
	werr       error     // the writer's first error; it closes the connection
}

// answer is one request's way to its response.
type answer struct {
	corr         int32
	key, version int16
	// finish returns the response, waiting for it if need be (a staged
	// request's second phase); a nil response has none (acks=0).
	finish  func() (kmsg.Response, error)
	splices []splice  // Fetch records sent from files
	mem     int64     // request memory to release once answered
	start   time.Time // when its bytes were read (zero without metrics)
	raw     []byte    // a SASL token sent size-prefixed, without a response header (sasl.go)
}

// panicError is a request's recovered panic: it closes the connection.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

func (b *Broker) serveConn(bctx context.Context, c net.Conn, listener, principal string) {
	// Bodies larger than the buffer are read into their own memory
	// directly; the buffer batches small pipelined requests.
	r := bufio.NewReaderSize(c, 16<<10)
	cc := &clientConn{
		b: b, conn: c, listener: listener, tlsPrincipal: principal, logger: b.logger.With("remote", c.RemoteAddr().String()),
		answers: make(chan *answer, maxInFlight),
		sasl:    b.newSaslSession(listener),
	}
	cc.answered.L = &cc.mu
	// On a SASL listener the SASL exchange comes first (before the
	// start gate: raft to this broker may ride the listener, and the
	// broker cannot register without it), and the raft hand-off is
	// decided once it has authenticated (serveConn's loop, raftHandOff).
	if cc.sasl == nil {
		if magic := cc.raftMagic(r); magic != nil {
			b.cl.transport.ServeConn(bufferedConn{Conn: c, r: r}, magic)
			return
		}
		if !b.passStartGate(listener) {
			c.Close() // closing before this broker served
			return
		}
		cc.gated = true
	}
	ctx, cancel := context.WithCancel(bctx)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		cc.writeLoop(bufio.NewWriterSize(c, 64<<10), cancel)
	}()
	var err error
	defer func() {
		// A bug in one request's handling must not take the broker (and
		// every other client) down: it closes this connection only.
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
		// The writer answers what was read before (its writes fail at
		// once when the client has gone; after a failure the context is
		// cancelled, so waits end) and then returns: no request of the
		// connection is still being served once serveConn returns.
		close(cc.answers)
		<-writerDone
		releaseSplices(cc.splices) // a Fetch that panicked or failed mid-serve
		cc.splices = nil
		cancel()
		if h := (*raftHandOff)(nil); errors.As(err, &h) {
			// Every answer is written and the writer gone: the
			// connection is the transport's now.
			c.SetReadDeadline(time.Time{})
			b.cl.transport.ServeConn(bufferedConn{Conn: c, r: r}, h.magic)
			return
		}
		c.Close()
		cc.mu.Lock()
		werr := cc.werr
		cc.mu.Unlock()
		var perr *panicError
		if werr != nil && !errors.As(err, &perr) {
			err = werr
		}
		switch {
		case errors.As(err, &perr):
			handlerPanics.Add(1)
			cc.logger.Error("server: panic serving a request; closing the connection", "client_id", cc.clientID, "panic", perr.value, "stack", string(perr.stack))
		case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, errMemoryClosed), bctx.Err() != nil:
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
			// The client went away mid-answer (a consumer closing
			// while its fetch or heartbeat was served): routine.
			cc.logger.Debug("server: client closed the connection", "client_id", cc.clientID, "reason", err)
		case errors.Is(err, errIdle):
			cc.logger.Debug("server: closing idle connection", "client_id", cc.clientID, "reason", err)
		default:
			// Clients can cause these in bulk: DEBUG each, INFO
			// summaries (listen.go).
			b.badConns.note("remote", c.RemoteAddr().String(), "client_id", cc.clientID, "reason", err.Error())
		}
	}()
	for err == nil {
		if !cc.gated && !cc.sasl.pending() {
			err = cc.afterAuthentication(r)
			continue
		}
		err = cc.serveOne(ctx, r)
	}
}

// raftHandOff ends a connection's Kafka serving: its next bytes are raft's
// (the transport magic). Not an error of the connection's.
type raftHandOff struct{ magic []byte }

func (h *raftHandOff) Error() string { return "server: raft connection handed to the transport" }

// afterAuthentication runs once on a SASL listener's connection when it
// has authenticated: a raft connection is handed over (raftHandOff, once
// every SASL answer is written); any other waits at the start gate and is
// then served.
func (cc *clientConn) afterAuthentication(r *bufio.Reader) error {
	if err := cc.waitAnswered(0); err != nil {
		return err
	}
	if magic := cc.raftMagic(r); magic != nil {
		return &raftHandOff{magic: magic}
	}
	if !cc.b.passStartGate(cc.listener) {
		return fmt.Errorf("%w: broker closing before it served", errClose)
	}
	cc.gated = true
	return nil
}

// raftMagic reads and returns the raft magic ("SLRT", "SLRF": a size over
// 1.3 GB, which socket.request.max.bytes never allows) a connection's
// next bytes start with, when raftAllowed lets the connection hand itself
// to the raft transport; nil (nothing read) otherwise. The four bytes are
// awaited within connections.max.idle.ms.
func (cc *clientConn) raftMagic(r *bufio.Reader) []byte {
	if idle := cc.b.cfg.ConnectionsMaxIdleMs; idle > 0 && r.Buffered() < 4 {
		cc.conn.SetReadDeadline(time.Now().Add(time.Duration(idle) * time.Millisecond))
	}
	first, err := r.Peek(4)
	cc.conn.SetReadDeadline(time.Time{})
	if err != nil || !replica.IsRaftMagic(first) || !cc.b.raftAllowed(cc) {
		return nil
	}
	magic := append([]byte(nil), first...)
	r.Discard(4)
	return magic
}

// raftAllowed decides whether a connection may speak raft (the one place
// that decides it): only on a controller listener or the inter-broker
// listener, which raft dials (Kafka serves its raft RPCs on controller
// listeners only); on a SASL listener only once authenticated, as Kafka's
// inter-broker and controller traffic is; and with an authorizer only for
// a principal with CLUSTER_ACTION on the cluster (a broker's: Kafka's
// rule for inter-broker requests). A connection refused goes on as a
// Kafka one, whose request size (the magic) closes it.
func (b *Broker) raftAllowed(cc *clientConn) bool {
	if !b.isControllerListener(cc.listener) && cc.listener != b.cfg.InterBrokerListenerName {
		return false
	}
	if cc.sasl.pending() {
		return false
	}
	if !b.authorized(cc, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, clusterResource) {
		b.badConns.note("remote", cc.conn.RemoteAddr().String(), "reason", "raft connection of "+cc.principal()+", which lacks CLUSTER_ACTION on the cluster")
		return false
	}
	return true
}

// bufferedConn reads what a bufio.Reader over the connection holds first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handlerPanics counts recovered panics (tests assert there are none).
var handlerPanics atomic.Int64

// errClose closes the connection after a request Kafka would not answer.
var errClose = errors.New("server: closing connection")

// errIdle closes a connection idle for connections.max.idle.ms.
var errIdle = errors.New("server: connection idle for connections.max.idle.ms")

// waitAnswered waits until at most n requests are unanswered; it returns
// the writer's error if it failed.
func (cc *clientConn) waitAnswered(n int) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for cc.unanswered > n && cc.werr == nil {
		cc.answered.Wait()
	}
	return cc.werr
}

// queue hands a request's answer to the writer.
func (cc *clientConn) queue(a *answer) error {
	cc.mu.Lock()
	cc.unanswered++
	cc.mu.Unlock()
	cc.answers <- a // room: the reader waited for unanswered < maxInFlight
	return nil
}

// ready is the finish of a request served at once.
func ready(resp kmsg.Response) func() (kmsg.Response, error) {
	return func() (kmsg.Response, error) { return resp, nil }
}

// writeLoop is the writer: it answers requests in order until the reader
// closes answers. After its first error (a failed write, a finish that
// failed or panicked) it closes the connection and writes nothing more,
// but still waits for every remaining finish.
func (cc *clientConn) writeLoop(w *bufio.Writer, cancel context.CancelFunc) {
	var failed error
	for a := range cc.answers {
		err := cc.answer(w, a, failed == nil)
		releaseSplices(a.splices) // written or dropped: the files may close
		cc.b.reqMem.release(a.mem)
		cc.lastWrite.Store(time.Now().UnixNano())
		if err != nil && failed == nil {
			failed = err
			cancel()
			cc.conn.Close() // the reader's blocked read returns
		}
		cc.mu.Lock()
		if cc.werr == nil {
			cc.werr = failed
		}
		cc.unanswered--
		cc.answered.Broadcast()
		cc.mu.Unlock()
	}
}

// answer waits for a's response and, when send is set, writes it.
func (cc *clientConn) answer(w *bufio.Writer, a *answer, send bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	resp, err := a.finish()
	if a.raw != nil && err == nil && send {
		return writeRaw(w, a.raw)
	}
	if err != nil || resp == nil || !send {
		if err == nil && send {
			cc.b.metrics.request(a.key, nil, a.start) // acks=0: no response
		}
		return err
	}
	resp.SetVersion(a.version)
	// Counted before it is written: a client that has its response
	// sees it counted.
	cc.b.metrics.request(a.key, resp, a.start)
	return cc.write(w, a.corr, a.key, a.version, resp, a.splices)
}

// serveOne reads one request and serves it, or its first phase, handing
// its answer to the writer.
func (cc *clientConn) serveOne(ctx context.Context, r *bufio.Reader) error {
	if err := cc.waitAnswered(maxInFlight - 1); err != nil {
		return err
	}
	if err := cc.waitMuted(ctx); err != nil {
		return err
	}
	if err := cc.awaitRequest(r); err != nil {
		return err
	}
	receive := time.Duration(cc.b.cfg.RequestReceiveTimeoutMs) * time.Millisecond
	cc.conn.SetReadDeadline(time.Now().Add(receive))
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return cc.receiveErr(err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if cc.sasl.pending() {
		return cc.serveSasl(ctx, r, size)
	}
	if size < 8 || int64(size) > int64(cc.b.cfg.SocketRequestMaxBytes) {
		return fmt.Errorf("%w: request size %d outside [8, socket.request.max.bytes=%d]", errClose, size, cc.b.cfg.SocketRequestMaxBytes)
	}
	if q := cc.b.cfg.QueuedMaxRequestBytes; q > 0 && int64(size) > q {
		// Kafka closes the connection too (Validate rules it out).
		return fmt.Errorf("%w: request size %d above queued.max.request.bytes=%d", errClose, size, q)
	}
	if err := cc.b.reqMem.acquire(ctx, int64(size)); err != nil {
		return err
	}
	held := int64(size) // released here unless handed to the answer
	defer func() { cc.b.reqMem.release(held) }()
	cc.conn.SetReadDeadline(time.Now().Add(receive)) // the wait was ours, not the client's
	body, err := readBody(r, int(size))
	if err != nil {
		return cc.receiveErr(err)
	}
	cc.conn.SetReadDeadline(time.Time{})
	start := cc.b.metrics.now()
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if rd.Complete() != nil {
		return fmt.Errorf("%w: truncated request header", errClose)
	}
	if clientID != nil {
		cc.clientID = *clientID
	}
	if err := cc.saslCheckExpired(key); err != nil {
		return err
	}
	h, ok := handlers[key]
	req := kmsg.RequestForKey(key)
	if !ok || req == nil || !h.served(cc.b, cc) {
		return fmt.Errorf("%w: unsupported API key %d", errClose, key)
	}
	if version < h.minVersion || version > h.maxVersion {
		if key == kmsg.ApiVersions.Int16() {
			// KIP-511: answer UNSUPPORTED_VERSION with our versions, in v0.
			return cc.queue(&answer{corr: corr, key: key, version: 0, finish: ready(apiVersionsUnsupported(cc.b, cc)), start: start})
		}
		return fmt.Errorf("%w: API %d version %d outside [%d, %d]", errClose, key, version, h.minVersion, h.maxVersion)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return fmt.Errorf("%w: malformed request header: %v", errClose, err)
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		return fmt.Errorf("%w: malformed %s v%d: %v", errClose, kmsg.NameForKey(key), version, err)
	}
	a := &answer{corr: corr, key: key, version: version, start: start}
	if h.stage != nil {
		began := time.Now()
		finish, err := h.stage(ctx, cc.b, cc, req)
		if err != nil {
			return err
		}
		finish = throttled(finish, cc.applyQuotas(key, size, nil, time.Since(began)))
		a.finish, a.mem, held = finish, held, 0
		return cc.queue(a)
	}
	if err := cc.waitAnswered(0); err != nil {
		return err
	}
	cc.boundFetch(req)
	cc.serveStart = time.Now()
	cc.fetchQuotaDone = false
	resp, err := cc.b.serveAuthorized(ctx, h, cc, req) // admin_authz.go
	if err != nil {
		return err
	}
	if !cc.fetchQuotaDone {
		setThrottle(resp, cc.applyQuotas(key, size, resp, time.Since(cc.serveStart)))
	}
	a.finish, a.splices, cc.splices = ready(resp), cc.splices, nil
	a.mem, held = held, 0
	return cc.queue(a)
}

// awaitRequest waits for the first byte of the next request, at most
// connections.max.idle.ms after the connection's latest activity; it
// returns errIdle past that. A connection with requests still being
// answered is not idle.
func (cc *clientConn) awaitRequest(r *bufio.Reader) error {
	if r.Buffered() > 0 {
		return nil
	}
	idle := time.Duration(cc.b.cfg.ConnectionsMaxIdleMs) * time.Millisecond
	if cc.b.cfg.ConnectionsMaxIdleMs < 0 {
		cc.conn.SetReadDeadline(time.Time{})
		_, err := r.Peek(1)
		return err
	}
	deadline := time.Now().Add(idle)
	for {
		cc.conn.SetReadDeadline(deadline)
		_, err := r.Peek(1)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		cc.mu.Lock()
		busy := cc.unanswered > 0
		cc.mu.Unlock()
		last := time.Unix(0, cc.lastWrite.Load())
		switch {
		case busy:
			deadline = time.Now().Add(idle)
		case time.Since(last) < idle:
			deadline = last.Add(idle)
		default:
			return fmt.Errorf("%w (%d ms)", errIdle, cc.b.cfg.ConnectionsMaxIdleMs)
		}
	}
}

// receiveErr names a read deadline's expiry mid-request.
func (cc *clientConn) receiveErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: request not received within sluice.request.receive.timeout.ms=%d", errClose, cc.b.cfg.RequestReceiveTimeoutMs)
	}
	return err
}

// write sends one response: size, correlation id, the header's tagged
// fields when the response is flexible (never for ApiVersions), the body.
func (cc *clientConn) write(w *bufio.Writer, corr int32, key, version int16, resp kmsg.Response, splices []splice) error {
	buf := make([]byte, 8, 256+responseSizeHint(resp))
	binary.BigEndian.PutUint32(buf[4:], uint32(corr))
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		buf = append(buf, 0) // no tagged fields
	}
	buf = resp.AppendTo(buf)
	if len(splices) > 0 {
		return cc.writeSpliced(w, buf, resp.IsFlexible(), splices)
	}
	if err := checkFrame(int64(len(buf)-4), key); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return w.Flush()
}

// errFrameTooLarge: a response would not fit the protocol's int32 size.
var errFrameTooLarge = errors.New("server: response larger than 2147483647 bytes")

// checkFrame refuses a response frame of size bytes (after the size
// field) that the int32 size cannot express; the connection is closed
// rather than sent a corrupt frame. fetch.max.bytes keeps Fetch below it.
func checkFrame(size int64, key int16) error {
	if size > math.MaxInt32 {
		return fmt.Errorf("%w: %s response of %d bytes", errFrameTooLarge, kmsg.NameForKey(key), size)
	}
	return nil
}

// responseSizeHint estimates a response's encoded size so the buffer is
// allocated once: Fetch responses are mostly record bytes.
func responseSizeHint(resp kmsg.Response) int {
	n := 0
	if fr, ok := resp.(*kmsg.FetchResponse); ok {
		for _, t := range fr.Topics {
			n += 64 + len(t.Topic)
			for _, p := range t.Partitions {
				n += 64 + len(p.RecordBatches)
			}
		}
	}
	return n
}
