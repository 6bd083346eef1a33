//go:build faults

package main

// The faults build (go build -tags faults ./cmd/sluice): a test binary
// for fault runners. With SLUICE_FAULTS naming a control file, the
// broker's partition-log FS, metadata FS and wall clock follow it; see
// package server/faultinject for the file's format.

import (
	"context"
	"os"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicemq/sluice/segment/vfs"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/server/faultinject"
)

// installFaults puts the control file's faults into opts (its Logger
// set): FS, MetaFS and Now follow the file for the life of the process.
// With SLUICE_FAULTS unset it changes nothing.
func installFaults(opts *server.Options) {
	path := os.Getenv(faultinject.EnvVar)
	if path == "" {
		opts.Logger.Warn("sluice: faults build, but " + faultinject.EnvVar + " is not set: no faults")
		return
	}
	f := faultinject.Watch(context.Background(), path, opts.Logger)
	opts.FS = f.FS(vfs.Default)
	opts.MetaFS = f.MetaFS(pebblevfs.Default)
	opts.Now = f.Now
}
