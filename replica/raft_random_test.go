package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicemq/sluice/segment/batch"
)

// TestRaftRandomized runs a replicated partition through many seeded runs
// of idempotent acks=all producers and readers while a nemesis crashes
// any minority of nodes (the crashable FS drops unsynced data and tears
// tails), partitions them, moves leadership and drops, duplicates,
// delays and reorders messages; then heals everything and checks:
//   - every replica holds the same records at the same offsets, contiguous
//     from 0, and serves no internal batch;
//   - every acknowledged value is there, at the offset it was acknowledged
//     with, and no value is there twice (idempotence across failover and
//     retries of unknown outcomes);
//   - no replica's high watermark moved back while it ran;
//   - the append/read history is linearizable (porcupine) for a log whose
//     reads may be stale but never show a value not yet appended, out of
//     order or at another offset (Kafka's contract: a new leader's high
//     watermark may lag its predecessor's for a moment).
//
// The seed of a failing run is in its name: go test -run
// 'TestRaftRandomized/seed=7'.
func TestRaftRandomized(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 4
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runRandomized(t, uint64(seed)) })
	}
}

type randRun struct {
	t   *testing.T
	c   *pcluster
	rng *rand.Rand
	mu  sync.RWMutex // c's nodes: Lock to crash or start, RLock to use

	start time.Time
	hist  *history
	hmu   sync.Mutex // pick

	actions map[string]int // nemesis actions taken
	pick    *rand.Rand     // hmu: which claimed leader a producer tries

	hwMu  sync.Mutex
	hw    map[*Partition]int64 // the last high watermark seen of each open replica
	hwBad []string
}

type appendIn struct{ value string }
type readOut struct{ log string } // the values read, each followed by ","

func (r *randRun) now() int64 { return int64(time.Since(r.start)) }

// part returns node id's replica, or nil while the node is down.
func (r *randRun) part(id uint64) *Partition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := r.c.nodes[id]
	if n.host == nil {
		return nil
	}
	return n.parts[r.c.groups[0]]
}

// leaderPart returns a replica that believes it leads (a random one when
// a cut-off leader has not noticed yet), or nil.
func (r *randRun) leaderPart() *Partition {
	var leaders []*Partition
	for _, id := range r.c.voters {
		if p := r.part(id); p != nil && p.IsLeader() {
			leaders = append(leaders, p)
		}
	}
	if len(leaders) == 0 {
		return nil
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return leaders[r.pick.IntN(len(leaders))]
}

func runRandomized(t *testing.T, seed uint64) {
	nodes := 3
	if seed%4 == 0 {
		nodes = 5
	}
	c := newPCluster(t, nodes, 1, seed)
	c.startAll()
	r := &randRun{t: t, c: c, actions: map[string]int{}, pick: rand.New(rand.NewPCG(seed, 3)), rng: rand.New(rand.NewPCG(seed, 99)), start: time.Now(), hist: newHistory(), hw: map[*Partition]int64{}}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	// Time: every live host ticks every millisecond.
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			r.mu.RLock()
			c.tick()
			r.mu.RUnlock()
			r.sampleHW()
		}
	}()
	const clients = 3
	var work sync.WaitGroup
	produceUntil := make(chan struct{})
	for cl := range clients {
		work.Add(1)
		go func() {
			defer work.Done()
			r.producer(cl, produceUntil)
		}()
	}
	work.Add(1)
	readersDone := make(chan struct{})
	go func() {
		defer work.Done()
		r.reader(clients, readersDone)
	}()
	// The nemesis, from the run's seed.
	nem := rand.New(rand.NewPCG(seed, 7))
	c.net.setFaults(0.03, 0.03, 0.1)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(20+nem.IntN(40)) * time.Millisecond)
		r.nemesis(nem)
	}
	close(produceUntil)
	// Heal everything and let the producers finish.
	c.net.setFaults(0, 0, 0)
	c.net.heal()
	r.mu.Lock()
	for _, id := range c.voters {
		if c.nodes[id].host == nil {
			c.start(id)
		}
	}
	r.mu.Unlock()
	producersDone := make(chan struct{})
	go func() {
		work.Wait()
		close(producersDone)
	}()
	close(readersDone)
	select {
	case <-producersDone:
	case <-time.After(60 * time.Second):
		t.Fatal("the producers did not finish within 60 s of healing")
	}
	close(stop)
	bg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	c.settle()
	r.check()
}

