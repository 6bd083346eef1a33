package controller

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/sluicemq/sluice/meta"
)

// Errors the request methods return; the server maps them to Kafka codes.
var (
	// ErrStaleBrokerEpoch: the request names a broker epoch other than the
	// broker's registration (STALE_BROKER_EPOCH).
	ErrStaleBrokerEpoch = errors.New("controller: stale broker epoch")
	// ErrBrokerNotRegistered: no broker with this id is registered
	// (BROKER_ID_NOT_REGISTERED).
	ErrBrokerNotRegistered = errors.New("controller: broker not registered")
)

// CheckEvery is how often Run checks broker sessions, learners,
// reassignments, decommissions and the leader balance.
const CheckEvery = 250 * time.Millisecond

// Store is the metadata the controller reads and changes: *meta.Store.
type Store interface {
	Brokers() []meta.Broker
	Broker(id int32) (meta.Broker, bool)
	Topics() []meta.Topic
	TopicByID(id [16]byte) (meta.Topic, bool)
	RegisterBroker(r meta.BrokerRegistered) (epoch int64, err error)
	FenceBroker(id int32, epoch int64, fenced bool) error
	DecommissionBroker(id int32, on bool) error
	UnregisterBroker(id int32) error
	ChangePartitionsAt(changes []meta.PartitionChanged, moveEpochs []int32) (errs []error, err error)
	Reassign(reqs []meta.ReassignRequest) (errs []error, err error)
	Reassignments() []meta.Reassignment
	CompleteReassignment(topicID [16]byte, p int32) (done bool, err error)
	AllocateProducerIDs(n int64) (first int64, err error)
}

// Host is the broker's side the controller needs: the raft host's view
// and the requests to other brokers.
type Host interface {
	// Term is the metadata group's current term and whether this node
	// leads it (is the active controller).
	Term() (term int32, active bool)
	// IsVoter reports whether broker id is a controller voter.
	IsVoter(id int32) bool
	// AddLearner adds broker id to the metadata group as a raft learner.
	AddLearner(id int32) error
	// PeersDown are the brokers the raft transport cannot reach.
	PeersDown() []int32
	// Partition is the broker's view of partition p of t: its leader (-1:
	// none) and ISR, as Metadata answers them.
	Partition(t meta.Topic, p int32) (leader int32, isr []int32)
	// ElectPreferred asks the current leaders of parts to hand their
	// leadership to the preferred replicas and waits for the outcomes;
	// it returns how many were elected.
	ElectPreferred(ctx context.Context, parts []Election) (elected int)
}

// Config holds the controller's settings; the server fills it from its
// Kafka keys.
type Config struct {
	// SessionTimeout is broker.session.timeout.ms: a broker silent for
	// longer is fenced. Default 9s.
	SessionTimeout time.Duration
	// AutoLeaderRebalance is auto.leader.rebalance.enable (no default:
	// the zero value is off).
	AutoLeaderRebalance bool
	// ImbalanceCheckInterval is leader.imbalance.check.interval.seconds.
	// Default 300s.
	ImbalanceCheckInterval time.Duration
	// ImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage. Default 10.
	ImbalancePerBrokerPercentage int32
}

// EnsureDefaults fills zero values.
func (c *Config) EnsureDefaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 9 * time.Second
	}
	if c.ImbalanceCheckInterval <= 0 {
		c.ImbalanceCheckInterval = 300 * time.Second
	}
	if c.ImbalancePerBrokerPercentage <= 0 {
		c.ImbalancePerBrokerPercentage = 10
	}
}

