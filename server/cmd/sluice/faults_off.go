//go:build !faults

package main

import "github.com/sluicemq/sluice/server"

// installFaults does nothing: only the faults build (faults_on.go, go
// build -tags faults) injects faults, and this build links none of it.
func installFaults(*server.Options) {}