// nemesis takes one fault action (or undoes one).
func (r *randRun) nemesis(rng *rand.Rand) {
	c := r.c
	down := 0
	for _, id := range c.voters {
		if c.nodes[id].host == nil {
			down++
		}
	}
	minority := (len(c.voters) - 1) / 2
	id := c.voters[rng.IntN(len(c.voters))]
	switch a := rng.IntN(10); {
	case a < 3 && down < minority: // crash
		r.mu.Lock()
		if c.nodes[id].host != nil {
			r.forgetHW(c.nodes[id])
			c.crash(id, int64(rng.Uint64()))
			r.actions["crash"]++
		}
		r.mu.Unlock()
	case a < 6: // restart one that is down
		r.mu.Lock()
		for _, id := range c.voters {
			if c.nodes[id].host == nil {
				c.start(id)
				r.actions["restart"]++
				break
			}
		}
		r.mu.Unlock()
	case a < 7: // cut one node off, the leader half of the time
		if p := r.leaderPart(); p != nil && rng.IntN(2) == 0 {
			id = p.rs.self
		}
		var rest []uint64
		for _, o := range c.voters {
			if o != id {
				rest = append(rest, o)
			}
		}
		c.net.partition([]uint64{id}, rest)
		r.actions["partition"]++
	case a < 9:
		c.net.heal()
	default: // move leadership
		if p := r.leaderPart(); p != nil {
			p.rs.host.TransferLeadership(p.rs.id, id)
			r.actions["transfer"]++
		}
	}
}

// producer is one idempotent producer: one batch of one record in flight,
// each retried with its sequence until acknowledged.
func (r *randRun) producer(client int, until <-chan struct{}) {
	pid := int64(1000 + client)
	for i := 0; ; i++ {
		select {
		case <-until:
			return
		default:
		}
		v := fmt.Sprintf("c%d-%d", client, i)
		call := r.now()
		var off int64 = -1
		// Retried until acknowledged (after the heal every attempt can
		// succeed); an attempt whose outcome is unknown is retried with
		// the same sequence, which the leader dedupes if it was written.
		for off < 0 {
			p := r.leaderPart()
			if p == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			pd, err := p.ProduceWith(idempotentBatch(pid, 0, int32(i), v), ProduceOptions{Acks: AcksAll})
			if err != nil {
				if errors.Is(err, ErrInvalidProducerEpoch) {
					r.t.Errorf("client %d value %s on node %d: %v", client, v, p.rs.self, err)
					return
				}
				// OUT_OF_ORDER_SEQUENCE_NUMBER comes from a cut-off
				// leader that has not noticed yet (its log lacks the
				// producer's newest batches), as it would from a Kafka
				// zombie leader: another leader is tried. A real gap on
				// the true leader would keep the producer from finishing
				// (the run fails then).
				time.Sleep(2 * time.Millisecond)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			res, err := pd.Wait(ctx)
			cancel()
			if err == nil {
				off = res.BaseOffset
			}
		}
		time.Sleep(time.Millisecond) // pace: a few hundred values per run
		r.hist.appended(client, v, call, r.now(), off)
		if off < 0 {
			// Given up: the next sequence would be out of order.
			return
		}
	}
}

// reader reads the whole log from a random live replica until done.
func (r *randRun) reader(client int, done <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(client), 5))
	for {
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		p := r.part(r.c.voters[rng.IntN(len(r.c.voters))])
		if p == nil {
			continue
		}
		call := r.now()
		vals, err := readAll(p)
		if err != nil {
			continue // closed by a crash meanwhile
		}
		r.hist.read(client, call, r.now(), vals)
	}
}

