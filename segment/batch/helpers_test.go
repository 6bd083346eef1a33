package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// allCodecs lists every Kafka codec.
var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// sampleRecords covers the record shapes that matter: keys, null keys, null
// and empty values, headers with null and empty values, negative timestamp
// deltas and non-zero record attributes.
func sampleRecords(base int64) []Record {
	return []Record{
		{Timestamp: base, Key: []byte("k0"), Value: []byte("value zero")},
		{Timestamp: base + 5, Key: nil, Value: []byte("null key")},
		{Timestamp: base - 3, Key: []byte("k2"), Value: nil},
		{Timestamp: base + 1000, Key: []byte{}, Value: []byte{}},
		{Timestamp: base + 7, Key: []byte("k4"), Value: bytes.Repeat([]byte("abc"), 100),
			Headers: []RecordHeader{
				{Key: "h1", Value: []byte("v1")},
				{Key: "null", Value: nil},
				{Key: "empty", Value: []byte{}},
				{Key: "", Value: []byte("empty key")},
			}},
		{Timestamp: base + 1<<40, Attributes: 3, Key: bytes.Repeat([]byte{0xfe}, 300), Value: []byte("big delta")},
	}
}

// randomRecords returns n records, each about size bytes of key and value.
func randomRecords(rng *rand.Rand, n, size int, base int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		val := make([]byte, size-8)
		for j := range val {
			val[j] = byte('a' + rng.IntN(8)) // compressible, not trivially
		}
		recs[i] = Record{
			Timestamp: base + int64(i),
			Key:       fmt.Appendf(nil, "key%05d", i),
			Value:     val,
		}
	}
	return recs
}

// fixup rewrites b's batchLength to match len(b) and recomputes its CRC, so
// that a test mutation reaches the checks after the CRC.
func fixup(b []byte) []byte {
	binary.BigEndian.PutUint32(b[OffLength:], uint32(len(b)-LengthOverhead))
	binary.BigEndian.PutUint32(b[OffCRC:], Checksum(b))
	return b
}

// assemble wraps a hand-made records section in a header with the given
// recordCount and lastOffsetDelta and a correct length and CRC.
func assemble(codec Codec, count, lastDelta int32, records []byte) []byte {
	b := append(Build(NewBuildOptions(), nil), records...)
	binary.BigEndian.PutUint16(b[OffAttributes:], uint16(codec))
	binary.BigEndian.PutUint32(b[OffRecordCount:], uint32(count))
	binary.BigEndian.PutUint32(b[OffLastOffsetDelta:], uint32(lastDelta))
	return fixup(b)
}

// rawRecords encodes records with the given offset deltas (timestamps
// relative to 0), bypassing Build's delta = index rule.
func rawRecords(deltas ...int32) []byte {
	var out []byte
	for _, d := range deltas {
		out = appendRecord(out, &Record{Key: []byte("k"), Value: []byte("value")}, d, 0)
	}
	return out
}

// rawRecordBytes builds one record from hand-written body bytes, prefixed with
// the length varint of the body (or of bodyLen when it is not -1).
func rawRecordBytes(bodyLen int32, body ...byte) []byte {
	if bodyLen == -1 {
		bodyLen = int32(len(body))
	}
	return append(appendVarint(nil, bodyLen), body...)
}

func varintBytes(vs ...int32) []byte {
	var out []byte
	for _, v := range vs {
		out = appendVarint(out, v)
	}
	return out
}

// equalRecords compares decoded records with the records given to Build,
// null and empty kept distinct.
func equalRecords(t *testing.T, h Header, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		ts := w.Timestamp
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		if g.Offset != h.BaseOffset+int64(i) || g.Timestamp != ts || g.Attributes != w.Attributes {
			t.Errorf("record %d: offset %d ts %d attrs %d, want %d %d %d", i, g.Offset, g.Timestamp, g.Attributes, h.BaseOffset+int64(i), ts, w.Attributes)
		}
		sameBytes(t, fmt.Sprintf("record %d key", i), g.Key, w.Key)
		sameBytes(t, fmt.Sprintf("record %d value", i), g.Value, w.Value)
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key {
				t.Errorf("record %d header %d key %q, want %q", i, j, g.Headers[j].Key, w.Headers[j].Key)
			}
			sameBytes(t, fmt.Sprintf("record %d header %d value", i, j), g.Headers[j].Value, w.Headers[j].Value)
		}
	}
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Errorf("%s = %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}
