package replica

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// The partition on raft: a Partition opened with Options.Raft is one
// replica of an etcd raft group whose raft log is its segment log (see
// DESIGN.md, "Replication", and raft_log.go for the mapping of entries to
// batches).
//
// Produce (leader only, no proposal forwarding) validates the batch,
// checks it against the idempotent producers' state including the
// leader's proposals not yet written (inflight), and proposes it. The
// proposal is found again in the Ready that writes it (by the id its
// entry carries in the batch's baseOffset field: proposal.id) and
// tracked by (index, term) from then on:
//
//   - acks=1 completes once the leader's own append is durable (the
//     group's Sync after the write);
//   - acks=all completes when its index commits with its term and at
//     least min.insync.replicas replicas of the ISR hold it (raft_acks.go);
//     an index that commits with another term (a new leader replaced the
//     entry) fails it with NotLeaderError, never a silent success.
//
// Every replica records producer state and leader epochs as it writes
// entries (followers rebuild the same state the leader had), and moves
// the high watermark to the Kafka offset after the last committed entry
// as it applies: Fetch never serves beyond it.
//
// Goroutines: the raft host's worker calls the storage (raft_log.go),
// Apply and LeaderChanged, one call at a time per group; proposals run in
// that worker too (Host.post). Fields marked "worker" belong to it. Locks:
// appendMu (producer state, inflight), then mu (leader, epochs, high
// watermark).

// RaftConfig makes a Partition one replica of a raft group
// (Options.Raft).
type RaftConfig struct {
	Host  *Host
	Group GroupID
	// State is the group's durable state as the host's HardStateStore
	// loaded it: the zero value for a replica that never ran.
	State GroupState
	// Voters and Learners are the configuration a replica without State
	// starts from. For a new group: its first replicas (the synthetic
	// initial ConfState). For a replica joining an existing group (before
	// or after the leader's AddLearner): Voters = the group's INITIAL
	// voters (its first replicas, whatever changed since) and Learners =
	// itself. It then replays every configuration change from index 1,
	// exactly as the others applied them (its view is the group's plus
	// itself as a learner until the log first names it, then the
	// group's), or gets a snapshot whose ConfState replaces its own. A
	// joiner that was itself one of the first replicas (the partition
	// comes back to a broker that lost its data) starts as a learner
	// (Open drops it from Voters); that replay fails only when the group
	// had it as its only voter at some point before its first removal
	// (created with one replica, or shrunk to it): no voter would remain
	// in its view. Open refuses it when its initial voters were itself
	// alone; otherwise the group leaves the host with an error when the
	// replay gets there (the broker goes on). Such a joiner must start
	// from the group's current configuration (Membership on the leader:
	// Voters = its voters, Learners = itself) with the leader's log
	// compacted (FirstIndex > 1, so it gets a snapshot). A replica that
	// lost its log must be removed from the configuration before it
	// joins again (the leader would send it a commit index above its
	// empty log, on which etcd raft panics). A State with a ConfState
	// overrides both.
	Voters, Learners []uint64
	// Joining marks a replica joining a group that already ran (a
	// reassignment adds it, or it is being added again): it starts from
	// the group's first voters exactly (Voters; Learners empty: the
	// configuration need not name it, since the log's own changes add
	// it) and replays the log, configuration changes included, exactly as
	// the group went through them. Until it has applied what its leader
	// had committed when it first heard from it, its configuration is an
	// old one; meanwhile it neither ticks nor campaigns (raft_join.go), so
	// an old configuration in which it was a voter, even the only one,
	// never elects it. A leadership transfer to it still works (its leader
	// asks only a caught-up voter). Default false.
	Joining bool
	// MinTerm, for a Joining replica without a saved State, is the
	// newest leader epoch its broker knows for the partition (the
	// metadata's): the replica starts at that raft term instead of 0.
	// A replica added again after its removal lost the term it had
	// reached, and raft counts on a voter never going back in term: at
	// term 0 it would take appends from a deposed leader still in an
	// older term, whose configuration may count it as a voter, and so
	// help that leader commit over entries the group had committed (the
	// chaos runner's no-leader-after-heal; raft_join.go). Starting at a
	// term the group reached since is always safe: it only refuses older
	// leaders. Ignored with a saved State (its term is durable). Default
	// 0.
	MinTerm uint64
	// Preferred marks this replica as the one that should lead the group
	// first: the owner's choice (the broker picks a new partition's first
	// live replica in its assignment, as Kafka's controller makes it the
	// leader at creation). When the group is new here (no saved State,
	// an empty log, not Joining) the replica campaigns as soon as it
	// joins the host, and again every few ticks while it knows of no
	// leader (its peers may not have opened the group yet), so it leads
	// after an election round trip instead of raft's election timeout
	// (Host's GroupConfig.CampaignIfNew has the rule). A campaign only
	// asks for votes: raft's election rules still decide, so a wrong
	// choice (two replicas that both think they are preferred) costs at
	// most an election. Ignored for a group that is not new (a restart,
	// a reopened replica). Default false: the replica waits for raft's
	// election timeout like every other.
	Preferred bool
	// ReplicaLagTime is Kafka's replica.lag.time.max.ms (default 30 s): a
	// follower is in the ISR while it caught up with the leader's log end
	// within it.
	ReplicaLagTime time.Duration
	// Snapshots fetches a compacted topic's snapshot files from the
	// leader (raft_snapfiles.go); nil: such a snapshot is dropped, so a
	// follower behind the leader's cleaned segments cannot catch up.
	Snapshots SnapshotFetcher
	// SnapshotState, for a delete topic whose records feed a state
	// machine kept outside the log (the metadata log), carries that
	// machine's state in the raft snapshots (raft_snapshot.go), so a
	// follower behind the leader's log start catches up, and holds
	// retention at what that machine has not applied. Nil (the default):
	// snapshots carry the log's metadata only. A compacted topic's
	// snapshots never carry the state.
	SnapshotState SnapshotState
	// OnLeaderChange, when set, is called whenever this replica's view of
	// the group's leader or term changes: lead is the leader's replica id
	// (this replica's own when it became the leader), 0 when it knows of
	// no leader (an election, its storage failed: then term is not a
	// leader epoch), and term the leader's term (the partition's leader
	// epoch). It runs in the raft host's worker after the partition's own
	// leadership state moved, so IsLeader, Leader and LeaderEpoch already
	// answer the new view; calls for one partition come one at a time, in
	// order. It must not block (the worker drives every group of its
	// batch) and must not call the partition's or the host's blocking
	// methods (Produce's Wait, DeleteRecords, TransferLeadershipAway,
	// Close): hand the change to a goroutine of the caller's. It is not
	// called by Close. Default nil.
	OnLeaderChange func(lead uint64, term uint64)
}