func sep(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	return ","
}

// readAll is records without the test failure: the values below the high
// watermark.
func readAll(p *Partition) ([]string, error) {
	var out []string
	hw := p.HighWatermark()
	next := p.LogStartOffset()
	for next < hw {
		data, res, err := p.ReadBytes(nil, next, 1<<20)
		res.Release()
		if err != nil {
			return nil, err
		}
		if len(data) == 0 {
			return nil, fmt.Errorf("empty read at %d below %d", next, hw)
		}
		n, vals, err := decodeValues(data)
		if err != nil {
			return nil, err
		}
		if n.first != next {
			return nil, fmt.Errorf("read at %d returned offset %d", next, n.first)
		}
		out = append(out, vals...)
		next = n.next
	}
	return out, nil
}

// sampleHW notes each open replica's high watermark, recording any that
// moved back.
func (r *randRun) sampleHW() {
	r.mu.RLock()
	var parts []*Partition
	for _, n := range r.c.up() {
		parts = append(parts, n.parts[r.c.groups[0]])
	}
	r.mu.RUnlock()
	r.hwMu.Lock()
	defer r.hwMu.Unlock()
	for _, p := range parts {
		hw := p.HighWatermark()
		if last, ok := r.hw[p]; ok && hw < last {
			r.hwBad = append(r.hwBad, fmt.Sprintf("a replica's high watermark moved back from %d to %d", last, hw))
		}
		r.hw[p] = hw
	}
}

func (r *randRun) forgetHW(n *pnode) {
	r.hwMu.Lock()
	defer r.hwMu.Unlock()
	for _, p := range n.parts {
		delete(r.hw, p)
	}
}

// check runs the invariants on the healed cluster (see TestRaftRandomized).
func (r *randRun) check() {
	t, c := r.t, r.c
	var replicas [][]string
	for _, n := range c.up() {
		replicas = append(replicas, records(t, n.parts[c.groups[0]]))
	}
	r.hwMu.Lock()
	for _, b := range r.hwBad {
		t.Error(b)
	}
	r.hwMu.Unlock()
	final, acked, unknown, ops := r.hist.check(t, "", replicas, r.now())
	t.Logf("%d records, %d acknowledged, %d outcomes unknown, %d operations checked, %d messages sent; nemesis %v", len(final), acked, unknown, ops, c.net.sentCount(), r.actions)
}

// history is one partition's appends and reads, for the checks.
type history struct {
	mu      sync.Mutex
	ops     []porcupine.Operation
	acked   map[string]int64      // value: acknowledged offset
	unknown []porcupine.Operation // appends whose outcome the producer never learned
}

func newHistory() *history { return &history{acked: map[string]int64{}} }

// appended records an append of v called at call that returned at ret
// with offset off, or off < 0: its outcome unknown.
func (h *history) appended(client int, v string, call, ret, off int64) {
	op := porcupine.Operation{ClientId: client, Input: appendIn{v}, Call: call, Return: ret}
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < 0 {
		h.unknown = append(h.unknown, op)
		return
	}
	op.Output = off
	h.acked[v] = off
	h.ops = append(h.ops, op)
}

// read records a read of the whole log that returned vals.
func (h *history) read(client int, call, ret int64, vals []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Call: call, Output: readOut{strings.Join(vals, ",") + sep(vals)}, Return: ret})
}

