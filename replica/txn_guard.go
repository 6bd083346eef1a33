package replica

import (
	"fmt"

	"github.com/sluicemq/sluice/segment/batch"
)

// Transaction verification guards (KIP-890 part 1; Kafka's
// VerificationGuard and VerificationStateEntry, UnifiedLog's
// analyzeAndValidateProducerState are the specification).
//
// The broker asks the transaction coordinator whether a partition is in
// a producer's ongoing transaction before it appends the transaction's
// first batch to the partition. Between that answer and the append, the
// transaction can end: its marker lands first, and the late batch would
// then open a transaction nobody ends, or be adopted by the producer's
// next transaction (whose commit makes an aborted record visible). So the
// partition hands out a guard when verification starts
// (StartTxnVerification), voids it when a marker or a transactional batch
// of the producer is appended, and appends a verified batch only if its
// guard is still the producer's (ProduceOptions.Guard). A batch that
// continues a transaction ongoing in the partition needs no guard.
//
// On a raft leader the decision is taken in raft's proposal order (the
// worker's post closure, which calls Propose): the producer's
// transaction as proposed (txnGuards.proj, the newest transactional
// proposal of each producer not yet written) comes before the written
// producer state, so a batch proposed after a marker is refused even
// while the marker is still on its way to the log.

// TxnGuard is a transaction verification guard (Kafka's
// VerificationGuard); NoTxnGuard is none (Kafka's SENTINEL).
type TxnGuard uint64

// NoTxnGuard is the zero guard: no verification was started.
const NoTxnGuard TxnGuard = 0

// txnGuards is a partition's verification state, guarded by appendMu.
type txnGuards struct {
	last TxnGuard
	// byPID: the guard of each producer whose verification started and
	// whose transaction has not been touched since.
	byPID map[int64]guardEntry
	// proj (raft leader only): each producer's transaction as its newest
	// proposal not yet written leaves it.
	proj map[int64]txnProj
}

// guardEntry is one producer's guard, its epoch and when it was made
// (ms, for expiry with the producer state), and the lowest base sequence
// of the batches whose verification started at that epoch (-1: none
// known; Kafka's VerificationStateEntry.lowestSequence).
type guardEntry struct {
	guard  TxnGuard
	epoch  int16
	atMs   int64
	lowSeq int32
}

// txnProj is a producer's transaction as proposed: open (a transactional
// batch proposed last) or not (a marker, or unknown after a dropped
// proposal), at epoch, by proposal id (0: matches no proposal, kept until
// the producer's next proposal).
type txnProj struct {
	open  bool
	epoch int16
	id    int64
	// coordEpoch is the coordinator epoch of the producer's newest
	// marker proposed (coordKnown), which a later marker may not go
	// below.
	coordEpoch int32
	coordKnown bool
}

// errTxnNotVerified is INVALID_TXN_STATE for a transactional batch that
// neither continues an ongoing transaction nor carries its producer's
// current guard (Kafka: "Record was not part of an ongoing transaction").
func errTxnNotVerified(id int64, epoch int16) error {
	return fmt.Errorf("%w: the batch of producer %d epoch %d is not part of an ongoing transaction (its verification is void: the transaction ended since, or it was never verified)", ErrInvalidTxnState, id, epoch)
}

// StartTxnVerification starts, or continues, the verification of a
// transactional batch of producer id at epoch: ok is false when the
// producer's transaction is ongoing in the partition (proposed or
// written: the batch needs no verification, Kafka's
// maybeStartTransactionVerification returning SENTINEL); otherwise the
// guard is what the verified batch must carry (ProduceOptions.Guard).
// A producer has one guard until a marker or transactional batch of it
// is appended; a later verification shares it.
func (p *Partition) StartTxnVerification(id int64, epoch int16) (g TxnGuard, ok bool) {
	g, ok, _ = p.StartTxnVerificationAt(id, epoch, -1)
	return g, ok
}

