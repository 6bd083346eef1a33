package controller

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// forbiddenImports are the modules the controller must never import: the
// server calls the controller (through a small interface), never the
// other way round, and tools drive whole brokers. (Pebble's
// TestForbiddenImports, over `go list -deps`.)
var forbiddenImports = []string{
	"github.com/sluicemq/sluice/server",
	"github.com/sluicemq/sluice/tools",
}

func TestForbiddenImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for _, args := range [][]string{
		{"list", "-deps", "-f", "{{.ImportPath}}", "./..."},
		{"list", "-deps", "-test", "-f", "{{.ImportPath}}", "./..."},
	} {
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		// The list must hold this package, or the check would pass on an
		// empty answer. (A package recompiled for a test reads
		// "p [q.test]": Fields splits it.)
		pkgs := strings.Fields(string(out))
		if want := "github.com/sluicemq/sluice/controller"; !slices.Contains(pkgs, want) {
			t.Fatalf("go %s does not list %s (%d packages)", strings.Join(args, " "), want, len(pkgs))
		}
		for _, pkg := range pkgs {
			for _, f := range forbiddenImports {
				if pkg == f || strings.HasPrefix(pkg, f+"/") {
					t.Errorf("go %s: the controller module depends on %s (forbidden: %s)", strings.Join(args, " "), pkg, f)
				}
			}
		}
	}
}
