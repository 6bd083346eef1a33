package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fmtRecord prints a __consumer_offsets record for scenarios, decoding it
// with the coordinator's decoders and failing t unless re-encoding the
// decoded value gives the record's bytes (a round trip).
func (h *cgHarness) fmtRecord(t testing.TB, r Record) string {
	t.Helper()
	v := keyVersion(r.Key)
	if v < firstConsumerKeyV {
		switch {
		case v == keyGroupMetadata && r.Value == nil:
			return "group-metadata tombstone"
		case v == keyGroupMetadata:
			return "group-metadata"
		case r.Value == nil:
			return "offset tombstone"
		}
		return "offset"
	}
	kv, group, member, err := decodeConsumerKey(r.Key)
	if err != nil {
		t.Fatalf("key %x: %v", r.Key, err)
	}
	if !bytes.Equal(consumerKey(kv, group, member), r.Key) {
		t.Fatalf("key %x does not round trip", r.Key)
	}
	roundTrip := func(enc []byte) {
		t.Helper()
		if !bytes.Equal(enc, r.Value) {
			t.Fatalf("key version %d value %x re-encodes as %x", kv, r.Value, enc)
		}
	}
	name := map[int16]string{keyConsumerGroupMetadata: "consumer-group-metadata", keyConsumerMember: "member",
		keyConsumerTargetMetadata: "target-metadata", keyConsumerTargetMember: "target", keyConsumerCurrentAssignment: "current"}[kv]
	if name == "" {
		t.Fatalf("unexpected key version %d", kv)
	}
	if member != "" {
		name += " " + member
	}
	if r.Value == nil {
		return name + " tombstone"
	}
	switch kv {
	case keyConsumerGroupMetadata, keyConsumerTargetMetadata:
		epoch, err := decodeConsumerEpochValue(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(consumerEpochValue(0, epoch))
		return fmt.Sprintf("%s epoch=%d", name, epoch)
	case keyConsumerMember:
		m, err := decodeConsumerMemberValue(member, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(consumerMemberValue(m))
		sub := strings.Join(m.topics, ",")
		if m.regex != nil {
			sub += " regex=" + *m.regex
		}
		if m.instanceID != nil {
			sub += " instance=" + *m.instanceID
		}
		return fmt.Sprintf("%s topics=%s", name, sub)
	case keyConsumerTargetMember:
		a, err := decodeConsumerTargetValue(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(consumerTargetValue(a))
		return fmt.Sprintf("%s %s", name, h.fmtAssignment(a))
	default:
		m := &consumerMember{}
		if err := decodeConsumerCurrentValue(m, r.Value); err != nil {
			t.Fatal(err)
		}
		roundTrip(consumerCurrentValue(m))
		out := fmt.Sprintf("%s epoch=%d prev=%d %s assigned=%s", name, m.epoch, m.prevEpoch, m.state, h.fmtAssignment(m.assigned))
		if len(m.pendingRevocation) > 0 {
			out += " revoking=" + h.fmtAssignment(m.pendingRevocation)
		}
		return out
	}
}

// consumerState prints the persisted state of c's consumer groups: what a
// replay must bring back.
func consumerState(c *Coordinator) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range sortedKeys(c.shards) {
		s := c.shards[p]
		for _, id := range sortedKeys(s.groups) {
			cg := s.groups[id].consumer
			if cg == nil {
				continue
			}
			fmt.Fprintf(&b, "%s epoch=%d target-epoch=%d static=%v\n", id, cg.epoch, cg.targetEpoch, cg.static)
			for _, mid := range sortedKeys(cg.target) {
				fmt.Fprintf(&b, "  target %s %v\n", mid, cg.target[mid])
			}
			for _, mid := range sortedKeys(cg.members) {
				m := cg.members[mid]
				fmt.Fprintf(&b, "  member %s %x epoch=%d/%d %s assigned=%v pending=%v rebalance=%v\n", mid, consumerMemberValue(m),
					m.epoch, m.prevEpoch, m.state, m.assigned, m.pendingRevocation, m.rebalanceTimeout)
			}
		}
	}
	return b.String()
}

// checkReplay loads the log into a second coordinator and fails t unless
// its consumer groups equal the live ones: every change was written.
func (h *cgHarness) checkReplay(t testing.TB, where string) {
	t.Helper()
	c2 := New(h.cfg)
	defer c2.Close()
	if err := c2.Load(0, h.log); err != nil {
		t.Fatalf("%s: replay: %v", where, err)
	}
	if live, replayed := consumerState(h.c), consumerState(c2); live != replayed {
		t.Fatalf("%s: replayed state differs\nlive:\n%s\nreplayed:\n%s", where, live, replayed)
	}
}

// TestConsumerGroupRecordsDecode checks the consumer group records against
// the bytes Kafka's schemas give, and that record types Sluice does not
// write (Kafka's regular expression record, key version 16) are skipped.
func TestConsumerGroupRecordsDecode(t *testing.T) {
	r := consumerMetadataRecord("g", 7)
	if want := []byte{0, 3, 0, 1, 'g'}; !slices.Equal(r.Key, want) {
		t.Fatalf("key %x, want %x", r.Key, want)
	}
	if want := []byte{0, 0, 0, 0, 0, 7, 0}; !slices.Equal(r.Value, want) {
		t.Fatalf("value %x, want %x", r.Value, want)
	}
	// Tagged fields (Kafka 4.1's MetadataHash) are skipped.
	tagged := []byte{0, 0, 0, 0, 0, 9, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8}
	if e, err := decodeConsumerMetadataValue(tagged); err != nil || e != 9 {
		t.Fatalf("tagged value: %d %v", e, err)
	}

	iid := "i"
	m := &consumerMember{id: "m", instanceID: &iid, clientID: "c", clientHost: "/h", topics: []string{"t"},
		rebalanceTimeout: 3 * time.Second, assignor: "range"}
	mr := consumerMemberRecord("g", m)
	if want := []byte{0, 5, 0, 1, 'g', 0, 1, 'm'}; !slices.Equal(mr.Key, want) {
		t.Fatalf("member key %x, want %x", mr.Key, want)
	}
	want := []byte{0, 0, // version
		2, 'i', // instance
		0,      // rack: null
		2, 'c', // client id
		3, '/', 'h', // client host
		2, 2, 't', // topics
		0,                // regex: null
		0, 0, 0x0b, 0xb8, // rebalance timeout 3000 ms
		6, 'r', 'a', 'n', 'g', 'e', // assignor
		0} // tags
	if !slices.Equal(mr.Value, want) {
		t.Fatalf("member value %x, want %x", mr.Value, want)
	}
	tid := make([]byte, 16)
	tid[0] = 1
	m.epoch, m.prevEpoch, m.state = 4, 3, memberUnrevoked
	m.assigned, m.pendingRevocation = partitionSet{{1}: {0, 2}}, partitionSet{{1}: {1}}
	cr := consumerCurrentRecord("g", m)
	want = append([]byte{0, 0, 0, 0, 0, 4, 0, 0, 0, 3, 1, // version, epochs, state
		2}, append(slices.Clone(tid), 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, // assigned: t[1] 0,2
		2)...)
	want = append(want, append(slices.Clone(tid), 2, 0, 0, 0, 1, 0, // pending: t[1] 1
		0)...) // tags
	if !slices.Equal(cr.Value, want) {
		t.Fatalf("current value %x, want %x", cr.Value, want)
	}

	log := &memLog{}
	regexKey := []byte{0, 16, 0, 1, 'g', 0, 2, 'r', '.'}
	log.batches = [][]Record{{r, mr, {Key: regexKey, Value: []byte{0, 0, 1, 2, 3}}, cr}}
	c := testCoordinator(t, log, newManualClock())
	lg := c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "consumer" {
		t.Fatalf("groups: %+v", lg.Groups)
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g"}
	dg := c.ConsumerGroupDescribe(context.Background(), req).Groups[0]
	if len(dg.Members) != 1 || dg.Members[0].MemberID != "m" || dg.Members[0].MemberEpoch != 4 || dg.Epoch != 7 {
		t.Fatalf("described: %+v", dg)
	}
}
