package replica

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

// The out-of-band half of a compacted topic's raft snapshot (see
// raft_snapshot.go for the design and the manifest's format): the
// leader's manifest cache, the follower's transfer of the listed segment
// files before raft sees the MsgSnap, and the leader's serving of them.

// SnapshotFetcher carries a compacted partition's snapshot files from the
// leader to a follower, outside raft's messages (RaftConfig.Snapshots).
// TCPTransport.SnapshotFetcher is the production one: a connection of
// its own per file, so a large transfer never queues behind, or ahead of,
// raft's messages and heartbeats. Tests use an in-process one over
// Host.ServeSnapshotFile.
type SnapshotFetcher interface {
	// FetchSnapshotFile writes to w the bytes of file f of the group's
	// snapshot at index, as node from (the leader that sent it) serves
	// them (Host.ServeSnapshotFile). The caller checks size and checksum.
	FetchSnapshotFile(ctx context.Context, from uint64, group GroupID, index uint64, f segment.SnapshotFile, w io.Writer) error
	// SnapshotFailed tells node from that node to could not take the
	// group's snapshot at index (Host.ReportSnapshotFailure), so its raft
	// sends a new one.
	SnapshotFailed(ctx context.Context, from uint64, group GroupID, index uint64, to uint64) error
}

// errSnapshotTransfer reports a snapshot file that arrived with another
// size or checksum than the manifest's.
var errSnapshotTransfer = errors.New("replica: snapshot file transfer")

// snapshotFailTimeout bounds a failure report to the leader.
const snapshotFailTimeout = 5 * time.Second

// snapState is a replicated partition's snapshot state (raftState.snap).
// mu is a leaf.
type snapState struct {
	fetcher SnapshotFetcher

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // the manifest computation and the transfer
	// Leader: the manifest computed for FirstIndex mfirst over the
	// segments msegs (bases and sizes), ready or being computed.
	mfirst        uint64
	msegs         []segment.SnapshotFile
	mdata         raftSnapData
	mready, mbusy bool
	// Follower: a transfer under way (cancel stops it), or the files of
	// the snapshot (index, term) staged and waiting for ApplySnapshot.
	cancel      context.CancelFunc
	staged      bool
	stagedMeta  [2]uint64
	stagedFiles []segment.SnapshotFile
}

// manifest returns the manifest of a compacted partition's snapshot at
// first-1 once computed in the background for the current segments
// (ok=false meanwhile: raft asks again).
func (st *snapState) manifest(p *Partition, first uint64) (raftSnapData, bool) {
	segs := p.log.SnapshotSegments()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mready && st.mfirst == first && sameSegments(st.msegs, segs) {
		return st.mdata, true
	}
	if st.mbusy || st.closed {
		return raftSnapData{}, false
	}
	st.mbusy, st.mready = true, false
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		d, err := compactedManifest(p, first)
		st.mu.Lock()
		defer st.mu.Unlock()
		st.mbusy = false
		if err != nil {
			p.logger.Debug("replica: compacted snapshot manifest", "dir", p.log.Dir(), "err", err)
			return
		}
		st.mdata, st.mfirst, st.msegs, st.mready = d, first, withoutCRC(d.files), true
	}()
	return raftSnapData{}, false
}

// invalidate drops the manifest (a transfer of it failed).
func (st *snapState) invalidate() {
	st.mu.Lock()
	st.mready = false
	st.mu.Unlock()
}

func withoutCRC(files []segment.SnapshotFile) []segment.SnapshotFile {
	out := make([]segment.SnapshotFile, len(files))
	for i, f := range files {
		out[i] = segment.SnapshotFile{Base: f.Base, Size: f.Size}
	}
	return out
}

func sameSegments(a, b []segment.SnapshotFile) bool {
	return slices.Equal(withoutCRC(a), withoutCRC(b))
}

// compactedManifest reads the segment files below the raft start for a
// snapshot at first-1; it fails if the log moved meanwhile.
func compactedManifest(p *Partition, first uint64) (raftSnapData, error) {
	files, err := p.log.SnapshotFiles()
	if err != nil {
		return raftSnapData{}, err
	}
	d, err := snapMetadata(p, first-1)
	if err != nil {
		return raftSnapData{}, err
	}
	if p.log.FirstIndex() != first || !sameSegments(files, p.log.SnapshotSegments()) {
		return raftSnapData{}, errors.New("replica: the log changed while its snapshot manifest was read")
	}
	d.compacted, d.files = true, files
	d.logStartOffset = min(p.log.LogStartOffset(), d.nextOffset)
	if len(files) == 0 {
		d.logStartOffset = d.nextOffset
	}
	return d, nil
}