// DefaultReplicaLagTime is Kafka's replica.lag.time.max.ms default.
const DefaultReplicaLagTime = 30 * time.Second

// isrRefresh is how long a computed ISR is reused by produce requests'
// min.insync.replicas check before the leader's raft progress is read
// again.
const isrRefresh = 100 * time.Millisecond

// Errors of a replicated partition, mapped by the server to Kafka codes.
var (
	// ErrNotLeader is NOT_LEADER_OR_FOLLOWER: the replica is not the
	// partition's leader, or a proposal's entry was replaced by another
	// leader's. Retriable; NotLeaderError carries the KIP-951 hint.
	ErrNotLeader = errors.New("replica: not the leader of the partition")
	// ErrLeaderNotAvailable: the group has no leader now (an election is
	// under way). Clients of a partition's data get NOT_LEADER_OR_FOLLOWER
	// for it, as from any replica that does not lead (Kafka's); Metadata
	// says LEADER_NOT_AVAILABLE.
	ErrLeaderNotAvailable = errors.New("replica: the partition has no leader")
	// ErrNotEnoughReplicas is NOT_ENOUGH_REPLICAS: acks=all with fewer
	// in-sync replicas (the leader counted) than min.insync.replicas;
	// nothing was appended.
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend is NOT_ENOUGH_REPLICAS_AFTER_APPEND:
	// an acks=all batch was appended and committed, but the ISR shrank
	// below min.insync.replicas before enough of its members held it
	// (raft_acks.go). The batch is in the log; a retry may duplicate it
	// (an idempotent producer's retry is answered with its offsets).
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after the append")
	// ErrNotAReplica: Open of a raft partition whose group configuration
	// (RaftConfig.State's ConfState, else Voters and Learners) does not
	// name the host's NodeID.
	ErrNotAReplica = errors.New("replica: the broker is not a replica of the raft group")
)

// NotLeaderError wraps ErrNotLeader (or ErrLeaderNotAvailable when Leader
// is 0 and NoLease is not set) with the leader this replica knows, for KIP-951's current-leader
// hint: Leader 0 when there is none.
type NotLeaderError struct {
	Leader uint64
	Epoch  int32
	Reason string
	// NoLease marks a leader that refuses a read for want of a read
	// lease (raft_lease.go): ErrNotLeader, with no leader to name.
	NoLease bool
}

