package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func qent(pairs ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(pairs); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: pairs[i]}
		if pairs[i+1] != "<default>" {
			c.Name = kmsg.StringPtr(pairs[i+1])
		}
		e = append(e, c)
	}
	return e
}

func setQuota(e kadm.ClientQuotaEntity, key string, v float64) kadm.AlterClientQuotaEntry {
	return kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}
}

// describeQuotas returns the described values by entity string.
func describeQuotas(t *testing.T, adm *kadm.Client, strict bool, cs ...kadm.DescribeClientQuotaComponent) map[string]map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := adm.DescribeClientQuotas(ctx, strict, cs)
	if err != nil {
		t.Fatalf("describe %+v: %v", cs, err)
	}
	out := map[string]map[string]float64{}
	for _, q := range d {
		m := map[string]float64{}
		for _, v := range q.Values {
			m[v.Key] = v.Value
		}
		out[q.Entity.String()] = m
	}
	return out
}

func TestClientQuotasAdmin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, addr := startBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, addr)
	adm := kadm.NewClient(cl)

	// Validate only: checked, not applied.
	res, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{setQuota(qent("user", "alice"), "producer_byte_rate", 1024)})
	if err != nil || res[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, res)
	}
	if got := describeQuotas(t, adm, false); len(got) != 0 {
		t.Fatalf("validate_only applied: %v", got)
	}
	alterQuotas(ctx, t, adm,
		setQuota(qent("user", "alice"), "producer_byte_rate", 1024),
		setQuota(qent("user", "alice", "client-id", "app"), "consumer_byte_rate", 2048),
		setQuota(qent("user", "<default>"), "request_percentage", 12.5),
		setQuota(qent("client-id", "<default>"), "producer_byte_rate", 4096),
		setQuota(qent("ip", "127.0.0.1"), "connection_creation_rate", 100),
		setQuota(qent("ip", "<default>"), "connection_creation_rate", 200))
	// Kafka's errors, each the entry's; a failing entry applies none of
	// its ops.
	bad := []kadm.AlterClientQuotaEntry{
		setQuota(qent("user", "bob"), "bogus_key", 1),
		setQuota(qent("user", "bob"), "connection_creation_rate", 1),
		setQuota(qent("ip", "127.0.0.1"), "producer_byte_rate", 1),
		setQuota(qent("ip", "127.0.0.1", "user", "bob"), "connection_creation_rate", 1),
		setQuota(qent("user", ""), "producer_byte_rate", 1),
		setQuota(qent("user", "bob", "user", "carol"), "producer_byte_rate", 1),
		setQuota(qent("group", "g"), "producer_byte_rate", 1),
		setQuota(nil, "producer_byte_rate", 1),
		setQuota(qent("user", "bob"), "producer_byte_rate", 1.5),
		setQuota(qent("user", "bob"), "producer_byte_rate", -1),
		setQuota(qent("user", "bob"), "controller_mutation_rate", 0), // Kafka: "must be greater than 0"
		setQuota(qent("user", "bob"), "request_percentage", math.NaN()),
		setQuota(qent("user", "bob"), "request_percentage", math.Inf(1)),
		setQuota(qent("user", "bob"), "producer_byte_rate", 1e300), // too large for a long
		setQuota(qent("ip", "not an address!"), "connection_creation_rate", 1),
		{Entity: qent("user", "bob"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 5}, {Key: "nope", Value: 1}}},
	}
	res, err = adm.AlterClientQuotas(ctx, bad)
	if err != nil || len(res) != len(bad) {
		t.Fatalf("bad alters: %v %+v", err, res)
	}
	for i, r := range res {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("bad alter %d (%s): %v, want INVALID_REQUEST", i, bad[i].Entity, r.Err)
		}
	}
	all := describeQuotas(t, adm, false)
	if len(all) != 6 || all["{user=alice}"]["producer_byte_rate"] != 1024 || all["{user=<default>}"]["request_percentage"] != 12.5 {
		t.Fatalf("describe all: %v", all)
	}
	if _, ok := all["{user=bob}"]; ok {
		t.Fatal("a failed entry applied an op")
	}
	// Match types and strict.
	for _, tc := range []struct {
		strict bool
		cs     []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr("alice")}}, []string{"{user=alice}", "{user=alice, client-id=app}"}},
		{true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr("alice")}}, []string{"{user=alice}"}},
		{false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeDefault}}, []string{"{user=<default>}"}},
		{false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: kmsg.QuotasMatchTypeAny}}, []string{"{user=alice, client-id=app}", "{client-id=<default>}"}},
		{true, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}}, []string{"{ip=127.0.0.1}", "{ip=<default>}"}},
	} {
		got := describeQuotas(t, adm, tc.strict, tc.cs...)
		if len(got) != len(tc.want) {
			t.Errorf("describe %+v strict=%v: %v, want %v", tc.cs, tc.strict, got, tc.want)
			continue
		}
		for _, w := range tc.want {
			if _, ok := got[w]; !ok {
				t.Errorf("describe %+v strict=%v: %v, want %v", tc.cs, tc.strict, got, tc.want)
			}
		}
	}
	// Describe errors: the response's.
	for _, tc := range []struct {
		cs   []kmsg.DescribeClientQuotasRequestComponent
		code int16
	}{
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 2}, {EntityType: "user", MatchType: 1}}, kerr.InvalidRequest.Code},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "group", MatchType: 2}}, kerr.UnsupportedVersion.Code},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0}}, kerr.InvalidRequest.Code},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 1, Match: kmsg.StringPtr("x")}}, kerr.InvalidRequest.Code},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "ip", MatchType: 2}, {EntityType: "user", MatchType: 2}}, kerr.InvalidRequest.Code},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 7}}, kerr.InvalidRequest.Code},
	} {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components = tc.cs
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != tc.code || len(resp.Entries) != 0 {
			t.Errorf("describe %+v: %v code %d entries %d, want code %d", tc.cs, err, resp.ErrorCode, len(resp.Entries), tc.code)
		}
	}
	// Remove one value; the entity with no values left is gone.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: qent("ip", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("remove: %v %+v", err, res)
	}
	before := describeQuotas(t, adm, false)
	if len(before) != 5 {
		t.Fatalf("after removal: %v", before)
	}
	// Quotas survive a restart.
	b.Close()
	_, addr = startBroker(t, dir)
	after := describeQuotas(t, kadm.NewClient(newClient(t, addr)), false)
	if len(after) != len(before) || after["{user=alice, client-id=app}"]["consumer_byte_rate"] != 2048 || after["{ip=127.0.0.1}"]["connection_creation_rate"] != 100 {
		t.Fatalf("after restart %v, want %v", after, before)
	}
}

