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
//     LogAppendTime) and proposes the batch to the partition's raft
//     group; it returns a Pending, whose Wait returns once the batch is
//     committed. The proposal (under the partition's append mutex) never
//     waits for an fsync: the host's worker writes each Ready's entries
//     and syncs the log once for all of them, so concurrent produces to
//     one partition share fsyncs.
//     Append is the same path for the broker's own batches (the group
//     coordinator), without the client rules.
//   - Read, ReadBytes, OffsetForTimestamp and MaxTimestamp serve only what
//     is below the high watermark; DeleteRecords is bounded by it (and
//     replicated through raft);
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
// One path, whatever the cluster's size: every Partition is one replica
// of an etcd raft group (Options.Raft, required) whose raft log is the
// segment log (raft_partition.go; DESIGN.md, "Replication"), and a single
// replica is a group of one voter, whose leader commits what it made
// durable at once. Before that, a Partition could run without raft (a
// batch committed once the log's flush policy made it durable); that
// path was retired once the one-voter group matched its produce
// throughput (bench/README.md, OneVoterProduce). A log written that way
// opens as a raft log as it is (every batch an entry of term 0,
// committed by its lone voter's first term).
//
// The multi-raft Host (raft_host.go) drives every group of a broker with
// a fixed pool of workers, the TCPTransport (raft_tcp.go) carries all
// groups' messages between two brokers on one connection, and the
// StateStore (raft_state.go) keeps each group's HardState, ConfState and
// applied index. Produce goes to the leader only; a Pending completes
// when its entry commits (acks=all) or after the leader's durable append
// (acks=1); the high watermark is the Kafka offset after the last
// committed entry; raft's own entries, and DeleteRecords (a raft entry
// every replica applies in log order, raft_deleterecords.go), are
// internal batches that take no offset and are never served. The leader
// serves reads only on a read lease (raft_lease.go: a ReadIndex round a
// quorum acknowledged less than L ago, L under the time another replica
// could be elected; the raft thesis §6.4, etcd raft's ReadIndex; a
// one-voter group's leader always holds one): CheckReadLease and
// AwaitReadLease. The transport listens itself (ListenTCP) or serves
// connections a broker's shared listener hands it (NewTCPTransport,
// ServeConn).
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