func (e *NotLeaderError) Error() string {
	if e.NoLease {
		return fmt.Sprintf("%v: %s", ErrNotLeader, e.Reason)
	}
	if e.Leader == 0 {
		return fmt.Sprintf("%v: %s", ErrLeaderNotAvailable, e.Reason)
	}
	return fmt.Sprintf("%v: %s (the leader is replica %d, leader epoch %d)", ErrNotLeader, e.Reason, e.Leader, e.Epoch)
}

// Unwrap returns ErrNotLeader, or ErrLeaderNotAvailable without a leader.
func (e *NotLeaderError) Unwrap() error {
	if e.Leader == 0 && !e.NoLease {
		return ErrLeaderNotAvailable
	}
	return ErrNotLeader
}

// Acks are a produce request's acks (Kafka's): AcksAll waits for commit,
// AcksLeader for the leader's durable append, AcksNone for nothing.
const (
	AcksAll    int16 = -1
	AcksNone   int16 = 0
	AcksLeader int16 = 1
)

// proposal is one batch the leader proposed.
type proposal struct {
	// id is the proposal's own (raftState.nextID), carried in its
	// entry's data as the batch's baseOffset field (outside the CRC; each
	// replica stamps the real base offset as it writes the entry): the
	// worker matches the entries it writes to the leader's proposals by
	// it, never by the data's identity.
	id int64
	// propTerm is the raft term the proposal was taken in: its entry
	// carries it. An entry matches only with its id and this term, so an
	// entry another leader wrote (whose own counter may have reached the
	// same id) is never taken for this one, even in the Ready that
	// replaced the proposal before raft handed it out.
	propTerm uint64
	data     []byte
	h        batch.Header
	acks     int16
	pd       *Pending
	// del marks a DeleteRecords entry (raft_deleterecords.go): no
	// producer state; it completes once applied, with the log start
	// offset as its result's BaseOffset.
	del bool
	// index, term and the offsets, set by the worker when the entry is
	// written.
	index, term uint64
	res         segment.AppendResult
	// proposed is when it was proposed, only when the host has a
	// Committed callback (HostMetrics).
	proposed time.Time
	// refused is set by the worker when the entry, written, changed
	// nothing (a marker fenced by the one before it in the log: txn.go's
	// applyBatch): the proposal completes with it once committed.
	refused error
}

// raftState is the replicated part of a Partition.
type raftState struct {
	host     *Host
	id       GroupID
	self     uint64
	lagTime  time.Duration
	storage  *logStorage
	onLeader func(lead, term uint64) // RaftConfig.OnLeaderChange
	state    SnapshotState           // RaftConfig.SnapshotState

	// worker: proposals not yet seen in a written Ready, in proposal
	// order; written ones waiting for their commit, in index order; acks=1
	// ones waiting for the next Sync.
	proposed   []*proposal
	nextID     atomic.Int64 // the last proposal id given
	committing []*proposal
	unsynced   []*proposal
	// worker: acks=all proposals committed with their term, waiting for
	// min.insync.replicas in-sync replicas to hold them (raft_acks.go), in
	// index order.
	replicating []*proposal

	// appendMu: the leader's proposals not yet written, per producer id,
	// in sequence order (the idempotence check sees them); the producers
	// one of whose proposals raft dropped (their later ones fail too,
	// until the producer starts again from what is written).
	inflight map[int64][]*proposal
	broken   map[int64]bool

	// pmu (a leaf): every proposal not completed yet, so Close can fail
	// those a removed group will never complete.
	pmu     sync.Mutex
	pending map[*proposal]struct{}

	// mu: the leader as raft last reported it (0: none) and its term.
	leader uint64
	term   uint64
	// mu: the ISR last computed and when.
	isr   []uint64
	isrAt time.Time

	snap snapState // raft_snapfiles.go
	// worker: the confIndex of the snapshot last applied
	// (raft_snapshot.go), for the host.
	snapConfIndex uint64
}

// Leader returns the partition's leader as this replica knows it (0 and
// ok=false while there is none) and its leader epoch (the leader's raft
// term).
func (p *Partition) Leader() (id uint64, epoch int32, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rs.leader, p.leaderEpoch, p.rs.leader != 0
}

// IsLeader reports whether this replica is the partition's leader.
func (p *Partition) IsLeader() bool {
	lead, _, _ := p.Leader()
	return lead == p.rs.self
}

// notLeader returns the error for a request a non-leader cannot serve.
func (p *Partition) notLeader(reason string) error {
	lead, epoch, _ := p.Leader()
	return &NotLeaderError{Leader: lead, Epoch: epoch, Reason: reason}
}

