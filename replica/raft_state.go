package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// The durable state of a broker's raft groups, beside their logs: per
// group, the HardState (term, vote, commit), the ConfState (its replicas)
// and the last index its state machine applied, written for a batch of
// groups in one synced Pebble batch (Host.handle, step 4).
//
// StateStore format: one Pebble key per group, the GroupID's 20 bytes
// (topic id, 16 bytes, then the partition as a big-endian int32); the
// value (version 2):
//
//	+---------+------+------+--------+---------+-----------+-----------+------------+----------+
//	| version | term | vote | commit | applied | confIndex | flags     | 4 id lists | CRC-32C  |
//	| 1 byte  | 8    | 8    | 8      | 8       | 8         | 1         | see below  | 4 bytes  |
//	+---------+------+------+--------+---------+-----------+-----------+------------+----------+
//
// flags: bit 0 the ConfState's AutoLeave, bit 1 Joining (version 1: only
// bit 0).
//
// The id lists are the ConfState's Voters, Learners, VotersOutgoing and
// LearnersNext, in that order, each a uint32 count then that many uint64
// replica ids. Integers are big-endian. The CRC-32C (Castagnoli) covers
// every byte before it, the version included. Version 1 has no confIndex
// (it decodes as Applied, which the ConfState of a version 1 value
// always holds). A value that is short, long, of another version or
// whose checksum does not match is refused with ErrStateCorrupt: the
// group's replica must not start from it (raft would forget a vote or a
// commit).

// Format constants (part of the on-disk format).
const (
	stateVersion   = 2
	stateVersion1  = 1 // no confIndex
	stateKeyLen    = 16 + 4
	stateFixedLen  = 1 + 8*5 + 1 // version, term, vote, commit, applied, confIndex, flags
	stateFixedLen1 = 1 + 8*4 + 1 // version 1: no confIndex
	stateCRCLen    = 4
	stateListCount = 4
)

// ErrStateCorrupt marks a group state that does not decode.
var ErrStateCorrupt = errors.New("replica: raft group state damaged")

// GroupState is what a group keeps beside its log: its HardState, its
// ConfState and the last index its state machine applied, mutually
// consistent (the ConfState is the one in force after entry Applied, and
// HardState.Commit >= Applied).
type GroupState struct {
	HardState raftpb.HardState
	ConfState raftpb.ConfState
	Applied   uint64
	// ConfIndex says which configuration changes ConfState holds: every
	// one at or below it. Normally the index of the last change applied
	// (at most Applied); after a raft snapshot it may be above Applied: a
	// snapshot carries the leader's current ConfState, newer than its
	// index when configuration changes are still in the log above it
	// (raft_snapshot.go). The host applies a change to raft only when its
	// index is above ConfIndex, so one already held is never applied
	// twice (adding a learner again would demote a voter). 0: none.
	ConfIndex uint64
	// Joining is set while a joining replica has not caught up yet
	// (RaftConfig.Joining, raft_join.go), so a restart keeps it from
	// standing for election in an old configuration of its replay.
	Joining bool
}

func stateKey(id GroupID) []byte {
	k := make([]byte, 0, stateKeyLen)
	k = append(k, id.TopicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(id.Partition))
}

