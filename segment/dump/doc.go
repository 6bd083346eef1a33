// Package dump is sluice-dump, Sluice's segment inspection tool (Kafka's
// kafka-dump-log.sh): it prints, as text or JSON lines, the record batches
// and records of a partition log's segment files, and verifies them. The
// sluice-dump command (tools/cmd/sluice-dump) and `sluice dump-log` are thin wrappers
// around Main.
//
// # Usage
//
//	sluice-dump [flags] PATH...
//
// or, from a Sluice checkout without installing it,
//
//	go run ./tools/cmd/sluice-dump [flags] PATH...
//
// The one command that changes files is the repair of a damaged log (see
// segment.DamageError), with the broker stopped:
//
//	sluice-dump truncate --at OFFSET [--yes] DIR
//
// cuts the partition folder DIR so that it ends before OFFSET (at the
// batch holding it, or at the first damaged batch before it) and removes
// every later segment (segment.TruncateFolder). Without --yes it prints
// what it would do and changes nothing; it refuses while a broker holds
// the log dir's .lock.
//
// PATH is a partition folder (every .log file in base-offset order, after
// the folder's log.checkpoint when there is one), one segment .log file,
// one .index, .timeindex or .txnindex file (its entries), or one log.checkpoint file
// (any file named segment.CheckpointName). Flags may come before or after
// the paths; -h prints the usage to stdout:
//
//	--records              also print every record
//	--max-value-bytes N    show at most N bytes of each key, value and header
//	                       value (default 64; -1 for no limit)
//	--json                 print JSON lines instead of text
//	--verify               check instead of print (see below); it wins over
//	                       --records, which is ignored, and --json only
//	                       makes its "verified" lines JSON
//	--demo DIR             write a demo partition log into DIR, then dump it
//	                       with --records
//
// Files are only ever read: segment files are opened read-only through
// vfs.FS and read directly, never through segment.Open (which recovers,
// and so may truncate, what it opens). Only --demo writes, and only into a
// folder that does not exist or is empty.
//
// # Text output
//
// One line per batch, with kafka-dump-log's field names and order; the
// timestamp field is named by the batch's timestamp type (CreateTime or
// LogAppendTime) and holds the batch's maxTimestamp; deleteHorizonMs is
// printed only when the batch has the delete-horizon bit (KIP-534):
//
//	baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1700000000002 size: 158 magic: 2 compresscodec: none crc: 2887189166 isvalid: true
//
// With --records, one line per record after its batch. Keys, values and
// header values are printed quoted, Go-style (strconv.Quote: non-printable
// bytes escaped), cut at --max-value-bytes; a null one is printed as the
// bare word null, so an empty value ("") and a null one differ. Control
// records (transaction markers) show the marker instead of key and payload,
// as kafka-dump-log does:
//
//	| offset: 0 CreateTime: 1700000000000 keySize: 6 valueSize: 14 sequence: -1 headerKeys: [content-type] key: "user-1" payload: "{\"name\":\"ada\"}" headers: ["content-type"="application/json"]
//	| offset: 3 CreateTime: 1700000001000 keySize: -1 valueSize: 6 sequence: -1 headerKeys: [] key: null payload: "no key"
//	| offset: 14 CreateTime: 1700000009000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
//
// Raft's own entries (Sluice's internal batches: a new leader's empty
// entry, configuration changes; see package batch) take no offset and are
// never served to clients; the dump shows them as raft entries, with their
// kind, term (partitionLeaderEpoch) and the offset they sit at, and with
// --records their data. When the segment has a .raftindex, its header is
// printed after "Dumping", and every batch line and raft entry ends with
// its raft index (a .raftindex that does not match the .log is a warning:
// the broker rebuilds it):
//
//	Raft index /data/t-0/00000000000000000000.raftindex: first index 1 (the entry before it has term 0), 4 entries
//	raftEntry: empty term: 1 offset: 0 (takes no offset) dataSize: 0 position: 0 size: 80 crc: 1422471925 isvalid: true raftIndex: 1
//	baseOffset: 0 lastOffset: 1 count: 2 ... isvalid: true raftIndex: 2
//
// A .raftindex given as PATH prints its header and one line per entry
// (raft index, position, internal).
//
// # JSON output
//
// One JSON object per line, each with a "type":
//
//   - "checkpoint": file, logStartOffset, recoveryPoint,
//     cleanShutdown (a log.checkpoint; a damaged one is a problem).
//   - "segment": file, baseOffset, size (bytes), before a file's batches.
//   - "batch": file, position, then kafka-dump-log's fields under the same
//     names (baseOffset, lastOffset, count, baseSequence, lastSequence,
//     producerId, producerEpoch, partitionLeaderEpoch, isTransactional,
//     isControl, deleteHorizonMs when set, size, magic, compresscodec, crc,
//     isvalid), with timestampType ("CreateTime" or "LogAppendTime"),
//     baseTimestamp and maxTimestamp in ms.
//   - "record" (with --records): file, batchPosition, offset, timestamp,
//     timestampType, sequence, keySize and valueSize (-1 for null), key,
//     value, headers (a list of {key, value}), and for control records
//     endTxnMarker and coordinatorEpoch. A null key or value is JSON null.
//     Bytes that are valid UTF-8 are a JSON string; other bytes are base64
//     (standard encoding) with a sibling field keyEncoding / valueEncoding
//     (or, in a header, keyEncoding / valueEncoding) set to "base64". A
//     field cut at --max-value-bytes has keyTruncated / valueTruncated set
//     to true; keySize and valueSize are always the full sizes.
//   - "raftEntry": an internal batch: file, position, offset, kind
//     ("empty", "confchange", "confchangev2", "deleterecords": a replicated
//     DeleteRecords, its data a version byte and the new log start
//     offset, int64 big-endian), term, raftIndex (when
//     known), dataSize, size, crc, and with --records data (and
//     dataEncoding "base64" when not UTF-8). "batch" lines carry raftIndex
//     too when known; "checkpoint" lines raftStartOffset, raftPrevIndex
//     and raftPrevTerm.
//   - "offsetIndexEntry" / "timeIndexEntry": file, entry, offset and
//     position or timestamp (when PATH is an index file);
//     "raftIndexEntry": file, entry, raftIndex, position, internal (when
//     PATH is a .raftindex).
//   - "verified" (with --verify): batches, records, segments; or, for an
//     index or checkpoint given as PATH, file, kind ("offsetIndex",
//     "timeIndex" or "checkpoint"), and for an index entries and
//     checkedAgainstLog.
//
// Problems and warnings are never JSON: they are text lines on stderr,
// "sluice-dump: [warning: ]FILE: [position N: ]message".
//
// # Verify
//
// --verify prints nothing but problems, warnings and last lines:
// "verified: N batches, M records, K segments" when it read segments
// (with "(R raft entries)" after the batches when there are any), and
// one line per index or checkpoint given as PATH ("verified: offset index
// FILE: N entries, in order and checked against its .log", or "in order
// only" with a warning when the .log is missing; "verified: checkpoint
// FILE: ...", which alone cannot be checked against the log end offset).
// With --json these are "verified" objects. It stops at the first problem
// with exit status 1 and a message naming the file and byte position. It
// checks:
//
//   - every batch: framing (a torn tail is a problem), CRC and header
//     (batch.ValidateHeader), and its records (batch.Validate; a batch that
//     fails only the producer-form rules but whose records are well formed,
//     as compaction leaves them, is a warning);
//   - offsets: a folder holds at least one segment .log file; within a
//     segment and across a folder's segments, offsets strictly increase:
//     every batch starts after the previous batch (or at or after its
//     segment's base offset), and every segment's base offset is past the
//     previous segment's last batch. Backwards or overlapping offsets are
//     problems; gaps are not, since log compaction (cleanup.policy=compact)
//     removes records and whole batches and keeps the others' offsets. A
//     batch always spans at least one offset (lastOffsetDelta >= 0), even
//     one the cleaner emptied (a producer's last batch).
//   - the offset index: every entry points at the position of a batch whose
//     base offset is the entry's offset (or its last offset, which is what
//     Kafka writes), and no non-zero bytes follow the entries (an entry out
//     of order or garbage);
//   - the time index: every entry's offset lies in a batch of the segment
//     and its timestamp is the largest batch max timestamp up to and
//     including that batch; no non-zero bytes follow the entries;
//   - the checkpoint: its version, format and CRC (a damaged one is a
//     problem, reported with DecodeCheckpoint's reason, although the broker
//     survives it by recovering every segment), and a log start offset and
//     recovery point not past the log end offset (warnings: the broker
//     tolerates both).
//
// Missing index files, index files without a .log file and files pending
// deletion are warnings: the broker rebuilds or removes them.
//
// A plain dump (without --verify) makes the same checks, prints the same
// problems and warnings on stderr as it goes, and exits 1 after a problem;
// it does not stop at one, and it checks record structure only as far as
// --records decodes the records. After a batch whose header is damaged,
// offsets are checked again from the next sound batch, and an index is
// dropped after its first problem, so one fault is reported once.
//
// # Exit status
//
// 0 when every file was read without a problem (warnings allowed), 1 when
// a problem was found (a corrupt or torn batch, an offset overlap, a bad index
// entry or checkpoint, an unreadable file, no segment file where a folder
// was given), 2 for a usage error (on stderr). Without --verify, a problem
// in one file is reported and the dump goes on with the next file (and,
// when the batch framing is intact, as for a CRC mismatch, with the next
// batch). CRCs are printed in decimal everywhere, as kafka-dump-log does.
package dump
