package meta

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Record is one entry of the metadata log: one of TopicRecord,
// PartitionsAdded, TopicConfigsChanged, TopicRemoved, ProducerIDBlock,
// BrokerConfigChanged, BrokerRegistered, BrokerFenced, PartitionChanged,
// PartitionReassigned, BrokerDecommissioning, BrokerUnregistered or
// NodeConfigChanged, TopicAdopted, ScramCredentialChanged, ACLChanged or
// ClientQuotaChanged (values, not pointers). The set is closed.
type Record interface {
	// Type is the record's type byte in the encoding.
	Type() RecordType
	fmt.Stringer
	isRecord()
}

// TopicRecord creates a topic.
type TopicRecord struct {
	Name              string
	ID                [16]byte // Kafka topic UUID; never all-zero
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string // topic config overrides
	// Assignments are the replica lists of the partitions (the first
	// replica is the preferred leader): len(Assignments) == Partitions,
	// each of ReplicationFactor distinct registered brokers. Nil ("this
	// node only") in data dirs of a single node from before it ran as a
	// one-voter cluster; AdoptUnassigned replaces it.
	Assignments [][]int32
}

// PartitionsAdded grows a topic to Count partitions (the new total).
type PartitionsAdded struct {
	TopicID [16]byte
	Count   int32
	// Assignments are the replica lists of the new partitions (one per new
	// partition, in order), or nil for a topic kept without assignments.
	Assignments [][]int32
}

// TopicConfigsChanged sets, then deletes, topic config overrides.
type TopicConfigsChanged struct {
	TopicID [16]byte
	Set     map[string]string
	Delete  []string
}

// TopicRemoved deletes a topic.
type TopicRemoved struct {
	TopicID [16]byte
}

// ProducerIDBlock allocates the producer ids [First, First+Size).
type ProducerIDBlock struct {
	First int64
	Size  int64
}

// BrokerConfigChanged sets, then deletes, cluster-wide broker configs.
type BrokerConfigChanged struct {
	Set    map[string]string
	Delete []string
}

// Endpoint is one listener of a broker; Name is the listener name as in
// the listeners config (PLAINTEXT, SSL, ...).
type Endpoint struct {
	Name string
	Host string
	Port int32
}

// BrokerRegistered registers a broker, replacing an earlier registration
// of the same NodeID. The broker starts fenced. Epoch is the broker epoch:
// the proposer leaves it 0 and apply stamps it with the record's offset
// (the replicated offset in replicated mode, the local log offset in local
// mode), so the logged record carries the stamped value.
type BrokerRegistered struct {
	NodeID        int32
	IncarnationID [16]byte
	Rack          string
	Listeners     []Endpoint
	Epoch         int64
}

// BrokerFenced fences (Fenced true) or unfences a broker. It applies only
// to the registration with exactly this Epoch.
type BrokerFenced struct {
	NodeID int32
	Epoch  int64
	Fenced bool
}

// PartitionChanged is a partition leader's report of its leadership and
// ISR. It applies only if LeaderEpoch is at least the stored one.
type PartitionChanged struct {
	TopicID     [16]byte
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
}

