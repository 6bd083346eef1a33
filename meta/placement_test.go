package meta

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func brokersN(n int, racks int) []PlacementBroker {
	bs := make([]PlacementBroker, n)
	for i := range bs {
		bs[i].ID = int32(100 + i*3) // ids need not be dense
		if racks > 0 {
			bs[i].Rack = fmt.Sprintf("r%d", i%racks)
		}
	}
	return bs
}

func TestPlaceErrors(t *testing.T) {
	bs := brokersN(3, 0)
	if _, err := Place(bs, 0, 1, 0); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatal(err)
	}
	if _, err := Place(bs, 1, 0, 0); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatal(err)
	}
	_, err := Place(bs, 1, 4, 0)
	if !errors.Is(err, ErrInvalidReplicationFactor) || !strings.Contains(err.Error(),
		"Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 broker(s) are registered.") {
		t.Fatal(err)
	}
	if _, err := Place(nil, 1, 1, 0); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatal(err)
	}
	if _, err := Place([]PlacementBroker{{ID: 1}, {ID: 1}}, 1, 1, 0); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatal(err)
	}
	if _, err := PlaceMore(bs, -1, 1, 1, 0); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatal(err)
	}
}

// TestPlaceExample pins the unracked pattern: leaders round-robin from
// start, followers after the leader with a shift growing every n
// partitions.
func TestPlaceExample(t *testing.T) {
	bs := []PlacementBroker{{ID: 2}, {ID: 0}, {ID: 1}} // order does not matter
	got, err := Place(bs, 6, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int32{{0, 1}, {1, 2}, {2, 0}, {0, 2}, {1, 0}, {2, 1}}
	if got, _ := Place(bs, 6, 2, 1); !reflect.DeepEqual(got, [][]int32{{1, 0}, {2, 1}, {0, 2}, {1, 2}, {2, 0}, {0, 1}}) {
		t.Fatalf("start 1: %v", got)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Racked: the order alternates racks a, b: 0(a) 1(b) 2(a) 3(b).
	rbs := []PlacementBroker{{0, "a"}, {2, "a"}, {1, "b"}, {3, "b"}}
	got, _ = Place(rbs, 4, 2, 0)
	for _, l := range got {
		if rackOfID(rbs, l[0]) == rackOfID(rbs, l[1]) {
			t.Fatalf("partition %v on one rack (all: %v)", l, got)
		}
	}
	if leaders := []int32{got[0][0], got[1][0], got[2][0], got[3][0]}; !reflect.DeepEqual(leaders, []int32{0, 1, 2, 3}) {
		t.Fatalf("leaders %v", leaders)
	}
}

func rackOfID(bs []PlacementBroker, id int32) string {
	for _, b := range bs {
		if b.ID == id {
			return b.Rack
		}
	}
	panic("no broker")
}

// TestPlaceProperties checks, over random clusters: every list has rf
// distinct known brokers; leaders per broker differ by at most 1;
// replicas per broker differ by at most 1 when the partitions are a
// multiple of the brokers (and with racks, when racks are equal in size);
// each partition is on min(rf, racks) racks; the result does not depend
// on the brokers' order; and PlaceMore of partitions k.. equals the tail
// of Place (adding partitions continues the pattern).
func TestPlaceProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n := 1 + r.IntN(9)
		racks := 0
		if r.IntN(2) == 0 {
			racks = 1 + r.IntN(n)
		}
		bs := brokersN(n, racks)
		rf := int16(1 + r.IntN(n))
		parts := int32(1 + r.IntN(40))
		if r.IntN(2) == 0 {
			parts = int32(n * (1 + r.IntN(5)))
		}
		start := r.IntN(1000) - 100
		desc := fmt.Sprintf("iter %d: %d brokers, %d racks, rf %d, %d partitions, start %d", iter, n, racks, rf, parts, start)
		got, err := Place(bs, parts, rf, start)
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		if len(got) != int(parts) {
			t.Fatalf("%s: %d lists", desc, len(got))
		}
		known := func(id int32) bool {
			return slices.ContainsFunc(bs, func(b PlacementBroker) bool { return b.ID == id })
		}
		if err := ValidateAssignment(got, known); err != nil || len(got[0]) != int(rf) {
			t.Fatalf("%s: %v: %v", desc, got, err)
		}
		leaders, replicas := map[int32]int{}, map[int32]int{}
		for _, l := range got {
			leaders[l[0]]++
			for _, id := range l {
				replicas[id]++
			}
			if racks > 0 {
				rs := map[string]bool{}
				for _, id := range l {
					rs[rackOfID(bs, id)] = true
				}
				if len(rs) != min(int(rf), racks) {
					t.Fatalf("%s: partition %v on %d racks", desc, l, len(rs))
				}
			}
		}
		if lo, hi := spread(bs, leaders); hi-lo > 1 {
			t.Fatalf("%s: leaders per broker from %d to %d: %v", desc, lo, hi, got)
		}
		balancedRacks := racks == 0 || n%racks == 0
		if int(parts)%n == 0 && balancedRacks {
			if lo, hi := spread(bs, replicas); hi-lo > 1 {
				t.Fatalf("%s: replicas per broker from %d to %d: %v", desc, lo, hi, got)
			}
		}
		shuffled := slices.Clone(bs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if again, _ := Place(shuffled, parts, rf, start); !reflect.DeepEqual(again, got) {
			t.Fatalf("%s: depends on the brokers' order", desc)
		}
		if k := r.IntN(int(parts)); k > 0 {
			tail, _ := PlaceMore(bs, int32(k), parts-int32(k), rf, start)
			if !reflect.DeepEqual(tail, got[k:]) {
				t.Fatalf("%s: continuing from %d:\n got %v\nwant %v", desc, k, tail, got[k:])
			}
		}
	}
}

// spread is the least and greatest count of any broker (0 for none).
func spread(bs []PlacementBroker, counts map[int32]int) (lo, hi int) {
	lo = int(^uint(0) >> 1)
	for _, b := range bs {
		c := counts[b.ID]
		lo, hi = min(lo, c), max(hi, c)
	}
	return lo, hi
}

func TestValidateAssignment(t *testing.T) {
	known := func(id int32) bool { return id >= 0 && id < 5 }
	for _, tc := range []struct {
		a    [][]int32
		want string
	}{
		{nil, ""},
		{[][]int32{{0, 1}, {1, 2}}, ""},
		{[][]int32{{0}, {}}, "The manual partition assignment includes an empty replica list."},
		{[][]int32{{0, 7}}, "The manual partition assignment includes broker 7, but no such broker is registered."},
		{[][]int32{{3, 1, 3}}, "The manual partition assignment includes the broker 3 more than once."},
		{[][]int32{{0, 1}, {2}}, "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."},
	} {
		err := ValidateAssignment(tc.a, known)
		if tc.want == "" {
			if err != nil {
				t.Fatalf("%v: %v", tc.a, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidReplicaAssignment) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Fatalf("%v: %v, want %q", tc.a, err, tc.want)
		}
	}
}
