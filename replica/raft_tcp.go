package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// TCPTransport carries the raft messages of every group between brokers:
// one outgoing connection per peer, written by one goroutine that sends
// whatever queued meanwhile as one frame (messages are batched per worker
// loop by the Host, and per write here). A peer that cannot be reached
// loses its messages (raft retries), never blocks a worker.
//
// Liveness: once SetHost named the host, the transport sends every peer a
// heartbeat (an empty frame) every HostConfig.LivenessInterval, one per
// broker pair whatever the number of groups, and reports a peer from
// which no frame arrived for HostConfig.LivenessTimeout down
// (Host.PeerDown), and up again (Host.PeerUp) once frames arrive again.
//
// Format: a connection starts with the magic "SLRT", a version byte (2)
// and the sender's node id (uint64); then frames, each a uint32 length and
// that many bytes: a uint32 message count (0: a liveness heartbeat), then
// per message the group's topic id (16 bytes), partition (int32), a flags
// byte (bit 0: GroupMessage.Quiesce; the others zero), a uint32 length and
// the raft message (raftpb.Message's protobuf encoding). Integers are
// big-endian. A frame over maxRaftFrame bytes, or one that does not
// decode, closes the connection. A connection that starts with "SLRF"
// instead is a snapshot stream (raft_snapfiles_tcp.go).
//
// Inbound connections come from the transport's own listener (ListenTCP)
// or, for a transport without one (NewTCPTransport), from a listener the
// broker shares with Kafka's protocol: its accept loop reads each
// connection's first 4 bytes and hands those with a raft magic
// (IsRaftMagic) over with ServeConn. Both paths serve a connection the
// same way (serve, receive).
type TCPTransport struct {
	id     uint64
	ln     net.Listener // nil without a listener of its own
	logger *slog.Logger

	mu      sync.Mutex
	host    *Host
	peers   map[uint64]*tcpPeer
	addrs   map[uint64]string
	inbound map[net.Conn]struct{}
	heard   map[uint64]time.Time // the last frame from each peer
	down    map[uint64]bool      // peers reported down
	live    bool                 // the liveness goroutine runs
	stop    chan struct{}        // closed by Close
	closed  bool
	wg      sync.WaitGroup

	dial func(ctx context.Context, addr string) (net.Conn, error) // SetDial's; nil: plain TCP
}

const (
	raftMagic    = "SLRT"
	raftVersion  = 2
	maxRaftFrame = 64 << 20
	// raftMsgHeader is a message's bytes before its raft message: topic
	// id, partition, flags, length.
	raftMsgHeader = 16 + 4 + 1 + 4
	flagQuiesce   = 1 << 0
	// peerQueue is how many batches may wait for one peer before new ones
	// are dropped.
	peerQueue = 256
	// frameTarget is the size a sender cuts its frames at: a batch of
	// catch-up appends (raft sends up to its in-flight bound at once,
	// 1 MiB each) goes out as several frames, each far below
	// maxRaftFrame, which the receiver would refuse.
	frameTarget = 8 << 20
)

type tcpPeer struct {
	addr  string
	queue chan []GroupMessage
	stop  chan struct{}
	// redial ends a dial backoff: the peer connected to us, so it runs
	// again (a restarted broker) and its messages need not wait for the
	// backoff (up to 1 s) to run out.
	redial chan struct{}
}