// encodeGroupState appends st's encoding (the format above) to dst.
func encodeGroupState(dst []byte, st GroupState) []byte {
	start := len(dst)
	dst = append(dst, stateVersion)
	dst = binary.BigEndian.AppendUint64(dst, st.HardState.Term)
	dst = binary.BigEndian.AppendUint64(dst, st.HardState.Vote)
	dst = binary.BigEndian.AppendUint64(dst, st.HardState.Commit)
	dst = binary.BigEndian.AppendUint64(dst, st.Applied)
	dst = binary.BigEndian.AppendUint64(dst, st.ConfIndex)
	// The flags byte: bit 0 the ConfState's AutoLeave, bit 1 Joining.
	var flags byte
	if st.ConfState.AutoLeave {
		flags |= 1
	}
	if st.Joining {
		flags |= 2
	}
	dst = append(dst, flags)
	for _, l := range [stateListCount][]uint64{st.ConfState.Voters, st.ConfState.Learners, st.ConfState.VotersOutgoing, st.ConfState.LearnersNext} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(l)))
		for _, id := range l {
			dst = binary.BigEndian.AppendUint64(dst, id)
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeGroupState decodes a value; it copies what it keeps.
func decodeGroupState(b []byte) (GroupState, error) {
	var st GroupState
	if len(b) < stateFixedLen1+stateListCount*4+stateCRCLen {
		return st, fmt.Errorf("%w: %d bytes", ErrStateCorrupt, len(b))
	}
	body, sum := b[:len(b)-stateCRCLen], binary.BigEndian.Uint32(b[len(b)-stateCRCLen:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return st, fmt.Errorf("%w: checksum %08x, stored %08x", ErrStateCorrupt, got, sum)
	}
	fixed := stateFixedLen
	switch body[0] {
	case stateVersion:
	case stateVersion1:
		fixed = stateFixedLen1
	default:
		return st, fmt.Errorf("%w: version %d, want %d", ErrStateCorrupt, body[0], stateVersion)
	}
	if len(body) < fixed+stateListCount*4 {
		return st, fmt.Errorf("%w: %d bytes", ErrStateCorrupt, len(b))
	}
	st.HardState.Term = binary.BigEndian.Uint64(body[1:])
	st.HardState.Vote = binary.BigEndian.Uint64(body[9:])
	st.HardState.Commit = binary.BigEndian.Uint64(body[17:])
	st.Applied = binary.BigEndian.Uint64(body[25:])
	st.ConfIndex = st.Applied
	if body[0] == stateVersion {
		st.ConfIndex = binary.BigEndian.Uint64(body[33:])
	}
	flags := body[fixed-1]
	if flags > 3 || (body[0] == stateVersion1 && flags > 1) {
		return st, fmt.Errorf("%w: flags byte %d", ErrStateCorrupt, flags)
	}
	st.ConfState.AutoLeave = flags&1 != 0
	st.Joining = flags&2 != 0
	rest := body[fixed:]
	var lists [stateListCount][]uint64
	for i := range lists {
		if len(rest) < 4 {
			return st, fmt.Errorf("%w: truncated replica list", ErrStateCorrupt)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n)*8 > uint64(len(rest)) {
			return st, fmt.Errorf("%w: replica list of %d ids in %d bytes", ErrStateCorrupt, n, len(rest))
		}
		if n > 0 {
			lists[i] = make([]uint64, n)
			for j := range lists[i] {
				lists[i][j] = binary.BigEndian.Uint64(rest[8*j:])
			}
		}
		rest = rest[8*n:]
	}
	if len(rest) != 0 {
		return st, fmt.Errorf("%w: %d trailing bytes", ErrStateCorrupt, len(rest))
	}
	st.ConfState.Voters, st.ConfState.Learners, st.ConfState.VotersOutgoing, st.ConfState.LearnersNext = lists[0], lists[1], lists[2], lists[3]
	if st.HardState.Commit < st.Applied {
		return st, fmt.Errorf("%w: applied %d past commit %d", ErrStateCorrupt, st.Applied, st.HardState.Commit)
	}
	return st, nil
}

// StateStore is the HardStateStore of a broker on Pebble (the format is
// at the top of this file). It is safe for concurrent use.
type StateStore struct {
	db  *pebble.DB
	dir string
}

// OpenStateStore opens (creating) the group state store in dir on fs; a
// nil fs is the OS file system, tests pass vfs.NewMem() (or a crashable
// one).
func OpenStateStore(dir string, fs vfs.FS, logger *slog.Logger) (*StateStore, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if logger == nil {
		logger = slog.Default()
	}
	cache := pebble.NewCache(1 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{
		FS:           fs,
		Cache:        cache,
		MemTableSize: 4 << 20,
		Logger:       statePebbleLogger{logger},
	})
	if err != nil {
		return nil, fmt.Errorf("replica: open raft state store %s: %w", dir, err)
	}
	return &StateStore{db: db, dir: dir}, nil
}

// Save writes states in one synced batch (HardStateStore).
func (s *StateStore) Save(states map[GroupID]GroupState, sync bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	var buf []byte
	for id, st := range states {
		buf = encodeGroupState(buf[:0], st)
		if err := b.Set(stateKey(id), buf, nil); err != nil {
			return err
		}
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("replica: save raft group states: %w", err)
	}
	return nil
}

// Load returns the group's saved state; ok is false when none is saved.
// A damaged value is an ErrStateCorrupt error.
func (s *StateStore) Load(id GroupID) (GroupState, bool, error) {
	v, closer, err := s.db.Get(stateKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return GroupState{}, false, nil
	}
	if err != nil {
		return GroupState{}, false, fmt.Errorf("replica: load raft group %s state: %w", id, err)
	}
	defer closer.Close()
	st, err := decodeGroupState(v)
	if err != nil {
		return GroupState{}, false, fmt.Errorf("raft group %s in %s: %w", id, s.dir, err)
	}
	return st, true, nil
}

// Delete removes the group's state, synced (its replica left the broker).
func (s *StateStore) Delete(id GroupID) error {
	if err := s.db.Delete(stateKey(id), pebble.Sync); err != nil {
		return fmt.Errorf("replica: delete raft group %s state: %w", id, err)
	}
	return nil
}

// Close closes the store.
func (s *StateStore) Close() error { return s.db.Close() }

// statePebbleLogger drops Pebble's informational messages, logs its
// errors, and panics on Fatalf as Pebble expects.
type statePebbleLogger struct{ l *slog.Logger }

func (statePebbleLogger) Infof(string, ...any) {}
func (p statePebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("replica: raft state pebble: " + fmt.Sprintf(format, args...))
}
func (p statePebbleLogger) Fatalf(format string, args ...any) {
	msg := "replica: raft state pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

// MemStateStore is a HardStateStore in memory (tests, benchmarks): it
// survives a Host, not a process.
type MemStateStore struct {
	mu     sync.Mutex
	states map[GroupID]GroupState
	saves  int
}

// NewMemStateStore returns an empty in-memory store.
func NewMemStateStore() *MemStateStore {
	return &MemStateStore{states: map[GroupID]GroupState{}}
}

// Save records states (HardStateStore). The ConfState's lists are copied.
func (m *MemStateStore) Save(states map[GroupID]GroupState, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, st := range states {
		m.states[id] = cloneGroupState(st)
	}
	m.saves++
	return nil
}

// Load returns the group's saved state.
func (m *MemStateStore) Load(id GroupID) (GroupState, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[id]
	return cloneGroupState(st), ok, nil
}

// Delete forgets the group's state.
func (m *MemStateStore) Delete(id GroupID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, id)
	return nil
}

// Saves returns how many Save calls the store took.
func (m *MemStateStore) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

// snapshot returns a copy of every saved state.
func (m *MemStateStore) snapshot() map[GroupID]GroupState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.states)
}

func cloneGroupState(st GroupState) GroupState {
	st.ConfState = cloneConfState(st.ConfState)
	return st
}

func cloneConfState(cs raftpb.ConfState) raftpb.ConfState {
	clone := func(l []uint64) []uint64 {
		if len(l) == 0 {
			return nil
		}
		return append([]uint64(nil), l...)
	}
	return raftpb.ConfState{Voters: clone(cs.Voters), Learners: clone(cs.Learners), VotersOutgoing: clone(cs.VotersOutgoing), LearnersNext: clone(cs.LearnersNext), AutoLeave: cs.AutoLeave}
}
