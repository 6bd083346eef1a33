package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests from one broker to another (not to the controller): a preferred
// leader election asks the current leader to hand over (ElectLeaders, with
// the "sluice-broker-" client id). One franz-go client per peer, seeded
// with the peer's address (peerAddr) and talking to that broker only; a
// peer whose address changed gets a new client.
type peerClients struct {
	c   *cluster
	mu  sync.Mutex
	cls map[int32]peerClient
}

type peerClient struct {
	addr string
	cl   *kgo.Client
}

func newPeerClients(c *cluster) *peerClients {
	return &peerClients{c: c, cls: map[int32]peerClient{}}
}

// request sends req to broker id and returns its response; errors are
// the broker being unknown or unreachable.
func (pc *peerClients) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	br, ok := pc.c.b.meta.Broker(id)
	if !ok {
		return nil, fmt.Errorf("server: broker %d is not registered", id)
	}
	addr, ok := pc.c.peerAddr(br)
	if !ok {
		return nil, fmt.Errorf("server: broker %d has no %s listener", id, pc.c.b.cfg.InterBrokerListenerName)
	}
	pc.mu.Lock()
	p, ok := pc.cls[id]
	if !ok || p.addr != addr {
		if ok {
			p.cl.Close()
		}
		cl, err := kgo.NewClient(pc.c.clientOpts(addr)...)
		if err != nil {
			pc.mu.Unlock()
			return nil, err
		}
		p = peerClient{addr: addr, cl: cl}
		pc.cls[id] = p
	}
	pc.mu.Unlock()
	seeds := p.cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("server: no connection to broker %d", id)
	}
	return seeds[0].Request(ctx, req)
}

func (pc *peerClients) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for id, p := range pc.cls {
		p.cl.Close()
		delete(pc.cls, id)
	}
}
