package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every line back and counts its connections.
type echoServer struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  map[net.Conn]struct{}
	once  sync.Once
}

// close stops the server and waits for its goroutines.
func (e *echoServer) close() {
	e.once.Do(func() {
		e.ln.Close()
		e.mu.Lock()
		for c := range e.open {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln, open: map[net.Conn]struct{}{}}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			e.mu.Lock()
			e.open[c] = struct{}{}
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer func() {
					e.mu.Lock()
					delete(e.open, c)
					e.mu.Unlock()
					c.Close()
				}()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(e.close)
	return e
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// client is one connection through the proxy.
type client struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// roundTrip writes a line and reads its echo within d.
func (c *client) roundTrip(line string, d time.Duration) (string, error) {
	c.nc.SetDeadline(time.Now().Add(d))
	defer c.nc.SetDeadline(time.Time{})
	if _, err := io.WriteString(c.nc, line+"\n"); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// expectReset fails unless a new connection to addr is reset: at
// connect, or at its first round trip.
func expectReset(t *testing.T, addr, what string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		defer nc.Close()
		_, err = (&client{t: t, nc: nc, r: bufio.NewReader(nc)}).roundTrip("x", 5*time.Second)
	}
	if !isReset(err) {
		t.Fatalf("%s: %v, want a reset", what, err)
	}
}

func (c *client) mustEcho(line string) {
	c.t.Helper()
	got, err := c.roundTrip(line, 5*time.Second)
	if err != nil || got != line {
		c.t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// isReset: the proxy reset or closed the connection (never a timeout).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNoLeak fails when the goroutine count has not returned to base.
func checkNoLeak(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestForward(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	if p.Target() != e.ln.Addr().String() || p.Mode() != 0 {
		t.Fatalf("target %s mode %v", p.Target(), p.Mode())
	}
	c := dial(t, p.Addr())
	for i := 0; i < 10; i++ {
		c.mustEcho(fmt.Sprintf("line %d", i))
	}
	// A large write arrives whole, in order.
	big := strings.Repeat("0123456789", 100_000)
	c.mustEcho(big)
	if s := p.Stats(); s.Accepted != 1 || s.Open != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A client's half-close reaches the server, whose EOF comes back.
func TestHalfClose(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	io.WriteString(c.nc, "bye\n")
	c.nc.(*net.TCPConn).CloseWrite()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c.nc)
	if err != nil || string(b) != "bye\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	waitFor(t, "the proxy's connection closed", 5*time.Second, func() bool { return p.Stats().Open == 0 })
}

func TestCutReset(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	c.mustEcho("before")
	if err := p.Cut(Reset); err != nil {
		t.Fatal(err)
	}
	if _, err := c.roundTrip("during", 5*time.Second); !isReset(err) {
		t.Fatalf("open connection after Cut(Reset): %v, want a reset", err)
	}
	// A new connection is accepted and reset at once.
	expectReset(t, p.Addr(), "new connection during Cut(Reset)")
	if e.conns.Load() != 1 {
		t.Fatalf("the target saw %d connections, want 1", e.conns.Load())
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	dial(t, p.Addr()).mustEcho("after")
	if s := p.Stats(); s.Reset != 2 || s.Accepted != 3 {
		t.Fatalf("stats %+v, want 2 reset of 3 accepted", s)
	}
}

func TestCutBlackhole(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	c.mustEcho("before")
	if err := p.Cut(Blackhole); err != nil {
		t.Fatal(err)
	}
	// The open connection goes silent: no answer, no error but a timeout.
	if _, err := c.roundTrip("held", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection during Cut(Blackhole): %v, want a timeout", err)
	}
	// A new connection is accepted but the target never hears of it.
	c2 := dial(t, p.Addr())
	if _, err := c2.roundTrip("new", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection during Cut(Blackhole): %v, want a timeout", err)
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("the target saw %d connections during the blackhole, want 1", n)
	}
	// Healed: what was written during the cut arrives, in order.
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []struct {
		c    *client
		want string
	}{{c, "held"}, {c2, "new"}} {
		cl.c.nc.SetDeadline(time.Now().Add(5 * time.Second))
		got, err := cl.c.r.ReadString('\n')
		if err != nil || got != cl.want+"\n" {
			t.Fatalf("after Heal: %q, %v; want %q", got, err, cl.want)
		}
		cl.c.nc.SetDeadline(time.Time{})
		cl.c.mustEcho("after")
	}
}

// Blackhole then ResetConns drops the held connections; Reset after a
// blackhole resets them too.
func TestBlackholeThenReset(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	c.mustEcho("before")
	p.Cut(Blackhole)
	c2 := dial(t, p.Addr())
	waitFor(t, "the held connection accepted", 5*time.Second, func() bool { return p.Stats().Open == 2 })
	if err := p.ResetConns(); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{c, c2} {
		if _, err := cl.roundTrip("x", 5*time.Second); !isReset(err) {
			t.Fatalf("after ResetConns: %v, want a reset", err)
		}
	}
	c3 := dial(t, p.Addr())
	waitFor(t, "the held connection accepted", 5*time.Second, func() bool { return p.Stats().Open == 1 })
	p.Cut(Reset)
	if _, err := c3.roundTrip("x", 5*time.Second); !isReset(err) {
		t.Fatalf("held connection after Cut(Reset): %v, want a reset", err)
	}
	p.Heal()
	dial(t, p.Addr()).mustEcho("after")
}

func TestDelay(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	c.mustEcho("warm")
	const d = 100 * time.Millisecond
	if err := p.Delay(d); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.mustEcho("slow")
	if rt := time.Since(start); rt < 2*d {
		t.Fatalf("round trip %v with a delay of %v each way", rt, d)
	}
	if p.Delay(-1) == nil {
		t.Fatal("negative delay accepted")
	}
	p.Delay(0)
	c.mustEcho("fast")
}

// A target that is not listening: the accepted connection is reset.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProxy(t, addr)
	expectReset(t, p.Addr(), "target down")
}

func TestClose(t *testing.T) {
	base := runtime.NumGoroutine()
	e := newEcho(t)
	p, err := New("127.0.0.1:0", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	open := dial(t, p.Addr())
	open.mustEcho("x")
	p.Cut(Blackhole)
	held := dial(t, p.Addr())
	waitFor(t, "the held connection accepted", 5*time.Second, func() bool { return p.Stats().Open == 2 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{open, held} {
		if _, err := c.roundTrip("y", 5*time.Second); !isReset(err) {
			t.Fatalf("after Close: %v, want the connection closed", err)
		}
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the listener accepts after Close")
	}
	for _, f := range []func() error{p.Close, p.Heal, p.ResetConns, func() error { return p.Cut(Reset) }, func() error { return p.Delay(0) }} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v, want ErrClosed", err)
		}
	}
	open.nc.Close()
	held.nc.Close()
	e.close()
	checkNoLeak(t, base)
}

// Many clients echo while the proxy is cut and healed in turn from other
// goroutines: no race, no hang, no leaked goroutine, and every echo that
// succeeds is the line written.
func TestConcurrentFaults(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		e := newEcho(t)
		p, err := New("127.0.0.1:0", e.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var ok, failed atomic.Int64
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					nc, err := net.DialTimeout("tcp", p.Addr(), time.Second)
					if err != nil {
						failed.Add(1)
						continue
					}
					c := &client{t: t, nc: nc, r: bufio.NewReader(nc)}
					for j := 0; j < 5; j++ {
						line := fmt.Sprintf("w%d-%d-%d", w, i, j)
						got, err := c.roundTrip(line, 100*time.Millisecond)
						if err != nil {
							failed.Add(1)
							break
						}
						if got != line {
							t.Errorf("echo of %q: %q", line, got)
						}
						ok.Add(1)
					}
					nc.Close()
				}
			}(w)
		}
		modes := []func() error{func() error { return p.Cut(Reset) }, p.Heal, func() error { return p.Cut(Blackhole) }, p.Heal,
			func() error { return p.Delay(time.Millisecond) }, p.ResetConns, func() error { return p.Delay(0) }}
		for i := 0; i < 60; i++ {
			if err := modes[i%len(modes)](); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.Heal()
		close(stop)
		wg.Wait()
		if ok.Load() == 0 {
			t.Fatalf("no echo succeeded (%d failed)", failed.Load())
		}
		t.Logf("%d echoes, %d failed connections", ok.Load(), failed.Load())
		p.Close()
		e.close()
	}()
	checkNoLeak(t, base)
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Reset, Blackhole} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("drop"); err == nil {
		t.Fatal("ParseMode(drop) ok")
	}
	if (&Proxy{}).Cut(Mode(7)) == nil {
		t.Fatal("Cut of an unknown mode ok")
	}
}
