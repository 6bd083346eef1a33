// Package replica will hold one partition replica: an etcd raft group
// (go.etcd.io/raft/v3) per partition whose raft log is the partition's
// segment log (see DESIGN.md). The produce
// path is server -> replica partition -> segment log: an append returns after
// commit, and the replica owns the high watermark, the log end offset and the
// leader epoch stamped into each record batch.
//
// The code arrives with the broker work; until then this module only states
// its job.
package replica