// check runs the invariants of TestRaftRandomized on the replicas' final
// records (what prefixes its errors): every replica holds the same
// records, no value twice, every acknowledged value at its offset, no
// read that is not a prefix of the final log, a linearizable history.
// Appends whose outcome was unknown happened iff their value is in the
// final log (at some time before end). It returns the final log and the
// counts of acknowledged and unknown appends and of operations checked.
func (h *history) check(t *testing.T, what string, replicas [][]string, end int64) (final []string, acked, unknown, checked int) {
	t.Helper()
	for i, got := range replicas {
		if i == 0 {
			final = got
		} else if !slices.Equal(got, final) {
			t.Fatalf("%sreplica %d holds %v, replica 0 %v", what, i, got, final)
		}
	}
	at := map[string]int64{}
	for i, v := range final {
		if _, dup := at[v]; dup {
			t.Errorf("%svalue %s is in the log twice (offsets %d and %d)", what, v, at[v], i)
		}
		at[v] = int64(i)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for v, off := range h.acked {
		if got, ok := at[v]; !ok {
			t.Errorf("%sacknowledged value %s (offset %d) was lost", what, v, off)
		} else if got != off {
			t.Errorf("%sacknowledged value %s at offset %d is at %d", what, v, off, got)
		}
	}
	ops := slices.Clone(h.ops)
	for _, op := range h.unknown {
		if off, ok := at[op.Input.(appendIn).value]; ok {
			op.Output, op.Return = off, end
			ops = append(ops, op)
		}
	}
	// No read showed a record the final log does not hold there (a
	// record served above the high watermark that a new leader then
	// replaced).
	whole := strings.Join(final, ",") + sep(final)
	for _, op := range ops {
		if out, ok := op.Output.(readOut); ok && !strings.HasPrefix(whole, out.log) {
			t.Errorf("%sa read returned %q, which is not a prefix of the final log", what, shorten(out.log))
			break
		}
	}
	if res, _ := porcupine.CheckOperationsVerbose(logModel, ops, 30*time.Second); res != porcupine.Ok {
		t.Errorf("%sthe history of %d operations is not linearizable (%s)", what, len(ops), res)
	}
	return final, len(h.acked), len(h.unknown), len(ops)
}

// logModel is an append-only log: an append of a value returns its
// offset, the number of values before it; a read returns a prefix of the
// log (possibly stale: see TestRaftRandomized). State: the values, each
// followed by ",", and their count.
var logModel = porcupine.Model{
	Init: func() any { return logState{} },
	Step: func(state, input, output any) (bool, any) {
		s := state.(logState)
		switch in := input.(type) {
		case appendIn:
			if output.(int64) != int64(s.n) {
				return false, s
			}
			return true, logState{log: s.log + in.value + ",", n: s.n + 1}
		default:
			return strings.HasPrefix(s.log, output.(readOut).log), s
		}
	},
	DescribeOperation: func(input, output any) string {
		if in, ok := input.(appendIn); ok {
			return fmt.Sprintf("append(%s) -> %v", in.value, output)
		}
		return fmt.Sprintf("read() -> %s", output.(readOut).log)
	},
}

type logState struct {
	log string
	n   int
}

// span is the offsets a read returned: [first, next).
type span struct{ first, next int64 }

// decodeValues returns the offsets and record values of the batches in
// data.
func decodeValues(data []byte) (span, []string, error) {
	sp := span{first: -1}
	var vals []string
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil {
			return sp, nil, err
		}
		if h.Control() {
			return sp, nil, fmt.Errorf("a control or internal batch at offset %d was served", h.BaseOffset)
		}
		if sp.first < 0 {
			sp.first = h.BaseOffset
		} else if h.BaseOffset != sp.next {
			return sp, nil, fmt.Errorf("batch at %d after %d", h.BaseOffset, sp.next)
		}
		if _, err := batch.Iterate(data[:h.Size()], func(r *batch.Record) error {
			vals = append(vals, string(r.Value))
			return nil
		}); err != nil {
			return sp, nil, err
		}
		sp.next = h.NextOffset()
		data = data[h.Size():]
	}
	return sp, vals, nil
}

func shorten(s string) string {
	if len(s) > 200 {
		return "..." + s[len(s)-200:]
	}
	return s
}
