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

// TestMain starts the build of franz-go's kgo test binary
// (TestFranzGoTxnEtl's) in the background when the whole package runs
// (no -run, no -short), and removes what the builds wrote after the
// tests. TestFranzGoTxnEtl is serial and comes last in the serial phase,
// which mostly waits (single-broker tests: the package used about half a
// core there), so the build (kgo's package with its tests, about 20 s of
// CPU on a cold build cache) is done by then, on one core (GOMAXPROCS=1,
// -p 1) so that the serial tests keep the other; it ends well before
// TestMetadataAutoCreateMany (about 45 s in), serial because its CPU
// work can outlast a client's timeout. The sluice binaries are built
// when first needed: TestBinaryFaultsBuild needs both a few seconds into
// the serial phase, so a background start would hide little of them.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() && flag.Lookup("test.run").Value.String() == "" {
		prebuilt.Go(func() {
			buildKgoTest() // an error is reported to the test that waits for it
		})
	}
	code := m.Run()
	prebuilt.Wait() // done unless a test failed early (-failfast)
	removeBuilt()
	os.Exit(code)
}

// prebuilt is TestMain's background build.
var prebuilt sync.WaitGroup

var (
	// buildSluice builds the sluice binary (server/cmd/sluice).
	buildSluice = goBuild("sluice", false, "build", "./cmd/sluice")
	// buildSluiceFaults builds it with -tags faults: the broker follows
	// the fault-control file named by faultinject.EnvVar.
	buildSluiceFaults = goBuild("sluice-faults", false, "build", "-tags", "faults", "./cmd/sluice")
	// buildKgoTest builds franz-go's pkg/kgo tests (from the module
	// cache: franz-go is a dependency of this module), on one core.
	buildKgoTest = goBuild("kgo.test", true, "test", "-c", "github.com/twmb/franz-go/pkg/kgo")
)

var (
	builtMu   sync.Mutex
	builtDirs []string // the builds' folders, for removeBuilt
)

// goBuild returns a function that runs `go <verb> -o <dir>/<name>
// <args...>` once per test binary, in a new temporary folder, and
// returns the output's path; oneCore runs the go command and what it
// starts with GOMAXPROCS=1 and -p 1.
func goBuild(name string, oneCore bool, verb string, args ...string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "sluice-test-bin-")
		if err != nil {
			return "", err
		}
		builtMu.Lock()
		builtDirs = append(builtDirs, dir)
		builtMu.Unlock()
		bin := filepath.Join(dir, name)
		cmdArgs := []string{verb, "-o", bin}
		if oneCore {
			cmdArgs = append(cmdArgs, "-p", "1")
		}
		cmdArgs = append(cmdArgs, args...)
		cmd := exec.Command("go", cmdArgs...)
		if oneCore {
			cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		}
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
