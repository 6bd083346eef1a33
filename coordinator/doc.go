// Package coordinator is Sluice's group coordinator: consumer groups (the
// classic protocol of JoinGroup/SyncGroup/Heartbeat/LeaveGroup and the
// KIP-848 consumer protocol of ConsumerGroupHeartbeat) and the offsets they
// commit, kept in the __consumer_offsets topic with Kafka's own record
// schemas.
//
// # Shards
//
// A group lives on one partition of __consumer_offsets: Kafka's rule,
// abs(Java String.hashCode(groupID)) mod the partition count (Partition).
// The coordinator serves the partitions it was given with Load: one shard
// each. Load replays the partition's records (Log.Replay, or
// TxnLog.ReplayBatches when the log has one) into the shard's groups, so a
// restart loses no committed offset or group generation; the
// raft work will call Load when this broker becomes the leader of the
// partition and Unload when it stops being the leader. A request for a group
// whose shard is not loaded gets NOT_COORDINATOR; one whose shard is still
// replaying gets COORDINATOR_LOAD_IN_PROGRESS.
//
// # Records (Kafka's __consumer_offsets schemas, via franz-go's kmsg)
//
//	key version 0, 1: OffsetCommitKey{group, topic, partition}
//	                  -> OffsetCommitValue (written as version 3, or 1 when
//	                     it carries an explicit expire timestamp), or a
//	                     tombstone when the offset is deleted or expires
//	key version 2:    GroupMetadataKey{group}
//	                  -> GroupMetadataValue (version 3) of a classic group
//	                     after each rebalance, or a tombstone when the group
//	                     is deleted
//	key version >= 3: KIP-848 consumer group records (group epoch, members,
//	                  target and current assignments); see
//	                  consumer_records.go
//
// Tools that read __consumer_offsets (kcat, Burrow-style lag checkers)
// decode these records as they decode Kafka's.
//
// # Transactional offset commits (txn_offsets.go)
//
// TxnOffsetCommit (KIP-98, KIP-447) writes OffsetCommitKey/Value records,
// the same formats, as one transactional batch of the request's producer
// (TxnLog.AppendTxn; a shard whose Log is not a TxnLog answers
// UNSUPPORTED_VERSION) and holds them as pending offsets of that producer
// id in the shard, invisible to OffsetFetch (require_stable answers
// UNSTABLE_OFFSET_COMMIT for their partitions). The broker writes the
// transaction marker to the partition and calls CompleteTxn; a replay
// meets it as a control batch. A commit marker makes each pending offset
// the committed one unless the committed one's record is later in the log
// (Kafka's OffsetMetadataManager.replayEndTransactionMarker; the shard
// counts applied offset records in log order, shard.seq, in place of
// record offsets); an abort drops them. An offset tombstone deletes the
// pending offsets of its partition too; OffsetDelete, DeleteGroups and
// TopicDeleted write tombstones for pending partitions; expiry keeps them
// and their group. Unload drops pending offsets; Load replays them.
//
// # Writes and locks
//
// Coordinator.mu guards every shard's groups, members and offsets; it is
// never held across IO. A change that must be durable (an offset commit, a
// group's new generation) is validated under mu, written with the shard's
// writeMu held (so records reach the log in the order they are applied to
// memory), and applied under mu once the write succeeded (Coordinator.write).
// Offset commits on an AsyncLog are pipelined (Coordinator.writePipelined):
// writeMu is held while one is checked and appended, not across its
// commit, and the applies follow the log order; every other write first
// waits until the pipelined ones ahead of it are applied. Lock order: shard.writeMu, then Coordinator.mu; every unlock is
// deferred, so a panic in a handler cannot leave the coordinator locked. A
// timer or write callback that resumes after the lock was released first
// checks that the group kind it captured is still the group's (a classic
// group may have become a KIP-848 group, or been deleted, meanwhile).
// Timers (session timeouts, rebalance delays) come from Config.Clock so
// tests drive time by hand.
package coordinator