// StartTxnVerificationAt is StartTxnVerification for a batch starting at
// sequence seq (-1: none, a coordinator's write). behind reports that a
// batch of the producer at the same epoch with a lower sequence started
// its verification first and is not appended yet (its verification
// failed, retriably, or is still going on): appended before it, this one
// would be out of sequence, so it should be answered with a retriable
// error and wait for it (Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER from
// the same lowest sequence, which its Java client retries for a batch
// that is not the first in flight and franz-go treats as fatal).
func (p *Partition) StartTxnVerificationAt(id int64, epoch int16, seq int32) (g TxnGuard, ok, behind bool) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.txnOngoingLocked(id, epoch, true) {
		return NoTxnGuard, false, false
	}
	if p.guards.byPID == nil {
		p.guards.byPID = map[int64]guardEntry{}
	}
	e, have := p.guards.byPID[id]
	if !have {
		p.guards.last++
		e = guardEntry{guard: p.guards.last, epoch: epoch, atMs: p.now().UnixMilli(), lowSeq: seq}
	}
	switch {
	case epoch > e.epoch:
		e.epoch, e.lowSeq = epoch, seq
	case epoch == e.epoch && seq >= 0:
		if e.lowSeq >= 0 && seq > e.lowSeq {
			behind = true
		} else {
			e.lowSeq = seq
		}
	}
	p.guards.byPID[id] = e
	return e.guard, true, behind
}

// TxnGuardHeld reports whether a batch of producer id at epoch verified
// under guard g would pass the guard check now: its transaction is
// ongoing (proposed or written, as admitTxnLocked sees it), or g is
// still the producer's guard. The append checks again; this tells a
// verifier whether to verify again.
func (p *Partition) TxnGuardHeld(id int64, epoch int16, g TxnGuard) bool {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.txnOngoingLocked(id, epoch, false) {
		return true
	}
	e, ok := p.guards.byPID[id]
	return ok && g != NoTxnGuard && e.guard == g
}

// InTransaction reports whether producer id at epoch has a transaction
// ongoing in this partition: a transactional batch of it written (or, on
// a raft leader, proposed) and not ended by a marker since.
func (p *Partition) InTransaction(id int64, epoch int16) bool {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.txnOngoingLocked(id, epoch, true)
}

// txnOngoingLocked reports whether producer id's transaction at epoch is
// ongoing: as proposed when a proposal of it is not written yet (raft
// leader), else as written. With inflight, a transactional batch in the
// leader's inflight list that has not reached raft yet counts too (a hint
// for whether to verify; the check at proposal does not use it).
// appendMu is held.
func (p *Partition) txnOngoingLocked(id int64, epoch int16, inflight bool) bool {
	if pj, ok := p.guards.proj[id]; ok {
		return pj.open && pj.epoch == epoch
	}
	if inflight {
		for _, pr := range p.rs.inflight[id] {
			if pr.h.ProducerEpoch == epoch && pr.h.Transactional() {
				return true
			}
		}
	}
	e := p.producers[id]
	return e != nil && e.epoch == epoch && e.txnFirst >= 0
}

// admitTxnLocked is the guard check of a batch (header h, its guard g,
// verify as ProduceOptions.VerifyTxn) about to be appended or proposed: a
// transactional data batch whose producer has no ongoing transaction
// needs its producer's current guard. appendMu is held.
func (p *Partition) admitTxnLocked(h *batch.Header, verify bool, g TxnGuard) error {
	if !verify || h.ProducerID < 0 || !h.Transactional() || h.Control() {
		return nil
	}
	if p.txnOngoingLocked(h.ProducerID, h.ProducerEpoch, false) {
		return nil
	}
	if e, ok := p.guards.byPID[h.ProducerID]; ok && g != NoTxnGuard && e.guard == g {
		return nil
	}
	return errTxnNotVerified(h.ProducerID, h.ProducerEpoch)
}

// txnTouchedLocked records that a batch of h's producer (b its bytes)
// was proposed (with its proposal id, on the leader): a marker or a transactional batch voids the producer's
// guard (Kafka's updateProducers clears the VerificationStateEntry; a
// marker keeps the entry's lowest sequence, with a new guard), and sets
// the producer's transaction as proposed. appendMu is
// held.
func (p *Partition) txnTouchedLocked(h *batch.Header, b []byte, proposal int64) {
	if h.ProducerID < 0 || !h.Transactional() {
		return
	}
	if e, ok := p.guards.byPID[h.ProducerID]; ok && h.Control() {
		// A marker voids the guard (a batch verified before it is
		// refused after it) but not what the verifications started
		// at their epoch know: the lowest sequence not appended yet.
		// A transaction.version 2 producer's next transaction's first
		// batch is verified while the previous one's marker is being
		// written (its add waits for the markers); should that
		// verification fail retriably, its pipelined successors must
		// still wait behind it (StartTxnVerificationAt's behind), not
		// be appended first (the marker leaves the producer with no
		// batches at the new epoch, whose first must be sequence 0).
		p.guards.last++
		e.guard = p.guards.last
		p.guards.byPID[h.ProducerID] = e
	} else {
		delete(p.guards.byPID, h.ProducerID)
	}
	if p.guards.proj == nil {
		p.guards.proj = map[int64]txnProj{}
	}
	prev := p.guards.proj[h.ProducerID]
	pj := txnProj{open: !h.Control(), epoch: h.ProducerEpoch, id: proposal, coordEpoch: prev.coordEpoch, coordKnown: prev.coordKnown}
	if h.Control() {
		if _, ce, ok := parseMarker(b); ok {
			pj.coordEpoch, pj.coordKnown = ce, true
		}
	}
	p.guards.proj[h.ProducerID] = pj
}

