package meta

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
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
		TopicRecord{Name: "r", ID: id, Partitions: 2, ReplicationFactor: 3,
			Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}}},
		PartitionsAdded{TopicID: id, Count: 4, Assignments: [][]int32{{3, 1, 2}, {1, 2, 3}}},
		BrokerRegistered{NodeID: 7, IncarnationID: [16]byte{9: 9}, Rack: "eu-1a", Epoch: 1 << 33,
			Listeners: []Endpoint{{Name: "PLAINTEXT", Host: "b7.example", Port: 9092}, {Name: "CONTROLLER", Host: "", Port: 0}}},
		BrokerRegistered{},
		BrokerFenced{NodeID: 7, Epoch: 12, Fenced: true},
		BrokerFenced{NodeID: 0, Epoch: 0},
		PartitionChanged{TopicID: id, Partition: 3, Leader: 2, LeaderEpoch: 5, ISR: []int32{2, 1}},
		PartitionChanged{TopicID: id, Partition: 0, Leader: -1, LeaderEpoch: 0},
		PartitionReassigned{TopicID: id, Partition: 2, Replicas: []int32{4, 5, 1, 2}, Adding: []int32{4, 5}, Removing: []int32{1, 2}},
		PartitionReassigned{TopicID: id, Partition: 0, Replicas: []int32{3}},
		BrokerDecommissioning{NodeID: 7, Decommissioning: true},
		BrokerDecommissioning{NodeID: 0},
		BrokerUnregistered{NodeID: 1 << 20},
		NodeConfigChanged{NodeID: 3, Set: map[string]string{"log.retention.ms": "1", "a": ""}, Delete: []string{"z"}},
		NodeConfigChanged{},
		TopicAdopted{TopicID: [16]byte{1}, NodeID: 2},
		ScramCredentialChanged{User: "alice", Mechanism: ScramSHA512, Iterations: 8192, Salt: []byte("salt"), StoredKey: []byte{1, 2}, ServerKey: []byte{3}},
		ScramCredentialChanged{User: "bob", Mechanism: ScramSHA256, Delete: true},
		ACLChanged{ID: [16]byte{1, 2}, Binding: ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "t", PatternType: ACLPatternPrefixed,
			Principal: "User:a", Host: "*", Operation: ACLOpRead, Permission: ACLPermAllow}},
		ACLChanged{ID: [16]byte{3}, Delete: true},
		ClientQuotaChanged{Entity: QuotaEntity{QuotaUser: "alice", QuotaClientID: ""}, Key: QuotaProducerByteRate, Value: 1024},
		ClientQuotaChanged{Entity: QuotaEntity{QuotaIP: "10.0.0.1"}, Key: QuotaConnectionCreationRate, Remove: true},
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
	idb := id[:]
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		r    Record
		want []byte
	}{
		{TopicRecord{Name: "ab", ID: id, Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"k": "v"}},
			cat([]byte{2, 1}, idb, []byte{0, 0, 0, 3, 0, 2, 2, 'a', 'b', 1, 1, 'k', 1, 'v', 0})},
		{TopicRecord{Name: "ab", ID: id, Partitions: 1, ReplicationFactor: 2, Assignments: [][]int32{{1, 2}}},
			cat([]byte{2, 1}, idb, []byte{0, 0, 0, 1, 0, 2, 2, 'a', 'b', 0, 1, 2, 0, 0, 0, 1, 0, 0, 0, 2})},
		{PartitionsAdded{TopicID: id, Count: 5},
			cat([]byte{2, 2}, idb, []byte{0, 0, 0, 5, 0})},
		{PartitionsAdded{TopicID: id, Count: 5, Assignments: [][]int32{{3}}},
			cat([]byte{2, 2}, idb, []byte{0, 0, 0, 5, 1, 1, 0, 0, 0, 3})},
		{ProducerIDBlock{First: 1, Size: 256},
			[]byte{2, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}},
		{BrokerConfigChanged{Set: map[string]string{"b": "2", "a": "1"}, Delete: []string{"c"}},
			[]byte{2, 6, 2, 1, 'a', 1, '1', 1, 'b', 1, '2', 1, 1, 'c'}},
		{BrokerRegistered{NodeID: 3, IncarnationID: id, Rack: "r", Epoch: 9, Listeners: []Endpoint{{Name: "P", Host: "h", Port: 9092}}},
			cat([]byte{2, 7, 0, 0, 0, 3}, idb, []byte{0, 0, 0, 0, 0, 0, 0, 9, 1, 'r', 1, 1, 'P', 1, 'h', 0, 0, 0x23, 0x84})},
		{BrokerFenced{NodeID: 3, Epoch: 9, Fenced: true},
			[]byte{2, 8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 1}},
		{PartitionChanged{TopicID: id, Partition: 1, Leader: 2, LeaderEpoch: 4, ISR: []int32{2, 3}},
			cat([]byte{2, 9}, idb, []byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 4, 2, 0, 0, 0, 2, 0, 0, 0, 3})},
		{PartitionReassigned{TopicID: id, Partition: 1, Replicas: []int32{4, 2}, Adding: []int32{4}, Removing: []int32{2}},
			cat([]byte{2, 10}, idb, []byte{0, 0, 0, 1, 2, 0, 0, 0, 4, 0, 0, 0, 2, 1, 0, 0, 0, 4, 1, 0, 0, 0, 2})},
		{PartitionReassigned{TopicID: id, Partition: 0, Replicas: []int32{3}},
			cat([]byte{2, 10}, idb, []byte{0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0})},
		{BrokerDecommissioning{NodeID: 3, Decommissioning: true}, []byte{2, 11, 0, 0, 0, 3, 1}},
		{BrokerUnregistered{NodeID: 3}, []byte{2, 12, 0, 0, 0, 3}},
		{NodeConfigChanged{NodeID: 3, Set: map[string]string{"a": "1"}, Delete: []string{"c"}},
			[]byte{2, 13, 0, 0, 0, 3, 1, 1, 'a', 1, '1', 1, 1, 'c'}},
	} {
		if got := EncodeRecord(tc.r); !bytes.Equal(got, tc.want) {
			t.Errorf("%v:\n got % x\nwant % x", tc.r, got, tc.want)
		}
	}
}

