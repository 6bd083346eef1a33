// Package meta will hold the cluster metadata (topics, topic IDs, partition
// assignments, configs, producer-id blocks) as an ordered log of metadata
// records applied to a state machine kept in Pebble
// (github.com/cockroachdb/pebble/v2). The controller quorum replicates that
// log with raft; brokers that are not voters follow it as raft learners.
//
// The code arrives with the broker work; until then this module only states
// its job.
package meta
