package server

import (
	"container/list"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227). A session remembers the partitions a client
// fetches and their offsets, so each incremental request names only what
// changed and each response carries only partitions with something new.
// Sessions live on the broker (any connection may use one), at most
// maxFetchSessions of them, the least recently used evicted first (Kafka's
// max.incremental.fetch.session.cache.slots, default 1000).
const maxFetchSessions = 1000

type fetchSession struct {
	mu    sync.Mutex // held for the whole fetch using the session
	id    int32
	epoch int32 // the epoch the next request must carry
	parts []*fetchPartition
	elem  *list.Element
}

type fetchSessions struct {
	mu     sync.Mutex
	nextID int32
	byID   map[int32]*fetchSession
	lru    *list.List // front: most recently used
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{byID: map[int32]*fetchSession{}, lru: list.New()}
}

func (fs *fetchSessions) remove(id int32) {
	if s, ok := fs.byID[id]; ok {
		fs.lru.Remove(s.elem)
		delete(fs.byID, id)
	}
}

func (fs *fetchSessions) create() *fetchSession {
	if len(fs.byID) >= maxFetchSessions {
		old := fs.lru.Back().Value.(*fetchSession)
		fs.remove(old.id)
	}
	for {
		fs.nextID++
		if fs.nextID <= 0 {
			fs.nextID = 1
		}
		if _, used := fs.byID[fs.nextID]; !used {
			break
		}
	}
	s := &fetchSession{id: fs.nextID, epoch: 1}
	s.elem = fs.lru.PushFront(s)
	fs.byID[s.id] = s
	return s
}

// requestParts turns a request's topics into fetch partitions, resolving
// topic IDs (v13+) to names; an unknown ID keeps an empty name.
func requestParts(b *Broker, req *kmsg.FetchRequest) []*fetchPartition {
	var parts []*fetchPartition
	for _, rt := range req.Topics {
		name, id := rt.Topic, rt.TopicID
		if req.Version >= 13 {
			name = ""
			if t, ok := b.meta.TopicByID(id); ok {
				name = t.Name
			}
		} else if t, ok := b.meta.Topic(name); ok {
			id = t.ID
		}
		for _, rp := range rt.Partitions {
			epoch := int32(-1) // v9 adds the current leader epoch (KIP-320)
			if req.Version >= 9 {
				epoch = rp.CurrentLeaderEpoch
			}
			parts = append(parts, &fetchPartition{topic: name, topicID: id, partition: rp.Partition,
				offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, leaderEpoch: epoch, lastHW: -2, lastLogStart: -2})
		}
	}
	return parts
}

// resolve applies a request to the session state and returns the
// partitions to read and, when a session is in use, the session, locked
// (the caller unlocks it when done). A non-zero code is the request's
// error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH).
func (fs *fetchSessions) resolve(b *Broker, req *kmsg.FetchRequest) ([]*fetchPartition, *fetchSession, int16) {
	parts := requestParts(b, req)
	if req.Version < 7 {
		return parts, nil, 0
	}
	fs.mu.Lock()
	switch {
	case req.SessionEpoch == -1: // sessionless full fetch; closes the named session
		fs.remove(req.SessionID)
		fs.mu.Unlock()
		return parts, nil, 0
	case req.SessionEpoch == 0: // full fetch opening a new session
		fs.remove(req.SessionID)
		s := fs.create()
		s.mu.Lock()
		s.parts = parts
		fs.mu.Unlock()
		return parts, s, 0
	}
	s, ok := fs.byID[req.SessionID]
	if !ok {
		fs.mu.Unlock()
		return nil, nil, kerr.FetchSessionIDNotFound.Code
	}
	fs.lru.MoveToFront(s.elem)
	fs.mu.Unlock()
	s.mu.Lock()
	if req.SessionEpoch != s.epoch {
		s.mu.Unlock()
		return nil, nil, kerr.InvalidFetchSessionEpoch.Code
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	// Forgotten partitions leave; requested ones are added or updated.
	forget := map[[2]any]bool{}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			if req.Version >= 13 {
				forget[[2]any{ft.TopicID, p}] = true
			} else {
				forget[[2]any{ft.Topic, p}] = true
			}
		}
	}
	key := func(fp *fetchPartition) [2]any {
		if req.Version >= 13 {
			return [2]any{fp.topicID, fp.partition}
		}
		return [2]any{fp.topic, fp.partition}
	}
	kept := s.parts[:0]
	for _, fp := range s.parts {
		if !forget[key(fp)] {
			kept = append(kept, fp)
		}
	}
	s.parts = kept
	for _, np := range parts {
		found := false
		for _, fp := range s.parts {
			if key(fp) == key(np) {
				fp.offset, fp.maxBytes, fp.leaderEpoch = np.offset, np.maxBytes, np.leaderEpoch
				found = true
				break
			}
		}
		if !found {
			s.parts = append(s.parts, np)
		}
	}
	return s.parts, s, 0
}
