package server

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests with valid headers and random bodies, for every API and
// version served: the broker answers or closes the connection, and keeps
// serving (a panic would take the test binary down).
func TestRandomRequestBodies(t *testing.T) {
	t.Parallel()
	b, addr := startBroker(t, "")
	if _, err := b.createTopic("fuzz", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for _, h := range sortedHandlers() {
		for v := h.minVersion; v <= h.maxVersion; v++ {
			for i := 0; i < 4; i++ {
				body := make([]byte, rng.IntN(120))
				for j := range body {
					body[j] = byte(rng.Uint32())
				}
				// Sometimes start from a real, empty request of that
				// version so decoding gets further before the junk.
				if i%2 == 0 {
					req := kmsg.RequestForKey(h.key)
					req.SetVersion(v)
					body = append(req.AppendTo(nil), body[:len(body)/4]...)
				}
				hdr := binary.BigEndian.AppendUint16(nil, uint16(h.key))
				hdr = binary.BigEndian.AppendUint16(hdr, uint16(v))
				hdr = binary.BigEndian.AppendUint32(hdr, uint32(i))
				hdr = binary.BigEndian.AppendUint16(hdr, 0xffff) // null client id
				req := kmsg.RequestForKey(h.key)
				req.SetVersion(v)
				if req.IsFlexible() {
					hdr = append(hdr, 0)
				}
				frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
				frame = append(append(frame, hdr...), body...)
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatalf("broker down after key %d v%d: %v", h.key, v, err)
				}
				c.Write(frame)
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				buf := make([]byte, 4096)
				c.Read(buf)
				c.Close()
			}
		}
	}
	if n := handlerPanics.Load(); n > 0 {
		t.Fatalf("%d requests made a handler panic (see the broker log)", n)
	}
}
