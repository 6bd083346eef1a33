package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/replica"
	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Replicated partitions (replica.Partition with Options.Raft) on three
// replica.Hosts in one process over loopback TCP: produce throughput at
// RF=3 next to RF=1 on the same code path, the bytes each replica writes
// per byte produced, idle partitions, and failover to a new leader that
// accepts writes.

const (
	raftPartitions   = 16 // partitions of the produce benchmark
	raftProducers    = 4  // producers per partition, one batch in flight each
	raftRoundBatches = 512
	idlePartitions   = 1000 // of BenchmarkRaftIdlePartitions
)

// countFS is a vfs.FS that counts the bytes written through WriteAt to
// every file it opens (log, indexes, .raftindex, checkpoints, snapshots).
type countFS struct {
	vfs.FS
	n, syncs *atomic.Int64
	noSync   bool // Sync and SyncDir count but do nothing
}

type countFile struct {
	vfs.File
	n, syncs *atomic.Int64
	noSync   bool
}

func (f countFile) Sync() error {
	f.syncs.Add(1)
	if f.noSync {
		return nil
	}
	return f.File.Sync()
}

func (c countFS) SyncDir(dir string) error {
	c.syncs.Add(1)
	if c.noSync {
		return nil
	}
	return c.FS.SyncDir(dir)
}

func (f countFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (c countFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countFile{f, c.n, c.syncs, c.noSync}, nil
}

func (c countFS) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }
func (c countFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}

// countPebbleFS is the same for the Pebble state store's files (WAL,
// sstables, manifest), through Pebble's own vfs.
type countPebbleFS struct {
	pvfs.FS
	n, syncs *atomic.Int64
}

type countPebbleFile struct {
	pvfs.File
	n, syncs *atomic.Int64
}

func (f countPebbleFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

func (f countPebbleFile) SyncData() error {
	f.syncs.Add(1)
	return f.File.SyncData()
}

func (f countPebbleFile) SyncTo(length int64) (bool, error) {
	f.syncs.Add(1)
	return f.File.SyncTo(length)
}

func (f countPebbleFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.n.Add(int64(n))
	return n, err
}

func (f countPebbleFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (c countPebbleFS) wrap(f pvfs.File, err error) (pvfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countPebbleFile{f, c.n, c.syncs}, nil
}

func (c countPebbleFS) Create(name string, cat pvfs.DiskWriteCategory) (pvfs.File, error) {
	return c.wrap(c.FS.Create(name, cat))
}

func (c countPebbleFS) OpenReadWrite(name string, cat pvfs.DiskWriteCategory, opts ...pvfs.OpenOption) (pvfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name, cat, opts...))
}

func (c countPebbleFS) ReuseForWrite(oldname, newname string, cat pvfs.DiskWriteCategory) (pvfs.File, error) {
	return c.wrap(c.FS.ReuseForWrite(oldname, newname, cat))
}

func (c countPebbleFS) Unwrap() pvfs.FS { return c.FS }

// sparseFS keeps the sizes files are grown to by Truncate apart from
// their data, as a file system with sparse files does: an in-memory
// vfs.FS (vfs.NewMem) would hold every preallocated 10 MiB index in the
// heap. Reads between the data's end and that size return zeros.
type sparseFS struct {
	vfs.FS
	mu   sync.Mutex
	size map[string]int64 // the size Truncate last set, by path
}

type sparseFile struct {
	vfs.File
	fs   *sparseFS
	name string
}

func (s *sparseFS) wrap(name string, open func(string) (vfs.File, error)) (vfs.File, error) {
	f, err := open(name)
	if err != nil {
		return nil, err
	}
	return &sparseFile{f, s, name}, nil
}

func (s *sparseFS) Create(name string) (vfs.File, error) {
	s.mu.Lock()
	delete(s.size, name)
	s.mu.Unlock()
	return s.wrap(name, s.FS.Create)
}

func (s *sparseFS) Open(name string) (vfs.File, error) { return s.wrap(name, s.FS.Open) }
func (s *sparseFS) OpenReadWrite(name string) (vfs.File, error) {
	return s.wrap(name, s.FS.OpenReadWrite)
}

func (s *sparseFS) Remove(name string) error {
	s.mu.Lock()
	delete(s.size, name)
	s.mu.Unlock()
	return s.FS.Remove(name)
}

func (s *sparseFS) Rename(oldname, newname string) error {
	s.mu.Lock()
	if n, ok := s.size[oldname]; ok {
		s.size[newname] = n
		delete(s.size, oldname)
	} else {
		delete(s.size, newname)
	}
	s.mu.Unlock()
	return s.FS.Rename(oldname, newname)
}

