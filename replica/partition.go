package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Partition is one replica of one partition: its log, high watermark,
// leader epoch and topic configuration. It is the only door into the log:
// produce (with Kafka's LogValidator rules, produce.go), reads, offset
// lookups, DeleteRecords, retention, config changes and close all go
// through it, so replication can make each of them a replicated operation
// in one place. It is safe for concurrent use.
//
// Locks: appendMu (the producer-state check and the proposal it guards),
// then mu (high watermark, epoch, config). No fsync runs under either:
// the raft host's worker writes and syncs the proposed entries after
// appendMu is released.
type Partition struct {
	log      *segment.Log
	internal bool
	sweeper  *segment.Sweeper
	cleaner  *segment.Cleaner

	// appendMu serializes the producer-state check with the proposal it
	// guards (not the fsync that follows, so commits still group).
	appendMu  sync.Mutex
	producers producerState
	guards    txnGuards // txn_guard.go

	fs         vfs.FS
	snapMu     sync.Mutex     // serializes producer snapshot files' writes and pruning (a leaf)
	snapWG     sync.WaitGroup // snapshot writes in the background
	logger     *slog.Logger
	now        func() time.Time
	expiration time.Duration // producer.id.expiration.ms; 0: never

	mu            sync.Mutex
	cfg           TopicConfig
	highWatermark int64
	leaderEpoch   int32
	changed       chan struct{} // closed and replaced when the high watermark moves
	txn           txnLog        // derived from producers (txn.go); written under appendMu too
	epochs        epochCache

	rs        *raftState    // the partition's raft group (Options.Raft)
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
}

// Options configure a Partition.
type Options struct {
	// Internal marks a partition of an internal topic (__consumer_offsets):
	// only the broker writes to it (Append); Produce and DeleteRecords
	// refuse with ErrInternalTopic, as Kafka does.
	Internal bool
	// Sweeper and Cleaner, when set, run retention and compaction on the
	// partition's log from Open until Close.
	Sweeper *segment.Sweeper
	Cleaner *segment.Cleaner
	// Log is the log's collaborators (clock, logger, dedupe buffer).
	Log segment.Options
	// Raft makes the partition one replica of a raft group
	// (raft_partition.go). Required: every partition is a raft group, a
	// single replica a group of one voter (issue 25: one path whatever
	// the cluster's size); Open returns ErrNoRaft without it.
	Raft *RaftConfig
	// ProducerIDExpiration is how long an idempotent producer's state is
	// kept after its newest batch's timestamp (Kafka's
	// producer.id.expiration.ms, default 1 day); ExpireProducers and Open
	// drop older ones. Zero keeps every producer.
	ProducerIDExpiration time.Duration
}

// Open opens (creating) the partition's log in dir on fs with cfg and
// joins its raft group (opts.Raft; ErrNoRaft when nil): the high
// watermark is the offset after the last entry the group's state machine
// applied (raft delivers the committed entries above it again), so a log
// without saved group state (written before its replica ran on raft) is
// served once its lone voter's first term committed it. Idempotent
// producers' state is the newest producer snapshot at or below the log
// end offset (snapshot.go) with the batches above it replayed from their
// headers; producers expired by Options.ProducerIDExpiration are
// dropped.
func Open(fs vfs.FS, dir string, cfg TopicConfig, opts Options) (*Partition, error) {
	if opts.Raft == nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoRaft, dir)
	}
	l, err := segment.Open(fs, dir, cfg.Log, opts.Log)
	if err != nil {
		return nil, err
	}
	p := &Partition{
		log:           l,
		fs:            fs,
		internal:      opts.Internal,
		sweeper:       opts.Sweeper,
		cleaner:       opts.Cleaner,
		logger:        opts.Log.Logger,
		now:           opts.Log.Now,
		expiration:    opts.ProducerIDExpiration,
		cfg:           cfg,
		highWatermark: l.LogEndOffset(),
		changed:       make(chan struct{}),
		closing:       make(chan struct{}),
	}
	if p.logger == nil {
		p.logger = slog.Default()
	}
	if p.now == nil {
		p.now = time.Now
	}
	if err := p.loadProducers(); err != nil {
		l.Close()
		return nil, fmt.Errorf("replica: producer state of %s: %w", dir, err)
	}
	if err := p.loadEpochs(); err != nil {
		l.Close()
		return nil, fmt.Errorf("replica: leader epochs of %s: %w", dir, err)
	}
	if err := p.startRaft(*opts.Raft); err != nil {
		l.Close()
		return nil, fmt.Errorf("replica: raft group of %s: %w", dir, err)
	}
	if p.sweeper != nil {
		p.sweeper.Add(l)
	}
	if p.cleaner != nil {
		// Kafka's cleaner stops at the first unstable offset: no
		// record of an ongoing transaction is cleaned.
		p.cleaner.Add(l, p.LastStableOffset)
	}
	return p, nil
}