// ISR returns the in-sync replicas (the leader first): the replicas whose
// raft progress reached the leader's durable log end within
// replica.lag.time.max.ms, as the leader sees it. A follower returns nil.
func (p *Partition) ISR() []uint64 {
	isr, _ := p.rs.inSync(p, time.Now(), true)
	return isr
}

// inSync returns the ISR, reusing one computed less than isrRefresh ago
// unless fresh is set.
func (rs *raftState) inSync(p *Partition, now time.Time, fresh bool) ([]uint64, error) {
	p.mu.Lock()
	if !fresh && rs.leader == rs.self && now.Sub(rs.isrAt) < isrRefresh {
		isr := rs.isr
		p.mu.Unlock()
		return isr, nil
	}
	p.mu.Unlock()
	prog, err := rs.host.Progress(rs.id)
	if err != nil {
		return nil, err
	}
	// CaughtUp is on the host's clock, as the acks=all count's (isrOf).
	isr := isrOf(prog, rs.self, rs.host.cfg.Now(), rs.lagTime, rs.host.Fenced())
	p.mu.Lock()
	rs.isr, rs.isrAt = isr, now
	p.mu.Unlock()
	return isr, nil
}

// propose is the one way a batch goes into the log: b, a batch already
// checked (h is its header: see validate), on the leader only, checked
// against the producer state with the inflight proposals, then proposed
// to raft. A batch from an idempotent producer that retries one of its
// latest 5 batches returns the original offsets without appending again;
// a sequence gap returns ErrOutOfOrderSequence and an older epoch
// ErrInvalidProducerEpoch. The Pending completes once the entry is
// committed (acks=all) or durable on the leader (acks=1).
func (p *Partition) propose(b []byte, h *batch.Header, ar appendReq) (*Pending, error) {
	rs := p.rs
	if !p.IsLeader() {
		return &Pending{res: noResult}, p.notLeader("produce goes to the partition leader")
	}
	// b was checked once, before append (validate, appendOwn): a batch
	// the log would refuse never becomes a raft entry (every replica's
	// storage would fail on it, and the group leave the host).
	acks := ar.acks
	if acks == AcksAll {
		isr, err := rs.inSync(p, time.Now(), false)
		if err != nil {
			return &Pending{res: noResult}, p.notLeader(err.Error())
		}
		if min := p.Config().MinInsyncReplicas; len(isr) < min {
			return &Pending{res: noResult}, fmt.Errorf("%w: %d in sync (%v), min.insync.replicas=%d", ErrNotEnoughReplicas, len(isr), isr, min)
		}
	}
	if ar.logAppendTime {
		// The leader's clock, set once before proposing: every replica
		// stores the same bytes.
		batch.SetLogAppendTime(b, p.now().UnixMilli())
		h.Attributes |= batch.TimestampTypeBit
	}
	pr := rs.newProposal(b, *h, acks)
	if m := rs.host.cfg.Metrics; m != nil && m.Committed != nil && acks == AcksAll {
		pr.proposed = time.Now()
	}
	p.appendMu.Lock()
	orig, dup, err := rs.checkProducer(p.producers, h, b, ar.txnVersion)
	if err != nil {
		p.appendMu.Unlock()
		return &Pending{res: noResult}, err
	}
	switch {
	case orig != nil:
		p.appendMu.Unlock()
		return follow(orig.pd), nil
	case dup != nil:
		p.appendMu.Unlock()
		// A retry of a written batch: answered once that batch commits
		// (its own waiter may still be waiting).
		return p.whenCommitted(segment.AppendResult{BaseOffset: dup.baseOffset, LastOffset: dup.lastOffset, LogAppendTime: dup.logAppendTime}, h), nil
	}
	if h.ProducerID >= 0 && sequenced(h) {
		if len(rs.inflight[h.ProducerID]) == 0 {
			delete(rs.broken, h.ProducerID) // the producer starts again from what is written
		}
		rs.inflight[h.ProducerID] = append(rs.inflight[h.ProducerID], pr)
	}
	p.appendMu.Unlock()
	rs.track(pr)
	err = rs.host.post(rs.id, func(rn *raft.RawNode) error {
		if pid := pr.h.ProducerID; pid >= 0 && sequenced(&pr.h) {
			// A producer one of whose proposals raft dropped must not
			// have a later one taken (a sequence gap in the log). A
			// marker or a batch without sequence makes no gap.
			p.appendMu.Lock()
			broken := rs.broken[pid]
			p.appendMu.Unlock()
			if broken {
				err := errors.New("an earlier batch of the producer was dropped")
				p.failProposal(pr, p.notLeader(err.Error()))
				return err
			}
		}
		if ar.inEpoch {
			if term := rn.BasicStatus().Term; term != uint64(ar.epoch) {
				p.failProposal(pr, p.notLeader(fmt.Sprintf("the append belongs to leader epoch %d, the term is %d", ar.epoch, term)))
				return nil // the proposal's own error: not the group's
			}
		}
		// The verification guard is checked here, in raft's proposal
		// order (txn_guard.go): a marker proposed before the batch wins.
		txn := pr.h.ProducerID >= 0 && pr.h.Transactional()
		if txn {
			p.appendMu.Lock()
			err := p.admitTxnLocked(&pr.h, ar.verifyTxn, ar.guard)
			if err == nil && pr.h.Control() {
				err = p.admitMarkerLocked(&pr.h, b, ar.txnVersion)
			}
			p.appendMu.Unlock()
			if err != nil {
				p.failProposal(pr, err)
				return nil // the proposal's own error: not the group's
			}
		}
		if err := rn.Propose(b); err != nil {
			if pid := pr.h.ProducerID; pid >= 0 && sequenced(&pr.h) {
				p.appendMu.Lock()
				rs.broken[pid] = true
				p.appendMu.Unlock()
			}
			p.failProposal(pr, p.notLeader(err.Error()))
			return err
		}
		if txn {
			p.appendMu.Lock()
			p.txnTouchedLocked(&pr.h, b, pr.id)
			p.appendMu.Unlock()
		}
		pr.propTerm = rn.BasicStatus().Term
		rs.proposed = append(rs.proposed, pr)
		return nil
	})
	if err != nil {
		p.failProposal(pr, p.notLeader(err.Error()))
	}
	return pr.pd, nil
}

