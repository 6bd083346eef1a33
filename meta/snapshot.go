package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
)

// State snapshots (doc.go, "State snapshots"): SaveState exports the state
// keys and the replicated next offset; RestoreState installs such an export
// in place of the store's state, so a node whose metadata log lost the
// records it still needed (raft log compaction) catches up from another
// node's state.

// The SaveState data format's constants.
const (
	stateSnapMagic   = 0x534c4d53 // "SLMS"
	stateSnapVersion = 1
	// keySnapshot holds what the last RestoreState installed: version
	// (1) | the local log offset base (uint64 BE) | the SaveState data.
	keySnapshot = "snapshot"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stateSnap is decoded SaveState data.
type stateSnap struct {
	repNext int64
	keys    [][2][]byte // key, value, ascending by key
}

func encodeStateSnap(s stateSnap) []byte {
	b := binary.BigEndian.AppendUint32(nil, stateSnapMagic)
	b = append(b, stateSnapVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(s.repNext))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.keys)))
	for _, kv := range s.keys {
		b = binary.BigEndian.AppendUint32(b, uint32(len(kv[0])))
		b = append(b, kv[0]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(kv[1])))
		b = append(b, kv[1]...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeStateSnap(b []byte) (stateSnap, error) {
	var s stateSnap
	if len(b) < 4+1+8+4+4 {
		return s, fmt.Errorf("%w: state snapshot of %d bytes", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return s, fmt.Errorf("%w: state snapshot checksum mismatch", ErrCorrupt)
	}
	if binary.BigEndian.Uint32(body) != stateSnapMagic || body[4] != stateSnapVersion {
		return s, fmt.Errorf("%w: state snapshot magic or version", ErrCorrupt)
	}
	s.repNext = int64(binary.BigEndian.Uint64(body[5:]))
	n := binary.BigEndian.Uint32(body[13:])
	r := body[17:]
	if s.repNext < 0 {
		return s, fmt.Errorf("%w: state snapshot replicated offset %d", ErrCorrupt, s.repNext)
	}
	field := func() ([]byte, error) {
		if len(r) < 4 || uint64(len(r)-4) < uint64(binary.BigEndian.Uint32(r)) {
			return nil, fmt.Errorf("%w: state snapshot truncated", ErrCorrupt)
		}
		l := binary.BigEndian.Uint32(r)
		f := r[4 : 4+l]
		r = r[4+l:]
		return f, nil
	}
	var prev []byte
	for range n {
		k, err := field()
		if err != nil {
			return s, err
		}
		v, err := field()
		if err != nil {
			return s, err
		}
		if !isStateKey(k) || (prev != nil && bytes.Compare(prev, k) >= 0) {
			return s, fmt.Errorf("%w: state snapshot key %q (after %q)", ErrCorrupt, k, prev)
		}
		prev = k
		s.keys = append(s.keys, [2][]byte{k, v})
	}
	if len(r) != 0 {
		return s, fmt.Errorf("%w: %d bytes after the state snapshot's keys", ErrCorrupt, len(r))
	}
	return s, nil
}

func isStateKey(k []byte) bool {
	for _, p := range statePrefixes {
		if bytes.HasPrefix(k, []byte(p)) {
			return true
		}
	}
	return false
}

// SaveState returns a consistent export of the state: every state key and
// the replicated next offset, from one Pebble snapshot (doc.go, "State
// snapshots"). RestoreState on another store installs it.
func (s *Store) SaveState() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock() // keeps the database open meanwhile (Close, reopen)
	if s.closed {
		return nil, ErrClosed
	}
	if s.db == nil {
		return nil, fmt.Errorf("%w: the store failed and has not reopened yet", ErrStorage)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	var out stateSnap
	if v, ok, err := get(snap, keyReplicated); err != nil {
		return nil, err
	} else if ok {
		if out.repNext, err = decodeReplicatedNext(v); err != nil {
			return nil, err
		}
	}
	for _, p := range statePrefixes {
		err := scan(snap, p, func(k, v []byte) error {
			out.keys = append(out.keys, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return encodeStateSnap(out), nil
}

// RestoreState replaces the state by data (SaveState output of another
// store) when data's replicated next offset is ahead of ReplicatedOffset();
// otherwise it does nothing (the store already has that state) and
// returns nil. The state keys, replicated/next, the snapshot key and the
// removal of the local log (its records led to the state being replaced)
// are ONE synced batch; memory follows once it committed. The local log
// goes on at Offset()+1 (the restore takes one local offset and has no
// log/ key), so Offset() still moves with every change, and Rebuild
// replays the later records on top of the restored state. Replicated
// records below the restored offset are skipped by ApplyReplicated as any
// re-delivered record. A proposal waiting for offsets the restore skipped
// gets an error (its outcome is unknown). Errors: ErrCorrupt (nothing
// changes) for data that does not decode or whose keys do not form a
// consistent state; ErrStorage and ErrClosed as for any change.
func (s *Store) RestoreState(data []byte) error {
	snap, err := decodeStateSnap(data)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	if snap.repNext <= s.repNext {
		return nil
	}
	base := s.next + 1
	b := s.db.NewIndexedBatch()
	defer b.Close()
	st, err := restoreInto(b, snap)
	if err != nil {
		return err
	}
	if err := b.DeleteRange([]byte(keyLogPrefix), prefixEnd(keyLogPrefix), nil); err != nil {
		return err
	}
	if err := b.Set([]byte(keyReplicated), encodeReplicatedNext(snap.repNext), nil); err != nil {
		return err
	}
	if err := b.Set([]byte(keySnapshot), encodeSnapshotKey(base, data), nil); err != nil {
		return err
	}
	what := fmt.Sprintf("restored state at replicated offset %d (local log from %d)", snap.repNext, base)
	if err := s.commitLocked(b, what); err != nil {
		return err
	}
	s.mu.Lock()
	s.st, s.next, s.repNext = st, base, snap.repNext
	close(s.applied)
	s.applied = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// restoreInto replaces the state keys in b (an indexed batch) by snap's
// and returns the state they hold, checked as Open checks it.
func restoreInto(b *pebble.Batch, snap stateSnap) (*state, error) {
	for _, p := range statePrefixes {
		if err := b.DeleteRange([]byte(p), prefixEnd(p), nil); err != nil {
			return nil, err
		}
	}
	for _, kv := range snap.keys {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			return nil, err
		}
	}
	st, err := loadState(b)
	if err != nil {
		return nil, fmt.Errorf("%w: the restored state: %w", ErrCorrupt, err)
	}
	return st, nil
}

func encodeSnapshotKey(base uint64, data []byte) []byte {
	v := binary.BigEndian.AppendUint64([]byte{valueVersion}, base)
	return append(v, data...)
}

// restoredBase returns the state the last RestoreState installed and the
// local log offset after it; with no restore, an empty state and 0.
func restoredBase(db *pebble.DB) (*state, uint64, error) {
	v, ok, err := get(db, keySnapshot)
	if err != nil || !ok {
		return newState(), 0, err
	}
	if len(v) < 9 || v[0] != valueVersion {
		return nil, 0, fmt.Errorf("%w: snapshot value header", ErrCorrupt)
	}
	snap, err := decodeStateSnap(v[9:])
	if err != nil {
		return nil, 0, err
	}
	b := db.NewIndexedBatch()
	defer b.Close()
	st, err := restoreInto(b, snap)
	return st, binary.BigEndian.Uint64(v[1:9]), err
}

// logBase returns the local log offset base: the one after the last
// restore (0 without one).
func logBase(r pebble.Reader) (uint64, error) {
	v, ok, err := get(r, keySnapshot)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) < 9 || v[0] != valueVersion {
		return 0, fmt.Errorf("%w: snapshot value header", ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v[1:9]), nil
}
