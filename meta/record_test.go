package meta

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleRecords() []Record {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return []Record{
		TopicRecord{Name: "orders", ID: id, Partitions: 12, ReplicationFactor: 3,
			Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "empty": ""}},
		TopicRecord{Name: "x", ID: id, Partitions: 1, ReplicationFactor: 1},
		PartitionsAdded{TopicID: id, Count: 1 << 30},
		TopicConfigsChanged{TopicID: id, Set: map[string]string{"a": "1"}, Delete: []string{"z", "b"}},
		TopicConfigsChanged{TopicID: id},
		TopicRemoved{TopicID: id},
		ProducerIDBlock{First: 1 << 40, Size: 1000},
		BrokerConfigChanged{Set: map[string]string{"log.retention.ms": "1000"}, Delete: []string{"x"}},
		BrokerConfigChanged{},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := EncodeRecord(r)
		if b[0] != recordVersion || RecordType(b[1]) != r.Type() {
			t.Fatalf("%v: header % x", r, b[:2])
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		if !bytes.Equal(EncodeRecord(got), b) {
			t.Fatalf("%v: re-encoding differs", r)
		}
	}
}

// TestRecordEncodingBytes pins the format: a change here is a format change.
func TestRecordEncodingBytes(t *testing.T) {
	id := [16]byte{15: 7}
	for _, tc := range []struct {
		r    Record
		want []byte
	}{
		{TopicRecord{Name: "ab", ID: id, Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"k": "v"}},
			[]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 3, 0, 2, 2, 'a', 'b', 1, 1, 'k', 1, 'v'}},
		{PartitionsAdded{TopicID: id, Count: 5},
			[]byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5}},
		{ProducerIDBlock{First: 1, Size: 256},
			[]byte{1, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}},
		{BrokerConfigChanged{Set: map[string]string{"b": "2", "a": "1"}, Delete: []string{"c"}},
			[]byte{1, 6, 2, 1, 'a', 1, '1', 1, 'b', 1, '2', 1, 1, 'c'}},
	} {
		if got := EncodeRecord(tc.r); !bytes.Equal(got, tc.want) {
			t.Errorf("%v:\n got % x\nwant % x", tc.r, got, tc.want)
		}
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	good := EncodeRecord(sampleRecords()[0])
	for name, b := range map[string][]byte{
		"empty":          nil,
		"one byte":       {1},
		"bad version":    append([]byte{2}, good[1:]...),
		"bad type":       {1, 99},
		"type zero":      {1, 0},
		"truncated":      good[:len(good)-1],
		"trailing":       append(bytes.Clone(good), 0),
		"short id":       {1, 4, 1, 2, 3},
		"huge string":    {1, 6, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge count":     {1, 6, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad uvarint":    {1, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"unsorted keys":  {1, 6, 2, 1, 'b', 0, 1, 'a', 0, 0},
		"duplicate keys": {1, 6, 2, 1, 'a', 0, 1, 'a', 0, 0},
	} {
		if r, err := DecodeRecord(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, %v; want ErrCorrupt", name, r, err)
		}
	}
}

// FuzzDecodeRecord: decoding never panics, and whatever decodes re-encodes
// to the same bytes (the encoding is canonical).
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(EncodeRecord(r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if got := EncodeRecord(r); !bytes.Equal(got, b) {
			t.Fatalf("not canonical: % x re-encodes as % x", b, got)
		}
	})
}
