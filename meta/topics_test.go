package meta

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a", true},
		{"Orders.v2_x-Y9", true},
		{"__consumer_offsets", true},
		{"...", true},
		{".a", true},
		{strings.Repeat("x", 249), true},
		{"", false},
		{strings.Repeat("x", 250), false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a b", false},
		{"a\x00", false},
		{"é", false},
		{"a:b", false},
	} {
		err := ValidateTopicName(tc.name)
		if tc.ok && err != nil {
			t.Errorf("%q: unexpected %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidTopicName) {
			t.Errorf("%q: got %v, want ErrInvalidTopicName", tc.name, err)
		}
	}
}

func TestCreateListDescribe(t *testing.T) {
	s, _ := openTemp(t)
	cfg := map[string]string{"cleanup.policy": "compact"}
	b, err := s.CreateTopic("b", 3, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg["cleanup.policy"] = "delete" // the store keeps its own copy
	a, err := s.CreateTopic("a", 1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "b" || b.Partitions != 3 || b.ReplicationFactor != 1 || b.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("created %+v", b)
	}
	if a.Configs == nil {
		t.Fatal("Configs is nil")
	}
	if a.ID == b.ID || a.ID == [16]byte{} || !validTopicID(a.ID) {
		t.Fatalf("ids %x %x", a.ID, b.ID)
	}
	if a.ID[6]>>4 != 4 || a.ID[8]>>6 != 2 {
		t.Fatalf("id %x is not a version-4 UUID", a.ID)
	}
	got, ok := s.Topic("b")
	if !ok || !reflect.DeepEqual(got, b) {
		t.Fatalf("Topic(b) = %+v, %v; want %+v", got, ok, b)
	}
	got.Configs["x"] = "y" // results are copies
	if got, ok := s.TopicByID(b.ID); !ok || !reflect.DeepEqual(got, b) {
		t.Fatalf("TopicByID = %+v, %v", got, ok)
	}
	if _, ok := s.Topic("c"); ok {
		t.Fatal("Topic(c) found")
	}
	if _, ok := s.TopicByID([16]byte{1}); ok {
		t.Fatal("TopicByID(unknown) found")
	}
	list := s.Topics()
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("Topics = %+v", list)
	}
	if _, err := s.CreateTopic("a", 1, 1, nil); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	for _, tc := range []struct {
		name string
		p    int32
		rf   int16
		cfg  map[string]string
		want error
	}{
		{"a b", 1, 1, nil, ErrInvalidTopicName},
		{"c", 0, 1, nil, ErrInvalidPartitions},
		{"c", -1, 1, nil, ErrInvalidPartitions},
		{"c", 1, 0, nil, ErrInvalidReplicationFactor},
		{"c", 1, 1, map[string]string{"": "x"}, ErrInvalidConfig},
	} {
		if _, err := s.CreateTopic(tc.name, tc.p, tc.rf, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("CreateTopic(%q, %d, %d, %v) = %v, want %v", tc.name, tc.p, tc.rf, tc.cfg, err, tc.want)
		}
	}
	if s.Offset() != 2 {
		t.Fatalf("Offset = %d; failed creates must not reach the log", s.Offset())
	}
	checkConsistent(t, s)
}

