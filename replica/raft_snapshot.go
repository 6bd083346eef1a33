package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/vfs"
)

// Raft snapshots. Retention is raft log compaction: it removes whole
// segments below the raft retain bound (the last applied index + 1, set
// at every apply), so FirstIndex moves to the first segment still on
// disk; the cleaner rewrites only segments wholly below the same bound,
// and those leave the raft log (FirstIndex moves past them too). A
// follower that needs an entry below FirstIndex gets a snapshot at
// FirstIndex-1 instead.
//
// Delete topics: metadata only, no records (the records below it are gone
// on the leader too). The follower empties its log at the snapshot's next
// offset (segment.Log.ResetAt), takes the producer state and leader
// epochs from it, and receives everything after it as ordinary entries,
// so it holds exactly what the leader holds, from the same log start
// offset.
//
// Compacted topics (cleanup.policy contains compact): the records below
// FirstIndex are the cleaned segments, so the snapshot is a segment
// transfer, out of band. Its Data is a small manifest, the same metadata
// plus the log start offset and the list of segment files below the raft
// start (base offset, size, CRC-32C of each .log); the bytes never travel
// in a raft message. Leader: Snapshot computes the manifest in the
// background (reading every listed file for its checksum must not hold
// the worker) and answers raft.ErrSnapshotTemporarilyUnavailable until it
// is ready (raft asks again at the next heartbeat response); the manifest
// is kept while FirstIndex and the listed segments (bases and sizes) stay
// the same. Follower (raft_snapfiles.go): the host hands every MsgSnap to
// the partition before raft sees it (Host.Deliver); for a manifest with
// files the partition keeps it back, fetches each file from the leader
// through RaftConfig.Snapshots (a SnapshotFetcher: its own TCP stream in
// production, in-process in tests) into a staged file of the partition
// folder, synced and its checksum verified, and only then delivers the
// MsgSnap. Raft's heartbeats and the host's worker are never held up by
// the transfer. ApplySnapshot then installs the staged files
// (segment.Log.InstallSnapshot: atomic and crash-safe behind an install
// marker) as the log below the raft start, with the raft log restarting
// empty at index+1, and carries on as for a delete topic. A transfer that
// fails (the leader cleaned or deleted a listed segment meanwhile, a
// checksum does not match, the leader is unreachable) is reported to the
// leader (SnapshotFetcher.SnapshotFailed), whose raft then marks the
// snapshot failed (ReportSnapshot) and sends a new one.
//
// A snapshot applied whose answer the leader never got (a crash after
// ApplySnapshot, step 2 of the host's loop, before the group state was
// saved in step 4; a lost message) would leave the leader waiting in
// StateSnapshot for good, and the restarted follower's saved commit index
// below its log's FirstIndex-1 (raft panics on that). So startRaft raises
// the commit index to FirstIndex-1 (a snapshot holds committed entries
// only), and a follower answers a heartbeat whose commit index is below
// its FirstIndex-1 with a MsgAppResp there (raft_snapfiles.go, nudge):
// safe whenever sent, since every leader's log matches the committed
// prefix. Both serve delete topics' snapshots too. An acknowledgement
// (or nudge) that arrives after the leader's retention moved its
// FirstIndex past the snapshot's index + 1 would leave the follower in
// raft's StateSnapshot, paused, for good (etcd raft resumes it only from
// a log that still holds the next entry, and sends no new snapshot
// meanwhile): the leader's host reports that snapshot done
// (raft_progress.go, resendStaleSnapshots), raft probes the compacted
// index and sends a newer snapshot.
//
// A delete topic whose records feed a state machine kept outside the log
// (the metadata log: meta.Store) sets RaftConfig.SnapshotState. The
// leader then appends the machine's state, which must cover every record
// below the snapshot's next offset (SnapshotState.Save; until it does the
// snapshot is temporarily unavailable), as snapshot version 3, and the
// follower's ApplySnapshot hands it to SnapshotState.Restore BEFORE it
// resets the log. That order is the crash-safe one: a crash after the
// restore and before the reset leaves the old log with a state ahead of
// it, which is harmless (the state holds committed records only, the
// machine skips records below its own offset, and raft installs the
// snapshot again or sends the entries); the other order, a crash after
// the reset, would leave a log starting past the machine's state with
// raft believing the snapshot installed, so it would never be sent again
// and the machine could not catch up. Restore must therefore be durable
// when it returns, and idempotent (a state not ahead of the machine's is a
// no-op). A leader without SnapshotState sends version 1; a follower
// without it ignores a version 3's state. Retention keeps, besides what
// raft has not applied, what the machine has not (SnapshotState.NextOffset,
// retentionBound): a replica's own retention must not outrun its own
// machine, which only a snapshot from another replica could then help.
//
// Format of raftpb.Snapshot.Data, integers big-endian:
//
//	magic           uint32  0x534c5253 ("SLRS")
//	version         uint8   1: a delete topic's; 2: a compacted topic's;
//	                        3: a delete topic's with a state machine's state;
//	                        4, 5, 6: versions 1, 2, 3 with confIndex (what
//	                        a leader writes; 1 to 3 are still read)
//	nextOffset      int64   the Kafka offset after the snapshot's entry
//	confIndex       uint64  versions 4 to 6 only: every configuration
//	                        change at or below this raft index is in the
//	                        snapshot's ConfState (GroupState.ConfIndex)
//	logStartOffset  int64   version 2 only: the leader's log start offset
//	epochs          uint32  count, then per epoch: epoch int32, startOffset int64
//	producers       uint32  length, then a producer snapshot's bytes
//	                        (snapshot.go's format, version 2: with the
//	                        aborted transactions whose marker is below
//	                        nextOffset, from the .txnindex) of the state
//	                        below nextOffset; 0 when none was kept
//	files           uint32  version 2 only: count, then per segment file
//	                        below the raft start, in offset order:
//	                        base int64, size int64, crc uint32 (CRC-32C
//	                        of the .log's bytes)
//	state           uint32  version 3 only: length, then SnapshotState.Save's
//	                        bytes
//	crc             uint32  CRC-32C of every byte before it
//
// The snapshot's ConfState is the leader's current one (as last saved),
// not the one at the snapshot's index: raft drops a snapshot whose
// ConfState does not name its receiver, and a replica just added is not
// in the configuration at FirstIndex-1 while its own AddLearner is still
// in the retained log. Configuration changes between the snapshot's
// index and the leader's applied index are then in the ConfState already
// and in the log the follower takes after the snapshot; applying them
// again is not a no-op (adding learners 4, 5, 6 again to voters
// {4, 5, 6} demotes them all, and etcd raft panics, "removed all
// voters"). So the snapshot carries confIndex, the leader's
// GroupState.ConfIndex saved with that ConfState, and the follower's
// host skips the changes at or below it. A version 1 to 3 snapshot
// (confIndex 0) leaves every change to be applied again, as before.