// Proposals is how many batches this replica has proposed since it
// opened (DeleteRecords entries included): a produce counts here once
// it is handed to raft, before it is written or committed.
func (p *Partition) Proposals() int64 {
	return p.rs.nextID.Load()
}

// newProposal returns a proposal of data with a new id, written into
// data's baseOffset field.
func (rs *raftState) newProposal(data []byte, h batch.Header, acks int16) *proposal {
	id := rs.nextID.Add(1)
	batch.SetBaseOffset(data, id)
	return &proposal{id: id, data: data, h: h, acks: acks, pd: &Pending{res: noResult, done: make(chan struct{})}}
}

// follow returns a Pending that completes as orig does (a retry of a
// batch still in flight).
func follow(orig *Pending) *Pending {
	pd := &Pending{res: noResult, done: make(chan struct{})}
	go func() {
		<-orig.done
		pd.res, pd.err = orig.res, orig.err
		close(pd.done)
	}()
	return pd
}

// sequenced reports whether h is a data batch with a sequence number (an
// idempotent or transactional producer's): the batches the inflight
// tracking and the dropped-proposal guard are about. Markers and the
// broker's own batches without sequence (txn.go) are neither.
func sequenced(h *batch.Header) bool { return h.BaseSequence >= 0 && !h.Control() }

// checkProducer is producerState.check seeing the leader's inflight
// proposals too: a retry of one of them returns it (orig), of a written
// batch that batch (dup). tv is a marker's transaction version.
func (rs *raftState) checkProducer(ps producerState, h *batch.Header, b []byte, tv int16) (orig *proposal, dup *producerBatch, err error) {
	list := rs.inflight[h.ProducerID]
	if h.ProducerID >= 0 && (h.Control() || h.BaseSequence < 0) {
		// A marker or a batch without sequence (txn.go): its epoch is
		// checked against the newest inflight batch's too (a data
		// batch: a version 2 marker's must be above it, markerEpochV2);
		// it is not inflight itself (no retry of it is recognised).
		if n := len(list); n > 0 {
			newest := &list[n-1].h
			if h.ProducerEpoch < newest.ProducerEpoch ||
				h.Control() && tv >= 2 && newest.Transactional() && !markerEpochV2(h.ProducerEpoch, newest.ProducerEpoch, true) {
				return nil, nil, ErrInvalidProducerEpoch
			}
		}
		if h.Control() {
			return nil, nil, checkMarkerBatch(ps, h, b, tv)
		}
		dup, err = ps.check(h)
		return nil, dup, err
	}
	if h.ProducerID < 0 || len(list) == 0 {
		dup, err = ps.check(h)
		return nil, dup, err
	}
	last := lastSeqOf(h)
	for _, f := range list {
		if f.h.ProducerEpoch == h.ProducerEpoch && f.h.BaseSequence == h.BaseSequence && lastSeqOf(&f.h) == last {
			return f, nil, nil
		}
	}
	newest := &list[len(list)-1].h
	switch {
	case h.ProducerEpoch < newest.ProducerEpoch:
		return nil, nil, ErrInvalidProducerEpoch
	case h.ProducerEpoch > newest.ProducerEpoch:
		if h.BaseSequence != 0 {
			return nil, nil, ErrOutOfOrderSequence
		}
		return nil, nil, nil
	}
	if e := ps[h.ProducerID]; e != nil && e.epoch == h.ProducerEpoch {
		for i := range e.batches {
			if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
				return nil, b, nil
			}
		}
	}
	if h.BaseSequence != nextSeq(lastSeqOf(newest)) {
		return nil, nil, ErrOutOfOrderSequence
	}
	return nil, nil, nil
}

