package clustertest

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluicemq/sluice/tools/localcluster"
)

// TestMain removes the built binary and makes sure no broker process
// outlives the tests: every process the harness started must have been
// reaped by its test's cleanup; one that was not is killed here and the
// run fails.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := localcluster.AfterTests(); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest:", err)
		code = 1
	}
	os.Exit(code)
}
