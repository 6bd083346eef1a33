package replica

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// guardSteps runs the verification guard's cases on write, the leader,
// through run (a raft cluster ticks while a step waits):
//   - a transactional batch of a producer with no transaction ongoing
//     is refused without a guard, and without verification at all;
//   - a guard taken, then the producer's abort marker written (the
//     coordinator aborted the transaction while the batch was being
//     verified): the late batch is refused, and opens no transaction
//     the producer's next one would adopt;
//   - a fresh guard admits the batch; a guard is void once used;
//   - a batch continuing the ongoing transaction needs no guard, and
//     StartTxnVerification says so.
func guardSteps(t *testing.T, run txnRunner, write *Partition) {
	t.Helper()
	ctx := context.Background()
	produce := func(data []byte, verify bool, g TxnGuard) (int64, error) {
		return produceGuarded(run, write, data, verify, g)
	}
	marker := func(m TxnMarker) {
		var err error
		run.do(func() { _, err = write.WriteTxnMarker(ctx, m) })
		if err != nil {
			t.Fatalf("marker %+v: %v", m, err)
		}
	}

	if _, err := produce(txnBatch(5, 0, 0, 1, true, 1000), true, NoTxnGuard); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a transactional batch with no transaction and no guard: %v, want ErrInvalidTxnState", err)
	}
	late, ok := write.StartTxnVerification(5, 0)
	if !ok || late == NoTxnGuard {
		t.Fatalf("StartTxnVerification with no transaction: %d, %v", late, ok)
	}
	if again, _ := write.StartTxnVerification(5, 0); again != late {
		t.Fatalf("a second verification got guard %d, the first %d: one guard per producer", again, late)
	}
	if !write.TxnGuardHeld(5, 0, late) {
		t.Fatal("TxnGuardHeld: a fresh guard is not held")
	}
	marker(TxnMarker{ProducerID: 5, ProducerEpoch: 0, CoordinatorEpoch: 1}) // the abort
	if write.TxnGuardHeld(5, 0, late) {
		t.Fatal("TxnGuardHeld: a guard voided by a marker is held")
	}
	if _, err := produce(txnBatch(5, 0, 0, 1, true, 1000), true, late); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a batch verified before its transaction's abort marker: %v, want ErrInvalidTxnState", err)
	}
	if write.InTransaction(5, 0) {
		t.Fatal("the refused batch opened a transaction")
	}

	g, ok := write.StartTxnVerification(5, 0)
	if !ok || g == late {
		t.Fatalf("a new verification after the marker: guard %d (void one %d), %v", g, late, ok)
	}
	first, err := produce(txnBatch(5, 0, 0, 1, true, 1000), true, g)
	if err != nil {
		t.Fatalf("a verified batch: %v", err)
	}
	if _, ok := write.StartTxnVerification(5, 0); ok {
		t.Fatal("StartTxnVerification asks to verify a batch of an ongoing transaction")
	}
	if !write.TxnGuardHeld(5, 0, NoTxnGuard) {
		t.Fatal("TxnGuardHeld: a batch of an ongoing transaction needs no guard")
	}
	if _, err := produce(txnBatch(5, 0, 1, 1, true, 1000), true, NoTxnGuard); err != nil {
		t.Fatalf("a batch continuing the transaction: %v", err)
	}
	marker(TxnMarker{ProducerID: 5, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1})
	if _, err := produce(txnBatch(5, 0, 2, 1, true, 1000), true, g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a used guard after the commit: %v, want ErrInvalidTxnState", err)
	}
	// Without verification (transaction.partition.verification.enable=
	// false) nothing is checked.
	if _, err := produce(txnBatch(6, 0, 0, 1, true, 1000), false, NoTxnGuard); err != nil {
		t.Fatalf("an unverified batch with verification off: %v", err)
	}
	fr, err := write.FetchCommitted(0, 1<<20)
	fr.Records.Release()
	if err != nil || fr.LastStableOffset > first+3 || fr.AbortedTransactions != nil {
		t.Fatalf("read_committed after the cases: lso %d, aborted %v, %v", fr.LastStableOffset, fr.AbortedTransactions, err)
	}
}

