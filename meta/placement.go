package meta

import (
	"cmp"
	"fmt"
	"slices"
)

// Replica placement, as Kafka places the replicas of new topics and
// partitions when the request names none (the round-robin placement of
// AdminUtils.assignReplicasToBrokers, which KRaft keeps for its tools),
// and the checks Kafka makes of explicit assignments
// (ReplicationControlManager.validateManualPartitionAssignment). Pure
// functions: the controller calls them and puts the result in the record.

// PlacementBroker is a broker that may receive replicas.
type PlacementBroker struct {
	ID   int32
	Rack string // "" when the broker has no broker.rack
}

// Place returns the replica lists of a new topic's partitions partitions
// with rf replicas each (the first replica of each list is the preferred
// leader): PlaceMore(brokers, 0, partitions, rf, start).
//
// The brokers are ordered by id or, when any broker has a rack, by
// Kafka's rack-alternated order (the racks sorted, then one broker of each
// rack in turn, each rack's brokers in id order; a broker without a rack
// counts as the rack ""). With n brokers, partition p's leader is broker
// (start+p) mod n of that order and its followers come after it, at
// distances set by a shift of start + p/n (it grows by one every n
// partitions), so that leaders and replicas spread evenly: over partitions
// 0 to k*n-1 every broker leads k times and holds k*rf replicas (with
// racks: when the racks hold equally many brokers). With racks, a follower
// is skipped while a rack without a replica of the partition remains (and
// a broker already holding one while a broker without one remains), so
// each partition's replicas are on min(rf, racks) distinct racks. Callers
// pass a random start per topic (Kafka draws it at random).
//
// Errors: ErrInvalidPartitions when partitions < 1;
// ErrInvalidReplicationFactor when rf < 1 or rf > len(brokers);
// ErrInvalidReplicaAssignment when a broker id repeats.
func Place(brokers []PlacementBroker, partitions int32, rf int16, start int) ([][]int32, error) {
	return PlaceMore(brokers, 0, partitions, rf, start)
}

// PlaceMore returns the replica lists of partitions existing, ...,
// existing+partitions-1 of a topic placed by Place with this start, so
// that partitions added to it continue its pattern: with the same brokers,
// PlaceMore(b, k, p, rf, s) equals Place(b, k+p, rf, s)[k:]. A caller
// that does not know the topic's start may pass the index of partition
// 0's leader in the order Place describes. Errors as Place's.
func PlaceMore(brokers []PlacementBroker, existing, partitions int32, rf int16, start int) ([][]int32, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("%w: %d (must be >= 1)", ErrInvalidPartitions, partitions)
	}
	if existing < 0 {
		return nil, fmt.Errorf("%w: %d existing partitions", ErrInvalidPartitions, existing)
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: %d (must be >= 1)", ErrInvalidReplicationFactor, rf)
	}
	if int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
			ErrInvalidReplicationFactor, rf, rf, len(brokers))
	}
	bs := slices.Clone(brokers)
	slices.SortFunc(bs, func(a, b PlacementBroker) int { return cmp.Compare(a.ID, b.ID) })
	racked := false
	for i, b := range bs {
		if i > 0 && bs[i-1].ID == b.ID {
			return nil, fmt.Errorf("%w: broker %d listed twice for placement", ErrInvalidReplicaAssignment, b.ID)
		}
		racked = racked || b.Rack != ""
	}
	n := len(bs)
	if start %= n; start < 0 {
		start += n
	}
	out := make([][]int32, partitions)
	if !racked {
		for i := range out {
			p := int(existing) + i
			first, shift := (p+start)%n, start+p/n
			l := make([]int32, 0, rf)
			l = append(l, bs[first].ID)
			for j := 0; j < int(rf)-1; j++ {
				l = append(l, bs[followerIndex(first, shift, j, n)].ID)
			}
			out[i] = l
		}
		return out, nil
	}
	order, rackOf, racks := rackAlternated(bs)
	for i := range out {
		p := int(existing) + i
		first, shift := (p+start)%n, start+p/n
		leader := order[first]
		l := make([]int32, 0, rf)
		l = append(l, leader)
		rackHas := map[string]bool{rackOf[leader]: true}
		has := map[int32]bool{leader: true}
		for k := 0; len(l) < int(rf); k++ {
			b := order[followerIndex(first, shift*racks, k, n)]
			r := rackOf[b]
			if (!rackHas[r] || len(rackHas) == racks) && (!has[b] || len(has) == n) {
				l = append(l, b)
				rackHas[r] = true
				has[b] = true
			}
		}
		out[i] = l
	}
	return out, nil
}

// followerIndex is the index of follower j of a partition whose leader is
// at index first: one to n-1 places after it, by the shift.
func followerIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

// rackAlternated orders bs (sorted by id) one broker per rack in turn,
// the racks in sorted order; it also returns each broker's rack and the
// number of racks.
func rackAlternated(bs []PlacementBroker) (order []int32, rackOf map[int32]string, racks int) {
	byRack := map[string][]int32{}
	rackOf = map[int32]string{}
	for _, b := range bs {
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
		rackOf[b.ID] = b.Rack
	}
	names := make([]string, 0, len(byRack))
	for r := range byRack {
		names = append(names, r)
	}
	slices.Sort(names)
	for i := 0; len(order) < len(bs); i++ {
		if l := byRack[names[i%len(names)]]; len(l) > 0 {
			order = append(order, l[0])
			byRack[names[i%len(names)]] = l[1:]
		}
	}
	return order, rackOf, len(names)
}

// ValidateAssignment applies Kafka's checks to explicit replica lists (a
// CreateTopics or CreatePartitions request's assignments): each list is
// non-empty, names no broker twice and only brokers known reports
// registered, and all lists have the same length. Errors wrap
// ErrInvalidReplicaAssignment with Kafka's messages.
func ValidateAssignment(assignments [][]int32, known func(id int32) bool) error {
	for i, l := range assignments {
		if len(l) == 0 {
			return fmt.Errorf("%w: The manual partition assignment includes an empty replica list.", ErrInvalidReplicaAssignment)
		}
		sorted := slices.Clone(l)
		slices.Sort(sorted)
		for k, id := range sorted {
			if !known(id) {
				return fmt.Errorf("%w: The manual partition assignment includes broker %d, but no such broker is registered.",
					ErrInvalidReplicaAssignment, id)
			}
			if k > 0 && sorted[k-1] == id {
				return fmt.Errorf("%w: The manual partition assignment includes the broker %d more than once.",
					ErrInvalidReplicaAssignment, id)
			}
		}
		if i > 0 && len(l) != len(assignments[0]) {
			return fmt.Errorf("%w: The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).",
				ErrInvalidReplicaAssignment, len(l), len(assignments[0]))
		}
	}
	return nil
}
