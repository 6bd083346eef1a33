package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluicemq/sluice/tools/procs"
)

// ServerDir is the server module's folder of the repository holding the
// working directory: the first folder above it (itself included) with a
// server/cmd/sluice.
func ServerDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, "server", "cmd", "sluice")); err == nil && st.IsDir() {
			return filepath.Join(dir, "server"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no server/cmd/sluice above the working directory: run from the repository")
		}
		dir = parent
	}
}

// Build builds the sluice binary (server/cmd/sluice) with the build tags
// given into the file out. It builds in the server module's folder, so it
// works with or without the go.work at the repository's root, and
// without -race whatever the caller's build: the brokers are the system
// under test, not the harness.
func Build(out string, tags ...string) error {
	server, err := ServerDir()
	if err != nil {
		return err
	}
	args := []string{"build"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "-o", out, "./cmd/sluice")
	cmd := exec.Command("go", args...)
	cmd.Dir = server
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), server, err, b)
	}
	return nil
}

var (
	builtMu sync.Mutex
	built   = map[string]*builtBinary{} // by tags
)

type builtBinary struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// TestBinary builds the sluice binary with tags once per process, into a
// temporary folder that RemoveTestBinaries removes (a TestMain calls it
// after the tests), and returns its path.
func TestBinary(tags ...string) (string, error) {
	key := strings.Join(tags, ",")
	builtMu.Lock()
	b := built[key]
	if b == nil {
		b = &builtBinary{}
		built[key] = b
	}
	builtMu.Unlock()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "sluice-bin-")
		if b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "sluice")
		b.err = Build(b.bin, tags...)
	})
	return b.bin, b.err
}

// RemoveTestBinaries removes what TestBinary built.
func RemoveTestBinaries() {
	builtMu.Lock()
	defer builtMu.Unlock()
	for _, b := range built {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
}

// AfterTests is a test binary's last step (its TestMain, after m.Run):
// it kills every process a test's cleanup did not reap (there should be
// none; it reports their pids as an error) and removes what TestBinary
// built.
func AfterTests() error {
	RemoveTestBinaries()
	if pids := procs.KillLive(KillTimeout); len(pids) > 0 {
		return fmt.Errorf("broker processes left running after the tests (killed now): %v", pids)
	}
	return nil
}
