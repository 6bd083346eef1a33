package meta

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// MaxTopicNameLen is Kafka's limit on a topic name's length.
const MaxTopicNameLen = 249

// ValidateTopicName applies Kafka's topic name rules: not empty, at most
// 249 characters, only ASCII letters, digits, '.', '_' and '-', and not "."
// or "..". Errors wrap ErrInvalidTopicName.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopicName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrInvalidTopicName, name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("%w: %d characters (at most %d)", ErrInvalidTopicName, len(name), MaxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q (only [a-zA-Z0-9._-] allowed)", ErrInvalidTopicName, name, c)
		}
	}
	return nil
}

// validTopicID refuses the IDs Kafka reserves: all zero (no ID) and
// 0...01 (the metadata topic's ID).
func validTopicID(id [16]byte) bool {
	return id != [16]byte{} && id != [16]byte{15: 1}
}

// newTopicID draws a random version-4 UUID that is valid, unused in st,
// and (as Kafka's Uuid.randomUuid insists) does not print starting with
// '-'. Called with writeMu (proposeMu in replicated mode) held.
func (s *Store) newTopicID(st *state) ([16]byte, error) {
	return s.newUUID("topic id", func(id [16]byte) bool {
		_, used := st.topics[id]
		return !used && validTopicID(id) && !strings.HasPrefix(FormatTopicID(id), "-")
	})
}

// newUUID draws random version-4 UUIDs from opts.Rand until ok accepts
// one. Called with writeMu (proposeMu in replicated mode) held.
func (s *Store) newUUID(what string, ok func([16]byte) bool) ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := io.ReadFull(s.opts.Rand, id[:]); err != nil {
			return id, fmt.Errorf("meta: %s: %w", what, err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // variant RFC 4122
		if ok(id) {
			return id, nil
		}
	}
}

// CreateTopic creates a topic with a new random ID. Errors:
// ErrInvalidTopicName, ErrTopicExists, ErrTopicCollision,
// ErrInvalidPartitions (< 1), ErrInvalidReplicationFactor (< 1),
// ErrInvalidConfig (empty key), ErrStorage (nothing was created).
// Config values are not checked.
func (s *Store) CreateTopic(name string, partitions int32, rf int16, configs map[string]string) (Topic, error) {
	ts, errs, err := s.CreateTopics([]TopicSpec{{Name: name, Partitions: partitions, ReplicationFactor: rf, Configs: configs}})
	if err != nil {
		return Topic{}, err
	}
	return ts[0], errs[0]
}

// TopicSpec is one topic for CreateTopics.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string // overrides; values are not checked
	// Assignments are the partitions' replica lists (Place's result, or a
	// request's explicit assignment), or nil for "this node only" (tests; data dirs
	// from before a single node ran as a one-voter cluster). With
	// assignments, a Partitions or ReplicationFactor <= 0 (Kafka's -1) is
	// taken from them.
	Assignments [][]int32
}

// CreateTopics creates every valid topic of specs in ONE synced Pebble
// commit (one log record each, in order; in replicated mode, one proposed
// entry). errs[i] is why specs[i] was refused (the errors of CreateTopic,
// ErrInvalidReplicaAssignment; a name earlier in specs counts as
// existing), and topics[i] the topic as created otherwise. err is a
// failure of the whole change (ErrStorage, ErrClosed, ErrNotController, a
// proposal timeout): then nothing was created, or, for a timeout, the
// outcome is unknown.
func (s *Store) CreateTopics(specs []TopicSpec) (topics []Topic, errs []error, err error) {
	topics, errs = make([]Topic, len(specs)), make([]error, len(specs))
	var idx []int // spec of each record
	outs, err := s.change(func(st *state) ([]Record, error) {
		recs := make([]Record, 0, len(specs))
		idx = make([]int, 0, len(specs))
		ids := map[[16]byte]bool{}
		for i, sp := range specs {
			if errs[i] = ValidateTopicName(sp.Name); errs[i] != nil {
				continue
			}
			id, err := s.newTopicID(st)
			for err == nil && ids[id] {
				id, err = s.newTopicID(st)
			}
			if err != nil {
				return nil, err
			}
			ids[id] = true
			p, rf := sp.Partitions, sp.ReplicationFactor
			if sp.Assignments != nil {
				if p <= 0 {
					p = int32(len(sp.Assignments))
				}
				if rf <= 0 && len(sp.Assignments) > 0 {
					rf = int16(len(sp.Assignments[0]))
				}
			}
			recs = append(recs, TopicRecord{Name: sp.Name, ID: id, Partitions: p, ReplicationFactor: rf,
				Configs: maps.Clone(sp.Configs), Assignments: cloneAssignments(sp.Assignments)})
			idx = append(idx, i)
		}
		return recs, nil
	})
	if err != nil {
		return nil, nil, err
	}
	for j, o := range outs {
		i := idx[j]
		if errs[i] = o.err; errs[i] == nil {
			topics[i] = o.d.topic.clone()
		}
	}
	return topics, errs, nil
}

// one runs a change of (at most) one record and returns its outcome.
func (s *Store) one(build func(st *state) (Record, error)) (outcome, error) {
	outs, err := s.change(func(st *state) ([]Record, error) {
		rec, err := build(st)
		if err != nil {
			return nil, err
		}
		return []Record{rec}, nil
	})
	if err != nil {
		return outcome{}, err
	}
	return outs[0], outs[0].err
}

