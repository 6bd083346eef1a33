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
)

// Record is one record of a __consumer_offsets partition. A nil Value is a
// tombstone.
type Record struct {
	Key, Value []byte
}

// Log is one __consumer_offsets partition as the coordinator sees it.
type Log interface {
	// Append writes recs as one record batch and returns once it is
	// committed (durable and below the high watermark). An error means the
	// records may or may not be in the log; the coordinator then fails the
	// request with a retriable error and does not apply them.
	Append(ctx context.Context, recs []Record) error
	// Replay calls fn for every record from the log start offset to the
	// high watermark, in offset order.
	Replay(fn func(Record) error) error
}

// AsyncLog is a Log that can take a batch without waiting for its commit:
// AppendAsync returns once the batch has its place in the log order (it
// is proposed, or written), and wait returns once it is committed, with
// Append's errors. Batches appended one after another are committed in
// that order or not at all. A Log that implements it lets offset commits
// overlap: the shard's write mutex is then held across the append, never
// across the commit (a quorum round trip).
type AsyncLog interface {
	Log
	AppendAsync(recs []Record) (wait func(context.Context) error, err error)
}

// TopicInfo describes one topic for offset requests by topic ID (OffsetCommit
// v10+, OffsetFetch v10+) and for the KIP-848 assignors.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// Topics looks up topics. Implementations must be safe for concurrent use
// and must not call back into the coordinator.
type Topics interface {
	// All returns every topic (internal ones included).
	All() []TopicInfo
	// ByName returns a topic by name.
	ByName(name string) (TopicInfo, bool)
	// ByID returns a topic by ID.
	ByID(id [16]byte) (TopicInfo, bool)
}

// Config configures a Coordinator. Durations are the broker keys of the
// same names (see server/config). Start from DefaultConfig (Kafka's
// defaults): as in Kafka, zero is a meaningful value of
// InitialRebalanceDelay (no delay), MinSessionTimeout, MaxSessionTimeout
// and OffsetMetadataMaxBytes (no metadata), so a zero there is taken as
// given. EnsureDefaults fills only the fields for which Kafka allows no
// zero (counts, sizes and intervals that are at least 1) and the Clock
// and Logger.
type Config struct {
	// Partitions is offsets.topic.num.partitions: the partition count of
	// __consumer_offsets, which Partition needs. Default 50; at least 1.
	Partitions int32
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty classic group waits for more members.
	// Default 3 s; 0 rebalances at once.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min.session.timeout.ms and group.max.session.timeout.ms: the
	// session timeouts a classic member may ask for. Defaults 6 s and 30
	// min; 0 is a bound like any other.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// GroupMaxSize is group.max.size: the most members a classic group
	// admits. Default math.MaxInt32; at least 1.
	GroupMaxSize int32
	// OffsetsRetention is offsets.retention.minutes: how long the offsets of
	// a group with no members are kept (KIP-211). Default 7 days; at least
	// a minute in Kafka (zero here takes the default).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms.
	// Default 10 min; at least 1 ms.
	OffsetsRetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: the longest
	// commit metadata string. Default 4096 bytes; 0 allows only empty
	// (or null) metadata.
	OffsetMetadataMaxBytes int
	// ConsumerHeartbeatInterval and ConsumerSessionTimeout are
	// group.consumer.heartbeat.interval.ms and
	// group.consumer.session.timeout.ms (KIP-848 groups). Defaults 5 s and
	// 45 s; at least 1 ms.
	ConsumerHeartbeatInterval, ConsumerSessionTimeout time.Duration
	// ConsumerMaxSize is group.consumer.max.size. Default math.MaxInt32;
	// at least 1.
	ConsumerMaxSize int32
	// Topics resolves topic names and IDs. Required.
	Topics Topics
	// Clock defaults to RealClock.
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Suspect, when set and true for the __consumer_offsets partition a
	// group hashes onto, makes the group's requests answer
	// NOT_COORDINATOR, as for a partition not served here: the broker
	// still leads that partition as far as it knows but cannot vouch
	// for it now (a replicated leader without a read lease: cut off or
	// paused, another broker may lead it by now), so what it holds in
	// memory may be stale (an OffsetFetch would read a superseded
	// commit). The client finds the coordinator again and retries. It is
	// called under the coordinator's lock: it must not block.
	Suspect func(partition int32) bool
}