// Close stops retention and compaction of the partition (waiting for a
// clean in progress), syncs and closes its log. Requests still holding the
// partition get segment.ErrClosed. The partition's group leaves its
// Host first (Host.RemoveGroup: no worker touches it once Close returns)
// and its waiting proposals fail (NOT_LEADER_OR_FOLLOWER, retriable); the
// group's saved state stays in the HardStateStore, so a reopen resumes
// it. A replica leaving the broker: Close, then HardStateStore.Delete
// and remove the folder.
func (p *Partition) Close() error {
	// No worker touches the storage once the group has left; the
	// proposals it would have completed fail (retriable).
	p.rs.host.RemoveGroup(p.rs.id)
	p.rs.failAll(p.notLeader("the partition closed"))
	p.stopSnapshots() // raft_snapfiles.go
	p.closeOnce.Do(func() { close(p.closing) })
	if p.sweeper != nil {
		p.sweeper.Remove(p.log)
	}
	if p.cleaner != nil {
		p.cleaner.Remove(p.log)
	}
	p.appendMu.Lock()
	snap := p.snapshotLocked(p.log.LogEndOffset())
	p.appendMu.Unlock()
	p.snapWG.Wait() // snapshots of rolls still being written
	snap()
	err := p.log.Close()
	// A roll that raced with Close started its snapshot under appendMu:
	// taking it once orders that Add before this Wait.
	p.appendMu.Lock()
	//lint:ignore SA2001 a barrier: the empty section orders a racing roll's Add before the Wait
	p.appendMu.Unlock()
	p.snapWG.Wait()
	return err
}

// Failed returns why the partition's log refuses writes, or nil: an IO
// error (wrapping segment.ErrFailed; a reopen recovers it) or damage
// (a *segment.DamageError, errors.Is segment.ErrDamaged; the log serves
// the offsets below it until an operator truncates it).
func (p *Partition) Failed() error { return p.log.Failed() }

// Dir returns the partition's folder.
func (p *Partition) Dir() string { return p.log.Dir() }

// Internal reports whether the partition belongs to an internal topic.
func (p *Partition) Internal() bool { return p.internal }

// Config returns the topic configuration in force.
func (p *Partition) Config() TopicConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// SetConfig applies a changed topic configuration: the produce rules from
// the next Produce, the log's settings (retention, roll, flush.messages,
// flush.ms, compaction) from its next append, sync or pass
// (segment.index.bytes from the next roll). It returns an error wrapping
// segment.ErrInvalidConfig and changes nothing when cfg.Log is invalid.
func (p *Partition) SetConfig(cfg TopicConfig) error {
	if err := p.log.SetConfig(cfg.Log); err != nil {
		return err
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	return nil
}

// LeaderEpoch returns the epoch stamped into appended batches.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderEpoch
}

// CheckLeaderEpoch checks a request's current leader epoch against the
// partition's (KIP-320, Kafka's Partition.checkCurrentLeaderEpoch): -1
// (or any negative) skips the check; a newer one returns
// ErrUnknownLeaderEpoch (the client knows of a leader this replica does
// not yet), an older one ErrFencedLeaderEpoch.
func (p *Partition) CheckLeaderEpoch(current int32) error {
	epoch := p.LeaderEpoch()
	switch {
	case current < 0 || current == epoch:
		return nil
	case current > epoch:
		return fmt.Errorf("%w: %d, the partition's is %d", ErrUnknownLeaderEpoch, current, epoch)
	default:
		return fmt.Errorf("%w: %d, the partition's is %d", ErrFencedLeaderEpoch, current, epoch)
	}
}