// isStaged reports whether the files of the snapshot meta are staged.
func (st *snapState) isStaged(meta raftpb.SnapshotMetadata, files []segment.SnapshotFile) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.isStagedLocked(meta, files)
}

func (st *snapState) isStagedLocked(meta raftpb.SnapshotMetadata, files []segment.SnapshotFile) bool {
	return st.staged && st.stagedMeta == [2]uint64{meta.Index, meta.Term} && slices.Equal(st.stagedFiles, files)
}

// unstage forgets the staged files (installed, or removed).
func (st *snapState) unstage() {
	st.mu.Lock()
	st.staged, st.stagedFiles = false, nil
	st.mu.Unlock()
}

// stop cancels a transfer and waits for the background work; Close calls
// it before closing the log.
func (st *snapState) stop() {
	st.mu.Lock()
	st.closed = true
	if st.cancel != nil {
		st.cancel()
	}
	st.mu.Unlock()
	st.wg.Wait()
}

// stopSnapshots stops the partition's snapshot work (Close).
func (p *Partition) stopSnapshots() {
	p.rs.snap.stop()
}

// snapshotInterceptor is a GroupStorage that sees a MsgSnap or a
// MsgHeartbeat before raft does (Host.Deliver): true means it keeps the
// message back (delivering it again later itself).
type snapshotInterceptor interface {
	intercept(h *Host, gm GroupMessage) bool
}

func (s *partitionStorage) intercept(h *Host, gm GroupMessage) bool {
	switch gm.Msg.Type {
	case raftpb.MsgSnap:
		return s.interceptSnapshot(h, gm)
	case raftpb.MsgHeartbeat:
		if !gm.Quiesce {
			s.nudge(h, gm)
		}
	}
	return false
}

// nudge answers a leader's heartbeat whose commit index (raft sends
// min(the follower's match, its commit)) is below the follower's
// FirstIndex-1 with a MsgAppResp at FirstIndex-1: the leader lost the
// answer to a snapshot the follower applied (a crash between the
// install and the next saved state, a message lost), and would otherwise
// wait for it forever in StateSnapshot (etcd raft leaves a snapshot's
// fate to the application). It is safe whenever sent: the entries up to
// FirstIndex-1 are committed (applied, then compacted), so every leader's
// log matches the follower's there; the leader takes it as a match
// (probing, or leaving StateSnapshot) or ignores it as stale.
func (s *partitionStorage) nudge(h *Host, gm GroupMessage) {
	prev := s.p.log.FirstIndex() - 1
	if prev == 0 || gm.Msg.Commit >= prev {
		return
	}
	h.cfg.Transport.Send([]GroupMessage{{Group: gm.Group, Msg: raftpb.Message{
		Type: raftpb.MsgAppResp, To: gm.Msg.From, From: gm.Msg.To, Term: gm.Msg.Term, Index: prev,
	}}})
}

// interceptSnapshot keeps back a compacted topic's snapshot whose files
// are not staged yet, and starts their transfer (one at a time; a copy
// of a snapshot already on its way is dropped: the leader sends no other
// until this one is applied or reported failed).
func (s *partitionStorage) interceptSnapshot(h *Host, gm GroupMessage) bool {
	snap := gm.Msg.Snapshot
	if snap == nil {
		return false
	}
	d, err := decodeRaftSnap(snap.Data)
	if err != nil || !d.compacted || len(d.files) == 0 {
		return false // raft's to take (ApplySnapshot refuses a bad one)
	}
	p := s.p
	st := &p.rs.snap
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.isStagedLocked(snap.Metadata, d.files) {
		return false
	}
	if st.cancel != nil || st.closed {
		return true
	}
	if st.fetcher == nil {
		p.logger.Warn("replica: a compacted topic's snapshot arrived but RaftConfig.Snapshots is not set: dropped", "dir", p.log.Dir(), "from", gm.Msg.From)
		return true
	}
	st.staged, st.stagedFiles = false, nil
	ctx, cancel := context.WithCancel(context.Background())
	st.cancel = cancel
	st.wg.Add(1)
	go st.transfer(ctx, h, p, gm, d.files)
	return true
}