// ListenTCP starts a transport for node id on addr (host:port; port 0
// picks one, see Addr) with a listener of its own. Set the host with
// SetHost before messages arrive; until then they are dropped.
func ListenTCP(id uint64, addr string, logger *slog.Logger) (*TCPTransport, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	t := NewTCPTransport(id, logger)
	t.ln = ln
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// NewTCPTransport returns a transport for node id without a listener of
// its own: the broker's listener (the Kafka or controller listener)
// multiplexes raft's connections with its own and hands them over with
// ServeConn. Addr returns nil. Outbound connections are dialled as
// ListenTCP's are, to the addresses SetPeer names (another broker's
// multiplexed listener). Set the host with SetHost before messages
// arrive; until then they are dropped.
func NewTCPTransport(id uint64, logger *slog.Logger) *TCPTransport {
	if logger == nil {
		logger = slog.Default()
	}
	return &TCPTransport{id: id, logger: logger, peers: map[uint64]*tcpPeer{}, addrs: map[uint64]string{}, inbound: map[net.Conn]struct{}{},
		heard: map[uint64]time.Time{}, down: map[uint64]bool{}, stop: make(chan struct{})}
}

// Addr returns the address the transport listens on; nil for a transport
// without a listener of its own (NewTCPTransport).
func (t *TCPTransport) Addr() net.Addr {
	if t.ln == nil {
		return nil
	}
	return t.ln.Addr()
}

// IsRaftMagic reports whether a connection's first 4 bytes are one of
// the transport's magics: "SLRT" (raft message frames) or "SLRF" (a
// snapshot file stream). A Kafka request starts with its int32 size
// instead, which as a magic would be a request of over 1.3 GB (0x534c....),
// far over any broker's socket.request.max.bytes: the two never collide
// on a listener that refuses such requests.
func IsRaftMagic(first4 []byte) bool {
	return len(first4) == 4 && (string(first4) == raftMagic || string(first4) == snapFileMagic)
}

// ServeConn serves an inbound connection accepted by the caller, whose
// first 4 bytes (a raft magic, IsRaftMagic) the caller already read and
// passes as first4; nothing else may have been read from c (no buffered
// reader in front of it). It returns at once: the connection is served in
// the transport's goroutines, exactly as one accepted by ListenTCP's
// listener, and Close closes it. The transport owns c from now on (it
// closes c itself when the magic is not one of its own, or when the
// transport is closed).
func (t *TCPTransport) ServeConn(c net.Conn, first4 []byte) {
	var magic [4]byte
	if len(first4) != 4 {
		t.logger.Debug("replica: raft transport: ServeConn without the 4 magic bytes", "remote", c.RemoteAddr().String(), "bytes", len(first4))
		c.Close()
		return
	}
	copy(magic[:], first4)
	t.serve(c, magic)
}

// SetDial sets how the transport connects to a peer's address (the
// server's: TLS when the peer's listener is SSL); the default is plain
// TCP. Call it before the first SetPeer.
func (t *TCPTransport) SetDial(dial func(ctx context.Context, addr string) (net.Conn, error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dial = dial
}

// dialPeer connects to addr within timeout.
func (t *TCPTransport) dialPeer(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	t.mu.Lock()
	dial := t.dial
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if dial != nil {
		return dial(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// SetHost names the host that receives the messages and the liveness
// reports, and starts the liveness heartbeats at the host's
// LivenessInterval.
func (t *TCPTransport) SetHost(h *Host) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.host = h
	if h != nil && !t.live && !t.closed {
		t.live = true
		t.wg.Add(1)
		go t.liveness(h.cfg.LivenessInterval, h.cfg.LivenessTimeout)
	}
}

// liveness sends every peer a heartbeat each interval and reports the
// peers not heard from within timeout down, and those heard from again
// up.
func (t *TCPTransport) liveness(every, timeout time.Duration) {
	defer t.wg.Done()
	tk := time.NewTicker(every)
	defer tk.Stop()
	var downs, ups []uint64
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
		}
		now := time.Now()
		downs, ups = downs[:0], ups[:0]
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return
		}
		h := t.host
		for id := range t.addrs {
			if p := t.peerLocked(id); p != nil {
				select {
				case p.queue <- nil: // a heartbeat
				default:
				}
			}
			heard, ok := t.heard[id]
			if !ok {
				t.heard[id] = now // the clock starts now
				continue
			}
			if isDown := now.Sub(heard) > timeout; isDown != t.down[id] {
				t.down[id] = isDown
				if isDown {
					downs = append(downs, id)
				} else {
					ups = append(ups, id)
				}
			}
		}
		t.mu.Unlock()
		for _, id := range downs {
			t.logger.Info("replica: raft transport: peer stopped answering", "peer", id, "timeout", timeout)
			h.PeerDown(id)
		}
		for _, id := range ups {
			t.logger.Info("replica: raft transport: peer answers again", "peer", id)
			h.PeerUp(id)
		}
	}
}

// SetPeer records (or changes) where node id listens.
func (t *TCPTransport) SetPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addrs[id] = addr
	if p := t.peers[id]; p != nil && p.addr != addr {
		close(p.stop)
		delete(t.peers, id)
	}
}

