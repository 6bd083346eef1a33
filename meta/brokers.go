package meta

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// RegisterBroker registers a broker (replacing an earlier registration of
// its NodeID) and returns its broker epoch: the registration record's
// offset (replicated offset in replicated mode, local log offset in local
// mode). r.Epoch is ignored. The broker starts fenced. ErrInvalidBroker
// for a registration Kafka would refuse.
func (s *Store) RegisterBroker(r BrokerRegistered) (epoch int64, err error) {
	r.Epoch = 0
	r.Listeners = slices.Clone(r.Listeners)
	o, err := s.one(func(*state) (Record, error) { return r, nil })
	if err != nil {
		return 0, err
	}
	return o.rec.(BrokerRegistered).Epoch, nil
}

// FenceBroker fences (fenced true) or unfences the broker id at this
// broker epoch. ErrUnknownBroker if it is not registered,
// ErrStaleBrokerEpoch if its current epoch is another one.
func (s *Store) FenceBroker(id int32, epoch int64, fenced bool) error {
	_, err := s.one(func(*state) (Record, error) {
		return BrokerFenced{NodeID: id, Epoch: epoch, Fenced: fenced}, nil
	})
	return err
}

// DecommissionBroker sets (on true) or clears the decommissioning flag of
// the registered broker id: while it is set no replica may be moved onto
// the broker (Reassign refuses it as a target, a PartitionReassigned as a
// new replica). The flag survives a re-registration of the node id.
// ErrUnknownBroker if id is not registered.
func (s *Store) DecommissionBroker(id int32, on bool) error {
	_, err := s.one(func(*state) (Record, error) {
		return BrokerDecommissioning{NodeID: id, Decommissioning: on}, nil
	})
	return err
}

// UnregisterBroker removes the registration of broker id, and its
// decommissioning flag (Kafka's UnregisterBroker, KIP-631). Partitions
// keep it in their replica lists and its per-broker configs stay.
// ErrUnknownBroker if id is not registered.
func (s *Store) UnregisterBroker(id int32) error {
	_, err := s.one(func(*state) (Record, error) { return BrokerUnregistered{NodeID: id}, nil })
	return err
}

// NodeConfigs returns the dynamic configs of broker id (Kafka's
// per-broker configs; BrokerConfigs holds the cluster default): a copy,
// never nil, empty when it has none. id need not be registered.
func (s *Store) NodeConfigs(id int32) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := maps.Clone(s.st.nodeConfigs[id])
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// AlterNodeConfigs sets the keys in set and removes the keys in del from
// the dynamic configs of broker id, as AlterBrokerConfigs does for the
// cluster default. The node need not be registered (Kafka lets a broker
// id be configured before it starts), and unregistering it keeps them.
// ErrInvalidBroker for a negative id; ErrInvalidConfig as for
// AlterTopicConfigs.
func (s *Store) AlterNodeConfigs(id int32, set map[string]string, del []string) error {
	_, err := s.one(func(*state) (Record, error) {
		return NodeConfigChanged{NodeID: id, Set: maps.Clone(set), Delete: slices.Clone(del)}, nil
	})
	return err
}

// ChangePartitions applies partition leaders' reports as one change (one
// batch, one proposed entry). errs[i] is why changes[i] was refused
// (ErrUnknownTopicID, ErrUnknownPartition, ErrFencedLeaderEpoch,
// ErrInvalidRecord); err is a failure of the whole change.
func (s *Store) ChangePartitions(changes []PartitionChanged) (errs []error, err error) {
	return s.ChangePartitionsAt(changes, nil)
}

// ChangePartitionsAt is ChangePartitions where each report names the
// partition epoch it was computed at (moveEpochs[i], PartitionMove.Epoch;
// nil: unchecked): a report at another epoch than the partition's is
// refused with ErrStaleMoveEpoch (Kafka's INVALID_UPDATE_VERSION) and
// not recorded, checked against the state the change is built on (under
// the proposal lock in replicated mode).
func (s *Store) ChangePartitionsAt(changes []PartitionChanged, moveEpochs []int32) (errs []error, err error) {
	errs = make([]error, len(changes))
	var idx []int
	outs, err := s.change(func(st *state) ([]Record, error) {
		var recs []Record
		idx = idx[:0]
		for i, c := range changes {
			errs[i] = nil
			if moveEpochs != nil {
				if t, ok := st.topics[c.TopicID]; ok && t.Moves[c.Partition].Epoch != moveEpochs[i] {
					errs[i] = fmt.Errorf("%w: %s-%d is at partition epoch %d, the report at %d", ErrStaleMoveEpoch, t.Name, c.Partition, t.Moves[c.Partition].Epoch, moveEpochs[i])
					continue
				}
			}
			c.ISR = slices.Clone(c.ISR)
			recs = append(recs, c)
			idx = append(idx, i)
		}
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	for j, o := range outs {
		errs[idx[j]] = o.err
	}
	return errs, nil
}

// Brokers returns every registered broker, sorted by node id.
func (s *Store) Brokers() []Broker {
	s.mu.RLock()
	bs := make([]Broker, 0, len(s.st.brokers))
	for _, b := range s.st.brokers {
		bs = append(bs, b.clone())
	}
	s.mu.RUnlock()
	slices.SortFunc(bs, func(a, b Broker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return bs
}

// Broker returns the registered broker with this node id.
func (s *Store) Broker(id int32) (Broker, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.st.brokers[id]
	if !ok {
		return Broker{}, false
	}
	return b.clone(), true
}