// PartitionReassigned sets a partition's replica list and reassignment
// state (Kafka's PartitionChangeRecord replicas, addingReplicas and
// removingReplicas, KIP-455). Replicas become the partition's
// Topic.Assignments entry; Adding and Removing (subsets of Replicas,
// disjoint; both nil when no reassignment is in progress) its
// PartitionMove. Store.Reassign and Store.CompleteReassignment build it.
type PartitionReassigned struct {
	TopicID   [16]byte
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// BrokerDecommissioning sets (Decommissioning true) or clears a
// registered broker's decommissioning flag: no replica may be moved onto
// it. The flag survives a re-registration of the node id.
type BrokerDecommissioning struct {
	NodeID          int32
	Decommissioning bool
}

// BrokerUnregistered removes a broker's registration (Kafka's
// UnregisterBrokerRecord, KIP-500/KIP-631), its decommissioning flag
// with it. Its replicas stay in the partitions' assignments and its
// per-broker configs stay.
type BrokerUnregistered struct {
	NodeID int32
}

// NodeConfigChanged sets, then deletes, the dynamic broker configs of one
// node id (Kafka's per-broker configs, kafka-configs --entity-type
// brokers --entity-name <id>; BrokerConfigChanged holds the cluster
// default). The node need not be registered.
type NodeConfigChanged struct {
	NodeID int32
	Set    map[string]string
	Delete []string
}

func (TopicRecord) Type() RecordType           { return TypeTopic }
func (PartitionsAdded) Type() RecordType       { return TypePartitionsAdded }
func (TopicConfigsChanged) Type() RecordType   { return TypeTopicConfigsChanged }
func (TopicRemoved) Type() RecordType          { return TypeTopicRemoved }
func (ProducerIDBlock) Type() RecordType       { return TypeProducerIDBlock }
func (BrokerConfigChanged) Type() RecordType   { return TypeBrokerConfigChanged }
func (BrokerRegistered) Type() RecordType      { return TypeBrokerRegistered }
func (BrokerFenced) Type() RecordType          { return TypeBrokerFenced }
func (PartitionChanged) Type() RecordType      { return TypePartitionChanged }
func (PartitionReassigned) Type() RecordType   { return TypePartitionReassigned }
func (BrokerDecommissioning) Type() RecordType { return TypeBrokerDecommissioning }
func (BrokerUnregistered) Type() RecordType    { return TypeBrokerUnregistered }
func (NodeConfigChanged) Type() RecordType     { return TypeNodeConfigChanged }
func (TopicAdopted) Type() RecordType          { return TypeTopicAdopted }

func (TopicRecord) isRecord()           {}
func (PartitionsAdded) isRecord()       {}
func (TopicConfigsChanged) isRecord()   {}
func (TopicRemoved) isRecord()          {}
func (ProducerIDBlock) isRecord()       {}
func (BrokerConfigChanged) isRecord()   {}
func (BrokerRegistered) isRecord()      {}
func (BrokerFenced) isRecord()          {}
func (PartitionChanged) isRecord()      {}
func (PartitionReassigned) isRecord()   {}
func (BrokerDecommissioning) isRecord() {}
func (BrokerUnregistered) isRecord()    {}
func (NodeConfigChanged) isRecord()     {}
func (TopicAdopted) isRecord()          {}

// TopicAdopted gives a topic kept without replica assignments (written
// by a single node before it ran as a one-voter cluster) the replica list
// [NodeID] for each of its partitions: the node that held them all. Valid
// only for such a topic (Store.AdoptUnassigned writes it).
type TopicAdopted struct {
	TopicID [16]byte
	NodeID  int32
}

func (r TopicAdopted) String() string {
	return fmt.Sprintf("TopicAdopted id=%s node=%d", FormatTopicID(r.TopicID), r.NodeID)
}

// String prints the assignments only when there are some.
func (r TopicRecord) String() string {
	return fmt.Sprintf("TopicRecord name=%s id=%s partitions=%d rf=%d configs=%s",
		r.Name, FormatTopicID(r.ID), r.Partitions, r.ReplicationFactor, formatMap(r.Configs)) +
		formatAssignments(r.Assignments)
}

func (r PartitionsAdded) String() string {
	return fmt.Sprintf("PartitionsAdded id=%s count=%d", FormatTopicID(r.TopicID), r.Count) +
		formatAssignments(r.Assignments)
}

func formatAssignments(a [][]int32) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf(" assignments=%v", a)
}

func (r BrokerRegistered) String() string {
	var sb strings.Builder
	for i, l := range r.Listeners {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%s://%s:%d", l.Name, l.Host, l.Port)
	}
	return fmt.Sprintf("BrokerRegistered node=%d incarnation=%s rack=%q listeners=[%s] epoch=%d",
		r.NodeID, FormatTopicID(r.IncarnationID), r.Rack, sb.String(), r.Epoch)
}