// produceGuarded produces data to p with the verification options verify
// and g, through run, and returns its offset once committed.
func produceGuarded(run txnRunner, p *Partition, data []byte, verify bool, g TxnGuard) (int64, error) {
	var off int64 = -1
	var err error
	run.do(func() {
		var pd *Pending
		if pd, err = p.ProduceWith(data, ProduceOptions{Acks: AcksAll, VerifyTxn: verify, Guard: g}); err == nil {
			var res segment.AppendResult
			res, err = pd.Wait(context.Background())
			off = res.BaseOffset
		}
	})
	return off, err
}

// guardCluster is a three-node raft cluster of one group led by node 1.
func guardCluster(t *testing.T, seed uint64) (*pcluster, *Partition) {
	c := newPCluster(t, 3, 1, seed)
	c.startAll()
	g := c.groups[0]
	if err := c.nodes[1].host.Campaign(g); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1)
	return c, c.nodes[1].parts[g]
}

func TestTxnGuardSingleReplica(t *testing.T) {
	cfg := testConfig()
	cfg.Log.FlushMessages = 1
	p := openAt(t, vfs.NewMem(), cfg, Options{})
	defer p.Close()
	guardSteps(t, direct(t), p)
}

func TestTxnGuardRaft(t *testing.T) {
	c, lead := guardCluster(t, 21)
	guardSteps(t, raftRunner(c), lead)
}

// On a raft leader the guard is checked in raft's proposal order: a
// batch continuing a transaction (no guard needed when it arrived) that
// is proposed after the transaction's marker was proposed, before the
// marker is written, is refused; the producer state as written still
// says the transaction is ongoing at that point.
func TestTxnGuardProposalOrder(t *testing.T) {
	c, lead := guardCluster(t, 22)
	run := raftRunner(c)
	ctx := context.Background()
	guard, _ := lead.StartTxnVerification(8, 0)
	if _, err := produceGuarded(run, lead, txnBatch(8, 0, 0, 1, true, 1000), true, guard); err != nil {
		t.Fatal(err)
	}
	if _, ok := lead.StartTxnVerification(8, 0); ok {
		t.Fatal("the transaction is not ongoing after its first batch")
	}
	// The marker and the continuing batch, proposed one after the other
	// before the worker writes either.
	m := buildMarker(TxnMarker{ProducerID: 8, ProducerEpoch: 0, CoordinatorEpoch: 1}, 1000)
	mh, err := batch.ParseHeader(m)
	if err != nil {
		t.Fatal(err)
	}
	var mpd, bpd *Pending
	var merr, berr error
	run.do(func() {
		mpd, merr = lead.propose(m, &mh, appendReq{acks: AcksAll})
		bpd, berr = lead.ProduceWith(txnBatch(8, 0, 1, 1, true, 1000), ProduceOptions{Acks: AcksAll, VerifyTxn: true})
		if merr == nil {
			_, merr = mpd.Wait(ctx)
		}
		if berr == nil {
			_, berr = bpd.Wait(ctx)
		}
	})
	if merr != nil {
		t.Fatalf("the marker: %v", merr)
	}
	if !errors.Is(berr, ErrInvalidTxnState) {
		t.Fatalf("a batch proposed after its transaction's marker: %v, want ErrInvalidTxnState", berr)
	}
	if lead.InTransaction(8, 0) {
		t.Fatal("the batch after the marker opened a transaction")
	}
}

