package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The offsets workload: registers, one per partition of the topic, kept
// as the committed offsets of a group without members (Topic+"-registers").
// Processes "offsets-<i>" each loop: commit a fresh unique value to a
// random partition (a "simple" OffsetCommit: generation -1, no member id,
// which Kafka accepts for a group with no members) -> OpCommit
// {Offsets: {p: v}}, or fetch the group's offsets -> OpFetchOffsets
// {Offsets: the committed values of the topic's partitions}.
//
// Each operation is one request to the coordinator, never retried (kgo
// retries a group request on NOT_COORDINATOR by itself, and a retry's
// definite error would hide an earlier attempt that may have been
// written): groupClient finds the coordinator with FindCoordinator and
// sends the request to that broker directly.

// OffsetsOptions configures StartOffsets.
type OffsetsOptions struct {
	Clients  int           // processes "offsets-<i>"; 3 when 0
	Interval time.Duration // between a process's operations (jittered); 200ms when 0
}

// groupClient issues single, unretried OffsetCommit and OffsetFetch
// requests of one group to its coordinator.
type groupClient struct {
	cl    *kgo.Client
	adm   *kadm.Client
	group string
	topic string
	parts int32

	mu    sync.Mutex
	coord int32 // the coordinator last found; -1 when unknown
}

// groupRequestVersions caps OffsetCommit and OffsetFetch below v10, which
// names topics by ID.
func groupRequestVersions() *kversion.Versions {
	v := kversion.Tip()
	v.SetMaxKeyVersion(8, 9)
	v.SetMaxKeyVersion(9, 9)
	return v
}

// clientOpts are the options every workload client shares: short
// client-side timeouts, as a SIGSTOPped broker never answers (see
// tools/clustertest/workload_test.go).
func clientOpts(seeds []string, id string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(id),
		kgo.DialTimeout(3 * time.Second),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.RetryTimeout(10 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
}

func newGroupClient(seeds []string, id, group, topic string, parts int32) (*groupClient, error) {
	cl, err := kgo.NewClient(append(clientOpts(seeds, id), kgo.MaxVersions(groupRequestVersions()))...)
	if err != nil {
		return nil, err
	}
	return &groupClient{cl: cl, adm: kadm.NewClient(cl), group: group, topic: topic, parts: parts, coord: -1}, nil
}

func (g *groupClient) close() { g.cl.Close() }

// coordinator returns the group's coordinator's broker, finding it if
// unknown.
func (g *groupClient) coordinator(ctx context.Context) (*kgo.Broker, error) {
	g.mu.Lock()
	id := g.coord
	g.mu.Unlock()
	if id < 0 {
		r, ok := g.adm.FindGroupCoordinators(ctx, g.group)[g.group]
		err := r.Err
		if !ok {
			err = errors.New("no answer")
		}
		if err != nil {
			return nil, fmt.Errorf("find coordinator: %w", err)
		}
		id = r.NodeID
		g.mu.Lock()
		g.coord = id
		g.mu.Unlock()
	}
	return g.cl.Broker(int(id)), nil
}

// forget makes the next request find the coordinator again.
func (g *groupClient) forget() {
	g.mu.Lock()
	g.coord = -1
	g.mu.Unlock()
}

// commitResult is what one OffsetCommit did per partition.
type commitResult struct {
	ok    map[int32]int64 // committed
	fail  map[int32]int64 // certainly not committed
	maybe map[int32]int64 // perhaps committed
	err   error           // the first error, for the record
}

// commit sends one simple OffsetCommit (generation -1, no member id) of
// offsets (partition: offset) of g.topic.
func (g *groupClient) commit(ctx context.Context, offsets map[int32]int64) commitResult {
	res := commitResult{ok: map[int32]int64{}, fail: map[int32]int64{}, maybe: map[int32]int64{}}
	b, err := g.coordinator(ctx)
	if err != nil { // nothing was sent
		res.fail, res.err = maps.Clone(offsets), err
		return res
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = g.group, -1, ""
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = g.topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		g.forget()
		res.maybe, res.err = maps.Clone(offsets), err
		return res
	}
	seen := map[int32]bool{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			o, asked := offsets[rp.Partition]
			if rt.Topic != g.topic || !asked {
				continue
			}
			seen[rp.Partition] = true
			switch {
			case rp.ErrorCode == 0:
				res.ok[rp.Partition] = o
				continue
			case definiteCommitError(rp.ErrorCode):
				res.fail[rp.Partition] = o
			default:
				res.maybe[rp.Partition] = o
			}
			if isCoordinatorError(rp.ErrorCode) {
				g.forget()
			}
			if res.err == nil {
				res.err = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	}
	for p, o := range offsets {
		if !seen[p] { // not answered: a broken response
			res.maybe[p] = o
			if res.err == nil {
				res.err = fmt.Errorf("partition %d missing from the OffsetCommit response", p)
			}
		}
	}
	return res
}

// fetch sends one OffsetFetch of g.topic's partitions; it returns the
// committed offsets (partitions without one absent), and whether an error
// is definite (a broker's error code) rather than a lost request.
func (g *groupClient) fetch(ctx context.Context) (offs map[int32]int64, definite bool, err error) {
	b, err := g.coordinator(ctx)
	if err != nil {
		return nil, true, err
	}
	parts := make([]int32, g.parts)
	for i := range parts {
		parts[i] = int32(i)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = g.group // v0-v7
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: g.topic, Partitions: parts}}
	rg := kmsg.NewOffsetFetchRequestGroup() // v8+
	rg.Group = g.group
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: g.topic, Partitions: parts}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp, err := req.RequestWith(ctx, b)
	if err != nil {
		g.forget()
		return nil, false, err
	}
	offs = map[int32]int64{}
	code := resp.ErrorCode
	add := func(p int32, o int64, pcode int16) {
		if pcode != 0 {
			if code == 0 {
				code = pcode
			}
			return
		}
		if o >= 0 {
			offs[p] = o
		}
	}
	if resp.Version >= 8 {
		if len(resp.Groups) != 1 {
			return nil, false, fmt.Errorf("OffsetFetch: %d groups in the response", len(resp.Groups))
		}
		gr := resp.Groups[0]
		code = gr.ErrorCode
		for _, t := range gr.Topics {
			for _, p := range t.Partitions {
				if t.Topic == g.topic {
					add(p.Partition, p.Offset, p.ErrorCode)
				}
			}
		}
	} else {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic == g.topic {
					add(p.Partition, p.Offset, p.ErrorCode)
				}
			}
		}
	}
	if code != 0 {
		if isCoordinatorError(code) {
			g.forget()
		}
		return nil, true, kerr.ErrorForCode(code)
	}
	return offs, true, nil
}