const (
	raftSnapMagic     = 0x534c5253
	raftSnapVersion   = 1
	raftSnapCompacted = 2
	raftSnapState     = 3
	// raftSnapConf is added to a version when confIndex follows
	// nextOffset (versions 4, 5, 6).
	raftSnapConf = 3
)

// SnapshotState is a state machine fed by a delete topic's records, kept
// outside its log (the metadata log's meta.Store), whose state travels in
// the partition's raft snapshots so that a follower behind the leader's
// log start can catch up (see the top of the file). Both methods run in
// the raft host's worker: they should be quick (a small state).
type SnapshotState interface {
	// Save returns the state as of at least every record below next (it
	// may be newer). It returns an error when the machine has not applied
	// that far yet; the snapshot is then temporarily unavailable and raft
	// asks again later.
	Save(next int64) ([]byte, error)
	// Restore replaces the machine's state by data (a Save of another
	// replica), durably before it returns; it is a no-op when the
	// machine's state is already as new.
	Restore(data []byte) error
	// NextOffset is the next offset the machine will apply. Retention
	// keeps the entries from it (retentionBound), so a replica's own
	// retention never removes records its machine still needs. It is
	// read at each raft apply (the bound moves then), so the bound lags
	// the machine by up to one apply.
	NextOffset() int64
}

