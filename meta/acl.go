package meta

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ACLs (KIP-11; Kafka's AclControlManager with AccessControlEntryRecord and
// RemoveAccessControlEntryRecord): each ACL is a binding (resource
// pattern and access control entry) with a random 16-byte id, as Kafka
// gives each ACL a Uuid. An ACLChanged record creates one ACL under its
// id or (Delete) removes the ACL with that id. Its state key is
// config/acl/ | id (16 raw bytes), its value the encoded create record.
//
// The enum types carry Kafka's wire codes (the values of
// org.apache.kafka.common.acl.AclOperation and friends, the same as
// kmsg's), so the server converts by a cast; meta does not import kmsg.

// ACLResourceType is Kafka's ResourceType code.
type ACLResourceType int8

// Resource types; the values are part of the format (Kafka's codes).
const (
	ACLResourceUnknown         ACLResourceType = 0
	ACLResourceAny             ACLResourceType = 1 // filters only
	ACLResourceTopic           ACLResourceType = 2
	ACLResourceGroup           ACLResourceType = 3
	ACLResourceCluster         ACLResourceType = 4
	ACLResourceTransactionalID ACLResourceType = 5
	ACLResourceDelegationToken ACLResourceType = 6
	ACLResourceUser            ACLResourceType = 7
)

// ACLPatternType is Kafka's PatternType code.
type ACLPatternType int8

// Pattern types; the values are part of the format (Kafka's codes).
const (
	ACLPatternUnknown  ACLPatternType = 0
	ACLPatternAny      ACLPatternType = 1 // filters only: the filter's name exactly
	ACLPatternMatch    ACLPatternType = 2 // filters only: every pattern that matches the name
	ACLPatternLiteral  ACLPatternType = 3
	ACLPatternPrefixed ACLPatternType = 4
)

// ACLOperation is Kafka's AclOperation code.
type ACLOperation int8

// Operations; the values are part of the format (Kafka's codes).
const (
	ACLOpUnknown         ACLOperation = 0
	ACLOpAny             ACLOperation = 1 // filters only
	ACLOpAll             ACLOperation = 2
	ACLOpRead            ACLOperation = 3
	ACLOpWrite           ACLOperation = 4
	ACLOpCreate          ACLOperation = 5
	ACLOpDelete          ACLOperation = 6
	ACLOpAlter           ACLOperation = 7
	ACLOpDescribe        ACLOperation = 8
	ACLOpClusterAction   ACLOperation = 9
	ACLOpDescribeConfigs ACLOperation = 10
	ACLOpAlterConfigs    ACLOperation = 11
	ACLOpIdempotentWrite ACLOperation = 12
	ACLOpCreateTokens    ACLOperation = 13
	ACLOpDescribeTokens  ACLOperation = 14
)

// ACLPermission is Kafka's AclPermissionType code.
type ACLPermission int8

// Permissions; the values are part of the format (Kafka's codes).
const (
	ACLPermUnknown ACLPermission = 0
	ACLPermAny     ACLPermission = 1 // filters only
	ACLPermDeny    ACLPermission = 2
	ACLPermAllow   ACLPermission = 3
)

// ACLWildcard is the literal resource name, principal suffix and host
// that match every resource, principal of the type, and host (Kafka's
// ResourcePattern.WILDCARD_RESOURCE and AclEntry's wildcards).
const ACLWildcard = "*"

var (
	// ErrInvalidACL: an ACL or filter Kafka refuses (INVALID_REQUEST): an
	// ANY or UNKNOWN resource type, operation or permission in an ACL, a
	// pattern type other than LITERAL or PREFIXED in an ACL, an empty
	// resource name, a principal not "Type:name", an UNKNOWN field in a
	// filter, a replayed create whose id exists.
	ErrInvalidACL = errors.New("meta: invalid ACL")
	// ErrUnknownACL: a replayed deletion of an id that is not there.
	ErrUnknownACL = errors.New("meta: no such ACL")
)

// ACLBinding is one ACL: a resource pattern and an access control entry
// (Kafka's AclBinding). Principal is "Type:name" ("User:alice", "User:*"),
// Host an IP address or "*".
type ACLBinding struct {
	ResourceType ACLResourceType
	ResourceName string
	PatternType  ACLPatternType
	Principal    string
	Host         string
	Operation    ACLOperation
	Permission   ACLPermission
}

// ACL is a stored binding and its id.
type ACL struct {
	ID [16]byte
	ACLBinding
}

// ACLChanged creates the ACL Binding under ID or, with Delete, removes the
// ACL with ID (Binding then empty). Kafka's AccessControlEntryRecord and
// RemoveAccessControlEntryRecord.
type ACLChanged struct {
	ID      [16]byte
	Delete  bool
	Binding ACLBinding
}

func (ACLChanged) Type() RecordType { return TypeACLChanged }
func (ACLChanged) isRecord()        {}

func (r ACLChanged) String() string {
	if r.Delete {
		return fmt.Sprintf("ACLChanged id=%s delete", FormatTopicID(r.ID))
	}
	return fmt.Sprintf("ACLChanged id=%s %s", FormatTopicID(r.ID), r.Binding)
}

// String is the binding for logs and tools: resource=type:pattern:"name"
// with Kafka's codes, then the entry's fields.
func (b ACLBinding) String() string {
	return fmt.Sprintf("resource=%d:%d:%q principal=%q host=%q operation=%d permission=%d",
		b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

func (r ACLChanged) encode(e *encoder) {
	e.b = append(e.b, r.ID[:]...)
	e.bool(r.Delete)
	b := r.Binding
	e.b = append(e.b, byte(b.ResourceType), byte(b.PatternType), byte(b.Operation), byte(b.Permission))
	e.str(b.ResourceName)
	e.str(b.Principal)
	e.str(b.Host)
}

func decodeACL(d *decoder) ACLChanged {
	var r ACLChanged
	r.ID = d.id()
	r.Delete = d.bool()
	if f := d.take(4); f != nil {
		r.Binding.ResourceType, r.Binding.PatternType = ACLResourceType(f[0]), ACLPatternType(f[1])
		r.Binding.Operation, r.Binding.Permission = ACLOperation(f[2]), ACLPermission(f[3])
	}
	r.Binding.ResourceName = d.str()
	r.Binding.Principal = d.str()
	r.Binding.Host = d.str()
	return r
}

// ValidateACL is Kafka's check of a new ACL (AclControlManager's
// validateNewAcl, and the principal parse of StandardAcl): a concrete
// resource type, pattern LITERAL or PREFIXED, a concrete operation and
// permission, a non-empty resource name, a principal "Type:name". The
// error wraps ErrInvalidACL.
func ValidateACL(b ACLBinding) error {
	switch {
	case b.ResourceType <= ACLResourceAny || b.ResourceType > ACLResourceUser:
		return fmt.Errorf("%w: invalid resource type %d", ErrInvalidACL, b.ResourceType)
	case b.PatternType != ACLPatternLiteral && b.PatternType != ACLPatternPrefixed:
		return fmt.Errorf("%w: invalid pattern type %d", ErrInvalidACL, b.PatternType)
	case b.Operation <= ACLOpAny || b.Operation > ACLOpDescribeTokens:
		return fmt.Errorf("%w: invalid operation %d", ErrInvalidACL, b.Operation)
	case b.Permission != ACLPermAllow && b.Permission != ACLPermDeny:
		return fmt.Errorf("%w: invalid permission type %d", ErrInvalidACL, b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("%w: resource name should not be empty", ErrInvalidACL)
	case !strings.Contains(b.Principal, ":"):
		return fmt.Errorf("%w: expected a principal in format principalType:principalName but got %q", ErrInvalidACL, b.Principal)
	}
	return nil
}

// ACLFilter selects ACLs (Kafka's AclBindingFilter). A nil name,
// principal or host matches any; ResourceType, Operation and Permission
// ANY match any. PatternType ANY matches patterns of either type named
// exactly ResourceName; MATCH matches every pattern that applies to the
// resource ResourceName (the literal name, the literal "*", and PREFIXED
// patterns that prefix it); LITERAL and PREFIXED match that type with
// exactly the name.
type ACLFilter struct {
	ResourceType ACLResourceType
	ResourceName *string
	PatternType  ACLPatternType
	Principal    *string
	Host         *string
	Operation    ACLOperation
	Permission   ACLPermission
}

// ValidateACLFilter refuses a filter with an UNKNOWN field, or a code
// Kafka does not know, which it reads as UNKNOWN (Kafka's
// AclControlManager.validateFilter and the requests' parse:
// INVALID_REQUEST); the error wraps ErrInvalidACL.
func ValidateACLFilter(f ACLFilter) error {
	if f.ResourceType <= ACLResourceUnknown || f.ResourceType > ACLResourceUser ||
		f.PatternType <= ACLPatternUnknown || f.PatternType > ACLPatternPrefixed ||
		f.Operation <= ACLOpUnknown || f.Operation > ACLOpDescribeTokens ||
		f.Permission <= ACLPermUnknown || f.Permission > ACLPermAllow {
		return fmt.Errorf("%w: a filter field is UNKNOWN (resource type %d, pattern type %d, operation %d, permission %d)",
			ErrInvalidACL, f.ResourceType, f.PatternType, f.Operation, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b (Kafka's AclBindingFilter.matches).
func (f ACLFilter) Matches(b ACLBinding) bool {
	if f.ResourceType != ACLResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != ACLPatternAny && f.PatternType != ACLPatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == ACLPatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == ACLPatternLiteral:
			if name != b.ResourceName && b.ResourceName != ACLWildcard {
				return false
			}
		case b.PatternType == ACLPatternPrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != ACLOpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == ACLPermAny || f.Permission == b.Permission
}

// planACL is the plan's check of an ACLChanged.
func (st *state) planACL(r ACLChanged) (delta, error) {
	_, exists := st.acls.byID[r.ID]
	if r.Delete {
		if !exists {
			return delta{}, fmt.Errorf("%w: id %s", ErrUnknownACL, FormatTopicID(r.ID))
		}
		return delta{setACL: true, aclID: r.ID}, nil
	}
	if err := ValidateACL(r.Binding); err != nil {
		return delta{}, err
	}
	if r.ID == ([16]byte{}) {
		return delta{}, fmt.Errorf("%w: zero id", ErrInvalidACL)
	}
	if exists {
		return delta{}, fmt.Errorf("%w: id %s is taken", ErrInvalidACL, FormatTopicID(r.ID))
	}
	return delta{setACL: true, aclID: r.ID, acl: &ACL{ID: r.ID, ACLBinding: r.Binding}}, nil
}

// aclStateKey is the config/acl/ key of an ACL.
func aclStateKey(id [16]byte) []byte {
	return append([]byte(keyACL), id[:]...)
}

// loadACL reads a config/acl/ key into st.
func loadACL(st *state, k, v []byte) error {
	rec, err := DecodeRecord(v)
	if err != nil {
		return fmt.Errorf("acl %x: %w", k, err)
	}
	r, ok := rec.(ACLChanged)
	if !ok || r.Delete || !bytes.Equal(aclStateKey(r.ID), k) {
		return fmt.Errorf("%w: acl key %x holds %v", ErrCorrupt, k, rec)
	}
	if st.acls == emptyACLs {
		st.acls = st.acls.with(nil, [16]byte{})
	}
	st.acls.add(&ACL{ID: r.ID, ACLBinding: r.Binding}) // st is still private to loadState
	return nil
}

// aclSet is the state's ACLs, immutable: a change builds a new set that
// shares what it did not touch, so the authorizer reads a set without
// locks held while it decides. byID holds every ACL; byResource indexes
// them by resource type, pattern type and name for the authorizer.
type aclSet struct {
	byID       map[[16]byte]*ACL
	byResource map[aclResourceKey][]*ACL
	// prefixed is, by resource type, the set of names of PREFIXED
	// patterns, so that a lookup tries only the prefixes that exist.
	prefixed map[ACLResourceType]map[string]bool
}

type aclResourceKey struct {
	rt   ACLResourceType
	pt   ACLPatternType
	name string
}

func keyOf(b ACLBinding) aclResourceKey {
	return aclResourceKey{b.ResourceType, b.PatternType, b.ResourceName}
}

var emptyACLs = &aclSet{byID: map[[16]byte]*ACL{}, byResource: map[aclResourceKey][]*ACL{},
	prefixed: map[ACLResourceType]map[string]bool{}}

// with returns a new set: a with add added (if not nil) and the ACL with
// id del removed (if non-zero). The maps are copied: O(ACLs) per change,
// as the state's other maps are.
func (a *aclSet) with(add *ACL, del [16]byte) *aclSet {
	n := &aclSet{byID: maps.Clone(a.byID), byResource: maps.Clone(a.byResource), prefixed: maps.Clone(a.prefixed)}
	if del != ([16]byte{}) {
		n.remove(del)
	}
	if add != nil {
		n.add(add)
	}
	return n
}

// add puts x into a set no one else sees yet (inner slices and maps are
// replaced, never modified: they may be shared with the set a came from).
func (a *aclSet) add(x *ACL) {
	a.byID[x.ID] = x
	k := keyOf(x.ACLBinding)
	a.byResource[k] = append(slices.Clip(a.byResource[k]), x)
	if k.pt == ACLPatternPrefixed && !a.prefixed[k.rt][k.name] {
		p := maps.Clone(a.prefixed[k.rt])
		if p == nil {
			p = map[string]bool{}
		}
		p[k.name] = true
		a.prefixed[k.rt] = p
	}
}

// remove takes the ACL id out of a set no one else sees yet.
func (a *aclSet) remove(id [16]byte) {
	old, ok := a.byID[id]
	if !ok {
		return
	}
	delete(a.byID, id)
	k := keyOf(old.ACLBinding)
	l := slices.DeleteFunc(slices.Clone(a.byResource[k]), func(x *ACL) bool { return x.ID == id })
	if len(l) > 0 {
		a.byResource[k] = l
		return
	}
	delete(a.byResource, k)
	if k.pt == ACLPatternPrefixed {
		p := maps.Clone(a.prefixed[k.rt])
		delete(p, k.name)
		a.prefixed[k.rt] = p
	}
}

// find returns the id of an ACL identical to b.
func (a *aclSet) find(b ACLBinding) ([16]byte, bool) {
	for _, x := range a.byResource[keyOf(b)] {
		if x.ACLBinding == b {
			return x.ID, true
		}
	}
	return [16]byte{}, false
}

// matching returns the ACLs f selects, sorted by binding.
func (a *aclSet) matching(f ACLFilter) []ACL {
	var out []ACL
	for _, x := range a.byID {
		if f.Matches(x.ACLBinding) {
			out = append(out, *x)
		}
	}
	slices.SortFunc(out, compareACL)
	return out
}

func compareACL(x, y ACL) int {
	return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), cmp.Compare(x.PatternType, y.PatternType),
		strings.Compare(x.ResourceName, y.ResourceName), strings.Compare(x.Principal, y.Principal),
		strings.Compare(x.Host, y.Host), cmp.Compare(x.Operation, y.Operation), cmp.Compare(x.Permission, y.Permission),
		bytes.Compare(x.ID[:], y.ID[:]))
}

// newACLID draws a random version-4 id unused in set. Called with
// writeMu (proposeMu in replicated mode) held.
func (s *Store) newACLID(set *aclSet) ([16]byte, error) {
	return s.newUUID("acl id", func(id [16]byte) bool { _, used := set.byID[id]; return !used })
}

// CreateACLs creates the bindings as one change (Kafka's
// AclControlManager.createAcls): errs[i] is why bindings[i] was refused
// (ErrInvalidACL, see ValidateACL). A binding identical to an existing
// ACL, or to an earlier one of the call, succeeds without a second ACL.
// err is a failure of the whole change (nothing created).
func (s *Store) CreateACLs(bindings []ACLBinding) (errs []error, err error) {
	errs = make([]error, len(bindings))
	var idx []int
	outs, err := s.change(func(st *state) ([]Record, error) {
		idx = idx[:0]
		var recs []Record
		set := st.acls
		for i, b := range bindings {
			errs[i] = ValidateACL(b)
			if errs[i] != nil {
				continue
			}
			if _, dup := set.find(b); dup {
				continue
			}
			id, err := s.newACLID(set)
			if err != nil {
				return nil, err
			}
			set = set.with(&ACL{ID: id, ACLBinding: b}, [16]byte{})
			idx = append(idx, i)
			recs = append(recs, ACLChanged{ID: id, Binding: b})
		}
		return recs, nil
	})
	if err != nil {
		return errs, err
	}
	for j, o := range outs {
		if j < len(idx) && o.err != nil {
			errs[idx[j]] = o.err
		}
	}
	return errs, nil
}

// DeleteACLs removes, as one change, every ACL each filter selects
// (Kafka's AclControlManager.deleteAcls): deleted[i] are the ACLs
// filters[i] matched (an ACL matched by two filters is in both, removed
// once); errs[i] is ErrInvalidACL for a filter with an UNKNOWN field. err
// is a failure of the whole change (nothing removed).
func (s *Store) DeleteACLs(filters []ACLFilter) (deleted [][]ACL, errs []error, err error) {
	deleted, errs = make([][]ACL, len(filters)), make([]error, len(filters))
	_, err = s.change(func(st *state) ([]Record, error) {
		var recs []Record
		seen := map[[16]byte]bool{}
		for i, f := range filters {
			deleted[i] = nil
			if errs[i] = ValidateACLFilter(f); errs[i] != nil {
				continue
			}
			deleted[i] = st.acls.matching(f)
			for _, a := range deleted[i] {
				if !seen[a.ID] {
					seen[a.ID] = true
					recs = append(recs, ACLChanged{ID: a.ID, Delete: true})
				}
			}
		}
		return recs, nil
	})
	if err != nil {
		return nil, errs, err
	}
	return deleted, errs, nil
}

// ACLs returns the ACLs f selects, sorted by resource type, pattern type,
// name, principal, host, operation, permission. A filter with an UNKNOWN
// field selects nothing.
func (s *Store) ACLs(f ACLFilter) []ACL {
	if ValidateACLFilter(f) != nil {
		return nil
	}
	return s.aclSet().matching(f)
}

// HasACL reports whether an ACL identical to b exists.
func (s *Store) HasACL(b ACLBinding) bool {
	_, ok := s.aclSet().find(b)
	return ok
}

// aclSet is the current ACL set (immutable; see aclSet).
func (s *Store) aclSet() *aclSet {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.st.acls
}
