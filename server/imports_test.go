package server_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestForbiddenImports checks the module's import rule, in the manner of
// Pebble's TestForbiddenImports: nothing in the server module, its
// commands (the sluice binary) or their tests depends on the tools module
// (github.com/sluicemq/sluice/tools: the chaos runner, the multi-process
// test harness). Tools test the broker from outside, through its binary;
// the broker must not link them. Operator commands that ship in the
// binary (sluice dump-log, sluice perf) live in segment/ or under
// server/cmd/sluice/internal.
func TestForbiddenImports(t *testing.T) {
	const forbidden = "github.com/sluicemq/sluice/tools"
	deps := goListDeps(t)
	// The list must hold the binary and this package, or the check would
	// pass on an empty answer.
	for _, want := range []string{"github.com/sluicemq/sluice/server", "github.com/sluicemq/sluice/server/cmd/sluice"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps -test ./... does not list %s (%d packages)", want, len(deps))
		}
	}
	for _, p := range deps {
		if p == forbidden || strings.HasPrefix(p, forbidden+"/") {
			t.Errorf("the server module depends on %s (go list -deps -test ./...; go mod why -m %s says through what)", p, forbidden)
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
