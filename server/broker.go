package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluicemq/sluice/coordinator"
	"github.com/sluicemq/sluice/meta"
	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server/config"
)

// Broker is one Sluice node: a Kafka protocol listener over the
// partitions whose logs live in log.dirs.
type Broker struct {
	cfg    config.Config
	logger *slog.Logger
	fs     vfs.FS // partition folders and logs: vfs.Default; a test may wrap it before creating topics
	meta   *meta.Store
	sweep  *segment.Sweeper
	coord  *coordinator.Coordinator // groups and committed offsets (groups.go)
	clean  *segment.Cleaner         // nil when log.cleaner.enable is false (cleaner.go)

	mu    sync.RWMutex
	parts map[topicPartition]*replica.Partition

	sessions *fetchSessions // KIP-227 fetch sessions

	topicsMu sync.Mutex // serializes topic creation, deletion and growth (topics_admin.go)

	ln      net.Listener
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	connMu  sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool // Close has begun: accepted connections are dropped
}

type topicPartition struct {
	topic     string
	partition int32
}

// metaDirName is the folder under the first log dir holding the cluster
// metadata (Pebble).
const metaDirName = "__sluice_metadata"

// New opens the broker's metadata and every partition log in log.dirs.
func New(cfg config.Config, logger *slog.Logger) (*Broker, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Start fills in the advertised port when listening on port 0: own
	// the slices.
	cfg.Listeners = append([]config.Listener(nil), cfg.Listeners...)
	cfg.AdvertisedListeners = append([]config.Listener(nil), cfg.AdvertisedListeners...)
	dir := cfg.LogDirs[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	st, err := meta.Open(filepath.Join(dir, metaDirName), meta.Options{})
	if err != nil {
		return nil, fmt.Errorf("server: metadata: %w", err)
	}
	b := &Broker{cfg: cfg, logger: logger, fs: vfs.Default, meta: st, parts: map[topicPartition]*replica.Partition{}, conns: map[net.Conn]struct{}{}, sessions: newFetchSessions()}
	b.sweep = segment.NewSweeper(time.Duration(cfg.LogRetentionCheckIntervalMs)*time.Millisecond, logger)
	b.clean = newCleaner(cfg, logger)
	for _, t := range st.Topics() {
		for p := int32(0); p < t.Partitions; p++ {
			if _, err := b.openPartition(t, p); err != nil {
				b.closeLogs()
				st.Close()
				return nil, err
			}
		}
	}
	b.sweep.Start()
	b.startCleaner()
	b.coord = b.newCoordinator()
	if t, ok := st.Topic(offsetsTopic); ok {
		b.loadOffsetsTopic(t)
	}
	return b, nil
}

// partitionDir is Kafka's layout: <log.dirs>/<topic>-<partition>.
func (b *Broker) partitionDir(topic string, p int32) string {
	return filepath.Join(b.cfg.LogDirs[0], topic+"-"+strconv.Itoa(int(p)))
}

// openPartition opens (creating) one partition's log.
func (b *Broker) openPartition(t meta.Topic, p int32) (*replica.Partition, error) {
	cfg, err := b.topicConfig(t.Configs)
	if err != nil {
		return nil, err
	}
	part, err := replica.Open(b.fs, b.partitionDir(t.Name, p), cfg, replica.Options{
		Internal: isInternalTopic(t.Name),
		Sweeper:  b.sweep,
		Cleaner:  b.clean,
		Log: segment.Options{
			Logger:                   b.logger,
			CleanerDedupeBufferBytes: b.cleanerDedupeShare(),
		},
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.parts[topicPartition{t.Name, p}] = part
	b.mu.Unlock()
	return part, nil
}

// partition returns an open partition.
func (b *Broker) partition(topic string, p int32) (*replica.Partition, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	part, ok := b.parts[topicPartition{topic, p}]
	return part, ok
}

// Start listens on the first listener and serves connections until Close.
func (b *Broker) Start() error {
	l := b.cfg.Listeners[0]
	ln, err := net.Listen("tcp", l.Addr())
	if err != nil {
		return err
	}
	b.ln = ln
	if adv := &b.cfg.AdvertisedListeners[0]; adv.Port == 0 {
		// Listening on port 0 (tests): advertise the port we got.
		adv.Port = ln.Addr().(*net.TCPAddr).Port
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.logger.Info("sluice: listening", "addr", ln.Addr().String(), "log_dirs", b.cfg.LogDirs, "node_id", b.cfg.NodeID)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					b.logger.Error("sluice: accept", "err", err)
				}
				return
			}
			b.connMu.Lock()
			if b.closing {
				b.connMu.Unlock()
				c.Close()
				continue
			}
			b.conns[c] = struct{}{}
			b.connMu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.serveConn(b.ctx, c)
				b.connMu.Lock()
				delete(b.conns, c)
				b.connMu.Unlock()
			}()
		}
	}()
	return nil
}

// Addr returns the address the broker listens on.
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// Close stops accepting, lets in-flight requests finish (their reads are
// shut so no new request starts), syncs and closes every log and the
// metadata. A restart finds everything.
func (b *Broker) Close() error {
	// Group requests waiting for a rebalance are answered first, so their
	// connections can finish.
	b.coord.Close()
	if b.ln != nil {
		b.ln.Close()
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
		done := make(chan struct{})
		go func() { b.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Requests still running (long polls) are cut short, and
			// connections blocked anywhere are closed.
			b.cancel()
			b.connMu.Lock()
			for c := range b.conns {
				c.Close()
			}
			b.connMu.Unlock()
			<-done
		}
		b.cancel()
	}
	b.wg.Wait() // coordinator loads started by New, when Start never ran
	b.sweep.Stop()
	b.stopCleaner()
	err := b.closeLogs()
	return errors.Join(err, b.meta.Close())
}

func (b *Broker) closeLogs() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, p := range b.parts {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