// Send queues msgs for their peers (Transport).
func (t *TCPTransport) Send(msgs []GroupMessage) {
	by := map[uint64][]GroupMessage{}
	for _, m := range msgs {
		by[m.Msg.To] = append(by[m.Msg.To], m)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for to, ms := range by {
		p := t.peerLocked(to)
		if p == nil {
			continue
		}
		select {
		case p.queue <- ms:
		default: // the peer is slow or away: raft retries
		}
	}
}

func (t *TCPTransport) peerLocked(id uint64) *tcpPeer {
	if p := t.peers[id]; p != nil {
		return p
	}
	if t.closed {
		return nil // Close stopped the senders
	}
	addr, ok := t.addrs[id]
	if !ok {
		return nil
	}
	p := &tcpPeer{addr: addr, queue: make(chan []GroupMessage, peerQueue), stop: make(chan struct{}), redial: make(chan struct{}, 1)}
	t.peers[id] = p
	t.wg.Add(1)
	go t.send(id, p)
	return p
}

// Close stops sending and receiving and waits for the goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if !t.closed {
		close(t.stop)
	}
	t.closed = true
	for id, p := range t.peers {
		close(p.stop)
		delete(t.peers, id)
	}
	for c := range t.inbound {
		c.Close()
	}
	t.mu.Unlock()
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	t.wg.Wait()
	return err
}

// send writes p's queue to its connection, dialling (with a backoff up to
// 1 s, cut short when the peer connects to us) whenever there is none.
func (t *TCPTransport) send(id uint64, p *tcpPeer) {
	defer t.wg.Done()
	var conn net.Conn
	var w *bufio.Writer
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	backoff := 10 * time.Millisecond
	var frame []byte
next:
	for {
		var batch []GroupMessage
		select {
		case <-p.stop:
			return
		case batch = <-p.queue:
		}
	more:
		for len(batch) < 4096 {
			select {
			case b := <-p.queue:
				batch = append(batch, b...)
			default:
				break more
			}
		}
		for conn == nil {
			c, err := t.dialPeer(context.Background(), p.addr, time.Second)
			if err != nil {
				t.logger.Debug("replica: raft transport: dial", "peer", id, "addr", p.addr, "err", err)
				select {
				case <-p.stop:
					return
				case <-p.redial: // the peer is back: dial again at once, for this batch
					backoff = 10 * time.Millisecond
					continue
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Second)
				continue next // the batch is dropped
			}
			backoff = 10 * time.Millisecond
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
			hello := append([]byte(raftMagic), raftVersion)
			hello = binary.BigEndian.AppendUint64(hello, t.id)
			w.Write(hello)
		}
		var err error
		// An empty batch is still one (empty) frame: the liveness
		// heartbeat.
		for rest, first := batch, true; (first || len(rest) > 0) && err == nil; first = false {
			n := frameCut(rest, frameTarget)
			frame = encodeRaftFrame(frame[:0], rest[:n])
			rest = rest[n:]
			conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err = w.Write(frame); err == nil {
				err = w.Flush()
			}
		}
		if err != nil {
			t.logger.Debug("replica: raft transport: write", "peer", id, "err", err)
			conn.Close()
			conn, w = nil, nil
		}
	}
}

// frameCut is how many of msgs (at least one) the next frame holds: as
// many as fit in target bytes of raft messages.
func frameCut(msgs []GroupMessage, target int) int {
	n, size := 0, 0 // none only for none (an empty frame: a heartbeat)
	for n < len(msgs) && (n == 0 || size+msgs[n].Msg.Size() <= target) {
		size += msgs[n].Msg.Size()
		n++
	}
	return n
}