// HighWatermark returns the offset below which records are committed and
// may be served to consumers.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.highWatermark
}

// LogEndOffset returns the offset the next appended record gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// LogStartOffset returns the first readable offset.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// Size returns the bytes of the partition's segment files (indexes
// excluded), as Kafka's DescribeLogDirs counts them.
func (p *Partition) Size() int64 { return p.log.Size() }

// NumSegments returns the number of segments, the active one included.
func (p *Partition) NumSegments() int { return p.log.NumSegments() }

// AppendOptions are per-append choices of the broker's own writes.
type AppendOptions struct {
	// LogAppendTime sets the broker's clock as the batch timestamp.
	LogAppendTime bool
	// VerifyTxn and Guard: as ProduceOptions' (the group coordinator's
	// transactional offset commits are verified as a produce is).
	VerifyTxn bool
	Guard     TxnGuard
	// InLeaderEpoch, when set, appends only while the partition leads in
	// LeaderEpoch, checked where the batch takes its place in the log (on
	// a raft leader, in proposal order): a coordinator whose state was
	// loaded in that epoch never writes in a later one, when another
	// leader may have written in between (Kafka's coordinators check
	// their coordinator epoch, the partition's leader epoch, before they
	// append). Otherwise the append fails with a *NotLeaderError.
	InLeaderEpoch bool
	LeaderEpoch   int32
}

// appendReq is an append's choices: LogAppendTime, acks, and the
// verification guard of a transactional batch (txn_guard.go).
type appendReq struct {
	logAppendTime bool
	acks          int16
	verifyTxn     bool
	guard         TxnGuard
	inEpoch       bool  // AppendOptions.InLeaderEpoch
	epoch         int32 // AppendOptions.LeaderEpoch
	txnVersion    int16 // a marker's TxnMarker.TransactionVersion
}

// Append appends one record batch the broker itself built (the group
// coordinator's records; no client rules apply) and returns once it is
// committed. b is modified in place (offsets, leader epoch). Errors are
// Produce's, without the validation ones. It is a produce with acks=all: leader only (a follower returns a
// *NotLeaderError), min.insync.replicas checked (ErrNotEnoughReplicas),
// returned once the entry committed; an internal topic's partition takes
// it too.
func (p *Partition) Append(ctx context.Context, b []byte, opts AppendOptions) (segment.AppendResult, error) {
	pd, err := p.appendOwn(b, opts)
	if err != nil {
		return pd.res, err
	}
	return pd.Wait(ctx)
}

// AppendAsync is Append without the wait: it returns once the batch has
// its place in the log (proposed on the leader, raft_partition.go), and the Pending's Wait returns once it is committed. Batches
// appended one after another commit in that order, or fail from the first
// that fails (a leadership change drops every later proposal too).
func (p *Partition) AppendAsync(b []byte, opts AppendOptions) (*Pending, error) {
	return p.appendOwn(b, opts)
}

// appendOwn checks a batch the broker built (segment.ValidateAppend) and
// appends it with acks=all.
func (p *Partition) appendOwn(b []byte, opts AppendOptions) (*Pending, error) {
	h, err := segment.ValidateAppend(b)
	if err != nil {
		return &Pending{res: noResult}, err
	}
	return p.propose(b, &h, appendReq{
		logAppendTime: opts.LogAppendTime, acks: AcksAll, verifyTxn: opts.VerifyTxn, guard: opts.Guard,
		inEpoch: opts.InLeaderEpoch, epoch: opts.LeaderEpoch,
	})
}

// Pending is an appended batch on its way to being committed.
type Pending struct {
	res  segment.AppendResult
	done chan struct{} // closed once committed or failed; nil: already committed
	err  error         // set before done is closed
}

