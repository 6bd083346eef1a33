package server

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"
)

// Connections that declare large requests and send little of them hold
// what they sent, not what they declared, and all requests in flight
// together hold at most queued.max.request.bytes: past it the broker stops
// reading (the waiting requests are counted by the pool, not allocated).
// Before, 60 connections declaring 100 MiB and sending 64 KiB each made
// the broker allocate 6 GB.
func TestRequestMemoryBounded(t *testing.T) {
	const (
		conns    = 60
		declared = 100 << 20    // socket.request.max.bytes's default
		pool     = 2 * declared // reserved by the two large requests granted
		sent     = 64 << 10
	)
	// 250 MiB: the large class gets 250 less a 31.25 MiB share for small
	// requests, room for two 100 MiB requests.
	b := newTestBroker(t, nil, slog.LevelInfo, nil, "queued.max.request.bytes=262144000")
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		frame := make([]byte, 4+sent)
		binary.BigEndian.PutUint32(frame, declared)
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// Two requests fill the pool; the other 58 wait for it without
	// reading their bodies.
	deadline := time.Now().Add(20 * time.Second)
	for {
		reserved, waiting := b.reqMem.stats()
		if reserved > pool {
			t.Fatalf("%d bytes reserved, above queued.max.request.bytes=%d", reserved, pool)
		}
		if reserved == pool && waiting == conns-2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes reserved and %d requests waiting, want %d and %d", reserved, waiting, pool, conns-2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Small requests are still served (the small requests' share).
	dialProbe(t, b.Addr().String())
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held := int64(ms.HeapAlloc) - int64(base)
	t.Logf("heap held by %d connections declaring %d MiB and sending %d KiB: %.1f MiB", conns, declared>>20, sent>>10, float64(held)/(1<<20))
	if held > 32<<20 {
		t.Fatalf("heap grew by %d MiB", held>>20)
	}
	// Closing the connections returns every reservation, and the broker
	// serves as before.
	for _, c := range cs {
		c.Close()
	}
	for {
		reserved, waiting := b.reqMem.stats()
		if reserved == 0 && waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing: %d bytes reserved, %d waiting", reserved, waiting)
		}
		time.Sleep(5 * time.Millisecond)
	}
	dialProbe(t, b.Addr().String())
}

// The pool serves waiters in order and gives memory back on cancel.
func TestRequestMemoryOrder(t *testing.T) {
	m := newRequestMemory(100, 100)
	ctx := context.Background()
	if err := m.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() { big <- m.acquire(ctx, 100) }()
	waitWaiting(t, m, 1)
	cctx, cancel := context.WithCancel(ctx)
	small := make(chan error, 1)
	go func() { small <- m.acquire(cctx, 10) }() // fits, but queues behind big
	waitWaiting(t, m, 2)
	cancel()
	if err := <-small; err == nil {
		t.Fatal("a cancelled acquire succeeded")
	}
	m.release(60)
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	if r, w := m.stats(); r != 100 || w != 0 {
		t.Fatalf("reserved %d waiting %d", r, w)
	}
	m.close()
	if err := m.acquire(ctx, 1); err == nil {
		t.Fatal("acquire after close")
	}
	m.release(100)
}

// waitWaiting waits until n acquires wait on m.
func waitWaiting(t *testing.T, m *requestMemory, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, w := m.stats(); w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d acquires to wait", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Large requests cannot take the small requests' share: with the large
// class full and more large requests waiting, a small request (Metadata,
// a heartbeat) is still granted at once. Before, every client stalled
// behind a few connections that declared 100 MiB and sent little.
func TestRequestMemorySmallShare(t *testing.T) {
	const mib = 1 << 20
	m := newRequestMemory(512*mib, 100*mib) // large class: 448 MiB
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		if err := m.acquire(ctx, 100*mib); err != nil {
			t.Fatal(err)
		}
	}
	waiting := make(chan error, 1)
	go func() { waiting <- m.acquire(ctx, 100*mib) }()
	waitWaiting(t, m, 1)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := m.acquire(sctx, 60<<10); err != nil {
			t.Fatalf("small request %d waited behind large ones: %v", i, err)
		}
	}
	m.release(100 * mib)
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	// A pool no bigger than one request keeps no share: that request fits.
	one := newRequestMemory(100*mib, 100*mib)
	if err := one.acquire(sctx, 100*mib); err != nil {
		t.Fatal(err)
	}
}