// DeleteTopic deletes the topic named name and returns it as it was.
// ErrUnknownTopic if there is none.
func (s *Store) DeleteTopic(name string) (Topic, error) {
	o, err := s.one(func(st *state) (Record, error) {
		t, err := st.lookup(name)
		if err != nil {
			return nil, err
		}
		return TopicRemoved{TopicID: t.ID}, nil
	})
	if err != nil {
		return Topic{}, err
	}
	return o.d.removed.clone(), nil
}

// DeleteTopicByID deletes the topic with this ID and returns it as it was.
// ErrUnknownTopicID if there is none.
func (s *Store) DeleteTopicByID(id [16]byte) (Topic, error) {
	o, err := s.one(func(st *state) (Record, error) {
		if _, err := st.topicByID(id); err != nil {
			return nil, err
		}
		return TopicRemoved{TopicID: id}, nil
	})
	if err != nil {
		return Topic{}, err
	}
	return o.d.removed.clone(), nil
}

// lookup finds a topic by name.
func (st *state) lookup(name string) (*Topic, error) {
	id, ok := st.names[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return st.topics[id], nil
}

// AddPartitions grows a topic kept without replica assignments
// ("this node only") to newTotal partitions: AddPartitionsAssigned with
// nil assignments.
func (s *Store) AddPartitions(name string, newTotal int32) error {
	return s.AddPartitionsAssigned(name, newTotal, nil)
}

// AddPartitionsAssigned grows the topic to newTotal partitions, the new
// ones with these replica lists (one per new partition; nil for a topic
// kept without assignments). Partitions only grow: ErrInvalidPartitions if
// newTotal is not above the current count; ErrInvalidReplicaAssignment
// for assignments Kafka refuses or that do not match the topic's kind.
func (s *Store) AddPartitionsAssigned(name string, newTotal int32, assignments [][]int32) error {
	_, err := s.one(func(st *state) (Record, error) {
		t, err := st.lookup(name)
		if err != nil {
			return nil, err
		}
		return PartitionsAdded{TopicID: t.ID, Count: newTotal, Assignments: cloneAssignments(assignments)}, nil
	})
	return err
}

// AlterTopicConfigs sets the keys in set and removes the keys in del from
// the topic's config overrides (IncrementalAlterConfigs). A key may not be
// both set and deleted (ErrInvalidConfig); deleting an absent key is not an
// error.
func (s *Store) AlterTopicConfigs(name string, set map[string]string, del []string) error {
	_, err := s.one(func(st *state) (Record, error) {
		t, err := st.lookup(name)
		if err != nil {
			return nil, err
		}
		return TopicConfigsChanged{TopicID: t.ID, Set: maps.Clone(set), Delete: slices.Clone(del)}, nil
	})
	return err
}

// SetTopicConfigs replaces all of the topic's config overrides with
// configs (AlterConfigs, non-incremental). It is recorded as one
// TopicConfigsChanged that sets configs and deletes every other key.
func (s *Store) SetTopicConfigs(name string, configs map[string]string) error {
	_, err := s.one(func(st *state) (Record, error) {
		t, err := st.lookup(name)
		if err != nil {
			return nil, err
		}
		var del []string
		for _, k := range sortedKeys(t.Configs) {
			if _, keep := configs[k]; !keep {
				del = append(del, k)
			}
		}
		return TopicConfigsChanged{TopicID: t.ID, Set: maps.Clone(configs), Delete: del}, nil
	})
	return err
}

// Topic returns the topic named name.
func (s *Store) Topic(name string) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.st.names[name]
	if !ok {
		return Topic{}, false
	}
	return s.st.topics[id].clone(), true
}

// TopicByID returns the topic with this ID.
func (s *Store) TopicByID(id [16]byte) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.st.topics[id]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// Topics returns every topic, sorted by name.
func (s *Store) Topics() []Topic {
	s.mu.RLock()
	ts := make([]Topic, 0, len(s.st.topics))
	for _, t := range s.st.topics {
		ts = append(ts, t.clone())
	}
	s.mu.RUnlock()
	slices.SortFunc(ts, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// TopicNameCollision reports the existing topic whose name collides with
// name: it is a different name but equal once every '.' is replaced by '_'
// (Kafka refuses such a topic because both map to the same metric names).
// An existing topic named exactly name is not a collision (that is
// ErrTopicExists).
func (s *Store) TopicNameCollision(name string) (existing string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	existing, ok = s.st.collide[collisionKey(name)]
	if !ok || existing == name {
		return "", false
	}
	return existing, true
}

// AllocateProducerIDs reserves n producer ids and returns the first: the
// caller owns [first, first+n). The block is in the log before this
// returns, so no id is handed out twice, across restarts included. In
// replicated mode it is the block as applied; a block that another entry
// overtook is refused (ErrInvalidProducerIDs) and may be retried.
func (s *Store) AllocateProducerIDs(n int64) (first int64, err error) {
	o, err := s.one(func(st *state) (Record, error) {
		return ProducerIDBlock{First: st.producerNext, Size: n}, nil
	})
	if err != nil {
		return 0, err
	}
	return o.rec.(ProducerIDBlock).First, nil
}

// BrokerConfigs returns the cluster-wide broker configs (a copy).
func (s *Store) BrokerConfigs() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := maps.Clone(s.st.broker)
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// AlterBrokerConfigs sets the keys in set and removes the keys in del from
// the cluster-wide broker configs, as AlterTopicConfigs does for a topic.
func (s *Store) AlterBrokerConfigs(set map[string]string, del []string) error {
	_, err := s.one(func(*state) (Record, error) {
		return BrokerConfigChanged{Set: maps.Clone(set), Delete: slices.Clone(del)}, nil
	})
	return err
}
