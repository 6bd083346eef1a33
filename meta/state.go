package meta

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
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
	// Assignments are the partitions' replica lists (first replica = the
	// preferred leader); nil for a topic kept without
	// them ("this node only"; see AdoptUnassigned).
	Assignments [][]int32
	// Leaders has one entry per partition: the latest PartitionChanged for
	// it, or Leader -1, LeaderEpoch -1 and a nil ISR if none was applied.
	Leaders []PartitionLeader
	// Moves has an entry for each partition that is being or ever was
	// reassigned (a PartitionReassigned applied to it); nil when none
	// ever was. See reassign.go for the helpers that read it.
	Moves map[int32]PartitionMove
}

// PartitionMove is a partition's reassignment state (Kafka's
// PartitionRecord addingReplicas/removingReplicas, KIP-455).
type PartitionMove struct {
	// Initial is the partition's replica list when it was created (its
	// raft group's first voters; a replica joining later starts from them
	// and replays the log's configuration changes). Never changes.
	Initial []int32
	// Adding and Removing are the replicas a reassignment in progress
	// adds and removes; both nil when none is in progress.
	Adding, Removing []int32
	// Epoch counts the PartitionReassigned records applied to the
	// partition (Kafka's partition epoch, for its replica changes): a
	// leader's ISR report names the epoch it was computed at
	// (AlterPartition's PartitionEpoch) and one of an earlier epoch is
	// refused (ChangePartitionsAt), so a report from before a cancel or a
	// new target never completes it.
	Epoch int32
}

func (m PartitionMove) clone() PartitionMove {
	return PartitionMove{Initial: slices.Clone(m.Initial), Adding: slices.Clone(m.Adding),
		Removing: slices.Clone(m.Removing), Epoch: m.Epoch}
}

// PartitionLeader is a partition's leader, leader epoch and ISR as its
// leader last reported them.
type PartitionLeader struct {
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
}

// noLeader is the PartitionLeader of a partition never reported.
var noLeader = PartitionLeader{Leader: -1, LeaderEpoch: -1}

// clone returns a deep copy of t (Configs never nil), for callers.
func (t *Topic) clone() Topic {
	c := *t
	c.Configs = maps.Clone(t.Configs)
	if c.Configs == nil {
		c.Configs = map[string]string{}
	}
	c.Assignments = cloneAssignments(t.Assignments)
	c.Leaders = slices.Clone(t.Leaders)
	for i := range c.Leaders {
		c.Leaders[i].ISR = slices.Clone(c.Leaders[i].ISR)
	}
	if t.Moves != nil {
		c.Moves = make(map[int32]PartitionMove, len(t.Moves))
		for p, m := range t.Moves {
			c.Moves[p] = m.clone()
		}
	}
	return c
}

func cloneAssignments(a [][]int32) [][]int32 {
	if a == nil {
		return nil
	}
	c := make([][]int32, len(a))
	for i, l := range a {
		c[i] = slices.Clone(l)
	}
	return c
}

// record returns the TopicRecord that creates t as it is (its leaders
// aside); it is also the encoding of t's state value under topic/id/<id>.
func (t *Topic) record() TopicRecord {
	return TopicRecord{Name: t.Name, ID: t.ID, Partitions: t.Partitions,
		ReplicationFactor: t.ReplicationFactor, Configs: t.Configs, Assignments: t.Assignments}
}

// Broker is a registered broker as of the latest applied record.
type Broker struct {
	NodeID        int32
	Epoch         int64 // the broker epoch: the offset of its registration record
	IncarnationID [16]byte
	Rack          string
	Listeners     []Endpoint
	Fenced        bool
	// Decommissioning is set by a BrokerDecommissioning: no replica may
	// be moved onto the broker (Reassign, PartitionReassigned). It
	// survives a re-registration and goes with BrokerUnregistered.
	Decommissioning bool
}

// registration returns the BrokerRegistered record of b's registration
// (its Epoch stamped); with the fenced flag it is b's state value.
func (b *Broker) registration() BrokerRegistered {
	return BrokerRegistered{NodeID: b.NodeID, IncarnationID: b.IncarnationID, Rack: b.Rack,
		Listeners: b.Listeners, Epoch: b.Epoch}
}

func (r BrokerRegistered) broker(fenced bool) Broker {
	return Broker{NodeID: r.NodeID, Epoch: r.Epoch, IncarnationID: r.IncarnationID, Rack: r.Rack,
		Listeners: slices.Clone(r.Listeners), Fenced: fenced}
}

