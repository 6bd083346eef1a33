package replica

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/segment/vfs"
)

// The tests of one replica's own behaviour (produce rules, idempotence,
// transactions, producer snapshots, damage, records) open their partition
// as every partition runs: a raft group, here of one voter (openVoter).
// Each open gets its own Host (a Transport that drops every message: a
// lone voter sends none that matter) and keeps its group state in a file
// beside the partition's folder on the partition's own FS (fileStates),
// so a test that closes and reopens the partition, or reopens a crash
// clone of its FS, finds the HardState and applied index the replica
// left there, as a broker's state store would.

// dropTransport drops every message.
type dropTransport struct{}

func (dropTransport) Send([]GroupMessage) {}

// fileStates is a HardStateStore of one file on a vfs.FS, the states
// held in a MemStateStore: a Save rewrites the file in place, synced when
// asked, so a MemFS crash clone keeps the state of the last synced Save
// (an unsynced write reverts), and a reopen without a crash sees the
// last one.
type fileStates struct {
	*MemStateStore
	fs   vfs.FS
	path string
	mu   sync.Mutex // the file's writes
}

// openFileStates loads the states in path on fs (none when it does not
// exist).
func openFileStates(fs vfs.FS, path string) (*fileStates, error) {
	s := &fileStates{MemStateStore: NewMemStateStore(), fs: fs, path: path}
	data, err := readFile(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	// Records: the 16-byte topic id, a 4-byte length, the encoded state.
	states := map[GroupID]GroupState{}
	for len(data) > 0 {
		if len(data) < 20 {
			return nil, fmt.Errorf("test state file %s: %d bytes left", path, len(data))
		}
		var id GroupID
		copy(id.TopicID[:], data[:16])
		n := int(binary.BigEndian.Uint32(data[16:20]))
		if len(data) < 20+n {
			return nil, fmt.Errorf("test state file %s: a record of %d bytes cut short", path, n)
		}
		st, err := decodeGroupState(data[20 : 20+n])
		if err != nil {
			return nil, err
		}
		states[id] = st
		data = data[20+n:]
	}
	return s, s.MemStateStore.Save(states, true)
}

func (s *fileStates) Save(states map[GroupID]GroupState, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.MemStateStore.Save(states, sync); err != nil {
		return err
	}
	var data []byte
	for id, st := range s.snapshot() {
		enc := encodeGroupState(nil, st)
		data = append(data, id.TopicID[:]...)
		data = binary.BigEndian.AppendUint32(data, uint32(len(enc)))
		data = append(data, enc...)
	}
	f, err := s.fs.OpenReadWrite(s.path)
	created := false
	if errors.Is(err, os.ErrNotExist) {
		f, err = s.fs.Create(s.path)
		created = true
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	if !sync && !created {
		return nil
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if created {
		return s.fs.SyncDir(filepath.Dir(s.path))
	}
	return nil
}

func (s *fileStates) Delete(id GroupID) error {
	if err := s.MemStateStore.Delete(id); err != nil {
		return err
	}
	return s.Save(nil, true)
}

// voterGroup is the group of the partition in dir: one per folder.
func voterGroup(dir string) GroupID {
	sum := sha256.Sum256([]byte(dir))
	var id GroupID
	copy(id.TopicID[:], sum[:16])
	return id
}

// openVoter opens the partition in dir on fs as the one voter of its
// raft group, on a Host of its own (closed when the test ends; the test
// closes the partition first or not at all), and returns once it leads
// and applied its whole log (its high watermark at its log end offset),
// unless its log is damaged (it then cannot write its term's entry).
// term, when above 0 and no state was saved, is the leader epoch it
// leads in: the replica starts one term below it. opts.Raft must be nil.
func openVoter(t testing.TB, fs vfs.FS, dir string, cfg TopicConfig, opts Options, term uint64) (*Partition, error) {
	t.Helper()
	if opts.Log.Logger == nil {
		opts.Log.Logger = quiet()
	}
	states, err := openFileStates(fs, dir+".raftstate")
	if err != nil {
		return nil, err
	}
	h, err := NewHost(HostConfig{NodeID: 1, Transport: dropTransport{}, HardState: states, Logger: opts.Log.Logger})
	if err != nil {
		return nil, err
	}
	t.Cleanup(h.Close)
	g := voterGroup(dir)
	st, saved, err := states.Load(g)
	if err != nil {
		return nil, err
	}
	if !saved && term > 0 {
		st.HardState.Term = term - 1
	}
	opts.Raft = &RaftConfig{Host: h, Group: g, State: st, Voters: []uint64{1}}
	p, err := Open(fs, dir, cfg, opts)
	if err != nil {
		return nil, err
	}
	if p.Failed() != nil {
		return p, nil
	}
	if err := h.Campaign(g); err != nil {
		p.Close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !p.IsLeader() || p.HighWatermark() != p.LogEndOffset() {
		if time.Now().After(deadline) {
			p.Close()
			return nil, fmt.Errorf("the one voter of %s did not lead with its log applied in 30s (leader %v, high watermark %d, log end offset %d)", dir, p.IsLeader(), p.HighWatermark(), p.LogEndOffset())
		}
		time.Sleep(time.Millisecond)
	}
	return p, nil
}
