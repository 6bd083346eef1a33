package meta

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Topic is a topic's metadata as of the latest applied record.
type Topic struct {
	Name              string
	ID                [16]byte
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string // topic config overrides; never nil in results
}

// clone returns t with its own Configs map (never nil).
func (t *Topic) clone() Topic {
	c := *t
	c.Configs = maps.Clone(t.Configs)
	if c.Configs == nil {
		c.Configs = map[string]string{}
	}
	return c
}

// record returns the TopicRecord that creates t as it is; it is also the
// encoding of t's state value under topic/id/<id>.
func (t *Topic) record() TopicRecord {
	return TopicRecord{Name: t.Name, ID: t.ID, Partitions: t.Partitions,
		ReplicationFactor: t.ReplicationFactor, Configs: t.Configs}
}

// state is the metadata state machine, held in memory. Pebble holds the
// same state under the state keys; the Store keeps the two equal by
// changing memory only after the Pebble batch that carries the same delta
// commits. Topic values are never modified in place: a change stores a new
// *Topic, so a snapshot of the maps' values stays valid.
type state struct {
	topics       map[[16]byte]*Topic // by ID
	names        map[string][16]byte // name -> ID
	collide      map[string]string   // collisionKey(name) -> name
	producerNext int64               // next free producer id
	broker       map[string]string   // broker configs
}

func newState() *state {
	return &state{
		topics:  map[[16]byte]*Topic{},
		names:   map[string][16]byte{},
		collide: map[string]string{},
		broker:  map[string]string{},
	}
}

// clone returns a copy of st whose maps are its own (the Topic values are
// shared: they are never modified in place).
func (st *state) clone() *state {
	return &state{topics: maps.Clone(st.topics), names: maps.Clone(st.names),
		collide: maps.Clone(st.collide), producerNext: st.producerNext, broker: st.broker}
}

// delta is the effect of one record on the state: at most one topic
// changed or removed, or the producer id counter, or the broker configs.
type delta struct {
	topic        *Topic // created or changed topic (its new value)
	removed      *Topic // removed topic
	setProducer  bool
	producerNext int64
	setBroker    bool
	broker       map[string]string
}

// collisionKey maps names that Kafka considers colliding to one key:
// '.' and '_' are treated as the same character.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// plan validates rec against st and returns its delta; st is unchanged.
// It is the state machine's transition function: deterministic, reading
// only st and rec.
func (st *state) plan(rec Record) (delta, error) {
	switch r := rec.(type) {
	case TopicRecord:
		if err := ValidateTopicName(r.Name); err != nil {
			return delta{}, err
		}
		if _, ok := st.names[r.Name]; ok {
			return delta{}, fmt.Errorf("%w: %s", ErrTopicExists, r.Name)
		}
		if other, ok := st.collide[collisionKey(r.Name)]; ok {
			return delta{}, fmt.Errorf("%w: %s collides with %s", ErrTopicCollision, r.Name, other)
		}
		if !validTopicID(r.ID) {
			return delta{}, fmt.Errorf("%w: reserved topic id %s", ErrInvalidRecord, FormatTopicID(r.ID))
		}
		if _, ok := st.topics[r.ID]; ok {
			return delta{}, fmt.Errorf("%w: topic id %s in use", ErrInvalidRecord, FormatTopicID(r.ID))
		}
		if r.Partitions < 1 {
			return delta{}, fmt.Errorf("%w: %d (must be >= 1)", ErrInvalidPartitions, r.Partitions)
		}
		if r.ReplicationFactor < 1 {
			return delta{}, fmt.Errorf("%w: %d (must be >= 1)", ErrInvalidReplicationFactor, r.ReplicationFactor)
		}
		if err := validateConfigChange(r.Configs, nil); err != nil {
			return delta{}, err
		}
		return delta{topic: &Topic{Name: r.Name, ID: r.ID, Partitions: r.Partitions,
			ReplicationFactor: r.ReplicationFactor, Configs: maps.Clone(r.Configs)}}, nil

	case PartitionsAdded:
		t, err := st.topicByID(r.TopicID)
		if err != nil {
			return delta{}, err
		}
		if r.Count <= t.Partitions {
			return delta{}, fmt.Errorf("%w: %s has %d partitions; a new total of %d does not grow it",
				ErrInvalidPartitions, t.Name, t.Partitions, r.Count)
		}
		n := *t
		n.Partitions = r.Count
		return delta{topic: &n}, nil

	case TopicConfigsChanged:
		t, err := st.topicByID(r.TopicID)
		if err != nil {
			return delta{}, err
		}
		if err := validateConfigChange(r.Set, r.Delete); err != nil {
			return delta{}, err
		}
		n := *t
		n.Configs = changeConfigs(t.Configs, r.Set, r.Delete)
		return delta{topic: &n}, nil

	case TopicRemoved:
		t, err := st.topicByID(r.TopicID)
		if err != nil {
			return delta{}, err
		}
		return delta{removed: t}, nil

	case ProducerIDBlock:
		if r.Size < 1 || r.First != st.producerNext || r.First > math.MaxInt64-r.Size {
			return delta{}, fmt.Errorf("%w: [%d, +%d) with next free id %d",
				ErrInvalidProducerIDs, r.First, r.Size, st.producerNext)
		}
		return delta{setProducer: true, producerNext: r.First + r.Size}, nil

	case BrokerConfigChanged:
		if err := validateConfigChange(r.Set, r.Delete); err != nil {
			return delta{}, err
		}
		return delta{setBroker: true, broker: changeConfigs(st.broker, r.Set, r.Delete)}, nil
	}
	return delta{}, fmt.Errorf("%w: unknown record %T", ErrInvalidRecord, rec)
}