func isCoordinatorError(code int16) bool {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
		return true
	}
	return false
}

// definiteCommitError reports whether an OffsetCommit partition error
// code certainly means the offset was not written. NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE and REQUEST_TIMED_OUT do not: Kafka answers
// them when appending to __consumer_offsets failed after the append
// started, and so does Sluice (coordinator.writeFailed maps a failed
// Log.Append, which may still commit later, to NOT_COORDINATOR), so
// those stay Info. The codes here are the checks a coordinator makes
// before it writes anything.
func definiteCommitError(code int16) bool {
	switch code {
	case kerr.CoordinatorLoadInProgress.Code,
		kerr.IllegalGeneration.Code,
		kerr.UnknownMemberID.Code,
		kerr.RebalanceInProgress.Code,
		kerr.StaleMemberEpoch.Code,
		kerr.FencedInstanceID.Code,
		kerr.GroupIDNotFound.Code,
		kerr.InvalidGroupID.Code,
		kerr.GroupAuthorizationFailed.Code,
		kerr.TopicAuthorizationFailed.Code,
		kerr.UnknownTopicOrPartition.Code,
		kerr.UnknownTopicID.Code,
		kerr.OffsetMetadataTooLarge.Code,
		kerr.InvalidCommitOffsetSize.Code,
		kerr.UnsupportedVersion.Code,
		kerr.InvalidRequest.Code:
		return true
	}
	return false
}

// invokeCommit records a commit of offsets as invoked.
func invokeCommit(rec *Recorder, base Op, offsets map[int32]int64) int {
	op := base
	op.Kind, op.Offsets = OpCommit, maps.Clone(offsets)
	return rec.Invoke(op)
}

