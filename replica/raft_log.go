package replica

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicemq/sluice/segment"
	"github.com/sluicemq/sluice/segment/batch"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// logStorage is a partition's segment log as its raft group's storage:
// raft.Storage and the log half of GroupStorage (partitionStorage,
// raft_storage.go, adds the writes that keep the partition's derived
// state in step, Sync and the snapshots of raft_snapshot.go). Every batch of the log is one raft
// entry (see segment's raft.go). Entry data maps as:
//
//	raftpb.EntryNormal, Data not empty   segment.EntryData: Data is one record batch
//	raftpb.EntryNormal, Data empty       segment.EntryEmpty (a new leader's entry)
//	raftpb.EntryConfChange               segment.EntryConfChange, Data the marshalled ConfChange
//	raftpb.EntryConfChangeV2             segment.EntryConfChangeV2
//	raftpb.EntryNormal, Data an internal batch
//	                                     segment.EntryDeleteRecords (raft_deleterecords.go):
//	                                     stored as its payload, read back as the same batch
//
// so the log holds the produced bytes once, and raft's own entries take no
// Kafka offset. The HardState and ConfState live elsewhere (the owner
// persists them, the HardState in the host's HardStateStore) and are given
// to it with SetState and SetConfState; InitialState returns them.
//
// Like any GroupStorage, it is called by one worker at a time; its
// raft.Storage reads may also run on other goroutines (the Log is safe for
// concurrent use; the states are guarded by a mutex).
type logStorage struct {
	log *segment.Log

	mu        sync.Mutex
	hs        raftpb.HardState
	cs        raftpb.ConfState
	confIndex uint64 // GroupState.ConfIndex saved with cs
	// mu: the entries written and not yet applied, consecutive, as
	// Entries would read them back (at most unappliedMax of them): raft
	// asks for committed entries again to apply them, and these are
	// answered without reading the log. The worker appends (appendEntries),
	// trims what it applied (forgetApplied) and drops them all when the
	// log is reset under them (forgetAll).
	unapplied []raftpb.Entry
}

// unappliedMax bounds logStorage.unapplied: entries, bytes of data.
const (
	unappliedMax      = 512
	unappliedMaxBytes = 16 << 20
)

// appendedEntry is what appendEntries wrote for one raft entry.
type appendedEntry struct {
	Index uint64
	Kind  segment.EntryKind
	// Result is the segment's AppendResult: for a data entry the offsets
	// its records got (BaseOffset, LastOffset); for an internal one
	// BaseOffset is the log end offset and LastOffset BaseOffset-1.
	// Result.TruncatedTo >= 0 says a divergent tail was removed first and
	// the log end offset went back there.
	Result segment.AppendResult
	// Header is a data or internal entry's batch header as proposed:
	// its BaseOffset is the leader's proposal id (proposal.id), the
	// offset written being Result's.
	Header batch.Header
}

// newLogStorage returns the storage of a group over l, starting from the
// owner's persisted HardState and ConfState (for a new group, an empty
// HardState and the synthetic initial ConfState).
func newLogStorage(l *segment.Log, hs raftpb.HardState, cs raftpb.ConfState) *logStorage {
	return &logStorage{log: l, hs: hs, cs: cs}
}

// InitialState returns the HardState and ConfState the owner gave.
func (s *logStorage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hs, s.cs, nil
}

// SetState records the group's saved state (GroupStorage; the host calls
// it at AddGroup and after each save): InitialState returns its HardState
// and ConfState.
func (s *logStorage) SetState(st GroupState) {
	s.mu.Lock()
	s.hs, s.cs, s.confIndex = st.HardState, cloneConfState(st.ConfState), st.ConfIndex
	s.mu.Unlock()
}

// confState returns the ConfState last given and the index of the last
// configuration change it holds (GroupState.ConfIndex).
func (s *logStorage) confState() (raftpb.ConfState, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs, s.confIndex
}

// SetConfState records cs (after a configuration change was applied).
func (s *logStorage) SetConfState(cs raftpb.ConfState) {
	s.mu.Lock()
	s.cs = cs
	s.mu.Unlock()
}

// raftErr maps the segment's raft sentinels to raft's: raft compares its
// errors with ==, so the values themselves are returned.
func raftErr(err error) error {
	switch {
	case errors.Is(err, segment.ErrCompacted):
		return raft.ErrCompacted
	case errors.Is(err, segment.ErrUnavailable):
		return raft.ErrUnavailable
	}
	return err
}

// Entries returns the entries [lo, hi), at most maxSize bytes but at
// least one (raft.Storage).
func (s *logStorage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	if out := s.cached(lo, hi, maxSize); out != nil {
		return out, nil
	}
	ents, err := s.log.Entries(lo, hi, maxSize)
	if err != nil {
		return nil, raftErr(err)
	}
	out := make([]raftpb.Entry, len(ents))
	for i, e := range ents {
		out[i] = raftpb.Entry{Term: e.Term, Index: e.Index, Type: raftpb.EntryNormal}
		switch e.Kind {
		case segment.EntryData:
			out[i].Data = e.Data
		case segment.EntryEmpty:
		case segment.EntryConfChange:
			out[i].Type, out[i].Data = raftpb.EntryConfChange, e.Data
		case segment.EntryConfChangeV2:
			out[i].Type, out[i].Data = raftpb.EntryConfChangeV2, e.Data
		case segment.EntryDeleteRecords:
			// The proposal's bytes again (raft_deleterecords.go).
			out[i].Data = batch.BuildInternal(0, 0, uint8(e.Kind), e.Data)
		default:
			return nil, fmt.Errorf("replica: raft entry %d of unknown kind %d", e.Index, e.Kind)
		}
	}
	return out, nil
}

