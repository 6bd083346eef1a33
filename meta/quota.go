package meta

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
)

// Client quotas (KIP-546): one value per entity and quota key, kept in
// the replicated metadata as Kafka's ClientQuotaRecord keeps them. An
// entity maps entity types (QuotaUser, QuotaClientID, QuotaIP) to names;
// an empty name is the type's default entity (Kafka's null name).
//
// A ClientQuotaChanged record sets (or with Remove removes) one value.
// Its state key is config/quota/ | entity | quota key, where entity is
// the uvarint length of the entity's encoding and that encoding (the
// entity as an encoder strMap, types sorted); its value the encoded
// setting record.

// Quota entity types, Kafka's ClientQuotaEntity constants.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// Quota keys, Kafka's QuotaConfig names.
const (
	QuotaProducerByteRate       = "producer_byte_rate"       // bytes/s, integral
	QuotaConsumerByteRate       = "consumer_byte_rate"       // bytes/s, integral
	QuotaRequestPercentage      = "request_percentage"       // percent of one thread per window
	QuotaControllerMutationRate = "controller_mutation_rate" // partition mutations/s
	QuotaConnectionCreationRate = "connection_creation_rate" // connections/s per IP, integral
)

// ErrInvalidQuota: a client quota change Kafka's ClientQuotaControlManager
// refuses (INVALID_REQUEST): an empty entity, an unknown entity type, an
// IP combined with a user or client id, a key not valid for the entity's
// types, a value not above 0, a fractional or too large value for an
// integral key.
var ErrInvalidQuota = errors.New("meta: invalid client quota")

// QuotaEntity names a client quota's entity: entity type -> name, "" for
// the type's default entity. It is never modified once in a record.
type QuotaEntity map[string]string

