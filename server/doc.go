// Package server will hold the thin Kafka-protocol server (one file per API,
// encoded and decoded with franz-go's pkg/kmsg) and, in cmd/sluice, the
// sluice binary.
//
// The code arrives with the broker work; until then this module only states
// its job.
package server
