package replica_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestForbiddenImports checks the module's import rule, in the manner of
// Pebble's TestForbiddenImports: replication is a layer below the broker,
// so nothing in the replica module or its tests depends on the server
// (github.com/sluicemq/sluice/server) or the controller
// (github.com/sluicemq/sluice/controller); they use replica, not the
// other way round.
func TestForbiddenImports(t *testing.T) {
	forbidden := []string{"github.com/sluicemq/sluice/server", "github.com/sluicemq/sluice/controller"}
	deps := goListDeps(t)
	// The list must hold this package, or the check would pass on an
	// empty answer.
	if want := "github.com/sluicemq/sluice/replica"; !slices.Contains(deps, want) {
		t.Fatalf("go list -deps -test ./... does not list %s (%d packages)", want, len(deps))
	}
	for _, p := range deps {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("the replica module depends on %s (go list -deps -test ./... lists it)", p)
			}
		}
	}
}

// goListDeps returns the import paths of every package the module's
// packages and their tests depend on, themselves included.
func goListDeps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// A package recompiled for a test reads "p [q.test]".
		p, _, _ := strings.Cut(line, " ")
		deps = append(deps, p)
	}
	return deps
}
