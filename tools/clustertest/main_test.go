package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/tools/procs"
)

var binDir string // the temporary folder of the built binary

// TestMain removes the built binary and makes sure no broker process
// outlives the tests: every process the harness started must have been
// reaped by its test's cleanup; one that was not is killed here and the
// run fails.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := procs.KillLive(5 * time.Second); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "clustertest: processes left running after the tests (killed now): %v\n", left)
		code = 1
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildSluice builds the sluice binary once per test binary (without
// -race: the brokers are the system under test, not this package). It
// builds in the server module's folder, so it works with or without the
// go.work at the root.
var buildSluice = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sluice-clustertest")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = filepath.Join("..", "..", "server")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice in %s: %v\n%s", cmd.Dir, err, out)
	}
	return bin, nil
})

func sluiceBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