// DefaultConfig returns Kafka's defaults (Topics is left for the caller).
func DefaultConfig() Config {
	return Config{
		Partitions:                    50,
		InitialRebalanceDelay:         3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		GroupMaxSize:                  math.MaxInt32,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		OffsetMetadataMaxBytes:        4096,
		ConsumerHeartbeatInterval:     5 * time.Second,
		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerMaxSize:               math.MaxInt32,
		Clock:                         RealClock{},
		Logger:                        slog.Default(),
	}
}

// EnsureDefaults fills, with DefaultConfig's values, the fields that are
// zero (or negative) where Kafka requires at least 1, and a nil Clock or
// Logger. Fields where zero is meaningful are left as they are.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	dur := func(f *time.Duration, v time.Duration) {
		if *f <= 0 {
			*f = v
		}
	}
	if c.Partitions <= 0 {
		c.Partitions = d.Partitions
	}
	if c.GroupMaxSize <= 0 {
		c.GroupMaxSize = d.GroupMaxSize
	}
	dur(&c.OffsetsRetention, d.OffsetsRetention)
	dur(&c.OffsetsRetentionCheckInterval, d.OffsetsRetentionCheckInterval)
	dur(&c.ConsumerHeartbeatInterval, d.ConsumerHeartbeatInterval)
	dur(&c.ConsumerSessionTimeout, d.ConsumerSessionTimeout)
	if c.ConsumerMaxSize <= 0 {
		c.ConsumerMaxSize = d.ConsumerMaxSize
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
}

// Coordinator serves the groups of the __consumer_offsets partitions loaded
// into it. Its request methods take and return franz-go kmsg messages: the
// group protocol is defined by Kafka's error codes, so the coordinator
// speaks them directly and the server stays a thin dispatcher.
type Coordinator struct {
	cfg Config

	// mu guards shards and all group state below them.
	mu     sync.Mutex
	shards map[int32]*shard
	closed bool

	stopExpiry func() bool
}

// shard is one loaded __consumer_offsets partition.
type shard struct {
	partition int32
	log       Log
	// writeMu orders writes: held from before a record batch is appended
	// until it has been applied, so memory follows log order; or, for a
	// pipelined write (writePipelined: offset commits on an AsyncLog),
	// until it is appended, its apply then waiting for applied, the apply
	// of the write before it.
	writeMu sync.Mutex
	// applied is closed once the newest pipelined write so far has been
	// applied (or failed); nil when none is in flight. Guarded by writeMu.
	applied chan struct{}
	loading bool
	groups  map[string]*group
	// seq numbers the offset commit records applied to the shard, live or
	// replayed, in log order: Kafka compares record offsets to decide
	// whether a committed transaction's offset is newer than a plain
	// commit (txn_offsets.go), and applies follow the log order, so this
	// count orders them as the offsets would.
	seq int64
	// pending are the pending transactional offsets by producer id
	// (Kafka's OffsetMetadataManager.pendingTransactionalOffsets); see
	// txn_offsets.go.
	pending map[int64]pendingOffsets
}

// group is one group of a shard. A group is of one kind at a time: classic
// (classic != nil, or neither set: a group known only by its committed
// offsets, which Kafka reports as an Empty classic group) or KIP-848
// consumer (consumer != nil).
type group struct {
	id    string
	shard *shard
	// offsets are the committed offsets, by topic then partition.
	offsets map[string]map[int32]*committedOffset
	// emptySince is when the group last had no members (for KIP-211
	// expiry); zero while it has members.
	emptySince time.Time

	classic  *classicGroup
	consumer *consumerGroup
}

