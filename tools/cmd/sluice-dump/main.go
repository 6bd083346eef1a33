// Command sluice-dump prints and verifies the segment files of a Sluice (or
// Kafka) partition log, like Kafka's kafka-dump-log.sh. See package dump
// for the flags and output formats, or run sluice-dump -h.
package main

import (
	"os"

	"github.com/sluicemq/sluice/segment/dump"
)

func main() {
	os.Exit(dump.Main(os.Args[1:], os.Stdout, os.Stderr))
}
