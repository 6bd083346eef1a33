package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment"
)

// Raft multiplexed on a broker's Kafka listener: the listener's accept
// loop reads each connection's first 4 bytes and hands a raft one to the
// transport (ServeConn); anything else is a Kafka request (here a fake
// one: a size, that many bytes, answered with the same bytes).

// muxListener is a node's Kafka-like listener in front of a transport
// without a listener of its own (NewTCPTransport).
type muxListener struct {
	ln net.Listener
	tp *TCPTransport
	wg sync.WaitGroup
	// raft, snap and kafka count the connections by their first bytes.
	raft, snap, kafka *atomic.Int64
}

func (m *muxListener) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var first [4]byte
			if _, err := io.ReadFull(c, first[:]); err != nil {
				c.Close()
				return
			}
			c.SetReadDeadline(time.Time{})
			if IsRaftMagic(first[:]) {
				if string(first[:]) == snapFileMagic {
					m.snap.Add(1)
				} else {
					m.raft.Add(1)
				}
				m.tp.ServeConn(c, first[:])
				return
			}
			m.kafka.Add(1)
			serveFakeKafka(c, first)
		}()
	}
}

// serveFakeKafka answers one size-prefixed request with its own bytes.
func serveFakeKafka(c net.Conn, size [4]byte) {
	defer c.Close()
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<20 {
		return
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return
	}
	c.Write(append(size[:], body...))
}

// close stops accepting; the connections it handed over are the
// transport's to close.
func (m *muxListener) close() {
	m.ln.Close()
	m.wg.Wait()
}

// listenMux starts n's transport behind a muxListener on n's address (a
// free port the first time).
func (c *tcluster) listenMux(n *tnode) {
	c.t.Helper()
	var ln net.Listener
	var err error
	if n.addr != "" {
		deadline := time.Now().Add(2 * time.Second)
		for {
			if ln, err = net.Listen("tcp", n.addr); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			c.t.Fatal(err)
		}
	}
	tp := NewTCPTransport(n.id, quiet())
	if tp.Addr() != nil {
		c.t.Fatalf("a transport without a listener has address %v", tp.Addr())
	}
	m := &muxListener{ln: ln, tp: tp, raft: new(atomic.Int64), snap: new(atomic.Int64), kafka: new(atomic.Int64)}
	if n.mux != nil {
		m.raft, m.snap, m.kafka = n.mux.raft, n.mux.snap, n.mux.kafka // counted over restarts
	}
	m.wg.Add(1)
	go m.accept()
	n.tp, n.mux, n.addr = tp, m, ln.Addr().String()
	for _, o := range c.voters {
		if on := c.nodes[o]; o != n.id && on.tp != nil {
			on.tp.SetPeer(n.id, n.addr)
		}
	}
}

func TestIsRaftMagic(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{[]byte("SLRT"), true},
		{[]byte("SLRF"), true},
		{[]byte("SLRX"), false},
		{[]byte{0, 0, 0, 42}, false}, // a Kafka request's size
		{[]byte("SLR"), false},
		{[]byte("SLRTT"), false},
	} {
		if got := IsRaftMagic(tc.b); got != tc.want {
			t.Errorf("IsRaftMagic(%q) = %v, want %v", tc.b, got, tc.want)
		}
	}
}