// A coordinator's append made in the leader epoch it loaded its
// partition in (AppendOptions.InLeaderEpoch): refused in any other epoch,
// and once the replica leads again in a later term after another leader
// (whose writes the coordinator's state may miss).
func TestAppendInLeaderEpoch(t *testing.T) {
	c := newPCluster(t, 3, 1, 23)
	c.startAll()
	c.campaign(1)
	g := c.groups[0]
	p := c.nodes[1].parts[g]
	run := raftRunner(c)
	ctx := context.Background()
	appendIn := func(epoch int32) error {
		var err error
		run.do(func() {
			_, err = p.AppendRecords(ctx, 1000, AppendOptions{InLeaderEpoch: true, LeaderEpoch: epoch}, []Record{{Value: []byte("x")}})
		})
		return err
	}
	_, loaded, _ := p.Leader()
	if err := appendIn(loaded); err != nil {
		t.Fatalf("an append in the leader's epoch %d: %v", loaded, err)
	}
	var nl *NotLeaderError
	if err := appendIn(loaded + 1); !errors.As(err, &nl) {
		t.Fatalf("an append in another epoch: %v, want a NotLeaderError", err)
	}
	// Leadership leaves node 1 and comes back (handed on, as a
	// controlled shutdown does: a healthy leader's followers refuse a
	// campaign).
	c.moveAway(p)
	for range 3 {
		if p.IsLeader() {
			break
		}
		c.moveAway(c.leader(g))
	}
	if !p.IsLeader() {
		t.Fatal("node 1 does not lead again")
	}
	_, now, _ := p.Leader()
	if now <= loaded+1 {
		t.Fatalf("leader epoch %d after leading again, first %d", now, loaded)
	}
	if err := appendIn(loaded); !errors.As(err, &nl) {
		t.Fatalf("an append in the epoch of an earlier leadership: %v, want a NotLeaderError", err)
	}
	if err := appendIn(now); err != nil {
		t.Fatalf("an append in the current epoch: %v", err)
	}
}

