package meta

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestPlanBrokerDecommissionAndUnregister(t *testing.T) {
	type step struct {
		rec Record
		err error
	}
	st := newState()
	for i, s := range []step{
		{BrokerDecommissioning{NodeID: 1, Decommissioning: true}, ErrUnknownBroker},
		{BrokerUnregistered{NodeID: 1}, ErrUnknownBroker},
		{BrokerRegistered{NodeID: 1, Epoch: 3}, nil},
		{BrokerDecommissioning{NodeID: 1, Decommissioning: true}, nil},
		{BrokerDecommissioning{NodeID: 1, Decommissioning: true}, nil}, // again: no change, applies
		{BrokerFenced{NodeID: 1, Epoch: 3, Fenced: false}, nil},
		{BrokerRegistered{NodeID: 1, Epoch: 5, Rack: "b"}, nil}, // keeps the flag, fenced again
		{BrokerFenced{NodeID: 1, Epoch: 3, Fenced: false}, ErrStaleBrokerEpoch},
		{BrokerUnregistered{NodeID: 1}, nil},
		{BrokerUnregistered{NodeID: 1}, ErrUnknownBroker},
		{BrokerFenced{NodeID: 1, Epoch: 5}, ErrUnknownBroker},
		{BrokerRegistered{NodeID: 1, Epoch: 7}, nil}, // the flag went with the registration
	} {
		before := describeState(st)
		d, err := st.plan(s.rec)
		if !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
			t.Fatalf("step %d %v: %v, want %v", i, s.rec, err, s.err)
		}
		if describeState(st) != before {
			t.Fatalf("step %d: plan changed the state", i)
		}
		if err != nil {
			continue
		}
		old := st.brokers[1]
		var oldCopy Broker
		if old != nil {
			oldCopy = old.clone()
		}
		st.apply(d)
		if old != nil && !reflect.DeepEqual(*old, oldCopy) {
			t.Fatalf("step %d: the broker value was modified in place", i)
		}
		b := st.brokers[1]
		switch i {
		case 3, 4, 5:
			if !b.Decommissioning || b.Epoch != 3 || b.Fenced != (i < 5) {
				t.Fatalf("step %d: %+v", i, b)
			}
		case 6:
			if !b.Decommissioning || !b.Fenced || b.Epoch != 5 || b.Rack != "b" {
				t.Fatalf("re-registered: %+v", b)
			}
		case 8:
			if b != nil {
				t.Fatalf("unregistered, still %+v", b)
			}
		case 11:
			if b.Decommissioning {
				t.Fatalf("registered after unregistering: %+v", b)
			}
		}
	}
}