// dropInflightLocked removes pr from the inflight proposals (appendMu
// held).
func (rs *raftState) dropInflightLocked(pr *proposal) {
	id := pr.h.ProducerID
	if id < 0 {
		return
	}
	list := rs.inflight[id]
	for i, f := range list {
		if f == pr {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(rs.inflight, id)
	} else {
		rs.inflight[id] = list
	}
}

// failProposal fails a proposal raft did not take (or whose entry never
// came).
func (p *Partition) failProposal(pr *proposal, err error) {
	p.appendMu.Lock()
	p.rs.dropInflightLocked(pr)
	if pr.h.ProducerID >= 0 && pr.h.Transactional() {
		p.txnDroppedLocked(pr.h.ProducerID, pr.h.ProducerEpoch)
	}
	p.appendMu.Unlock()
	p.rs.complete(pr, noResult, err)
}

// finish completes a Pending once.
func (pd *Pending) finish(res segment.AppendResult, err error) {
	select {
	case <-pd.done:
		return
	default:
	}
	pd.res, pd.err = res, err
	close(pd.done)
}

// written is called by the storage, in the worker, for each entry of a
// Ready it wrote, with its append result, for a data entry its header,
// and the proposal id its data carried (its batch's baseOffset field as
// proposed: 0 for raft's own entries). It records the batch in the
// producer state (unless record is false: the state was just rebuilt
// from the log) and matches the leader's proposals by id.
func (p *Partition) written(e *raftpb.Entry, id int64, res segment.AppendResult, h *batch.Header, record bool) {
	rs := p.rs
	var pr *proposal
	if id > 0 {
		for j, q := range rs.proposed {
			if q.id != id || q.propTerm != e.Term {
				continue
			}
			// Proposals before it never came: raft dropped them.
			for _, d := range rs.proposed[:j] {
				p.failProposal(d, p.notLeader("the proposal was dropped"))
			}
			pr = q
			rs.proposed = rs.proposed[j+1:]
			break
		}
	}
	if h != nil && h.LogAppendTime() {
		// The leader set it before proposing (the batch's max
		// timestamp, Kafka's LogAppendTime).
		res.LogAppendTime = h.MaxTimestamp
	}
	if h != nil {
		p.appendMu.Lock()
		if record {
			hh := *h
			hh.BaseOffset = res.BaseOffset
			var data []byte
			if hh.Control() {
				data = e.Data // the marker's record (txn.go)
			}
			if err := p.noteBatchLocked(&hh, data, res.LogAppendTime); err != nil && pr != nil {
				pr.refused = err // a marker another one, written first, fenced
			}
		}
		if pr != nil {
			rs.dropInflightLocked(pr)
			p.txnWrittenLocked(pr.h.ProducerID, pr.id)
		} else {
			p.txnReplicatedLocked(h)
		}
		p.appendMu.Unlock()
	}
	if pr == nil {
		return
	}
	pr.index, pr.term = e.Index, e.Term
	pr.res = res
	switch pr.acks {
	case AcksAll:
		rs.committing = append(rs.committing, pr)
	default:
		rs.unsynced = append(rs.unsynced, pr)
	}
}

// synced completes the acks=1 proposals written before a successful Sync.
func (rs *raftState) synced() {
	for _, pr := range rs.unsynced {
		rs.complete(pr, pr.res, nil)
	}
	rs.unsynced = rs.unsynced[:0]
}

// raftMachine is the partition as the raft group's state machine.
type raftMachine struct{ p *Partition }

// Apply moves the high watermark to the Kafka offset after the last
// committed entry and completes the acks=all proposals whose entries
// committed (or fails those whose index committed with another term).
// Entries re-delivered after a restart only move the high watermark.
func (m raftMachine) Apply(ents []raftpb.Entry) {
	p, rs := m.p, m.p.rs
	if len(ents) == 0 {
		return
	}
	first, last := ents[0].Index, ents[len(ents)-1].Index
	rs.storage.forgetApplied(last)
	p.log.SetRaftRetainFrom(retentionBound(p, last)) // retention may remove what is applied
	hw, err := p.log.OffsetAfter(last)
	if err != nil {
		p.logger.Error("replica: the offset after a committed entry is unknown", "group", rs.id.String(), "index", last, "err", err)
	} else {
		p.advance(hw)
	}
	// Replicated DeleteRecords, in log order (raft_deleterecords.go).
	deletes := p.applyDeletes(ents)
	keep := rs.committing[:0]
	for _, pr := range rs.committing {
		switch {
		case pr.index > last:
			keep = append(keep, pr)
		case pr.index < first:
			// Committed before this batch of entries: a log that was
			// reset (snapshot) under it; its fate is unknown.
			rs.complete(pr, noResult, p.notLeader("the entry was replaced"))
		case ents[pr.index-first].Term == pr.term && pr.del:
			o, ok := deletes[pr.index]
			if !ok {
				o.err = fmt.Errorf("replica: the DeleteRecords entry at raft index %d was not applied", pr.index)
			}
			rs.complete(pr, segment.AppendResult{BaseOffset: o.lso, LastOffset: -1, LogAppendTime: -1}, o.err)
		case ents[pr.index-first].Term == pr.term && rs.leader != rs.self:
			// Committed, but this replica no longer leads: LeaderChanged
			// ran first in this Ready (and failed the waiting ones), so
			// nothing would count its copies any more. Kafka's
			// checkEnoughReplicasReachOffset answers
			// NOT_LEADER_OR_FOLLOWER once the replica no longer leads.
			rs.complete(pr, noResult, p.notLeader("leadership moved before enough in-sync replicas held the batch"))
		case ents[pr.index-first].Term == pr.term:
			// Committed; acknowledged once min.insync.replicas in-sync
			// replicas hold it (raft_acks.go: the worker's progress
			// tracking after this apply completes it at once when they
			// do).
			rs.replicating = append(rs.replicating, pr)
		default:
			rs.complete(pr, noResult, p.notLeader(fmt.Sprintf("the entry at raft index %d was replaced by another leader's", pr.index)))
		}
	}
	rs.committing = keep
}

// LeaderChanged records the group's leader (0: none) and its term, the
// partition's leader epoch. A replica that stops being the leader fails
// the proposals raft has not written (they may never be) and forgets its
// inflight producer state; written ones still wait for their commit.
func (m raftMachine) LeaderChanged(lead, term uint64) {
	p, rs := m.p, m.p.rs
	p.mu.Lock()
	was, wasTerm := rs.leader, rs.term
	rs.leader, rs.term = lead, term
	if lead != 0 {
		p.leaderEpoch = int32(term)
	}
	rs.isr, rs.isrAt = nil, time.Time{}
	p.mu.Unlock()
	if rs.onLeader != nil && (lead != was || term != wasTerm) {
		defer rs.onLeader(lead, term) // once the partition's state moved
	}
	// Every proposal raft took is in the Ready just written (proposals run
	// before the Ready is taken): one not written by now was dropped.
	for _, pr := range rs.proposed {
		p.failProposal(pr, p.notLeader("leadership moved"))
	}
	rs.proposed = nil
	if was == rs.self && lead != rs.self {
		for _, pr := range rs.unsynced {
			rs.complete(pr, noResult, p.notLeader("leadership moved"))
		}
		rs.unsynced = rs.unsynced[:0]
		// Kafka's checkEnoughReplicasReachOffset answers
		// NOT_LEADER_OR_FOLLOWER once the replica no longer leads.
		rs.failReplicating(p.notLeader("leadership moved before enough in-sync replicas held the batch"))
		p.appendMu.Lock()
		clear(rs.inflight)
		p.txnLeadershipLostLocked()
		p.appendMu.Unlock()
	}
}

// whenCommitted returns a Pending that completes once the high watermark
// covers res, a retry of a written batch of h's producer: with success if
// the committed batch at res's offset is still that producer's (its
// epoch and sequence), else with NotLeaderError (the written batch was an
// uncommitted tail a new leader replaced): never a silent success.
func (p *Partition) whenCommitted(res segment.AppendResult, h *batch.Header) *Pending {
	pd := &Pending{res: noResult, done: make(chan struct{})}
	want := *h
	go func() {
		defer close(pd.done)
		for {
			ch := p.Changed()
			if p.LogEndOffset() <= res.LastOffset {
				// The batch was an uncommitted tail a truncation removed.
				pd.err = p.notLeader("the batch was replaced by another leader's")
				return
			}
			if p.HighWatermark() > res.LastOffset {
				if p.holds(res.BaseOffset, &want) {
					pd.res = res
				} else {
					pd.err = p.notLeader("the batch was replaced by another leader's")
				}
				return
			}
			select {
			case <-ch:
			case <-p.closing:
				pd.err = p.notLeader("the partition closed")
				return
			}
		}
	}()
	return pd
}

// holds reports whether the committed batch at offset is want's producer
// batch (producer id, epoch and base sequence).
func (p *Partition) holds(offset int64, want *batch.Header) bool {
	if offset < p.LogStartOffset() {
		// Removed by retention, which removes applied entries only: it
		// was committed.
		return true
	}
	data, rr, err := p.ReadBytes(nil, offset, batch.HeaderSize)
	rr.Release()
	if err != nil || len(data) < batch.HeaderSize {
		return false
	}
	got, err := batch.ParseHeader(data)
	return err == nil && got.BaseOffset == offset && got.ProducerID == want.ProducerID &&
		got.ProducerEpoch == want.ProducerEpoch && got.BaseSequence == want.BaseSequence
}

// track registers a new proposal as pending.
func (rs *raftState) track(pr *proposal) {
	rs.pmu.Lock()
	if rs.pending == nil {
		rs.pending = map[*proposal]struct{}{}
	}
	rs.pending[pr] = struct{}{}
	rs.pmu.Unlock()
}

// complete finishes a proposal's Pending (once) and forgets it; a
// refused entry finishes with its refusal instead of success.
func (rs *raftState) complete(pr *proposal, res segment.AppendResult, err error) {
	rs.pmu.Lock()
	_, ok := rs.pending[pr]
	delete(rs.pending, pr)
	rs.pmu.Unlock()
	if err == nil && pr.refused != nil {
		err = pr.refused
	}
	if ok {
		// Only the goroutine that took it out of pending finishes it.
		pr.pd.finish(res, err)
	}
}

// failFrom fails the written proposals at raft index index or above (a
// truncation removed their entries). Called by the worker.
func (rs *raftState) failFrom(p *Partition, index uint64) {
	keep := rs.committing[:0]
	for _, pr := range rs.committing {
		if pr.index >= index {
			rs.complete(pr, noResult, p.notLeader(fmt.Sprintf("the entry at raft index %d was replaced by another leader's", pr.index)))
		} else {
			keep = append(keep, pr)
		}
	}
	rs.committing = keep
	keepU := rs.unsynced[:0]
	for _, pr := range rs.unsynced {
		if pr.index >= index {
			rs.complete(pr, noResult, p.notLeader("the entry was replaced by another leader's"))
		} else {
			keepU = append(keepU, pr)
		}
	}
	rs.unsynced = keepU
}

// failAll fails every pending proposal (the partition closes: its group
// left the host, so no worker will complete them).
func (rs *raftState) failAll(err error) {
	rs.pmu.Lock()
	prs := make([]*proposal, 0, len(rs.pending))
	for pr := range rs.pending {
		prs = append(prs, pr)
	}
	clear(rs.pending)
	rs.pmu.Unlock()
	for _, pr := range prs {
		pr.pd.finish(noResult, err)
	}
}

// GroupFailed is told that the group left the host because the storage
// failed: the replica no longer claims leadership (LEADER_NOT_AVAILABLE
// until its owner reopens it) and the proposals waiting on it fail
// (retriable).
func (m raftMachine) GroupFailed(err error) {
	m.LeaderChanged(0, m.p.rs.term)
	m.p.rs.failAll(m.p.notLeader("the partition's storage failed: " + err.Error()))
}

// soleVoterDurable: this replica leads its group as the only voter and its
// log is durable up to index, so every entry up to it is committed (see
// Host.soleVoterDurable). The high watermark moves there and the acks=all
// proposals written up to it complete now, one Ready before raft applies
// them (Apply then finds them done). With min.insync.replicas above 1
// (a one-voter ISR is too small) they wait for Apply, which fails them
// (raft_acks.go). Worker.
func (m raftMachine) soleVoterDurable(index uint64) {
	p, rs := m.p, m.p.rs
	hw, err := p.log.OffsetAfter(index)
	if err != nil {
		return
	}
	p.advance(hw)
	if len(rs.committing) == 0 || p.Config().MinInsyncReplicas > 1 {
		return
	}
	keep := rs.committing[:0]
	for _, pr := range rs.committing {
		if pr.index <= index && !pr.del {
			rs.complete(pr, pr.res, nil)
		} else {
			keep = append(keep, pr)
		}
	}
	clear(rs.committing[len(keep):])
	rs.committing = keep
}