func TestTopicNameCollision(t *testing.T) {
	s, _ := openTemp(t)
	if _, err := s.CreateTopic("a.b", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if other, ok := s.TopicNameCollision("a_b"); !ok || other != "a.b" {
		t.Fatalf("TopicNameCollision(a_b) = %q, %v", other, ok)
	}
	if _, ok := s.TopicNameCollision("a.b"); ok {
		t.Fatal("a topic does not collide with itself")
	}
	if _, ok := s.TopicNameCollision("a-b"); ok {
		t.Fatal("a-b does not collide with a.b")
	}
	for _, n := range []string{"a_b", "a_b"} {
		if _, err := s.CreateTopic(n, 1, 1, nil); !errors.Is(err, ErrTopicCollision) {
			t.Fatalf("CreateTopic(%s) = %v, want ErrTopicCollision", n, err)
		}
	}
	if _, err := s.CreateTopic("a-b", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	// Once a.b is gone, a_b is free.
	if _, err := s.DeleteTopic("a.b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic("a_b", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic("a.b", 1, 1, nil); !errors.Is(err, ErrTopicCollision) {
		t.Fatalf("a.b after a_b: %v", err)
	}
	checkConsistent(t, s)
}

func TestDeleteAndRecreate(t *testing.T) {
	s, _ := openTemp(t)
	a1, _ := s.CreateTopic("a", 2, 1, nil)
	b1, _ := s.CreateTopic("b", 2, 1, nil)
	del, err := s.DeleteTopic("a")
	if err != nil || !reflect.DeepEqual(del, a1) {
		t.Fatalf("DeleteTopic = %+v, %v", del, err)
	}
	if _, ok := s.Topic("a"); ok {
		t.Fatal("a still there")
	}
	if _, ok := s.TopicByID(a1.ID); ok {
		t.Fatal("a's id still there")
	}
	if _, err := s.DeleteTopic("a"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}
	if del, err := s.DeleteTopicByID(b1.ID); err != nil || del.Name != "b" {
		t.Fatalf("DeleteTopicByID = %+v, %v", del, err)
	}
	if _, err := s.DeleteTopicByID(b1.ID); !errors.Is(err, ErrUnknownTopicID) {
		t.Fatalf("second delete by id: %v", err)
	}
	a2, err := s.CreateTopic("a", 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := s.CreateTopic("b", 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a2.ID == a1.ID || b2.ID == b1.ID {
		t.Fatal("a recreated topic reused its old id")
	}
	if len(s.Topics()) != 2 {
		t.Fatalf("Topics = %+v", s.Topics())
	}
	checkConsistent(t, s)
}

func TestAddPartitions(t *testing.T) {
	s, _ := openTemp(t)
	s.CreateTopic("a", 3, 1, nil)
	for _, n := range []int32{3, 2, 0, -5} {
		if err := s.AddPartitions("a", n); !errors.Is(err, ErrInvalidPartitions) {
			t.Fatalf("AddPartitions(%d) = %v", n, err)
		}
	}
	if err := s.AddPartitions("a", 7); err != nil {
		t.Fatal(err)
	}
	if tp, _ := s.Topic("a"); tp.Partitions != 7 {
		t.Fatalf("partitions %d", tp.Partitions)
	}
	if err := s.AddPartitions("nope", 9); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown: %v", err)
	}
	checkConsistent(t, s)
}

func TestTopicConfigs(t *testing.T) {
	s, _ := openTemp(t)
	s.CreateTopic("a", 1, 1, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"})
	cfg := func() map[string]string { tp, _ := s.Topic("a"); return tp.Configs }
	if err := s.AlterTopicConfigs("a", map[string]string{"segment.ms": "60000", "retention.ms": "2000"},
		[]string{"cleanup.policy", "absent.key"}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"segment.ms": "60000", "retention.ms": "2000"}; !maps.Equal(cfg(), want) {
		t.Fatalf("after alter: %v", cfg())
	}
	if err := s.AlterTopicConfigs("a", map[string]string{"x": "1"}, []string{"x"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("set and delete the same key: %v", err)
	}
	if err := s.AlterTopicConfigs("nope", nil, nil); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown: %v", err)
	}
	if err := s.SetTopicConfigs("a", map[string]string{"max.message.bytes": "10"}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"max.message.bytes": "10"}; !maps.Equal(cfg(), want) {
		t.Fatalf("after set: %v", cfg())
	}
	if err := s.SetTopicConfigs("a", nil); err != nil {
		t.Fatal(err)
	}
	if len(cfg()) != 0 {
		t.Fatalf("after set nil: %v", cfg())
	}
	checkConsistent(t, s)
}

func TestBrokerConfigs(t *testing.T) {
	s, dir := openTemp(t)
	if len(s.BrokerConfigs()) != 0 {
		t.Fatal("fresh store has broker configs")
	}
	if err := s.AlterBrokerConfigs(map[string]string{"log.retention.ms": "1", "num.partitions": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterBrokerConfigs(map[string]string{"log.retention.ms": "2"}, []string{"num.partitions"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterBrokerConfigs(nil, []string{""}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
	want := map[string]string{"log.retention.ms": "2"}
	got := s.BrokerConfigs()
	got["mutate"] = "copy"
	if got := s.BrokerConfigs(); !maps.Equal(got, want) {
		t.Fatalf("BrokerConfigs = %v", got)
	}
	s = reopen(t, s, dir)
	if got := s.BrokerConfigs(); !maps.Equal(got, want) {
		t.Fatalf("after reopen: %v", got)
	}
	checkConsistent(t, s)
}