// Wait returns once the batch is committed (the high watermark covers it)
// or failed, or ctx ends (ctx's error; the commit still completes). The
// result holds the batch's offsets and LogAppendTime (-1 unless set).
func (pd *Pending) Wait(ctx context.Context) (segment.AppendResult, error) {
	if pd.done == nil {
		return pd.res, pd.err
	}
	select {
	case <-pd.done:
		return pd.res, pd.err
	case <-ctx.Done():
		return noResult, ctx.Err()
	}
}

var noResult = segment.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}

// advance moves the high watermark up to hw (never down) and wakes
// waiters.
func (p *Partition) advance(hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw <= p.highWatermark {
		return
	}
	p.highWatermark = hw
	p.txn.replicated(hw)
	close(p.changed)
	p.changed = make(chan struct{})
}

// Changed returns a channel closed the next time the high watermark moves
// (for Fetch long polls).
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Read returns committed batches (below the high watermark) from offset,
// KIP-74 style; see segment.Log.Read. The caller calls Release on the
// result once its bytes are sent or copied.
func (p *Partition) Read(offset int64, maxBytes int) (segment.ReadResult, error) {
	return p.log.Read(offset, maxBytes, p.HighWatermark())
}

// FetchResult is what Fetch read, from one view of the partition.
type FetchResult struct {
	// Records are the committed batches read, below HighWatermark (empty
	// when none was asked for or the read failed); the caller calls
	// Records.Release once their bytes are sent or copied.
	Records segment.ReadResult
	// HighWatermark, LastStableOffset and LogStartOffset are the view's
	// (LastStableOffset: see Partition.LastStableOffset).
	HighWatermark, LastStableOffset, LogStartOffset int64
	// AbortedTransactions are, for FetchCommitted, the aborted
	// transactions overlapping the records returned; nil for Fetch.
	AbortedTransactions []AbortedTxn
	// Changed is closed the next time the high watermark moves past
	// this view's (a Fetch long poll waits on it: no move is missed).
	Changed <-chan struct{}
}

// Fetch is a read_uncommitted consumer's read: the high watermark, the
// last stable offset, the channel that tells when the high watermark next
// moves and the log start offset, taken together, and the
// committed batches from offset up to that high watermark, KIP-74 style
// (maxBytes, at least one batch; maxBytes <= 0 reads none, only the
// offsets). The records and the offsets answered come from the same view:
// no batch beyond the high watermark returned. The offsets are filled on
// a read error too (OFFSET_OUT_OF_RANGE answers carry them).
func (p *Partition) Fetch(offset int64, maxBytes int) (FetchResult, error) {
	p.mu.Lock()
	fr := FetchResult{HighWatermark: p.highWatermark, Changed: p.changed}
	fr.LastStableOffset = p.txn.lso(p.highWatermark)
	p.mu.Unlock()
	fr.LogStartOffset = p.log.LogStartOffset()
	if maxBytes <= 0 {
		return fr, nil
	}
	var err error
	fr.Records, err = p.log.Read(offset, maxBytes, fr.HighWatermark)
	if err == nil {
		fr.LogStartOffset = fr.Records.LogStartOffset // the records' own view
	}
	return fr, err
}

// ReadBytes is Read copying the batches into dst (appended).
func (p *Partition) ReadBytes(dst []byte, offset int64, maxBytes int) ([]byte, segment.ReadResult, error) {
	return p.log.ReadBytes(dst, offset, maxBytes, p.HighWatermark())
}

// OffsetForTimestamp returns the first committed offset whose record
// timestamp is >= ts, with that timestamp (ListOffsets by time); ok is
// false when there is none below the high watermark.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, recordTs int64, ok bool, err error) {
	hw := p.HighWatermark()
	offset, recordTs, ok, err = p.log.OffsetForTimestamp(ts)
	return offset, recordTs, ok && offset < hw, err
}

// MaxTimestamp returns the largest record timestamp of the committed log
// and the offset of its record (KIP-734); ok is false when there is none.
func (p *Partition) MaxTimestamp() (ts, offset int64, ok bool, err error) {
	hw := p.HighWatermark()
	ts, offset, ok, err = p.log.MaxTimestamp()
	return ts, offset, ok && offset < hw, err
}