// transfer stages the snapshot's files, then delivers its MsgSnap to the
// host; on failure it removes them and tells the leader.
func (st *snapState) transfer(ctx context.Context, h *Host, p *Partition, gm GroupMessage, files []segment.SnapshotFile) {
	defer st.wg.Done()
	meta := gm.Msg.Snapshot.Metadata
	err := stageSnapshotFiles(ctx, st.fetcher, p.fs, p.log.Dir(), gm.Msg.From, gm.Group, meta.Index, files)
	st.mu.Lock()
	st.cancel = nil
	closed := st.closed
	if err == nil {
		st.staged, st.stagedMeta, st.stagedFiles = true, [2]uint64{meta.Index, meta.Term}, files
	}
	st.mu.Unlock()
	if closed {
		return // the staged files go at the next open
	}
	if err != nil {
		p.logger.Warn("replica: snapshot file transfer failed; the leader will send another snapshot", "dir", p.log.Dir(), "from", gm.Msg.From, "index", meta.Index, "err", err)
		if rerr := segment.RemoveStagedSnapshot(p.fs, p.log.Dir()); rerr != nil {
			p.logger.Warn("replica: remove staged snapshot files", "dir", p.log.Dir(), "err", rerr)
		}
		rctx, cancel := context.WithTimeout(context.Background(), snapshotFailTimeout)
		defer cancel()
		if rerr := st.fetcher.SnapshotFailed(rctx, gm.Msg.From, gm.Group, meta.Index, gm.Msg.To); rerr != nil {
			p.logger.Debug("replica: report a failed snapshot", "from", gm.Msg.From, "err", rerr)
		}
		return
	}
	h.Deliver([]GroupMessage{gm})
}

// stageSnapshotFiles fetches each file into its staged name in dir,
// checks its size and CRC-32C, and syncs it and the folder.
func stageSnapshotFiles(ctx context.Context, fetcher SnapshotFetcher, fs vfs.FS, dir string, from uint64, group GroupID, index uint64, files []segment.SnapshotFile) error {
	if err := segment.RemoveStagedSnapshot(fs, dir); err != nil {
		return err
	}
	for _, sf := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := segment.StagedSnapshotPath(dir, sf.Base)
		f, err := fs.Create(path)
		if err != nil {
			return err
		}
		w := &stageWriter{f: f, h: crc32.New(castagnoli)}
		err = fetcher.FetchSnapshotFile(ctx, from, group, index, sf, w)
		if err == nil && (w.n != sf.Size || w.h.Sum32() != sf.CRC) {
			err = fmt.Errorf("%w: file %d arrived with %d bytes, crc %#x; the manifest says %d, %#x", errSnapshotTransfer, sf.Base, w.n, w.h.Sum32(), sf.Size, sf.CRC)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("replica: snapshot file %d from node %d: %w", sf.Base, from, err)
		}
	}
	return fs.SyncDir(dir)
}

// stageWriter writes a staged file sequentially, checksumming it.
type stageWriter struct {
	f vfs.File
	h hash.Hash32
	n int64
}

func (w *stageWriter) Write(b []byte) (int, error) {
	n, err := w.f.WriteAt(b, w.n)
	w.h.Write(b[:n])
	w.n += int64(n)
	return n, err
}

// snapshotSource is a GroupStorage that serves its snapshot files.
type snapshotSource interface {
	serveSnapshotFile(index uint64, f segment.SnapshotFile, w io.Writer) error
	snapshotFailed()
}

func (s *partitionStorage) serveSnapshotFile(index uint64, f segment.SnapshotFile, w io.Writer) error {
	r, err := s.p.log.OpenSnapshotFile(f)
	if err != nil {
		s.p.rs.snap.invalidate()
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, io.NewSectionReader(r, 0, r.Size()))
	return err
}

func (s *partitionStorage) snapshotFailed() { s.p.rs.snap.invalidate() }

// ServeSnapshotFile writes to w the bytes of file f of the group's
// snapshot at index (the leader's side of a SnapshotFetcher), while the
// segment it names is still one of the log's segments below the raft
// start with that size (segment.ErrSnapshotFile otherwise). The file
// stays readable until the copy ends whatever retention or the cleaner do
// meanwhile. It runs in the caller's goroutine, not a worker's.
func (h *Host) ServeSnapshotFile(id GroupID, index uint64, f segment.SnapshotFile, w io.Writer) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	src, ok := g.storage.(snapshotSource)
	if !ok {
		return fmt.Errorf("replica: raft group %s serves no snapshot files", id)
	}
	return src.serveSnapshotFile(index, f, w)
}

// ReportSnapshotFailure tells the group's raft (on its leader) that
// replica to could not take the snapshot sent to it: raft then probes it
// again and sends a new snapshot if it still needs one.
func (h *Host) ReportSnapshotFailure(id GroupID, to uint64) error {
	return h.call(id, true, func(g *group) error { return snapshotFailed(g, to) })
}

// reportSnapshotFailureAsync is ReportSnapshotFailure without waiting
// (a worker's send through the throttle dropped the snapshot).
func (h *Host) reportSnapshotFailureAsync(id GroupID, to uint64) {
	_ = h.postGroup(id, func(g *group) error { return snapshotFailed(g, to) })
}

func snapshotFailed(g *group, to uint64) error {
	if src, ok := g.storage.(snapshotSource); ok {
		src.snapshotFailed()
	}
	g.rn.ReportSnapshot(to, raft.SnapshotFailure)
	return nil
}
