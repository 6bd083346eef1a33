package meta

import (
	"errors"
	"reflect"
	"testing"
)

func scramCred(user string, mech ScramMechanism, iters int32) ScramCredentialChanged {
	return ScramCredentialChanged{User: user, Mechanism: mech, Iterations: iters,
		Salt: []byte("salt-" + user), StoredKey: []byte("stored-" + user), ServerKey: []byte("server-" + user)}
}

func TestScramCredentials(t *testing.T) {
	s, dir := openTemp(t)
	errs, err := s.AlterScramCredentials([]ScramCredentialChanged{
		scramCred("alice", ScramSHA256, 8192),
		scramCred("alice", ScramSHA512, 4096),
		scramCred("bob", ScramSHA256, 4095),  // too few
		scramCred("bob", ScramSHA256, 16385), // too many
		{User: "carol", Mechanism: ScramSHA256, Delete: true},
		{User: "", Mechanism: ScramSHA256, Iterations: 4096, Salt: []byte{1}, StoredKey: []byte{1}, ServerKey: []byte{1}},
		{User: "dave", Mechanism: 3, Iterations: 4096, Salt: []byte{1}, StoredKey: []byte{1}, ServerKey: []byte{1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, nil, ErrInvalidScram, ErrInvalidScram, ErrUnknownScram, ErrInvalidScram, ErrInvalidScram}
	for i := range want {
		if (want[i] == nil) != (errs[i] == nil) || want[i] != nil && !errors.Is(errs[i], want[i]) {
			t.Errorf("change %d: err %v, want %v", i, errs[i], want[i])
		}
	}
	c, ok := s.ScramCredential("alice", ScramSHA256)
	if !ok || c.Iterations != 8192 || string(c.Salt) != "salt-alice" || string(c.StoredKey) != "stored-alice" || string(c.ServerKey) != "server-alice" {
		t.Fatalf("alice SHA-256 = %+v, %v", c, ok)
	}
	before := s.ScramUsers()
	if len(before["alice"]) != 2 || before["alice"][0].Mechanism != ScramSHA256 {
		t.Fatalf("users = %+v", before)
	}
	s = reopen(t, s, dir)
	if got := s.ScramUsers(); !reflect.DeepEqual(got, before) {
		t.Fatalf("after reopen %+v, want %+v", got, before)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	if got := s.ScramUsers(); !reflect.DeepEqual(got, before) {
		t.Fatalf("after rebuild %+v, want %+v", got, before)
	}
	// Delete then re-add in one change; a second delete is refused.
	errs, err = s.AlterScramCredentials([]ScramCredentialChanged{
		{User: "alice", Mechanism: ScramSHA512, Delete: true},
		{User: "alice", Mechanism: ScramSHA512, Delete: true},
	})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrUnknownScram) {
		t.Fatalf("deletes: %v %v", errs, err)
	}
	if _, ok := s.ScramCredential("alice", ScramSHA512); ok {
		t.Fatal("deleted credential still there")
	}
	s = reopen(t, s, dir)
	if _, ok := s.ScramCredential("alice", ScramSHA512); ok {
		t.Fatal("deleted credential back after reopen")
	}
	if _, ok := s.ScramCredential("alice", ScramSHA256); !ok {
		t.Fatal("alice SHA-256 lost")
	}
}
