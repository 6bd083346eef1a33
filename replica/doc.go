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
//     is below the high watermark; DeleteRecords is bounded by it (and
//     replicated through raft on a raft partition);
//     retention and compaction run through the Sweeper and Cleaner the
//     partition registers with at Open and leaves at Close; SetConfig
//     applies a config change to the open partition.
//   - Idempotent producers' state (producers.go) survives what removes
//     batches: a producer snapshot (Kafka's <offset>.snapshot files,
//     snapshot.go, format there) is written at every segment roll and at
//     Close, and Open replays only the batches above the newest one.
//     Producers idle longer than producer.id.expiration.ms are forgotten.
//   - Transactions (txn.go, KIP-98): a transactional batch begins its
//     producer's transaction, WriteTxnMarker writes a marker (a control
//     batch taking one offset) that ends it on every replica;
//     LastStableOffset is the first offset of the oldest undecided
//     transaction, else the high watermark; FetchCommitted reads up to it
//     and lists the aborted transactions of what it returns.
//   - An internal topic's partition (Options.Internal) refuses client
//     Produce and DeleteRecords with ErrInternalTopic.
//
// A Partition opened without Options.Raft is a single replica: a batch is
// committed once it is durable by the log's flush policy (with
// flush.messages=1, Sluice's default, the high watermark only ever covers
// fsynced data; with Kafka's page-cache policy it covers written data).
//
// Opened with Options.Raft it is one replica of an etcd raft group whose
// raft log is the segment log (raft_partition.go; DESIGN.md,
// "Replication"): the multi-raft Host (raft_host.go) drives every group of
// a broker with a fixed pool of workers, the TCPTransport (raft_tcp.go)
// carries all groups' messages between two brokers on one connection, and
// the StateStore (raft_state.go) keeps each group's HardState, ConfState
// and applied index. Produce goes to the leader only; a Pending completes
// when its entry commits (acks=all) or after the leader's durable append
// (acks=1); the high watermark is the Kafka offset after the last
// committed entry; raft's own entries, and DeleteRecords (a raft entry
// every replica applies in log order, raft_deleterecords.go), are
// internal batches that take no offset and are never served. A
// replicated leader serves reads only on a read lease (raft_lease.go: a
// ReadIndex round a quorum acknowledged less than L ago, L under the
// time another replica could be elected; the raft thesis §6.4, etcd
// raft's ReadIndex): CheckReadLease and AwaitReadLease. The
// transport listens itself (ListenTCP) or serves connections a broker's
// shared listener hands it (NewTCPTransport, ServeConn).
//
// Membership (raft_membership.go): the leader changes the group's
// replicas one single ConfChangeV2 at a time (AddLearner, PromoteLearner,
// RemoveReplica; TransferLeadership first when the leader goes), each
// returning once proposed, refused with ErrConfChangePending while an
// earlier one is not applied; Membership reports the configuration a
// replica applied. A joining replica opens with the group's initial
// voters and itself as a learner, and replays the log or takes a
// snapshot (GroupState.ConfIndex keeps it from applying twice the
// changes a snapshot's ConfState holds). A Throttle (raft_throttle.go,
// HostConfig.Throttle) paces the appends and snapshots of the replicas
// the broker lists as throttled (KIP-73's replication quotas), never
// the traffic to in-sync replicas.
package replica