// committedOffset is one committed offset as OffsetCommitValue stores it.
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  int64 // ms since the epoch
	expireTime  int64 // ms since the epoch, -1 if none (OffsetCommit v1 only)
	// seq is the record's place in the shard's log order (shard.seq):
	// Kafka's OffsetAndMetadata.recordOffset.
	seq int64
}

// New returns a coordinator serving no partitions yet; see Load.
func New(cfg Config) *Coordinator {
	cfg.EnsureDefaults()
	c := &Coordinator{cfg: cfg, shards: map[int32]*shard{}}
	c.scheduleExpiry()
	return c
}

// Partition is the __consumer_offsets partition of groupID: Kafka's
// abs(String.hashCode) mod partitions, with Kafka's Utils.abs (MinInt32 -> 0).
func Partition(groupID string, partitions int32) int32 {
	var h int32
	for _, r := range groupID {
		if r >= 0x10000 { // a surrogate pair in Java's UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// Partition is the __consumer_offsets partition of groupID for this
// coordinator's partition count.
func (c *Coordinator) Partition(groupID string) int32 {
	return Partition(groupID, c.cfg.Partitions)
}

// ErrClosed is returned by Load after Close, or when the coordinator is
// closed while Load replays.
var ErrClosed = errors.New("coordinator: closed")

// ErrUnloaded is returned by Load when the partition is unloaded (Unload) or
// loaded again (another Load) while it replays: the shard it built is not
// served.
var ErrUnloaded = errors.New("coordinator: partition unloaded while loading")

// Load makes the coordinator serve partition p, whose records log holds:
// it replays them, then serves. Requests for the partition's groups get
// COORDINATOR_LOAD_IN_PROGRESS meanwhile. Loading a loaded partition
// replaces it. If the partition is unloaded or loaded again while it
// replays, Load returns ErrUnloaded; if the coordinator is closed, ErrClosed.
func (c *Coordinator) Load(p int32, log Log) error {
	s := &shard{partition: p, log: log, loading: true, groups: map[string]*group{}}
	if err := c.install(s); err != nil {
		return err
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var n, skipped int
	record := func(r Record, producerID int64) {
		n++
		if err := c.replayLocked(s, r, producerID); err != nil {
			// One bad record must not make every group of the partition
			// unavailable: skip it, loudly.
			skipped++
			c.cfg.Logger.Error("coordinator: skipping a record of __consumer_offsets that cannot be applied", "partition", p, "err", err)
		}
	}
	var err error
	if tlog, ok := log.(TxnLog); ok {
		err = tlog.ReplayBatches(func(b ReplayBatch) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.replayBatchLocked(s, b, record)
			return nil
		})
	} else {
		err = log.Replay(func(r Record) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			record(r, noProducerID)
			return nil
		})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.shards[p] == s {
			delete(c.shards, p)
		}
		return fmt.Errorf("coordinator: loading __consumer_offsets-%d: %w", p, err)
	}
	// Unload, a newer Load or Close may have dropped s while it replayed:
	// its groups are not served, so their timers must not start.
	switch {
	case c.closed:
		return ErrClosed
	case c.shards[p] != s:
		return fmt.Errorf("coordinator: loading __consumer_offsets-%d: %w", p, ErrUnloaded)
	}
	s.loading = false
	for _, g := range s.groups {
		c.loadedLocked(g)
	}
	c.cfg.Logger.Debug("coordinator: partition loaded", "partition", p, "records", n, "skipped", skipped, "groups", len(s.groups))
	return nil
}

// install makes s the shard of its partition, unloading the one it
// replaces.
func (c *Coordinator) install(s *shard) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if old := c.shards[s.partition]; old != nil {
		c.unloadLocked(old)
	}
	c.shards[s.partition] = s
	return nil
}

// Unload stops serving partition p; its groups' members are dropped (they
// find the new coordinator and rejoin).
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.shards[p]; s != nil {
		c.unloadLocked(s)
		delete(c.shards, p)
	}
}

