// Package meta holds Sluice's cluster metadata (topics and their IDs,
// partition counts, topic and broker configs, producer-id blocks) as an
// ordered log of metadata records applied to a state machine, both kept in
// one Pebble database (github.com/cockroachdb/pebble/v2).
//
// The log is what a later change replicates with raft: the controller
// quorum is one raft group over this log, and brokers that are not voters
// follow it as raft learners, applying each committed record with
// Store.Append to their own copy. Today a Store is single-node: the typed
// methods (CreateTopic, DeleteTopic, AddPartitions, AlterTopicConfigs,
// AllocateProducerIDs, ...) validate a change, build its record and append
// it locally.
//
// # Applying a record
//
// Append checks the record against the current state (the transition
// function is deterministic and reads only the state and the record), then
// writes, in ONE Pebble batch committed with pebble.Sync, the log entry and
// every state key the record changes. So the stored state always equals the
// result of applying the log prefix, after any crash; Open reads the state
// keys and needs no replay. Rebuild recomputes the state from the log alone
// and rewrites the state keys (a check and a repair). The state is also held
// in memory for reads; memory changes only after the batch carrying the
// same change has committed. Many records may share one batch
// (CreateTopics: one commit for many topics).
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
//	log/<offset>                encoded record; offset is a big-endian uint64, from 0, contiguous
//	topic/name/<name>           16 bytes: the topic's ID
//	topic/id/<16-byte ID>       encoded TopicRecord holding the topic's current state
//	producer/next               version (1 byte) | next free producer id (int64 BE, 8 bytes)
//	config/broker               version (1 byte) | map (broker configs)
//
// The next log offset is not stored: it is the offset after the last log/
// key. The state keys are exactly those under "config/", "producer/" and
// "topic/". A topic's state value is the TopicRecord that would create the
// topic as it is now (name, ID, current partition count, replication
// factor, current configs).
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
//	type 2 PartitionsAdded      topicID (16) | count int32 (the new total)
//	type 3 TopicConfigsChanged  topicID (16) | set map | delete list
//	type 4 TopicRemoved         topicID (16)
//	type 5 ProducerIDBlock      first int64 | size int64 (allocates [first, first+size))
//	type 6 BrokerConfigChanged  set map | delete list
//
//	intN    N/8 bytes, big-endian, two's complement
//	string  uvarint length | bytes
//	map     uvarint count | count × (key string | value string), keys strictly ascending
//	list    uvarint count | count × string, in the caller's order
//
// Version is 1. The encoding is canonical (maps sorted), so every node
// writes the same bytes for the same record. Decoding refuses an unknown
// version or type, lengths past the end, unsorted or duplicate map keys and
// trailing bytes, all as ErrCorrupt. Records carry no checksum of their own:
// Pebble checksums its WAL chunks and sstable blocks, and the replication
// transport will carry its own.
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
// # Concurrency
//
// A Store is safe for concurrent use. writeMu serializes changes and is
// held across the synced commit; mu (an RWMutex) guards the in-memory state
// and the next offset, taken shared by reads and exclusively only to install
// a committed change, so reads do not wait for an fsync. Lock order:
// writeMu, then mu.
//
// Pebble is opened with a small block cache and memtable (1 MiB each by
// default) and only its errors are logged.
package meta
