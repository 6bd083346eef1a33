package meta

import (
	"cmp"
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

// ChangePartitions applies partition leaders' reports as one change (one
// batch, one proposed entry). errs[i] is why changes[i] was refused
// (ErrUnknownTopicID, ErrUnknownPartition, ErrFencedLeaderEpoch,
// ErrInvalidRecord); err is a failure of the whole change.
func (s *Store) ChangePartitions(changes []PartitionChanged) (errs []error, err error) {
	outs, err := s.change(func(*state) ([]Record, error) {
		recs := make([]Record, len(changes))
		for i, c := range changes {
			c.ISR = slices.Clone(c.ISR)
			recs[i] = c
		}
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	errs = make([]error, len(changes))
	for i, o := range outs {
		errs[i] = o.err
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