// A one-voter group's leader appends in its own epoch (its raft term)
// only.
func TestAppendInLeaderEpochOneVoter(t *testing.T) {
	p, err := openVoter(t, vfs.NewMem(), snapDir, testConfig(), Options{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if _, err := p.AppendRecords(ctx, 1000, AppendOptions{InLeaderEpoch: true, LeaderEpoch: 4}, []Record{{Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	var nl *NotLeaderError
	if _, err := p.AppendRecords(ctx, 1000, AppendOptions{InLeaderEpoch: true, LeaderEpoch: 3}, []Record{{Value: []byte("x")}}); !errors.As(err, &nl) {
		t.Fatalf("an append in an older epoch: %v, want a NotLeaderError", err)
	}
}

// A guard outlives a leadership that leaves and comes back (as Kafka's
// verification state lives with the log), unless the other leader wrote
// a marker of the producer meanwhile: that voids it on every replica.
func TestTxnGuardAcrossLeadership(t *testing.T) {
	c := newPCluster(t, 3, 1, 24)
	c.startAll()
	c.campaign(1)
	g := c.groups[0]
	p := c.nodes[1].parts[g]
	run := raftRunner(c)
	ctx := context.Background()
	backTo1 := func(between func(other *Partition)) {
		t.Helper()
		c.moveAway(p)
		between(c.leader(g))
		for range 3 {
			if p.IsLeader() {
				return
			}
			c.moveAway(c.leader(g))
		}
		if !p.IsLeader() {
			t.Fatal("node 1 does not lead again")
		}
	}
	produce := func(pid int64, guard TxnGuard) error {
		_, err := produceGuarded(run, p, txnBatch(pid, 0, 0, 1, true, 1000), true, guard)
		return err
	}

	kept, _ := p.StartTxnVerification(9, 0)
	voided, _ := p.StartTxnVerification(10, 0)
	backTo1(func(other *Partition) {
		run.do(func() {
			if _, err := other.WriteTxnMarker(ctx, TxnMarker{ProducerID: 10, ProducerEpoch: 0, CoordinatorEpoch: 1}); err != nil {
				t.Errorf("the other leader's marker: %v", err)
			}
		})
	})
	c.drive("node 1 to write the other leader's marker", func() bool { return p.HighWatermark() >= 1 })
	if err := produce(9, kept); err != nil {
		t.Fatalf("a guard taken before the leadership moved and came back: %v", err)
	}
	if err := produce(10, voided); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a guard whose producer's marker another leader wrote: %v, want ErrInvalidTxnState", err)
	}
}

// A batch whose verification starts while a lower sequence of the same
// producer and epoch started its own and is not appended yet is behind
// it (Kafka's VerificationStateEntry.lowestSequence); a new epoch starts
// again; a retry of the lowest is not behind.
func TestTxnVerificationLowestSequence(t *testing.T) {
	p := openAt(t, vfs.NewMem(), testConfig(), Options{})
	defer p.Close()
	for i, c := range []struct {
		epoch      int16
		seq        int32
		wantBehind bool
	}{
		{1, 0, false},  // the transaction's first batch
		{1, 10, true},  // pipelined behind it
		{1, 0, false},  // the first, retried
		{2, 10, false}, // a new epoch: the lowest is its first
		{2, 20, true},
		{2, -1, false}, // no sequence (a coordinator's write)
	} {
		g, ok, behind := p.StartTxnVerificationAt(5, c.epoch, c.seq)
		if !ok || g == NoTxnGuard || behind != c.wantBehind {
			t.Fatalf("step %d (epoch %d seq %d): guard %d, ok %v, behind %v; want behind %v", i, c.epoch, c.seq, g, ok, behind, c.wantBehind)
		}
	}
}

// A marker written while a batch's verification is going on (a
// transaction.version 2 producer's next transaction's first batch,
// whose add waits for the previous transaction's markers) voids the
// guard but keeps the lowest sequence: a pipelined successor whose
// verification starts after the marker is still behind the first batch,
// and waits (the marker leaves the producer with no batches at its
// epoch: were the successor not behind, it would be checked as the first
// batch at the epoch and refused OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to
// the client).
func TestTxnVerificationLowestSequenceSurvivesMarker(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) (txnRunner, *Partition)
	}{
		{"single", func(t *testing.T) (txnRunner, *Partition) {
			cfg := testConfig()
			cfg.Log.FlushMessages = 1
			p := openAt(t, vfs.NewMem(), cfg, Options{})
			t.Cleanup(func() { p.Close() })
			return direct(t), p
		}},
		{"raft", func(t *testing.T) (txnRunner, *Partition) {
			cl, lead := guardCluster(t, 23)
			return raftRunner(cl), lead
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run, p := c.open(t)
			ctx := context.Background()
			// The previous transaction, at epoch 0, ongoing.
			g0, _ := p.StartTxnVerification(5, 0)
			if _, err := produceGuarded(run, p, txnBatch(5, 0, 0, 1, true, 1000), true, g0); err != nil {
				t.Fatal(err)
			}
			// Its EndTxn bumped the epoch to 1; the next transaction's
			// first batch (epoch 1, sequence 0) starts its verification.
			first, ok, behind := p.StartTxnVerificationAt(5, 1, 0)
			if !ok || behind {
				t.Fatalf("the first batch: ok %v behind %v", ok, behind)
			}
			// The previous transaction's marker lands (version 2: the
			// bumped epoch).
			var err error
			run.do(func() {
				_, err = p.WriteTxnMarker(ctx, TxnMarker{ProducerID: 5, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 1, TransactionVersion: 2})
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.TxnGuardHeld(5, 1, first) {
				t.Fatal("the first batch's guard survived the marker")
			}
			// Its verification failed retriably; the pipelined second
			// batch (sequence 3) arrives: behind.
			if _, ok, behind := p.StartTxnVerificationAt(5, 1, 3); !ok || !behind {
				t.Fatalf("the second batch after the marker: ok %v behind %v; want behind the first", ok, behind)
			}
			// The first, retried, is not behind, gets a fresh guard and
			// is appended; the second then continues the transaction.
			g, ok, behind := p.StartTxnVerificationAt(5, 1, 0)
			if !ok || behind || g == first {
				t.Fatalf("the first batch retried: guard %d (void %d) ok %v behind %v", g, first, ok, behind)
			}
			if _, err := produceGuarded(run, p, txnBatch(5, 1, 0, 3, true, 1000), true, g); err != nil {
				t.Fatalf("the first batch: %v", err)
			}
			if _, err := produceGuarded(run, p, txnBatch(5, 1, 3, 1, true, 1000), true, NoTxnGuard); err != nil {
				t.Fatalf("the second batch: %v", err)
			}
		})
	}
}
