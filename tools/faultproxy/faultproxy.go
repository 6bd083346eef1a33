// Package faultproxy is a TCP proxy that injects network faults between
// two processes on one machine, where network namespaces and tc netem are
// not available: a cut link in either of two modes, a heal, and added
// latency.
//
// A Proxy listens on one address and forwards every accepted connection
// to one target address, both directions, byte for byte. To cut the
// network between processes, point each one at the others through
// proxies (one per directed link: the proxy "i->j" is the address at
// which process i reaches process j) and cut the proxies of the links to
// sever. tools/clustertest does this for the brokers of a local cluster
// through each node's own controller.quorum.voters list; a Jepsen-style
// runner (issue 14) can drive the same proxies from a schedule of faults.
//
// The modes of Cut:
//
//   - Reset: every open connection is reset (closed with SO_LINGER 0, so
//     each side reads ECONNRESET) and every new one is accepted and reset
//     at once: a peer that crashed, or a firewall that rejects. The peer
//     learns of the fault immediately.
//   - Blackhole: nothing is forwarded either way and nothing is closed;
//     open connections stay open but silent, new connections are
//     accepted (the TCP handshake completes, as with a switch that drops
//     everything past it) and held without dialing the target. Data a
//     side writes sits in the kernel buffers until they fill, then its
//     writes block: the peer sees only silence, as in a real partition,
//     and must notice through its own timeouts.
//
// Heal ends either mode. Connections held by Blackhole then resume: what
// was written during the cut is delivered, in order, late (as TCP does
// after a partition shorter than its retransmission timeout: bytes are
// delayed, never lost or reordered); call ResetConns first to drop them
// instead. Delay adds latency to every chunk forwarded after the call
// (without capping throughput: chunks are timestamped when read and
// written once their delay has passed).
//
// Every method is safe for concurrent use. Close stops the listener,
// closes every connection and returns once every goroutine of the proxy
// has exited.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Mode is how Cut severs the link.
type Mode int

const (
	// Reset resets open connections and every new one.
	Reset Mode = iota + 1
	// Blackhole forwards nothing and closes nothing.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Reset:
		return "reset"
	case Blackhole:
		return "blackhole"
	case 0:
		return "healthy"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "reset" or "blackhole".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "reset":
		return Reset, nil
	case "blackhole":
		return Blackhole, nil
	}
	return 0, fmt.Errorf("faultproxy: unknown mode %q (want reset or blackhole)", s)
}

// ErrClosed is returned by methods of a closed Proxy.
var ErrClosed = errors.New("faultproxy: closed")

// chunkSize is the most one read forwards at once.
const chunkSize = 32 << 10

// dialTimeout bounds dialing the target for one accepted connection.
const dialTimeout = 5 * time.Second

// Proxy forwards connections from its listen address to its target.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu     sync.Mutex
	mode   Mode          // 0 when healthy
	open   chan struct{} // closed unless the mode is Blackhole
	delay  time.Duration
	conns  map[*conn]struct{}
	closed bool
	stats  Stats
}

// Stats counts a proxy's connections.
type Stats struct {
	Accepted int // connections accepted
	Reset    int // connections reset by Cut(Reset), ResetConns or a Reset mode at accept
	Open     int // connections open now
}

// New listens on listenAddr (host:port; port 0 picks a free one) and
// forwards to targetAddr, which need not be listening yet: each accepted
// connection dials it, and one that cannot is reset.
func New(listenAddr, targetAddr string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{ln: ln, target: targetAddr, open: make(chan struct{}), conns: map[*conn]struct{}{}}
	close(p.open)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode reports the current mode: 0 when healthy.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Stats reports the proxy's connection counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Open = len(p.conns)
	return s
}

// Cut severs the link in mode m (see the package doc). Cutting an
// already cut proxy switches its mode: from Blackhole to Reset resets the
// held connections.
func (p *Proxy) Cut(m Mode) error {
	if m != Reset && m != Blackhole {
		return fmt.Errorf("faultproxy: Cut(%v): want Reset or Blackhole", m)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.mode = m
	switch m {
	case Blackhole:
		if isClosed(p.open) {
			p.open = make(chan struct{})
		}
	case Reset:
		// Held connections are reset below; new ones never reach the gate.
		if !isClosed(p.open) {
			close(p.open)
		}
		p.resetLocked()
	}
	return nil
}

// Heal ends a cut: new connections are forwarded again and connections
// held by Blackhole resume.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.mode = 0
	if !isClosed(p.open) {
		close(p.open)
	}
	return nil
}

