package meta

import (
	"errors"
	"reflect"
	"testing"
)

func lit(rt ACLResourceType, name, principal string, op ACLOperation, perm ACLPermission) ACLBinding {
	return ACLBinding{ResourceType: rt, ResourceName: name, PatternType: ACLPatternLiteral,
		Principal: principal, Host: ACLWildcard, Operation: op, Permission: perm}
}

func pre(rt ACLResourceType, name, principal string, op ACLOperation, perm ACLPermission) ACLBinding {
	b := lit(rt, name, principal, op, perm)
	b.PatternType = ACLPatternPrefixed
	return b
}

func bindings(acls []ACL) []ACLBinding {
	out := []ACLBinding{}
	for _, a := range acls {
		out = append(out, a.ACLBinding)
	}
	return out
}

func strp(s string) *string { return &s }

var anyFilter = ACLFilter{ResourceType: ACLResourceAny, PatternType: ACLPatternAny, Operation: ACLOpAny, Permission: ACLPermAny}

// TestACLValidation: AclControlManager.validateNewAcl's refusals, each
// ErrInvalidACL, and nothing created for them.
func TestACLValidation(t *testing.T) {
	s, _ := openTemp(t)
	good := lit(ACLResourceTopic, "t", "User:a", ACLOpRead, ACLPermAllow)
	bad := func(f func(*ACLBinding)) ACLBinding { b := good; f(&b); return b }
	in := []ACLBinding{
		bad(func(b *ACLBinding) { b.ResourceType = ACLResourceAny }),
		bad(func(b *ACLBinding) { b.ResourceType = ACLResourceUnknown }),
		bad(func(b *ACLBinding) { b.ResourceType = 8 }),
		bad(func(b *ACLBinding) { b.PatternType = ACLPatternMatch }),
		bad(func(b *ACLBinding) { b.PatternType = ACLPatternAny }),
		bad(func(b *ACLBinding) { b.PatternType = ACLPatternUnknown }),
		bad(func(b *ACLBinding) { b.Operation = ACLOpAny }),
		bad(func(b *ACLBinding) { b.Operation = ACLOpUnknown }),
		bad(func(b *ACLBinding) { b.Operation = 15 }),
		bad(func(b *ACLBinding) { b.Permission = ACLPermAny }),
		bad(func(b *ACLBinding) { b.Permission = ACLPermUnknown }),
		bad(func(b *ACLBinding) { b.ResourceName = "" }),
		bad(func(b *ACLBinding) { b.Principal = "alice" }),
		good,
	}
	errs, err := s.CreateACLs(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs[:len(errs)-1] {
		if !errors.Is(e, ErrInvalidACL) {
			t.Errorf("binding %d %v: err %v, want ErrInvalidACL", i, in[i], e)
		}
	}
	if errs[len(errs)-1] != nil {
		t.Fatalf("good binding: %v", errs[len(errs)-1])
	}
	if got := bindings(s.ACLs(anyFilter)); !reflect.DeepEqual(got, []ACLBinding{good}) {
		t.Fatalf("ACLs = %v", got)
	}
	// A replayed create with a used or zero id, a delete of an unknown id.
	id := s.ACLs(anyFilter)[0].ID
	for _, rec := range []Record{ACLChanged{ID: id, Binding: good}, ACLChanged{Binding: good}, ACLChanged{ID: [16]byte{9}, Delete: true}} {
		errs := s.Check([]Record{rec})
		if errs[0] == nil {
			t.Errorf("%v accepted", rec)
		}
	}
}

func TestACLCreateDeleteAndReopen(t *testing.T) {
	s, dir := openTemp(t)
	a := lit(ACLResourceTopic, "orders", "User:alice", ACLOpRead, ACLPermAllow)
	b := pre(ACLResourceTopic, "ord", "User:bob", ACLOpWrite, ACLPermAllow)
	c := lit(ACLResourceTopic, "*", "User:*", ACLOpDescribe, ACLPermDeny)
	d := lit(ACLResourceGroup, "g", "User:alice", ACLOpRead, ACLPermAllow)
	// The duplicate of a (in the same call) and, later, of b create nothing.
	errs, err := s.CreateACLs([]ACLBinding{a, b, a, c, d})
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil || errs[3] != nil || errs[4] != nil {
		t.Fatalf("create: %v %v", errs, err)
	}
	off := s.Offset()
	if errs, err := s.CreateACLs([]ACLBinding{b}); err != nil || errs[0] != nil {
		t.Fatalf("create again: %v %v", errs, err)
	}
	if s.Offset() != off {
		t.Fatalf("identical ACL appended a record: offset %d -> %d", off, s.Offset())
	}
	before := s.ACLs(anyFilter)
	if len(before) != 4 {
		t.Fatalf("ACLs = %v", before)
	}
	s = reopen(t, s, dir)
	if got := s.ACLs(anyFilter); !reflect.DeepEqual(got, before) {
		t.Fatalf("after reopen %v, want %v", got, before)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := s.ACLs(anyFilter); !reflect.DeepEqual(got, before) {
		t.Fatalf("after rebuild %v, want %v", got, before)
	}
	// Two filters matching a: both report it; it is removed once. A filter
	// with an UNKNOWN field is refused; the others still apply.
	f1 := anyFilter
	f1.Principal = strp("User:alice")
	f2 := anyFilter
	f2.ResourceType, f2.ResourceName = ACLResourceTopic, strp("orders")
	f3 := anyFilter
	f3.Operation = ACLOpUnknown
	deleted, derrs, err := s.DeleteACLs([]ACLFilter{f1, f2, f3})
	if err != nil || derrs[0] != nil || derrs[1] != nil || !errors.Is(derrs[2], ErrInvalidACL) {
		t.Fatalf("delete: %v %v", derrs, err)
	}
	if got := bindings(deleted[0]); !reflect.DeepEqual(got, []ACLBinding{a, d}) {
		t.Errorf("filter 1 deleted %v", got)
	}
	if got := bindings(deleted[1]); !reflect.DeepEqual(got, []ACLBinding{a}) {
		t.Errorf("filter 2 deleted %v", got)
	}
	s = reopen(t, s, dir)
	if got := bindings(s.ACLs(anyFilter)); !reflect.DeepEqual(got, []ACLBinding{c, b}) {
		t.Fatalf("after delete and reopen: %v", got)
	}
}

// TestACLFilterMatches follows ResourcePatternFilterTest and
// AclBindingFilterTest: ANY matches the exact name of either pattern type,
// MATCH every pattern that applies to the name.
func TestACLFilterMatches(t *testing.T) {
	acls := []ACLBinding{
		lit(ACLResourceTopic, "foo", "User:a", ACLOpRead, ACLPermAllow),
		lit(ACLResourceTopic, "*", "User:a", ACLOpRead, ACLPermAllow),
		pre(ACLResourceTopic, "fo", "User:a", ACLOpRead, ACLPermAllow),
		pre(ACLResourceTopic, "foo", "User:b", ACLOpWrite, ACLPermDeny),
		pre(ACLResourceTopic, "bar", "User:a", ACLOpRead, ACLPermAllow),
		lit(ACLResourceGroup, "foo", "User:a", ACLOpRead, ACLPermAllow),
	}
	f := func(rt ACLResourceType, name *string, pt ACLPatternType) ACLFilter {
		return ACLFilter{ResourceType: rt, ResourceName: name, PatternType: pt, Operation: ACLOpAny, Permission: ACLPermAny}
	}
	for _, tc := range []struct {
		name string
		f    ACLFilter
		want []int
	}{
		{"any", anyFilter, []int{0, 1, 2, 3, 4, 5}},
		{"topic foo literal", f(ACLResourceTopic, strp("foo"), ACLPatternLiteral), []int{0}},
		{"topic foo prefixed", f(ACLResourceTopic, strp("foo"), ACLPatternPrefixed), []int{3}},
		{"topic foo any", f(ACLResourceTopic, strp("foo"), ACLPatternAny), []int{0, 3}},
		{"topic foo match", f(ACLResourceTopic, strp("foo"), ACLPatternMatch), []int{0, 1, 2, 3}},
		{"topic foobar match", f(ACLResourceTopic, strp("foobar"), ACLPatternMatch), []int{1, 2, 3}},
		{"topic * literal", f(ACLResourceTopic, strp("*"), ACLPatternLiteral), []int{1}},
		{"any type foo match", f(ACLResourceAny, strp("foo"), ACLPatternMatch), []int{0, 1, 2, 3, 5}},
		{"topic nil name prefixed", f(ACLResourceTopic, nil, ACLPatternPrefixed), []int{2, 3, 4}},
		{"principal b", func() ACLFilter { x := anyFilter; x.Principal = strp("User:b"); return x }(), []int{3}},
		{"deny", func() ACLFilter { x := anyFilter; x.Permission = ACLPermDeny; return x }(), []int{3}},
		{"write", func() ACLFilter { x := anyFilter; x.Operation = ACLOpWrite; return x }(), []int{3}},
		{"host other", func() ACLFilter { x := anyFilter; x.Host = strp("10.0.0.1"); return x }(), nil},
	} {
		var got []int
		for i, b := range acls {
			if tc.f.Matches(b) {
				got = append(got, i)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: matches %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestACLSaveRestoreState: the ACLs travel in a state snapshot (the
// raft snapshot a lagging node installs) and decide on the restored
// store.
func TestACLSaveRestoreState(t *testing.T) {
	a, _ := openTemp(t)
	b, dir := openTemp(t)
	x := pre(ACLResourceTopic, "ord", "User:alice", ACLOpRead, ACLPermAllow)
	// As the metadata log delivers it (a restore installs a state ahead
	// of the replicated offset).
	if err := a.ApplyReplicated(0, [][]byte{EncodeRecord(ACLChanged{ID: [16]byte{7}, Binding: x})}); err != nil {
		t.Fatal(err)
	}
	data, err := a.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreState(data); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.ACLs(anyFilter), a.ACLs(anyFilter)) {
		t.Fatalf("restored %v, want %v", b.ACLs(anyFilter), a.ACLs(anyFilter))
	}
	if !NewAuthorizer(b, nil, false).Authorize("User:alice", "10.0.0.1", ACLOpRead, ACLResourceTopic, "orders") {
		t.Fatal("the restored ACL does not allow")
	}
	b = reopen(t, b, dir)
	if !b.HasACL(x) {
		t.Fatal("the restored ACL is gone after a reopen")
	}
}