func (b *Broker) clone() Broker {
	c := *b
	c.Listeners = slices.Clone(b.Listeners)
	return c
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
	brokers      map[int32]*Broker   // registered brokers by node id
	// nodeConfigs are the per-broker configs by node id; a node has an
	// entry only while it has some. The maps are never modified in place.
	nodeConfigs map[int32]map[string]string
	// scram are the SCRAM credentials (scram.go); values are never
	// modified in place.
	scram map[scramKey]*ScramCredential
	// acls are the ACLs (acl.go), an immutable set replaced on change.
	acls *aclSet
	// quotas are the client quota values by state key (quota.go);
	// quotaGen names this set of them (Store.QuotaGeneration).
	quotas   map[string]ClientQuotaChanged
	quotaGen uint64
}

func newState() *state {
	return &state{
		topics:      map[[16]byte]*Topic{},
		names:       map[string][16]byte{},
		collide:     map[string]string{},
		broker:      map[string]string{},
		brokers:     map[int32]*Broker{},
		nodeConfigs: map[int32]map[string]string{},
		scram:       map[scramKey]*ScramCredential{},
		acls:        emptyACLs,
		quotas:      map[string]ClientQuotaChanged{},
		quotaGen:    quotaGens.Add(1),
	}
}

// clone returns a copy of st whose maps are its own (the Topic and Broker
// values are shared: they are never modified in place).
func (st *state) clone() *state {
	return &state{topics: maps.Clone(st.topics), names: maps.Clone(st.names),
		collide: maps.Clone(st.collide), producerNext: st.producerNext, broker: st.broker,
		brokers: maps.Clone(st.brokers), nodeConfigs: maps.Clone(st.nodeConfigs),
		scram: maps.Clone(st.scram), acls: st.acls, quotas: maps.Clone(st.quotas), quotaGen: st.quotaGen}
}

// delta is the effect of one record on the state: at most one topic
// changed or removed, or one partition's leader, or one partition's
// replicas and move, or one broker registered, changed or removed, or the
// producer id counter, or the broker configs, or one node's configs.
type delta struct {
	topic        *Topic // created or changed topic (its new value); its id and name keys are written
	removed      *Topic // removed topic
	leaderOf     *Topic // the topic's new value after a PartitionChanged (only that leader key is written)
	leaderPart   int32
	moveOf       *Topic // the topic's new value after a PartitionReassigned (that move key is written; topic is set too)
	movePart     int32
	reg          *Broker // registered or changed broker (its new value)
	unreg        *Broker // unregistered broker (as it was)
	setProducer  bool
	producerNext int64
	setBroker    bool
	broker       map[string]string
	setNode      bool // node's configs become nodeConfigs (none: removed)
	node         int32
	nodeConfigs  map[string]string
	setScram     bool // scramKey's credential becomes scram (nil: removed)
	scramKey     scramKey
	scram        *ScramCredential
	setACL       bool // the ACL aclID becomes acl (nil: removed)
	aclID        [16]byte
	acl          *ACL
	setQuota     bool // quotaKey's value becomes quota (nil: removed)
	quotaKey     string
	quota        *ClientQuotaChanged
}