// cached returns Entries(lo, hi, maxSize) from the unapplied entries
// when they hold all of [lo, hi), else nil.
func (s *logStorage) cached(lo, hi, maxSize uint64) []raftpb.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.unapplied)
	if n == 0 || lo >= hi || lo < s.unapplied[0].Index || hi-1 > s.unapplied[n-1].Index ||
		lo < s.log.FirstIndex() || hi-1 > s.log.LastIndex() {
		return nil
	}
	first := s.unapplied[0].Index
	ents := s.unapplied[lo-first : hi-first]
	size := uint64(0)
	for i := range ents {
		size += uint64(ents[i].Size())
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	return slices.Clone(ents) // raft may append to what it gets
}

// remember adds entries just written (as Entries reads them back) to the
// unapplied ones: after them when they follow, else in their place (a
// divergent tail replaced).
func (s *logStorage) remember(ents []raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.unapplied); n > 0 {
		// Consecutive: the entry at position k has index first+k.
		first, keep := s.unapplied[0].Index, 0
		if ents[0].Index > first && ents[0].Index <= s.unapplied[n-1].Index+1 {
			keep = int(ents[0].Index - first)
		}
		clear(s.unapplied[keep:])
		s.unapplied = s.unapplied[:keep]
	}
	s.unapplied = append(s.unapplied, ents...)
	size := 0
	for i := range s.unapplied {
		size += len(s.unapplied[i].Data)
	}
	drop := 0
	for len(s.unapplied)-drop > unappliedMax || (size > unappliedMaxBytes && drop < len(s.unapplied)) {
		size -= len(s.unapplied[drop].Data)
		drop++
	}
	if drop > 0 {
		clear(s.unapplied[:drop])
		s.unapplied = append(s.unapplied[:0], s.unapplied[drop:]...)
	}
}

// forgetApplied drops the unapplied entries up to index (applied).
func (s *logStorage) forgetApplied(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.unapplied) && s.unapplied[n].Index <= index {
		n++
	}
	if n == 0 {
		return
	}
	clear(s.unapplied[:n])
	s.unapplied = append(s.unapplied[:0], s.unapplied[n:]...)
}

// forgetAll drops every unapplied entry (the log was reset: a snapshot).
func (s *logStorage) forgetAll() {
	s.mu.Lock()
	clear(s.unapplied)
	s.unapplied = s.unapplied[:0]
	s.mu.Unlock()
}

// Term returns the term of entry i, for i in [FirstIndex-1, LastIndex].
func (s *logStorage) Term(i uint64) (uint64, error) {
	t, err := s.log.Term(i)
	return t, raftErr(err)
}

// LastIndex returns the index of the last entry.
func (s *logStorage) LastIndex() (uint64, error) { return s.log.LastIndex(), nil }

// FirstIndex returns the index of the first entry.
func (s *logStorage) FirstIndex() (uint64, error) { return s.log.FirstIndex(), nil }

// appendEntries writes ents, consecutive entries whose first may replace a
// suffix of the log (which is truncated first), and returns what each
// wrote (those written before an error too). Data entries' batches are
// copied before the log stamps them: raft's own copy (its unstable log,
// the messages of the same Ready) stays as it was. A data entry's batch
// is trusted: the leader checked it before proposing (Partition's
// validate: CRC, records), and its CRC covers it from there on; only its
// header is read here (recovery still checks what is on disk).
func (s *logStorage) appendEntries(ents []raftpb.Entry) ([]appendedEntry, error) {
	out := make([]appendedEntry, 0, len(ents))
	written := make([]raftpb.Entry, 0, len(ents))
	defer func() { s.remember(written) }()
	for _, e := range ents {
		kind := segment.EntryEmpty
		data := e.Data
		var opts segment.AppendOptions
		var h batch.Header
		switch e.Type {
		case raftpb.EntryNormal:
			if len(e.Data) == 0 {
				break
			}
			var err error
			if h, err = batch.ParseHeader(e.Data); err != nil {
				return out, fmt.Errorf("replica: raft entry %d: %w", e.Index, err)
			}
			if h.Internal() {
				// A replicated operation is an internal batch
				// (raft_deleterecords.go): stored as its kind and
				// payload.
				k, payload, err := internalPayload(e.Data)
				if err != nil {
					return out, fmt.Errorf("replica: raft entry %d: %w", e.Index, err)
				}
				kind, data = k, append([]byte(nil), payload...)
				break
			}
			kind, data = segment.EntryData, append([]byte(nil), e.Data...)
			opts.Checked = &h
		case raftpb.EntryConfChange:
			kind = segment.EntryConfChange
		case raftpb.EntryConfChangeV2:
			kind = segment.EntryConfChangeV2
		default:
			return out, fmt.Errorf("replica: raft entry %d of unknown type %v", e.Index, e.Type)
		}
		r, err := s.log.AppendEntry(e.Index, e.Term, kind, data, opts)
		if err != nil {
			return out, fmt.Errorf("replica: append raft entry %d (term %d): %w", e.Index, e.Term, err)
		}
		// As Entries reads it back: the batch as stamped, a replicated
		// operation rebuilt as proposed (but its id).
		re := raftpb.Entry{Term: e.Term, Index: e.Index, Type: e.Type}
		switch kind {
		case segment.EntryData:
			re.Data = data
		case segment.EntryConfChange, segment.EntryConfChangeV2:
			re.Data = e.Data
		case segment.EntryDeleteRecords:
			re.Data = batch.BuildInternal(0, 0, uint8(kind), data)
		}
		written = append(written, re)
		out = append(out, appendedEntry{Index: e.Index, Kind: kind, Result: r, Header: h})
	}
	return out, nil
}