// AlterClientQuotas sent to a broker that is not the controller is
// forwarded, and that broker answers once its own metadata shows the
// change: a DescribeClientQuotas to it right after sees the value.
func TestClientQuotasForwarded(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	var ctrl int32
	eventually(t, 30*time.Second, "a controller", func() error {
		if ctrl = tc.broker(0).cl.controllerID(); ctrl < 1 {
			return errors.New("none yet")
		}
		return nil
	})
	other := int(ctrl) % 3 // 0-based index of a node that is not the controller
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := tc.direct(other).Broker(other + 1) // pinned: never routed to the controller
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: kmsg.StringPtr("fwd")}}
	e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 4096}}
	req.Entries = append(req.Entries, e)
	eventually(t, 30*time.Second, "AlterClientQuotas through a non-controller", func() error {
		resp, err := node.Request(ctx, req)
		if err != nil {
			return err
		}
		if es := resp.(*kmsg.AlterClientQuotasResponse).Entries; len(es) != 1 || es[0].ErrorCode != 0 {
			return fmt.Errorf("entries %+v", es)
		}
		return nil
	})
	dresp, err := node.Request(ctx, kmsg.NewPtrDescribeClientQuotasRequest())
	if err != nil {
		t.Fatal(err)
	}
	if es := dresp.(*kmsg.DescribeClientQuotasResponse).Entries; len(es) != 1 || es[0].Values[0].Value != 4096 {
		t.Fatalf("node %d right after its alter describes %+v", other+1, es)
	}
	for i := range 3 {
		eventually(t, 30*time.Second, fmt.Sprintf("node %d has the quota", i+1), func() error {
			if l := tc.broker(i).quotas.current(); l.by[quotaProduce][quotaEnt{client: "fwd", hasClient: true}] != 4096 {
				return fmt.Errorf("%+v", l.by)
			}
			return nil
		})
	}
}