// Options are what New needs.
type Options struct {
	Store  Store
	Host   Host
	Config Config
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Controller is the active controller's duties. Every node holds one; it
// acts only while Host.Term says this node leads the metadata group.
type Controller struct {
	st     Store
	host   Host
	cfg    Config
	now    func() time.Time
	logger *slog.Logger
	kickCh chan struct{}
	wg     sync.WaitGroup // the rebalance's elections

	mu sync.Mutex
	// term is the metadata group's term whose duties started (0: none):
	// a new term, even this node's again, starts every session afresh.
	term  int32
	heard map[int32]time.Time // each broker's session: its last heartbeat or registration, or this term's start
	// beat is each broker's last heartbeat or registration as this
	// process heard it, kept across terms (heard restarts every session
	// at a new term): DescribeQuorum's LastFetchTimestamp.
	beat     map[int32]time.Time
	learners map[int32]bool // learners added to the metadata group in this term
	// leaving are the brokers in controlled shutdown, with the broker
	// epoch that asked: never unfenced again in that epoch.
	leaving map[int32]int64
	// rebalanced is when the last leader rebalance ended (zero: none
	// yet in this process); rebalancing while one runs.
	rebalanced  time.Time
	rebalancing bool
	// drained is when drain last ran; drainWarned when it last warned
	// about each broker it cannot drain.
	drained     time.Time
	drainWarned map[int32]time.Time
}

// New returns a controller; Run starts its duties.
func New(o Options) *Controller {
	o.Config.EnsureDefaults()
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Controller{st: o.Store, host: o.Host, cfg: o.Config, now: o.Now, logger: o.Logger,
		kickCh: make(chan struct{}, 1), heard: map[int32]time.Time{}, beat: map[int32]time.Time{},
		learners: map[int32]bool{}, leaving: map[int32]int64{}, drainWarned: map[int32]time.Time{}}
}

// Kick asks Run for a check soon.
func (a *Controller) Kick() {
	select {
	case a.kickCh <- struct{}{}:
	default:
	}
}

// Run checks the duties every CheckEvery and when kicked, until ctx ends;
// it returns once a rebalance it started ended too.
func (a *Controller) Run(ctx context.Context) {
	defer a.wg.Wait()
	t := time.NewTicker(CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kickCh:
		}
		a.Check(ctx)
	}
}

// Wait waits for a rebalance's elections that Check started (tests).
func (a *Controller) Wait() { a.wg.Wait() }

// heartbeat notes that broker id was heard from.
func (a *Controller) heartbeat(id int32) {
	now := a.now()
	a.mu.Lock()
	a.heard[id] = now
	a.beat[id] = now
	a.mu.Unlock()
}

// LastBeats is each broker's last heartbeat or registration this process
// heard (DescribeQuorum's LastFetchTimestamp).
func (a *Controller) LastBeats() map[int32]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.beat)
}

// alive reports whether broker id heartbeated within its session.
func (a *Controller) alive(id int32) bool {
	a.mu.Lock()
	heard, ok := a.heard[id]
	a.mu.Unlock()
	return ok && a.now().Sub(heard) <= a.cfg.SessionTimeout
}

// Check runs the duties once, when this node is the active controller.
func (a *Controller) Check(ctx context.Context) {
	term, active := a.host.Term()
	if !active {
		a.mu.Lock()
		a.term = 0
		a.mu.Unlock()
		return
	}
	now := a.now()
	brokers := a.st.Brokers()
	var expired []meta.Broker
	var learners []int32
	a.mu.Lock()
	if a.term != term {
		// A new leadership: every broker starts a fresh session.
		a.term = term
		clear(a.heard)
		clear(a.learners)
		clear(a.leaving)
		for _, br := range brokers {
			a.heard[br.NodeID] = now
		}
	}
	for _, br := range brokers {
		if _, ok := a.heard[br.NodeID]; !ok {
			a.heard[br.NodeID] = now
		}
		if !br.Fenced && now.Sub(a.heard[br.NodeID]) > a.cfg.SessionTimeout {
			expired = append(expired, br)
		}
		if !a.host.IsVoter(br.NodeID) && !a.learners[br.NodeID] {
			learners = append(learners, br.NodeID)
		}
	}
	a.mu.Unlock()
	for _, br := range expired {
		if err := a.st.FenceBroker(br.NodeID, br.Epoch, true); err != nil {
			a.logger.Warn("sluice: controller: cannot fence a broker whose session expired", "broker", br.NodeID, "err", err)
			continue
		}
		a.logger.Warn("sluice: controller: fenced a broker: no heartbeat within broker.session.timeout.ms", "broker", br.NodeID, "session_timeout_ms", a.cfg.SessionTimeout.Milliseconds())
	}
	for _, id := range learners {
		if err := a.host.AddLearner(id); err != nil {
			a.logger.Warn("sluice: controller: cannot add a broker to the metadata log as a learner", "broker", id, "err", err)
			continue
		}
		a.mu.Lock()
		a.learners[id] = true
		a.mu.Unlock()
	}
	a.completeMoves()
	a.drain()
	a.rebalance(ctx)
}
