// Package replica is one partition replica, and the only door into its
// log: the server reaches a partition's segment.Log only through a
// Partition, so replication can turn each operation into a replicated one
// in one place.
//
// A Partition owns the high watermark, the log end offset, the leader
// epoch stamped into each appended record batch, the idempotent
// producers' state and the topic's typed configuration (TopicConfig,
// resolved from the one topic-config table in topicconfig.go).
//
//   - Produce applies Kafka's LogValidator rules (one magic-2 batch, no
//     control or delete-horizon bits from clients, max.message.bytes, keys
//     on compacted topics, recompression to compression.type,
//     LogAppendTime) and appends; it returns a Pending, whose Wait returns
//     once the batch is committed. The append (under the partition's
//     append mutex) never fsyncs: the commit, a group-commit Sync of the
//     log when the flush policy asks for one, runs after the mutex is
//     released, so concurrent appends to one partition share fsyncs.
//     Append is the same path for the broker's own batches (the group
//     coordinator), without the client rules.
//   - Read, ReadBytes, OffsetForTimestamp and MaxTimestamp serve only what
//     is below the high watermark; DeleteRecords is bounded by it;
//     retention and compaction run through the Sweeper and Cleaner the
//     partition registers with at Open and leaves at Close; SetConfig
//     applies a config change to the open partition.
//   - Idempotent producers' state (producers.go) survives what removes
//     batches: a producer snapshot (Kafka's <offset>.snapshot files,
//     snapshot.go, format there) is written at every segment roll and at
//     Close, and Open replays only the batches above the newest one.
//     Producers idle longer than producer.id.expiration.ms are forgotten.
//   - An internal topic's partition (Options.Internal) refuses client
//     Produce and DeleteRecords with ErrInternalTopic.
//
// Today a Partition has a single replica, so a batch is committed once it
// is durable by the log's flush policy: with flush.messages=1 (Sluice's
// default, log.flush.interval.messages=1) the high watermark only ever
// covers fsynced data; with Kafka's page-cache policy it covers written
// data. A flush.messages change applies from the next append.
//
// The interface is the one the raft-replicated partition will fill (see
// DESIGN.md): one etcd raft group per partition whose raft log is the
// segment log, where a Pending completes when its entry commits and the
// high watermark is the last offset of the last committed entry plus one.
package replica
