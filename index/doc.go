// Package index implements the two sparse indexes that sit beside one log
// segment, in Kafka's on-disk layout: the offset index (.index), which maps
// offsets to byte positions in the segment's .log file, and the time index
// (.timeindex), which maps timestamps to offsets. txn.go holds the third,
// the transaction index (.txnindex, Kafka's TransactionIndex), and its format.
//
// # Offset index (.index)
//
// A sequence of 8-byte entries, big-endian, no header:
//
//	 0               4               8
//	+---------------+---------------+
//	| relative      | position      |
//	| offset uint32 | uint32        |
//	+---------------+---------------+
//
// Fields:
//
//   - relative offset: the entry's offset minus the segment's base offset.
//   - position: byte position, in the segment's .log file, of the record batch
//     that holds that offset.
//
// Entries are sorted and strictly increasing in both relative offset and
// position. No entry has position 0: as in Kafka, the first batch of a
// segment (at position 0) is never indexed, so an all-zero entry ends the
// index.
//
// # Time index (.timeindex)
//
// A sequence of 12-byte entries, big-endian, no header:
//
//	 0                               8               12
//	+-------------------------------+---------------+
//	| timestamp int64               | relative      |
//	| (ms since the Unix epoch)     | offset uint32 |
//	+-------------------------------+---------------+
//
// Fields:
//
//   - timestamp: the largest record timestamp seen so far in the segment, in
//     milliseconds.
//   - relative offset: the offset, minus the segment's base offset, that the
//     segment recorded with that timestamp (in Kafka, an offset in the batch
//     holding the record with that timestamp).
//
// Entries are sorted, strictly increasing in timestamp and non-decreasing in
// offset. An index with no entries reads as the entry {-1, baseOffset}
// (Kafka's "no timestamp"), so every stored timestamp is >= 0.
//
// Edge case: an all-zero entry ends the time index too, as it does the
// offset index: it is what the preallocated tail looks like. Only the first
// entry can be all zero and still be monotonic (timestamp 0 at the base
// offset); on open it is kept when a valid entry follows it, so a time index
// whose only entry is {0, baseOffset} reads as empty after a reopen. That is
// harmless: lookups start at the base offset either way, and Last() reads
// {-1, baseOffset} instead of {0, baseOffset}.
//
// # File life cycle
//
// Neither file has a header, version byte or checksum: the layout is Kafka's,
// and an index can always be rebuilt from its log, which is checksummed.
// Relative offsets and positions are read and written as uint32; Kafka reads
// them as int32 and rolls segments before they pass math.MaxInt32.
//
// While its segment is active an index file is preallocated: truncated up to
// its maximum size (the broker's segment.index.bytes, default
// DefaultMaxBytes = 10 MiB, rounded down to a whole number of entries) and
// filled from the front. When the segment is rolled or closed the file is
// trimmed to exactly the entries' size (Trim).
//
// On open, entries are read from the front until the first entry that breaks
// the ordering above: the preallocated zero tail, a torn write, or garbage.
// That entry and everything after it are dropped (and, for a writable index,
// removed from the file). The segment's recovery rebuilds missing entries
// from the log.
//
// # In memory
//
// An index keeps all its entries in memory, encoded exactly as on disk, so
// Lookup is a binary search with no I/O and no allocation. Append only
// touches memory; Flush writes every entry not yet written with one WriteAt,
// and, after a truncation, zeroes the dropped entries that were already on
// file with one more, so a reopen cannot bring them back. An index is not
// safe for concurrent use: its segment serializes access.
package index

// Format constants. These are part of the on-disk format: changing one
// makes existing files unreadable.
const (
	// OffsetEntrySize is the size in bytes of one offset index entry:
	// relative offset (uint32) + position (uint32).
	OffsetEntrySize = 8
	// TimeEntrySize is the size in bytes of one time index entry:
	// timestamp (int64) + relative offset (uint32).
	TimeEntrySize = 12
)

// DefaultMaxBytes is Kafka's default segment.index.bytes: the maximum size in
// bytes of one index file (10 MiB). It is a default, not part of the format.
const DefaultMaxBytes = 10 << 20
