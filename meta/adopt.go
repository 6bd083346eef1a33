package meta

import (
	"fmt"
	"slices"
)

// AdoptUnassigned gives every topic kept without replica assignments (a
// single node's, written in local mode before the node ran as a one-voter
// cluster) the replica list [node] for each of its partitions: one
// TopicAdopted record per topic, appended to the local log in one synced
// batch whatever the store's mode. It refuses once the store applied a
// replicated record (a store that ever followed a metadata log has no
// such topic), so the adopted topics are part of the state the metadata
// log starts from. It returns the names of the topics adopted, sorted.
func (s *Store) AdoptUnassigned(node int32) ([]string, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	var recs []Record
	var names []string
	for id, t := range s.st.topics {
		if t.Assignments == nil {
			recs = append(recs, TopicAdopted{TopicID: id, NodeID: node})
			names = append(names, t.Name)
		}
	}
	rep := s.repNext
	s.mu.RUnlock()
	if len(recs) == 0 {
		return nil, nil
	}
	if rep != 0 {
		return nil, fmt.Errorf("%w: %d topics have no replica assignments in a store that applied the metadata log up to offset %d", ErrInvalidReplicaAssignment, len(recs), rep)
	}
	outs, err := s.appendManyLocked(recs, false, 0)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if o.err != nil {
			return nil, o.err
		}
	}
	slices.Sort(names)
	return names, nil
}