func (st *state) topicByID(id [16]byte) (*Topic, error) {
	t, ok := st.topics[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicID, FormatTopicID(id))
	}
	return t, nil
}

// validateConfigChange refuses empty keys and keys both set and deleted.
func validateConfigChange(set map[string]string, del []string) error {
	for k := range set {
		if k == "" {
			return fmt.Errorf("%w: empty config key", ErrInvalidConfig)
		}
	}
	for _, k := range del {
		if k == "" {
			return fmt.Errorf("%w: empty config key", ErrInvalidConfig)
		}
		if _, ok := set[k]; ok {
			return fmt.Errorf("%w: %s both set and deleted", ErrInvalidConfig, k)
		}
	}
	return nil
}

// changeConfigs returns a new map: old with set applied, then del removed.
func changeConfigs(old, set map[string]string, del []string) map[string]string {
	m := maps.Clone(old)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, set)
	for _, k := range del {
		delete(m, k)
	}
	return m
}

// apply makes the delta's change to st. It cannot fail: plan checked it.
func (st *state) apply(d delta) {
	if t := d.removed; t != nil {
		delete(st.topics, t.ID)
		delete(st.names, t.Name)
		delete(st.collide, collisionKey(t.Name))
	}
	if t := d.topic; t != nil {
		st.topics[t.ID] = t
		st.names[t.Name] = t.ID
		st.collide[collisionKey(t.Name)] = t.Name
	}
	if d.setProducer {
		st.producerNext = d.producerNext
	}
	if d.setBroker {
		st.broker = d.broker
	}
}

// write adds the delta's state key changes to b.
func (d delta) write(b *pebble.Batch) error {
	var err error
	set := func(k, v []byte) {
		if err == nil {
			err = b.Set(k, v, nil)
		}
	}
	if t := d.removed; t != nil {
		if err = b.Delete(topicIDKey(t.ID), nil); err != nil {
			return err
		}
		if err = b.Delete(topicNameKey(t.Name), nil); err != nil {
			return err
		}
	}
	if t := d.topic; t != nil {
		set(topicIDKey(t.ID), EncodeRecord(t.record()))
		set(topicNameKey(t.Name), t.ID[:])
	}
	if d.setProducer {
		set([]byte(keyProducerNext), encodeProducerNext(d.producerNext))
	}
	if d.setBroker {
		// Canonical: the key is absent when there are no broker configs.
		if len(d.broker) == 0 {
			if err == nil {
				err = b.Delete([]byte(keyBrokerConfigs), nil)
			}
		} else {
			set([]byte(keyBrokerConfigs), encodeConfigs(d.broker))
		}
	}
	return err
}

// writeAll adds every state key of st to b (for Rebuild, after the state
// ranges were cleared in the same batch).
func (st *state) writeAll(b *pebble.Batch) error {
	for _, t := range st.topics {
		if err := (delta{topic: t}).write(b); err != nil {
			return err
		}
	}
	// producer/next is absent until the first block (next is then > 0).
	return delta{setProducer: st.producerNext != 0, producerNext: st.producerNext,
		setBroker: true, broker: st.broker}.write(b)
}

// loadState reads the state keys from r and checks that they agree with
// each other (every name points at a topic of that name and back).
func loadState(r pebble.Reader) (*state, error) {
	st := newState()
	err := scan(r, keyTopicID, func(k, v []byte) error {
		rec, err := DecodeRecord(v)
		if err != nil {
			return fmt.Errorf("topic %x: %w", k, err)
		}
		tr, ok := rec.(TopicRecord)
		if !ok || !bytes.Equal(k[len(keyTopicID):], tr.ID[:]) {
			return fmt.Errorf("%w: topic state under %x is %v", ErrCorrupt, k, rec)
		}
		t := &Topic{Name: tr.Name, ID: tr.ID, Partitions: tr.Partitions,
			ReplicationFactor: tr.ReplicationFactor, Configs: tr.Configs}
		st.topics[t.ID] = t
		st.collide[collisionKey(t.Name)] = t.Name
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scan(r, keyTopicName, func(k, v []byte) error {
		name := string(k[len(keyTopicName):])
		var id [16]byte
		copy(id[:], v)
		if t, ok := st.topics[id]; len(v) != 16 || !ok || t.Name != name {
			return fmt.Errorf("%w: topic name %q points at %x, not a topic of that name", ErrCorrupt, name, v)
		}
		st.names[name] = id
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(st.names) != len(st.topics) || len(st.collide) != len(st.topics) {
		return nil, fmt.Errorf("%w: %d topics, %d names, %d distinct collision names",
			ErrCorrupt, len(st.topics), len(st.names), len(st.collide))
	}
	if v, ok, err := get(r, keyProducerNext); err != nil {
		return nil, err
	} else if ok {
		if st.producerNext, err = decodeProducerNext(v); err != nil {
			return nil, err
		}
	}
	if v, ok, err := get(r, keyBrokerConfigs); err != nil {
		return nil, err
	} else if ok {
		m, err := decodeConfigs(v)
		if err != nil {
			return nil, err
		}
		if m != nil {
			st.broker = m
		}
	}
	return st, nil
}

// scan calls fn for every key with the prefix, in order. k and v are valid
// only during the call.
func scan(r pebble.Reader, prefix string, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if err := fn(it.Key(), v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}

// get returns a copy of key's value; ok is false when the key is absent.
func get(r pebble.Reader, key string) (v []byte, ok bool, err error) {
	val, closer, err := r.Get([]byte(key))
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = bytes.Clone(val)
	return v, true, closer.Close()
}
