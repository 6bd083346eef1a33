package meta

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Record is one entry of the metadata log: one of TopicRecord,
// PartitionsAdded, TopicConfigsChanged, TopicRemoved, ProducerIDBlock or
// BrokerConfigChanged (values, not pointers). The set is closed.
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
}

// PartitionsAdded grows a topic to Count partitions (the new total).
type PartitionsAdded struct {
	TopicID [16]byte
	Count   int32
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

func (TopicRecord) Type() RecordType         { return TypeTopic }
func (PartitionsAdded) Type() RecordType     { return TypePartitionsAdded }
func (TopicConfigsChanged) Type() RecordType { return TypeTopicConfigsChanged }
func (TopicRemoved) Type() RecordType        { return TypeTopicRemoved }
func (ProducerIDBlock) Type() RecordType     { return TypeProducerIDBlock }
func (BrokerConfigChanged) Type() RecordType { return TypeBrokerConfigChanged }

func (TopicRecord) isRecord()         {}
func (PartitionsAdded) isRecord()     {}
func (TopicConfigsChanged) isRecord() {}
func (TopicRemoved) isRecord()        {}
func (ProducerIDBlock) isRecord()     {}
func (BrokerConfigChanged) isRecord() {}

func (r TopicRecord) String() string {
	return fmt.Sprintf("TopicRecord name=%s id=%s partitions=%d rf=%d configs=%s",
		r.Name, FormatTopicID(r.ID), r.Partitions, r.ReplicationFactor, formatMap(r.Configs))
}

func (r PartitionsAdded) String() string {
	return fmt.Sprintf("PartitionsAdded id=%s count=%d", FormatTopicID(r.TopicID), r.Count)
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
	case PartitionsAdded:
		e.b = append(e.b, r.TopicID[:]...)
		e.i32(r.Count)
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
	default:
		panic(fmt.Sprintf("meta: EncodeRecord of unknown record %T", r))
	}
	return e.b
}

// DecodeRecord decodes one record. Every error wraps ErrCorrupt: an unknown
// version or type, a short or over-long input, map keys out of order.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != recordVersion {
		return nil, fmt.Errorf("%w: record version %d", ErrCorrupt, b[0])
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
		r = t
	case TypePartitionsAdded:
		r = PartitionsAdded{TopicID: d.id(), Count: d.i32()}
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
