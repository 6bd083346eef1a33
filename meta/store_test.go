package meta

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestIDsStableAcrossReopen(t *testing.T) {
	s, dir := openTemp(t)
	seen := map[[16]byte]bool{}
	for i := range 50 {
		tp, err := s.CreateTopic(fmt.Sprintf("t%02d", i), int32(i%5+1), 1, map[string]string{"i": fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if seen[tp.ID] {
			t.Fatalf("duplicate id %x", tp.ID)
		}
		seen[tp.ID] = true
	}
	before := s.Topics()
	off := s.Offset()
	s = reopen(t, s, dir)
	if after := s.Topics(); !reflect.DeepEqual(before, after) {
		t.Fatalf("topics changed across reopen:\n%+v\n%+v", before, after)
	}
	if s.Offset() != off {
		t.Fatalf("offset %d after reopen, want %d", s.Offset(), off)
	}
	for _, tp := range before {
		if got, ok := s.TopicByID(tp.ID); !ok || got.Name != tp.Name {
			t.Fatalf("TopicByID(%x) = %+v, %v", tp.ID, got, ok)
		}
	}
	checkConsistent(t, s)
}

func TestProducerIDsNeverOverlap(t *testing.T) {
	s, dir := openTemp(t)
	type block struct{ first, n int64 }
	var blocks []block
	for round := range 4 {
		for i := range 5 {
			n := int64(1 + (round*5+i)%7*100)
			first, err := s.AllocateProducerIDs(n)
			if err != nil {
				t.Fatal(err)
			}
			blocks = append(blocks, block{first, n})
		}
		s = reopen(t, s, dir)
	}
	for i, b := range blocks {
		for j, c := range blocks[:i] {
			if b.first < c.first+c.n && c.first < b.first+b.n {
				t.Fatalf("block %d %+v overlaps block %d %+v", i, b, j, c)
			}
		}
	}
	for _, n := range []int64{0, -1, math.MaxInt64} {
		if _, err := s.AllocateProducerIDs(n); !errors.Is(err, ErrInvalidProducerIDs) {
			t.Fatalf("AllocateProducerIDs(%d) = %v", n, err)
		}
	}
	// A block that does not start at the next free id is refused.
	if _, err := s.Append(ProducerIDBlock{First: 0, Size: 1}); !errors.Is(err, ErrInvalidProducerIDs) {
		t.Fatalf("Append of an overlapping block: %v", err)
	}
	checkConsistent(t, s)
}

// churn makes a mix of every kind of change.
func churn(t testing.TB, s *Store, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range 200 {
		name := fmt.Sprintf("t%d", r.IntN(20))
		var err error
		switch r.IntN(7) {
		case 0, 1:
			_, err = s.CreateTopic(name, int32(1+r.IntN(4)), 1, map[string]string{"k": fmt.Sprint(i)})
		case 2:
			_, err = s.DeleteTopic(name)
		case 3:
			if tp, ok := s.Topic(name); ok {
				err = s.AddPartitions(name, tp.Partitions+int32(1+r.IntN(3)))
			}
		case 4:
			err = s.AlterTopicConfigs(name, map[string]string{fmt.Sprintf("c%d", r.IntN(3)): fmt.Sprint(i)}, []string{"k"})
		case 5:
			_, err = s.AllocateProducerIDs(int64(1 + r.IntN(1000)))
		case 6:
			err = s.AlterBrokerConfigs(map[string]string{fmt.Sprintf("b%d", r.IntN(3)): fmt.Sprint(i)}, []string{fmt.Sprintf("b%d", r.IntN(3)+1)})
		}
		if err != nil && !errors.Is(err, ErrTopicExists) && !errors.Is(err, ErrUnknownTopic) && !errors.Is(err, ErrInvalidConfig) {
			t.Fatal(err)
		}
	}
}

func TestRebuildEqualsStoredState(t *testing.T) {
	s, dir := openTemp(t)
	churn(t, s, 1)
	before, mem := dumpState(t, s), memState(s)
	off := s.Offset()
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(t, s); got != before {
		t.Fatalf("Rebuild changed the stored state:\nbefore:\n%s\nafter:\n%s", before, got)
	}
	if got := memState(s); got != mem {
		t.Fatalf("Rebuild changed the memory state:\nbefore:\n%s\nafter:\n%s", mem, got)
	}
	if s.Offset() != off {
		t.Fatal("Rebuild moved the offset")
	}

	// Damage the state behind the log's back: Open notices, Rebuild repairs.
	tp := s.Topics()[0]
	rawDelete(t, s, topicNameKey(tp.Name))
	rawSet(t, s, topicNameKey("ghost"), tp.ID[:])
	if _, err := loadState(s.db); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("loadState of damaged state: %v", err)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(t, s); got != before {
		t.Fatalf("Rebuild did not repair the state:\nwant:\n%s\ngot:\n%s", before, got)
	}
	s = reopen(t, s, dir)
	if got := memState(s); got != mem {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, mem)
	}
	checkConsistent(t, s)
}

func TestOpenRefusesDamagedState(t *testing.T) {
	for name, damage := range map[string]func(s *Store, id [16]byte){
		"name without topic": func(s *Store, id [16]byte) { rawDelete(t, s, topicIDKey(id)) },
		"topic without name": func(s *Store, id [16]byte) { rawDelete(t, s, topicNameKey("a")) },
		"bad topic value":    func(s *Store, id [16]byte) { rawSet(t, s, topicIDKey(id), []byte{1, 1, 2}) },
		"bad producer value": func(s *Store, id [16]byte) { rawSet(t, s, []byte(keyProducerNext), []byte{1}) },
		"bad format":         func(s *Store, id [16]byte) { rawSet(t, s, []byte(keyFormat), []byte{9}) },
		"no format":          func(s *Store, id [16]byte) { rawDelete(t, s, []byte(keyFormat)) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, testOptions(0))
			tp, err := s.CreateTopic("a", 1, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			damage(s, tp.ID)
			s.Close()
			if s, err := Open(dir, testOptions(0)); !errors.Is(err, ErrCorrupt) {
				if err == nil {
					s.Close()
				}
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestLogInOrder(t *testing.T) {
	s, dir := openTemp(t)
	a, _ := s.CreateTopic("a", 1, 1, nil)
	s.AddPartitions("a", 4)
	s.AlterTopicConfigs("a", map[string]string{"x": "1"}, []string{"y"})
	s.AllocateProducerIDs(10)
	s.AllocateProducerIDs(5)
	s.AlterBrokerConfigs(map[string]string{"b": "2"}, nil)
	s.DeleteTopic("a")
	s = reopen(t, s, dir)
	want := []Record{
		TopicRecord{Name: "a", ID: a.ID, Partitions: 1, ReplicationFactor: 1},
		PartitionsAdded{TopicID: a.ID, Count: 4},
		TopicConfigsChanged{TopicID: a.ID, Set: map[string]string{"x": "1"}, Delete: []string{"y"}},
		ProducerIDBlock{First: 0, Size: 10},
		ProducerIDBlock{First: 10, Size: 5},
		BrokerConfigChanged{Set: map[string]string{"b": "2"}},
		TopicRemoved{TopicID: a.ID},
	}
	if s.Offset() != uint64(len(want)) {
		t.Fatalf("Offset = %d", s.Offset())
	}
	got, err := s.Records(0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Records(0):\n got %v\nwant %v", got, want)
	}
	if got, _ := s.Records(5); !reflect.DeepEqual(got, want[5:]) {
		t.Fatalf("Records(5) = %v", got)
	}
	if got, err := s.Records(7); err != nil || len(got) != 0 {
		t.Fatalf("Records(7) = %v, %v", got, err)
	}
	if got, err := s.Records(100); err != nil || len(got) != 0 {
		t.Fatalf("Records(100) = %v, %v", got, err)
	}
	// Replaying the records into a fresh store gives the same state.
	s2, _ := openTemp(t)
	for i, r := range got0(t, s) {
		if off, err := s2.Append(r); err != nil || off != uint64(i) {
			t.Fatalf("Append(%v) = %d, %v", r, off, err)
		}
	}
	if memState(s2) != memState(s) || dumpState(t, s2) != dumpState(t, s) {
		t.Fatal("a store fed the same records differs")
	}
}

func got0(t *testing.T, s *Store) []Record {
	recs, err := s.Records(0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestAppendValidates(t *testing.T) {
	s, _ := openTemp(t)
	id := [16]byte{0: 9, 15: 9}
	for _, tc := range []struct {
		r    Record
		want error
	}{
		{TopicRecord{Name: "a", ID: [16]byte{}, Partitions: 1, ReplicationFactor: 1}, ErrInvalidRecord},
		{TopicRecord{Name: "a", ID: [16]byte{15: 1}, Partitions: 1, ReplicationFactor: 1}, ErrInvalidRecord},
		{TopicRecord{Name: "", ID: id, Partitions: 1, ReplicationFactor: 1}, ErrInvalidTopicName},
		{PartitionsAdded{TopicID: id, Count: 3}, ErrUnknownTopicID},
		{TopicConfigsChanged{TopicID: id}, ErrUnknownTopicID},
		{TopicRemoved{TopicID: id}, ErrUnknownTopicID},
		{ProducerIDBlock{First: 5, Size: 1}, ErrInvalidProducerIDs},
	} {
		if _, err := s.Append(tc.r); !errors.Is(err, tc.want) {
			t.Errorf("Append(%v) = %v, want %v", tc.r, err, tc.want)
		}
	}
	if _, err := s.Append(TopicRecord{Name: "a", ID: id, Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(TopicRecord{Name: "b", ID: id, Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("reused id: %v", err)
	}
	if s.Offset() != 1 {
		t.Fatalf("Offset = %d", s.Offset())
	}
}

func TestConcurrentCreate(t *testing.T) {
	s, dir := openTemp(t)
	const workers, names = 8, 40
	var wg sync.WaitGroup
	created := make([][]Topic, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				// Every worker tries every name; one wins each.
				tp, err := s.CreateTopic(fmt.Sprintf("t%03d", (i+w*7)%names), 1, 1, nil)
				if errors.Is(err, ErrTopicExists) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				created[w] = append(created[w], tp)
				s.Topics() // reads run alongside
			}
		}()
	}
	wg.Wait()
	ids := map[[16]byte]string{}
	byName := map[string]bool{}
	for _, ts := range created {
		for _, tp := range ts {
			if byName[tp.Name] {
				t.Fatalf("%s created twice", tp.Name)
			}
			byName[tp.Name] = true
			if other, dup := ids[tp.ID]; dup {
				t.Fatalf("%s and %s share id %x", tp.Name, other, tp.ID)
			}
			ids[tp.ID] = tp.Name
		}
	}
	if len(byName) != names || len(s.Topics()) != names || s.Offset() != names {
		t.Fatalf("%d created, %d listed, offset %d", len(byName), len(s.Topics()), s.Offset())
	}
	checkConsistent(t, s)
	s = reopen(t, s, dir)
	for id, name := range ids {
		if tp, ok := s.TopicByID(id); !ok || tp.Name != name {
			t.Fatalf("after reopen %s: %+v %v", name, tp, ok)
		}
	}
}

// TestCrash drops everything unsynced at random points (and, in half the
// runs, keeps a random part of it): every change that returned is still
// there, and the state still equals the log.
func TestCrash(t *testing.T) {
	for seed := range uint64(8) {
		fs := vfs.NewCrashableMem()
		opts := testOptions(seed + 1)
		opts.FS = fs
		s := mustOpen(t, "/meta", opts)
		r := rand.New(rand.NewPCG(seed, 2))
		n := 30 + r.IntN(30)
		crashAt := r.IntN(n)
		var (
			acked   []string
			crashed *vfs.MemFS
			want    string
		)
		for i := range n {
			if i == crashAt {
				crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(seed%2) * 50, RNG: rand.New(rand.NewPCG(seed, 3))})
				want = memState(s)
			}
			name := fmt.Sprintf("t%d", i)
			if _, err := s.CreateTopic(name, 1, 1, nil); err != nil {
				t.Fatal(err)
			}
			if i < crashAt {
				acked = append(acked, name)
			}
			if _, err := s.AllocateProducerIDs(10); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		opts.FS = crashed
		s = mustOpen(t, "/meta", opts)
		for _, name := range acked {
			if _, ok := s.Topic(name); !ok {
				t.Fatalf("seed %d: acknowledged topic %s lost", seed, name)
			}
		}
		if got := memState(s); got != want {
			t.Fatalf("seed %d: state after crash:\n%s\nwant:\n%s", seed, got, want)
		}
		checkConsistent(t, s)
		s.Close()
	}
}

func TestClosed(t *testing.T) {
	s := mustOpen(t, t.TempDir(), testOptions(0))
	s.CreateTopic("a", 1, 1, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.CreateTopic("b", 1, 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := s.DeleteTopic("a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, err := s.Records(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Records: %v", err)
	}
	if err := s.Rebuild(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Rebuild: %v", err)
	}
	if _, err := s.AllocateProducerIDs(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllocateProducerIDs: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{CacheSize: -1, MemTableSize: 1 << 33}
	err := o.Validate()
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Validate = %v", err)
	}
	if _, err := Open(t.TempDir(), o); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open = %v", err)
	}
}

func TestOpenCreatesMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := mustOpen(t, dir, testOptions(0))
	if _, err := s.CreateTopic("a", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	if _, ok := s.Topic("a"); !ok {
		t.Fatal("topic lost")
	}
}