func (r BrokerFenced) String() string {
	return fmt.Sprintf("BrokerFenced node=%d epoch=%d fenced=%v", r.NodeID, r.Epoch, r.Fenced)
}

func (r PartitionChanged) String() string {
	return fmt.Sprintf("PartitionChanged id=%s partition=%d leader=%d epoch=%d isr=%v",
		FormatTopicID(r.TopicID), r.Partition, r.Leader, r.LeaderEpoch, r.ISR)
}

func (r PartitionReassigned) String() string {
	return fmt.Sprintf("PartitionReassigned id=%s partition=%d replicas=%v adding=%v removing=%v",
		FormatTopicID(r.TopicID), r.Partition, r.Replicas, r.Adding, r.Removing)
}

func (r BrokerDecommissioning) String() string {
	return fmt.Sprintf("BrokerDecommissioning node=%d decommissioning=%v", r.NodeID, r.Decommissioning)
}

func (r BrokerUnregistered) String() string {
	return fmt.Sprintf("BrokerUnregistered node=%d", r.NodeID)
}

func (r NodeConfigChanged) String() string {
	return fmt.Sprintf("NodeConfigChanged node=%d set=%s delete=%v", r.NodeID, formatMap(r.Set), r.Delete)
}

func (r TopicConfigsChanged) String() string {
	return fmt.Sprintf("TopicConfigsChanged id=%s set=%s delete=%v",
		FormatTopicID(r.TopicID), formatMap(r.Set), r.Delete)
}

func (r TopicRemoved) String() string {
	return fmt.Sprintf("TopicRemoved id=%s", FormatTopicID(r.TopicID))
}

func (r ProducerIDBlock) String() string {
	return fmt.Sprintf("ProducerIDBlock first=%d size=%d", r.First, r.Size)
}

func (r BrokerConfigChanged) String() string {
	return fmt.Sprintf("BrokerConfigChanged set=%s delete=%v", formatMap(r.Set), r.Delete)
}

