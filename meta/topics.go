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

// newTopicID draws a random version-4 UUID that is valid, unused, and (as
// Kafka's Uuid.randomUuid insists) does not print starting with '-'.
// Called with writeMu held.
func (s *Store) newTopicID() ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := io.ReadFull(s.opts.Rand, id[:]); err != nil {
			return id, fmt.Errorf("meta: topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // variant RFC 4122
		if _, used := s.st.topics[id]; !used && validTopicID(id) && !strings.HasPrefix(FormatTopicID(id), "-") {
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
}

// CreateTopics creates every valid topic of specs in ONE synced Pebble
// commit (one log record each, in order). errs[i] is why specs[i] was
// refused (the errors of CreateTopic; a name earlier in specs counts as
// existing), and topics[i] the topic created otherwise. err is a failure
// of the whole commit (ErrStorage, ErrClosed): then nothing was created.
func (s *Store) CreateTopics(specs []TopicSpec) (topics []Topic, errs []error, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return nil, nil, err
	}
	topics, errs = make([]Topic, len(specs)), make([]error, len(specs))
	recs := make([]Record, 0, len(specs))
	idx := make([]int, 0, len(specs)) // spec of each record
	ids := map[[16]byte]bool{}
	for i, sp := range specs {
		if err := ValidateTopicName(sp.Name); err != nil {
			errs[i] = err
			continue
		}
		id, err := s.newTopicID()
		for err == nil && ids[id] {
			id, err = s.newTopicID()
		}
		if err != nil {
			return nil, nil, err
		}
		ids[id] = true
		recs = append(recs, TopicRecord{Name: sp.Name, ID: id, Partitions: sp.Partitions, ReplicationFactor: sp.ReplicationFactor, Configs: maps.Clone(sp.Configs)})
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		return topics, errs, nil
	}
	_, rerrs, err := s.appendManyLocked(recs)
	if err != nil {
		return nil, nil, err
	}
	for j, rec := range recs {
		i := idx[j]
		if errs[i] = rerrs[j]; errs[i] == nil {
			topics[i] = s.st.topics[rec.(TopicRecord).ID].clone()
		}
	}
	return topics, errs, nil
}

// DeleteTopic deletes the topic named name and returns it as it was.
// ErrUnknownTopic if there is none.
func (s *Store) DeleteTopic(name string) (Topic, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return Topic{}, err
	}
	t, err := s.lookupLocked(name)
	if err != nil {
		return Topic{}, err
	}
	return s.removeLocked(t)
}

// DeleteTopicByID deletes the topic with this ID and returns it as it was.
// ErrUnknownTopicID if there is none.
func (s *Store) DeleteTopicByID(id [16]byte) (Topic, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return Topic{}, err
	}
	t, err := s.st.topicByID(id)
	if err != nil {
		return Topic{}, err
	}
	return s.removeLocked(t)
}

func (s *Store) removeLocked(t *Topic) (Topic, error) {
	if _, err := s.appendLocked(TopicRemoved{TopicID: t.ID}); err != nil {
		return Topic{}, err
	}
	return t.clone(), nil
}

// lookupLocked finds a topic by name, with writeMu held.
func (s *Store) lookupLocked(name string) (*Topic, error) {
	id, ok := s.st.names[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return s.st.topics[id], nil
}

// AddPartitions grows the topic to newTotal partitions. Partitions only
// grow: ErrInvalidPartitions if newTotal is not above the current count.
func (s *Store) AddPartitions(name string, newTotal int32) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	t, err := s.lookupLocked(name)
	if err != nil {
		return err
	}
	_, err = s.appendLocked(PartitionsAdded{TopicID: t.ID, Count: newTotal})
	return err
}

// AlterTopicConfigs sets the keys in set and removes the keys in del from
// the topic's config overrides (IncrementalAlterConfigs). A key may not be
// both set and deleted (ErrInvalidConfig); deleting an absent key is not an
// error.
func (s *Store) AlterTopicConfigs(name string, set map[string]string, del []string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	t, err := s.lookupLocked(name)
	if err != nil {
		return err
	}
	_, err = s.appendLocked(TopicConfigsChanged{TopicID: t.ID, Set: maps.Clone(set), Delete: slices.Clone(del)})
	return err
}

// SetTopicConfigs replaces all of the topic's config overrides with
// configs (AlterConfigs, non-incremental). It is recorded as one
// TopicConfigsChanged that sets configs and deletes every other key.
func (s *Store) SetTopicConfigs(name string, configs map[string]string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	t, err := s.lookupLocked(name)
	if err != nil {
		return err
	}
	var del []string
	for _, k := range sortedKeys(t.Configs) {
		if _, keep := configs[k]; !keep {
			del = append(del, k)
		}
	}
	_, err = s.appendLocked(TopicConfigsChanged{TopicID: t.ID, Set: maps.Clone(configs), Delete: del})
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
// returns, so no id is handed out twice, across restarts included.
func (s *Store) AllocateProducerIDs(n int64) (first int64, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writableLocked(); err != nil {
		return 0, err
	}
	first = s.st.producerNext
	if _, err := s.appendLocked(ProducerIDBlock{First: first, Size: n}); err != nil {
		return 0, err
	}
	return first, nil
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
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_, err := s.appendLocked(BrokerConfigChanged{Set: maps.Clone(set), Delete: slices.Clone(del)})
	return err
}