// DeleteOldSegments applies retention now (the Sweeper does it every
// log.retention.check.interval.ms) and returns the segments deleted.
func (p *Partition) DeleteOldSegments() (int, error) { return p.log.DeleteOldSegments() }

// CleanableRatio reports the log's dirty ratio below the high watermark
// and whether the cleaner would clean it now (see segment.Log).
func (p *Partition) CleanableRatio() (float64, bool) {
	return p.log.CleanableRatio(p.HighWatermark())
}

// loadProducers rebuilds the producer state at Open (and after a
// truncation): the newest usable snapshot, then the headers of the batches
// at or above its offset, markers read whole (txn.go: the transactions
// they end). The log's transaction index is rebuilt from the same offset
// (Kafka's LogLoader recovering segments' .txnindex with the producer
// state): the entries at or above the snapshot's offset are dropped and
// the replay's aborts added again; a version 2 snapshot's aborted list
// (a log from before the .txnindex) is added first.
func (p *Partition) loadProducers() error {
	// A damaged log ends at the damage, not where its files do: its
	// snapshots above the damage are kept (loadSnapshot only reads).
	damaged := p.log.Damage() != nil
	ps, listed, snap, err := loadSnapshot(p.fs, p.log.Dir(), p.log.LogEndOffset(), !damaged, p.logger)
	if err != nil {
		return err
	}
	t := newTxnLog(ps)
	var aborts []abortedTxn
	err = p.log.ScanHeadersControl(max(snap, 0), func(h batch.Header, control []byte) error {
		if h.BaseOffset >= snap {
			lat := int64(-1)
			if h.LogAppendTime() {
				lat = h.MaxTimestamp
			}
			if a, ok, _ := applyBatch(ps, &t, &h, control, lat); ok {
				aborts = append(aborts, a) // added once the scan's read lock is released
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !damaged { // a damaged log refuses writes; its index stays as found
		if err := p.rebuildTxnIndex(max(snap, 0), listed, aborts); err != nil {
			return err
		}
	}
	p.producers = ps
	p.mu.Lock()
	p.txn = t
	p.txn.replicated(p.highWatermark)
	p.mu.Unlock()
	if p.expiration > 0 {
		ps.expire(p.now().UnixMilli(), p.expiration.Milliseconds())
	}
	return nil
}

// snapshotLocked takes the producer state as the snapshot at offset (the
// state of every batch below it) and returns the function that writes it;
// the caller runs that after releasing appendMu, which it holds now.
// Writes are serialized (snapMu). A failure is logged, not returned: the
// state stays in memory, and the next Open falls back to an older
// snapshot. A damaged log's snapshots are left as they are (its log end
// offset is the damage's, not the files').
func (p *Partition) snapshotLocked(offset int64) func() {
	if p.log.Damage() != nil {
		return func() {}
	}
	data := encodeSnapshot(p.producers)
	return func() {
		p.snapMu.Lock()
		defer p.snapMu.Unlock()
		// The snapshot promises the transaction index below offset:
		// every abort below it was added (noted before the roll), and
		// is made durable first (a Sync in flight may predate it).
		if err := p.log.SyncAbortedTxns(); err != nil {
			p.logger.Warn("replica: syncing the transaction index failed; no producer snapshot", "dir", p.log.Dir(), "offset", offset, "err", err)
			return
		}
		if err := writeSnapshot(p.fs, p.log.Dir(), offset, data, p.log.LogStartOffset()); err != nil {
			p.logger.Warn("replica: writing the producer snapshot failed", "dir", p.log.Dir(), "offset", offset, "err", err)
		}
	}
}

// ExpireProducers removes the idempotent producers whose newest batch is
// older than Options.ProducerIDExpiration as of now (Kafka's
// producer.id.expiration.ms, checked every
// producer.id.expiration.check.interval.ms) and returns how many it
// removed; with no expiration set it removes none.
func (p *Partition) ExpireProducers() int {
	if p.expiration <= 0 {
		return 0
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.expireGuardsLocked(p.now().UnixMilli(), p.expiration.Milliseconds())
	return p.producers.expire(p.now().UnixMilli(), p.expiration.Milliseconds())
}
