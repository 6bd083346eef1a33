// Package batch reads, checks and builds Kafka record batches of message
// format v2 (magic 2), the unit Sluice stores in its log segments and sends
// on the wire unchanged.
//
// The format is Kafka's, not ours: the layout below follows Kafka's
// DefaultRecordBatch and DefaultRecord (KIP-98 introduced it in 0.11;
// KIP-110 added zstd, KIP-534 the delete-horizon bit) and was checked
// field by field against franz-go's kmsg.RecordBatch and kmsg.Record.
//
// # Batch header
//
// Every integer is big-endian (network order). Offsets are bytes from the
// start of the batch; the header is HeaderSize (61) bytes.
//
//	offset size field                 notes
//	------ ---- --------------------- ------------------------------------------
//	     0    8 baseOffset    int64   first offset of the batch (assigned by the leader)
//	     8    4 batchLength   int32   bytes that follow this field: total size = batchLength + 12
//	    12    4 partitionLeaderEpoch  int32, -1 from producers; set by the leader
//	    16    1 magic         int8    format version byte, always 2 here
//	    17    4 crc           uint32  CRC-32C (Castagnoli) of bytes [21, end of batch)
//	    21    2 attributes    int16   see below
//	    23    4 lastOffsetDelta int32 offset of the last record minus baseOffset
//	    27    8 baseTimestamp int64   ms since the Unix epoch, of the first record
//	    35    8 maxTimestamp  int64   ms; largest record timestamp, or the LogAppendTime
//	    43    8 producerId    int64   -1 when not idempotent
//	    51    2 producerEpoch int16   -1 when not idempotent
//	    53    4 baseSequence  int32   -1 when not idempotent
//	    57    4 recordCount   int32   number of records that follow
//	    61    - records               recordCount records, or one compressed block of them
//
//	  |<------------- not covered by the CRC -------------->|<-- covered by the CRC ... -->|
//	  +-----------+--------+-------------+-------+-----------+------------+----------- ... --+
//	  | baseOffset| length | leaderEpoch | magic |    crc    | attributes | ... records      |
//	  |     8     |   4    |      4      |   1   |     4     |     2      |                  |
//	  +-----------+--------+-------------+-------+-----------+------------+----------- ... --+
//
// The CRC covers everything from attributes to the end of the batch, so a
// broker may rewrite baseOffset and partitionLeaderEpoch (SetBaseOffset,
// SetPartitionLeaderEpoch) without recomputing it. Changing maxTimestamp or
// attributes (SetLogAppendTime) requires a new CRC.
//
// Attribute bits (Kafka DefaultRecordBatch; bit 4 and 5 from KIP-98):
//
//	bits 0-2 compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
//	bit  3   timestamp type: 0 CreateTime (producer), 1 LogAppendTime (broker)
//	bit  4   transactional
//	bit  5   control batch (transaction markers; never shown to applications)
//	bit  6   delete horizon: baseTimestamp holds the compaction delete horizon (KIP-534)
//	bit  7   Sluice internal batch (InternalBit; unused by Kafka), always with bit 5
//	bits 8-15 unused, zero
//
// # Internal batches
//
// Sluice stores raft's own log entries (a new leader's empty entry,
// configuration changes) as internal batches in the partition log: they
// are raft entries but take no Kafka offset, and no read path hands one to
// a client. An internal batch has attributes ControlBit|InternalBit (0xa0),
// baseOffset = the next Kafka offset, lastOffsetDelta -1 (so LastOffset()
// is baseOffset-1 and NextOffset() is baseOffset: zero offsets taken),
// partitionLeaderEpoch = the raft term, both timestamps -1, producer
// fields -1, no compression, recordCount 1 and one record shaped like a
// Kafka control record:
//
//	attributes 0, timestampDelta 0, offsetDelta 0
//	key   12 bytes: version int16 (InternalKeyVersion, 0), entry kind int16 (0-255),
//	      term int64 (equal to partitionLeaderEpoch: the CRC covers this copy)
//	value the raft entry's data (empty for an empty entry)
//	headerCount 0
//
// BuildInternal makes one, ParseInternal reads it, Header.Internal tests
// the bits. Validate refuses bit 7 (a producer's batch never carries it);
// ValidateHeader accepts internal batches of exactly this shape.
//
// When the codec is not none, the bytes after recordCount are the records
// compressed as one block: gzip (RFC 1952), snappy (either one raw snappy
// block or the xerial framing that the Java client writes: an 8-byte magic
// 0x82 'SNAPPY' 0x00, two int32 versions, then blocks each preceded by a
// big-endian int32 length), lz4 (the LZ4 frame format) or zstd (RFC 8878).
// recordCount always counts the records, compressed or not.
//
// # Record
//
// Inside the records section each record is, with varint meaning the zigzag
// variable-length encoding of an int32 (at most 5 bytes) and varlong that of
// an int64 (at most 10 bytes), as in protobuf's sint32/sint64:
//
//	length          varint  bytes of the record after this field
//	attributes      int8    unused, zero
//	timestampDelta  varlong ms, record timestamp minus baseTimestamp
//	offsetDelta     varint  record offset minus baseOffset
//	keyLength       varint  -1 for a null key
//	key             keyLength bytes
//	valueLength     varint  -1 for a null value
//	value           valueLength bytes
//	headerCount     varint
//	headers         headerCount times:
//	  headerKeyLength   varint (never negative: header keys are not nullable)
//	  headerKey         UTF-8 bytes
//	  headerValueLength varint, -1 for a null value
//	  headerValue       bytes
//
// A record's timestamp is baseTimestamp + timestampDelta, except in a
// LogAppendTime batch, where every record's timestamp is the batch's
// maxTimestamp (Kafka's DefaultRecord).
//
// # Checks
//
// ValidateHeader checks what every stored batch must satisfy: its size,
// magic, length, CRC and codec. Validate adds what a producer's batch must
// satisfy (Kafka's LogValidator): offset deltas 0, 1, 2, ... with
// lastOffsetDelta == recordCount-1, and every record well formed and
// filling its length exactly. Every corruption error wraps ErrCorrupt.
package batch