func TestDecommissionAndUnregisterBroker(t *testing.T) {
	s, dir := openTemp(t)
	e1 := mustRegister(t, s, 1, "a")
	mustRegister(t, s, 2, "a")
	if err := s.DecommissionBroker(3, true); !errors.Is(err, ErrUnknownBroker) {
		t.Fatal(err)
	}
	if err := s.UnregisterBroker(3); !errors.Is(err, ErrUnknownBroker) {
		t.Fatal(err)
	}
	if err := s.FenceBroker(1, e1, false); err != nil {
		t.Fatal(err)
	}
	if err := s.DecommissionBroker(1, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Broker(1); !b.Decommissioning || b.Fenced {
		t.Fatalf("decommissioned %+v", b)
	}
	if err := s.AlterNodeConfigs(2, map[string]string{"k": "v"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.UnregisterBroker(2); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Broker(2); ok || len(s.Brokers()) != 1 {
		t.Fatalf("unregistered broker 2 still listed: %+v", s.Brokers())
	}
	if got := s.NodeConfigs(2); got["k"] != "v" {
		t.Fatalf("unregistering dropped the node configs: %v", got)
	}
	if strings.Contains(dumpState(t, s), string(brokerKey(2))) {
		t.Fatal("broker 2's key is left")
	}
	checkConsistent(t, s)
	want := memState(s)
	s = reopen(t, s, dir)
	if got := memState(s); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	rebuildUnchanged(t, s)
	// The flag survives a re-registration; it can be cleared.
	mustRegister(t, s, 1, "b")
	if b, _ := s.Broker(1); !b.Decommissioning || !b.Fenced || b.Rack != "b" {
		t.Fatalf("re-registered %+v", b)
	}
	if err := s.DecommissionBroker(1, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Broker(1); b.Decommissioning {
		t.Fatalf("cleared %+v", b)
	}
	rebuildUnchanged(t, s)
}

// TestBrokerValueFlags: the broker/ value's flags byte is a bit field;
// values written before it was (0 or 1) decode as before.
func TestBrokerValueFlags(t *testing.T) {
	reg := BrokerRegistered{NodeID: 4, Epoch: 2, Listeners: listeners(9092)}
	rec := EncodeRecord(reg)
	for _, tc := range []struct {
		flags                  byte
		fenced, decommissioned bool
	}{{0, false, false}, {1, true, false}, {2, false, true}, {3, true, true}} {
		v := append([]byte{1, tc.flags}, rec...)
		b, err := decodeBroker(v)
		if err != nil || b.Fenced != tc.fenced || b.Decommissioning != tc.decommissioned || b.NodeID != 4 {
			t.Fatalf("flags %d: %+v, %v", tc.flags, b, err)
		}
		if got := encodeBroker(b); !reflect.DeepEqual(got, v) {
			t.Fatalf("flags %d re-encode as % x", tc.flags, got[:2])
		}
	}
	for _, flags := range []byte{4, 5, 0x80, 0xff} {
		if _, err := decodeBroker(append([]byte{1, flags}, rec...)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flags %#x: %v", flags, err)
		}
	}
}

func TestNodeConfigs(t *testing.T) {
	s, dir := openTemp(t)
	if got := s.NodeConfigs(1); got == nil || len(got) != 0 {
		t.Fatalf("no configs: %#v", got)
	}
	set := map[string]string{"log.retention.ms": "5", "num.io.threads": "4"}
	if err := s.AlterNodeConfigs(1, set, nil); err != nil { // not registered: allowed
		t.Fatal(err)
	}
	set["x"] = "y" // the store keeps its own copy
	if err := s.AlterNodeConfigs(7, map[string]string{"a": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	got := s.NodeConfigs(1)
	if want := map[string]string{"log.retention.ms": "5", "num.io.threads": "4"}; !maps.Equal(got, want) {
		t.Fatalf("NodeConfigs(1) = %v", got)
	}
	got["z"] = "1" // a copy
	if _, ok := s.NodeConfigs(1)["z"]; ok {
		t.Fatal("NodeConfigs aliases the state")
	}
	if len(s.BrokerConfigs()) != 0 {
		t.Fatal("per-broker configs leaked into the cluster default")
	}
	for _, tc := range []struct {
		id   int32
		set  map[string]string
		del  []string
		want error
	}{
		{-1, map[string]string{"a": "1"}, nil, ErrInvalidBroker},
		{1, map[string]string{"": "1"}, nil, ErrInvalidConfig},
		{1, nil, []string{""}, ErrInvalidConfig},
		{1, map[string]string{"a": "1"}, []string{"a"}, ErrInvalidConfig},
	} {
		if err := s.AlterNodeConfigs(tc.id, tc.set, tc.del); !errors.Is(err, tc.want) {
			t.Fatalf("AlterNodeConfigs(%d, %v, %v) = %v, want %v", tc.id, tc.set, tc.del, err, tc.want)
		}
	}
	if err := s.AlterNodeConfigs(1, map[string]string{"num.io.threads": "8"}, []string{"log.retention.ms", "absent"}); err != nil {
		t.Fatal(err)
	}
	if got := s.NodeConfigs(1); !maps.Equal(got, map[string]string{"num.io.threads": "8"}) {
		t.Fatalf("after the change: %v", got)
	}
	checkConsistent(t, s)
	want := memState(s)
	s = reopen(t, s, dir)
	if got := memState(s); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	rebuildUnchanged(t, s)
	// Deleting the last key removes the node's key (canonical: absent).
	if err := s.AlterNodeConfigs(7, nil, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dumpState(t, s), string(nodeConfigsKey(7))) {
		t.Fatalf("empty node configs stored:\n%s", dumpState(t, s))
	}
	if got := s.NodeConfigs(7); got == nil || len(got) != 0 {
		t.Fatalf("NodeConfigs(7) = %#v", got)
	}
	rebuildUnchanged(t, s)
	// A stored empty map or a bad key is corrupt.
	for name, kv := range map[string][2][]byte{
		"empty map": {nodeConfigsKey(3), encodeConfigs(nil)},
		"bad key":   {[]byte(keyNodeConfigs + "x"), encodeConfigs(map[string]string{"a": "1"})},
		"negative":  {nodeConfigsKey(-2), encodeConfigs(map[string]string{"a": "1"})},
		"bad value": {nodeConfigsKey(3), {2, 0}},
	} {
		rawSet(t, s, kv[0], kv[1])
		if _, err := loadState(s.db); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v", name, err)
		}
		rawDelete(t, s, kv[0])
	}
}
