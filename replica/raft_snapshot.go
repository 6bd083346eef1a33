package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Raft snapshots of a delete topic's partition. Retention is raft log
// compaction: it removes whole segments below the raft retain bound (the
// last applied index + 1, set at every apply), so FirstIndex moves to the
// first segment still on disk. A follower that needs an entry below
// FirstIndex gets a snapshot at FirstIndex-1 instead: metadata only, no
// records (a delete topic's records below it are gone on the leader too).
// The follower empties its log at the snapshot's next offset
// (segment.Log.ResetAt), takes the producer state and leader epochs from
// it, and receives everything after it as ordinary entries, so it holds
// exactly what the leader holds, from the same log start offset.
//
// Format of raftpb.Snapshot.Data, integers big-endian:
//
//	magic           uint32  0x534c5253 ("SLRS")
//	version         uint8   1
//	nextOffset      int64   the Kafka offset after the snapshot's entry
//	epochs          uint32  count, then per epoch: epoch int32, startOffset int64
//	producers       uint32  length, then a producer snapshot file's bytes
//	                        (snapshot.go's format) of the state below
//	                        nextOffset; 0 when none was kept
//	crc             uint32  CRC-32C of every byte before it
//
// The snapshot's ConfState is the group's current one. It is the
// configuration at the snapshot's index unless a configuration change
// entry is still in the log above it; the follower then applies that
// change again, which is a no-op for the single changes (add a learner,
// promote, remove) Sluice makes one at a time.
//
// Compacted topics are not served yet: the cleaner rewrites only segments
// below the retain bound and those leave the raft log, so a follower
// behind them would need the cleaned segments themselves (a segment
// transfer); until then Snapshot answers
// raft.ErrSnapshotTemporarilyUnavailable for them and raft retries.

const (
	raftSnapMagic   = 0x534c5253
	raftSnapVersion = 1
)

var errBadRaftSnapshot = errors.New("replica: bad raft snapshot")

// raftSnapData is a decoded snapshot's data.
type raftSnapData struct {
	nextOffset int64
	epochs     []epochEntry
	producers  []byte
}

func encodeRaftSnap(d raftSnapData) []byte {
	b := binary.BigEndian.AppendUint32(nil, raftSnapMagic)
	b = append(b, raftSnapVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(d.nextOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(d.epochs)))
	for _, e := range d.epochs {
		b = binary.BigEndian.AppendUint32(b, uint32(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.startOffset))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(d.producers)))
	b = append(b, d.producers...)
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
	if binary.BigEndian.Uint32(body) != raftSnapMagic || body[4] != raftSnapVersion {
		return d, fmt.Errorf("%w: magic or version", errBadRaftSnapshot)
	}
	r := body[5:]
	d.nextOffset = int64(binary.BigEndian.Uint64(r))
	n := binary.BigEndian.Uint32(r[8:])
	r = r[12:]
	if uint64(len(r)) < uint64(n)*12+4 {
		return d, fmt.Errorf("%w: %d epochs in %d bytes", errBadRaftSnapshot, n, len(r))
	}
	for range n {
		d.epochs = append(d.epochs, epochEntry{epoch: int32(binary.BigEndian.Uint32(r)), startOffset: int64(binary.BigEndian.Uint64(r[4:]))})
		r = r[12:]
	}
	plen := binary.BigEndian.Uint32(r)
	r = r[4:]
	if uint64(len(r)) != uint64(plen) || d.nextOffset < 0 {
		return d, fmt.Errorf("%w: producer state of %d bytes in %d", errBadRaftSnapshot, plen, len(r))
	}
	if plen > 0 {
		d.producers = r
	}
	return d, nil
}

// Snapshot answers raft (raft.Storage) with a snapshot at FirstIndex-1
// for a follower that needs compacted entries (see the top of the file).
func (s *partitionStorage) Snapshot() (raftpb.Snapshot, error) {
	p := s.p
	if !p.Config().Log.Deletes() || p.Config().Log.Compacts() {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	first := p.log.FirstIndex()
	index := first - 1
	term, err := p.log.Term(index)
	if err != nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	next, err := p.log.OffsetAfter(index)
	if err != nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
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
	// segment starting there was rolled (kept by pruneSnapshots).
	if b, err := readFile(p, filepath.Join(p.log.Dir(), snapshotName(next))); err == nil {
		d.producers = b
	}
	_, cs, _ := s.InitialState()
	return raftpb.Snapshot{
		Data:     encodeRaftSnap(d),
		Metadata: raftpb.SnapshotMetadata{Index: index, Term: term, ConfState: cs},
	}, nil
}

func readFile(p *Partition, name string) ([]byte, error) {
	f, err := p.fs.Open(name)
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
// restarts empty at its next offset (durably), the producer state and
// leader epochs are the snapshot's, and the high watermark is its next
// offset (a snapshot's index is committed).
func (s *partitionStorage) ApplySnapshot(snap raftpb.Snapshot) error {
	p := s.p
	d, err := decodeRaftSnap(snap.Data)
	if err != nil {
		return err
	}
	p.snapWG.Wait()
	if err := p.log.ResetAt(snap.Metadata.Index, snap.Metadata.Term, d.nextOffset); err != nil {
		return err
	}
	if err := removeSnapshotsAbove(p.fs, p.log.Dir(), -1); err != nil {
		return err
	}
	if d.producers != nil {
		if _, err := decodeSnapshot(d.producers); err != nil {
			return fmt.Errorf("replica: the raft snapshot's producer state: %w", err)
		}
		if err := writeSnapshot(p.fs, p.log.Dir(), d.nextOffset, d.producers, d.nextOffset); err != nil {
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
	p.epochs.truncateFromStart(d.nextOffset)
	p.saveEpochsLocked()
	p.mu.Unlock()
	s.SetConfState(snap.Metadata.ConfState)
	p.log.SetRaftRetainFrom(snap.Metadata.Index + 1)
	p.advance(d.nextOffset)
	return nil
}
