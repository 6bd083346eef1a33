package meta

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SCRAM credentials (KIP-554): one per user and mechanism, kept in the
// replicated metadata as Kafka's UserScramCredentialRecord keeps them:
// the salt, the iteration count and the two keys RFC 5802 derives from
// the salted password (StoredKey = H(HMAC(SaltedPassword, "Client Key")),
// ServerKey = HMAC(SaltedPassword, "Server Key")). Neither the password
// nor the salted password is stored: a stored credential lets a server
// check a client's proof and prove itself, not log in as the user.
//
// A ScramCredentialChanged record upserts or (Delete) removes one. Its
// state key is config/scram/ | mechanism byte | user name, its value the
// encoded upsert record.

// ScramMechanism names a SCRAM mechanism by Kafka's ScramMechanism type
// byte (the wire value of AlterUserScramCredentials).
type ScramMechanism int8

// SCRAM mechanisms; the values are part of the format.
const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// String is the SASL mechanism name (SCRAM-SHA-256, SCRAM-SHA-512).
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("ScramMechanism(%d)", int8(m))
}

// Scram iteration bounds: Kafka's (ScramMechanism's minIterations,
// ScramControlManager's maximum).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

var (
	// ErrInvalidScram: a SCRAM credential change Kafka refuses: an empty
	// user name, an unknown mechanism, an iteration count outside
	// [ScramMinIterations, ScramMaxIterations] (UNACCEPTABLE_CREDENTIAL),
	// an empty salt or key.
	ErrInvalidScram = errors.New("meta: invalid SCRAM credential")
	// ErrUnknownScram: a deletion of a credential that does not exist
	// (Kafka's RESOURCE_NOT_FOUND).
	ErrUnknownScram = errors.New("meta: no such SCRAM credential")
)