// encodeRaftFrame appends one frame holding msgs to dst.
func encodeRaftFrame(dst []byte, msgs []GroupMessage) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(msgs)))
	for i := range msgs {
		dst = append(dst, msgs[i].Group.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(msgs[i].Group.Partition))
		var flags byte
		if msgs[i].Quiesce {
			flags |= flagQuiesce
		}
		dst = append(dst, flags)
		size := msgs[i].Msg.Size()
		dst = binary.BigEndian.AppendUint32(dst, uint32(size))
		n := len(dst)
		dst = append(dst, make([]byte, size)...)
		if _, err := msgs[i].Msg.MarshalTo(dst[n:]); err != nil {
			panic(fmt.Sprintf("replica: marshal raft message: %v", err)) // sized above
		}
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// errBadFrame reports a frame that does not decode.
var errBadFrame = errors.New("replica: bad raft transport frame")

// decodeRaftFrame decodes a frame's body.
func decodeRaftFrame(b []byte) ([]GroupMessage, error) {
	if len(b) < 4 {
		return nil, errBadFrame
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b))/raftMsgHeader {
		return nil, errBadFrame
	}
	if n == 0 {
		if len(b) != 0 {
			return nil, errBadFrame
		}
		return nil, nil // a liveness heartbeat
	}
	msgs := make([]GroupMessage, 0, n)
	for range n {
		if len(b) < raftMsgHeader {
			return nil, errBadFrame
		}
		var gm GroupMessage
		copy(gm.Group.TopicID[:], b)
		gm.Group.Partition = int32(binary.BigEndian.Uint32(b[16:]))
		flags := b[20]
		if flags&^flagQuiesce != 0 {
			return nil, fmt.Errorf("%w: flags %#x", errBadFrame, flags)
		}
		gm.Quiesce = flags&flagQuiesce != 0
		size := binary.BigEndian.Uint32(b[21:])
		b = b[raftMsgHeader:]
		if uint64(size) > uint64(len(b)) {
			return nil, errBadFrame
		}
		if err := gm.Msg.Unmarshal(b[:size]); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadFrame, err)
		}
		b = b[size:]
		msgs = append(msgs, gm)
	}
	if len(b) != 0 {
		return nil, errBadFrame
	}
	return msgs, nil
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.serve(c, noMagic)
	}
}

// noMagic tells serve that no byte of the connection was read yet.
var noMagic = [4]byte{}

// serve registers an inbound connection (so Close closes it) and serves
// it in a goroutine of its own: the listener's accept loop and ServeConn
// both come here. magic is the connection's first 4 bytes when the
// caller read them already, else noMagic.
func (t *TCPTransport) serve(c net.Conn, magic [4]byte) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.inbound[c] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	go t.receive(c, magic)
}

// receive reads the hello of one inbound connection and serves it: the
// frames of one peer, delivered to the host, or one snapshot-stream
// request (raft_snapfiles_tcp.go). magic is its first 4 bytes if they
// were read already (ServeConn), else noMagic.
func (t *TCPTransport) receive(c net.Conn, magic [4]byte) {
	defer t.wg.Done()
	defer func() {
		c.Close()
		t.mu.Lock()
		delete(t.inbound, c)
		t.mu.Unlock()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var hello [len(raftMagic) + 1 + 8]byte
	rest := hello[:]
	if magic != noMagic {
		copy(hello[:4], magic[:])
		rest = hello[4:]
	}
	_, err := io.ReadFull(r, rest)
	if err == nil && string(hello[:4]) == snapFileMagic {
		t.serveSnapshotStream(c, r, hello[4]) // raft_snapfiles_tcp.go
		return
	}
	if err != nil || string(hello[:4]) != raftMagic || hello[4] != raftVersion {
		t.logger.Debug("replica: raft transport: bad hello", "remote", c.RemoteAddr().String())
		return
	}
	from := binary.BigEndian.Uint64(hello[5:])
	t.heardFrom(from)
	t.peerConnected(from)
	var buf []byte
	for {
		var lenb [4]byte
		if _, err := io.ReadFull(r, lenb[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(lenb[:])
		if n > maxRaftFrame {
			t.logger.Warn("replica: raft transport: frame too large", "from", from, "bytes", n)
			return
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		msgs, err := decodeRaftFrame(buf)
		if err != nil {
			t.logger.Warn("replica: raft transport: bad frame", "from", from, "err", err)
			return
		}
		// Unmarshal copies entry data out of buf, so buf is reused.
		if h := t.heardFrom(from); h != nil && len(msgs) > 0 {
			h.Deliver(msgs)
		}
	}
}

// peerConnected ends the dial backoff of the sender to peer id, which
// just connected to us.
func (t *TCPTransport) peerConnected(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		select {
		case p.redial <- struct{}{}:
		default:
		}
	}
}

// heardFrom notes a frame from peer id and returns the host.
func (t *TCPTransport) heardFrom(id uint64) *Host {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heard[id] = now
	return t.host
}
