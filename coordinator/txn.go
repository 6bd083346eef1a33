package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction coordinator (Kafka's TransactionCoordinator,
// TransactionStateManager, TransactionMetadata and
// TransactionMarkerChannelManager; KIP-98, KIP-360, KIP-890).
//
// # Shards
//
// A transactional id lives on one partition of __transaction_state:
// abs(Java String.hashCode(id)) mod the partition count (TxnPartitionFor).
// Each partition this broker leads is a shard, loaded by Load (replaying
// its records, txn_records.go) and dropped by Unload.
//
// # Writes and locks
//
// TxnCoordinator.mu guards the shard map and closed; each shard's mu
// guards its transactions. Lock order: TxnCoordinator.mu, then a shard's
// mu; neither is held across Log.Append, ProducerIDs or MarkerWriter. A
// change to a transaction is checked under the shard's mu, which marks
// the transaction pending (Kafka's pendingState: any other change to it
// answers CONCURRENT_TRANSACTIONS meanwhile) and releases the lock; the
// new state is appended to the log; once Append returned nil, the lock is
// taken again and the state applied. A failed Append leaves memory as it
// was. So records of one transactional id reach the log in the order they
// are applied, one at a time.

// TxnConfig configures a TxnCoordinator. Durations are Kafka's broker keys
// of the same names; zero (or negative) takes Kafka's default.
type TxnConfig struct {
	// Partitions is transaction.state.log.num.partitions: the partition
	// count of __transaction_state. Default 50.
	Partitions int32
	// MaxTimeout is transaction.max.timeout.ms: the longest
	// transaction.timeout.ms a producer may ask for. Default 15 min.
	MaxTimeout time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how often
	// ongoing transactions past their timeout are aborted. Default 10 s.
	AbortTimedOutInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms: how long a
	// transactional id with no transaction in progress is kept after its
	// last update. Default 7 days.
	IDExpiration time.Duration
	// RemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms: how often
	// expired transactional ids are removed. Default 1 h.
	RemoveExpiredInterval time.Duration
	// Clock defaults to RealClock.
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ProducerIDs hands out a new producer id (the broker's block
	// allocator). Required. An error that is a *kerr.Error is answered
	// as that code; any other as COORDINATOR_LOAD_IN_PROGRESS (Kafka's
	// ProducerIdManager while it waits for a block).
	ProducerIDs func() (int64, error)
	// Markers writes transaction markers (WriteTxnMarkers to the
	// partitions' leaders). Required. It must return once its ctx is done.
	Markers MarkerWriter
	// PartitionExists, if set, tells whether a topic partition exists:
	// AddPartitionsToTxn v0-v3 then answers UNKNOWN_TOPIC_OR_PARTITION
	// for the missing ones and OPERATION_NOT_ATTEMPTED for the others
	// (KafkaApis.handleAddPartitionsToTxnRequest). Called without locks.
	PartitionExists func(TxnPartition) bool
	// ConcurrentWait is how long AddPartitionsToTxn and AddOffsetsToTxn
	// wait for the producer's previous transaction to complete (its
	// markers written) before answering CONCURRENT_TRANSACTIONS, which
	// clients retry after a back-off (franz-go and the Java client: 20
	// ms). 0 answers at once, as Kafka does; the answer is the same either
	// way, only sooner. Real time, not Clock's.
	ConcurrentWait time.Duration
	// BrokerAddWait is ConcurrentWait for AddPartitionsToTxn v5 without
	// VerifyOnly: a broker adding a partition for a produce (v12+) or a
	// TxnOffsetCommit (v5+) of a transaction.version 2 client, which sends
	// its next transaction's batches as soon as EndTxn answers. A retriable
	// answer there fails the transaction's first batch to the partition,
	// and the client's next batch, already pipelined behind it, would be
	// out of sequence; so it waits longer (Kafka's broker retries its
	// CONCURRENT_TRANSACTIONS up to add.partitions.to.txn.retry.backoff.max.ms,
	// its markers written in milliseconds). 0 takes ConcurrentWait.
	BrokerAddWait time.Duration
}

// DefaultTxnConfig returns Kafka's defaults (ProducerIDs and Markers are
// left for the caller).
func DefaultTxnConfig() TxnConfig {
	return TxnConfig{
		Partitions:            50,
		MaxTimeout:            900_000 * time.Millisecond,
		AbortTimedOutInterval: 10_000 * time.Millisecond,
		IDExpiration:          604_800_000 * time.Millisecond,
		RemoveExpiredInterval: 3_600_000 * time.Millisecond,
		Clock:                 RealClock{},
		Logger:                slog.Default(),
	}
}

// EnsureDefaults fills zero (or negative) fields and a nil Clock or Logger
// with DefaultTxnConfig's values.
func (c *TxnConfig) EnsureDefaults() {
	d := DefaultTxnConfig()
	if c.Partitions <= 0 {
		c.Partitions = d.Partitions
	}
	for _, f := range []struct{ f, v *time.Duration }{
		{&c.MaxTimeout, &d.MaxTimeout},
		{&c.AbortTimedOutInterval, &d.AbortTimedOutInterval},
		{&c.IDExpiration, &d.IDExpiration},
		{&c.RemoveExpiredInterval, &d.RemoveExpiredInterval},
	} {
		if *f.f <= 0 {
			*f.f = *f.v
		}
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
}

// TxnPartition is a topic partition of a transaction.
type TxnPartition struct {
	Topic     string
	Partition int32
}

// Marker is a transaction marker to write (WriteTxnMarkers' marker).
type Marker struct {
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	// CoordinatorEpoch is the leader epoch of the __transaction_state
	// partition of the coordinator writing the marker.
	CoordinatorEpoch int32
	// TransactionVersion is the transaction's client transaction version
	// (KIP-890: 2 when every EndTxn bumps the epoch, so ProducerEpoch is
	// then the bumped one), sent as WriteTxnMarkers v2's
	// TransactionVersion (KIP-1228, as Kafka's coordinator sends its
	// TransactionMetadata's clientTransactionVersion): a partition leader
	// checks a version 2 marker's epoch with that version's rule.
	TransactionVersion int16
}

// MarkerWriter writes transaction markers.
type MarkerWriter interface {
	// WriteMarkers writes m to each partition and returns the partitions'
	// errors (nil entries or a missing key: written). The coordinator
	// retries partitions with retriable errors (with a backoff, until
	// written, or the topic/partition no longer exists:
	// UNKNOWN_TOPIC_OR_PARTITION drops it, as Kafka's
	// TransactionMarkerChannelManager).
	WriteMarkers(ctx context.Context, m Marker, parts []TxnPartition) map[TxnPartition]error
}

// TxnCoordinator serves the transactional ids of the __transaction_state
// partitions loaded into it. Its request methods take and return kmsg
// messages, as Coordinator's do.
type TxnCoordinator struct {
	cfg TxnConfig

	mu     sync.Mutex
	shards map[int32]*txnShard
	closed bool
	stops  []func() bool // the periodic timers

	wg sync.WaitGroup // marker and completion goroutines
}

// txnShard is one loaded __transaction_state partition.
type txnShard struct {
	partition int32
	epoch     int32 // the coordinator epoch: the partition's leader epoch
	log       Log
	ctx       context.Context // done once the shard is unloaded
	cancel    context.CancelFunc

	mu      sync.Mutex
	loading bool
	gone    bool // unloaded (or the coordinator closed)
	txns    map[string]*txnMeta
	// changed is closed (and replaced) whenever a write is applied or
	// fails (ConcurrentWait's waiters).
	changed chan struct{}
}

// noteChangedLocked wakes who waits on s.changed (s.mu held).
func (s *txnShard) noteChangedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// txnMeta is one transactional id's state: Kafka's TransactionMetadata.
type txnMeta struct {
	id string
	// producerID and epoch are the current producer id and epoch; prev is
	// the producer id before the last change (KIP-360 retries after a
	// rotation), next the one a TV2 completion moves to (KIP-890, -1 if
	// none).
	producerID, prevProducerID, nextProducerID int64
	epoch                                      int16
	// lastEpoch is the epoch before the last bump, for KIP-360 retries of
	// InitProducerId; -1 if none. Not in the log.
	lastEpoch int16
	timeoutMs int32 // transaction.timeout.ms
	state     kmsg.TransactionState
	parts     map[TxnPartition]struct{}
	startMs   int64 // ms since the epoch; -1 when no transaction started
	updateMs  int64 // ms since the epoch
	tv        int16 // client transaction version (KIP-890)

	// pending is set while a change to this transaction is being written.
	pending bool
	// queued are the AddPartitionsToTxn calls waiting for this prepared
	// transaction to complete (see queuedAdd). Not in the log.
	queued []*queuedAdd
}

// queuedAdd is an AddPartitionsToTxn (or AddOffsetsToTxn) of the
// producer's next transaction that waits while the previous one is
// completing. Once the markers are written, complete folds the queued
// adds of the producer id and epoch the completion leaves into the
// completion's record: one write of the next transaction, Ongoing with
// their partitions, instead of CompleteCommit (or CompleteAbort) and then
// the add (Sluice's: Kafka answers CONCURRENT_TRANSACTIONS until the
// completion is written and the client retries). The record is the one
// Kafka's add would write after the completion; a coordinator loading it
// finds the next transaction ongoing, the previous one's markers being
// already on every partition.
type queuedAdd struct {
	pid   int64
	epoch int16
	parts []TxnPartition
	tv    int16
}

// clone returns a copy of t with its own partition set.
func (t *txnMeta) clone() *txnMeta {
	n := *t
	n.parts = make(map[TxnPartition]struct{}, len(t.parts))
	for tp := range t.parts {
		n.parts[tp] = struct{}{}
	}
	n.pending = false
	n.queued = nil
	return &n
}

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: an epoch
// of Short.MaxValue-1 or more cannot be bumped again (the last one is kept
// for fencing).
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// NewTxn returns a transaction coordinator serving no partitions yet; see
// Load. It starts the timers that abort timed-out transactions and remove
// expired transactional ids.
func NewTxn(cfg TxnConfig) *TxnCoordinator {
	cfg.EnsureDefaults()
	c := &TxnCoordinator{cfg: cfg, shards: map[int32]*txnShard{}}
	c.mu.Lock()
	c.schedule(cfg.AbortTimedOutInterval, c.abortTimedOut)
	c.schedule(cfg.RemoveExpiredInterval, c.removeExpired)
	c.mu.Unlock()
	return c
}

// schedule runs f every d until Close. The caller holds c.mu.
func (c *TxnCoordinator) schedule(d time.Duration, f func()) {
	i := len(c.stops)
	c.stops = append(c.stops, nil)
	var run func()
	run = func() {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		f()
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed {
			c.stops[i] = c.cfg.Clock.AfterFunc(d, run)
		}
	}
	c.stops[i] = c.cfg.Clock.AfterFunc(d, run)
}

// TxnPartitionFor is the __transaction_state partition of transactionalID:
// Kafka's TransactionStateManager.partitionFor, abs(Java
// String.hashCode(id)) mod partitions, with Utils.abs (MinInt32 -> 0).
func TxnPartitionFor(transactionalID string, partitions int32) int32 {
	return Partition(transactionalID, partitions)
}

// Partition is transactionalID's __transaction_state partition for this
// coordinator's partition count.
func (c *TxnCoordinator) Partition(transactionalID string) int32 {
	return TxnPartitionFor(transactionalID, c.cfg.Partitions)
}

// Owns reports whether this coordinator serves transactionalID's
// partition (loaded or loading).
func (c *TxnCoordinator) Owns(transactionalID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[c.Partition(transactionalID)] != nil
}

// Load makes the coordinator serve __transaction_state partition p, whose
// records log holds, as coordinator epoch coordinatorEpoch (the
// partition's leader epoch): it replays them, then serves. Requests for
// its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile.
// A transaction left in PrepareCommit or PrepareAbort by the previous
// leader has its markers sent again and is completed (Kafka's
// loadTransactionsForTxnTopicPartition). Loading a loaded partition
// replaces it. Load returns ErrUnloaded if the partition is unloaded or
// loaded again while it replays, ErrClosed if the coordinator is closed.
// A record that cannot be read is skipped and logged.
func (c *TxnCoordinator) Load(p int32, coordinatorEpoch int32, log Log) error {
	ctx, cancel := context.WithCancel(context.Background())
	s := &txnShard{partition: p, epoch: coordinatorEpoch, log: log, ctx: ctx, cancel: cancel, loading: true, txns: map[string]*txnMeta{}, changed: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return ErrClosed
	}
	if old := c.shards[p]; old != nil {
		old.drop()
	}
	c.shards[p] = s
	c.mu.Unlock()

	txns := map[string]*txnMeta{}
	var n, skipped int
	err := log.Replay(func(r Record) error {
		n++
		id, t, ok, err := decodeTxnRecord(r)
		switch {
		case err != nil:
			skipped++
			c.cfg.Logger.Error("coordinator: skipping a record of __transaction_state that cannot be read", "partition", p, "err", err)
		case !ok:
		case t == nil, t.state == txnDead:
			// A tombstone (or a Dead state, which Kafka never writes but
			// which means the same): the id expired.
			delete(txns, id)
		default:
			txns[id] = t
		}
		return nil
	})

	c.mu.Lock()
	if err != nil {
		if c.shards[p] == s {
			delete(c.shards, p)
		}
		c.mu.Unlock()
		s.drop()
		return fmt.Errorf("coordinator: loading __transaction_state-%d: %w", p, err)
	}
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.shards[p] != s:
		c.mu.Unlock()
		return fmt.Errorf("coordinator: loading __transaction_state-%d: %w", p, ErrUnloaded)
	}
	s.mu.Lock()
	s.txns = txns
	s.loading = false
	loaded := len(txns) // txns is the shard's now, guarded by s.mu
	var resume []*txnMeta
	for _, t := range txns {
		if t.state == txnPrepareCommit || t.state == txnPrepareAbort {
			resume = append(resume, t)
		}
	}
	s.mu.Unlock()
	c.mu.Unlock()
	for _, t := range resume {
		c.startMarkers(s, t)
	}
	c.cfg.Logger.Debug("coordinator: __transaction_state partition loaded", "partition", p, "epoch", coordinatorEpoch, "records", n, "skipped", skipped, "transactions", loaded, "completing", len(resume))
	return nil
}

// Unload stops serving partition p: its requests in flight answer
// NOT_COORDINATOR and its marker sending stops (the next leader sends
// them again).
func (c *TxnCoordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.shards[p]; s != nil {
		s.drop()
		delete(c.shards, p)
	}
}

// drop marks s gone and stops its background work.
func (s *txnShard) drop() {
	s.mu.Lock()
	s.gone = true
	s.noteChangedLocked() // waiters answer NOT_COORDINATOR now
	s.mu.Unlock()
	s.cancel()
}

// Close stops the timers, unloads every partition and waits for the
// marker goroutines to return. Requests then answer
// COORDINATOR_NOT_AVAILABLE.
func (c *TxnCoordinator) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		for _, stop := range c.stops {
			if stop != nil {
				stop()
			}
		}
		for p, s := range c.shards {
			s.drop()
			delete(c.shards, p)
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// shardFor finds transactionalID's shard, or the code to answer:
// COORDINATOR_NOT_AVAILABLE after Close, NOT_COORDINATOR when the
// partition is not served here, COORDINATOR_LOAD_IN_PROGRESS while it
// replays (TransactionStateManager.getTransactionState).
func (c *TxnCoordinator) shardFor(transactionalID string) (*txnShard, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	s := c.shards[c.Partition(transactionalID)]
	if s == nil {
		return nil, kerr.NotCoordinator.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loading {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return s, 0
}

// now is the clock in ms since the epoch, as the log stores timestamps.
func (c *TxnCoordinator) now() int64 { return c.cfg.Clock.Now().UnixMilli() }

// write appends rec, the new state of t (next; nil for a tombstone), and
// applies it once Append returned nil. The caller set t.pending under
// s.mu and released it; write clears it. Memory is left as it was when
// the append fails (the code then follows Kafka's
// TransactionStateManager.appendTransactionToLog) or when the shard was
// unloaded meanwhile (NOT_COORDINATOR). fresh marks a t that exists only
// in memory (a new transactional id): a failed write removes it.
func (c *TxnCoordinator) write(ctx context.Context, s *txnShard, t *txnMeta, next *txnMeta, fresh bool) int16 {
	var rec Record
	if next == nil {
		rec = txnTombstone(t.id)
	} else {
		rec = txnRecord(next)
	}
	err := s.log.Append(ctx, []Record{rec})
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.noteChangedLocked()
	t.pending = false
	if err != nil || s.gone {
		if fresh && s.txns[t.id] == t {
			delete(s.txns, t.id)
		}
		if err != nil {
			return c.writeFailed(s, err)
		}
		return kerr.NotCoordinator.Code
	}
	if next == nil {
		if s.txns[t.id] == t {
			delete(s.txns, t.id)
		}
		return 0
	}
	t.apply(next)
	return 0
}

// apply makes next t's state. The id is never written after t is
// created, so it may be read without the shard's lock.
func (t *txnMeta) apply(next *txnMeta) {
	t.producerID, t.prevProducerID, t.nextProducerID = next.producerID, next.prevProducerID, next.nextProducerID
	t.epoch, t.lastEpoch, t.timeoutMs, t.state = next.epoch, next.lastEpoch, next.timeoutMs, next.state
	t.parts, t.startMs, t.updateMs, t.tv = next.parts, next.startMs, next.updateMs, next.tv
	t.pending = false
}

// writeFailed logs a failed append and maps it as Kafka's
// appendTransactionToLog does: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT (a context
// deadline too) become COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER
// and KAFKA_STORAGE_ERROR become NOT_COORDINATOR; MESSAGE_TOO_LARGE and
// RECORD_LIST_TOO_LARGE become UNKNOWN_SERVER_ERROR; another kerr code is
// answered as it is; any other error is NOT_COORDINATOR (the write could
// not be vouched for: the client finds the coordinator again).
func (c *TxnCoordinator) writeFailed(s *txnShard, err error) int16 {
	c.cfg.Logger.Warn("coordinator: writing to __transaction_state failed", "partition", s.partition, "err", err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.CoordinatorNotAvailable.Code
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.NotCoordinator.Code
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}

// newProducerID allocates a producer id, or answers the code of its error.
func (c *TxnCoordinator) newProducerID() (int64, int16) {
	id, err := c.cfg.ProducerIDs()
	if err == nil {
		return id, 0
	}
	c.cfg.Logger.Warn("coordinator: allocating a producer id failed", "err", err)
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return -1, ke.Code
	}
	return -1, kerr.CoordinatorLoadInProgress.Code
}

// abortTimedOut aborts, with an epoch bump, every Ongoing transaction
// whose start is more than its timeout ago (Kafka's
// abortTimedOutTransactions and timedOutTransactions): the producer, when
// it comes back, is fenced. fenceAbort checks each again as it starts
// the abort. The writes use the shard's context: unloading the shard
// cancels them.
func (c *TxnCoordinator) abortTimedOut() {
	now := c.now()
	for _, s := range c.loadedShards() {
		s.mu.Lock()
		var due []timedOutTxn
		for _, t := range s.txns {
			if t.state == txnOngoing && !t.pending && t.timedOut(now) {
				due = append(due, timedOutTxn{t: t, pid: t.producerID, epoch: t.epoch})
			}
		}
		s.mu.Unlock()
		for _, d := range due {
			if code := c.fenceAbort(s.ctx, s, d); code != 0 {
				c.cfg.Logger.Debug("coordinator: aborting a timed-out transaction did not happen", "transactional_id", d.t.id, "error", kerr.ErrorForCode(code))
			} else {
				c.cfg.Logger.Info("coordinator: aborting a timed-out transaction", "transactional_id", d.t.id)
			}
		}
	}
}

// timedOut reports whether t's transaction started more than its timeout
// before nowMs (s.mu held).
func (t *txnMeta) timedOut(nowMs int64) bool {
	return t.startMs+int64(t.timeoutMs) < nowMs
}

// removeExpired removes the transactional ids in Empty, CompleteCommit or
// CompleteAbort whose last update is IDExpiration ago or more, writing a
// tombstone for each (Kafka's removeExpiredTransactionalIds), with the
// shard's context.
func (c *TxnCoordinator) removeExpired() {
	limit := c.now() - c.cfg.IDExpiration.Milliseconds()
	for _, s := range c.loadedShards() {
		s.mu.Lock()
		var due []*txnMeta
		for _, t := range s.txns {
			switch t.state {
			case txnEmpty, txnCompleteCommit, txnCompleteAbort:
				if !t.pending && t.updateMs <= limit {
					t.pending = true
					due = append(due, t)
				}
			}
		}
		s.mu.Unlock()
		for _, t := range due {
			if code := c.write(s.ctx, s, t, nil, false); code != 0 {
				c.cfg.Logger.Warn("coordinator: removing an expired transactional id failed", "transactional_id", t.id, "error", kerr.ErrorForCode(code))
			}
		}
	}
}

// loadedShards returns the shards that finished loading.
func (c *TxnCoordinator) loadedShards() []*txnShard {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*txnShard
	for _, s := range c.shards {
		s.mu.Lock()
		if !s.loading {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}
