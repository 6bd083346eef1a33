package server

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestMain starts the builds of the binaries some tests run (the sluice
// binary, plain and with -tags faults, and franz-go's kgo test binary)
// in the background when the whole package runs (no -run, no -short),
// and removes them after the tests. The tests that use them are serial
// and come late in the serial phase, which mostly waits (single-broker
// tests: the package used about half a core there), so the builds, each
// a go command on one core (GOMAXPROCS=1, -p 1) so that the serial tests
// keep the other, are done by the time they are needed. A run with -run
// builds each on first use.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() && flag.Lookup("test.run").Value.String() == "" {
		buildEnv = []string{"GOMAXPROCS=1"}
		buildFlags = []string{"-p", "1"}
		prebuilt.Go(func() {
			// Errors are reported to the tests that wait for them.
			buildSluice()
			buildSluiceFaults()
			buildKgoTest()
		})
	}
	code := m.Run()
	prebuilt.Wait() // done unless a test failed early (-failfast)
	removeBuilt()
	os.Exit(code)
}

// prebuilt is TestMain's background builds.
var prebuilt sync.WaitGroup

// buildEnv and buildFlags are more environment and go command flags of
// the builds (set by TestMain before any starts).
var buildEnv, buildFlags []string

var (
	// buildSluice builds the sluice binary (server/cmd/sluice).
	buildSluice = goBuild("sluice", "build", "./cmd/sluice")
	// buildSluiceFaults builds it with -tags faults: the broker follows
	// the fault-control file named by faultinject.EnvVar.
	buildSluiceFaults = goBuild("sluice-faults", "build", "-tags", "faults", "./cmd/sluice")
	// buildKgoTest builds franz-go's pkg/kgo tests (from the module
	// cache: franz-go is a dependency of this module).
	buildKgoTest = goBuild("kgo.test", "test", "-c", "github.com/twmb/franz-go/pkg/kgo")
)

var (
	builtMu   sync.Mutex
	builtDirs []string // the builds' folders, for removeBuilt
)

// goBuild returns a function that runs `go <verb> -o <dir>/<name>
// <args...>` once per test binary, in a new temporary folder, and
// returns the output's path.
func goBuild(name, verb string, args ...string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "sluice-test-bin-")
		if err != nil {
			return "", err
		}
		builtMu.Lock()
		builtDirs = append(builtDirs, dir)
		builtMu.Unlock()
		bin := filepath.Join(dir, name)
		cmdArgs := append(append([]string{verb, "-o", bin}, buildFlags...), args...)
		cmd := exec.Command("go", cmdArgs...)
		cmd.Env = append(os.Environ(), buildEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go %v: %v\n%s", cmdArgs, err, out)
		}
		return bin, nil
	})
}

// removeBuilt removes what the builds wrote.
func removeBuilt() {
	builtMu.Lock()
	defer builtMu.Unlock()
	for _, d := range builtDirs {
		os.RemoveAll(d)
	}
}