// retentionBound is the raft index retention must keep from, after the
// entries up to applied were applied: applied+1, or, for a partition with
// a SnapshotState, the entry holding its machine's next offset if that is
// lower. A machine already below the log start (it will get a snapshot)
// or at the log end holds nothing back.
func retentionBound(p *Partition, applied uint64) uint64 {
	bound := applied + 1
	if p.rs.state == nil {
		return bound
	}
	if idx, err := p.log.IndexAtOffset(p.rs.state.NextOffset()); err == nil && idx < bound {
		return idx
	}
	return bound
}

var errBadRaftSnapshot = errors.New("replica: bad raft snapshot")

// raftSnapData is a decoded snapshot's data.
type raftSnapData struct {
	nextOffset int64
	epochs     []epochEntry
	producers  []byte
	// A compacted topic's (version 2): its log start offset and the
	// segment files below the raft start.
	compacted      bool
	logStartOffset int64
	files          []segment.SnapshotFile
	// A delete topic's state machine's state (version 3); nil: none.
	state []byte
	// confIndex: every configuration change at or below it is in the
	// snapshot's ConfState (0 from a version 1 to 3 snapshot).
	confIndex uint64
}

func encodeRaftSnap(d raftSnapData) []byte {
	b := binary.BigEndian.AppendUint32(nil, raftSnapMagic)
	switch {
	case d.compacted:
		b = append(b, raftSnapCompacted+raftSnapConf)
	case d.state != nil:
		b = append(b, raftSnapState+raftSnapConf)
	default:
		b = append(b, raftSnapVersion+raftSnapConf)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(d.nextOffset))
	b = binary.BigEndian.AppendUint64(b, d.confIndex)
	if d.compacted {
		b = binary.BigEndian.AppendUint64(b, uint64(d.logStartOffset))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(d.epochs)))
	for _, e := range d.epochs {
		b = binary.BigEndian.AppendUint32(b, uint32(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.startOffset))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(d.producers)))
	b = append(b, d.producers...)
	if d.compacted {
		b = binary.BigEndian.AppendUint32(b, uint32(len(d.files)))
		for _, f := range d.files {
			b = binary.BigEndian.AppendUint64(b, uint64(f.Base))
			b = binary.BigEndian.AppendUint64(b, uint64(f.Size))
			b = binary.BigEndian.AppendUint32(b, f.CRC)
		}
	} else if d.state != nil {
		b = binary.BigEndian.AppendUint32(b, uint32(len(d.state)))
		b = append(b, d.state...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeRaftSnap(b []byte) (raftSnapData, error) {
	var d raftSnapData
	if len(b) < 4+1+8+4+4+4 {
		return d, fmt.Errorf("%w: %d bytes", errBadRaftSnapshot, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return d, fmt.Errorf("%w: checksum mismatch", errBadRaftSnapshot)
	}
	version := body[4]
	withConf := version > raftSnapConf
	if withConf {
		version -= raftSnapConf
	}
	if binary.BigEndian.Uint32(body) != raftSnapMagic || (version != raftSnapVersion && version != raftSnapCompacted && version != raftSnapState) {
		return d, fmt.Errorf("%w: magic or version", errBadRaftSnapshot)
	}
	d.compacted = version == raftSnapCompacted
	withState := version == raftSnapState
	r := body[5:]
	short := func(need int) error {
		if len(r) < need {
			return fmt.Errorf("%w: %d bytes where %d are needed", errBadRaftSnapshot, len(r), need)
		}
		return nil
	}
	d.nextOffset = int64(binary.BigEndian.Uint64(r))
	r = r[8:]
	if withConf {
		if err := short(8); err != nil {
			return d, err
		}
		d.confIndex = binary.BigEndian.Uint64(r)
		r = r[8:]
	}
	if d.compacted {
		if err := short(8); err != nil {
			return d, err
		}
		d.logStartOffset = int64(binary.BigEndian.Uint64(r))
		r = r[8:]
	}
	if err := short(4); err != nil {
		return d, err
	}
	n := binary.BigEndian.Uint32(r)
	r = r[4:]
	if uint64(len(r)) < uint64(n)*12+4 {
		return d, fmt.Errorf("%w: %d epochs in %d bytes", errBadRaftSnapshot, n, len(r))
	}
	for range n {
		d.epochs = append(d.epochs, epochEntry{epoch: int32(binary.BigEndian.Uint32(r)), startOffset: int64(binary.BigEndian.Uint64(r[4:]))})
		r = r[12:]
	}
	plen := binary.BigEndian.Uint32(r)
	r = r[4:]
	if uint64(len(r)) < uint64(plen) || d.nextOffset < 0 {
		return d, fmt.Errorf("%w: producer state of %d bytes in %d", errBadRaftSnapshot, plen, len(r))
	}
	if plen > 0 {
		d.producers = r[:plen]
	}
	r = r[plen:]
	if d.compacted {
		if err := short(4); err != nil {
			return d, err
		}
		n := binary.BigEndian.Uint32(r)
		r = r[4:]
		if uint64(len(r)) != uint64(n)*20 {
			return d, fmt.Errorf("%w: %d files in %d bytes", errBadRaftSnapshot, n, len(r))
		}
		prev := int64(-1)
		for range n {
			f := segment.SnapshotFile{Base: int64(binary.BigEndian.Uint64(r)), Size: int64(binary.BigEndian.Uint64(r[8:])), CRC: binary.BigEndian.Uint32(r[16:])}
			if f.Base <= prev || f.Base >= d.nextOffset || f.Size < 0 {
				return d, fmt.Errorf("%w: file %d after %d (next offset %d)", errBadRaftSnapshot, f.Base, prev, d.nextOffset)
			}
			prev = f.Base
			d.files = append(d.files, f)
			r = r[20:]
		}
		if d.logStartOffset > d.nextOffset || (len(d.files) > 0 && d.logStartOffset < d.files[0].Base) {
			return d, fmt.Errorf("%w: log start offset %d", errBadRaftSnapshot, d.logStartOffset)
		}
		r = nil
	}
	if withState {
		if err := short(4); err != nil {
			return d, err
		}
		n := binary.BigEndian.Uint32(r)
		r = r[4:]
		if uint64(len(r)) != uint64(n) {
			return d, fmt.Errorf("%w: a state of %d bytes in %d", errBadRaftSnapshot, n, len(r))
		}
		d.state = append([]byte{}, r...)
		r = nil
	}
	if len(r) != 0 {
		return d, fmt.Errorf("%w: %d bytes after the producer state", errBadRaftSnapshot, len(r))
	}
	return d, nil
}

// Snapshot answers raft (raft.Storage) with a snapshot at FirstIndex-1
// for a follower that needs compacted entries (see the top of the file).
func (s *partitionStorage) Snapshot() (raftpb.Snapshot, error) {
	p := s.p
	cfg := p.Config().Log
	if !cfg.Deletes() && !cfg.Compacts() {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	first := p.log.FirstIndex()
	index := first - 1
	term, err := p.log.Term(index)
	if err != nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	var d raftSnapData
	if cfg.Compacts() {
		var ok bool
		if d, ok = p.rs.snap.manifest(p, first); !ok {
			return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
		}
	} else if d, err = snapMetadata(p, index); err != nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	} else if ss := p.rs.state; ss != nil {
		state, err := ss.Save(d.nextOffset)
		if err != nil {
			return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
		}
		d.state = append([]byte{}, state...) // never nil: version 3
	}
	cs, confIndex := s.confState()
	d.confIndex = confIndex
	return raftpb.Snapshot{
		Data:     encodeRaftSnap(d),
		Metadata: raftpb.SnapshotMetadata{Index: index, Term: term, ConfState: cs},
	}, nil
}

// snapMetadata returns a snapshot's metadata at index (FirstIndex-1): the
// next offset, the leader epochs up to it, and the producer state below
// it.
func snapMetadata(p *Partition, index uint64) (raftSnapData, error) {
	next, err := p.log.OffsetAfter(index)
	if err != nil {
		return raftSnapData{}, err
	}
	d := raftSnapData{nextOffset: next}
	p.mu.Lock()
	for _, e := range p.epochs.entries {
		if e.startOffset <= next {
			d.epochs = append(d.epochs, e)
		}
	}
	p.mu.Unlock()
	// The producer state below next: the snapshot written when the
	// segment starting there was rolled (kept by pruneSnapshots), sent
	// as version 2 with the aborted transactions whose marker is below
	// next (from the transaction index: a follower installing a
	// compacted topic's segments adds them to its own).
	if b, err := readFile(p.fs, filepath.Join(p.log.Dir(), snapshotName(next))); err == nil {
		ps, _, err := decodeSnapshotTxn(b)
		if err != nil {
			d.producers = b // as read: the follower refuses it
			return d, nil
		}
		var aborted []abortedTxn
		for _, a := range p.log.AbortedTxns(0, next) {
			if a.LastOffset < next {
				aborted = append(aborted, abortedTxn{pid: a.ProducerID, first: a.FirstOffset, last: a.LastOffset, lso: a.LastStableOffset})
			}
		}
		d.producers = encodeSnapshotTxn(ps, aborted)
	}
	return d, nil
}

// restoreState hands a snapshot's state to RaftConfig.SnapshotState,
// before the log is reset (the crash-safe order: see the top of the file).
func restoreState(p *Partition, d raftSnapData) error {
	ss := p.rs.state
	if ss == nil || d.state == nil {
		return nil
	}
	if err := ss.Restore(d.state); err != nil {
		return fmt.Errorf("replica: restoring the raft snapshot's state: %w", err)
	}
	return nil
}

// readFile reads the whole file name on fs.
func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// ApplySnapshot replaces the log by a snapshot from the leader: the log
// restarts empty at its next offset (durably; for a compacted topic above
// the installed segment files), the producer state and
// leader epochs are the snapshot's, and the high watermark is its next
// offset (a snapshot's index is committed).
func (s *partitionStorage) ApplySnapshot(snap raftpb.Snapshot) error {
	p := s.p
	s.forgetAll() // the log is replaced under them
	d, err := decodeRaftSnap(snap.Data)
	if err != nil {
		return err
	}
	p.snapWG.Wait()
	start := d.nextOffset
	if d.compacted {
		// The files were staged before raft saw the snapshot
		// (raft_snapfiles.go); InstallSnapshot checks them again.
		if len(d.files) > 0 && !p.rs.snap.isStaged(snap.Metadata, d.files) {
			return fmt.Errorf("%w: a compacted topic's snapshot at %d whose files were not staged", errBadRaftSnapshot, snap.Metadata.Index)
		}
		err := p.log.InstallSnapshot(d.files, snap.Metadata.Index, snap.Metadata.Term, d.nextOffset, d.logStartOffset)
		p.rs.snap.unstage()
		if err != nil {
			return err
		}
		start = p.log.LogStartOffset()
	} else if err := restoreState(p, d); err != nil {
		return err
	} else if err := p.log.ResetAt(snap.Metadata.Index, snap.Metadata.Term, d.nextOffset); err != nil {
		return err
	}
	if err := removeSnapshotsAbove(p.fs, p.log.Dir(), -1); err != nil {
		return err
	}
	if d.producers != nil {
		ps, aborted, err := decodeSnapshotTxn(d.producers)
		if err != nil {
			return fmt.Errorf("replica: the raft snapshot's producer state: %w", err)
		}
		// The aborted transactions of the installed segments go to
		// their transaction indexes (those below the log start, a
		// delete topic's, are dropped), durably before the producer
		// snapshot that relies on them.
		for _, a := range aborted {
			if err := p.log.AppendAbortedTxn(a.entry()); err != nil && !errors.Is(err, segment.ErrTxnNotMonotonic) {
				return fmt.Errorf("replica: the raft snapshot's aborted transactions: %w", err)
			}
		}
		if err := p.log.SyncAbortedTxns(); err != nil {
			return err
		}
		if err := writeSnapshot(p.fs, p.log.Dir(), d.nextOffset, encodeSnapshot(ps), d.nextOffset); err != nil {
			return err
		}
	}
	p.appendMu.Lock()
	err = p.loadProducers()
	p.appendMu.Unlock()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.epochs.entries = d.epochs
	p.epochs.truncateFromStart(start)
	p.saveEpochsLocked()
	p.mu.Unlock()
	s.SetConfState(snap.Metadata.ConfState)
	p.rs.snapConfIndex = d.confIndex
	p.log.SetRaftRetainFrom(snap.Metadata.Index + 1)
	p.advance(d.nextOffset)
	return nil
}

// snapshotConfIndex returns the confIndex of the snapshot ApplySnapshot
// just applied (snapshotConfIndexer; the host's worker calls it right
// after).
func (s *partitionStorage) snapshotConfIndex() uint64 { return s.p.rs.snapConfIndex }