func (f *sparseFile) virtual() int64 {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fs.size[f.name]
}

func (f *sparseFile) Truncate(size int64) error {
	real, err := f.File.Size()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.size[f.name] = size
	f.fs.mu.Unlock()
	if size < real {
		return f.File.Truncate(size)
	}
	return nil
}

func (f *sparseFile) Size() (int64, error) {
	real, err := f.File.Size()
	return max(real, f.virtual()), err
}

func (f *sparseFile) ReadAt(p []byte, off int64) (int, error) {
	real, err := f.File.Size()
	if err != nil {
		return 0, err
	}
	size := max(real, f.virtual())
	n := 0
	if off < real {
		k, err := f.File.ReadAt(p[:min(int64(len(p)), real-off)], off)
		if err != nil && err != io.EOF {
			return k, err
		}
		n = k
	}
	for ; n < len(p) && off+int64(n) < size; n++ {
		p[n] = 0
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// partClusterConfig describes a partCluster.
type partClusterConfig struct {
	replicas int    // 1 (a one-voter group) or 3
	groups   int    // partitions
	dir      string // "": every replica on its own vfs.NewMem, with MemStateStores
	noSync   bool   // the partitions' file and directory syncs do nothing
	noopNet  bool   // a Transport that drops every message instead of TCP (one voter)
	host     replica.HostConfig
}

// noopTransport drops every message: a one-voter group sends none that
// matter.
type noopTransport struct{}

func (noopTransport) Send([]replica.GroupMessage) {}

// partCluster is replicas hosts (one process, loopback TCP) with the same
// partitions, each replica a replica.Partition on a counting FS.
type partCluster struct {
	cfg    partClusterConfig
	ids    []uint64
	tps    map[uint64]*replica.TCPTransport
	hosts  map[uint64]*replica.Host
	stores map[uint64]*replica.StateStore
	parts  map[uint64][]*replica.Partition
	groups []replica.GroupID
	closed map[uint64]bool

	partBytes  atomic.Int64 // written to the partitions' files, all replicas
	storeBytes atomic.Int64 // written by the Pebble state stores
	partSyncs  atomic.Int64 // file and directory syncs of the partitions
	storeSyncs atomic.Int64 // the state stores' syncs
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newPartCluster(b *testing.B, cfg partClusterConfig) *partCluster {
	b.Helper()
	c := &partCluster{
		cfg: cfg, tps: map[uint64]*replica.TCPTransport{}, hosts: map[uint64]*replica.Host{},
		stores: map[uint64]*replica.StateStore{}, parts: map[uint64][]*replica.Partition{},
		closed: map[uint64]bool{},
	}
	logger := quietLogger()
	for i := range cfg.replicas {
		c.ids = append(c.ids, uint64(i+1))
	}
	for g := range cfg.groups {
		c.groups = append(c.groups, replica.GroupID{TopicID: [16]byte{0xbe, byte(g >> 8), byte(g)}, Partition: int32(g)})
	}
	if !cfg.noopNet {
		for _, id := range c.ids {
			tp, err := replica.ListenTCP(id, "127.0.0.1:0", logger)
			if err != nil {
				b.Fatal(err)
			}
			c.tps[id] = tp
		}
	}
	tc := replica.DefaultTopicConfig()
	tc.Log.FlushMessages = 1 // Sluice's default (raft syncs every Ready whatever it says)
	for _, id := range c.ids {
		var fs vfs.FS = &sparseFS{FS: vfs.NewMem(), size: map[string]int64{}}
		root := "/data"
		if cfg.dir != "" {
			fs, root = vfs.Default, filepath.Join(cfg.dir, fmt.Sprint(id))
		}
		fs = countFS{fs, &c.partBytes, &c.partSyncs, cfg.noSync}
		var hs replica.HardStateStore
		for _, peer := range c.ids {
			if peer != id && !cfg.noopNet {
				c.tps[id].SetPeer(peer, c.tps[peer].Addr().String())
			}
		}
		if cfg.dir != "" {
			st, err := replica.OpenStateStore(filepath.Join(root, "raft-state"), countPebbleFS{pvfs.Default, &c.storeBytes, &c.storeSyncs}, logger)
			if err != nil {
				b.Fatal(err)
			}
			c.stores[id], hs = st, st
		} else {
			hs = replica.NewMemStateStore()
		}
		hc := cfg.host
		hc.NodeID, hc.HardState, hc.Logger = id, hs, logger
		if cfg.noopNet {
			hc.Transport = noopTransport{}
		} else {
			hc.Transport = c.tps[id]
		}
		h, err := replica.NewHost(hc)
		if err != nil {
			b.Fatal(err)
		}
		c.hosts[id] = h
		if !cfg.noopNet {
			c.tps[id].SetHost(h)
		}
		// Opened concurrently: each Open waits for a few fsyncs.
		parts := make([]*replica.Partition, len(c.groups))
		err = forEach(len(c.groups), func(i int) error {
			g := c.groups[i]
			st, _, err := hs.Load(g)
			if err != nil {
				return err
			}
			opts := replica.Options{Log: segment.Options{Logger: logger}, Raft: &replica.RaftConfig{Host: h, Group: g, State: st, Voters: c.ids}}
			p, err := replica.Open(fs, filepath.Join(root, fmt.Sprintf("p-%d", g.Partition)), tc, opts)
			parts[i] = p
			return err
		})
		for _, p := range parts {
			if p != nil {
				c.parts[id] = append(c.parts[id], p)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// elect makes node lead(i) stand for partition i and waits until every
// partition has that leader. A group whose election timeout ran out while
// the cluster was still opening may have elected another node first: its
// leader hands over (TransferLeadership), retried until it holds.
func (c *partCluster) elect(b *testing.B, lead func(i int) uint64) {
	b.Helper()
	for i, g := range c.groups {
		if err := c.hosts[lead(i)].Campaign(g); err != nil {
			b.Fatal(err)
		}
	}
	nudged := time.Now()
	waitFor(b, "every partition led", 60*time.Second, func() bool {
		ok, nudge := true, time.Since(nudged) > 500*time.Millisecond
		for i, g := range c.groups {
			want := lead(i)
			if c.parts[want][i].IsLeader() {
				continue
			}
			ok = false
			if !nudge {
				continue
			}
			if id, _, known := c.parts[want][i].Leader(); known && id != want {
				_ = c.hosts[id].TransferLeadership(g, want)
			} else if !known {
				_ = c.hosts[want].Campaign(g)
			}
		}
		if nudge {
			nudged = time.Now()
		}
		return ok
	})
}

// leaders returns each partition's leader replica (nil while it has none
// among the running nodes).
func (c *partCluster) leaders() []*replica.Partition {
	out := make([]*replica.Partition, len(c.groups))
	for i := range c.groups {
		for _, id := range c.ids {
			if !c.closed[id] && c.parts[id][i].IsLeader() {
				out[i] = c.parts[id][i]
			}
		}
	}
	return out
}

func (c *partCluster) quiesced() bool {
	for id, h := range c.hosts {
		if c.closed[id] {
			continue
		}
		if st := h.Stats(); st.Quiesced != st.Groups {
			return false
		}
	}
	return true
}

// stop closes node id's transport and host as a crash would stop them
// talking (its partitions stay open until close).
func (c *partCluster) stop(id uint64) {
	c.closed[id] = true
	if tp := c.tps[id]; tp != nil {
		tp.Close()
	}
	c.hosts[id].Close()
}

func (c *partCluster) close(b *testing.B) {
	for _, id := range c.ids {
		parts := c.parts[id]
		err := forEach(len(parts), func(i int) error { return parts[i].Close() })
		if err != nil && !c.closed[id] {
			b.Error(err)
		}
	}
	for _, id := range c.ids {
		if !c.closed[id] {
			if tp := c.tps[id]; tp != nil {
				tp.Close()
			}
			c.hosts[id].Close()
		}
		if st := c.stores[id]; st != nil {
			if err := st.Close(); err != nil {
				b.Error(err)
			}
		}
	}
}

// produceCounted is produceRound on leaders (c's), adding the file and
// folder syncs of c's partitions and state stores meanwhile to *partSyncs
// and *storeSyncs.
func (c *partCluster) produceCounted(ctx context.Context, leaders []*replica.Partition, n int, partSyncs, storeSyncs *int64) error {
	ps, ss := c.partSyncs.Load(), c.storeSyncs.Load()
	err := produceRound(ctx, leaders, n)
	*partSyncs += c.partSyncs.Load() - ps
	*storeSyncs += c.storeSyncs.Load() - ss
	return err
}

// forEach calls f(0..n-1) from up to 32 goroutines and returns the errors.
func forEach(n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for range min(n, 32) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				errs[i] = f(i)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func waitFor(b *testing.B, what string, limit time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produceRound produces n copies of appendBatch with acks=all from
// raftProducers goroutines per partition, each with one batch in flight
// (a fresh copy per produce: raft keeps the proposed slice, and the TCP
// transport encodes it for a slow follower after the commit may have
// been answered).
func produceRound(ctx context.Context, leaders []*replica.Partition, n int) error {
	tmpl := appendBatch()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(leaders)*raftProducers)
	for w := range errs {
		p := leaders[w%len(leaders)]
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				pd, err := p.ProduceWith(bytes.Clone(tmpl), replica.ProduceOptions{Acks: replica.AcksAll})
				if err == nil {
					_, err = pd.Wait(ctx)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// BenchmarkRaftProduce: raftPartitions partitions, 16 x 1 KiB records per
// batch (appendBatch, 16,589 bytes: about what a loaded Kafka producer
// sends per partition with the default 16 KiB batch.size), acks=all,
// raftProducers producers per partition each with one batch in flight (64
// in flight), a fresh copy of the batch per produce, on real
// files in b.TempDir() with the Pebble state store (fsyncs are real). One
// op is one acknowledged batch; MB/s counts its bytes.
//
//   - rf=3: three replicas per partition on three hosts, leaders spread
//     over them (as Kafka spreads preferred leaders). It alternates rounds
//     of raftRoundBatches batches with an rf=1 peer built beside it (the
//     peer outside the timer): rf1-MB/s and ratio = MB/s / rf1-MB/s (goal
//     >= 0.7). The three replicas share the machine's cores and disk, where
//     the peer's one replica has them to itself: stored-ratio = ratio x 3
//     is the bytes all replicas stored per second next to the peer's.
//     wa/replica is the bytes written to the partitions' files
//     (log, indexes, .raftindex, checkpoints, snapshots, through a
//     counting vfs.FS) per byte produced per replica, over the timed
//     rounds and the close; wa+state/replica adds the Pebble state
//     store's writes (WAL, flushes, compactions). Goal: <= 1.1.
//     log-fsyncs/op counts the partitions' file and folder syncs of all
//     replicas, state-fsyncs/op the state stores', per op in the timed
//     rounds.
//   - rf=1: the same on a one-voter raft group per partition (one host),
//     a single node's path.
func BenchmarkRaftProduce(b *testing.B) {
	size := int64(len(appendBatch()))
	ctx := context.Background()
	run := func(b *testing.B, main partClusterConfig, peer *partClusterConfig) {
		main.groups, main.dir = raftPartitions, filepath.Join(b.TempDir(), "main")
		c := newPartCluster(b, main)
		defer c.close(b)
		c.elect(b, func(i int) uint64 { return c.ids[i%len(c.ids)] })
		leaders := c.leaders()
		var pc *partCluster
		var peerLeaders []*replica.Partition
		if peer != nil {
			peer.groups, peer.dir = raftPartitions, filepath.Join(b.TempDir(), "peer")
			pc = newPartCluster(b, *peer)
			defer pc.close(b)
			pc.elect(b, func(int) uint64 { return 1 })
			peerLeaders = pc.leaders()
		}
		b.SetBytes(size)
		part0, store0 := c.partBytes.Load(), c.storeBytes.Load()
		var partSyncs, storeSyncs int64
		var peerTime time.Duration
		alternate(b, raftRoundBatches, func(n int) error {
			return c.produceCounted(ctx, leaders, n, &partSyncs, &storeSyncs)
		}, func(n int) error {
			if pc == nil {
				return nil
			}
			d, err := timeIt(func() error { return produceRound(ctx, peerLeaders, n) })
			peerTime += d
			return err
		})
		total := size * int64(b.N)
		b.ReportMetric(float64(partSyncs)/float64(b.N), "log-fsyncs/op")
		b.ReportMetric(float64(storeSyncs)/float64(b.N), "state-fsyncs/op")
		if pc != nil {
			peerMBps := mbps(total, peerTime)
			b.ReportMetric(peerMBps, "rf1-MB/s")
			if peerMBps > 0 {
				r := mbps(total, b.Elapsed()) / peerMBps
				b.ReportMetric(r, "ratio")
				// The replicas share this machine's cores and disk:
				// the bytes all of them stored per second next to
				// the peer's one replica.
				b.ReportMetric(r*float64(main.replicas)/float64(peer.replicas), "stored-ratio")
			}
		}
		// Let the followers write what they were sent, then close: the
		// closing checkpoints and snapshots count too.
		waitFor(b, "every replica at the leaders' log end", 30*time.Second, func() bool {
			for i, l := range leaders {
				for _, id := range c.ids {
					if c.parts[id][i].LogEndOffset() != l.LogEndOffset() {
						return false
					}
				}
			}
			return true
		})
		c.close(b)
		c.stores = nil // closed
		c.parts = map[uint64][]*replica.Partition{}
		for _, id := range c.ids {
			c.closed[id] = true // nothing left to close
		}
		perReplica := float64(total) * float64(main.replicas)
		part := float64(c.partBytes.Load() - part0)
		b.ReportMetric(part/perReplica, "wa/replica")
		b.ReportMetric((part+float64(c.storeBytes.Load()-store0))/perReplica, "wa+state/replica")
	}
	b.Run("rf=3", func(b *testing.B) {
		run(b, partClusterConfig{replicas: 3}, &partClusterConfig{replicas: 1})
	})
	b.Run("rf=1", func(b *testing.B) { run(b, partClusterConfig{replicas: 1}, nil) })
}

// BenchmarkRaftIdlePartitions: idlePartitions idle RF=3 partitions (3,000
// replica.Partition replicas, each a segment log) on three hosts with the
// host's defaults and MemStateStores, leaders spread over the hosts. The
// replicas' files are in memory (vfs.NewMem under sparseFS, so the
// preallocated indexes take no memory): on the disk file system 3,000
// logs need about 9,000 descriptors, and creating their files takes tens
// of seconds on some file systems. Once every group quiesced it measures
// the process's CPU over idleWindow as a percentage of one core (cpu-%,
// goal < 5) and the heap per partition replica after a GC (B/replica:
// the in-memory files' data is part of it, a few hundred bytes per
// replica); setup-s is the time to open, elect and quiesce them all. The
// measurement runs once whatever b.N.
func BenchmarkRaftIdlePartitions(b *testing.B) {
	const idleWindow = 3 * time.Second
	before := heapAlloc()
	start := time.Now()
	c := newPartCluster(b, partClusterConfig{replicas: 3, groups: idlePartitions})
	defer c.close(b)
	c.elect(b, func(i int) uint64 { return uint64(i%3) + 1 })
	waitFor(b, "every group quiesced", 60*time.Second, c.quiesced)
	setup := time.Since(start)

	time.Sleep(500 * time.Millisecond) // let the last messages settle
	heap := heapAlloc()
	cpu0, wall0 := cpuTime(b), time.Now()
	time.Sleep(idleWindow)
	cpu := float64(cpuTime(b)-cpu0) / float64(time.Since(wall0)) * 100
	for range b.N {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(cpu, "cpu-%")
	b.ReportMetric(float64(heap-min(heap, before))/float64(3*idlePartitions), "B/replica")
	b.ReportMetric(setup.Seconds(), "setup-s")
}

// BenchmarkRaftFailoverProduce: 16 RF=3 partitions on real files, all led
// by host 1, with the host's defaults; each gets one batch and quiesces.
// Host 1 stops (its transport and host close); ms-to-writes is the time
// until a new leader on host 2 or 3 has acknowledged an acks=all produce
// for every partition (goal < 2 s; the 1 s liveness timeout is part of
// it), ms-to-first until the first partition did. One failover per op.
func BenchmarkRaftFailoverProduce(b *testing.B) {
	const groups = 16
	ctx := context.Background()
	var total, first time.Duration
	for range b.N {
		b.StopTimer()
		c := newPartCluster(b, partClusterConfig{replicas: 3, groups: groups, dir: b.TempDir()})
		c.elect(b, func(int) uint64 { return 1 })
		if err := produceRound(ctx, c.leaders(), groups*raftProducers); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "every group quiesced", 60*time.Second, c.quiesced)
		b.StartTimer()
		start := time.Now()
		c.stop(1)
		var wg sync.WaitGroup
		errs := make([]error, groups)
		took := make([]time.Duration, groups)
		for i := range groups {
			wg.Go(func() {
				deadline := start.Add(30 * time.Second)
				for time.Now().Before(deadline) {
					for _, id := range []uint64{2, 3} {
						p := c.parts[id][i]
						if !p.IsLeader() {
							continue
						}
						pd, err := p.ProduceWith(bytes.Clone(appendBatch()), replica.ProduceOptions{Acks: replica.AcksAll})
						if err == nil {
							wctx, cancel := context.WithTimeout(ctx, time.Second)
							_, err = pd.Wait(wctx)
							cancel()
						}
						if err == nil {
							took[i] = time.Since(start)
							return
						}
					}
					time.Sleep(5 * time.Millisecond)
				}
				errs[i] = fmt.Errorf("partition %d: no write accepted within 30 s", i)
			})
		}
		wg.Wait()
		total += time.Since(start)
		b.StopTimer()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		first += slices.Min(took)
		c.close(b)
	}
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-to-first")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-writes")
}