func (c *Coordinator) unloadLocked(s *shard) {
	for _, g := range s.groups {
		c.dropLocked(g)
	}
	s.groups = map[string]*group{}
	s.pending = nil // replayed from the log on the next Load
}

// Owns reports whether this coordinator serves groupID's partition (loaded
// or loading).
func (c *Coordinator) Owns(groupID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[c.Partition(groupID)] != nil
}

// Close stops every timer and drops every member; waiting requests return
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.stopExpiry != nil {
		c.stopExpiry()
	}
	for p, s := range c.shards {
		c.unloadLocked(s)
		delete(c.shards, p)
	}
}

// shardLocked finds the shard of groupID, or the error code to answer with:
// NOT_COORDINATOR if the partition is not served here,
// COORDINATOR_LOAD_IN_PROGRESS while it replays, COORDINATOR_NOT_AVAILABLE
// after Close.
func (c *Coordinator) shardLocked(groupID string) (*shard, int16) {
	if c.closed {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	p := c.Partition(groupID)
	if c.cfg.Suspect != nil && c.cfg.Suspect(p) {
		return nil, kerr.NotCoordinator.Code
	}
	s := c.shards[p]
	switch {
	case s == nil:
		return nil, kerr.NotCoordinator.Code
	case s.loading:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return s, 0
}

// groupLocked returns groupID's group, creating it when create is set; nil
// with an error code if the shard is not served, or nil with 0 if the group
// does not exist and create is false. An empty group ID is refused with
// INVALID_GROUP_ID.
func (c *Coordinator) groupLocked(groupID string, create bool) (*group, int16) {
	if groupID == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	s, code := c.shardLocked(groupID)
	if code != 0 {
		return nil, code
	}
	g := s.groups[groupID]
	if g == nil && create {
		g = newGroup(s, groupID, c.cfg.Clock.Now())
	}
	return g, 0
}

func newGroup(s *shard, id string, now time.Time) *group {
	g := &group{id: id, shard: s, offsets: map[string]map[int32]*committedOffset{}, emptySince: now}
	s.groups[id] = g
	return g
}

// write appends recs to the shard's log and, once they are committed,
// runs apply under c.mu. The caller must hold neither s.writeMu nor c.mu.
// check, if not nil, runs under c.mu after s.writeMu is taken and before the
// write, and may refuse it by returning an error code (then nothing is
// written and write returns that code); it returns the records to write,
// which lets the caller build them from the state it validated. A failed
// write answers with the coordinator error Kafka uses for it
// (NOT_COORDINATOR, so clients find the coordinator again and retry).
func (c *Coordinator) write(ctx context.Context, s *shard, check func() ([]Record, int16), apply func()) int16 {
	return c.writeWith(ctx, s, check, apply, nil)
}

// writeWith is write appending with appendFn (nil: the shard log's
// Append); TxnOffsetCommit appends its batch as a transactional one.
func (c *Coordinator) writeWith(ctx context.Context, s *shard, check func() ([]Record, int16), apply func(), appendFn func(context.Context, []Record) error) int16 {
	if appendFn == nil {
		appendFn = s.log.Append
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// Pipelined writes still committing are applied first: this write's
	// check sees everything before it in the log.
	s.waitApplied()
	recs, code := c.checkWrite(s, check)
	if code != 0 {
		return code
	}
	if len(recs) > 0 {
		if err := appendFn(ctx, recs); err != nil {
			return c.writeFailed(s, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[s.partition] != s {
		return kerr.NotCoordinator.Code
	}
	if apply != nil {
		apply()
	}
	return 0
}

// writePipelined is write for offset commits: their check (the member's
// generation) depends only on group state, which the writes that change
// it (write) apply before any later check, never on other offset commits.
// On an AsyncLog, s.writeMu is held while the batch is checked and
// appended, not while it commits, so the commits of a shard overlap; the
// applies run in log order (each waits for the one before). On another
// Log it is write.
func (c *Coordinator) writePipelined(ctx context.Context, s *shard, check func() ([]Record, int16), apply func()) int16 {
	alog, ok := s.log.(AsyncLog)
	if !ok {
		return c.write(ctx, s, check, apply)
	}
	s.writeMu.Lock()
	recs, code := c.checkWrite(s, check)
	if code != 0 || len(recs) == 0 {
		s.writeMu.Unlock()
		if code != 0 {
			return code
		}
		return c.write(ctx, s, nil, apply)
	}
	wait, err := alog.AppendAsync(recs)
	prev, done := s.applied, make(chan struct{})
	if err == nil {
		s.applied = done
	}
	s.writeMu.Unlock()
	if err != nil {
		return c.writeFailed(s, err)
	}
	defer close(done)
	err = wait(ctx)
	if prev != nil {
		<-prev
	}
	if err != nil {
		return c.writeFailed(s, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[s.partition] != s {
		return kerr.NotCoordinator.Code
	}
	if apply != nil {
		apply()
	}
	return 0
}

// writeFailed logs a failed append and returns the code its request gets.
func (c *Coordinator) writeFailed(s *shard, err error) int16 {
	c.cfg.Logger.Warn("coordinator: writing to __consumer_offsets failed", "partition", s.partition, "err", err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return kerr.NotCoordinator.Code
}

// waitApplied waits until every pipelined write appended so far has been
// applied or failed. The caller holds s.writeMu.
func (s *shard) waitApplied() {
	if s.applied != nil {
		<-s.applied
		s.applied = nil
	}
}

// checkWrite is write's validation under c.mu: the shard must still be
// served, and check (if not nil) must accept the write.
func (c *Coordinator) checkWrite(s *shard, check func() ([]Record, int16)) ([]Record, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.shards[s.partition] != s {
		return nil, kerr.NotCoordinator.Code
	}
	if check == nil {
		return nil, 0
	}
	return check()
}

// writeAsync is write from a place that holds c.mu (a timer, a handler
// mid-way): it runs in its own goroutine and logs failures.
func (c *Coordinator) writeAsync(s *shard, check func() ([]Record, int16), apply func()) {
	go func() {
		if code := c.write(context.Background(), s, check, apply); code != 0 {
			c.cfg.Logger.Warn("coordinator: background write failed", "partition", s.partition, "error", kerr.ErrorForCode(code))
		}
	}()
}

// isEmptyLocked reports whether g has no members of either kind.
func (g *group) isEmptyLocked() bool {
	switch {
	case g.consumer != nil:
		return g.consumer.isEmpty()
	case g.classic != nil:
		return g.classic.isEmpty()
	}
	return true
}

// typeName is the group type ListGroups v5+ reports.
func (g *group) typeName() string {
	if g.consumer != nil {
		return "consumer"
	}
	return "classic"
}

// removeLocked deletes g from its shard, stopping its timers.
func (c *Coordinator) removeLocked(g *group) {
	c.dropLocked(g)
	if g.shard.groups[g.id] == g {
		delete(g.shard.groups, g.id)
	}
}

// dropLocked stops g's timers and fails its waiting requests.
func (c *Coordinator) dropLocked(g *group) {
	if g.classic != nil {
		g.classic.shutdown()
	}
	if g.consumer != nil {
		g.consumer.shutdown()
	}
}

// loadedLocked runs for every group when its shard finished replaying: the
// group kinds start their timers (session timeouts of replayed members).
func (c *Coordinator) loadedLocked(g *group) {
	if g.classic != nil {
		c.classicLoaded(g)
	}
	if g.consumer != nil {
		c.consumerLoaded(g)
	}
}

// lookupShard is shardLocked for a caller not holding c.mu.
func (c *Coordinator) lookupShard(groupID string) (*shard, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shardLocked(groupID)
}

// lookupGroup is groupLocked (without creating) for a caller not holding
// c.mu. The group may change once the lock is released: writes check it
// again under the lock.
func (c *Coordinator) lookupGroup(groupID string) (*group, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groupLocked(groupID, false)
}
