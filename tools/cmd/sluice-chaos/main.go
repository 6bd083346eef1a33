// Command sluice-chaos runs Sluice's Jepsen-style fault runner
// (tools/chaos): a local cluster of 3 or 5 broker processes under a
// workload and a schedule of faults drawn from a seed, then a check of
// what the clients saw. Each run writes its folder (node logs,
// history.json, report.txt, report.html) under --out and prints a
// one-line verdict; the exit status is 1 when any run found an anomaly,
// 2 when a run could not be carried out.
//
// From the repository's root:
//
//	go run ./tools/cmd/sluice-chaos --seed 7 --time-limit 2m            # one run, every fault kind
//	go run ./tools/cmd/sluice-chaos --seed 1 --seeds 20 --time-limit 5m # seeds 1..20
//	go run ./tools/cmd/sluice-chaos --soak 4h --faults kill-leader,pause # new seeds until 4 hours passed
//	go run ./tools/cmd/sluice-chaos --workloads txn --seed 3              # transactional producers, read_committed readers
//	go run ./tools/cmd/sluice-chaos --recheck chaos-runs/seed-7/history.json
//
// Without --binary it builds the broker from the repository's server/
// with -tags faults (the test build whose disk and clock can be faulted).
package main

import (
	"os"

	"github.com/sluicemq/sluice/tools/chaos"
)

func main() {
	os.Exit(chaos.Main("sluice-chaos", os.Args[1:], os.Stdout, os.Stderr, chaos.BuildBroker,
		"build server/cmd/sluice with -tags faults into --out"))
}