// admitMarkerLocked checks marker batch b (header h) of transaction
// version tv as it is proposed, in raft's proposal order, against the
// producer's newest proposal not yet written, else its written state
// (checkMarker's rules; a proposed data batch is an ongoing transaction
// for markerEpochV2): two coordinators' markers that both passed the
// check before proposing cannot both be written. appendMu is held.
func (p *Partition) admitMarkerLocked(h *batch.Header, b []byte, tv int16) error {
	pj, ok := p.guards.proj[h.ProducerID]
	if !ok {
		return checkMarkerBatch(p.producers, h, b, tv)
	}
	_, ce, ok := parseMarker(b)
	switch {
	case !ok:
		return nil // refused before proposing
	case tv >= 2 && !markerEpochV2(h.ProducerEpoch, pj.epoch, pj.open):
		return fmt.Errorf("%w: transaction version %d marker of producer %d at epoch %d, its newest proposal's is %d (a data batch: %t)", ErrInvalidProducerEpoch, tv, h.ProducerID, h.ProducerEpoch, pj.epoch, pj.open)
	case h.ProducerEpoch < pj.epoch:
		return fmt.Errorf("%w: marker of producer %d at epoch %d, its newest proposal's is %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, pj.epoch)
	case pj.coordKnown && ce < pj.coordEpoch:
		return fmt.Errorf("%w: marker of producer %d with coordinator epoch %d, its newest proposed marker's is %d", ErrTransactionCoordinatorFenced, h.ProducerID, ce, pj.coordEpoch)
	}
	return nil
}

// txnWrittenLocked forgets the producer's proposed transaction once its
// newest proposal (id) is written: the written state says the same from
// now on. appendMu is held.
func (p *Partition) txnWrittenLocked(pid, proposal int64) {
	if pj, ok := p.guards.proj[pid]; ok && pj.id == proposal {
		delete(p.guards.proj, pid)
	}
}

// txnDroppedLocked is told that a proposal of a transactional batch or
// marker of pid was dropped: what the producer's transaction is as
// proposed is no longer known, so it counts as not ongoing (its next
// batch is verified again) until the producer's next proposal. appendMu
// is held.
func (p *Partition) txnDroppedLocked(pid int64, epoch int16) {
	if p.guards.proj == nil {
		p.guards.proj = map[int64]txnProj{}
	}
	p.guards.proj[pid] = txnProj{open: false, epoch: epoch}
}

// txnReplicatedLocked is told that a batch (header h) this replica did
// not propose in its current leadership was written (a follower's, or an
// earlier term's): a marker or transactional batch voids the producer's
// guard, as any append does in Kafka (updateProducers), so a guard taken
// before this replica lost and regained the leadership is void if
// another leader ended the transaction meanwhile. appendMu is held.
func (p *Partition) txnReplicatedLocked(h *batch.Header) {
	if h.ProducerID >= 0 && h.Transactional() {
		delete(p.guards.byPID, h.ProducerID)
	}
}

// txnLeadershipLostLocked forgets the leader's proposed transactions
// (what it proposed may never be written). Guards stay: the batches
// written meanwhile void them (txnReplicatedLocked). appendMu is held.
func (p *Partition) txnLeadershipLostLocked() {
	clear(p.guards.proj)
}

// expireGuardsLocked drops the guards made expirationMs or more before
// nowMs (Kafka's removeExpiredProducers drops verification state entries
// with the producers). appendMu is held.
func (p *Partition) expireGuardsLocked(nowMs, expirationMs int64) {
	for id, e := range p.guards.byPID {
		if nowMs-e.atMs >= expirationMs {
			delete(p.guards.byPID, id)
		}
	}
}
