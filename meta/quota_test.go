package meta

import (
	"errors"
	"reflect"
	"testing"
)

func TestClientQuotas(t *testing.T) {
	s, dir := openTemp(t)
	alice := QuotaEntity{QuotaUser: "alice"}
	aliceApp := QuotaEntity{QuotaUser: "alice", QuotaClientID: "app"}
	defClient := QuotaEntity{QuotaClientID: ""}
	gen0 := s.QuotaGeneration()
	errs, err := s.AlterClientQuotas([]ClientQuotaChanged{
		{Entity: alice, Key: QuotaProducerByteRate, Value: 1024},
		{Entity: aliceApp, Key: QuotaRequestPercentage, Value: 12.5},
		{Entity: defClient, Key: QuotaConsumerByteRate, Value: 2048},
		{Entity: QuotaEntity{QuotaIP: "10.0.0.1"}, Key: QuotaConnectionCreationRate, Value: 5},
		{Entity: QuotaEntity{}, Key: QuotaProducerByteRate, Value: 1},                                          // empty entity
		{Entity: QuotaEntity{"group": "g"}, Key: QuotaProducerByteRate, Value: 1},                              // unknown type
		{Entity: QuotaEntity{QuotaIP: "10.0.0.1", QuotaUser: "a"}, Key: QuotaConnectionCreationRate, Value: 1}, // ip with user
		{Entity: alice, Key: QuotaConnectionCreationRate, Value: 1},                                            // ip key for a user
		{Entity: alice, Key: "bogus", Value: 1},
		{Entity: alice, Key: QuotaProducerByteRate, Value: 0},
		{Entity: alice, Key: QuotaProducerByteRate, Value: 1.5},                          // fractional
		{Entity: QuotaEntity{QuotaIP: ""}, Key: QuotaConnectionCreationRate, Value: 3e9}, // too large for an int
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if want := i >= 4; (e != nil) != want || e != nil && !errors.Is(e, ErrInvalidQuota) {
			t.Errorf("change %d: err %v", i, e)
		}
	}
	if s.QuotaGeneration() == gen0 {
		t.Fatal("generation unchanged by a quota change")
	}
	before, _ := s.ClientQuotas()
	if len(before) != 4 {
		t.Fatalf("quotas = %+v", before)
	}
	found := false
	for _, q := range before {
		if reflect.DeepEqual(q.Entity, aliceApp) {
			found = q.Values[QuotaRequestPercentage] == 12.5
		}
	}
	if !found {
		t.Fatalf("alice/app missing in %+v", before)
	}
	s = reopen(t, s, dir)
	if got, _ := s.ClientQuotas(); !reflect.DeepEqual(got, before) {
		t.Fatalf("after reopen %+v, want %+v", got, before)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ClientQuotas(); !reflect.DeepEqual(got, before) {
		t.Fatalf("after rebuild %+v, want %+v", got, before)
	}
	// Removing a value, removing one that is not set, changing one.
	errs, err = s.AlterClientQuotas([]ClientQuotaChanged{
		{Entity: alice, Key: QuotaProducerByteRate, Remove: true},
		{Entity: alice, Key: QuotaConsumerByteRate, Remove: true},
		{Entity: defClient, Key: QuotaConsumerByteRate, Value: 4096},
	})
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("second change: %v %v", errs, err)
	}
	s = reopen(t, s, dir)
	got, _ := s.ClientQuotas()
	if len(got) != 3 {
		t.Fatalf("after removal %+v", got)
	}
	for _, q := range got {
		if reflect.DeepEqual(q.Entity, alice) {
			t.Fatalf("alice's only value was removed: %+v", q)
		}
		if reflect.DeepEqual(q.Entity, defClient) && q.Values[QuotaConsumerByteRate] != 4096 {
			t.Fatalf("default client = %+v", q)
		}
	}
}