// ScramCredentialChanged sets (or with Delete removes) the credential of
// User for Mechanism. A deletion carries only User and Mechanism.
type ScramCredentialChanged struct {
	User       string
	Mechanism  ScramMechanism
	Delete     bool
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// ScramCredential is one stored credential.
type ScramCredential struct {
	User       string
	Mechanism  ScramMechanism
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

type scramKey struct {
	user string
	mech ScramMechanism
}

func (ScramCredentialChanged) Type() RecordType { return TypeScramCredentialChanged }
func (ScramCredentialChanged) isRecord()        {}

func (r ScramCredentialChanged) String() string {
	if r.Delete {
		return fmt.Sprintf("ScramCredentialChanged user=%q mechanism=%s delete", r.User, r.Mechanism)
	}
	// Never the keys: logs and tools show that a credential exists.
	return fmt.Sprintf("ScramCredentialChanged user=%q mechanism=%s iterations=%d", r.User, r.Mechanism, r.Iterations)
}

func (r ScramCredentialChanged) encode(e *encoder) {
	e.str(r.User)
	e.b = append(e.b, byte(r.Mechanism))
	e.bool(r.Delete)
	e.i32(r.Iterations)
	e.str(string(r.Salt))
	e.str(string(r.StoredKey))
	e.str(string(r.ServerKey))
}

func decodeScram(d *decoder) ScramCredentialChanged {
	var r ScramCredentialChanged
	r.User = d.str()
	if b := d.take(1); b != nil {
		r.Mechanism = ScramMechanism(b[0])
	}
	r.Delete = d.bool()
	r.Iterations = d.i32()
	r.Salt = bytesOrNil(d.str())
	r.StoredKey = bytesOrNil(d.str())
	r.ServerKey = bytesOrNil(d.str())
	return r
}

func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// validateScram is the plan's check of a ScramCredentialChanged.
func (st *state) planScram(r ScramCredentialChanged) (delta, error) {
	if r.User == "" {
		return delta{}, fmt.Errorf("%w: empty user name", ErrInvalidScram)
	}
	if r.Mechanism != ScramSHA256 && r.Mechanism != ScramSHA512 {
		return delta{}, fmt.Errorf("%w: unknown mechanism %d", ErrInvalidScram, r.Mechanism)
	}
	k := scramKey{r.User, r.Mechanism}
	if r.Delete {
		if _, ok := st.scram[k]; !ok {
			return delta{}, fmt.Errorf("%w: user %q has no %s credential", ErrUnknownScram, r.User, r.Mechanism)
		}
		return delta{setScram: true, scramKey: k}, nil
	}
	if r.Iterations < ScramMinIterations || r.Iterations > ScramMaxIterations {
		return delta{}, fmt.Errorf("%w: %d iterations for %s, outside [%d, %d]", ErrInvalidScram, r.Iterations, r.Mechanism, ScramMinIterations, ScramMaxIterations)
	}
	if len(r.Salt) == 0 || len(r.StoredKey) == 0 || len(r.ServerKey) == 0 {
		return delta{}, fmt.Errorf("%w: empty salt or key", ErrInvalidScram)
	}
	c := &ScramCredential{User: r.User, Mechanism: r.Mechanism, Iterations: r.Iterations,
		Salt: slices.Clone(r.Salt), StoredKey: slices.Clone(r.StoredKey), ServerKey: slices.Clone(r.ServerKey)}
	return delta{setScram: true, scramKey: k, scram: c}, nil
}

// scramStateKey is the config/scram/ key of a credential.
func scramStateKey(k scramKey) []byte {
	return append(append([]byte(keyScram), byte(k.mech)), k.user...)
}

func (c *ScramCredential) record() ScramCredentialChanged {
	return ScramCredentialChanged{User: c.User, Mechanism: c.Mechanism, Iterations: c.Iterations,
		Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}

// loadScram reads the config/scram/ keys into st.
func loadScram(st *state, k, v []byte) error {
	rec, err := DecodeRecord(v)
	if err != nil {
		return fmt.Errorf("scram credential %x: %w", k, err)
	}
	r, ok := rec.(ScramCredentialChanged)
	if !ok || r.Delete || !strings.HasPrefix(string(k), keyScram) || string(scramStateKey(scramKey{r.User, r.Mechanism})) != string(k) {
		return fmt.Errorf("%w: scram key %x holds %v", ErrCorrupt, k, rec)
	}
	st.scram[scramKey{r.User, r.Mechanism}] = &ScramCredential{User: r.User, Mechanism: r.Mechanism,
		Iterations: r.Iterations, Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey}
	return nil
}

// ScramCredential returns user's credential for mech; ok is false when
// there is none. The slices are the caller's.
func (s *Store) ScramCredential(user string, mech ScramMechanism) (ScramCredential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.st.scram[scramKey{user, mech}]
	if !ok {
		return ScramCredential{}, false
	}
	out := *c
	out.Salt, out.StoredKey, out.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
	return out, true
}

// ScramUsers returns, by user name (sorted), the mechanisms and
// iteration counts of every user with a credential.
func (s *Store) ScramUsers() map[string][]ScramCredential {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]ScramCredential{}
	for k, c := range s.st.scram {
		out[k.user] = append(out[k.user], ScramCredential{User: c.User, Mechanism: c.Mechanism, Iterations: c.Iterations})
	}
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b ScramCredential) int { return int(a.Mechanism) - int(b.Mechanism) })
	}
	return out
}

// AlterScramCredentials applies the changes as one change (one batch, one
// proposed entry); errs[i] is why changes[i] was refused
// (ErrInvalidScram, ErrUnknownScram), checked in order against the state
// the earlier changes leave. err is a failure of the whole change.
func (s *Store) AlterScramCredentials(changes []ScramCredentialChanged) (errs []error, err error) {
	return changeEach(s, changes, (*state).planScram)
}

// changeEach applies the changes plan accepts as one change: each is
// planned against the state the earlier accepted ones leave; errs[i] is
// why changes[i] was refused, err a failure of the whole change.
func changeEach[R Record](s *Store, changes []R, plan func(*state, R) (delta, error)) (errs []error, err error) {
	errs = make([]error, len(changes))
	var idx []int
	outs, err := s.change(func(st *state) ([]Record, error) {
		idx = idx[:0]
		var recs []Record
		tmp := st.clone()
		for i, c := range changes {
			d, perr := plan(tmp, c)
			errs[i] = perr
			if perr != nil {
				continue
			}
			tmp.apply(d)
			idx = append(idx, i)
			recs = append(recs, c)
		}
		return recs, nil
	})
	if err != nil {
		return errs, err
	}
	for j, o := range outs {
		if j < len(idx) {
			errs[idx[j]] = o.err
		}
	}
	return errs, nil
}
