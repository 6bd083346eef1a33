// Package replica is one partition replica: the produce path is
// server -> replica.Partition -> segment.Log.
//
// A Partition owns the high watermark, the log end offset and the leader
// epoch stamped into each appended record batch. Append returns once the
// batch is committed. Today a Partition has a single replica, so a batch
// is committed once it is durable by the log's flush policy: with Sync on
// every acknowledged write (Sluice's default, log.flush.interval.messages=1)
// the high watermark only ever covers fsynced data; with Kafka's page-cache
// policy it covers written data. The policy is the log's flush.messages,
// read at each append, so a config change applies at once. The fsync runs
// after the Partition's append mutex is released (the log's group-commit
// Sync), so concurrent appends to one partition share fsyncs.
//
// The interface is the one the raft-replicated partition will fill (see
// DESIGN.md): one etcd raft group per partition whose raft log is the
// segment log, where Append returns after the entry commits and the high
// watermark is the last offset of the last committed entry plus one.
package replica