// String is the entity as type=name pairs, sorted by type; a default
// name shows as <default>.
func (e QuotaEntity) String() string {
	var parts []string
	for _, t := range sortedKeys(e) {
		n := e[t]
		if n == "" {
			n = "<default>"
		}
		parts = append(parts, t+"="+n)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// key is the entity's canonical encoding (a map key and the state key's
// entity part).
func (e QuotaEntity) key() string {
	var enc encoder
	enc.strMap(e)
	return string(enc.b)
}

// ClientQuotaChanged sets Key's Value for Entity, or removes it (Remove;
// Value is then 0).
type ClientQuotaChanged struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

// ClientQuota is one entity's quota values by key.
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

func (ClientQuotaChanged) Type() RecordType { return TypeClientQuotaChanged }
func (ClientQuotaChanged) isRecord()        {}

func (r ClientQuotaChanged) String() string {
	if r.Remove {
		return fmt.Sprintf("ClientQuotaChanged entity=%s key=%s remove", r.Entity, r.Key)
	}
	return fmt.Sprintf("ClientQuotaChanged entity=%s key=%s value=%g", r.Entity, r.Key, r.Value)
}

func (r ClientQuotaChanged) encode(e *encoder) {
	e.strMap(r.Entity)
	e.str(r.Key)
	e.i64(int64(math.Float64bits(r.Value)))
	e.bool(r.Remove)
}

func decodeClientQuota(d *decoder) ClientQuotaChanged {
	var r ClientQuotaChanged
	r.Entity = d.strMap()
	r.Key = d.str()
	r.Value = math.Float64frombits(uint64(d.i64()))
	r.Remove = d.bool()
	return r
}

// userClientQuotaKeys and ipQuotaKeys are the valid keys: integral ones (Kafka's LONG and INT
// types) with their largest value, fractional ones (DOUBLE) with 0.
var userClientQuotaKeys = map[string]float64{
	QuotaProducerByteRate:       math.MaxInt64,
	QuotaConsumerByteRate:       math.MaxInt64,
	QuotaRequestPercentage:      0,
	QuotaControllerMutationRate: 0,
}

var ipQuotaKeys = map[string]float64{QuotaConnectionCreationRate: math.MaxInt32}

// ValidateQuotaEntity checks an entity as Kafka's ClientQuotaControlManager
// does: not empty, only user, client-id and ip types, an ip never with a
// user or client id. Names are not checked here (an ip's address is the
// server's to check). It returns the keys valid for the entity.
func ValidateQuotaEntity(e QuotaEntity) (keys map[string]float64, err error) {
	if len(e) == 0 {
		return nil, fmt.Errorf("%w: empty client quota entity", ErrInvalidQuota)
	}
	for t := range e {
		if t != QuotaUser && t != QuotaClientID && t != QuotaIP {
			return nil, fmt.Errorf("%w: unhandled client quota entity type %q", ErrInvalidQuota, t)
		}
	}
	if _, ip := e[QuotaIP]; ip {
		if len(e) > 1 {
			return nil, fmt.Errorf("%w: an ip entity cannot be combined with a user or client-id", ErrInvalidQuota)
		}
		return ipQuotaKeys, nil
	}
	return userClientQuotaKeys, nil
}

// ValidateQuotaValue checks a quota key and value for an entity, as
// Kafka's validateQuotaKeyValue: a key valid for the entity's types, a
// value above 0, integral keys whole and within their type.
func ValidateQuotaValue(e QuotaEntity, key string, value float64) error {
	keys, err := ValidateQuotaEntity(e)
	if err != nil {
		return err
	}
	limit, ok := keys[key]
	switch {
	case !ok:
		return fmt.Errorf("%w: invalid configuration key %s", ErrInvalidQuota, key)
	case !(value > 0) || math.IsInf(value, 0):
		return fmt.Errorf("%w: quota %s must be greater than 0", ErrInvalidQuota, key)
	case limit > 0 && value > limit:
		return fmt.Errorf("%w: proposed value for %s is too large", ErrInvalidQuota, key)
	case limit > 0 && math.Abs(math.Mod(value, 1)) > 1e-6:
		return fmt.Errorf("%w: %s cannot be a fractional value", ErrInvalidQuota, key)
	}
	return nil
}

// quotaGens numbers the quota states of every store in the process, so
// a generation names one set of quotas (QuotaGeneration).
var quotaGens atomic.Uint64

// planClientQuota is the plan's check of a ClientQuotaChanged. Removing a
// value that is not set changes nothing.
func (st *state) planClientQuota(r ClientQuotaChanged) (delta, error) {
	if _, err := ValidateQuotaEntity(r.Entity); err != nil {
		return delta{}, err
	}
	if !r.Remove {
		if err := ValidateQuotaValue(r.Entity, r.Key, r.Value); err != nil {
			return delta{}, err
		}
	}
	k := quotaStateKey(r.Entity, r.Key)
	d := delta{setQuota: true, quotaKey: k}
	if !r.Remove {
		c := r
		c.Entity = QuotaEntity(cloneMap(r.Entity))
		d.quota = &c
	}
	return d, nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// quotaStateKey is the config/quota/ key of one entity's value.
func quotaStateKey(e QuotaEntity, key string) string {
	var enc encoder
	enc.str(e.key())
	return keyQuota + string(enc.b) + key
}

// applyQuota applies a planned quota change to st.
func (st *state) applyQuota(d delta) {
	if d.quota == nil {
		delete(st.quotas, d.quotaKey)
	} else {
		st.quotas[d.quotaKey] = *d.quota
	}
	st.quotaGen = quotaGens.Add(1)
}

// loadClientQuota reads a config/quota/ key into st.
func loadClientQuota(st *state, k, v []byte) error {
	rec, err := DecodeRecord(v)
	if err != nil {
		return fmt.Errorf("client quota %x: %w", k, err)
	}
	r, ok := rec.(ClientQuotaChanged)
	if !ok || r.Remove || quotaStateKey(r.Entity, r.Key) != string(k) {
		return fmt.Errorf("%w: client quota key %x holds %v", ErrCorrupt, k, rec)
	}
	st.quotas[string(k)] = r
	return nil
}

// QuotaGeneration names the current set of client quotas: it changes
// whenever a quota does (and when the state is reloaded), so a cache of
// ClientQuotas is current while the generation is the same.
func (s *Store) QuotaGeneration() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.st.quotaGen
}

// ClientQuotas returns every entity with a quota value, sorted by entity,
// and the generation they are of. The maps are the caller's.
func (s *Store) ClientQuotas() ([]ClientQuota, uint64) {
	s.mu.RLock()
	byEntity := map[string]*ClientQuota{}
	for _, r := range s.st.quotas {
		ek := r.Entity.key()
		c := byEntity[ek]
		if c == nil {
			c = &ClientQuota{Entity: QuotaEntity(cloneMap(r.Entity)), Values: map[string]float64{}}
			byEntity[ek] = c
		}
		c.Values[r.Key] = r.Value
	}
	gen := s.st.quotaGen
	s.mu.RUnlock()
	keys := make([]string, 0, len(byEntity))
	for k := range byEntity {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]ClientQuota, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byEntity[k])
	}
	return out, gen
}

// AlterClientQuotas applies the changes as one change (one batch, one
// proposed entry); errs[i] is why changes[i] was refused
// (ErrInvalidQuota). err is a failure of the whole change.
func (s *Store) AlterClientQuotas(changes []ClientQuotaChanged) (errs []error, err error) {
	return changeEach(s, changes, (*state).planClientQuota)
}
