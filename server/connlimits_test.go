package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logBuffer collects a broker's log lines for a test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the lines containing every one of subs.
func (l *logBuffer) lines(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// newTestBroker is startBroker with the broker's log kept (at level) and
// a hook run before Start.
func newTestBroker(t *testing.T, logs *logBuffer, level slog.Level, before func(*Broker), sets ...string) *Broker {
	t.Helper()
	sets = append([]string{"metrics.listen=", "listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + t.TempDir()}, sets...)
	cfg, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	var w io.Writer = io.Discard
	if logs != nil {
		w = logs
	}
	b, err := New(cfg, slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(b)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	awaitServing(t, b)
	t.Cleanup(func() { b.Close() })
	return b
}

// apiVersionsFrame is an ApiVersions v0 request, size prefix included.
func apiVersionsFrame(corr int32) []byte {
	buf := make([]byte, 4, 16)
	buf = binary.BigEndian.AppendUint16(buf, uint16(kmsg.ApiVersions.Int16()))
	buf = binary.BigEndian.AppendUint16(buf, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, 0xffff) // null client id
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// probe sends an ApiVersions on c and waits up to d for its answer.
func probe(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(apiVersionsFrame(7)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 7 {
		return fmt.Errorf("correlation id %d", corr)
	}
	return nil
}

// dialProbe connects to addr and checks the broker answers.
func dialProbe(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := probe(c, 10*time.Second); err != nil {
		t.Fatalf("connection not served: %v", err)
	}
	return c
}

// waitClosed reads c until the broker closes it; it fails after d.
func waitClosed(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("still open after %v", d)
		default:
			return nil // EOF or reset: closed by the broker
		}
	}
}

// flakyListener fails Accept with EMFILE (as a process out of file
// descriptors does) while fails is positive.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// The accept loop survives accept errors (it retries with a backoff) and
// logs them once per interval, not once each.
func TestAcceptErrorsDoNotStopServing(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	var fl *flakyListener
	b := newTestBroker(t, &logs, slog.LevelInfo, func(b *Broker) {
		b.wrapListener = func(ln net.Listener) net.Listener {
			fl = &flakyListener{Listener: ln}
			fl.fails.Store(3)
			return fl
		}
	})
	addr := b.Addr().String()
	dialProbe(t, addr)
	// Errors again once serving.
	fl.fails.Store(5)
	dialProbe(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("after-emfile"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("not serving after accept errors: %v", err)
	}
	if n := len(logs.lines("accept")); n == 0 || n > 2 {
		t.Fatalf("%d log lines for 8 accept errors, want one per interval:\n%s", n, strings.Join(logs.lines("accept"), "\n"))
	}
}

// max.connections.per.ip closes connections past the limit (Kafka's
// TooManyConnectionsException); overrides raise it for one address.
func TestMaxConnectionsPerIP(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, nil, slog.LevelInfo, nil, "max.connections.per.ip=2")
	addr := b.Addr().String()
	c1 := dialProbe(t, addr)
	dialProbe(t, addr)
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := waitClosed(c3, 10*time.Second); err != nil {
		t.Fatalf("third connection from one address: %v", err)
	}
	// A slot returns when a connection closes.
	c1.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		err = probe(c, 2*time.Second)
		c.Close()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one closed: %v", err)
		}
	}

	b2 := newTestBroker(t, nil, slog.LevelInfo, nil, "max.connections.per.ip=1", "max.connections.per.ip.overrides=127.0.0.1:3")
	addr2 := b2.Addr().String()
	for range 3 {
		dialProbe(t, addr2)
	}
	c4, err := net.Dial("tcp", addr2)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if err := waitClosed(c4, 10*time.Second); err != nil {
		t.Fatalf("fourth connection with an override of 3: %v", err)
	}
}

// At max.connections the broker stops accepting until a connection closes
// (Kafka's acceptor waits for a slot); the waiting client is then served.
func TestMaxConnections(t *testing.T) {
	b := newTestBroker(t, nil, slog.LevelInfo, nil, "max.connections=2")
	addr := b.Addr().String()
	c1 := dialProbe(t, addr)
	dialProbe(t, addr)
	c3, err := net.Dial("tcp", addr) // the kernel's backlog accepts it
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !b.acceptBlocked() {
		if time.Now().After(deadline) {
			t.Fatal("the acceptor is not waiting for a connection slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := probe(c3, 100*time.Millisecond); err == nil {
		t.Fatal("a third connection was served with max.connections=2")
	}
	c1.Close()
	c3.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte // the probe's answer, once accepted
	if _, err := io.ReadFull(c3, size[:]); err != nil {
		t.Fatalf("waiting connection not served after a slot freed: %v", err)
	}
}

// connections.max.idle.ms closes idle connections, but not one with a
// request in flight (a long poll longer than the idle time).
func TestIdleConnectionsClosed(t *testing.T) {
	b := newTestBroker(t, nil, slog.LevelInfo, nil, "connections.max.idle.ms=300")
	addr := b.Addr().String()
	c := dialProbe(t, addr)
	if err := waitClosed(c, 10*time.Second); err != nil {
		t.Fatalf("idle connection: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, 1, 1, nil, "idle"); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 1500, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "idle"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 1<<20, -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	resp := rc.recv(rc.sendAt(req, 12)).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || time.Since(start) < time.Second {
		t.Fatalf("long poll: error %d after %v", resp.ErrorCode, time.Since(start))
	}
}

// sluice.request.receive.timeout.ms closes a connection whose request
// stalls part-way (a half-sent request) or trickles in (slowloris).
func TestRequestReceiveTimeout(t *testing.T) {
	var logs logBuffer
	b := newTestBroker(t, &logs, slog.LevelDebug, nil, "sluice.request.receive.timeout.ms=300")
	addr := b.Addr().String()

	half, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	half.Write([]byte{0, 0, 0, 100, 0, 18, 0, 0, 0, 0})
	if err := waitClosed(half, 10*time.Second); err != nil {
		t.Fatalf("half-sent request: %v", err)
	}

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		frame := append([]byte{0, 0, 0, 100}, make([]byte, 100)...)
		for _, c := range frame {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := slow.Write([]byte{c}); err != nil {
				return
			}
		}
	}()
	if err := waitClosed(slow, 10*time.Second); err != nil {
		t.Fatalf("slowloris request (a byte every 20 ms): %v", err)
	}
	// A connection that idles between requests is not cut by this limit.
	c := dialProbe(t, addr)
	// Not a wait for a condition: the idle time itself is the point
	// (longer than the receive timeout, between requests; the timeout is
	// a socket deadline, on the wall clock).
	time.Sleep(500 * time.Millisecond)
	if err := probe(c, 10*time.Second); err != nil {
		t.Fatalf("idle between requests: %v", err)
	}
}

// Bad connections are logged at DEBUG each and summarized at INFO, so a
// flood of them does not flood the log.
func TestBadConnectionsLogSummarized(t *testing.T) {
	var logs logBuffer
	b := newTestBroker(t, &logs, slog.LevelInfo, func(b *Broker) { b.logEvery = 200 * time.Millisecond })
	addr := b.Addr().String()
	const n = 30
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0xff, 0xff, 0xff, 0xff}) // negative size
		if err := waitClosed(c, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		total := 0
		for _, l := range logs.lines("bad connections") {
			var k int
			if i := strings.Index(l, "count="); i >= 0 {
				fmt.Sscanf(l[i:], "count=%d", &k)
			}
			total += k
		}
		if total == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("summaries count %d bad connections, want %d:\n%s", total, n, strings.Join(logs.lines(), "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lines := logs.lines("level=INFO"); len(lines) > 10 {
		t.Fatalf("%d INFO lines for %d bad connections:\n%s", len(lines), n, strings.Join(lines, "\n"))
	}
}