// FormatTopicID returns id as Kafka prints a Uuid: URL-safe base64 without
// padding (22 characters).
func FormatTopicID(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// formatMap prints a map with sorted keys: {a=1,b=2}.
func formatMap(m map[string]string) string {
	keys := sortedKeys(m)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(k + "=" + m[k])
	}
	sb.WriteByte('}')
	return sb.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// EncodeRecord returns the encoding of r (see the package doc): a version
// byte, the type byte, then the type's fields. The encoding is canonical:
// maps are written in ascending key order, so equal records encode to equal
// bytes on every node.
func EncodeRecord(r Record) []byte {
	e := encoder{b: make([]byte, 0, 64)}
	e.b = append(e.b, recordVersion, byte(r.Type()))
	switch r := r.(type) {
	case TopicRecord:
		e.b = append(e.b, r.ID[:]...)
		e.i32(r.Partitions)
		e.i16(r.ReplicationFactor)
		e.str(r.Name)
		e.strMap(r.Configs)
		e.assignments(r.Assignments)
	case PartitionsAdded:
		e.b = append(e.b, r.TopicID[:]...)
		e.i32(r.Count)
		e.assignments(r.Assignments)
	case TopicConfigsChanged:
		e.b = append(e.b, r.TopicID[:]...)
		e.strMap(r.Set)
		e.strList(r.Delete)
	case TopicRemoved:
		e.b = append(e.b, r.TopicID[:]...)
	case ProducerIDBlock:
		e.i64(r.First)
		e.i64(r.Size)
	case BrokerConfigChanged:
		e.strMap(r.Set)
		e.strList(r.Delete)
	case BrokerRegistered:
		e.i32(r.NodeID)
		e.b = append(e.b, r.IncarnationID[:]...)
		e.i64(r.Epoch)
		e.str(r.Rack)
		e.b = binary.AppendUvarint(e.b, uint64(len(r.Listeners)))
		for _, l := range r.Listeners {
			e.str(l.Name)
			e.str(l.Host)
			e.i32(l.Port)
		}
	case BrokerFenced:
		e.i32(r.NodeID)
		e.i64(r.Epoch)
		e.bool(r.Fenced)
	case PartitionChanged:
		e.b = append(e.b, r.TopicID[:]...)
		e.i32(r.Partition)
		e.i32(r.Leader)
		e.i32(r.LeaderEpoch)
		e.i32List(r.ISR)
	case PartitionReassigned:
		e.b = append(e.b, r.TopicID[:]...)
		e.i32(r.Partition)
		e.i32List(r.Replicas)
		e.i32List(r.Adding)
		e.i32List(r.Removing)
	case BrokerDecommissioning:
		e.i32(r.NodeID)
		e.bool(r.Decommissioning)
	case BrokerUnregistered:
		e.i32(r.NodeID)
	case NodeConfigChanged:
		e.i32(r.NodeID)
		e.strMap(r.Set)
		e.strList(r.Delete)
	case TopicAdopted:
		e.b = append(e.b, r.TopicID[:]...)
		e.i32(r.NodeID)
	case ScramCredentialChanged:
		r.encode(&e)
	case ACLChanged:
		r.encode(&e)
	case ClientQuotaChanged:
		r.encode(&e)
	default:
		panic(fmt.Sprintf("meta: EncodeRecord of unknown record %T", r))
	}
	return e.b
}

// DecodeRecord decodes one record of version 2 (types 1 to 13), or of
// version 1 (types 1 to 6, without assignments). Every error wraps
// ErrCorrupt: an unknown version or type, a short or over-long input, map
// keys out of order.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, len(b))
	}
	v1 := b[0] == recordVersion1
	if b[0] != recordVersion && !v1 {
		return nil, fmt.Errorf("%w: record version %d", ErrCorrupt, b[0])
	}
	if v1 && RecordType(b[1]) > TypeBrokerConfigChanged {
		return nil, fmt.Errorf("%w: record type %d in version %d", ErrCorrupt, b[1], b[0])
	}
	d := decoder{b: b[2:]}
	var r Record
	switch RecordType(b[1]) {
	case TypeTopic:
		var t TopicRecord
		t.ID = d.id()
		t.Partitions = d.i32()
		t.ReplicationFactor = d.i16()
		t.Name = d.str()
		t.Configs = d.strMap()
		if !v1 {
			t.Assignments = d.assignments()
		}
		r = t
	case TypePartitionsAdded:
		p := PartitionsAdded{TopicID: d.id(), Count: d.i32()}
		if !v1 {
			p.Assignments = d.assignments()
		}
		r = p
	case TypeTopicConfigsChanged:
		var t TopicConfigsChanged
		t.TopicID = d.id()
		t.Set = d.strMap()
		t.Delete = d.strList()
		r = t
	case TypeTopicRemoved:
		r = TopicRemoved{TopicID: d.id()}
	case TypeProducerIDBlock:
		var p ProducerIDBlock
		p.First = d.i64()
		p.Size = d.i64()
		r = p
	case TypeBrokerConfigChanged:
		var c BrokerConfigChanged
		c.Set = d.strMap()
		c.Delete = d.strList()
		r = c
	case TypeBrokerRegistered:
		var br BrokerRegistered
		br.NodeID = d.i32()
		br.IncarnationID = d.id()
		br.Epoch = d.i64()
		br.Rack = d.str()
		if n := d.count(6); n > 0 {
			br.Listeners = make([]Endpoint, 0, n)
			for i := 0; i < n && d.err == nil; i++ {
				br.Listeners = append(br.Listeners, Endpoint{Name: d.str(), Host: d.str(), Port: d.i32()})
			}
		}
		r = br
	case TypeBrokerFenced:
		r = BrokerFenced{NodeID: d.i32(), Epoch: d.i64(), Fenced: d.bool()}
	case TypePartitionChanged:
		r = PartitionChanged{TopicID: d.id(), Partition: d.i32(), Leader: d.i32(),
			LeaderEpoch: d.i32(), ISR: d.i32List()}
	case TypePartitionReassigned:
		r = PartitionReassigned{TopicID: d.id(), Partition: d.i32(), Replicas: d.i32List(),
			Adding: d.i32List(), Removing: d.i32List()}
	case TypeBrokerDecommissioning:
		r = BrokerDecommissioning{NodeID: d.i32(), Decommissioning: d.bool()}
	case TypeBrokerUnregistered:
		r = BrokerUnregistered{NodeID: d.i32()}
	case TypeNodeConfigChanged:
		var c NodeConfigChanged
		c.NodeID = d.i32()
		c.Set = d.strMap()
		c.Delete = d.strList()
		r = c
	case TypeTopicAdopted:
		r = TopicAdopted{TopicID: d.id(), NodeID: d.i32()}
	case TypeScramCredentialChanged:
		r = decodeScram(&d)
	case TypeACLChanged:
		r = decodeACL(&d)
	case TypeClientQuotaChanged:
		r = decodeClientQuota(&d)
	default:
		return nil, fmt.Errorf("%w: record type %d", ErrCorrupt, b[1])
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

// encoder appends the primitive encodings: fixed-size big-endian integers,
// uvarint-prefixed strings, counted maps (ascending keys) and lists.
type encoder struct{ b []byte }

func (e *encoder) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *encoder) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) i32List(l []int32) {
	e.b = binary.AppendUvarint(e.b, uint64(len(l)))
	for _, v := range l {
		e.i32(v)
	}
}

