package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/meta"
)

// fakeHost is the broker's side, set by the test.
type fakeHost struct {
	mu       sync.Mutex
	term     int32
	active   bool
	voters   []int32
	learners []int32 // AddLearner calls
	down     []int32
	leaders  map[string]int32   // "topic-p" -> leader; missing: the preferred replica
	isrs     map[string][]int32 // "topic-p" -> ISR; missing: the replica list
	elected  [][]Election       // ElectPreferred calls
}

func (h *fakeHost) Term() (int32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.term, h.active
}

func (h *fakeHost) IsVoter(id int32) bool { return slices.Contains(h.voters, id) }

func (h *fakeHost) AddLearner(id int32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.learners = append(h.learners, id)
	return nil
}

func (h *fakeHost) PeersDown() []int32 { return h.down }

func (h *fakeHost) Partition(t meta.Topic, p int32) (int32, []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := fmt.Sprintf("%s-%d", t.Name, p)
	leader, ok := h.leaders[key]
	if !ok {
		leader = t.Assignments[p][0]
	}
	isr, ok := h.isrs[key]
	if !ok {
		isr = t.Assignments[p]
	}
	return leader, isr
}

func (h *fakeHost) ElectPreferred(_ context.Context, parts []Election) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.elected = append(h.elected, parts)
	return len(parts)
}

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is a controller over a metadata store on an in-memory file system,
// with a fake host and a manual clock.
type env struct {
	t     *testing.T
	st    *meta.Store
	host  *fakeHost
	clock *clock
	ctl   *Controller
	epoch map[int32]int64
}

const testSession = 9 * time.Second

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := meta.Open("meta", meta.Options{FS: vfs.NewMem(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = testSession
	}
	e := &env{t: t, st: st, host: &fakeHost{term: 1, active: true, voters: []int32{1}},
		clock: &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, epoch: map[int32]int64{}}
	e.ctl = New(Options{Store: st, Host: e.host, Config: cfg, Now: e.clock.Now, Logger: logger})
	return e
}

// register registers broker id and heartbeats it caught up (unfenced).
func (e *env) register(id int32) {
	e.t.Helper()
	epoch, err := e.ctl.Register(meta.BrokerRegistered{NodeID: id, IncarnationID: [16]byte{0: byte(id), 1: 1},
		Listeners: []meta.Endpoint{{Name: "PLAINTEXT", Host: "broker.example", Port: 9092 + id}}})
	if err != nil {
		e.t.Fatalf("Register %d: %v", id, err)
	}
	e.epoch[id] = epoch
	e.beat(id)
}

// beat heartbeats broker id, caught up.
func (e *env) beat(id int32) HeartbeatReply {
	e.t.Helper()
	r, err := e.ctl.Heartbeat(Heartbeat{Broker: id, Epoch: e.epoch[id], MetadataOffset: e.epoch[id]})
	if err != nil {
		e.t.Fatalf("Heartbeat %d: %v", id, err)
	}
	return r
}

// fenced reports broker id's fencing; unknown brokers are "gone".
func (e *env) fenced(id int32) string {
	br, ok := e.st.Broker(id)
	switch {
	case !ok:
		return "gone"
	case br.Fenced:
		return "fenced"
	}
	return "unfenced"
}

func (e *env) check() {
	e.ctl.Check(context.Background())
	e.ctl.Wait()
}

// topic creates a topic with these assignments.
func (e *env) topic(name string, assignments ...[]int32) meta.Topic {
	e.t.Helper()
	ts, errs, err := e.st.CreateTopics([]meta.TopicSpec{{Name: name, Assignments: assignments}})
	if err != nil || errs[0] != nil {
		e.t.Fatal(err, errs)
	}
	return ts[0]
}

// report is leader's AlterPartition for partition p of t with isr.
func (e *env) report(name string, p int32, leader int32, isr ...int32) {
	e.t.Helper()
	t, _ := e.st.Topic(name)
	epoch := t.Moves[p].Epoch // zero: never moved
	errs, err := e.ctl.AlterPartition(leader, e.epoch[leader], []meta.PartitionChanged{{TopicID: t.ID, Partition: p, Leader: leader, LeaderEpoch: 1, ISR: isr}}, []int32{epoch})
	if err != nil || errs[0] != nil {
		e.t.Fatal(err, errs)
	}
}

func (e *env) replicas(name string, p int32) []int32 {
	t, _ := e.st.Topic(name)
	return t.Assignments[p]
}