func (st *state) brokerKnown(id int32) bool { _, ok := st.brokers[id]; return ok }

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
		if r.Assignments != nil {
			if len(r.Assignments) != int(r.Partitions) {
				return delta{}, fmt.Errorf("%w: %d replica lists for %d partitions",
					ErrInvalidReplicaAssignment, len(r.Assignments), r.Partitions)
			}
			if err := validateAssigned(r.Assignments, r.ReplicationFactor, st.brokerKnown); err != nil {
				return delta{}, err
			}
		}
		return delta{topic: &Topic{Name: r.Name, ID: r.ID, Partitions: r.Partitions,
			ReplicationFactor: r.ReplicationFactor, Configs: maps.Clone(r.Configs),
			Assignments: cloneAssignments(r.Assignments), Leaders: grow(nil, r.Partitions)}}, nil

	case PartitionsAdded:
		t, err := st.topicByID(r.TopicID)
		if err != nil {
			return delta{}, err
		}
		if r.Count <= t.Partitions {
			return delta{}, fmt.Errorf("%w: %s has %d partitions; a new total of %d does not grow it",
				ErrInvalidPartitions, t.Name, t.Partitions, r.Count)
		}
		added := r.Count - t.Partitions
		switch {
		case t.Assignments == nil && r.Assignments != nil:
			return delta{}, fmt.Errorf("%w: %s has no replica assignments (single-node), so its new partitions cannot have any",
				ErrInvalidReplicaAssignment, t.Name)
		case t.Assignments != nil && r.Assignments == nil:
			return delta{}, fmt.Errorf("%w: %s has replica assignments, so its new partitions need them too",
				ErrInvalidReplicaAssignment, t.Name)
		case r.Assignments != nil && len(r.Assignments) != int(added):
			return delta{}, fmt.Errorf("%w: Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
				ErrInvalidReplicaAssignment, added, len(r.Assignments))
		}
		if r.Assignments != nil {
			if err := validateAssigned(r.Assignments, t.ReplicationFactor, st.brokerKnown); err != nil {
				return delta{}, err
			}
		}
		n := *t
		n.Partitions = r.Count
		if t.Assignments != nil {
			n.Assignments = append(slices.Clip(t.Assignments), cloneAssignments(r.Assignments)...)
		}
		n.Leaders = grow(t.Leaders, r.Count)
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

	case BrokerRegistered:
		if err := validateRegistration(r); err != nil {
			return delta{}, err
		}
		b := r.broker(true)
		if old, ok := st.brokers[r.NodeID]; ok {
			b.Decommissioning = old.Decommissioning
		}
		return delta{reg: &b}, nil

	case BrokerFenced:
		b, ok := st.brokers[r.NodeID]
		if !ok {
			return delta{}, fmt.Errorf("%w: %d", ErrUnknownBroker, r.NodeID)
		}
		if b.Epoch != r.Epoch {
			return delta{}, fmt.Errorf("%w: broker %d is at epoch %d, not %d", ErrStaleBrokerEpoch, r.NodeID, b.Epoch, r.Epoch)
		}
		n := b.clone()
		n.Fenced = r.Fenced
		return delta{reg: &n}, nil

	case PartitionChanged:
		t, err := st.topicByID(r.TopicID)
		if err != nil {
			return delta{}, err
		}
		if r.Partition < 0 || r.Partition >= t.Partitions {
			return delta{}, fmt.Errorf("%w: %s has %d partitions, no partition %d", ErrUnknownPartition, t.Name, t.Partitions, r.Partition)
		}
		if r.Leader < -1 || r.LeaderEpoch < 0 {
			return delta{}, fmt.Errorf("%w: leader %d, leader epoch %d", ErrInvalidRecord, r.Leader, r.LeaderEpoch)
		}
		if cur := t.Leaders[r.Partition].LeaderEpoch; r.LeaderEpoch < cur {
			return delta{}, fmt.Errorf("%w: %s-%d is at leader epoch %d, not %d", ErrFencedLeaderEpoch, t.Name, r.Partition, cur, r.LeaderEpoch)
		}
		n := *t
		n.Leaders = slices.Clone(t.Leaders)
		n.Leaders[r.Partition] = PartitionLeader{Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, ISR: slices.Clone(r.ISR)}
		return delta{leaderOf: &n, leaderPart: r.Partition}, nil

	case PartitionReassigned:
		return st.planReassigned(r)

	case TopicAdopted:
		t, err := st.topicByID(r.TopicID)
		if err != nil {
			return delta{}, err
		}
		if t.Assignments != nil {
			return delta{}, fmt.Errorf("%w: %s has replica assignments already", ErrInvalidReplicaAssignment, t.Name)
		}
		if r.NodeID < 0 {
			return delta{}, fmt.Errorf("%w: node id %d", ErrInvalidBroker, r.NodeID)
		}
		n := *t
		n.Assignments = make([][]int32, t.Partitions)
		for p := range n.Assignments {
			n.Assignments[p] = []int32{r.NodeID}
		}
		return delta{topic: &n}, nil

	case BrokerDecommissioning:
		b, ok := st.brokers[r.NodeID]
		if !ok {
			return delta{}, fmt.Errorf("%w: %d", ErrUnknownBroker, r.NodeID)
		}
		n := b.clone()
		n.Decommissioning = r.Decommissioning
		return delta{reg: &n}, nil

	case BrokerUnregistered:
		b, ok := st.brokers[r.NodeID]
		if !ok {
			return delta{}, fmt.Errorf("%w: %d", ErrUnknownBroker, r.NodeID)
		}
		return delta{unreg: b}, nil

	case NodeConfigChanged:
		if r.NodeID < 0 {
			return delta{}, fmt.Errorf("%w: node id %d for per-broker configs", ErrInvalidBroker, r.NodeID)
		}
		if err := validateConfigChange(r.Set, r.Delete); err != nil {
			return delta{}, err
		}
		m := changeConfigs(st.nodeConfigs[r.NodeID], r.Set, r.Delete)
		if len(m) == 0 {
			m = nil
		}
		return delta{setNode: true, node: r.NodeID, nodeConfigs: m}, nil

	case ScramCredentialChanged:
		return st.planScram(r)

	case ACLChanged:
		return st.planACL(r)
	case ClientQuotaChanged:
		return st.planClientQuota(r)
	}
	return delta{}, fmt.Errorf("%w: unknown record %T", ErrInvalidRecord, rec)
}

