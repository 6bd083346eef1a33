package replica

import (
	"context"
	"sync"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
)

// Partition is one replica of one partition: its log, high watermark and
// leader epoch. It is safe for concurrent use.
type Partition struct {
	log *segment.Log

	// appendMu serializes the producer-state check with the append it
	// guards (not the fsync that follows, so commits still group).
	appendMu  sync.Mutex
	producers producerState

	mu            sync.Mutex
	highWatermark int64
	leaderEpoch   int32
	syncEvery     bool          // fsync before an append commits
	changed       chan struct{} // closed and replaced when the high watermark moves
}

// Options configure a Partition.
type Options struct {
	// LeaderEpoch is stamped into every appended batch's
	// partitionLeaderEpoch field (the raft term, under replication).
	LeaderEpoch int32
	// SyncOnCommit makes Append fsync (group commit) before a batch counts
	// as committed and the high watermark moves past it.
	SyncOnCommit bool
}

// New wraps an open log. Everything already in the log counts as committed
// (a single replica recovered it from disk). Idempotent producers' state is
// rebuilt from the log's batch headers.
func New(log *segment.Log, opts Options) (*Partition, error) {
	p := &Partition{
		log:           log,
		producers:     producerState{},
		highWatermark: log.LogEndOffset(),
		leaderEpoch:   opts.LeaderEpoch,
		syncEvery:     opts.SyncOnCommit,
		changed:       make(chan struct{}),
	}
	err := log.ScanHeaders(log.LogStartOffset(), func(h batch.Header) error {
		lat := int64(-1)
		if h.LogAppendTime() {
			lat = h.MaxTimestamp
		}
		p.producers.record(&h, lat)
		return nil
	})
	return p, err
}

// Log returns the partition's log.
func (p *Partition) Log() *segment.Log { return p.log }

// LeaderEpoch returns the epoch stamped into appended batches.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderEpoch
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

// AppendOptions are per-append choices made by the server.
type AppendOptions struct {
	// LogAppendTime sets the broker's clock as the batch timestamp
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
}

// Append appends one record batch (modified in place: offsets, leader
// epoch) and returns once it is committed. A batch from an idempotent
// producer is checked against that producer's state first: a retry of one
// of its latest 5 batches returns the original offsets without appending
// again; a sequence gap returns ErrOutOfOrderSequence and an older epoch
// ErrInvalidProducerEpoch. Other errors are the log's (for example
// segment.ErrCorrupt for an invalid batch).
func (p *Partition) Append(ctx context.Context, b []byte, opts AppendOptions) (segment.AppendResult, error) {
	res, commit, err := p.AppendNoWait(b, opts)
	if err != nil {
		return res, err
	}
	return res, commit()
}

// AppendNoWait is Append in two steps: it checks and appends the batch
// and returns; commit then waits for the batch to be committed (the
// group-commit fsync) and moves the high watermark. Appends of one
// partition happen in call order while commits overlap, so a connection
// can append a producer's next batch while the previous one syncs.
// commit is nil when err is not.
//
// Stopgap for pipelined produce until Produce/Pending replaces it.
func (p *Partition) AppendNoWait(b []byte, opts AppendOptions) (res segment.AppendResult, commit func() error, err error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return segment.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}, nil, err
	}
	p.appendMu.Lock()
	dup, err := p.producers.check(&h)
	if err != nil || dup != nil {
		p.appendMu.Unlock()
		if err != nil {
			return segment.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}, nil, err
		}
		// The original may still be on its way to disk: make sure it is
		// durable before answering for it.
		res := segment.AppendResult{BaseOffset: dup.baseOffset, LastOffset: dup.lastOffset, LogAppendTime: dup.logAppendTime}
		return res, func() error {
			if p.syncEvery {
				return p.log.Sync()
			}
			return nil
		}, nil
	}
	res, err = p.log.AppendWith(b, segment.AppendOptions{
		SetLeaderEpoch: true,
		LeaderEpoch:    p.LeaderEpoch(),
		LogAppendTime:  opts.LogAppendTime,
	})
	if err == nil {
		h.BaseOffset = res.BaseOffset
		p.producers.record(&h, res.LogAppendTime)
	}
	p.appendMu.Unlock()
	if err != nil {
		return res, nil, err
	}
	return res, func() error {
		if p.syncEvery {
			if err := p.log.Sync(); err != nil {
				return err
			}
		}
		p.advance(res.LastOffset + 1)
		return nil
	}, nil
}

// advance moves the high watermark up to hw (never down) and wakes
// waiters.
func (p *Partition) advance(hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw <= p.highWatermark {
		return
	}
	p.highWatermark = hw
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
// KIP-74 style; see segment.Log.Read.
func (p *Partition) Read(offset int64, maxBytes int) (segment.ReadResult, error) {
	return p.log.Read(offset, maxBytes, p.HighWatermark())
}
