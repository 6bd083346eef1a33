// Package meta holds Sluice's cluster metadata (topics and their IDs,
// partition counts, replica assignments, reassignments and leaders, topic
// and broker configs, cluster-wide and per broker, registered brokers,
// producer-id blocks) as an ordered log of metadata records applied to a
// state machine, both kept in one Pebble database
// (github.com/cockroachdb/pebble/v2).
//
// A Store runs in one of two modes. In local mode (Options.Replicator nil,
// single-node) the typed methods (CreateTopics, DeleteTopic,
// AddPartitions, AlterTopicConfigs, AllocateProducerIDs, RegisterBroker,
// Reassign, DecommissionBroker, AlterNodeConfigs, ...) validate a change,
// build its records and append them to the local log. In replicated mode
// the Store is the state machine of the raft-replicated metadata log (the
// controller quorum): see "Replicated mode" below.
//
// # Applying a record
//
// Append checks the record against the current state (the transition
// function is deterministic and reads only the state and the record), then
// writes, in ONE Pebble batch committed with pebble.Sync, the log entry and
// every state key the record changes. So the stored state always equals the
// result of applying the log prefix, after any crash; Open reads the state
// keys and needs no replay. Rebuild recomputes the state from the log alone
// and rewrites the state keys (a check and a repair; it keeps
// replicated/next, which the local log cannot tell). The state is also
// held in memory for reads; memory changes only after the batch carrying
// the same change has committed. Many records may share one batch
// (CreateTopics: one commit for many topics). A BrokerRegistered's Epoch
// is stamped, before it is validated, with the record's offset (the local
// log offset in local mode, the replicated offset in replicated mode); the
// logged record carries the stamped value, so a replay does not stamp.
//
// # Replicated mode
//
// With Options.Replicator set, the metadata log is a raft-replicated
// partition and every node (controller or not) runs an applier that reads
// each committed entry, in log order, and calls ApplyReplicated(first,
// recs). It skips the records below ReplicatedOffset() (re-delivered after
// a restart), decodes the others (a record that does not decode is
// ErrCorrupt and nothing of the entry applies: the applier stops),
// stamps, validates and applies each one or skips it if it is refused
// (every node refuses the same ones, the transition function being
// deterministic; refusals are logged at debug), and commits the applied
// records (at the next local offsets: the local log is the applied
// records, contiguous) and the new replicated/next in ONE synced batch. So
// after a crash the stored replicated offset and the state agree, and the
// applier resumes from ReplicatedOffset(). An entry past
// ReplicatedOffset() is ErrOutOfOrder.
//
// On the active controller a typed method takes the proposal lock,
// validates against the current state exactly as in local mode (the same
// errors; nothing is proposed if nothing is valid), encodes the valid
// records and calls Replicator.Propose (one entry), which returns once
// the entry is committed, with the offset of its first record; it then
// waits (WaitReplicated) until the applier has applied them and returns
// the outcome of ITS records at apply: a record valid when proposed but
// refused at apply (another entry got in first) returns that validation
// error, and CreateTopics returns the topics as applied. The proposal,
// the wait and the wait for the proposal lock are bounded by
// Options.ProposeTimeout (10 s by default); a timeout leaves the outcome
// unknown. A typed method with nothing to write (CompleteReassignment of
// a reassignment not done yet, requests all refused) proposes nothing and
// returns at once. A node that is not the controller gets
// ErrNotController from Propose, returned unchanged. Random topic IDs and
// producer-id block starts are chosen by the proposer, so they are in the
// record.
//
// # State snapshots
//
// The replicated metadata log is bounded by retention, so a node far
// behind (down for long, or new) cannot replay it: it gets the leader's
// state in the raft snapshot instead (replica.SnapshotState). SaveState
// exports every state key and replicated/next from one Pebble snapshot;
// RestoreState, when the export's replicated offset is ahead of the
// store's (else it is a no-op), replaces in ONE synced batch the state
// keys and replicated/next by the export's, deletes every log/ key (the
// records that led to the state replaced) and writes the snapshot key: the
// export itself and the log base, Offset()+1 (a restore takes one local
// offset, so Offset() moves with every change). Rebuild then starts from
// the restored state and replays the log/ keys from the log base on top,
// so "the state is the result of the log" still holds, counting the
// restored state as the log's first entry; Records below the log base is
// ErrRestored. The applier goes on at the restored ReplicatedOffset():
// entries below it are skipped as after a restart. The export's format,
// integers big-endian:
//
//	magic    uint32  0x534c4d53 ("SLMS")
//	version  uint8   1
//	next     int64   the replicated next offset the state is at
//	count    uint32  then count × (key length uint32 | key | value length uint32 | value),
//	                 keys strictly ascending, each under a state prefix
//	crc      uint32  CRC-32C (Castagnoli) of every byte before it
//
// # Failures and a full disk
//
// A failed commit (or a panic out of Pebble, which treats a failed WAL
// write as fatal) fails the change with ErrStorage and nothing of it is
// applied in memory; the next change closes that Pebble instance, reopens
// the folder and reloads the state from disk, so the store recovers by
// itself once the cause is gone. A space reserve (Options.ReserveBytes,
// file SLUICE-RESERVE, 8 MiB by default) is removed when a write first
// meets ENOSPC, so that write succeeds; changes then fail with ErrStorage
// before they reach Pebble until the reserve can be written again, that
// is, until space returns.
//
// # Key layout
//
// Keys sort bytewise. Offsets and IDs are raw bytes, not text.
//
//	format                      1 byte: format version (1); written when the database is created
//	log/<offset>                encoded record; offset is a big-endian uint64, contiguous, from 0
//	                            or, after a RestoreState, from the snapshot key's log base
//	replicated/next             version (1) | next replicated offset to apply (int64 BE); absent: 0
//	snapshot                    version (1) | log base (uint64 BE) | the SaveState data the last
//	                            RestoreState installed; absent: the store was never restored
//	topic/name/<name>           16 bytes: the topic's ID
//	topic/id/<16-byte ID>       encoded TopicRecord holding the topic's current state
//	topic/leader/<ID><part>     version (1) | leader int32 | leaderEpoch int32 | isr (int32 list);
//	                            part is a big-endian uint32; only for partitions reported
//	topic/move/<ID><part>       version (1) | initial (int32 list) | adding (int32 list)
//	                            | removing (int32 list); part as above; only for partitions
//	                            ever reassigned (Topic.Moves)
//	broker/<node id>            version (1) | flags (1 byte: bit 0 fenced, bit 1 decommissioning,
//	                            the other bits 0) | encoded BrokerRegistered (the current
//	                            registration, Epoch stamped); node id big-endian uint32
//	producer/next               version (1) | next free producer id (int64 BE, 8 bytes)
//	config/broker               version (1) | map (the cluster-wide broker configs); absent when empty
//	config/node/<node id>       version (1) | map (one broker's configs, not empty); node id
//	                            big-endian uint32; absent when the node has none
//
// The next log offset is not stored: it is the offset after the last log/
// key, or the log base when there is none after a restore. The state keys
// are exactly those under "broker/", "config/", "producer/" and "topic/".
// A topic's state value is the TopicRecord that would create the topic as
// it is now (name, ID, current partition count, replication factor,
// current configs, current replica lists); its leaders are under
// topic/leader/ (absent: Leader -1, LeaderEpoch -1, no ISR) and its moves
// under topic/move/, and both go with the topic when it is removed. The
// value versions (1) are separate from the record version. Keys and values
// added since format 1 was first written (replicated/, topic/leader/,
// broker/, later topic/move/ and config/node/) are absent from older
// databases, which read as empty; the broker/ flags byte was 0 or 1 before
// it held the decommissioning bit, which reads the same. The format byte
// stays 1.
//
// # Record encoding
//
// Every record is a version byte, a type byte and the type's fields, in
// order, with no padding:
//
//	+---------+------+----------------------------------+
//	| version | type | fields (by type, below)          |
//	| 1 byte  | 1 B  |                                  |
//	+---------+------+----------------------------------+
//
//	type 1 TopicRecord          id (16) | partitions int32 | replicationFactor int16 | name string | configs map
//	                            | assignments
//	type 2 PartitionsAdded      topicID (16) | count int32 (the new total) | assignments (of the new partitions)
//	type 3 TopicConfigsChanged  topicID (16) | set map | delete list
//	type 4 TopicRemoved         topicID (16)
//	type 5 ProducerIDBlock      first int64 | size int64 (allocates [first, first+size))
//	type 6 BrokerConfigChanged  set map | delete list
//	type 7 BrokerRegistered     nodeID int32 | incarnationID (16) | epoch int64 | rack string
//	                            | uvarint count | count × (name string | host string | port int32)
//	type 8 BrokerFenced         nodeID int32 | epoch int64 | fenced bool
//	type 9 PartitionChanged     topicID (16) | partition int32 | leader int32 | leaderEpoch int32 | isr int32 list
//	type 10 PartitionReassigned topicID (16) | partition int32 | replicas int32 list | adding int32 list
//	                            | removing int32 list
//	type 11 BrokerDecommissioning
//	                            nodeID int32 | decommissioning bool
//	type 12 BrokerUnregistered  nodeID int32
//	type 13 NodeConfigChanged   nodeID int32 | set map | delete list
//	type 14 TopicAdopted        topicID (16) | nodeID int32
//	type 15 ScramCredentialChanged
//	                            user string | mechanism byte (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
//	                            | delete bool | iterations int32 | salt string | storedKey string
//	                            | serverKey string (bytes as strings; all empty for a delete)
//	type 16 ACLChanged          id (16) | delete bool | resourceType byte | patternType byte
//	                            | operation byte | permission byte | resourceName string
//	                            | principal string | host string (Kafka's codes; all zero/empty for a delete)
//	type 17 ClientQuotaChanged  entity map (type -> name, "" the default) | key string
//	                            | value int64 (float64 bits) | remove bool
//
//	intN         N/8 bytes, big-endian, two's complement
//	bool         1 byte, 0 or 1
//	string       uvarint length | bytes
//	map          uvarint count | count × (key string | value string), keys strictly ascending
//	list         uvarint count | count × string, in the caller's order
//	int32 list   uvarint count | count × int32, in order
//	assignments  uvarint count | count × int32 list (one replica list per partition; count 0: none)
//
// Records are written with version 2. Version 1 (what older data
// directories hold) is the same without the assignments fields and has
// only types 1 to 6; it is still decoded (as records without assignments),
// and re-encodes as version 2. Types 10 to 13 were added to version 2
// later: a new type changes no existing encoding, and a decoder that
// predates it refuses it as an unknown type (ErrCorrupt), so every node of
// a cluster must run a version that knows a type before one is proposed.
// The encoding is canonical (maps sorted; empty lists decode as nil), so
// every node writes the same bytes for the same record. Decoding refuses
// an unknown version or type, a type its version does not have, lengths
// past the end, non-minimal uvarints, bool bytes other than 0 and 1,
// unsorted or duplicate map keys and trailing bytes, all as ErrCorrupt.
// Records carry no checksum of their own: Pebble checksums its WAL chunks
// and sstable blocks, and the replication transport will carry its own.
//
// # Rules
//
// Topic names follow Kafka (ValidateTopicName): 1 to 249 characters from
// [a-zA-Z0-9._-], not "." or "..". A name that equals an existing one once
// '.' and '_' are the same character is refused (ErrTopicCollision). Topic
// IDs are random version-4 UUIDs, never all-zero nor Kafka's reserved
// metadata topic ID, and unique among live topics; a deleted and recreated
// topic gets a new ID. Partitions only grow. A config change sets keys,
// then deletes keys; a key may not be in both. Config values are not
// validated here: the server checks them against its config tables first.
// Producer-id blocks are handed out in order from 0, each starting where
// the last ended, so ids are never reused, across restarts included.
//
// Replica assignments, when present, have one list per partition, each of
// ReplicationFactor distinct registered brokers when the partition is
// created (Kafka's INVALID_REPLICA_ASSIGNMENT checks, ValidateAssignment;
// a reassignment may change a partition's replica count); a topic created
// without them ("this node only": a single node's, before it ran as a
// one-voter cluster, until AdoptUnassigned gives it some) grows without them,
// and one created with them grows with them. Place and PlaceMore compute
// Kafka's default placement. A broker registration needs a node id >= 0
// and distinct, named listeners; it replaces an earlier one of the same
// node id, with a new epoch, and starts fenced. A BrokerFenced applies
// only at the broker's current epoch (ErrStaleBrokerEpoch), so a fence of
// an older incarnation does not. A PartitionChanged needs a known topic
// and partition and a leader epoch >= 0 and not below the stored one
// (ErrFencedLeaderEpoch); an equal epoch (an ISR change) applies.
//
// Partition reassignment follows KIP-455 as Kafka's
// ReplicationControlManager keeps it (reassign.go). A PartitionReassigned
// sets a partition's replica list (Topic.Assignments[p]) and the replicas
// being added and removed (Topic.Moves[p], which also keeps the
// partition's initial replicas); it needs a known topic with assignments
// and a known partition, a non-empty replica list without duplicates whose
// replicas not already the partition's are registered and not
// decommissioning, and adding and removing lists that are disjoint subsets
// of it, leaving some replica not removed and some not added
// (ErrInvalidReplicaAssignment). During a reassignment the replica list is
// Kafka's union: the target, in its order, then the replicas being
// removed. Reassign starts, replaces and cancels reassignments;
// CompleteReassignment records the target alone once the partition's
// reported ISR holds the whole target and none of the removing replicas.
//
// A BrokerDecommissioning sets or clears a registered broker's
// decommissioning flag (no replica may move onto it); a re-registration
// keeps it. A BrokerUnregistered (Kafka's UnregisterBroker) removes a
// registered broker and its flag; the partitions keep it as a replica.
// Both refuse a broker not registered (ErrUnknownBroker). A
// NodeConfigChanged changes one node id's dynamic broker configs (Kafka's
// per-broker configs; BrokerConfigChanged holds the cluster default) as
// any config change; the node id must be >= 0 (ErrInvalidBroker) but need
// not be registered, and unregistering keeps its configs.
//
// A ScramCredentialChanged (scram.go; Kafka's UserScramCredentialRecord)
// sets one user's credential for one SCRAM mechanism (iterations in
// [4096, 16384], non-empty salt and keys: else ErrInvalidScram) or
// deletes it (ErrUnknownScram if there is none). The state key
// config/scram/<mechanism byte><user> holds the encoded upsert.
//
// An ACLChanged (acl.go; Kafka's AccessControlEntryRecord and
// RemoveAccessControlEntryRecord) creates one ACL under a new random id
// (ValidateACL, else ErrInvalidACL; an id in use or zero: ErrInvalidACL)
// or removes the ACL with that id (ErrUnknownACL if there is none). The
// state key config/acl/<id> holds the encoded create. The state keeps
// the ACLs as an immutable set indexed by resource (aclSet), which the
// Authorizer (authorizer.go) reads without locks.
// A ClientQuotaChanged (quota.go; Kafka's ClientQuotaRecord) sets one
// quota value of one client quota entity (user, client-id, their
// combination, or ip; an empty name is the default entity) or removes it.
// Entities and keys are checked as Kafka's ClientQuotaControlManager
// (ErrInvalidQuota). The state key config/quota/<entity><key> holds the
// encoded setting.
//
// # Concurrency
//
// A Store is safe for concurrent use. writeMu serializes changes (local
// appends, ApplyReplicated, Rebuild, Close) and is held across the synced
// commit; mu (an RWMutex) guards the in-memory state, the next offsets,
// the apply notification channel and the outcomes collected for a waiting
// proposal, taken shared by reads and exclusively only to install a
// committed change, so reads do not wait for an fsync. In replicated mode
// proposeMu (a one-slot channel, so that waiting for it honours the
// proposal's deadline) serializes the typed methods from validation to
// the apply of their records; it is never held with writeMu, which the
// applier needs while a proposal waits. Lock order: proposeMu, writeMu,
// mu. WaitReplicated waits on a channel that each apply closes and
// replaces (Close closes it too), never polling.
//
// Pebble is opened with a small block cache and memtable (1 MiB each by
// default) and only its errors are logged.
package meta
