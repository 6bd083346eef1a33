package meta

import (
	"slices"
	"testing"
)

// A local-mode store's topics (no assignments) are adopted by a node:
// through the log, so a rebuild and a reopen keep them.
func TestAdoptUnassigned(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic("a", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	names, err := s.AdoptUnassigned(3)
	if err != nil || !slices.Equal(names, []string{"a"}) {
		t.Fatalf("adopt: %v %v", names, err)
	}
	if names, err := s.AdoptUnassigned(3); err != nil || names != nil {
		t.Fatalf("adopt again: %v %v", names, err)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tp, ok := s.Topic("a")
	if !ok || len(tp.Assignments) != 2 || !slices.Equal(tp.Assignments[1], []int32{3}) || !slices.Equal(tp.InitialReplicas(0), []int32{3}) {
		t.Fatalf("topic %+v", tp)
	}
}