// completeCommit completes the commit id with res. A commit whose
// partitions had different outcomes (which a group-level error never
// gives) is split: id keeps the first of OK, Fail, Info that has
// partitions, and each other outcome becomes an op of its own with the
// same times.
func completeCommit(rec *Recorder, id int, res commitResult) {
	errText := ""
	if res.err != nil {
		errText = res.err.Error()
	}
	first := true
	var done Op
	for _, o := range []struct {
		out  Outcome
		offs map[int32]int64
	}{{OK, res.ok}, {Fail, res.fail}, {Info, res.maybe}} {
		if len(o.offs) == 0 {
			continue
		}
		set := func(op *Op) {
			op.Outcome, op.Offsets = o.out, o.offs
			if o.out != OK {
				op.Err = errText
			}
		}
		if first {
			rec.Complete(id, func(op *Op) { set(op); done = *op })
			first = false
			continue
		}
		op := done
		set(&op)
		rec.Add(op)
	}
}

// invokeFetch records a fetch of group offsets as invoked.
func invokeFetch(rec *Recorder, base Op) int {
	op := base
	op.Kind = OpFetchOffsets
	return rec.Invoke(op)
}

// completeFetch completes the fetch id: OK with offs, Fail on a definite
// error, Info on a lost request.
func completeFetch(rec *Recorder, id int, offs map[int32]int64, definite bool, err error) {
	rec.Complete(id, func(op *Op) {
		op.Outcome, op.Offsets = OK, offs
		if err != nil {
			op.Outcome, op.Offsets, op.Err = Info, nil, err.Error()
			if definite {
				op.Outcome = Fail
			}
		}
	})
}

type offsetsWorkload struct {
	s       *stopper
	clients []*groupClient
}

// StartOffsets starts the offsets workload on cfg.Topic (which must
// exist). ctx bounds only the start; the workload runs until Stop.
func StartOffsets(ctx context.Context, cfg WorkloadConfig, o OffsetsOptions) (Workload, error) {
	if o.Clients <= 0 {
		o.Clients = 3
	}
	if o.Interval <= 0 {
		o.Interval = 200 * time.Millisecond
	}
	if cfg.Partitions <= 0 {
		return nil, errors.New("chaos: offsets workload: no partitions")
	}
	group := cfg.Topic + "-registers"
	w := &offsetsWorkload{s: newStopper()}
	for i := range o.Clients {
		name := fmt.Sprintf("offsets-%d", i)
		g, err := newGroupClient(cfg.Seeds, name, group, cfg.Topic, cfg.Partitions)
		if err != nil {
			w.s.cancel() // the processes started so far
			w.s.wg.Wait()
			w.closeClients()
			return nil, err
		}
		w.clients = append(w.clients, g)
		rnd := cfg.childRand()
		w.s.goFn(func() { w.run(cfg, name, i, o, g, rnd) })
	}
	cfg.logger().Info("chaos: offsets workload started", "topic", cfg.Topic, "group", group, "clients", o.Clients)
	return w, nil
}

func (w *offsetsWorkload) run(cfg WorkloadConfig, name string, i int, o OffsetsOptions, g *groupClient, rnd *rand.Rand) {
	base := Op{Process: name, Topic: cfg.Topic, Group: g.group}
	for seq := int64(1); sleepCtx(w.s.ctx, jitter(rnd, o.Interval)); seq++ {
		ctx, cancel := context.WithTimeout(w.s.ctx, 5*time.Second)
		if rnd.IntN(2) == 0 {
			// Unique across processes: seq*Clients + i.
			offs := map[int32]int64{rnd.Int32N(cfg.Partitions): seq*int64(o.Clients) + int64(i)}
			id := invokeCommit(cfg.Rec, base, offs)
			completeCommit(cfg.Rec, id, g.commit(ctx, offs))
		} else {
			id := invokeFetch(cfg.Rec, base)
			offs, definite, err := g.fetch(ctx)
			completeFetch(cfg.Rec, id, offs, definite, err)
		}
		cancel()
	}
}

func (w *offsetsWorkload) closeClients() {
	for _, g := range w.clients {
		g.close()
	}
}

// Stop stops the processes; an operation in flight is cancelled (and
// recorded Info).
func (w *offsetsWorkload) Stop(ctx context.Context) error {
	w.s.cancel()
	err := waitGroupCtx(ctx, &w.s.wg)
	w.closeClients()
	return err
}
