package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluicemq/sluice/tools/chaos"
)

// chaosCmd is `sluice chaos`: the fault runner of tools/chaos with this
// binary as every broker of its clusters. Disk and clock faults need a
// binary built with -tags faults; without it the runner skips them.
func chaosCmd(args []string, stdout, stderr io.Writer) int {
	self := func(string) (string, error) {
		if !faultsBuild {
			fmt.Fprintln(stderr, "sluice chaos: this binary was built without -tags faults, so disk and clock faults are skipped (go build -tags faults ./server/cmd/sluice)")
		}
		return os.Executable()
	}
	return chaos.Main("sluice chaos", args, stdout, stderr, self, "this sluice binary")
}