// grow returns a new slice of n leaders: ls, then never-reported ones.
func grow(ls []PartitionLeader, n int32) []PartitionLeader {
	g := make([]PartitionLeader, n)
	copy(g, ls)
	for i := len(ls); i < int(n); i++ {
		g[i] = noLeader
	}
	return g
}

// validateAssigned checks explicit replica lists as ValidateAssignment does
// and that each holds rf replicas.
func validateAssigned(a [][]int32, rf int16, known func(int32) bool) error {
	if err := ValidateAssignment(a, known); err != nil {
		return err
	}
	if len(a) > 0 && len(a[0]) != int(rf) {
		return fmt.Errorf("%w: The manual partition assignment includes a partition with %d replica(s), but the replication factor is %d.",
			ErrInvalidReplicaAssignment, len(a[0]), rf)
	}
	return nil
}

// validateRegistration refuses a negative node id or epoch, and listeners
// without a name, named twice or with a port outside [0, 65535].
func validateRegistration(r BrokerRegistered) error {
	if r.NodeID < 0 || r.Epoch < 0 {
		return fmt.Errorf("%w: node id %d, epoch %d", ErrInvalidBroker, r.NodeID, r.Epoch)
	}
	seen := map[string]bool{}
	for _, l := range r.Listeners {
		switch {
		case l.Name == "":
			return fmt.Errorf("%w: broker %d: a listener without a name", ErrInvalidBroker, r.NodeID)
		case seen[l.Name]:
			return fmt.Errorf("%w: broker %d: listener %s twice", ErrInvalidBroker, r.NodeID, l.Name)
		case l.Port < 0 || l.Port > 65535:
			return fmt.Errorf("%w: broker %d: listener %s port %d", ErrInvalidBroker, r.NodeID, l.Name, l.Port)
		}
		seen[l.Name] = true
	}
	return nil
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
	if t := d.leaderOf; t != nil {
		st.topics[t.ID] = t
	}
	if t := d.moveOf; t != nil {
		st.topics[t.ID] = t
	}
	if b := d.reg; b != nil {
		st.brokers[b.NodeID] = b
	}
	if b := d.unreg; b != nil {
		delete(st.brokers, b.NodeID)
	}
	if d.setNode {
		if d.nodeConfigs == nil {
			delete(st.nodeConfigs, d.node)
		} else {
			st.nodeConfigs[d.node] = d.nodeConfigs
		}
	}
	if d.setScram {
		if d.scram == nil {
			delete(st.scram, d.scramKey)
		} else {
			st.scram[d.scramKey] = d.scram
		}
	}
	if d.setACL {
		if d.acl == nil {
			st.acls = st.acls.with(nil, d.aclID)
		} else {
			st.acls = st.acls.with(d.acl, [16]byte{})
		}
	}
	if d.setQuota {
		st.applyQuota(d)
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
		for _, p := range []string{topicLeaderPrefix(t.ID), topicMovePrefix(t.ID)} {
			if err = b.DeleteRange([]byte(p), prefixEnd(p), nil); err != nil {
				return err
			}
		}
	}
	if t := d.topic; t != nil {
		set(topicIDKey(t.ID), EncodeRecord(t.record()))
		set(topicNameKey(t.Name), t.ID[:])
	}
	if t := d.leaderOf; t != nil {
		set(topicLeaderKey(t.ID, d.leaderPart), encodeLeader(t.Leaders[d.leaderPart]))
	}
	if t := d.moveOf; t != nil {
		set(topicMoveKey(t.ID, d.movePart), encodeMove(t.Moves[d.movePart]))
	}
	if r := d.reg; r != nil {
		set(brokerKey(r.NodeID), encodeBroker(*r))
	}
	if r := d.unreg; r != nil && err == nil {
		err = b.Delete(brokerKey(r.NodeID), nil)
	}
	if d.setNode && err == nil {
		// Canonical: the key is absent when the node has no configs.
		if len(d.nodeConfigs) == 0 {
			err = b.Delete(nodeConfigsKey(d.node), nil)
		} else {
			set(nodeConfigsKey(d.node), encodeConfigs(d.nodeConfigs))
		}
	}
	if d.setScram && err == nil {
		if d.scram == nil {
			err = b.Delete(scramStateKey(d.scramKey), nil)
		} else {
			set(scramStateKey(d.scramKey), EncodeRecord(d.scram.record()))
		}
	}
	if d.setACL && err == nil {
		if d.acl == nil {
			err = b.Delete(aclStateKey(d.aclID), nil)
		} else {
			set(aclStateKey(d.aclID), EncodeRecord(ACLChanged{ID: d.aclID, Binding: d.acl.ACLBinding}))
		}
	}
	if d.setQuota && err == nil {
		if d.quota == nil {
			err = b.Delete([]byte(d.quotaKey), nil)
		} else {
			set([]byte(d.quotaKey), EncodeRecord(*d.quota))
		}
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
		// A leader key exists exactly for the partitions reported (whose
		// leader epoch is then >= 0).
		for p, pl := range t.Leaders {
			if pl.LeaderEpoch >= 0 {
				if err := (delta{leaderOf: t, leaderPart: int32(p)}).write(b); err != nil {
					return err
				}
			}
		}
		for p := range t.Moves {
			if err := (delta{moveOf: t, movePart: p}).write(b); err != nil {
				return err
			}
		}
	}
	for _, r := range st.brokers {
		if err := (delta{reg: r}).write(b); err != nil {
			return err
		}
	}
	for id, m := range st.nodeConfigs {
		if err := (delta{setNode: true, node: id, nodeConfigs: m}).write(b); err != nil {
			return err
		}
	}
	for k, c := range st.scram {
		if err := (delta{setScram: true, scramKey: k, scram: c}).write(b); err != nil {
			return err
		}
	}
	for id, a := range st.acls.byID {
		if err := (delta{setACL: true, aclID: id, acl: a}).write(b); err != nil {
			return err
		}
	}
	for k, q := range st.quotas {
		if err := (delta{setQuota: true, quotaKey: k, quota: &q}).write(b); err != nil {
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
			ReplicationFactor: tr.ReplicationFactor, Configs: tr.Configs, Assignments: tr.Assignments,
			Leaders: grow(nil, tr.Partitions)}
		if t.Assignments != nil && len(t.Assignments) != int(t.Partitions) {
			return fmt.Errorf("%w: topic %s has %d partitions and %d replica lists", ErrCorrupt, t.Name, t.Partitions, len(t.Assignments))
		}
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
	err = scan(r, keyTopicLeader, func(k, v []byte) error {
		id, part, ok := parseTopicLeaderKey(k)
		t := st.topics[id]
		if !ok || t == nil || part < 0 || part >= t.Partitions {
			return fmt.Errorf("%w: leader key %x names no partition", ErrCorrupt, k)
		}
		pl, err := decodeLeader(v)
		if err != nil {
			return fmt.Errorf("leader %x: %w", k, err)
		}
		if pl.LeaderEpoch < 0 {
			return fmt.Errorf("%w: leader key %x holds leader epoch %d", ErrCorrupt, k, pl.LeaderEpoch)
		}
		t.Leaders[part] = pl // t is not shared yet
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scan(r, keyBroker, func(k, v []byte) error {
		id, ok := parseBrokerKey(k)
		b, err := decodeBroker(v)
		if err != nil {
			return fmt.Errorf("broker %x: %w", k, err)
		}
		if !ok || b.NodeID != id {
			return fmt.Errorf("%w: broker key %x holds broker %d", ErrCorrupt, k, b.NodeID)
		}
		st.brokers[id] = &b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := loadMoves(r, st); err != nil {
		return nil, err
	}
	err = scan(r, keyNodeConfigs, func(k, v []byte) error {
		id, ok := parseNodeConfigsKey(k)
		m, err := decodeConfigs(v)
		if err != nil {
			return fmt.Errorf("node configs %x: %w", k, err)
		}
		if !ok || len(m) == 0 {
			return fmt.Errorf("%w: node configs key %x holds %d configs", ErrCorrupt, k, len(m))
		}
		st.nodeConfigs[id] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := scan(r, keyScram, func(k, v []byte) error { return loadScram(st, k, v) }); err != nil {
		return nil, err
	}
	if err := scan(r, keyACL, func(k, v []byte) error { return loadACL(st, k, v) }); err != nil {
		return nil, err
	}
	if err := scan(r, keyQuota, func(k, v []byte) error { return loadClientQuota(st, k, v) }); err != nil {
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
