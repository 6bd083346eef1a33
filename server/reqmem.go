package server

import (
	"context"
	"errors"
	"io"
	"sync"
)

// requestMemory bounds the bytes of requests read and not yet answered,
// over every connection (queued.max.request.bytes). A connection reserves
// a request's declared size once its size prefix is read and before its
// body is, and gives it back once the request is answered; while the pool
// cannot cover a reservation the connection reads nothing more, which is
// how Kafka's network layer mutes sockets when its MemoryPool is
// exhausted. Reserving the whole declared size at once (not chunk by chunk
// as bytes arrive) means requests never hold parts of the pool while
// waiting for the rest, so they cannot deadlock each other; the body
// itself is allocated as it arrives (readBody), so a client that declares
// 100 MiB and sends 64 KiB costs 64 KiB of memory, and the reservation
// bounds the rest.
//
// Waiters are served first come, first served within their class (a large
// request is not overtaken by a later large one). Small requests do not
// queue behind large ones, so a flood of small requests could hold a large
// one back; that takes thousands of them in flight. The classes:
// requests up to smallRequest bytes (Metadata, Fetch, heartbeats, commits,
// most produce requests) may use the whole pool; larger ones only the pool
// less a share kept for small ones, and they queue apart. So clients
// declaring 100 MiB requests and sending them slowly (or never: they are
// closed after sluice.request.receive.timeout.ms) hold up other large
// requests, as in Kafka, but never the small requests every client needs
// (Kafka's one MemoryPool mutes every socket then).
type requestMemory struct {
	capacity int64 // <= 0: unbounded (reservations are still counted)
	// largeCap is what large requests may reserve together: capacity less
	// the small requests' share (capacity/8, but never so much that a
	// request of maxRequest bytes cannot fit).
	largeCap int64

	mu            sync.Mutex
	reserved      int64           // by every request
	largeReserved int64           // by large requests
	waiters       [2][]*memWaiter // FIFO per class: small, large
	closed        bool
}

// smallRequest is the largest request, in bytes, of the small class.
const smallRequest = 64 << 10

type memWaiter struct {
	n     int64
	ready chan struct{} // closed once n is reserved for the waiter, or err set
	err   error         // errMemoryClosed when the pool closed instead
}

// errMemoryClosed is returned to waiters when the broker shuts down.
var errMemoryClosed = errors.New("server: request memory pool closed")

// newRequestMemory returns a pool of capacity bytes (<= 0: unbounded) for
// requests of at most maxRequest bytes (socket.request.max.bytes).
func newRequestMemory(capacity, maxRequest int64) *requestMemory {
	share := max(min(capacity/8, capacity-maxRequest), 0)
	return &requestMemory{capacity: capacity, largeCap: capacity - share}
}

func class(n int64) int {
	if n > smallRequest {
		return 1
	}
	return 0
}

// acquire reserves n bytes, waiting until they are free; it returns
// ctx's error or errMemoryClosed instead if either comes first. A
// reservation larger than the whole pool never succeeds (Validate keeps
// socket.request.max.bytes below the pool, so serveOne refuses such a
// request before asking).
func (m *requestMemory) acquire(ctx context.Context, n int64) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errMemoryClosed
	}
	c := class(n)
	if len(m.waiters[c]) == 0 && m.fits(n) {
		m.take(n)
		m.mu.Unlock()
		return nil
	}
	w := &memWaiter{n: n, ready: make(chan struct{})}
	m.waiters[c] = append(m.waiters[c], w)
	m.mu.Unlock()
	select {
	case <-w.ready:
		return w.err
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-w.ready:
		if w.err == nil { // granted meanwhile: give it back
			m.give(n)
			m.grant()
		}
	default:
		m.remove(w)
		m.grant() // the next waiter may fit now that w does not block it
	}
	return ctx.Err()
}

// release returns n bytes reserved by acquire.
func (m *requestMemory) release(n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.give(n)
	if m.reserved < 0 || m.largeReserved < 0 {
		panic("server: request memory released twice")
	}
	m.grant()
}

func (m *requestMemory) take(n int64) {
	m.reserved += n
	if class(n) == 1 {
		m.largeReserved += n
	}
}

func (m *requestMemory) give(n int64) {
	m.reserved -= n
	if class(n) == 1 {
		m.largeReserved -= n
	}
}

// close fails every waiter and every later acquire.
func (m *requestMemory) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for c := range m.waiters {
		for _, w := range m.waiters[c] {
			w.err = errMemoryClosed
			close(w.ready)
		}
		m.waiters[c] = nil
	}
}

// stats reports the bytes reserved and the requests waiting (tests).
func (m *requestMemory) stats() (reserved int64, waiting int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reserved, len(m.waiters[0]) + len(m.waiters[1])
}

func (m *requestMemory) fits(n int64) bool {
	if m.capacity <= 0 {
		return true
	}
	if class(n) == 1 && m.largeReserved+n > m.largeCap {
		return false
	}
	return m.reserved+n <= m.capacity
}

// grant hands memory to each class's waiters in order while the first
// fits. m.mu held.
func (m *requestMemory) grant() {
	for c := range m.waiters {
		for len(m.waiters[c]) > 0 && m.fits(m.waiters[c][0].n) {
			w := m.waiters[c][0]
			m.waiters[c] = m.waiters[c][1:]
			m.take(w.n)
			close(w.ready)
		}
	}
}

func (m *requestMemory) remove(w *memWaiter) {
	c := class(w.n)
	for i, x := range m.waiters[c] {
		if x == w {
			m.waiters[c] = append(m.waiters[c][:i], m.waiters[c][i+1:]...)
			return
		}
	}
}

// bodyChunk is the first allocation for a request body; the buffer then
// doubles as bytes arrive, up to the declared size.
const bodyChunk = 64 << 10

// readBody reads a request body of size bytes, allocating as it arrives:
// the buffer never exceeds twice what has been received (nor size), so a
// declared size costs nothing until its bytes come.
func readBody(r io.Reader, size int) ([]byte, error) {
	buf := make([]byte, 0, min(size, bodyChunk))
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < size {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}