// TestDecodeVersion1 decodes the version 1 layout that older data
// directories hold: no assignments, types 1 to 6 only.
func TestDecodeVersion1(t *testing.T) {
	id := [16]byte{15: 7}
	for _, tc := range []struct {
		b    []byte
		want Record
	}{
		{[]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 3, 0, 2, 2, 'a', 'b', 1, 1, 'k', 1, 'v'},
			TopicRecord{Name: "ab", ID: id, Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"k": "v"}}},
		{[]byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5}, PartitionsAdded{TopicID: id, Count: 5}},
		{[]byte{1, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}, ProducerIDBlock{First: 1, Size: 256}},
		{[]byte{1, 6, 2, 1, 'a', 1, '1', 1, 'b', 1, '2', 1, 1, 'c'},
			BrokerConfigChanged{Set: map[string]string{"b": "2", "a": "1"}, Delete: []string{"c"}}},
	} {
		got, err := DecodeRecord(tc.b)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("% x: got %#v, %v; want %#v", tc.b, got, err, tc.want)
		}
		if again, err := DecodeRecord(EncodeRecord(got)); err != nil || !reflect.DeepEqual(again, tc.want) {
			t.Fatalf("% x re-encoded as version 2: %v, %v", tc.b, again, err)
		}
	}
	// A version 1 record with assignments' bytes has trailing bytes.
	if _, err := DecodeRecord([]byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 1 with a trailing byte: %v", err)
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	good := EncodeRecord(sampleRecords()[0])
	for name, b := range map[string][]byte{
		"empty":                  nil,
		"one byte":               {1},
		"bad version":            append([]byte{3}, good[1:]...),
		"version zero":           append([]byte{0}, good[1:]...),
		"v1 broker":              {1, 7, 0, 0, 0, 3},
		"v1 fence":               {1, 8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 1},
		"v1 partition":           {1, 9},
		"v1 reassigned":          {1, 10},
		"v1 decommission":        {1, 11, 0, 0, 0, 3, 1},
		"v1 unregister":          {1, 12, 0, 0, 0, 3},
		"v1 node config":         {1, 13, 0, 0, 0, 3, 0, 0},
		"type 14":                {2, 14},
		"bad decommission bool":  {2, 11, 0, 0, 0, 3, 2},
		"short unregister":       {2, 12, 0, 0, 3},
		"reassigned no removing": append(append([]byte{2, 10}, make([]byte, 20)...), 1, 0, 0, 0, 3, 0),
		"node config unsorted":   {2, 13, 0, 0, 0, 3, 2, 1, 'b', 0, 1, 'a', 0, 0},
		"bad bool":               {2, 8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 2},
		"short fence":            {2, 8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9},
		"huge isr":               append(append([]byte{2, 9}, make([]byte, 28)...), 0xff, 0x0f),
		"short isr":              append(append([]byte{2, 9}, make([]byte, 28)...), 2, 0, 0, 0, 1),
		"huge listeners":         append(append([]byte{2, 7}, make([]byte, 29)...), 0xff, 0x0f),
		"huge lists":             {2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5, 0xff, 0x0f},
		"v2 no lists":            {2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5},
		"bad type":               {1, 99},
		"type zero":              {1, 0},
		"truncated":              good[:len(good)-1],
		"trailing":               append(bytes.Clone(good), 0),
		"short id":               {1, 4, 1, 2, 3},
		"huge string":            {1, 6, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge count":             {1, 6, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad uvarint":            {1, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"unsorted keys":          {1, 6, 2, 1, 'b', 0, 1, 'a', 0, 0},
		"duplicate keys":         {1, 6, 2, 1, 'a', 0, 1, 'a', 0, 0},
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
	f.Add([]byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		got := EncodeRecord(r)
		if b[0] == recordVersion1 {
			// Version 1 re-encodes as version 2, which decodes the same.
			if again, err := DecodeRecord(got); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("version 1 % x re-encoded as % x decodes as %v, %v", b, got, again, err)
			}
			return
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("not canonical: % x re-encodes as % x", b, got)
		}
	})
}

func TestRecordString(t *testing.T) {
	id := [16]byte{15: 7}
	for _, tc := range []struct {
		r    Record
		want string
	}{
		{PartitionReassigned{TopicID: id, Partition: 1, Replicas: []int32{4, 2}, Adding: []int32{4}, Removing: []int32{2}},
			"PartitionReassigned id=AAAAAAAAAAAAAAAAAAAABw partition=1 replicas=[4 2] adding=[4] removing=[2]"},
		{PartitionReassigned{TopicID: id, Replicas: []int32{3}},
			"PartitionReassigned id=AAAAAAAAAAAAAAAAAAAABw partition=0 replicas=[3] adding=[] removing=[]"},
		{BrokerDecommissioning{NodeID: 3, Decommissioning: true}, "BrokerDecommissioning node=3 decommissioning=true"},
		{BrokerUnregistered{NodeID: 3}, "BrokerUnregistered node=3"},
		{NodeConfigChanged{NodeID: 3, Set: map[string]string{"b": "2", "a": "1"}, Delete: []string{"c"}},
			"NodeConfigChanged node=3 set={a=1,b=2} delete=[c]"},
		{TopicAdopted{TopicID: [16]byte{1}, NodeID: 2}, "TopicAdopted id=" + FormatTopicID([16]byte{1}) + " node=2"},
		{ScramCredentialChanged{User: "a", Mechanism: ScramSHA256, Iterations: 4096, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k")},
			`ScramCredentialChanged user="a" mechanism=SCRAM-SHA-256 iterations=4096`},
		{ScramCredentialChanged{User: "a", Mechanism: ScramSHA512, Delete: true}, `ScramCredentialChanged user="a" mechanism=SCRAM-SHA-512 delete`},
		{ACLChanged{ID: [16]byte{3}, Delete: true}, "ACLChanged id=" + FormatTopicID([16]byte{3}) + " delete"},
		{ACLChanged{ID: [16]byte{3}, Binding: ACLBinding{ResourceType: ACLResourceTopic, ResourceName: "t", PatternType: ACLPatternLiteral,
			Principal: "User:a", Host: "*", Operation: ACLOpRead, Permission: ACLPermAllow}},
			"ACLChanged id=" + FormatTopicID([16]byte{3}) + ` resource=2:3:"t" principal="User:a" host="*" operation=3 permission=3`},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if got := tc.r.Type().String(); !strings.HasPrefix(tc.want, got+" ") {
			t.Errorf("%v: type %s", tc.r, got)
		}
	}
	if got := RecordType(18).String(); got != "RecordType(18)" {
		t.Errorf("unknown type: %s", got)
	}
}