// ResetConns resets every open connection, whatever the mode.
func (p *Proxy) ResetConns() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.resetLocked()
	return nil
}

// Delay adds d of latency to every chunk read after the call, both
// directions; 0 removes it.
func (p *Proxy) Delay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("faultproxy: negative delay %v", d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.delay = d
	return nil
}

// Close stops the listener and closes every connection, and returns once
// every goroutine of the proxy has exited. Later calls return ErrClosed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	if !isClosed(p.open) {
		close(p.open)
	}
	for c := range p.conns {
		c.close(false)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) resetLocked() {
	for c := range p.conns {
		c.close(true)
		p.stats.Reset++
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// gate returns the channel to wait on before forwarding (closed when
// forwarding is allowed) and the current delay.
func (p *Proxy) gate() (chan struct{}, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, p.delay
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // the listener was closed
		}
		p.mu.Lock()
		p.stats.Accepted++
		if p.closed || p.mode == Reset {
			if !p.closed {
				p.stats.Reset++
			}
			p.mu.Unlock()
			resetConn(nc)
			continue
		}
		c := &conn{p: p, client: nc, done: make(chan struct{})}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// conn is one proxied connection: the accepted client side and the
// dialed server side.
type conn struct {
	p      *Proxy
	client net.Conn
	done   chan struct{} // closed by close

	mu     sync.Mutex
	server net.Conn // nil until dialed
	closed bool
	reset  bool
}

// close closes both sides, resetting them when reset is set. It is
// idempotent and never blocks.
func (c *conn) close(reset bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed, c.reset = true, reset
	close(c.done)
	for _, nc := range []net.Conn{c.client, c.server} {
		if nc == nil {
			continue
		}
		if reset {
			resetConn(nc)
		} else {
			nc.Close()
		}
	}
}

func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	nc.Close()
}

func (c *conn) run() {
	defer c.p.wg.Done()
	defer func() {
		c.close(false)
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	// A connection accepted during a blackhole is held before the target
	// hears of it.
	if !c.wait() {
		return
	}
	// The dial ends early when the connection closes (c.done).
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(ctx, "tcp", c.p.target)
	cancel()
	if err != nil {
		c.close(true)
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		server.Close()
		return
	}
	c.server = server
	c.mu.Unlock()

	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); c.pipe(c.client, server) }()
	go func() { defer pipes.Done(); c.pipe(server, c.client) }()
	pipes.Wait()
}

// wait blocks until forwarding is allowed; false when the connection was
// closed first.
func (c *conn) wait() bool {
	for {
		open, _ := c.p.gate()
		select {
		case <-open:
			// The gate may have been replaced by a new Cut between
			// reading it and it closing; read it again.
			if o, _ := c.p.gate(); o == open {
				return true
			}
		case <-c.done:
			return false
		}
	}
}

type chunk struct {
	b  []byte
	at time.Time // when it was read
}

// pipe copies src to dst: a reader that timestamps chunks and a writer
// that waits for the gate and the delay. At src's EOF it half-closes dst
// once everything read is written; on any error it closes the connection.
func (c *conn) pipe(src, dst net.Conn) {
	ch := make(chan chunk, 16)
	readDone := make(chan struct{})
	var readErr error // written before ch is closed
	go func() {
		defer close(readDone)
		defer close(ch)
		for {
			b := make([]byte, chunkSize)
			n, err := src.Read(b)
			if n > 0 {
				select {
				case ch <- chunk{b[:n], time.Now()}:
				case <-c.done:
					return
				}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	defer func() { <-readDone }()
	for ck := range ch {
		if !c.wait() {
			return
		}
		if _, d := c.p.gate(); d > 0 {
			if w := time.Until(ck.at.Add(d)); w > 0 {
				t := time.NewTimer(w)
				select {
				case <-t.C:
				case <-c.done:
					t.Stop()
					return
				}
			}
		}
		if _, err := dst.Write(ck.b); err != nil {
			c.close(false)
			return
		}
	}
	// src ended: pass an EOF on as a half-close; any other error closes
	// the connection (resetting the other side when src was reset).
	select {
	case <-c.done:
		return
	default:
	}
	if !errors.Is(readErr, io.EOF) {
		c.close(errors.Is(readErr, syscall.ECONNRESET))
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		if tc.CloseWrite() == nil {
			return
		}
	}
	c.close(false)
}