// TestRaftMultiplexedOnKafkaListener: three brokers whose transports have
// no listener of their own, each behind a Kafka-like listener that hands
// raft's connections over (ServeConn) and answers Kafka requests itself,
// replicate partitions (produce, a leader's broker stopping and
// restarting on the same listener address) and a compacted topic's
// snapshot files (a follower that was down while the others cleaned
// catches up by segment transfer over the SLRF stream); Kafka requests on
// the same listeners are answered meanwhile.
func TestRaftMultiplexedOnKafkaListener(t *testing.T) {
	cfg := DefaultTopicConfig()
	cfg.Log.SegmentBytes = 1024
	cfg.Log.CleanupPolicy = segment.PolicyCompact
	cfg.Log.MinCleanableDirtyRatio = 0
	c := newTClusterWith(t, 1, tcpFast, true, cfg)
	c.startAll()
	g := c.groups[0]
	kafka := func(id uint64) {
		t.Helper()
		c.mu.RLock()
		addr := c.nodes[id].addr
		c.mu.RUnlock()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := binary.BigEndian.AppendUint32(nil, 5)
		req = append(req, "hello"...)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(req))
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != string(req) {
			t.Fatalf("node %d: the Kafka request was answered %q, %v", id, got, err)
		}
	}
	produce := func(n, keys, from int) {
		t.Helper()
		for i := range n {
			for {
				lead := c.leader(g)
				var p *Partition
				if lead != 0 {
					p = c.part(lead, g)
				}
				if p == nil {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				if _, err := produceAndWait(p, keyedBatch(keyValue(i%keys, from+i))); err == nil {
					break
				}
			}
		}
	}
	c.waitLeaders(5 * time.Second)
	for _, id := range c.voters {
		kafka(id)
	}
	produce(20, 10, 0)
	c.settle(10 * time.Second)
	// A leader's broker stops and restarts on the same address.
	lead := c.leader(g)
	c.stop(lead)
	c.waitLeaders(5*time.Second, lead)
	produce(10, 10, 20)
	c.start(lead)
	c.settle(10 * time.Second)
	// A follower is down while the others produce and clean: it catches
	// up by a segment transfer.
	lead = c.leader(g)
	fol := c.others(lead)[0]
	c.stop(fol)
	produce(100, 4, 100)
	c.mu.RLock()
	for _, n := range c.upLocked() {
		p := n.parts[g]
		c.waitFor("the applied entries", 5*time.Second, func() bool { return p.HighWatermark() == p.LogEndOffset() })
		if _, err := p.log.Clean(p.HighWatermark()); err != nil {
			t.Fatal(err)
		}
		if len(p.log.SnapshotSegments()) == 0 {
			t.Fatalf("node %d: no segment below the raft start after cleaning", n.id)
		}
	}
	c.mu.RUnlock()
	snapsBefore := c.nodes[lead].mux.snap.Load()
	c.start(fol)
	kafka(fol)
	c.settle(20 * time.Second)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if got := c.nodes[lead].mux.snap.Load() - snapsBefore; got == 0 {
		t.Errorf("the leader's listener handed over no snapshot stream")
	}
	if len(c.nodes[fol].parts[g].log.SnapshotSegments()) == 0 {
		t.Errorf("node %d has no installed segment below its raft start", fol)
	}
	want := compactedRecords(t, c.nodes[lead].parts[g])
	for _, n := range c.upLocked() {
		if got := compactedRecords(t, n.parts[g]); !slices.Equal(got, want) {
			t.Errorf("node %d serves %v\nthe leader %v", n.id, got, want)
		}
		if n.mux.raft.Load() == 0 || n.mux.kafka.Load() == 0 {
			t.Errorf("node %d: %d raft and %d Kafka connections handed over", n.id, n.mux.raft.Load(), n.mux.kafka.Load())
		}
	}
}

func keyValue(k, v int) string { return "k" + itoa(k) + "=v" + itoa(v) }

func itoa(n int) string { return strconv.Itoa(n) }

// produceAndWait produces b with acks=all to p and waits (bounded).
func produceAndWait(p *Partition, b []byte) (segment.AppendResult, error) {
	pd, err := p.ProduceWith(b, ProduceOptions{Acks: AcksAll})
	if err != nil {
		return noResult, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return pd.Wait(ctx)
}

// TestServeConnAfterClose: a transport without a listener closes, and a
// connection handed to it afterwards is closed at once.
func TestServeConnAfterClose(t *testing.T) {
	tp := NewTCPTransport(1, quiet())
	if tp.Addr() != nil {
		t.Fatalf("Addr = %v, want nil", tp.Addr())
	}
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer b.Close()
	tp.ServeConn(a, []byte(raftMagic))
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read from a connection handed to a closed transport: %v, want EOF", err)
	}
}