func (e *encoder) assignments(a [][]int32) {
	e.b = binary.AppendUvarint(e.b, uint64(len(a)))
	for _, l := range a {
		e.i32List(l)
	}
}

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) strMap(m map[string]string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(m)))
	for _, k := range sortedKeys(m) {
		e.str(k)
		e.str(m[k])
	}
}

func (e *encoder) strList(l []string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(l)))
	for _, s := range l {
		e.str(s)
	}
}

// decoder reads what encoder writes. The first problem sticks in err and
// every later read returns zero values; finish reports it, or trailing
// bytes.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("need %d bytes, have %d", n, len(d.b))
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) id() (id [16]byte) {
	copy(id[:], d.take(16))
	return id
}

func (d *decoder) i16() int16 {
	if p := d.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (d *decoder) i32() int32 {
	if p := d.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (d *decoder) i64() int64 {
	if p := d.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// count reads a uvarint count of items that take at least minSize bytes
// each, refusing counts the remaining input cannot hold.
func (d *decoder) count(minSize int) int {
	if d.err != nil {
		return 0
	}
	n, w := binary.Uvarint(d.b)
	if w <= 0 || w != uvarintLen(n) {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[w:]
	if n > uint64(len(d.b)/minSize) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

// uvarintLen is the length of n's minimal uvarint encoding; decoding
// refuses longer ones, so that the encoding stays canonical.
func uvarintLen(n uint64) int {
	w := 1
	for ; n >= 0x80; n >>= 7 {
		w++
	}
	return w
}

// bool reads one byte that must be 0 or 1 (so the encoding stays
// canonical).
func (d *decoder) bool() bool {
	p := d.take(1)
	if p == nil {
		return false
	}
	if p[0] > 1 {
		d.fail("bool byte %d", p[0])
	}
	return p[0] == 1
}

// i32List reads a counted list of int32s; an empty list decodes as nil.
func (d *decoder) i32List() []int32 {
	n := d.count(4)
	if n == 0 {
		return nil
	}
	l := make([]int32, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		l = append(l, d.i32())
	}
	return l
}

// assignments reads a counted list of int32 lists; none decodes as nil.
func (d *decoder) assignments() [][]int32 {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	a := make([][]int32, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		a = append(a, d.i32List())
	}
	return a
}

func (d *decoder) str() string {
	n := d.count(1)
	return string(d.take(n))
}

func (d *decoder) strMap() map[string]string {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str()
		v := d.str()
		if i > 0 && k <= prev {
			d.fail("map keys out of order: %q after %q", k, prev)
		}
		m[k] = v
		prev = k
	}
	return m
}

func (d *decoder) strList() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	l := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		l = append(l, d.str())
	}
	return l
}

func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return nil
}
