package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/coordinator"
	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
)

// Broker is one Sluice node: a Kafka protocol listener over the
// partitions whose logs live in log.dirs.
type Broker struct {
	cfg    config.Config
	logger *slog.Logger
	fs     vfs.FS    // partition logs' file system
	lock   io.Closer // the log dir's .lock
	meta   *meta.Store
	metaFS pebblevfs.FS // the metadata's and the raft states' file system (Options.MetaFS)
	fatal  chan error   // Fatal's; buffered 1
	// leaseWait bounds a read's wait for a read lease (readlease.go);
	// raftSkew moves the raft host's clock (tests stage a pause with it).
	leaseWait time.Duration
	raftSkew  atomic.Int64
	now       func() time.Time // the wall clock (Options.Now)
	cl        *cluster         // the raft host, the metadata log, the controller (cluster.go); a single node is a one-voter cluster
	recon     *reconciler      // opens, reconfigures and closes partitions (reconcile.go)
	// recovery gathers the start-up's log recoveries into one line
	// (recovery.go).
	recovery recoverySummary
	sweep    *segment.Sweeper
	coord    *coordinator.Coordinator    // groups and committed offsets (groups.go)
	txn      *coordinator.TxnCoordinator // transactions (txn.go)
	clean    *segment.Cleaner            // nil when log.cleaner.enable is false (cleaner.go)
	files    *segment.FileCache          // closed segments' descriptors, all partitions (sluice.log.segment.open.files.max)
	expiry   *producerExpiry             // producer.id.expiration.ms (producer_expiry.go)
	authz    Authorizer                  // nil: no authorizer.class.name, every action allowed (authorize.go)

	mu    sync.RWMutex
	parts map[topicPartition]*replica.Partition // the open partitions; changed only by the reconciler
	// offline are the partitions of the metadata whose log could not be
	// opened (changed only by the reconciler): why, and the folder when
	// known. Clients get KAFKA_STORAGE_ERROR for them (faults.go).
	offline map[topicPartition]offlinePartition

	sessions *fetchSessions // KIP-227 fetch sessions

	topicsMu sync.Mutex // serializes metadata changes made by requests (topics_admin.go)

	lns   []net.Listener // one per listener, in config order (listen.go)
	lnTLS []*listenerTLS // each listener's TLS, nil for plaintext (tls.go)
	// onPrincipal, when set (tests), is told each connection's listener
	// and principal once it is established.
	onPrincipal func(listener, principal string)
	// wrapListener, when set (tests), wraps each listener before serving.
	wrapListener func(net.Listener) net.Listener
	// gate is closed once the client listeners serve requests: once
	// registered and unfenced (startgate.go; a single node registers
	// with itself), at Start for a controller-only node; gateMax (tests)
	// bounds that wait.
	gate    chan struct{}
	gateMax time.Duration
	limits  *connLimits    // max.connections, max.connections.per.ip
	reqMem  *requestMemory // queued.max.request.bytes (reqmem.go)
	quotas  *quotaManager  // client quotas (quota.go)
	// Log lines clients can cause in bulk, summarized every logEvery.
	logEvery                      time.Duration
	badConns, refused, acceptErrs *logSummary
	produceErrs                   *logSummary // storage errors of produce requests (a client retries them)
	autoCreateFails               *logSummary // Metadata auto-creations that failed (clients retry them without end)
	summariesDone                 chan struct{}

	// peerLogins summarizes this node's SASL logins refused by other
	// nodes (sasl_peer.go): a misconfigured login stalls raft.
	peerLogins *logSummary

	producerIDs producerIDs // InitProducerId's blocks (22_init_producer_id.go)

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	connMu  sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool // Close has begun: accepted connections are dropped
	// pollsEnd is closed once Close has stopped reading requests: a
	// Fetch waiting for data (a long poll, up to its MaxWaitMs) answers
	// at once with what it has, instead of holding Close until then.
	pollsEnd chan struct{}
	// polling counts the Fetches waiting for data now (tests wait on it).
	polling atomic.Int32
	// noControlledShutdown (tests) makes Close skip the cluster's
	// controlled shutdown, as for a crash.
	noControlledShutdown bool

	// Metrics (metrics.go): nil when metrics.listen is empty. httpSrv
	// is the metrics listener (metrics_http.go), set by Start. down
	// tracks fenced brokers (downbrokers.go); warnStop and warnDone stop
	// and await its warning loop. stopping is set when Close begins
	// (/readyz answers 503).
	metrics            *brokerMetrics
	httpSrv            *metricsServer
	down               downTracker
	warnStop, warnDone chan struct{}
	stopping           atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

type topicPartition struct {
	topic     string
	partition int32
}

// metaDirName is the folder under the metadata dir (metadata.log.dir, else
// the first log dir) holding the cluster metadata (Pebble).
const metaDirName = "__sluice_metadata"

// lockName is the file in the log dir a broker holds locked while it runs
// (Kafka's name).
const lockName = ".lock"

// Options are a Broker's collaborators; the zero value runs on the OS.
type Options struct {
	// Logger receives the broker's log lines. Default slog.Default().
	Logger *slog.Logger
	// FS holds the partition logs (log.dirs). Default vfs.Default, the OS;
	// crash tests pass a vfs.MemFS.
	FS vfs.FS
	// MetaFS holds the cluster metadata (Pebble, in
	// <log.dirs>/__sluice_metadata). Default the OS; crash tests pass
	// Pebble's crashable in-memory FS.
	MetaFS pebblevfs.FS
	// Now is the broker's wall clock. Default time.Now. It stamps the
	// record timestamps the broker writes (LogAppendTime, committed
	// offsets, metadata records; ListOffsets by timestamp finds them),
	// and is the "now" of retention, segment.ms, producer ID expiry and
	// the coordinator (commit and expiry timestamps, group state times).
	// Elapsed-time measurements (timeouts, deadlines, replica lag, the
	// raft host's HostConfig.Now) keep time.Now: never compare a reading
	// of Now with one of time.Now. The faults build's clock_offset_ms
	// (package server/faultinject) makes it time.Now().Add(offset).
	Now func() time.Time
}

// New opens the broker's metadata and every partition log in log.dirs,
// on the OS's file system.
func New(cfg config.Config, logger *slog.Logger) (*Broker, error) {
	return NewWithOptions(cfg, Options{Logger: logger})
}

// NewWithOptions is New with its collaborators chosen. A partition that
// cannot be opened does not stop the broker: it is logged and retried (see
// reconcile.go) while the others serve.
func NewWithOptions(cfg config.Config, opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	// Start fills in the advertised port when listening on port 0: own
	// the slices.
	cfg.Listeners = append([]config.Listener(nil), cfg.Listeners...)
	cfg.AdvertisedListeners = append([]config.Listener(nil), cfg.AdvertisedListeners...)
	// One broker per log dir, as Kafka's .lock.
	var locks multiCloser
	for _, dir := range cfg.AllLogDirs() {
		lock, err := lockLogDir(opts.FS, dir)
		if err != nil {
			locks.Close()
			return nil, err
		}
		locks = append(locks, lock)
	}
	lock := io.Closer(locks)
	batch.SetDecompressionMemory(cfg.DecompressionMemoryBytes) // process-wide
	b := &Broker{cfg: cfg, logger: logger, fs: opts.FS, metaFS: opts.MetaFS, now: opts.Now, lock: lock, files: segment.NewFileCache(segmentFilesMax(&cfg)), parts: map[topicPartition]*replica.Partition{}, offline: map[topicPartition]offlinePartition{}, conns: map[net.Conn]struct{}{}, pollsEnd: make(chan struct{}), sessions: newFetchSessions(), fatal: make(chan error, 1), leaseWait: leaseWait}
	if cfg.MetricsListen != "" {
		b.metrics = newBrokerMetrics(b)
	}
	cl, err := newCluster(b)
	if err != nil {
		locks.Close()
		return nil, err
	}
	b.cl = cl
	st, err := meta.Open(filepath.Join(cfg.MetadataLogDirOrFirst(), metaDirName), meta.Options{FS: opts.MetaFS, Logger: logger, Replicator: cl})
	if err != nil {
		cl.close()
		locks.Close()
		return nil, fmt.Errorf("server: metadata: %w", err)
	}
	b.meta = st
	b.authz = newAuthorizer(&cfg, st, logger)
	if err := b.adoptSingleNodeTopics(); err != nil {
		cl.close()
		st.Close()
		locks.Close()
		return nil, err
	}
	b.startRecoverySummary()
	b.sweep = segment.NewSweeper(time.Duration(cfg.LogRetentionCheckIntervalMs)*time.Millisecond, logger)
	if err := cl.openMetaLog(); err != nil {
		cl.close()
		st.Close()
		locks.Close()
		return nil, err
	}
	b.clean = newCleaner(cfg, logger)
	b.coord = b.newCoordinator()
	b.txn = b.newTxnCoordinator()
	b.recon = newReconciler(b)
	b.recon.pass() // every partition the metadata names, before serving
	b.endRecoverySummary()
	b.recon.start()
	cl.startApplier()
	b.sweep.Start()
	b.startCleaner()
	b.startProducerExpiry()
	return b, nil
}

// adoptSingleNodeTopics gives the topics a single node wrote before it ran
// as a one-voter cluster (kept without replica assignments, in local
// mode) this node as their one replica (meta.Store.AdoptUnassigned), so
// the reconciler opens them as raft groups: their logs, which hold no
// raft state, are adopted as they are (every batch one entry of term 0;
// the lone voter's first term commits them all). It runs before the
// metadata log applies anything.
func (b *Broker) adoptSingleNodeTopics() error {
	names, err := b.meta.AdoptUnassigned(b.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("server: metadata: adopting a single node's topics: %w (restore the data dir's __sluice_metadata from before, or move the data dir away and start empty)", err)
	}
	if len(names) > 0 {
		b.logger.Info("sluice: adopted the topics this node wrote before it ran as a one-voter cluster", "node_id", b.cfg.NodeID, "topics", len(names))
	}
	return nil
}

// partitionDirName is Kafka's layout: <log dir>/<topic>-<partition>.
func partitionDirName(topic string, p int32) string {
	return topic + "-" + strconv.Itoa(int(p))
}

// multiCloser closes several closers, all of them whatever fails.
type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// partition returns an open partition.
func (b *Broker) partition(topic string, p int32) (*replica.Partition, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	part, ok := b.parts[topicPartition{topic, p}]
	return part, ok
}

// Fatal receives, once, an error after which the broker cannot go on
// serving and its process must stop: the metadata log's storage failed
// (Kafka halts the broker when its metadata log dir fails, KIP-858). The
// caller closes the broker and exits non-zero; an operator fixes the disk
// and restarts it.
func (b *Broker) Fatal() <-chan error { return b.fatal }

// Close stops accepting, lets in-flight requests finish (their reads are
// shut so no new request starts), syncs and closes every log and the
// metadata. A restart finds everything. Later calls return the first
// call's error.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

// close is Close, once.
func (b *Broker) close() error {
	b.stopping.Store(true) // /readyz: shutting down
	if b.warnStop != nil {
		close(b.warnStop)
		<-b.warnDone
		b.warnStop = nil
	}
	// The reconciler stops first: no partition opens (nor a coordinator
	// load starts) once shutdown has begun. Then group requests waiting
	// for a rebalance are answered, so their connections can finish.
	if b.lns != nil && !b.noControlledShutdown {
		b.cl.controlledShutdown()
	}
	b.cl.stopLoops()
	b.recon.close()
	b.coord.Close()
	b.txn.Close()
	if b.lns != nil {
		b.closeListeners()
		b.connMu.Lock()
		b.closing = true
		for c := range b.conns {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.CloseRead()
			} else {
				c.Close()
			}
		}
		b.connMu.Unlock()
		// No request is read from here on: the long polls answer now
		// (Kafka does not wait for its delayed fetches either: its
		// shutdown stops the socket server first).
		close(b.pollsEnd)
		done := make(chan struct{})
		go func() { b.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Requests still running are cut short, and connections
			// blocked anywhere are closed.
			b.logger.Warn("sluice: shutdown: requests still running after 10s are cut short and their connections closed")
			b.cancel()
			b.connMu.Lock()
			for c := range b.conns {
				c.Close()
			}
			b.connMu.Unlock()
			<-done
		}
		b.cancel()
		if b.summariesDone != nil { // a second Close finds it nil
			close(b.summariesDone)
			b.summariesDone = nil
		}
	}
	b.closeMetrics() // a scrape reads the logs and the metadata closed below
	b.wg.Wait()      // coordinator loads started by New, when Start never ran
	b.sweep.Stop()
	b.stopCleaner()
	b.stopProducerExpiry()
	err := b.recon.closeAll()
	err = errors.Join(err, b.cl.close())
	err = errors.Join(err, b.meta.Close())
	if b.lock != nil {
		err = errors.Join(err, b.lock.Close())
		b.lock = nil
	}
	return err
}
